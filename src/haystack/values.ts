/**
 * Haystack values: every kind of docs/spec/wire-notes.md §1, immutable, with equality and a total order.
 *
 * Representation choices (kept small because history paths create millions of values):
 * - null is JS `null`; Bool is a JS boolean; Str is a JS string.
 * - List is a frozen JS array; everything else is a small class with readonly fields.
 * - DateTime keeps epoch milliseconds plus its zone; the UTC offset is derived from the zone at
 *   that instant (see tz.ts), so two instants in the repeated hour of a DST change stay distinct.
 *   Precision is the millisecond: finer fractions are accepted on input and truncated.
 */
import { ErrorCodes, HayloftError } from '../lib/errors.js';
import { type TimeZone, civilFromDays, daysFromCivil } from './tz.js';

export type Kind =
  | 'Null'
  | 'Marker'
  | 'Remove'
  | 'NA'
  | 'Bool'
  | 'Number'
  | 'Str'
  | 'Ref'
  | 'Date'
  | 'Time'
  | 'DateTime'
  | 'Uri'
  | 'Coord'
  | 'XStr'
  | 'Bin'
  | 'List'
  | 'Dict'
  | 'Grid';

export type HScalar =
  | null
  | boolean
  | string
  | HMarker
  | HRemove
  | HNA
  | HNumber
  | HRef
  | HDate
  | HTime
  | HDateTime
  | HUri
  | HCoord
  | HXStr
  | HBin;

export type HList = readonly HVal[];
export type HVal = HScalar | HList | HDict | HGrid;

/** The same value is always returned: compare with `===` or `instanceof`. */
export class HMarker {
  static readonly VAL = new HMarker();
  private constructor() {}
  toString(): string {
    return '\u2713';
  }
}
export class HRemove {
  static readonly VAL = new HRemove();
  private constructor() {}
  toString(): string {
    return 'remove';
  }
}
export class HNA {
  static readonly VAL = new HNA();
  private constructor() {}
  toString(): string {
    return 'NA';
  }
}
export const MARKER = HMarker.VAL;
export const REMOVE = HRemove.VAL;
export const NA = HNA.VAL;

function bad(message: string): HayloftError {
  return new HayloftError(ErrorCodes.BAD_VALUE, message);
}

/** Haystack unit characters: letters, `%`, `_`, `/`, `$` and anything above ASCII. */
export function isUnitText(s: string): boolean {
  if (s.length === 0) return false;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c > 127) continue;
    if ((c >= 97 && c <= 122) || (c >= 65 && c <= 90) || c === 37 || c === 95 || c === 47 || c === 36) continue;
    return false;
  }
  return true;
}

let lastNumVal = 0;
let lastNumText = '0';

/**
 * Zinc/JSON text of a number (without its unit): INF, -INF, NaN or a JS number literal. Every
 * writer of numbers goes through here. Sensor history repeats values, and number-to-text is the
 * costly part of writing one, so the last text is kept.
 */
export function numberText(v: number): string {
  if (v === lastNumVal) return lastNumText;
  if (v === Infinity) return 'INF';
  if (v === -Infinity) return '-INF';
  if (v !== v) return 'NaN';
  lastNumVal = v;
  lastNumText = String(v);
  return lastNumText;
}

// The last unit checked: checking is skipped for the same string (history repeats one unit).
let lastUnitChecked = '';

export class HNumber {
  readonly val: number;
  readonly unit: string | null;
  constructor(val: number, unit: string | null = null) {
    if (unit !== null && unit !== lastUnitChecked) {
      if (!isUnitText(unit)) throw bad(`"${unit}" is not a valid unit`);
      lastUnitChecked = unit;
    }
    this.val = val;
    this.unit = unit;
  }
  static of(val: number, unit: string | null = null): HNumber {
    return new HNumber(val, unit);
  }
  /** Zinc/JSON text of the number part (numberText). */
  numText(): string {
    return numberText(this.val);
  }
  toString(): string {
    return this.unit === null ? this.numText() : this.numText() + this.unit;
  }
}

const REF_ID_CHAR = /^[A-Za-z0-9_:\-.~]+$/;
export function isRefId(id: string): boolean {
  return REF_ID_CHAR.test(id);
}

export class HRef {
  readonly id: string;
  readonly dis: string | null;
  constructor(id: string, dis: string | null = null) {
    if (!REF_ID_CHAR.test(id)) throw bad(`"${id}" is not a valid Ref id (allowed: A-Z a-z 0-9 _ : - . ~)`);
    this.id = id;
    this.dis = dis;
  }
  static of(id: string, dis: string | null = null): HRef {
    return new HRef(id, dis);
  }
  withDis(dis: string | null): HRef {
    return dis === this.dis ? this : new HRef(this.id, dis);
  }
  toString(): string {
    return '@' + this.id;
  }
}

const DAYS_IN_MONTH = [0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
export function isLeapYear(y: number): boolean {
  return (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0;
}
export function daysInMonth(y: number, m: number): number {
  return m === 2 && isLeapYear(y) ? 29 : (DAYS_IN_MONTH[m] ?? 0);
}

function pad2(n: number): string {
  return n < 10 ? '0' + n : String(n);
}
function pad4(n: number): string {
  if (n >= 1000) return String(n);
  return String(n).padStart(4, '0');
}

export class HDate {
  readonly year: number;
  readonly month: number;
  readonly day: number;
  constructor(year: number, month: number, day: number) {
    if (!Number.isInteger(year) || year < 0 || year > 9999) throw bad(`year ${year} is out of range`);
    if (!Number.isInteger(month) || month < 1 || month > 12) throw bad(`month ${month} is out of range`);
    if (!Number.isInteger(day) || day < 1 || day > daysInMonth(year, month)) {
      throw bad(`day ${day} is out of range for ${pad4(year)}-${pad2(month)}`);
    }
    this.year = year;
    this.month = month;
    this.day = day;
  }
  static of(year: number, month: number, day: number): HDate {
    return new HDate(year, month, day);
  }
  /** Days since 1970-01-01 (proleptic Gregorian). */
  toEpochDay(): number {
    return daysFromCivil(this.year, this.month, this.day);
  }
  static fromEpochDay(d: number): HDate {
    const [y, m, day] = civilFromDays(d);
    return new HDate(y, m, day);
  }
  plusDays(n: number): HDate {
    return HDate.fromEpochDay(this.toEpochDay() + n);
  }
  toString(): string {
    return `${pad4(this.year)}-${pad2(this.month)}-${pad2(this.day)}`;
  }
}

export class HTime {
  readonly hour: number;
  readonly min: number;
  readonly sec: number;
  readonly ms: number;
  constructor(hour: number, min: number, sec = 0, ms = 0) {
    if (!Number.isInteger(hour) || hour < 0 || hour > 23) throw bad(`hour ${hour} is out of range`);
    if (!Number.isInteger(min) || min < 0 || min > 59) throw bad(`minute ${min} is out of range`);
    if (!Number.isInteger(sec) || sec < 0 || sec > 59) throw bad(`second ${sec} is out of range`);
    if (!Number.isInteger(ms) || ms < 0 || ms > 999) throw bad(`millisecond ${ms} is out of range`);
    this.hour = hour;
    this.min = min;
    this.sec = sec;
    this.ms = ms;
  }
  static of(hour: number, min: number, sec = 0, ms = 0): HTime {
    return new HTime(hour, min, sec, ms);
  }
  /** Milliseconds since midnight. */
  toMillis(): number {
    return ((this.hour * 60 + this.min) * 60 + this.sec) * 1000 + this.ms;
  }
  toString(): string {
    const base = `${pad2(this.hour)}:${pad2(this.min)}:${pad2(this.sec)}`;
    return this.ms === 0 ? base : base + '.' + String(this.ms).padStart(3, '0');
  }
}

/**
 * An instant with a zone. Construct through tz.ts helpers (`dateTime(...)`, `parseDateTime`) so the
 * zone is resolved once; the offset is looked up from the zone's cached table.
 */
export class HDateTime {
  readonly epochMs: number;
  readonly tz: TimeZone;
  constructor(epochMs: number, tz: TimeZone) {
    if (!Number.isFinite(epochMs)) throw bad(`DateTime instant ${epochMs} is not finite`);
    this.epochMs = Math.trunc(epochMs);
    this.tz = tz;
  }
  /** UTC offset in seconds in force in this zone at this instant. */
  get offsetSec(): number {
    return this.tz.offsetAt(this.epochMs);
  }
  /** The same instant in another zone. */
  inZone(tz: TimeZone): HDateTime {
    return tz === this.tz ? this : new HDateTime(this.epochMs, tz);
  }
  /** The local date in this value's zone. */
  date(): HDate {
    return HDate.fromEpochDay(Math.floor((this.epochMs + this.offsetSec * 1000) / 86_400_000));
  }
  /** The local time of day in this value's zone. */
  time(): HTime {
    const local = this.epochMs + this.offsetSec * 1000;
    const msOfDay = local - Math.floor(local / 86_400_000) * 86_400_000;
    const sec = Math.floor(msOfDay / 1000);
    return new HTime(Math.floor(sec / 3600), Math.floor(sec / 60) % 60, sec % 60, msOfDay % 1000);
  }
  toString(): string {
    return this.tz.formatInstant(this.epochMs, 1);
  }
}

export class HUri {
  readonly val: string;
  constructor(val: string) {
    this.val = val;
  }
  static of(val: string): HUri {
    return new HUri(val);
  }
  toString(): string {
    return this.val;
  }
}

export class HCoord {
  readonly lat: number;
  readonly lng: number;
  constructor(lat: number, lng: number) {
    if (!(lat >= -90 && lat <= 90)) throw bad(`latitude ${lat} is out of range -90..90`);
    if (!(lng >= -180 && lng <= 180)) throw bad(`longitude ${lng} is out of range -180..180`);
    this.lat = lat;
    this.lng = lng;
  }
  static of(lat: number, lng: number): HCoord {
    return new HCoord(lat, lng);
  }
  toString(): string {
    return `C(${this.lat},${this.lng})`;
  }
}

export class HXStr {
  readonly type: string;
  readonly val: string;
  constructor(type: string, val: string) {
    if (!/^[A-Z][A-Za-z0-9_]*$/.test(type)) throw bad(`"${type}" is not a valid XStr type (it starts with a capital letter)`);
    this.type = type;
    this.val = val;
  }
  static of(type: string, val: string): HXStr {
    return new HXStr(type, val);
  }
  toString(): string {
    return `${this.type}("${this.val}")`;
  }
}

/** Legacy Haystack 2 Bin: only a MIME type. Read for compatibility, never produced by Hayloft. */
export class HBin {
  readonly mime: string;
  constructor(mime: string) {
    this.mime = mime;
  }
  toString(): string {
    return `Bin("${this.mime}")`;
  }
}

const TAG_NAME = /^[a-z][a-zA-Z0-9_]*$/;
/** Haystack tag/column names: a lowercase ASCII letter, then letters, digits or `_`. */
export function isTagName(s: string): boolean {
  return TAG_NAME.test(s);
}

export type TagRecord = Record<string, HVal>;

/**
 * Objects with an empty, prototype-less prototype: no inherited names (`toString`, `__proto__`
 * are plain keys) yet, unlike `Object.create(null)`, V8 keeps them in fast mode with hidden
 * classes, which matters for millions of history rows.
 */
const EmptyRecord = function EmptyRecord() {} as unknown as { new (): TagRecord; prototype: object };
EmptyRecord.prototype = Object.create(null) as object;

/** A fresh record for building a dict; hand it to `HDict.adopt` when done. */
export function newRecord(): TagRecord {
  return new EmptyRecord();
}

/**
 * A Dict: tag name to non-null value. A null value means "absent", so it is never stored.
 * Iteration order is insertion order.
 */
export class HDict {
  static readonly EMPTY = new HDict(newRecord());
  private readonly tags: Readonly<TagRecord>;

  private constructor(tags: TagRecord) {
    this.tags = tags;
  }

  /** From plain tags; null and undefined values are dropped. */
  static of(tags: Readonly<Record<string, HVal | undefined>> | ReadonlyMap<string, HVal | undefined>): HDict {
    const rec = newRecord();
    const entries = tags instanceof Map ? tags.entries() : Object.entries(tags);
    for (const [k, v] of entries as Iterable<[string, HVal | undefined]>) {
      if (v !== null && v !== undefined) rec[k] = v;
    }
    return new HDict(rec);
  }

  /**
   * Wraps a null-prototype record the caller built and will never touch again (decoders use this
   * to avoid a copy per row). The record must hold no null or undefined values.
   */
  static adopt(rec: TagRecord): HDict {
    return new HDict(rec);
  }

  get(name: string): HVal | undefined {
    return this.tags[name];
  }
  has(name: string): boolean {
    return this.tags[name] !== undefined;
  }
  /** Has the tag and it is not Remove (the Haystack "has" test for filters and markers). */
  isMarker(name: string): boolean {
    return this.tags[name] === MARKER;
  }
  names(): string[] {
    return Object.keys(this.tags);
  }
  get size(): number {
    return Object.keys(this.tags).length;
  }
  isEmpty(): boolean {
    for (const _ in this.tags) return false;
    return true;
  }
  entries(): [string, HVal][] {
    return Object.entries(this.tags);
  }
  *[Symbol.iterator](): IterableIterator<[string, HVal]> {
    for (const k in this.tags) yield [k, this.tags[k] as HVal];
  }
  /** A copy as a plain null-prototype object (safe to modify). */
  toRecord(): TagRecord {
    return Object.assign(newRecord(), this.tags);
  }
  /** A new dict with these tags changed; null or undefined removes a tag. */
  with(changes: Readonly<Record<string, HVal | undefined>>): HDict {
    const rec = this.toRecord();
    for (const k of Object.keys(changes)) {
      const v = changes[k];
      if (v === null || v === undefined) delete rec[k];
      else rec[k] = v;
    }
    return new HDict(rec);
  }
  without(...names: string[]): HDict {
    const rec = this.toRecord();
    for (const n of names) delete rec[n];
    return new HDict(rec);
  }
  /** Tags as `Ref`, or undefined when missing or of another kind. */
  ref(name: string): HRef | undefined {
    const v = this.tags[name];
    return v instanceof HRef ? v : undefined;
  }
  str(name: string): string | undefined {
    const v = this.tags[name];
    return typeof v === 'string' ? v : undefined;
  }
  num(name: string): HNumber | undefined {
    const v = this.tags[name];
    return v instanceof HNumber ? v : undefined;
  }
  toString(): string {
    return '{' + this.names().join(' ') + '}';
  }
}

export interface HCol {
  readonly name: string;
  readonly meta: HDict;
}

/**
 * A Grid: meta, ordered columns with meta, rows as dicts. An empty grid has one column `empty`.
 * Subclasses may hold their rows in another form (history as columns: his-grid.ts) and build the
 * dicts only when `rows` is asked for; encoders that know the subclass skip that.
 */
export class HGrid {
  readonly meta: HDict;
  readonly cols: readonly HCol[];
  private rowDicts: readonly HDict[] | undefined;
  private colIndex: Map<string, number> | undefined;

  /**
   * True when every tag of every row is a column (grids built by `fromRows`): an encoder may then
   * write a row from the row alone, and reuse that text for the same immutable row.
   */
  readonly rowsWithinCols: boolean;

  constructor(meta: HDict, cols: readonly HCol[], rows: readonly HDict[] | undefined, rowsWithinCols = false) {
    this.meta = meta;
    this.cols = cols;
    this.rowDicts = rows;
    this.rowsWithinCols = rowsWithinCols;
  }

  get rows(): readonly HDict[] {
    return (this.rowDicts ??= this.buildRows());
  }

  /** Rows of a subclass that keeps them in another form (called once, on first use of `rows`). */
  protected buildRows(): readonly HDict[] {
    return [];
  }

  /** Builds a grid whose columns are the union of the rows' tags, in first-seen order. */
  static fromRows(rows: readonly HDict[], meta: HDict = HDict.EMPTY, firstCols: readonly string[] = []): HGrid {
    const seen = new Set<string>(firstCols);
    const order = [...firstCols];
    for (const r of rows) {
      for (const k of r.names()) {
        if (!seen.has(k)) {
          seen.add(k);
          order.push(k);
        }
      }
    }
    if (order.length === 0) return HGrid.empty(meta);
    return new HGrid(
      meta,
      order.map((name) => ({ name, meta: HDict.EMPTY })),
      rows,
      true,
    );
  }

  static empty(meta: HDict = HDict.EMPTY): HGrid {
    return new HGrid(meta, [{ name: 'empty', meta: HDict.EMPTY }], []);
  }

  col(name: string): HCol | undefined {
    if (this.colIndex === undefined) {
      this.colIndex = new Map(this.cols.map((c, i) => [c.name, i]));
    }
    const i = this.colIndex.get(name);
    return i === undefined ? undefined : this.cols[i];
  }
  hasCol(name: string): boolean {
    return this.col(name) !== undefined;
  }
  colNames(): string[] {
    return this.cols.map((c) => c.name);
  }
  /** True when there are no rows (whatever the columns). */
  isEmpty(): boolean {
    return this.size === 0;
  }
  get size(): number {
    return this.rows.length;
  }
  first(): HDict | undefined {
    return this.rows[0];
  }
  toString(): string {
    return `Grid(${this.cols.length} cols, ${this.rows.length} rows)`;
  }
}

/** The kind of a value, by docs/spec/wire-notes.md §1. */
export function kindOf(v: HVal | undefined): Kind {
  if (v === null || v === undefined) return 'Null';
  switch (typeof v) {
    case 'boolean':
      return 'Bool';
    case 'string':
      return 'Str';
  }
  if (Array.isArray(v)) return 'List';
  if (v instanceof HNumber) return 'Number';
  if (v instanceof HRef) return 'Ref';
  if (v instanceof HDateTime) return 'DateTime';
  if (v === MARKER) return 'Marker';
  if (v instanceof HDict) return 'Dict';
  if (v instanceof HDate) return 'Date';
  if (v instanceof HTime) return 'Time';
  if (v instanceof HUri) return 'Uri';
  if (v === REMOVE) return 'Remove';
  if (v === NA) return 'NA';
  if (v instanceof HCoord) return 'Coord';
  if (v instanceof HXStr) return 'XStr';
  if (v instanceof HBin) return 'Bin';
  if (v instanceof HGrid) return 'Grid';
  throw new TypeError(`not a Haystack value: ${String(v)}`);
}

/** Rank of each kind in the total order used by `compare`. */
const KIND_RANK: Record<Kind, number> = {
  Null: 0,
  Marker: 1,
  Remove: 2,
  NA: 3,
  Bool: 4,
  Number: 5,
  Str: 6,
  Ref: 7,
  Uri: 8,
  Date: 9,
  Time: 10,
  DateTime: 11,
  Coord: 12,
  XStr: 13,
  Bin: 14,
  List: 15,
  Dict: 16,
  Grid: 17,
};

function cmpPrim(a: number | string, b: number | string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** NaN sorts after every other number so the order is total. */
function cmpNum(a: number, b: number): number {
  const an = a !== a;
  const bn = b !== b;
  if (an || bn) return an === bn ? 0 : an ? 1 : -1;
  return cmpPrim(a, b);
}

/**
 * A total order over all values: by kind first, then within the kind (numbers by value then unit,
 * DateTimes by instant, Refs by id, lists element-wise, ...). Filters use `sameKindCompare`.
 */
export function compare(a: HVal | undefined, b: HVal | undefined): number {
  const ka = kindOf(a);
  const kb = kindOf(b);
  if (ka !== kb) return KIND_RANK[ka] - KIND_RANK[kb];
  return compareSameKind(ka, a as HVal, b as HVal);
}

function compareSameKind(kind: Kind, a: HVal, b: HVal): number {
  switch (kind) {
    case 'Null':
    case 'Marker':
    case 'Remove':
    case 'NA':
      return 0;
    case 'Bool':
      return (a === true ? 1 : 0) - (b === true ? 1 : 0);
    case 'Str':
      return cmpPrim(a as string, b as string);
    case 'Number': {
      const x = a as HNumber;
      const y = b as HNumber;
      return cmpNum(x.val, y.val) || cmpPrim(x.unit ?? '', y.unit ?? '');
    }
    case 'Ref':
      return cmpPrim((a as HRef).id, (b as HRef).id);
    case 'Uri':
      return cmpPrim((a as HUri).val, (b as HUri).val);
    case 'Date': {
      const x = a as HDate;
      const y = b as HDate;
      return x.year - y.year || x.month - y.month || x.day - y.day;
    }
    case 'Time':
      return (a as HTime).toMillis() - (b as HTime).toMillis();
    case 'DateTime': {
      const x = a as HDateTime;
      const y = b as HDateTime;
      return x.epochMs - y.epochMs || cmpPrim(x.tz.name, y.tz.name);
    }
    case 'Coord': {
      const x = a as HCoord;
      const y = b as HCoord;
      return cmpNum(x.lat, y.lat) || cmpNum(x.lng, y.lng);
    }
    case 'XStr': {
      const x = a as HXStr;
      const y = b as HXStr;
      return cmpPrim(x.type, y.type) || cmpPrim(x.val, y.val);
    }
    case 'Bin':
      return cmpPrim((a as HBin).mime, (b as HBin).mime);
    case 'List': {
      const x = a as HList;
      const y = b as HList;
      const n = Math.min(x.length, y.length);
      for (let i = 0; i < n; i++) {
        const c = compare(x[i], y[i]);
        if (c !== 0) return c;
      }
      return x.length - y.length;
    }
    case 'Dict':
      return compareDicts(a as HDict, b as HDict);
    case 'Grid':
      return compareGrids(a as HGrid, b as HGrid);
  }
}

function compareDicts(a: HDict, b: HDict): number {
  const an = a.names().sort();
  const bn = b.names().sort();
  const n = Math.min(an.length, bn.length);
  for (let i = 0; i < n; i++) {
    const c = cmpPrim(an[i] as string, bn[i] as string) || compare(a.get(an[i] as string), b.get(bn[i] as string));
    if (c !== 0) return c;
  }
  return an.length - bn.length;
}

function compareGrids(a: HGrid, b: HGrid): number {
  let c = compareDicts(a.meta, b.meta) || a.cols.length - b.cols.length;
  if (c !== 0) return c;
  for (let i = 0; i < a.cols.length; i++) {
    const x = a.cols[i] as HCol;
    const y = b.cols[i] as HCol;
    c = cmpPrim(x.name, y.name) || compareDicts(x.meta, y.meta);
    if (c !== 0) return c;
  }
  const n = Math.min(a.rows.length, b.rows.length);
  for (let i = 0; i < n; i++) {
    c = compareDicts(a.rows[i] as HDict, b.rows[i] as HDict);
    if (c !== 0) return c;
  }
  return a.rows.length - b.rows.length;
}

/**
 * Structural equality. Numbers are equal when value and unit are (NaN equals NaN, so a decoded
 * NaN round-trips); Refs compare by id only (the display is not part of identity); DateTimes by
 * instant and zone.
 */
export function equals(a: HVal | undefined, b: HVal | undefined): boolean {
  if (a === b) return true;
  if (a === undefined || b === undefined) return false;
  return compare(a, b) === 0;
}
