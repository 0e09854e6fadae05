/**
 * The rows of a Number history grid as JSON or Zinc, written straight into UTF-8 bytes: hisRead of
 * a point-year is half a million rows. Built as text, each row was a handful of strings joined,
 * then the joined text was encoded again to UTF-8 by the socket (the ° of °C makes it more than
 * a copy): together with the garbage collector that was most of the answer's cost. Here a row is
 * bytes copied from small pieces kept while they stay the same (the date, the offset and zone,
 * the unit, the last value) and the time of day written as digits.
 *
 * The text is exactly that of the row writers of json.ts and zinc.ts (test/haystack/his-grid.test.ts
 * compares them).
 */
import type { HisGrid } from './his-grid.js';
import { numberText } from './values.js';

/** Bytes per chunk handed to the socket: large enough that a write per chunk costs little. */
const CHUNK = 64 * 1024;

const DAY = 86_400_000;

const enc = new TextEncoder();

/** Writes an ASCII string's codes at `at`; returns the end. */
function putAscii(b: Uint8Array, at: number, s: string): number {
  for (let k = 0; k < s.length; k++) b[at++] = s.charCodeAt(k);
  return at;
}

/** Copies a few bytes at `at` (a loop: set()'s call costs more for a dozen); returns the end. */
function putBytes(b: Uint8Array, at: number, x: Uint8Array): number {
  for (let k = 0; k < x.length; k++) b[at++] = x[k] as number;
  return at;
}

function put2(b: Uint8Array, at: number, n: number): void {
  b[at] = 0x30 + ((n / 10) | 0);
  b[at + 1] = 0x30 + (n % 10);
}

const SCALE = [1, 10, 100, 1000];

/**
 * The number of decimals (0 to 3) with which String(v) writes v, when v is finite, below 1e9 in
 * magnitude and has at most 3 decimals; else -1. For such v, the fewest decimals k at which
 * round(v * 10^k) / 10^k gives v back are the shortest text that reads back as v, which is what
 * String writes (ECMAScript Number::toString; no other text of that length reads back as v, as
 * doubles below 1e9 are far closer together than 10^-3).
 */
function shortDecimal(v: number): number {
  if (!(v > -1e9 && v < 1e9)) return -1;
  for (let k = 0; k <= 3; k++) {
    const s = SCALE[k] as number;
    if (Math.round(v * s) / s === v) return k;
  }
  return -1;
}

/** Writes v with k decimals (see shortDecimal): `-12.5`, `0.25`, `7`; returns the end. */
function putDecimal(b: Uint8Array, at: number, v: number, k: number): number {
  const s = SCALE[k] as number;
  let m = Math.round(Math.abs(v) * s);
  if (v < 0) b[at++] = 0x2d;
  const ip = Math.floor(m / s);
  m -= ip * s;
  // The integer part's digits, most significant first.
  let p = 1;
  while (p * 10 <= ip) p *= 10;
  for (let x = ip; p >= 1; p /= 10) {
    const d = Math.floor(x / p);
    b[at++] = 0x30 + d;
    x -= d * p;
  }
  if (k > 0) {
    b[at++] = 0x2e;
    for (let q = s / 10; q >= 1; q /= 10) {
      const d = Math.floor(m / q);
      b[at++] = 0x30 + d;
      m -= d * q;
    }
  }
  return at;
}

/** What a format puts around a row's timestamp and number. */
export interface RowFormat {
  /** Before the timestamp: `{"ts":"t:` in JSON. */
  readonly open: string;
  /** formatInstant's `tail` argument: what follows the offset (` Zone"` in JSON, ` Zone` in Zinc). */
  readonly zoneTail: 1 | 2;
  /** Between the timestamp and the number: `,"val":"n:` in JSON. */
  readonly mid: string;
  /** After the unit: `"}` in JSON, a newline in Zinc; `unitSpace`: a space before the unit (JSON). */
  readonly close: string;
  readonly unitSpace: boolean;
  /** Between rows (JSON's comma), or ''. */
  readonly sep: string;
  /** Zinc writes a zero before a unit starting with x as 0.0 (`0x...` would read as hex). */
  readonly zeroBeforeX: boolean;
  /** Zinc writes INF, -INF and NaN without the unit. */
  readonly bareSpecials: boolean;
}

export const JSON_ROWS: RowFormat = { open: '{"ts":"t:', zoneTail: 2, mid: ',"val":"n:', close: '"}', unitSpace: true, sep: ',', zeroBeforeX: false, bareSpecials: false };
export const ZINC_ROWS: RowFormat = { open: '', zoneTail: 1, mid: ',', close: '\n', unitSpace: false, sep: '', zeroBeforeX: true, bareSpecials: true };

/**
 * Writes rows into chunks. A class with a plain loop rather than a generator doing it all: the
 * loop is compiled once and stays compiled; a generator's loop, left at every yield and at every
 * new day, was compiled again and again (V8 deoptimised it at each cold call site).
 */
class RowWriter {
  private readonly ts: Float64Array | readonly number[];
  private readonly val: Float64Array | readonly number[];
  private readonly tz: HisGrid['tz'];
  private readonly f: RowFormat;
  /** `" °C"}` (or `"}`) in JSON: the end of every row. */
  private readonly end: Uint8Array;
  /** The end of a row whose number is INF, -INF or NaN. */
  private readonly endSpecial: Uint8Array;
  private readonly sep: number;
  /** Whether a zero is written 0.0 (Zinc, a unit starting with x). */
  private readonly zeroText: boolean;
  i = 0;
  // The date (`YYYY-MM-DDT`) and the offset and zone (`+11:00 Sydney"`) of the last row, by day
  // and offset: they change a few times a year of rows.
  private lastDay = NaN;
  private lastOff = NaN;
  private dayBytes = new Uint8Array(0);
  private tailBytes = new Uint8Array(0);
  private lastV = NaN;
  private lastVText = 'NaN';
  /** Room one row needs, but for its number's text. */
  private room = 0;

  constructor(g: HisGrid, f: RowFormat) {
    const values = g.values;
    if (values.kind !== 'Number') throw new TypeError('numberRows: a Number history grid');
    this.ts = g.ts;
    this.val = values.val;
    this.tz = g.tz;
    this.f = f;
    const unit = values.unit;
    this.end = enc.encode((unit !== null ? (f.unitSpace ? ' ' : '') + unit : '') + f.close);
    this.endSpecial = f.bareSpecials ? enc.encode(f.close) : this.end;
    this.sep = f.sep === '' ? -1 : f.sep.charCodeAt(0);
    this.zeroText = f.zeroBeforeX && unit !== null && unit.startsWith('x');
  }

  /** From the text writer itself, split: whatever it writes for a date or a zone, this writes. */
  private newDay(t: number, day: number, off: number, ms: number): void {
    const whole = this.tz.formatInstant(t, this.f.zoneTail);
    const tAt = whole.indexOf('T');
    this.dayBytes = enc.encode(whole.slice(0, tAt + 1));
    this.tailBytes = enc.encode(whole.slice(tAt + 9 + (ms !== 0 ? 4 : 0)));
    this.lastDay = day;
    this.lastOff = off;
    this.room = 32 + this.f.open.length + this.dayBytes.length + 13 + this.tailBytes.length + this.f.mid.length + this.end.length;
  }

  /** Writes rows into b from `at` while they fit; returns where they end. */
  fill(b: Buffer, at: number): number {
    const { ts, val, tz, end, sep } = this;
    const { open, mid } = this.f;
    const n = ts.length;
    const cap = b.length;
    let i = this.i;
    // Where the last row written whole in this chunk starts (-1: none yet), how long it is up to
    // its number, and with what (milliseconds or not, date, offset).
    let tmpl = -1;
    let tmplLen = 0;
    let tmplMs = false;
    let tmplDay = NaN;
    let tmplOff = NaN;
    for (; i < n; i++) {
      const t = ts[i] as number;
      const off = tz.offsetAt(t);
      const local = t + off * 1000;
      const day = Math.floor(local / DAY);
      const msOfDay = local - day * DAY;
      const sec = Math.floor(msOfDay / 1000);
      const ms = msOfDay - sec * 1000;
      if (day !== this.lastDay || off !== this.lastOff) this.newDay(t, day, off, ms);
      const v = val[i] as number;
      // Most values have a few decimals and are written digit by digit (shortDecimal); others as
      // String writes them.
      const k = v === 0 && this.zeroText ? -1 : shortDecimal(v);
      let text = '';
      if (k < 0) {
        if (!Object.is(v, this.lastV)) {
          this.lastV = v;
          this.lastVText = v === 0 && this.zeroText ? '0.0' : numberText(v);
        }
        text = this.lastVText;
      }
      if (at + this.room + (k < 0 ? text.length : 16) > cap) break;
      if (i > 0 && sep >= 0) b[at++] = sep;
      const rowAt = at;
      const copied = tmpl >= 0 && (ms !== 0) === tmplMs && this.lastDay === tmplDay && this.lastOff === tmplOff;
      if (copied) {
        // The row before in this chunk has the same date, offset and zone: copy its bytes up to
        // its number (one call instead of some fifty byte stores) and put this row's time in.
        b.copyWithin(at, tmpl, tmpl + tmplLen);
        at += open.length + this.dayBytes.length;
      } else {
        at = putAscii(b, at, open);
        at = putBytes(b, at, this.dayBytes);
      }
      put2(b, at, (sec / 3600) | 0);
      b[at + 2] = 0x3a;
      put2(b, at + 3, ((sec / 60) | 0) % 60);
      b[at + 5] = 0x3a;
      put2(b, at + 6, sec % 60);
      at += 8;
      if (ms !== 0) {
        b[at] = 0x2e;
        b[at + 1] = 0x30 + ((ms / 100) | 0);
        put2(b, at + 2, ms % 100);
        at += 4;
      }
      if (copied) at = rowAt + tmplLen;
      else {
        at = putBytes(b, at, this.tailBytes);
        at = putAscii(b, at, mid);
        tmpl = rowAt;
        tmplLen = at - rowAt;
        tmplMs = ms !== 0;
        tmplDay = this.lastDay;
        tmplOff = this.lastOff;
      }
      at = k < 0 ? putAscii(b, at, text) : putDecimal(b, at, v, k);
      at = putBytes(b, at, v - v === 0 ? end : this.endSpecial);
    }
    this.i = i;
    return at;
  }
}

/**
 * The rows of g (Number values) in format f (`{"ts":"t:...","val":"n:..."}` comma-separated in
 * JSON, `ts,val` lines in Zinc) after `head` and before `foot`, in Buffers of about CHUNK bytes,
 * each ending between rows.
 */
export function* numberRows(g: HisGrid, f: RowFormat, head: string, foot: string): Generator<Buffer> {
  const w = new RowWriter(g, f);
  const n = g.ts.length;
  let b = Buffer.allocUnsafeSlow(CHUNK);
  let at = 0;
  const headBytes = enc.encode(head);
  if (headBytes.length > CHUNK / 2) yield Buffer.from(headBytes);
  else {
    b.set(headBytes, 0);
    at = headBytes.length;
  }
  for (;;) {
    at = w.fill(b, at);
    if (w.i >= n) break;
    yield b.subarray(0, at);
    b = Buffer.allocUnsafeSlow(CHUNK);
    at = 0;
  }
  const footBytes = enc.encode(foot);
  if (footBytes.length === 0) {
    yield b.subarray(0, at);
    return;
  }
  if (at + footBytes.length > CHUNK) {
    yield b.subarray(0, at);
    yield Buffer.from(footBytes);
    return;
  }
  b.set(footBytes, at);
  yield b.subarray(0, at + footBytes.length);
}
