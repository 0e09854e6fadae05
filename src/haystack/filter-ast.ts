/**
 * Haystack filter AST, its constructors, structural equality and the canonical printer.
 *
 * The AST keeps the shape the text had: `a and b and c` is one `and` node with three operands,
 * `(a and b) and c` is an `and` inside an `and`. Printing then parenthesises exactly the nested
 * `and`/`or` nodes that need it, so `parseFilter(filterToString(ast))` equals `ast` for every AST
 * (not only for the ones the parser built), which is what makes the printed form canonical.
 *
 * Nodes are plain frozen objects so they can be compared, logged and cached by identity; the
 * `match` node carries its compiled regex so the pattern is compiled once, at parse time.
 */
import { ErrorCodes, HayloftError } from '../lib/errors.js';
import { QUOTE_MAX_CHARS, quoteInput } from '../lib/quote.js';
import { type FilterRegex, compileFilterRegex } from './regex.js';
import { HDate, HDateTime, HNumber, HRef, HTime, HUri, equals, isTagName } from './values.js';
import { zincVal } from './zinc.js';

/** `a->b->c`: a tag name, then names of tags on the entities the previous tag's Ref points to. */
export type FilterPath = readonly [string, ...string[]];

export type CmpOp = '==' | '!=' | '<' | '<=' | '>' | '>=';
export const CMP_OPS: readonly CmpOp[] = ['==', '!=', '<', '<=', '>', '>='];

/** The literal kinds a filter can compare against (Haystack filter `<val>`). */
export type FilterValue = boolean | string | HNumber | HRef | HUri | HDate | HTime | HDateTime;

export interface HasNode {
  readonly kind: 'has';
  readonly path: FilterPath;
}
export interface MissingNode {
  readonly kind: 'missing';
  readonly path: FilterPath;
}
export interface CmpNode {
  readonly kind: 'cmp';
  readonly path: FilterPath;
  readonly op: CmpOp;
  readonly val: FilterValue;
}
export interface MatchNode {
  readonly kind: 'match';
  readonly path: FilterPath;
  /** The pattern in canonical form (see `matchNode`); what equality and printing use. */
  readonly pattern: string;
  /** Compiled once from `pattern` (linear-time RE2, no flags, no state between entities). */
  readonly regex: FilterRegex;
}
export interface AndNode {
  readonly kind: 'and';
  readonly operands: readonly [FilterNode, FilterNode, ...FilterNode[]];
}
export interface OrNode {
  readonly kind: 'or';
  readonly operands: readonly [FilterNode, FilterNode, ...FilterNode[]];
}

export type FilterNode = HasNode | MissingNode | CmpNode | MatchNode | AndNode | OrNode;

function badFilter(message: string): HayloftError {
  return new HayloftError(ErrorCodes.BAD_FILTER, `filter: ${message}`);
}

/** Words the grammar gives a meaning; as tag names they would make the text ambiguous. */
export const FILTER_KEYWORDS: ReadonlySet<string> = new Set(['and', 'or', 'not', 'true', 'false']);

/** A path from `a->b` text or from names; every name must be a tag name and not a keyword. */
export function filterPath(path: string | readonly string[]): FilterPath {
  const names = typeof path === 'string' ? path.split('->') : [...path];
  if (names.length === 0) throw badFilter('a path needs at least one tag name');
  for (const n of names) {
    if (!isTagName(n) || FILTER_KEYWORDS.has(n)) throw badFilter(`"${n}" is not a tag name usable in a filter path`);
  }
  return Object.freeze(names) as unknown as FilterPath;
}

export function hasNode(path: string | readonly string[]): HasNode {
  return Object.freeze({ kind: 'has', path: filterPath(path) });
}

export function missingNode(path: string | readonly string[]): MissingNode {
  return Object.freeze({ kind: 'missing', path: filterPath(path) });
}

/** True for the values a filter literal can hold (and print back in a form that re-parses). */
export function isFilterValue(v: unknown): v is FilterValue {
  if (typeof v === 'boolean' || typeof v === 'string') return true;
  if (v instanceof HNumber) return Number.isFinite(v.val) || v.unit === null;
  return v instanceof HRef || v instanceof HUri || v instanceof HDate || v instanceof HTime || v instanceof HDateTime;
}

export function cmpNode(path: string | readonly string[], op: CmpOp, val: FilterValue): CmpNode {
  if (!CMP_OPS.includes(op)) throw badFilter(`"${String(op)}" is not a comparison operator`);
  // INF/NaN with a unit has no text form the tokenizer reads back, so it cannot be a literal.
  if (!isFilterValue(val)) throw badFilter(`${String(val)} cannot be compared in a filter`);
  return Object.freeze({ kind: 'cmp', path: filterPath(path), op, val });
}

/**
 * The pattern as the tokenizer would return it after printing: `\/` becomes `/` (the same regex
 * without the `u` flag, and the only form the tokenizer ever yields), raw line breaks become
 * `\n`/`\r` escapes (a regex token cannot span lines). Other escapes are kept verbatim.
 */
export function canonicalPattern(pattern: string): string {
  let out = '';
  for (let i = 0; i < pattern.length; i++) {
    const ch = pattern[i] as string;
    if (ch === '\\' && i + 1 < pattern.length) {
      const next = pattern[i + 1] as string;
      out += next === '/' ? '/' : ch + next;
      i++;
    } else if (ch === '\n') out += '\\n';
    else if (ch === '\r') out += '\\r';
    else out += ch;
  }
  return out;
}

/**
 * A regex match node. Throws BAD_FILTER when the pattern is not a valid regex or uses a feature
 * the linear-time engine refuses (src/haystack/regex.ts);
 * `at` names the regex's column in the filter text so the message points at it.
 */
export function matchNode(path: string | readonly string[], pattern: string, at?: number): MatchNode {
  const p = filterPath(path);
  const canonical = canonicalPattern(pattern);
  let regex: FilterRegex;
  try {
    regex = compileFilterRegex(canonical);
  } catch (e) {
    const why = e instanceof Error ? e.message : String(e);
    const where = at === undefined ? '' : ` at column ${at}`;
    const shown = canonical.length > QUOTE_MAX_CHARS ? quoteInput(printPattern(canonical)) : `/${printPattern(canonical)}/`;
    throw new HayloftError(ErrorCodes.BAD_FILTER, `filter: invalid regex ${shown} (${why})${where}`, { cause: e });
  }
  return Object.freeze({ kind: 'match', path: p, pattern: canonical, regex });
}

function operands(kind: string, nodes: readonly FilterNode[]): readonly [FilterNode, FilterNode, ...FilterNode[]] {
  if (nodes.length < 2) throw badFilter(`"${kind}" needs at least two operands`);
  return Object.freeze([...nodes]) as unknown as readonly [FilterNode, FilterNode, ...FilterNode[]];
}

export function andNode(...nodes: FilterNode[]): AndNode {
  return Object.freeze({ kind: 'and', operands: operands('and', nodes) });
}

export function orNode(...nodes: FilterNode[]): OrNode {
  return Object.freeze({ kind: 'or', operands: operands('or', nodes) });
}

function samePath(a: FilterPath, b: FilterPath): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/**
 * Structural equality of two ASTs. Literals compare with `values.equals` (Refs by id, DateTimes
 * by instant and zone, NaN equal to NaN); regexes by canonical pattern.
 */
export function filterEquals(a: FilterNode, b: FilterNode): boolean {
  if (a === b) return true;
  switch (a.kind) {
    case 'has':
    case 'missing':
      return b.kind === a.kind && samePath(a.path, b.path);
    case 'cmp':
      return b.kind === 'cmp' && a.op === b.op && samePath(a.path, b.path) && equals(a.val, b.val);
    case 'match':
      return b.kind === 'match' && a.pattern === b.pattern && samePath(a.path, b.path);
    case 'and':
    case 'or': {
      if (b.kind !== a.kind || a.operands.length !== b.operands.length) return false;
      for (let i = 0; i < a.operands.length; i++) {
        if (!filterEquals(a.operands[i] as FilterNode, b.operands[i] as FilterNode)) return false;
      }
      return true;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Printer

/** The body of `/.../` for a canonical pattern: only `/` needs an escape to survive the tokenizer. */
function printPattern(pattern: string): string {
  let out = '';
  for (let i = 0; i < pattern.length; i++) {
    const ch = pattern[i] as string;
    if (ch === '\\' && i + 1 < pattern.length) {
      out += ch + (pattern[i + 1] as string);
      i++;
    } else if (ch === '/') out += '\\/';
    else out += ch;
  }
  return out;
}

/**
 * A filter literal in Zinc form, written by the Zinc writer so a literal prints the same in a
 * filter as in a grid. Two exceptions are filter syntax: Bools are `true`/`false` (Zinc's `T`/`F`
 * are not filter values), and Refs print their id only (the display is not part of a match).
 */
export function filterValueToString(v: FilterValue): string {
  if (typeof v === 'boolean') return v ? 'true' : 'false';
  if (v instanceof HRef) return '@' + v.id;
  return zincVal(v);
}

function pathToString(path: FilterPath): string {
  return path.join('->');
}

function printOperand(parent: 'and' | 'or', child: FilterNode): string {
  const s = filterToString(child);
  // `and` binds tighter than `or`, so only an `and` under an `or` can go bare; a same-kind child
  // is bracketed so that re-parsing keeps the nesting (and the AST) as it was.
  const bare = child.kind !== 'and' && child.kind !== 'or' ? true : parent === 'or' && child.kind === 'and';
  return bare ? s : '(' + s + ')';
}

/** Canonical text: re-parses to an AST equal to `node` (see `filterEquals`). */
export function filterToString(node: FilterNode): string {
  switch (node.kind) {
    case 'has':
      return pathToString(node.path);
    case 'missing':
      return 'not ' + pathToString(node.path);
    case 'cmp':
      return `${pathToString(node.path)} ${node.op} ${filterValueToString(node.val)}`;
    case 'match':
      return `${pathToString(node.path)} =~ /${printPattern(node.pattern)}/`;
    case 'and':
    case 'or': {
      const kind = node.kind;
      return node.operands.map((c) => printOperand(kind, c)).join(` ${kind} `);
    }
  }
}
