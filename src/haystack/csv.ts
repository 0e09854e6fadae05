/**
 * CSV writer (docs/spec/wire-notes.md §1): one header line, one line per row, for people opening the data in
 * a spreadsheet rather than for machines, so cells are as readable as the value allows:
 * Marker `✓`, null empty, Ref `@id dis`, Str and Uri as their bare text, everything else in its
 * Zinc form (`72.5°F`, `2024-03-10T03:00:00-04:00 New_York`, `T`). A nested Grid has no cell form
 * and is refused (HL_CANNOT_ENCODE). There is no reader: Hayloft accepts JSON and Zinc bodies only.
 *
 * Quoting is RFC 4180: a field holding a comma, a double quote, CR or LF is quoted, with quotes
 * doubled. Lines end in CRLF, as RFC 4180 specifies and spreadsheets expect; every CSV parser also
 * accepts it, whereas a bare LF is the one a strict RFC 4180 parser may reject. The result is a JS
 * string: the HTTP layer sends it as UTF-8 (`text/csv; charset=utf-8`).
 */
import { ErrorCodes, HayloftError } from '../lib/errors.js';
import { HDict, HGrid, HRef, HUri, type HCol, type HList, type HVal, MARKER } from './values.js';
import { zincVal } from './zinc.js';

const EOL = '\r\n';

/** A field quoted when RFC 4180 requires it; one scan, no regex (runs once per cell). */
export function csvField(s: string): string {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 44 || c === 34 || c === 10 || c === 13) return '"' + s.replaceAll('"', '""') + '"';
  }
  return s;
}

function holdsGrid(v: HVal): boolean {
  if (v instanceof HGrid) return true;
  if (Array.isArray(v)) return (v as HList).some(holdsGrid);
  if (v instanceof HDict) {
    for (const [, x] of v) if (holdsGrid(x)) return true;
  }
  return false;
}

/** The unquoted text of one cell. */
export function csvCell(v: HVal | undefined): string {
  if (v === null || v === undefined) return '';
  if (typeof v === 'string') return v;
  if (v === MARKER) return '\u2713';
  if (v instanceof HRef) return v.dis === null ? '@' + v.id : '@' + v.id + ' ' + v.dis;
  if (v instanceof HUri) return v.val;
  if ((Array.isArray(v) || v instanceof HDict || v instanceof HGrid) && holdsGrid(v)) {
    throw new HayloftError(ErrorCodes.CANNOT_ENCODE, 'csv: a Grid cannot be written in a CSV cell (ask for JSON or Zinc)');
  }
  return zincVal(v);
}

/** CSV text of a grid: header from each column's `dis` meta (a Str) or its name. */
export function writeCsv(grid: HGrid): string {
  const cols = grid.cols;
  if (cols.length === 0) return 'empty' + EOL;
  const n = cols.length;
  const names = new Array<string>(n);
  let out = '';
  for (let i = 0; i < n; i++) {
    const c = cols[i] as HCol;
    names[i] = c.name;
    const dis = c.meta.get('dis');
    if (i > 0) out += ',';
    out += csvField(typeof dis === 'string' && dis !== '' ? dis : c.name);
  }
  out += EOL;
  const rows = grid.rows;
  for (let r = 0; r < rows.length; r++) {
    const row = rows[r] as HDict;
    let line = '';
    for (let i = 0; i < n; i++) {
      if (i > 0) line += ',';
      line += csvField(csvCell(row.get(names[i] as string)));
    }
    // A one-column null would be a blank line, which many parsers skip: `""` keeps the record.
    out += (line === '' ? '""' : line) + EOL;
  }
  return out;
}
