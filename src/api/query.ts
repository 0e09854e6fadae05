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

function valueOf(text: string): HVal {
  try {
    return readZincVal(text);
  } catch {
    return text;
  }
}

/** `search` is the query string with or without its leading `?`. */
export function queryGrid(search: string): HGrid {
  const q = search.startsWith('?') ? search.slice(1) : search;
  // URLSearchParams decodes form-style (`+` is a space) and leaves a malformed `%` escape as
  // the literal text instead of throwing.
  const params = new URLSearchParams(q);
  const cells: Record<string, HVal> = {};
  const names: string[] = [];
  for (const [name, text] of params) {
    if (!isTagName(name)) {
      throw new HayloftError(
        ErrorCodes.BAD_REQUEST,
        `query parameter "${name.length > 60 ? name.slice(0, 60) + '...' : name}" is not a valid column name (a lower-case letter, then letters, digits or _)`,
      );
    }
    if (names.includes(name)) throw new HayloftError(ErrorCodes.BAD_REQUEST, `query parameter "${name}" is given more than once`);
    names.push(name);
    cells[name] = valueOf(text);
  }
  if (names.length === 0) return HGrid.empty();
  return new HGrid(
    HDict.EMPTY,
    names.map((name) => ({ name, meta: HDict.EMPTY })),
    [HDict.of(cells)],
  );
}
