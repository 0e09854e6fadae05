/**
 * The request grid of a GET (wire-notes §2): one row, one column per query parameter, each value
 * read as Zinc (`id=@abc`, `limit=10`, `range="today"`). Clients also send values bare, so text
 * that is not a Zinc value is taken as a Str: `filter=point and his`, `range=today` and
 * `range=2024-01-01,2024-01-31` arrive as the text typed. A bare value that happens to be valid
 * Zinc keeps its kind (`range=2024-01-12` is a Date, `range=2024-01-12T13:00:00Z UTC` a
 * DateTime): ops that take text read such values back with zincVal.
 */
import { HDict, HGrid, type HVal, isTagName } from '../haystack/values.js';
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

/** Query parameters by name: a value, or every value of a name given more than once. */
export type ParsedQuery = ReadonlyMap<string, string | readonly string[]>;

/** `search` is the query string with or without its leading `?`. */
export function queryGrid(search: string): HGrid {
  const q = search.startsWith('?') ? search.slice(1) : search;
  // querystring decodes form-style (`+` is a space) and leaves a malformed `%` escape as the
  // literal text instead of throwing. Without escapes there is nothing to decode, and splitting
  // by hand is several times quicker (querystring was 3.6 % of a read by id).
  if (!q.includes('%') && !q.includes('+')) return queryGridOf(splitQuery(q));
  return queryGridOf(new Map(Object.entries(parse(q)) as [string, string | string[]][]));
}

/** node:querystring's `parse` for a query without `%` escapes or `+` (tested to agree with it). */
export function splitQuery(q: string): ParsedQuery {
  const out = new Map<string, string | string[]>();
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
      const had = out.get(key);
      if (had === undefined) out.set(key, val);
      else if (typeof had === 'string') out.set(key, [had, val]);
      else had.push(val);
      pairs++;
    }
    start = end + 1;
  }
  return out;
}

/** The request grid of parsed query parameters. */
export function queryGridOf(params: ParsedQuery): HGrid {
  const cells: Record<string, HVal> = {};
  const names: string[] = [];
  for (const [name, raw] of params) {
    if (!isTagName(name)) {
      throw new HayloftError(
        ErrorCodes.BAD_REQUEST,
        `query parameter "${name.length > 60 ? name.slice(0, 60) + '...' : name}" is not a valid column name (a lower-case letter, then letters, digits or _)`,
      );
    }
    if (typeof raw !== 'string') throw new HayloftError(ErrorCodes.BAD_REQUEST, `query parameter "${name}" is given more than once`);
    names.push(name);
    cells[name] = valueOf(raw);
  }
  if (names.length === 0) return HGrid.empty();
  return new HGrid(
    HDict.EMPTY,
    names.map((name) => ({ name, meta: HDict.EMPTY })),
    [HDict.of(cells)],
  );
}
