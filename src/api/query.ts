/**
 * The request grid of a GET (docs/spec/wire-notes.md §2): one row, one column per query parameter, each value
 * read as Zinc (`id=@abc`, `limit=10`, `range="today"`). Clients also send values bare, so text
 * that is not a Zinc value is taken as a Str: `filter=point and his`, `range=today` and
 * `range=2024-01-01,2024-01-31` arrive as the text typed. A bare value that happens to be valid
 * Zinc keeps its kind (`range=2024-01-12` is a Date, `range=2024-01-12T13:00:00Z UTC` a
 * DateTime): ops that take text read such values back with zincVal.
 */
import { quoteInput } from '../lib/quote.js';
import { type HCol, HDict, HGrid, type HVal, isTagName, newRecord } from '../haystack/values.js';
import { readZincVal } from '../haystack/zinc.js';
import { ErrorCodes, HayloftError } from '../lib/errors.js';
import { parse } from 'node:querystring';

function valueOf(text: string): HVal {
  try {
    return readZincVal(text);
  } catch {
    return text;
  }
}

/** Query parameters in order, by name: a value, or every value of a name given more than once. */
export type ParsedQuery = readonly (readonly [string, string | readonly string[]])[];

/** `search` is the query string with or without its leading `?`. */
export function queryGrid(search: string): HGrid {
  const q = search.startsWith('?') ? search.slice(1) : search;
  // querystring decodes form-style (`+` is a space) and leaves a malformed `%` escape as the
  // literal text instead of throwing. Without escapes there is nothing to decode, and splitting
  // by hand is several times quicker (querystring was 3.6 % of a read by id).
  if (!q.includes('%') && !q.includes('+')) return queryGridOf(splitQuery(q));
  return queryGridOf(Object.entries(parse(q)) as [string, string | string[]][]);
}

/** node:querystring's `parse` for a query without `%` escapes or `+` (tested to agree with it). */
export function splitQuery(q: string): ParsedQuery {
  // An array, not a Map: a query has a few names, and a Map was the largest allocation of a
  // read by id. A repeated name is found by a scan (at most 1,000 pairs, as querystring).
  const out: [string, string | string[]][] = [];
  let start = 0;
  // The next `=` at or after `start`, found once for as many pairs as it lies beyond.
  let eq = -2;
  let pairs = 0; // querystring's maxKeys (1,000) counts pairs, repeated names included
  while (start < q.length && pairs < 1000) {
    let end = q.indexOf('&', start);
    if (end < 0) end = q.length;
    if (end > start) {
      if (eq !== -1 && eq < start) eq = q.indexOf('=', start);
      const key = eq < 0 || eq > end ? q.slice(start, end) : q.slice(start, eq);
      const val = eq < 0 || eq > end ? '' : q.slice(eq + 1, end);
      let i = 0;
      while (i < out.length && (out[i] as [string, unknown])[0] !== key) i++;
      const had = out[i];
      if (had === undefined) out.push([key, val]);
      else if (typeof had[1] === 'string') had[1] = [had[1], val];
      else had[1].push(val);
      pairs++;
    }
    start = end + 1;
  }
  return out;
}

/** The request grid of parsed query parameters. */
export function queryGridOf(params: ParsedQuery): HGrid {
  if (params.length === 0) return HGrid.empty();
  // Built straight into the dict's record (HDict.adopt): no intermediate object to copy.
  const rec = newRecord();
  const cols: HCol[] = [];
  for (const [name, raw] of params) {
    if (!isTagName(name)) {
      throw new HayloftError(
        ErrorCodes.BAD_REQUEST,
        `query parameter ${quoteInput(name)} is not a valid column name (a lower-case letter, then letters, digits or _)`,
      );
    }
    if (typeof raw !== 'string') throw new HayloftError(ErrorCodes.BAD_REQUEST, `query parameter ${quoteInput(name)} is given more than once`);
    cols.push({ name, meta: HDict.EMPTY });
    const v = valueOf(raw);
    if (v !== null) rec[name] = v; // `x=N`: the column, without a value (as HDict.of drops nulls)
  }
  return new HGrid(HDict.EMPTY, cols, [HDict.adopt(rec)]);
}
