/**
 * Haystack filters (docs/spec/wire-notes.md §4): the one module callers import.
 *
 * - filter-ast.ts: AST types and constructors, structural equality, canonical printer.
 * - filter-parser.ts: the grammar (in its header comment) and the recursive-descent parser.
 * - filter-eval.ts: the semantics (in its header comment) and the compiler to closures.
 * - here: `filterHints`, what an index can use to avoid evaluating every entity.
 *
 * Typical use: `const f = compileFilter(parseFilter(text)); entities.filter((e) => f(e, resolve))`.
 */
import { HRef } from './values.js';
import type { FilterNode } from './filter-ast.js';

export {
  type AndNode,
  type CmpNode,
  type CmpOp,
  type FilterNode,
  type FilterPath,
  type FilterValue,
  type HasNode,
  type MatchNode,
  type MissingNode,
  type OrNode,
  CMP_OPS,
  FILTER_KEYWORDS,
  andNode,
  canonicalPattern,
  cmpNode,
  filterEquals,
  filterPath,
  filterToString,
  filterValueToString,
  hasNode,
  isFilterValue,
  matchNode,
  missingNode,
  orNode,
} from './filter-ast.js';
export { MAX_FILTER_DEPTH, parseFilter } from './filter-parser.js';
export { type CompiledFilter, type FilterResolver, compileFilter, matches } from './filter-eval.js';

export interface FilterHints {
  /**
   * Tags every matching entity has (a Ref tag, for a `->` path: its first name). For `has`,
   * `==`..`>=` and `=~` terms alike, since a comparison on a missing tag is false.
   */
  has: string[];
  /** `path == @id` terms; `path` is the tag name, or `a->b` text for a path through Refs. */
  refEq: { path: string; id: string }[];
}

/**
 * What must hold for any match, from the terms of the top-level `and` chain (nested `and`s
 * included, `(a and b) and c` being the same chain). `or` and `not` terms give nothing: no single
 * tag is required by them. An index may narrow candidates with these, then it still evaluates the
 * whole filter on each candidate; the hints are necessary conditions, never sufficient ones.
 */
export function filterHints(node: FilterNode): FilterHints {
  const has: string[] = [];
  const seenHas = new Set<string>();
  const refEq: { path: string; id: string }[] = [];
  const seenRef = new Set<string>();
  const visit = (n: FilterNode): void => {
    switch (n.kind) {
      case 'and':
        for (const c of n.operands) visit(c);
        return;
      case 'or':
      case 'missing':
        return;
      case 'has':
      case 'cmp':
      case 'match': {
        const head = n.path[0];
        if (!seenHas.has(head)) {
          seenHas.add(head);
          has.push(head);
        }
        if (n.kind === 'cmp' && n.op === '==' && n.val instanceof HRef) {
          const path = n.path.join('->');
          const key = path + ' ' + n.val.id;
          if (!seenRef.has(key)) {
            seenRef.add(key);
            refEq.push({ path, id: n.val.id });
          }
        }
        return;
      }
    }
  };
  visit(node);
  return { has, refEq };
}
