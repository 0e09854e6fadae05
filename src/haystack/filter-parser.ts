/**
 * Recursive-descent parser for Haystack filters (docs/spec/wire-notes.md §4), on the shared tokenizer so a
 * literal reads the same as in Zinc.
 *
 * Grammar (keywords are case-sensitive; whitespace, including newlines, separates tokens):
 *
 *   <filter>   := <condOr>
 *   <condOr>   := <condAnd> ("or" <condAnd>)*
 *   <condAnd>  := <term> ("and" <term>)*
 *   <term>     := <parens> | <has> | <missing> | <cmp> | <match>
 *   <parens>   := "(" <filter> ")"
 *   <has>      := <path>
 *   <missing>  := "not" <path>
 *   <cmp>      := <path> <cmpOp> <val>
 *   <match>    := <path> "=~" "/" <regex> "/"      regex (RE2 subset of JavaScript, docs/filters.md), no flags; `\/` for a slash
 *   <cmpOp>    := "==" | "!=" | "<" | "<=" | ">" | ">="
 *   <path>     := <name> ("->" <name>)*
 *   <name>     := <alphaLo> (<alpha> | <digit> | "_")*   not one of: and or not true false
 *   <val>      := <bool> | <str> | <number> | <ref> | <uri> | <date> | <time> | <dateTime>
 *   <bool>     := "true" | "false"
 *   <number>   := Zinc number with optional unit (`72.5°F`, `-3`, `1e3kW`); also INF, -INF, NaN
 *   <str> <ref> <uri> <date> <time> <dateTime> := as in Zinc (`"a\"b"`, `@id`, `` `http://x` ``,
 *                 `2024-03-10`, `09:30` / `09:30:00.5`, `2024-03-10T03:00:00-04:00 New_York`)
 *
 * `and` binds tighter than `or`. Errors are HayloftError BAD_FILTER with the 1-based column of
 * the offending token: `filter: expected a value (found ")") at column 12`.
 */
import { charsOf, limitError } from './limits.js';
import { ErrorCodes, HayloftError } from '../lib/errors.js';
import { type Token, Tokenizer } from './tokenizer.js';
import { HNumber, isTagName } from './values.js';
import {
  CMP_OPS,
  type CmpOp,
  type FilterNode,
  type FilterPath,
  type FilterValue,
  FILTER_KEYWORDS,
  andNode,
  cmpNode,
  hasNode,
  isFilterValue,
  matchNode,
  missingNode,
  orNode,
} from './filter-ast.js';

/**
 * Deepest parenthesis nesting accepted. Filters arrive from the network; without a bound a run
 * of `(` would overflow the stack (a 500) instead of being a bad request.
 */
export const MAX_FILTER_DEPTH = 64;

function describe(t: Token): string {
  switch (t.type) {
    case 'eof':
      return 'the end of the filter';
    default:
      return JSON.stringify(t.text);
  }
}

class FilterParser {
  private readonly tz: Tokenizer;
  private depth = 0;

  constructor(text: string) {
    this.tz = new Tokenizer(text, { kind: 'filter' });
  }

  private fail(expected: string, t: Token): HayloftError {
    return this.tz.error(`expected ${expected} (found ${describe(t)})`, t);
  }

  private isWord(t: Token, word: string): boolean {
    return t.type === 'id' && t.text === word;
  }

  parse(): FilterNode {
    const first = this.tz.peek();
    if (first.type === 'eof') throw this.tz.error('the filter is empty', first);
    const node = this.condOr();
    const t = this.tz.peek();
    if (t.type !== 'eof') throw this.fail('"and", "or" or the end of the filter', t);
    return node;
  }

  private condOr(): FilterNode {
    const nodes = [this.condAnd()];
    while (this.isWord(this.tz.peek(), 'or')) {
      this.tz.next();
      nodes.push(this.condAnd());
    }
    return nodes.length === 1 ? (nodes[0] as FilterNode) : orNode(...nodes);
  }

  private condAnd(): FilterNode {
    const nodes = [this.term()];
    while (this.isWord(this.tz.peek(), 'and')) {
      this.tz.next();
      nodes.push(this.term());
    }
    return nodes.length === 1 ? (nodes[0] as FilterNode) : andNode(...nodes);
  }

  private term(): FilterNode {
    const t = this.tz.peek();
    if (t.type === 'sym' && t.text === '(') {
      this.tz.next();
      if (++this.depth > MAX_FILTER_DEPTH) throw this.tz.error(`parentheses nested deeper than ${MAX_FILTER_DEPTH}`, t);
      const inner = this.condOr();
      const close = this.tz.peek();
      if (close.type !== 'sym' || close.text !== ')') throw this.fail('"and", "or" or ")"', close);
      this.tz.next();
      this.depth--;
      return inner;
    }
    if (this.isWord(t, 'not')) {
      this.tz.next();
      return missingNode(this.path());
    }
    if (t.type !== 'id' || !isTagName(t.text) || FILTER_KEYWORDS.has(t.text)) throw this.fail('a tag name, "not" or "("', t);
    const path = this.path();
    const opTok = this.tz.peek();
    if (opTok.type !== 'sym') return hasNode(path);
    if (opTok.text === '=~') {
      this.tz.next();
      const re = this.tz.next();
      if (re.type !== 'regex') throw this.fail('a /regex/ after "=~"', re);
      return matchNode(path, re.text, re.col);
    }
    if ((CMP_OPS as readonly string[]).includes(opTok.text)) {
      this.tz.next();
      return cmpNode(path, opTok.text as CmpOp, this.value());
    }
    // Any other symbol (`)` included) is for the caller to accept or reject.
    return hasNode(path);
  }

  private path(): FilterPath {
    const names: string[] = [this.name()];
    while (true) {
      const t = this.tz.peek();
      if (t.type !== 'sym' || t.text !== '->') break;
      this.tz.next();
      names.push(this.name());
    }
    return names as unknown as FilterPath;
  }

  private name(): string {
    const t = this.tz.next();
    if (t.type !== 'id' || !isTagName(t.text) || FILTER_KEYWORDS.has(t.text)) throw this.fail('a tag name', t);
    return t.text;
  }

  private value(): FilterValue {
    const t = this.tz.next();
    if (t.type === 'id') {
      switch (t.text) {
        case 'true':
          return true;
        case 'false':
          return false;
        case 'INF':
          return new HNumber(Infinity);
        case 'NaN':
          return new HNumber(NaN);
      }
    } else if (t.type === 'val' && isFilterValue(t.val)) {
      return t.val;
    }
    throw this.fail('a value', t);
  }
}

/**
 * Characters of a filter (docs/filters.md). Real filters are a few dozen; this bounds the work one request can ask
 * for (each regex compiled, each term run over every entity) and the size of its error message.
 */
export const MAX_FILTER_CHARS = 4096;

/**
 * Parses filter text into an AST; throws HayloftError BAD_FILTER saying what and where, HL_LIMIT
 * for a text over MAX_FILTER_CHARS.
 */
export function parseFilter(text: string): FilterNode {
  if (typeof text !== 'string') throw new HayloftError(ErrorCodes.BAD_FILTER, 'filter: expected filter text');
  if (text.length > MAX_FILTER_CHARS) throw limitError('filter', charsOf(text), MAX_FILTER_CHARS, 'maxFilterChars');
  return new FilterParser(text).parse();
}
