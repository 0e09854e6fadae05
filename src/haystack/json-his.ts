/**
 * A fast path for the JSON body of a one-point Number hisWrite as clients send it:
 *
 *   {"meta":{...,"id":"r:..."},"cols":[{"name":"ts"},{"name":"val"}],
 *    "rows":[{"ts":"t:2024-01-01T11:00:00+11:00 Sydney","val":"n:21.3 °C"},...]}
 *
 * read from the body's bytes straight into two columns: no text of the whole body, no JSON.parse
 * of it (an object and two strings per row), no Haystack value per cell. Decoding 10,000 rows the
 * general way cost about twice the store write, half of it in the garbage collector.
 *
 * It decides nothing: any byte it does not expect (an escape, a third key, another zone or unit,
 * a value it cannot parse, text that is not UTF-8) returns undefined, and the body is decoded the
 * general way (readJsonGrid), which accepts and refuses exactly what it always did, with the same
 * errors. What it accepts it decodes to the grid readJsonGrid would return: meta and columns go
 * through the same decoder, timestamps through the same parser, and numbers are parsed from their
 * digits only where that is exact (see decimal()).
 */
import { HisGrid } from './his-grid.js';
import { decodeGrid, isNumberText, numberOf } from './json.js';
import { DEFAULT_SHAPE_LIMITS, type ShapeLimits } from './limits.js';
import { parseInstant, parsedZone } from './datetime.js';
import type { TimeZone } from './tz.js';
import { isUnitText } from './values.js';

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;
const COMMA = 0x2c;
const SPACE = 0x20;

const UTF8 = new TextDecoder('utf-8', { fatal: true });

/** Thrown inside to give up (one object, made once); never leaves this module. */
const NOT_FAST = new Error('not the fast case');

/** 10^k for k <= 22: every one exact in a double. */
const POW10 = Array.from({ length: 23 }, (_, k) => 10 ** k);

const KEYS4 = ['meta', 'cols', 'rows'];

class Reader {
  i = 0;
  constructor(
    readonly b: Buffer,
    readonly lim: ShapeLimits,
  ) {}

  ws(): void {
    const b = this.b;
    let i = this.i;
    for (let c = b[i]; c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09; c = b[++i]);
    this.i = i;
  }

  /** Skips whitespace, then expects byte `c`. */
  expect(c: number): void {
    this.ws();
    if (this.b[this.i] !== c) throw NOT_FAST;
    this.i++;
  }

  /** Skips whitespace; consumes `c` and returns true when it is next. */
  maybe(c: number): boolean {
    this.ws();
    if (this.b[this.i] !== c) return false;
    this.i++;
    return true;
  }

  /**
   * A string without escapes or control characters: returns [start, end) of its bytes (after the
   * opening quote, before the closing one).
   */
  plainString(): number {
    this.expect(QUOTE);
    const b = this.b;
    let i = this.i;
    for (;;) {
      const c = b[i];
      if (c === QUOTE) break;
      if (c === undefined || c === BACKSLASH || c < 0x20) throw NOT_FAST;
      i++;
    }
    const start = this.i;
    this.i = i + 1;
    if (i - start > this.lim.maxValueChars) throw NOT_FAST;
    return start;
  }

  /** A key and its colon: 0 for "ts", 1 for "val", 2 "meta", 3 "cols", 4 "rows"; anything else gives up. */
  key(): number {
    const start = this.plainString();
    const b = this.b;
    let k = -1;
    switch (this.i - 1 - start) {
      case 2:
        if (b[start] === 0x74 && b[start + 1] === 0x73) k = 0;
        break;
      case 3:
        if (b[start] === 0x76 && b[start + 1] === 0x61 && b[start + 2] === 0x6c) k = 1;
        break;
      case 4:
        k = KEYS4.indexOf(String.fromCharCode(b[start] as number, b[start + 1] as number, b[start + 2] as number, b[start + 3] as number));
        if (k >= 0) k += 2;
        break;
    }
    if (k < 0) throw NOT_FAST;
    this.expect(COLON);
    return k;
  }

  /**
   * Skips one JSON value (its syntax is checked afterwards, by JSON.parse of its bytes); returns
   * where it starts. Strings are skipped escape by escape; brackets and braces are counted.
   */
  skipValue(): number {
    this.ws();
    const b = this.b;
    const start = this.i;
    let i = start;
    let depth = 0;
    do {
      const c = b[i];
      if (c === undefined) throw NOT_FAST;
      if (c === QUOTE) {
        for (let d = b[++i]; d !== QUOTE; d = b[++i]) {
          if (d === undefined) throw NOT_FAST;
          if (d === BACKSLASH) i++;
        }
      } else if (c === 0x7b || c === 0x5b) depth++;
      else if (c === 0x7d || c === 0x5d) depth--;
      else if (depth === 0) {
        // A number or a literal: up to the next delimiter.
        while (i < b.length && b[i] !== COMMA && b[i] !== 0x7d && b[i] !== 0x5d && b[i] !== SPACE && b[i] !== 0x0a && b[i] !== 0x0d && b[i] !== 0x09) i++;
        break;
      }
      i++;
    } while (depth > 0);
    if (depth !== 0) throw NOT_FAST;
    this.i = i;
    return start;
  }
}

/**
 * The number in `b[start, end)` when it is plain decimal digits (an optional minus, digits, an
 * optional fraction) whose digits make an integer below 2^53 and whose fraction has at most 22
 * digits: then digits / 10^k is one correctly rounded division of two exact doubles, equal to
 * Number(text). Else NaN: the caller parses the text.
 */
function decimal(b: Uint8Array, start: number, end: number): number {
  let i = start;
  const neg = b[i] === 0x2d;
  if (neg) i++;
  const d0 = i;
  let m = 0;
  let c = b[i] as number;
  while (i < end && c >= 0x30 && c <= 0x39) {
    m = m * 10 + (c - 0x30);
    c = b[++i] as number;
  }
  if (i === d0) return NaN;
  let k = 0;
  if (i < end && c === 0x2e) {
    const f0 = ++i;
    c = b[i] as number;
    while (i < end && c >= 0x30 && c <= 0x39) {
      m = m * 10 + (c - 0x30);
      c = b[++i] as number;
    }
    k = i - f0;
    if (k === 0) return NaN;
  }
  if (i !== end || k > 22 || m > Number.MAX_SAFE_INTEGER) return NaN;
  const v = k === 0 ? m : m / (POW10[k] as number);
  return neg ? -v : v;
}

/** ASCII text of b[start, end); anything else gives up. */
function ascii(b: Buffer, start: number, end: number): string {
  for (let k = start; k < end; k++) if ((b[k] as number) >= 0x80) throw NOT_FAST;
  return b.toString('latin1', start, end);
}

/** Digits b[i], b[i+1] as a number, or -1. */
function num2(b: Buffer, i: number): number {
  const x = (b[i] as number) - 0x30;
  const y = (b[i + 1] as number) - 0x30;
  return x >= 0 && x <= 9 && y >= 0 && y <= 9 ? x * 10 + y : -1;
}

/** Whether b[a, a+n) and b[c, c+n) are the same bytes (a loop: Buffer.compare's call costs more for a dozen). */
function same(b: Buffer, a: number, c: number, n: number): boolean {
  for (let k = 0; k < n; k++) if (b[a + k] !== b[c + k]) return false;
  return true;
}

/**
 * Timestamps of a history body: consecutive rows nearly always share their date and their offset
 * and zone (`2024-01-01T` ... `+11:00 Sydney`) and differ in the time of day only. The first row
 * of a date or offset is parsed by parseInstant (the general decoder's parser, which validates it
 * whole); a row whose date and suffix are the same bytes as the last one parsed that way needs
 * only its time read (`hh:mm:ss[.fraction]`, as parseInstant reads it) and its offset checked
 * against its zone at that instant, as parseInstant checks it.
 */
class Stamps {
  /** Where the date (YYYY-MM-DDT, 11 bytes) of the last row parsed whole starts; -1: none yet. */
  private dateAt = -1;
  private suffixAt = 0;
  private suffixLen = 0;
  /** Epoch ms of that date's local midnight at that offset: a row's instant is this plus its time. */
  private base = 0;
  private off = 0;
  private tz: TimeZone | undefined;
  private readonly time = { end: 0 };

  /** The instant of the DateTime text in b[p, end) (after `t:`); parsedZone() gives its zone. */
  instant(b: Buffer, p: number, end: number): number {
    const tod = timeOfDay(b, p + 11, end, this.time);
    const todEnd = this.time.end;
    if (tod >= 0 && this.dateAt >= 0 && end - todEnd === this.suffixLen && same(b, this.dateAt, p, 11) && same(b, this.suffixAt, todEnd, this.suffixLen)) {
      const t = this.base + tod;
      const tz = this.tz as TimeZone;
      if (tz.offsetAt(t) === this.off && parsedZone() === tz) return t;
    }
    let t: number;
    try {
      t = parseInstant(ascii(b, p, end));
    } catch {
      throw NOT_FAST;
    }
    if (tod >= 0) {
      this.dateAt = p;
      this.suffixAt = todEnd;
      this.suffixLen = end - todEnd;
      this.base = t - tod;
      this.tz = parsedZone();
      this.off = this.tz.offsetAt(t);
    } else this.dateAt = -1;
    return t;
  }
}

/**
 * `hh:mm:ss[.fraction]` at i, as milliseconds since midnight (fraction truncated to ms, as
 * parseInstant reads it), its end in `at.end`; -1 for any other form (parseInstant reads those).
 */
function timeOfDay(b: Buffer, i: number, end: number, at: { end: number }): number {
  if (i + 8 > end || b[i + 2] !== COLON || b[i + 5] !== COLON) return -1;
  const h = num2(b, i);
  const m = num2(b, i + 3);
  const sec = num2(b, i + 6);
  if (h < 0 || m < 0 || sec < 0 || h > 23 || m > 59 || sec > 59) return -1;
  let j = i + 8;
  let ms = 0;
  if (b[j] === 0x2e) {
    j++;
    let digits = 0;
    let scale = 100;
    for (let c = (b[j] as number) - 0x30; j < end && c >= 0 && c <= 9; c = (b[++j] as number) - 0x30) {
      if (digits < 3) ms += c * scale;
      scale /= 10;
      digits++;
    }
    if (digits === 0) return -1;
  }
  at.end = j;
  return ((h * 60 + m) * 60 + sec) * 1000 + ms;
}

interface Rows {
  ts: Float64Array;
  val: Float64Array;
  tz: TimeZone;
  unit: string | null;
}

/** The rows array, from its `[`: every row `{"ts":"t:...","val":"n:..."}` (keys in either order). */
function readRows(r: Reader): Rows {
  const b = r.b;
  r.expect(0x5b);
  let cap = 1024;
  let ts = new Float64Array(cap);
  let val = new Float64Array(cap);
  let n = 0;
  let tz: TimeZone | undefined;
  // The unit's bytes in the body, compared with each row's; undefined until the first row.
  let unitStart = -1;
  let unitLen = -1;
  let unit: string | null = null;
  const stamps = new Stamps();
  if (r.maybe(0x5d)) throw NOT_FAST; // no rows: the general decoder's case
  do {
    r.expect(0x7b);
    let tsAt = -1;
    let tsEnd = -1;
    let valAt = -1;
    let valEnd = -1;
    for (let f = 0; f < 2; f++) {
      if (f === 1) r.expect(COMMA);
      const k = r.key();
      const at = r.plainString();
      if (k === 0 && tsAt < 0) {
        tsAt = at;
        tsEnd = r.i - 1;
      } else if (k === 1 && valAt < 0) {
        valAt = at;
        valEnd = r.i - 1;
      } else throw NOT_FAST;
    }
    r.expect(0x7d);
    if (b[tsAt] !== 0x74 || b[tsAt + 1] !== COLON || b[valAt] !== 0x6e || b[valAt + 1] !== COLON) throw NOT_FAST;
    const t = stamps.instant(b, tsAt + 2, tsEnd);
    const zone = parsedZone();
    if (tz === undefined) tz = zone;
    else if (zone !== tz) throw NOT_FAST;
    // The number, then an optional space and unit.
    const numAt = valAt + 2;
    let numEnd = numAt;
    while (numEnd < valEnd && b[numEnd] !== SPACE) numEnd++;
    if (unitLen < 0) {
      if (numEnd < valEnd) {
        unitStart = numEnd + 1;
        unitLen = valEnd - unitStart;
        try {
          unit = UTF8.decode(b.subarray(unitStart, valEnd));
        } catch {
          throw NOT_FAST;
        }
        if (!isUnitText(unit)) throw NOT_FAST;
      } else unitLen = 0;
    } else if (unitLen === 0) {
      if (numEnd !== valEnd) throw NOT_FAST;
    } else {
      if (valEnd - numEnd - 1 !== unitLen) throw NOT_FAST;
      for (let k = 0; k < unitLen; k++) if (b[numEnd + 1 + k] !== b[unitStart + k]) throw NOT_FAST;
    }
    let v = decimal(b, numAt, numEnd);
    if (v !== v) {
      const text = ascii(b, numAt, numEnd);
      if (!isNumberText(text)) throw NOT_FAST;
      v = numberOf(text);
    }
    if (n === cap) {
      cap *= 2;
      const ts2 = new Float64Array(cap);
      ts2.set(ts);
      ts = ts2;
      const val2 = new Float64Array(cap);
      val2.set(val);
      val = val2;
    }
    ts[n] = t;
    val[n] = v;
    n++;
  } while (r.maybe(COMMA));
  r.expect(0x5d);
  return { ts: ts.slice(0, n), val: val.slice(0, n), tz: tz, unit };
}

/**
 * The grid of a JSON body that is a one-point Number history (see above), or undefined: decode
 * the body's text with readJsonGrid then.
 */
export function readJsonHisBytes(b: Buffer, lim: ShapeLimits = DEFAULT_SHAPE_LIMITS): HisGrid | undefined {
  // Not worth it for small bodies, and a poll-sized write keeps the one general path.
  if (b.length < 4096) return undefined;
  try {
    const r = new Reader(b, lim);
    r.expect(0x7b);
    let meta: unknown;
    let cols: unknown;
    let rows: Rows | undefined;
    do {
      const k = r.key();
      if (k === 4 && rows === undefined) rows = readRows(r);
      else if ((k === 2 && meta === undefined) || (k === 3 && cols === undefined)) {
        const at = r.skipValue();
        let j: unknown;
        try {
          j = JSON.parse(UTF8.decode(b.subarray(at, r.i)));
        } catch {
          throw NOT_FAST;
        }
        if (k === 2) meta = j;
        else cols = j;
      } else throw NOT_FAST;
    } while (r.maybe(COMMA));
    r.expect(0x7d);
    r.ws();
    if (r.i !== b.length || rows === undefined || meta === undefined || cols === undefined) return undefined;
    // Meta and columns as the general decoder reads them (ver, limits, names); then the columns
    // must be exactly ts and val without meta, as the general decoder's history case requires.
    const g = decodeGrid({ meta, cols, rows: [] }, '', lim);
    const c = g.cols;
    if (c.length !== 2 || c[0]?.name !== 'ts' || c[1]?.name !== 'val' || !c[0].meta.isEmpty() || !c[1].meta.isEmpty()) return undefined;
    return new HisGrid(g.meta, rows.ts, rows.tz, { kind: 'Number', val: rows.val, unit: rows.unit });
  } catch {
    // Given up, or an error in meta or columns: the general decoder says it, from the whole text.
    return undefined;
  }
}
