/**
 * Hayson, the JSON encoding of Haystack 4 (project-haystack.org "Json" page): what Haystack 4
 * clients mean by `application/json` (docs/haystack4.md). Unlike JSON v3 (json.ts), strings are
 * plain JSON strings, numbers without a unit are JSON numbers, and every other kind is an object
 * with `_kind`. Grids: `{"_kind":"grid","meta":{"ver":"3.0",...},"cols":[{"name":..,"meta":{..}}],
 * "rows":[...]}`.
 *
 * Hayloft's value model has no Symbol (Haystack 4's `^name`): a Symbol read is kept as its Str
 * name, and nothing Hayloft stores is written as one. Bin (legacy, read only in v3) is written as
 * an XStr `Bin`. Decoding is strict like json.ts's and bounded by the same shape limits.
 */
import { ErrorCodes, HayloftError } from '../lib/errors.js';
import { groupThousands } from '../lib/quote.js';
import { parseDate, parseDateTime, parseTime } from './datetime.js';
import { HisGrid, rowChunks } from './his-grid.js';
import { DEFAULT_SHAPE_LIMITS, type ShapeLimits, limitError } from './limits.js';
import { findTimeZone } from './tz.js';
import {
  HBin,
  HCoord,
  HDate,
  HDateTime,
  HDict,
  HGrid,
  HNumber,
  HRef,
  HTime,
  HUri,
  HXStr,
  type HCol,
  type HVal,
  MARKER,
  NA,
  REMOVE,
  isTagName,
  newRecord,
} from './values.js';

function bad(path: string, message: string): HayloftError {
  return new HayloftError(ErrorCodes.BAD_VALUE, `${path === '' ? '' : path + ': '}${message}`);
}

function badGrid(path: string, message: string): HayloftError {
  return new HayloftError(ErrorCodes.BAD_GRID, `${path === '' ? '' : path + ': '}${message}`);
}

function isObject(j: unknown): j is Record<string, unknown> {
  return typeof j === 'object' && j !== null && !Array.isArray(j);
}

function text(o: Record<string, unknown>, name: string, path: string, lim: ShapeLimits): string {
  const v = o[name];
  if (typeof v !== 'string') throw bad(path, `a ${String(o._kind)} needs the string "${name}"`);
  if (v.length > lim.maxValueChars) throw limitError(path, `a text of ${groupThousands(v.length)} chars`, lim.maxValueChars, 'maxValueChars');
  return v;
}

function numberVal(v: unknown, path: string): number {
  if (typeof v === 'number') return v;
  if (v === 'INF') return Infinity;
  if (v === '-INF') return -Infinity;
  if (v === 'NaN') return NaN;
  throw bad(path, 'a number\'s val must be a JSON number, "INF", "-INF" or "NaN"');
}

function kinded(o: Record<string, unknown>, kind: string, path: string, lim: ShapeLimits, depth: number): HVal {
  switch (kind) {
    case 'marker':
      return MARKER;
    case 'remove':
      return REMOVE;
    case 'na':
      return NA;
    case 'number': {
      const unit = o.unit;
      if (unit !== undefined && unit !== null && typeof unit !== 'string') throw bad(path, 'a number\'s unit must be a string');
      return new HNumber(numberVal(o.val, path), typeof unit === 'string' && unit !== '' ? unit : null);
    }
    case 'ref': {
      const id = text(o, 'val', path, lim);
      if (!/^[A-Za-z0-9_:\-.~]+$/.test(id)) throw bad(path, `"${id.slice(0, 80)}" is not a Ref id (letters, digits, _ : - . ~)`);
      const dis = o.dis;
      return new HRef(id, typeof dis === 'string' ? dis : null);
    }
    case 'date':
      return parseDate(text(o, 'val', path, lim));
    case 'time':
      return parseTime(text(o, 'val', path, lim));
    case 'dateTime': {
      const val = text(o, 'val', path, lim);
      const tz = o.tz;
      if (tz !== undefined && typeof tz !== 'string') throw bad(path, 'a dateTime\'s tz must be a string');
      // Hayson: without tz the zone is UTC for a Z offset (else the offset's GMT zone, which Hayloft reads as the instant in UTC).
      if (tz === undefined) return parseDateTime(`${val} ${zoneOfOffset(val, path)}`);
      if (findTimeZone(tz) === undefined) throw new HayloftError(ErrorCodes.UNKNOWN_TZ, `${path}: unknown time zone "${tz.slice(0, 80)}"`);
      return parseDateTime(`${val} ${tz}`);
    }
    case 'uri':
      return new HUri(text(o, 'val', path, lim));
    case 'coord': {
      const { lat, lng } = o;
      if (typeof lat !== 'number' || typeof lng !== 'number') throw bad(path, 'a coord needs numbers lat and lng');
      return new HCoord(lat, lng);
    }
    case 'xstr':
      return new HXStr(text(o, 'type', path, lim), text(o, 'val', path, lim));
    case 'symbol':
      // No Symbol in Hayloft's values: its name as a Str (see the header).
      return text(o, 'val', path, lim);
    case 'dict': {
      const { _kind, ...rest } = o;
      void _kind;
      return decodeDict(rest, path, lim, depth);
    }
    case 'grid':
      return decodeHaysonGrid(o, path, lim, depth);
  }
  throw bad(path, `unknown _kind "${kind.slice(0, 40)}"`);
}

/** Hayson's default zone of a DateTime without `tz`: UTC for `Z`, else the whole-hour `GMT±h` zone of its offset. */
function zoneOfOffset(val: string, path: string): string {
  if (val.endsWith('Z')) return 'UTC';
  const m = /([+-])(\d\d):00$/.exec(val);
  if (m === null) throw bad(path, `"${val.slice(0, 80)}" needs a tz (its offset is not a whole hour)`);
  const h = Number(m[2]);
  // Etc/GMT zones count the other way: -05:00 is GMT+5.
  return h === 0 ? 'UTC' : `GMT${m[1] === '-' ? '+' : '-'}${h}`;
}

/** Decodes a parsed Hayson value; `depth` counts the lists, dicts and grids around it. */
export function decodeHayson(j: unknown, path = '', lim: ShapeLimits = DEFAULT_SHAPE_LIMITS, depth = 0): HVal {
  switch (typeof j) {
    case 'string':
      if (j.length > lim.maxValueChars) throw limitError(path, `a text of ${groupThousands(j.length)} chars`, lim.maxValueChars, 'maxValueChars');
      return j;
    case 'boolean':
      return j;
    case 'number':
      return new HNumber(j);
    case 'object': {
      if (j === null) return null;
      if (depth >= lim.maxDepth) throw limitError(path, `values nested ${depth + 1} deep`, lim.maxDepth, 'maxDepth');
      if (Array.isArray(j)) return Object.freeze(j.map((x, i) => decodeHayson(x, `${path}[${i}]`, lim, depth + 1)));
      const o = j as Record<string, unknown>;
      const kind = o._kind;
      if (kind === undefined) return decodeDict(o, path, lim, depth + 1);
      if (typeof kind !== 'string') throw bad(path, '_kind must be a string');
      return kinded(o, kind, path, lim, depth + 1);
    }
  }
  throw bad(path, `${typeof j} is not a Haystack value`);
}

function decodeDict(o: Record<string, unknown>, path: string, lim: ShapeLimits, depth: number): HDict {
  const rec = newRecord();
  for (const k in o) {
    if (k.length > lim.maxValueChars) throw limitError(path, `a name of ${groupThousands(k.length)} chars`, lim.maxValueChars, 'maxValueChars');
    const v = decodeHayson(o[k], path === '' ? k : `${path}.${k}`, lim, depth);
    if (v !== null) rec[k] = v;
  }
  return HDict.adopt(rec);
}

function decodeHaysonGrid(o: Record<string, unknown>, path: string, lim: ShapeLimits, depth: number): HGrid {
  const p = (s: string): string => (path === '' ? s : `${path}.${s}`);
  const metaJ = o.meta ?? {};
  if (!isObject(metaJ)) throw badGrid(p('meta'), 'must be an object');
  const ver = metaJ.ver;
  if (ver !== undefined && ver !== '2.0' && ver !== '3.0') throw badGrid(p('meta.ver'), 'is not a supported grid version (use "3.0")');
  const { ver: _v, ...metaRest } = metaJ;
  void _v;
  const meta = decodeDict(metaRest, p('meta'), lim, depth);
  const colsJ = o.cols ?? [];
  if (!Array.isArray(colsJ)) throw badGrid(p('cols'), 'must be an array of columns');
  if (colsJ.length > lim.maxCols) throw limitError(p('cols'), `${groupThousands(colsJ.length)} columns`, lim.maxCols, 'maxCols');
  const cols: HCol[] = [];
  const names = new Set<string>();
  colsJ.forEach((c: unknown, i) => {
    const cp = p(`cols[${i}]`);
    if (!isObject(c) || typeof c.name !== 'string' || !isTagName(c.name)) throw badGrid(cp, 'a column must be an object with a valid name');
    if (names.has(c.name)) throw badGrid(`${cp}.name`, `column "${c.name}" appears twice`);
    names.add(c.name);
    const cm = c.meta ?? {};
    if (!isObject(cm)) throw badGrid(`${cp}.meta`, 'must be an object');
    cols.push({ name: c.name, meta: decodeDict(cm, `${cp}.meta`, lim, depth) });
  });
  const rowsJ = o.rows ?? [];
  if (!Array.isArray(rowsJ)) throw badGrid(p('rows'), 'must be an array of rows');
  const rows = rowsJ.map((r: unknown, i) => {
    if (!isObject(r)) throw badGrid(p(`rows[${i}]`), 'a row must be an object');
    for (const k in r) if (!names.has(k)) throw badGrid(p(`rows[${i}]`), `"${k.slice(0, 80)}" is not one of the grid's columns`);
    return decodeDict(r, p(`rows[${i}]`), lim, depth);
  });
  return cols.length === 0 ? HGrid.empty(meta) : new HGrid(meta, cols, rows);
}

/** A request body in Hayson: a grid (`_kind` may be left out at the top). */
export function readHayson(textIn: string, lim: ShapeLimits = DEFAULT_SHAPE_LIMITS): HGrid {
  let j: unknown;
  try {
    j = JSON.parse(textIn);
  } catch (e) {
    throw badGrid('', `the body is not valid JSON (${(e as Error).message})`);
  }
  if (!isObject(j)) throw badGrid('', 'a Hayson grid must be a JSON object with meta, cols and rows');
  if (j._kind !== undefined && j._kind !== 'grid') throw badGrid('', 'the body must be a grid (_kind "grid")');
  return decodeHaysonGrid(j, '', lim, 0);
}

function num(v: number): number | string {
  if (Number.isFinite(v)) return v;
  return Number.isNaN(v) ? 'NaN' : v > 0 ? 'INF' : '-INF';
}

/** The Hayson structure of a value (JSON.stringify writes it). */
export function haysonVal(v: HVal): unknown {
  if (v === null || typeof v === 'boolean' || typeof v === 'string') return v;
  if (v instanceof HNumber) {
    if (v.unit === null && Number.isFinite(v.val)) return v.val;
    return v.unit === null ? { _kind: 'number', val: num(v.val) } : { _kind: 'number', val: num(v.val), unit: v.unit };
  }
  if (v === MARKER) return { _kind: 'marker' };
  if (v instanceof HRef) return v.dis === null ? { _kind: 'ref', val: v.id } : { _kind: 'ref', val: v.id, dis: v.dis };
  if (v instanceof HDateTime) return { _kind: 'dateTime', val: v.tz.formatInstant(v.epochMs, 0), tz: v.tz.name };
  if (v instanceof HDate) return { _kind: 'date', val: v.toString() };
  if (v instanceof HTime) return { _kind: 'time', val: v.toString() };
  if (v instanceof HUri) return { _kind: 'uri', val: v.val };
  if (v === REMOVE) return { _kind: 'remove' };
  if (v === NA) return { _kind: 'na' };
  if (v instanceof HCoord) return { _kind: 'coord', lat: v.lat, lng: v.lng };
  if (v instanceof HXStr) return { _kind: 'xstr', type: v.type, val: v.val };
  if (v instanceof HBin) return { _kind: 'xstr', type: 'Bin', val: v.mime };
  if (Array.isArray(v)) return (v as readonly HVal[]).map(haysonVal);
  if (v instanceof HDict) return dictOf(v);
  if (v instanceof HGrid) return gridOf(v);
  throw new TypeError(`not a Haystack value: ${String(v)}`);
}

function dictOf(d: HDict): Record<string, unknown> {
  const o: Record<string, unknown> = {};
  for (const [k, x] of d) o[k] = haysonVal(x);
  return o;
}

function headOf(g: HGrid): { meta: Record<string, unknown>; cols: Record<string, unknown>[] } {
  const meta: Record<string, unknown> = { ver: '3.0' };
  for (const [k, x] of g.meta) if (k !== 'ver') meta[k] = haysonVal(x);
  const cols = g.cols.length === 0 ? [{ name: 'empty' }] : g.cols.map((c) => (c.meta.isEmpty() ? { name: c.name } : { name: c.name, meta: dictOf(c.meta) }));
  return { meta, cols };
}

/** Row i of a grid as a Hayson object; history rows straight from the columns (no dict per sample). */
function rowOf(g: HGrid, names: readonly string[]): (i: number) => Record<string, unknown> {
  if (g instanceof HisGrid) {
    const { ts, tz } = g;
    return (i) => ({ ts: { _kind: 'dateTime', val: tz.formatInstant(ts[i] as number, 0), tz: tz.name }, val: haysonVal(g.valueAt(i)) });
  }
  const rows = g.rows;
  return (i) => {
    const r = rows[i] as HDict;
    const o: Record<string, unknown> = {};
    for (const n of names) {
      const x = r.get(n);
      if (x !== undefined && x !== null) o[n] = haysonVal(x);
    }
    return o;
  };
}

function gridOf(g: HGrid): Record<string, unknown> {
  const { meta, cols } = headOf(g);
  const row = rowOf(g, g.cols.map((c) => c.name));
  return { _kind: 'grid', meta, cols, rows: Array.from({ length: g.size }, (_, i) => row(i)) };
}

/**
 * Hayson text in pieces (rows in chunks, his-grid.ts rowChunks) that concatenate to one grid:
 * history and grids of many rows are streamed by the server this way, so a point-year is never
 * one object tree or one string.
 */
export function* writeHaysonChunks(g: HGrid): Generator<string> {
  const { meta, cols } = headOf(g);
  yield `{"_kind":"grid","meta":${JSON.stringify(meta)},"cols":${JSON.stringify(cols)},"rows":[`;
  const row = rowOf(g, g.cols.map((c) => c.name));
  yield* rowChunks(g.size, (i) => JSON.stringify(row(i)), ',');
  yield ']}';
}

export function writeHayson(g: HGrid): string {
  return [...writeHaysonChunks(g)].join('');
}
