/**
 * Filter evaluation (docs/spec/wire-notes.md §4). A read request runs one filter over every entity of the
 * model (~10,000), so the AST is compiled once into closures: each literal is reduced to a
 * primitive key up front and each comparison becomes one specialised function, leaving no AST
 * walk, no switch on the operator and no allocation per entity.
 *
 * Semantics:
 * - `has` is true when the path yields a value; `not` (missing) is its negation.
 * - A path `a->b` follows `a` only when it is a Ref that `resolve` finds; a missing tag, a non-Ref
 *   or an unresolvable Ref makes the whole path missing.
 * - Every comparison, `!=` included, is false when the path is missing, when the value is of
 *   another kind than the literal, or for Numbers when the units differ (docs/spec/wire-notes.md: "comparing
 *   different kinds is false"). So `!=` means "present, comparable and different", and
 *   `a != 1` is not the same as `not a == 1`.
 * - Refs compare by id (the display is ignored); Strs by UTF-16 code units; DateTimes by instant
 *   (the zone is ignored); Dates and Times chronologically; Bools with false < true. Numbers
 *   follow IEEE: NaN is unordered, so `== NaN` never holds and `!= NaN` holds for any Number.
 * - `=~` tests the regex (unanchored, as `RegExp.test`, in linear time: src/haystack/regex.ts)
 *   against Str values only.
 */
import { HDate, HDateTime, HNumber, HRef, HTime, HUri, type HDict, type HVal } from './values.js';
import type { CmpOp, FilterNode, FilterPath, FilterValue } from './filter-ast.js';

/** Finds the entity a Ref points to, for `->` paths; undefined when there is none. */
export type FilterResolver = (ref: HRef) => HDict | undefined;

/** A compiled filter: true when the dict matches. Without `resolve`, every `->` path is missing. */
export type CompiledFilter = (dict: HDict, resolve?: FilterResolver) => boolean;

type Getter = (dict: HDict, resolve: FilterResolver | undefined) => HVal | undefined;

/** A comparable primitive for a value of the literal's kind, or undefined when not comparable. */
type KeyOf = (v: HVal) => number | string | undefined;

function compilePath(path: FilterPath): Getter {
  const head = path[0];
  if (path.length === 1) return (d) => d.get(head);
  const names = path.slice();
  const last = names.length - 1;
  const lastName = names[last] as string;
  return (d, resolve) => {
    if (resolve === undefined) return undefined;
    let cur = d;
    for (let i = 0; i < last; i++) {
      const v = cur.get(names[i] as string);
      if (!(v instanceof HRef)) return undefined;
      const next = resolve(v);
      if (next === undefined) return undefined;
      cur = next;
    }
    return cur.get(lastName);
  };
}

function dateKey(d: HDate): number {
  return (d.year * 16 + d.month) * 32 + d.day;
}

/** The key of the literal and the function giving the same kind of key for an entity's value. */
function keyer(lit: FilterValue): { key: number | string; keyOf: KeyOf } {
  if (typeof lit === 'string') return { key: lit, keyOf: (v) => (typeof v === 'string' ? v : undefined) };
  if (typeof lit === 'boolean') return { key: lit ? 1 : 0, keyOf: (v) => (typeof v === 'boolean' ? (v ? 1 : 0) : undefined) };
  if (lit instanceof HNumber) {
    const unit = lit.unit;
    return { key: lit.val, keyOf: (v) => (v instanceof HNumber && v.unit === unit ? v.val : undefined) };
  }
  if (lit instanceof HRef) return { key: lit.id, keyOf: (v) => (v instanceof HRef ? v.id : undefined) };
  if (lit instanceof HUri) return { key: lit.val, keyOf: (v) => (v instanceof HUri ? v.val : undefined) };
  if (lit instanceof HDate) return { key: dateKey(lit), keyOf: (v) => (v instanceof HDate ? dateKey(v) : undefined) };
  if (lit instanceof HTime) return { key: lit.toMillis(), keyOf: (v) => (v instanceof HTime ? v.toMillis() : undefined) };
  const ms = lit.epochMs;
  return { key: ms, keyOf: (v) => (v instanceof HDateTime ? v.epochMs : undefined) };
}

function compileCmp(get: Getter, op: CmpOp, lit: FilterValue): CompiledFilter {
  // Str and Ref equality are the bulk of real filters (`equipRef==@x`, `kind=="Number"`): test
  // them without the key indirection.
  if (op === '==' && typeof lit === 'string') return (d, r) => get(d, r) === lit;
  if (op === '==' && lit instanceof HRef) {
    const id = lit.id;
    return (d, r) => {
      const v = get(d, r);
      return v instanceof HRef && v.id === id;
    };
  }
  const { key, keyOf } = keyer(lit);
  // Keys of one kind are all numbers or all strings, so JS relational operators order them.
  switch (op) {
    case '==':
      return (d, r) => {
        const v = get(d, r);
        return v !== undefined && keyOf(v) === key;
      };
    case '!=':
      return (d, r) => {
        const v = get(d, r);
        if (v === undefined) return false;
        const k = keyOf(v);
        return k !== undefined && k !== key;
      };
    case '<':
      return (d, r) => {
        const v = get(d, r);
        if (v === undefined) return false;
        const k = keyOf(v);
        return k !== undefined && k < key;
      };
    case '<=':
      return (d, r) => {
        const v = get(d, r);
        if (v === undefined) return false;
        const k = keyOf(v);
        return k !== undefined && k <= key;
      };
    case '>':
      return (d, r) => {
        const v = get(d, r);
        if (v === undefined) return false;
        const k = keyOf(v);
        return k !== undefined && k > key;
      };
    case '>=':
      return (d, r) => {
        const v = get(d, r);
        if (v === undefined) return false;
        const k = keyOf(v);
        return k !== undefined && k >= key;
      };
  }
}

function compileNode(node: FilterNode): CompiledFilter {
  switch (node.kind) {
    case 'has': {
      const get = compilePath(node.path);
      return (d, r) => get(d, r) !== undefined;
    }
    case 'missing': {
      const get = compilePath(node.path);
      return (d, r) => get(d, r) === undefined;
    }
    case 'cmp':
      return compileCmp(compilePath(node.path), node.op, node.val);
    case 'match': {
      const get = compilePath(node.path);
      const re = node.regex;
      return (d, r) => {
        const v = get(d, r);
        return typeof v === 'string' && re.test(v);
      };
    }
    case 'and': {
      const fs = node.operands.map(compileNode);
      if (fs.length === 2) {
        const [a, b] = fs as [CompiledFilter, CompiledFilter];
        return (d, r) => a(d, r) && b(d, r);
      }
      return (d, r) => {
        for (const f of fs) if (!f(d, r)) return false;
        return true;
      };
    }
    case 'or': {
      const fs = node.operands.map(compileNode);
      if (fs.length === 2) {
        const [a, b] = fs as [CompiledFilter, CompiledFilter];
        return (d, r) => a(d, r) || b(d, r);
      }
      return (d, r) => {
        for (const f of fs) if (f(d, r)) return true;
        return false;
      };
    }
  }
}

// ASTs are immutable, so a compiled form can be shared by everyone holding the same node.
const compiled = new WeakMap<FilterNode, CompiledFilter>();

/** Compiles an AST once into a predicate; the same node always gives the same function. */
export function compileFilter(node: FilterNode): CompiledFilter {
  let f = compiled.get(node);
  if (f === undefined) {
    f = compileNode(node);
    compiled.set(node, f);
  }
  return f;
}

/** One-off evaluation; loops over many dicts should hold on to `compileFilter(node)` instead. */
export function matches(node: FilterNode, dict: HDict, resolve?: FilterResolver): boolean {
  return compileFilter(node)(dict, resolve);
}
