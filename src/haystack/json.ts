/**
 * Haystack JSON v3 (docs/spec/wire-notes.md §1): grids and values, both directions.
 *
 * Decoding is strict: a value that does not parse as its prefix says is an error naming where it
 * is (`rows[3].val: "n:abc" is not a Number`), never a silent Str. Text goes through JSON.parse and
 * then a walk; writing builds the JSON text directly (no intermediate objects), since history
 * grids of 100,000 rows go through here.
 */
import { ErrorCodes, HayloftError } from '../lib/errors.js';
import { groupThousands, quoteInput } from '../lib/quote.js';
import { DEFAULT_SHAPE_LIMITS, type ShapeLimits, charsOf, limitError } from './limits.js';
import { HisGrid, rowChunks, streamed } from './his-grid.js';
import { JSON_ROWS, numberRows } from './his-rows.js';
import { parseDate, parseDateTime, parseInstant, parseTime, parsedZone } from './datetime.js';
import type { TimeZone } from './tz.js';
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
  isRefId,
  isTagName,
  isUnitText,
  newRecord,
} from './values.js';

export type JsonValue = null | boolean | number | string | JsonValue[] | { [k: string]: JsonValue };

function bad(path: string, message: string): HayloftError {
  return new HayloftError(ErrorCodes.BAD_VALUE, path === '' ? message : `${path}: ${message}`);
}

function badGrid(path: string, message: string): HayloftError {
  return new HayloftError(ErrorCodes.BAD_GRID, path === '' ? message : `${path}: ${message}`);
}

/** Prefixes a value error raised without a path with the path of the cell. */
function atPath(e: unknown, path: string): unknown {
  if (!(e instanceof HayloftError)) return e;
  return new HayloftError(e.code, `${path}${e.message.startsWith('[') ? '' : ': '}${e.message}`, { cause: e.cause });
}

const quote = quoteInput;

function tooDeep(path: string, lim: ShapeLimits): HayloftError {
  return limitError(path, 'the nesting of lists, dicts and grids', lim.maxDepth, 'maxDepth');
}

function tooLong(path: string, s: string, lim: ShapeLimits): HayloftError {
  return limitError(path, charsOf(s), lim.maxValueChars, 'maxValueChars');
}

/** True when `s` is a Haystack number literal: `-?digits[.digits][e[+-]digits]`, INF, -INF, NaN. */
export function isNumberText(s: string): boolean {
  const n = s.length;
  if (n === 0) return false;
  let i = 0;
  if (s.charCodeAt(0) === 45) i = 1;
  if (s === 'INF' || s === '-INF' || s === 'NaN') return true;
  const d0 = i;
  while (i < n && s.charCodeAt(i) >= 48 && s.charCodeAt(i) <= 57) i++;
  if (i === d0) return false;
  if (i < n && s.charCodeAt(i) === 46) {
    i++;
    const f0 = i;
    while (i < n && s.charCodeAt(i) >= 48 && s.charCodeAt(i) <= 57) i++;
    if (i === f0) return false;
  }
  if (i < n && (s.charCodeAt(i) === 101 || s.charCodeAt(i) === 69)) {
    i++;
    if (i < n && (s.charCodeAt(i) === 43 || s.charCodeAt(i) === 45)) i++;
    const e0 = i;
    while (i < n && s.charCodeAt(i) >= 48 && s.charCodeAt(i) <= 57) i++;
    if (i === e0) return false;
  }
  return i === n;
}

/** The value of a Haystack number literal (see isNumberText). */
export function numberOf(text: string): number {
  if (text === 'INF') return Infinity;
  if (text === '-INF') return -Infinity;
  if (text === 'NaN') return NaN;
  return Number(text);
}

// The unit of the previous Number decoded: history grids repeat one unit on every row.
let lastUnit = '';

/** Decodes one `n:` payload (after the prefix): `72.5`, `72.5 °F`, `INF`. */
function decodeNumber(s: string, path: string): HNumber {
  const sp = s.indexOf(' ', 2);
  const text = sp < 0 ? s.slice(2) : s.slice(2, sp);
  if (!isNumberText(text)) throw bad(path, `${quote(s)} is not a Number`);
  if (sp < 0) return new HNumber(numberOf(text));
  let unit: string;
  if (s.length - sp - 1 === lastUnit.length && s.endsWith(lastUnit)) unit = lastUnit;
  else {
    unit = s.slice(sp + 1);
    if (!isUnitText(unit)) throw bad(path, `${quote(s)} is not a Number: "${unit}" is not a valid unit`);
    lastUnit = unit;
  }
  return new HNumber(numberOf(text), unit);
}

/** A parse error of a value, restated with where the value is and what it should be. */
function valueError(e: unknown, s: string, path: string, kind: string): unknown {
  if (!(e instanceof HayloftError)) return e;
  const detail = e.message.startsWith('"') ? e.message.replace(/^"[^"]*" is not a \w+: /, '') : e.message;
  return new HayloftError(e.code, `${path === '' ? '' : path + ': '}${quote(s)} is not a ${kind}: ${detail}`, { cause: e });
}

function wrapValue<T>(s: string, path: string, kind: string, f: () => T): T {
  try {
    return f();
  } catch (e) {
    throw valueError(e, s, path, kind);
  }
}

/** Decodes a JSON string cell. */
function decodeStr(s: string, path: string, lim: ShapeLimits): HVal {
  if (s.length > lim.maxValueChars) throw tooLong(path, s, lim);
  if (s.length < 2 || s.charCodeAt(1) !== 58) return s;
  switch (s.charCodeAt(0)) {
    case 115: // s:
      return s.slice(2);
    case 110: // n:
      return decodeNumber(s, path);
    case 116: // t:
      // Inline rather than through wrapValue: no closure per timestamp of a history grid.
      try {
        return parseDateTime(s, 2);
      } catch (e) {
        throw valueError(e, s, path, 'DateTime');
      }
    case 109: // m:
      if (s.length === 2) return MARKER;
      throw bad(path, `${quote(s)} is not a Marker (nothing may follow "m:")`);
    case 114: {
      // r:<id>[ <dis>]
      const sp = s.indexOf(' ', 2);
      const id = sp < 0 ? s.slice(2) : s.slice(2, sp);
      if (!isRefId(id)) throw bad(path, `${quote(s)} is not a Ref (id chars are A-Z a-z 0-9 _ : - . ~)`);
      return new HRef(id, sp < 0 ? null : s.slice(sp + 1));
    }
    case 100: // d:
      return wrapValue(s, path, 'Date', () => parseDate(s.slice(2)));
    case 104: // h:
      return wrapValue(s, path, 'Time', () => parseTime(s.slice(2)));
    case 117: // u:
      return new HUri(s.slice(2));
    case 45: // -:
      if (s.length === 2) return REMOVE;
      break;
    case 122: // z:
      if (s.length === 2) return NA;
      throw bad(path, `${quote(s)} is not NA (nothing may follow "z:")`);
    case 120: {
      // x:Type:value; a bare "x:" is the WideSky 2.0 way of saying Remove.
      if (s.length === 2) return REMOVE;
      const colon = s.indexOf(':', 2);
      if (colon < 0) throw bad(path, `${quote(s)} is not an XStr (expected "x:Type:value")`);
      return wrapValue(s, path, 'XStr', () => new HXStr(s.slice(2, colon), s.slice(colon + 1)));
    }
    case 99: {
      // c:lat,lng
      const parts = s.slice(2).split(',');
      if (parts.length !== 2 || !isNumberText(parts[0] as string) || !isNumberText(parts[1] as string)) {
        throw bad(path, `${quote(s)} is not a Coord (expected "c:lat,lng")`);
      }
      return wrapValue(s, path, 'Coord', () => new HCoord(Number(parts[0]), Number(parts[1])));
    }
    case 98: // b:
      return new HBin(s.slice(2));
  }
  throw bad(path, `${quote(s)} has an unknown type prefix "${s.slice(0, 2)}" (a Str with a colon in second place must be written "s:${s.length > 40 ? '...' : s}")`);
}

function isObject(j: unknown): j is Record<string, unknown> {
  return typeof j === 'object' && j !== null && !Array.isArray(j);
}

function looksLikeGrid(j: Record<string, unknown>): boolean {
  return isObject(j.meta) && j.meta.ver !== undefined && Array.isArray(j.cols);
}

/**
 * Decodes a JSON value (already parsed) to a Haystack value; `path` names it in errors, `depth`
 * is the number of lists, dicts and grids around it (refused past `lim.maxDepth`, so hostile
 * nesting is an error grid and never a stack overflow).
 */
export function decodeVal(j: unknown, path = '', lim: ShapeLimits = DEFAULT_SHAPE_LIMITS, depth = 0): HVal {
  switch (typeof j) {
    case 'string':
      return decodeStr(j, path, lim);
    case 'boolean':
      return j;
    case 'number':
      // Not Haystack JSON v3, but unambiguous, and hand-written requests use it.
      return new HNumber(j);
    case 'object':
      if (j === null) return null;
      if (depth >= lim.maxDepth) throw tooDeep(path, lim);
      if (Array.isArray(j)) {
        const out = new Array<HVal>(j.length);
        for (let i = 0; i < j.length; i++) out[i] = decodeVal(j[i], `${path}[${i}]`, lim, depth + 1);
        return Object.freeze(out);
      }
      if (looksLikeGrid(j as Record<string, unknown>)) return decodeGrid(j, path, lim, depth + 1);
      return decodeDict(j as Record<string, unknown>, path, lim, depth + 1);
  }
  throw bad(path, `${typeof j} is not a Haystack value`);
}

function decodeDict(j: Record<string, unknown>, path: string, lim: ShapeLimits, depth: number): HDict {
  const rec = newRecord();
  for (const k in j) {
    if (k.length > lim.maxValueChars) throw tooLong(path, k, lim);
    const v = decodeVal(j[k], path === '' ? k : `${path}.${k}`, lim, depth);
    if (v !== null) rec[k] = v;
  }
  return HDict.adopt(rec);
}

/**
 * Decodes a parsed JSON grid. Meta `ver` may be absent; if present it must be "2.0" or "3.0".
 * `depth` is that of the grid's cells and meta values (0 for a request's grid).
 */
export function decodeGrid(j: unknown, path = '', lim: ShapeLimits = DEFAULT_SHAPE_LIMITS, depth = 0): HGrid {
  const p = (s: string): string => (path === '' ? s : `${path}.${s}`);
  if (!isObject(j)) throw badGrid(path, 'a grid must be a JSON object with meta, cols and rows');
  const metaJ = j.meta ?? {};
  if (!isObject(metaJ)) throw badGrid(p('meta'), 'must be an object');
  const ver = metaJ.ver;
  if (ver !== undefined && ver !== '2.0' && ver !== '3.0' && ver !== 's:2.0' && ver !== 's:3.0') {
    throw badGrid(p('meta.ver'), `${typeof ver === 'string' ? quote(ver) : `a ${typeof ver}`} is not a supported grid version (use "2.0" or "3.0")`);
  }
  const metaRec = newRecord();
  for (const k in metaJ) {
    if (k === 'ver') continue;
    if (k.length > lim.maxValueChars) throw tooLong(p('meta'), k, lim);
    const v = decodeVal(metaJ[k], p(`meta.${k}`), lim, depth);
    if (v !== null) metaRec[k] = v;
  }
  const colsJ = j.cols;
  if (!Array.isArray(colsJ)) throw badGrid(p('cols'), 'must be an array of columns');
  if (colsJ.length > lim.maxCols) throw limitError(p('cols'), `${groupThousands(colsJ.length)} columns`, lim.maxCols, 'maxCols');
  const cols: HCol[] = [];
  const colNames = new Set<string>();
  for (let i = 0; i < colsJ.length; i++) {
    const c: unknown = colsJ[i];
    const cp = p(`cols[${i}]`);
    if (!isObject(c)) throw badGrid(cp, 'a column must be an object with a name');
    const name = c.name;
    if (typeof name === 'string' && name.length > lim.maxValueChars) throw tooLong(`${cp}.name`, name, lim);
    if (typeof name !== 'string' || !isTagName(name)) {
      throw badGrid(`${cp}.name`, `${typeof name === 'string' ? quote(name) : `a ${name === null ? 'null' : typeof name}`} is not a valid column name (a lowercase letter, then letters, digits or _)`);
    }
    if (colNames.has(name)) throw badGrid(`${cp}.name`, `column "${name}" appears twice`);
    colNames.add(name);
    const cm = newRecord();
    for (const k in c) {
      if (k === 'name') continue;
      if (k.length > lim.maxValueChars) throw tooLong(cp, k, lim);
      const v = decodeVal(c[k], `${cp}.${k}`, lim, depth);
      if (v !== null) cm[k] = v;
    }
    cols.push({ name, meta: HDict.adopt(cm) });
  }
  const rowsJ = j.rows ?? [];
  if (!Array.isArray(rowsJ)) throw badGrid(p('rows'), 'must be an array of rows');
  if (cols.length === 2 && cols[0]?.name === 'ts' && cols[1]?.name === 'val' && cols[0].meta.isEmpty() && cols[1].meta.isEmpty() && rowsJ.length > 0) {
    const his = decodeHisRows(rowsJ, metaRec);
    if (his !== undefined) return his;
  }
  const rows = new Array<HDict>(rowsJ.length);
  for (let i = 0; i < rowsJ.length; i++) {
    const r: unknown = rowsJ[i];
    if (!isObject(r)) throw badGrid(p(`rows[${i}]`), 'a row must be an object');
    const rec = newRecord();
    for (const k in r) {
      if (!colNames.has(k)) throw badGrid(p(`rows[${i}]`), `${quote(k)} is not one of the grid's columns`);
      const raw = r[k];
      let v: HVal;
      // This loop runs once per cell of history grids: the path is built only for an error.
      try {
        v = typeof raw === 'string' ? decodeStr(raw, '', lim) : decodeVal(raw, '', lim, depth);
      } catch (e) {
        throw atPath(e, p(`rows[${i}].${k}`));
      }
      if (v !== null) rec[k] = v;
    }
    rows[i] = HDict.adopt(rec);
  }
  return new HGrid(HDict.adopt(metaRec), cols, rows);
}

/**
 * History as columns: a grid of `ts` and `val` where every row is a DateTime of one zone and a
 * Number of one unit (what hisWrite sends) becomes a HisGrid, with no dict, DateTime or Number
 * per row; the garbage collector's share of decoding such grids was over half. Anything else
 * (a null cell, a second zone or unit, a bad value) returns undefined and the grid is decoded the
 * general way, which also words the errors.
 */
function decodeHisRows(rowsJ: readonly unknown[], metaRec: Record<string, HVal>): HisGrid | undefined {
  const n = rowsJ.length;
  const ts = new Float64Array(n);
  const val = new Float64Array(n);
  let tz: TimeZone | undefined;
  let unit: string | null | undefined;
  for (let i = 0; i < n; i++) {
    const r = rowsJ[i] as Record<string, unknown> | null;
    if (typeof r !== 'object' || r === null) return undefined;
    for (const k in r) if (k !== 'ts' && k !== 'val') return undefined;
    const t = r.ts;
    const v = r.val;
    if (typeof t !== 'string' || typeof v !== 'string' || t.charCodeAt(1) !== 58 || t.charCodeAt(0) !== 116 || v.charCodeAt(1) !== 58 || v.charCodeAt(0) !== 110) return undefined;
    try {
      ts[i] = parseInstant(t, 2);
    } catch {
      return undefined;
    }
    const zone = parsedZone();
    if (tz === undefined) tz = zone;
    else if (zone !== tz) return undefined;
    const sp = v.indexOf(' ', 2);
    const text = sp < 0 ? v.slice(2) : v.slice(2, sp);
    if (!isNumberText(text)) return undefined;
    let u: string | null = null;
    if (sp >= 0) {
      if (unit !== undefined && unit !== null && v.length - sp - 1 === unit.length && v.endsWith(unit)) u = unit;
      else {
        u = v.slice(sp + 1);
        if (!isUnitText(u)) return undefined;
      }
    }
    if (unit === undefined) unit = u;
    else if (u !== unit) return undefined;
    val[i] = numberOf(text);
  }
  return new HisGrid(HDict.adopt(metaRec), ts, tz as TimeZone, { kind: 'Number', val, unit: unit ?? null });
}

/**
 * Parses JSON text into a grid; malformed JSON is a BAD_GRID error with the parser's reason, a
 * grid over `lim` an HL_LIMIT error naming the limit.
 */
export function readJsonGrid(text: string, lim: ShapeLimits = DEFAULT_SHAPE_LIMITS): HGrid {
  let j: unknown;
  try {
    j = JSON.parse(text);
  } catch (e) {
    throw new HayloftError(ErrorCodes.BAD_GRID, `body is not valid JSON: ${(e as Error).message}`, { cause: e });
  }
  return decodeGrid(j, '', lim);
}

/** The `x:`-prefixed text of a scalar (not for null, Bool, List, Dict or Grid). */
export function scalarJsonText(v: HVal): string {
  if (typeof v === 'string') return 's:' + v;
  if (v instanceof HNumber) return v.unit === null ? 'n:' + v.numText() : 'n:' + v.numText() + ' ' + v.unit;
  if (v instanceof HDateTime) return 't:' + v.tz.formatInstant(v.epochMs, 1);
  if (v === MARKER) return 'm:';
  if (v instanceof HRef) return v.dis === null ? 'r:' + v.id : 'r:' + v.id + ' ' + v.dis;
  if (v instanceof HDate) return 'd:' + v.toString();
  if (v instanceof HTime) return 'h:' + v.toString();
  if (v instanceof HUri) return 'u:' + v.val;
  if (v === REMOVE) return '-:';
  if (v === NA) return 'z:';
  if (v instanceof HCoord) return `c:${v.lat},${v.lng}`;
  if (v instanceof HXStr) return `x:${v.type}:${v.val}`;
  if (v instanceof HBin) return 'b:' + v.mime;
  throw new TypeError(`not a scalar: ${String(v)}`);
}

/** Encodes a value as a JSON-ready structure (for callers that embed it in other JSON). */
export function encodeVal(v: HVal): JsonValue {
  if (v === null || typeof v === 'boolean') return v;
  if (Array.isArray(v)) return (v as readonly HVal[]).map(encodeVal);
  if (v instanceof HDict) {
    const o: Record<string, JsonValue> = {};
    for (const [k, x] of v) o[k] = encodeVal(x);
    return o;
  }
  if (v instanceof HGrid) return JSON.parse(writeJsonGrid(v)) as JsonValue;
  return scalarJsonText(v);
}

/** JSON text of one value. Numbers and DateTimes need no escaping (units and zone names hold no quote, backslash or control char). */
export function writeJsonVal(v: HVal): string {
  if (v instanceof HDateTime) return '"t:' + v.tz.formatInstant(v.epochMs, 2);
  if (v instanceof HNumber) return v.unit === null ? '"n:' + v.numText() + '"' : '"n:' + v.numText() + ' ' + v.unit + '"';
  if (v === null) return 'null';
  if (v === true) return 'true';
  if (v === false) return 'false';
  if (v === MARKER) return '"m:"';
  if (Array.isArray(v)) {
    let out = '[';
    for (let i = 0; i < v.length; i++) out += (i === 0 ? '' : ',') + writeJsonVal((v as readonly HVal[])[i] as HVal);
    return out + ']';
  }
  if (v instanceof HDict) return writeJsonDict(v);
  if (v instanceof HGrid) return writeJsonGrid(v);
  return JSON.stringify(scalarJsonText(v));
}

/** `"k":v,...` of a dict's tags, without braces. */
function writeJsonEntries(d: HDict): string {
  let out = '';
  let sep = '';
  for (const [k, v] of d) {
    out += sep + JSON.stringify(k) + ':' + writeJsonVal(v);
    sep = ',';
  }
  return out;
}

function writeJsonDict(d: HDict, first = ''): string {
  const rest = writeJsonEntries(d);
  return '{' + first + (first !== '' && rest !== '' ? ',' : '') + rest + '}';
}

/** One row of a Bool or Str history grid, from its columns (no dict or DateTime per sample); Numbers: numberRows. */
function hisRowJson(g: HisGrid): (i: number) => string {
  const { ts, tz, values } = g;
  switch (values.kind) {
    case 'Number':
      throw new TypeError('Number history is written by numberRows');
    case 'Bool':
      return (i) => '{"ts":"t:' + tz.formatInstant(ts[i] as number, 2) + (values.val[i] === true ? ',"val":true}' : ',"val":false}');
    case 'Str':
      return (i) => '{"ts":"t:' + tz.formatInstant(ts[i] as number, 2) + ',"val":' + JSON.stringify('s:' + (values.val[i] as string)) + '}';
  }
}

/**
 * A grid's JSON in pieces that concatenate to writeJsonGrid's text: history grids come in chunks
 * of rows (Number history as UTF-8 bytes, see his-rows.ts; else text, see rowChunks), grids of
 * many rows (his-grid.ts `streamed`) in chunks of rows too, anything else in one piece. The
 * server streams these.
 */
export function* writeJsonChunks(g: HGrid): Generator<string | Buffer> {
  if (g instanceof HisGrid) {
    const head = jsonHead(g) + '],"rows":[';
    if (g.values.kind === 'Number') {
      yield* numberRows(g, JSON_ROWS, head, ']}');
      return;
    }
    yield head;
    yield* rowChunks(g.size, hisRowJson(g), ',');
    yield ']}';
  } else if (streamed(g)) {
    yield* gridTextChunks(g);
  } else {
    yield writeJsonGrid(g);
  }
}

/** JSON text of rows already written (see writeJsonGrid), flat. */
const rowText = new WeakMap<HDict, string>();

/**
 * The same text, made flat. Text built with `+` is a tree of pieces in V8 (a row of a dozen tags,
 * about 25), and every join that copies it walks the tree again: a kept row text joined into
 * every answer cost 1.5-2 us a row, most of a 10,000-record read (docs/performance.md). Reading
 * a character flattens the string in place (V8 copies the pieces once, into one flat string); a
 * string already flat is left as it is.
 */
function flatten(text: string): string {
  text.charCodeAt(0);
  return text;
}

/** `{"meta":{...},"cols":[...` of a grid (without the closing bracket of cols). */
function jsonHead(g: HGrid): string {
  return jsonHeadParts(g).head;
}

function jsonHeadParts(g: HGrid): { head: string; names: string[]; keys: string[] } {
  let head = '{"meta":' + (g.meta.isEmpty() ? '{"ver":"2.0"}' : writeJsonDict(g.meta.has('ver') ? g.meta.without('ver') : g.meta, '"ver":"2.0"')) + ',"cols":[';
  const cols = g.cols;
  const names = new Array<string>(cols.length);
  const keys = new Array<string>(cols.length);
  for (let i = 0; i < cols.length; i++) {
    const c = cols[i] as HCol;
    const q = JSON.stringify(c.name);
    names[i] = c.name;
    keys[i] = q + ':';
    const m = c.meta;
    const rest = m.isEmpty() ? '' : writeJsonEntries(m.has('name') ? m.without('name') : m);
    head += (i === 0 ? '{"name":' : ',{"name":') + q + (rest === '' ? '}' : ',' + rest + '}');
  }
  return { head, names, keys };
}

/** Whole texts of small grids built from rows: immutable, so a grid answered again is free. */
const gridText = new WeakMap<HGrid, string>();

/** Small grids built from rows: immutable and often answered again, so their whole JSON is kept. */
function keptWhole(g: HGrid): boolean {
  return !(g instanceof HisGrid) && g.rowsWithinCols && g.size <= 4;
}

/** JSON text of a grid; meta always carries `ver: "2.0"` first. */
export function writeJsonGrid(g: HGrid): string {
  if (g instanceof HisGrid) return Buffer.concat([...writeJsonChunks(g)].map((c) => (typeof c === 'string' ? Buffer.from(c, 'utf8') : c))).toString('utf8');
  if (keptWhole(g)) {
    let text = gridText.get(g);
    if (text === undefined) gridText.set(g, (text = writeGridText(g)));
    return text;
  }
  return writeGridText(g);
}

/**
 * The UTF-8 bytes of writeJsonGrid, as an answer goes out. Those of small row-built grids are
 * kept (a one-record read is answered from them while the record is unchanged, with no encoding);
 * in their own allocation, never a slice of Buffer's shared pool, which a kept slice would pin.
 * The HTTP path keeps bytes, not text: half the memory of text holding any non-Latin-1 character.
 */
const gridBytes = new WeakMap<HGrid, Buffer>();

export function writeJsonBytes(g: HGrid): Buffer {
  if (keptWhole(g)) {
    let bytes = gridBytes.get(g);
    if (bytes === undefined) {
      const text = writeGridText(g);
      bytes = Buffer.allocUnsafeSlow(Buffer.byteLength(text));
      bytes.write(text, 'utf8');
      gridBytes.set(g, bytes);
    }
    return bytes;
  }
  return Buffer.from(writeJsonGrid(g), 'utf8');
}

function writeGridText(g: HGrid): string {
  return [...gridTextChunks(g)].join('');
}

/** The JSON text of a grid built from rows, in chunks of rows (rowChunks). */
function* gridTextChunks(g: HGrid): Generator<string> {
  const { head, names, keys } = jsonHeadParts(g);
  const rows = g.rows;
  let row: (r: number) => string;
  if (g.rowsWithinCols) {
    // A row object's key order does not matter in JSON, so a row can be written from itself and
    // its text reused for as long as the (immutable) row lives: records read again and again.
    row = (r) => {
      const d = rows[r] as HDict;
      let text = rowText.get(d);
      if (text === undefined) {
        text = flatten(writeJsonDict(d));
        rowText.set(d, text);
      }
      return text;
    };
  } else {
    row = (r) => {
      const d = rows[r] as HDict;
      let line = '{';
      let sep = '';
      for (let i = 0; i < names.length; i++) {
        const v = d.get(names[i] as string);
        if (v === undefined) continue;
        line += sep + (keys[i] as string) + writeJsonVal(v);
        sep = ',';
      }
      return line + '}';
    };
  }
  // Rows in flattened chunks (rowChunks): a string per row kept until one final join made the
  // garbage collector the main cost of writing big grids.
  yield head + '],"rows":[';
  yield* rowChunks(rows.length, row, ',');
  yield ']}';
}
