/**
 * Chunk codecs of the history store: one sealed chunk holds a run of samples of one point, in
 * time order, as one LevelDB value.
 *
 * Hand-written rather than taken from npm: no maintained package does Gorilla-style time-series
 * compression in JS (the few there are encode one float stream, not our timestamps + per-kind
 * values, and none round-trips NaN/-0 or picks a codec per chunk).
 *
 * Layout (big-endian):
 *
 *   u8 codec | u32 count | f64 first ts | f64 last ts | codec body
 *
 * The header carries count and the time span so range reads and deletes can size their output
 * and skip or drop whole chunks without decoding them.
 *
 * Timestamps (every codec) are the first delta (raw f64), then delta-of-deltas in blocks of 32:
 * a 6-bit width, then each block's zigzagged delta-of-deltas in that many bits. Regularly polled points (every delta equal) cost 6
 * bits per 32 samples; poll jitter costs a few bits per sample. A block whose delta-of-deltas do
 * not fit in 32 bits (gaps of weeks, timestamps near the edges of the safe-integer range) is
 * written raw (width 63, 64 bits per timestamp), so any safe-integer millisecond round-trips.
 *
 * Number values, per chunk the smaller of:
 * - decimal (codec 1): when every value is a finite decimal with at most 15 fractional digits,
 *   the values scaled by 10^scale are integers; their deltas are packed in blocks of 32 as above.
 *   0.1-quantized sensors cost a few bits per sample; constant runs 6 bits per 32 samples.
 *   Codec 5 is the same with exceptions: up to one sample in 64 that is no decimal at the
 *   chunk's scale (a NaN a device sends for a broken sensor, a stray long float) is kept raw
 *   (its index and f64 bits) after the scale: u8 scale | varint count | (varint gap | f64)* |
 *   the codec 1 body, with each exception's slot carrying the previous decimal (delta 0).
 *   Values enter as short decimals: src/lib/decimal.ts, used by the drivers (scaled Modbus
 *   registers, float32 registers, BACnet REALs).
 * - XOR (codec 2): the Gorilla paper's float codec (XOR with the previous value, leading/trailing
 *   zero window). Takes any float bit pattern: NaN, ±Infinity, -0, subnormals.
 * Bool (codec 3): first value and run lengths. Str (codec 4): a dictionary of the chunk's
 * distinct strings and runs of (index, length): enum-like strings cost bytes per run.
 */
import { ErrorCodes, HayloftError } from '../lib/errors.js';

export type HisKind = 'Number' | 'Bool' | 'Str';
export type HisValue = number | boolean | string;

export const CODEC_DECIMAL = 1;
export const CODEC_XOR = 2;
export const CODEC_BOOL = 3;
export const CODEC_STR = 4;
export const CODEC_DECIMAL_EXC = 5;

export const HEADER_BYTES = 21;
/** More samples than any chunk may hold (the store splits chunks past twice its chunk size). */
const MAX_COUNT = 1 << 22;
const BLOCK = 32;
const RAW_BLOCK = 63;
const TWO31 = 2 ** 31;
const MAX_SCALE = 15;
const POW10: number[] = [];
for (let i = 0; i <= MAX_SCALE; i++) POW10.push(10 ** i);

// Float bit patterns are read through a shared typed-array view; the word order below assumes
// a little-endian host, which every platform Node supports is.
const f64 = new Float64Array(1);
const u32 = new Uint32Array(f64.buffer);
if (new Uint8Array(new Uint16Array([1]).buffer)[0] !== 1) throw new Error('his-codec assumes a little-endian host');

const utf8Enc = new TextEncoder();
const utf8Dec = new TextDecoder('utf-8', { fatal: true });

export function corrupt(what: string): HayloftError {
  return new HayloftError(ErrorCodes.STORE_UNAVAILABLE, `a history chunk in the data folder is corrupt: ${what}`);
}

// ---------------------------------------------------------------------------------------------
// Bit and byte streams

/** Appends bits MSB-first, then (after align()) whole bytes, into a growing buffer. */
export class Writer {
  buf: Uint8Array;
  pos = 0;
  private cur = 0; // pending bits, left-aligned in a 32-bit word
  private free = 32;

  constructor(capacity: number) {
    this.buf = new Uint8Array(Math.max(64, capacity));
  }

  private ensure(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    const next = new Uint8Array(Math.max(this.buf.length * 2, this.pos + n));
    next.set(this.buf.subarray(0, this.pos));
    this.buf = next;
  }

  private flushWord(): void {
    this.ensure(4);
    const b = this.buf;
    const c = this.cur;
    b[this.pos] = c >>> 24;
    b[this.pos + 1] = c >>> 16;
    b[this.pos + 2] = c >>> 8;
    b[this.pos + 3] = c;
    this.pos += 4;
    this.cur = 0;
    this.free = 32;
  }

  /** Writes the low `n` bits of `v` (0 <= n <= 32, v < 2^n). */
  bits(v: number, n: number): void {
    if (n === 0) return;
    if (n <= this.free) {
      this.free -= n;
      this.cur |= v << this.free;
      if (this.free === 0) this.flushWord();
      return;
    }
    const rest = n - this.free;
    this.cur |= v >>> rest;
    this.flushWord();
    this.free = 32 - rest;
    this.cur = (v << this.free) | 0;
  }

  f64(x: number): void {
    f64[0] = x;
    const lo = u32[0] as number;
    this.bits(u32[1] as number, 32);
    this.bits(lo, 32);
  }

  /** Ends the bit section: pads the last partial byte with zeros. */
  align(): void {
    const used = 32 - this.free;
    if (used === 0) return;
    const nbytes = (used + 7) >>> 3;
    this.ensure(nbytes);
    for (let i = 0; i < nbytes; i++) this.buf[this.pos++] = this.cur >>> (24 - 8 * i);
    this.cur = 0;
    this.free = 32;
  }

  byte(v: number): void {
    this.align();
    this.ensure(1);
    this.buf[this.pos++] = v;
  }

  varint(v: number): void {
    this.align();
    this.ensure(8);
    while (v >= 0x80) {
      this.buf[this.pos++] = (v & 0x7f) | 0x80;
      v = Math.floor(v / 128);
    }
    this.buf[this.pos++] = v;
  }

  bytes(b: Uint8Array): void {
    this.align();
    this.ensure(b.length);
    this.buf.set(b, this.pos);
    this.pos += b.length;
  }

  finish(): Uint8Array {
    this.align();
    return this.buf.slice(0, this.pos);
  }
}

/** Reads what Writer wrote. Reads past the end yield zero bits; callers check counts. */
export class Reader {
  private readonly buf: Uint8Array;
  pos: number; // next byte to load
  private cur = 0;
  private avail = 0; // valid bits at the low end of cur

  constructor(buf: Uint8Array, pos: number) {
    this.buf = buf;
    this.pos = pos;
  }

  private load(): number {
    const b = this.buf;
    const p = this.pos;
    this.pos = p + 4;
    if (p + 4 <= b.length) return (((b[p] as number) << 24) | ((b[p + 1] as number) << 16) | ((b[p + 2] as number) << 8) | (b[p + 3] as number)) >>> 0;
    let w = 0;
    for (let i = 0; i < 4; i++) w = w * 256 + (p + i < b.length ? (b[p + i] as number) : 0);
    return w;
  }

  /** Reads `n` bits (0 <= n <= 32) as an unsigned number. */
  bits(n: number): number {
    if (n <= this.avail) {
      this.avail -= n;
      return n === 32 ? this.cur >>> 0 : (this.cur >>> this.avail) & ((1 << n) - 1);
    }
    const have = this.avail;
    const hi = have === 0 ? 0 : this.cur & ((1 << have) - 1);
    const need = n - have;
    this.cur = this.load();
    this.avail = 32 - need;
    const lo = need === 32 ? this.cur >>> 0 : (this.cur >>> this.avail) & ((1 << need) - 1);
    return hi * 2 ** need + lo;
  }

  bit(): number {
    if (this.avail === 0) {
      this.cur = this.load();
      this.avail = 32;
    }
    this.avail--;
    return (this.cur >>> this.avail) & 1;
  }

  f64(): number {
    const hi = this.bits(32);
    u32[0] = this.bits(32);
    u32[1] = hi;
    return f64[0] as number;
  }

  /** Throws when decoding ran past the end of the buffer (a truncated chunk reads as zeros). */
  checkEnd(): void {
    if (this.pos - (this.avail >>> 3) > this.buf.length) throw corrupt('truncated');
  }

  /** Leaves the bit section: the next byte read is the one after the last bit consumed. */
  align(): void {
    this.pos -= this.avail >>> 3;
    this.avail = 0;
    this.cur = 0;
  }

  byte(): number {
    if (this.avail !== 0) this.align();
    if (this.pos >= this.buf.length) throw corrupt('truncated');
    return this.buf[this.pos++] as number;
  }

  varint(): number {
    let v = 0;
    let mul = 1;
    for (;;) {
      const b = this.byte();
      v += (b & 0x7f) * mul;
      if (b < 0x80) return v;
      mul *= 128;
      if (mul > 2 ** 56) throw corrupt('varint too long');
    }
  }

  bytes(n: number): Uint8Array {
    if (this.avail !== 0) this.align();
    if (this.pos + n > this.buf.length) throw corrupt('truncated');
    const out = this.buf.subarray(this.pos, this.pos + n);
    this.pos += n;
    return out;
  }
}

function widthOf(x: number): number {
  return x === 0 ? 0 : 32 - Math.clz32(x);
}

// ---------------------------------------------------------------------------------------------
// Timestamps

const scratch = new Float64Array(BLOCK);

/**
 * Timestamps from+1 .. to-1 (sample `from` is in the header). The first delta is written raw, so
 * a regular series is all zero delta-of-deltas from its first block on.
 */
function writeTimes(w: Writer, ts: ArrayLike<number>, from: number, to: number): void {
  let prev = ts[from] as number;
  let prevDelta = to - from > 1 ? (ts[from + 1] as number) - prev : 0;
  w.f64(prevDelta);
  for (let b = from + 1; b < to; b += BLOCK) {
    const e = Math.min(b + BLOCK, to);
    let ok = true;
    let max = 0;
    let p = prev;
    let pd = prevDelta;
    for (let i = b; i < e; i++) {
      const t = ts[i] as number;
      const dod = t - p - pd;
      const nd = pd + dod;
      // The decoder rebuilds t as p + (pd + dod): only blocks where that is exact are packed.
      if (!(dod > -TWO31 && dod < TWO31) || p + nd !== t) {
        ok = false;
        break;
      }
      const zz = dod >= 0 ? dod * 2 : -dod * 2 - 1;
      scratch[i - b] = zz;
      if (zz > max) max = zz;
      p = t;
      pd = nd;
    }
    if (ok) {
      const width = widthOf(max);
      w.bits(width, 6);
      if (width > 0) for (let i = 0; i < e - b; i++) w.bits(scratch[i] as number, width);
      prev = p;
      prevDelta = pd;
    } else {
      w.bits(RAW_BLOCK, 6);
      for (let i = b; i < e; i++) {
        const t = ts[i] as number;
        w.f64(t);
        prevDelta = t - prev;
        prev = t;
      }
    }
  }
}

function readTimes(r: Reader, out: Float64Array, off: number, first: number, count: number): void {
  out[off] = first;
  let p = first;
  let pd = r.f64();
  for (let b = 1; b < count; b += BLOCK) {
    const e = Math.min(b + BLOCK, count);
    const width = r.bits(6);
    if (width === 0) {
      for (let i = b; i < e; i++) {
        p += pd;
        out[off + i] = p;
      }
    } else if (width === RAW_BLOCK) {
      for (let i = b; i < e; i++) {
        const t = r.f64();
        pd = t - p;
        p = t;
        out[off + i] = t;
      }
    } else if (width <= 32) {
      for (let i = b; i < e; i++) {
        const zz = r.bits(width);
        pd += zz & 1 ? -(zz + 1) / 2 : zz / 2;
        p += pd;
        out[off + i] = p;
      }
    } else {
      throw corrupt(`bad timestamp block width ${width}`);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Header

function writeHeader(w: Writer, codec: number, ts: ArrayLike<number>, from: number, to: number): void {
  w.byte(codec);
  const n = to - from;
  w.byte(n >>> 24);
  w.byte(n >>> 16);
  w.byte(n >>> 8);
  w.byte(n);
  w.f64(ts[from] as number);
  w.f64(ts[to - 1] as number);
}

export function chunkCodec(buf: Uint8Array): number {
  return buf[0] as number;
}

export function chunkCount(buf: Uint8Array): number {
  if (buf.length < HEADER_BYTES) throw corrupt('shorter than its header');
  const n = (((buf[1] as number) << 24) | ((buf[2] as number) << 16) | ((buf[3] as number) << 8) | (buf[4] as number)) >>> 0;
  if (n < 1 || n > MAX_COUNT) throw corrupt(`bad sample count ${n}`);
  return n;
}

function headerF64(buf: Uint8Array, at: number): number {
  const hi = (((buf[at] as number) << 24) | ((buf[at + 1] as number) << 16) | ((buf[at + 2] as number) << 8) | (buf[at + 3] as number)) >>> 0;
  const lo = (((buf[at + 4] as number) << 24) | ((buf[at + 5] as number) << 16) | ((buf[at + 6] as number) << 8) | (buf[at + 7] as number)) >>> 0;
  u32[0] = lo;
  u32[1] = hi;
  return f64[0] as number;
}

export function chunkFirst(buf: Uint8Array): number {
  return headerF64(buf, 5);
}

export function chunkLast(buf: Uint8Array): number {
  return headerF64(buf, 13);
}

export function codecKind(codec: number): HisKind {
  switch (codec) {
    case CODEC_DECIMAL:
    case CODEC_DECIMAL_EXC:
    case CODEC_XOR:
      return 'Number';
    case CODEC_BOOL:
      return 'Bool';
    case CODEC_STR:
      return 'Str';
    default:
      throw corrupt(`unknown codec ${codec}`);
  }
}

// ---------------------------------------------------------------------------------------------
// Number: decimal

/** Digits of a value that is no short decimal (or NaN, ±Infinity, -0): an exception. */
const NO_DIGITS = MAX_SCALE + 1;

/**
 * The decimal encoding, or null when too many values are not short decimals (or deltas too
 * large). Up to one value in 64 that is not a decimal at the chosen scale (NaN, ±Infinity, -0, a
 * stray long float such as 0.30000000000000004, or a value with more digits than the others)
 * is kept raw as an exception (codec 5) rather than sending the whole chunk to XOR or widening
 * everyone's scale. With no exception the chunk is codec 1, byte for byte as before.
 */
export function encodeDecimal(ts: ArrayLike<number>, val: ArrayLike<number>, from: number, to: number): Uint8Array | null {
  const n = to - from;
  const maxExc = n >>> 6;
  // The digits each value needs, and how many values need each count.
  const need = new Uint8Array(n);
  const hist = new Uint32Array(NO_DIGITS + 1);
  let none = 0;
  let last = 0; // the previous value's digits: neighbours mostly need as many
  for (let i = 0; i < n; i++) {
    const v = val[from + i] as number;
    let d = NO_DIGITS;
    if (Number.isFinite(v) && !(v === 0 && 1 / v < 0)) {
      let q = POW10[last] as number;
      if (Math.round(v * q) / q === v) {
        // Fits at `last`: step down while it still fits.
        d = last;
        while (d > 0) {
          q = POW10[d - 1] as number;
          if (Math.round(v * q) / q !== v) break;
          d--;
        }
      } else {
        for (let s = last + 1; s <= MAX_SCALE; s++) {
          q = POW10[s] as number;
          if (Math.round(v * q) / q === v) {
            d = s;
            break;
          }
        }
      }
    }
    if (d === NO_DIGITS) {
      // Random floats: give up as soon as they are more than the exceptions allowed.
      if (++none > maxExc) return null;
    } else last = d;
    need[i] = d;
    hist[d] = (hist[d] as number) + 1;
  }
  // The smallest scale that leaves at most maxExc exceptions.
  let scale = 0;
  let covered = hist[0] as number;
  while (n - covered > maxExc) {
    if (++scale > MAX_SCALE) return null;
    covered += hist[scale] as number;
  }
  const p = POW10[scale] as number;
  const ints = new Float64Array(n);
  const exc: number[] = [];
  let prev = NaN;
  for (let i = 0; i < n; i++) {
    const v = val[from + i] as number;
    let k = NaN;
    if ((need[i] as number) <= scale) {
      k = Math.round(v * p);
      // Scaled values must be exact integers (safe range) and rebuild v by the decoder's division,
      // and their deltas fit the 32-bit blocks: otherwise the value is an exception too.
      if (!(Math.abs(k) <= Number.MAX_SAFE_INTEGER) || k / p !== v || (prev === prev && !(k - prev > -TWO31 && k - prev < TWO31))) k = NaN;
    }
    if (k !== k) {
      if (exc.length === maxExc) return null;
      exc.push(i);
    } else {
      if (prev !== prev) ints.fill(k, 0, i); // leading exceptions take the first decimal's k
      prev = k;
    }
    ints[i] = k !== k ? prev : k;
  }
  if (prev !== prev) return null; // no decimal at all
  const w = new Writer(HEADER_BYTES + 9 + n * 2 + exc.length * 10);
  writeHeader(w, exc.length === 0 ? CODEC_DECIMAL : CODEC_DECIMAL_EXC, ts, from, to);
  w.byte(scale);
  if (exc.length > 0) {
    w.varint(exc.length);
    let last = -1;
    for (const i of exc) {
      w.varint(i - last - 1);
      w.f64(val[from + i] as number);
      last = i;
    }
  }
  w.f64(ints[0] as number);
  writeTimes(w, ts, from, to);
  for (let b = 1; b < n; b += BLOCK) {
    const e = Math.min(b + BLOCK, n);
    let max = 0;
    for (let i = b; i < e; i++) {
      const d = (ints[i] as number) - (ints[i - 1] as number);
      const zz = d >= 0 ? d * 2 : -d * 2 - 1;
      scratch[i - b] = zz;
      if (zz > max) max = zz;
    }
    const width = widthOf(max);
    w.bits(width, 6);
    if (width > 0) for (let i = 0; i < e - b; i++) w.bits(scratch[i] as number, width);
  }
  return w.finish();
}

function decodeDecimal(buf: Uint8Array, ts: Float64Array, val: Float64Array, off: number, count: number, withExc: boolean): void {
  const r = new Reader(buf, HEADER_BYTES);
  const scale = r.byte();
  if (scale > MAX_SCALE) throw corrupt(`bad decimal scale ${scale}`);
  const p = POW10[scale] as number;
  let excAt: number[] = [];
  let excVal: number[] = [];
  if (withExc) {
    const ne = r.varint();
    if (ne < 1 || ne > count) throw corrupt(`bad exception count ${ne}`);
    excAt = new Array<number>(ne);
    excVal = new Array<number>(ne);
    let at = -1;
    for (let j = 0; j < ne; j++) {
      at += r.varint() + 1;
      if (at >= count) throw corrupt('an exception past the end of the chunk');
      excAt[j] = at;
      excVal[j] = r.f64();
    }
  }
  let k = r.f64();
  readTimes(r, ts, off, chunkFirst(buf), count);
  val[off] = k / p;
  for (let b = 1; b < count; b += BLOCK) {
    const e = Math.min(b + BLOCK, count);
    const width = r.bits(6);
    if (width === 0) {
      const v = k / p;
      for (let i = b; i < e; i++) val[off + i] = v;
    } else if (width <= 32) {
      for (let i = b; i < e; i++) {
        const zz = r.bits(width);
        k += zz & 1 ? -(zz + 1) / 2 : zz / 2;
        val[off + i] = k / p;
      }
    } else {
      throw corrupt(`bad value block width ${width}`);
    }
  }
  r.checkEnd();
  for (let j = 0; j < excAt.length; j++) val[off + (excAt[j] as number)] = excVal[j] as number;
}

// ---------------------------------------------------------------------------------------------
// Number: XOR (Gorilla)

export function encodeXor(ts: ArrayLike<number>, val: ArrayLike<number>, from: number, to: number): Uint8Array {
  const n = to - from;
  const w = new Writer(HEADER_BYTES + n * 4);
  writeHeader(w, CODEC_XOR, ts, from, to);
  writeTimes(w, ts, from, to);
  f64[0] = val[from] as number;
  let pl = u32[0] as number;
  let ph = u32[1] as number;
  w.bits(ph, 32);
  w.bits(pl, 32);
  let wLead = -1;
  let wTrail = 0;
  for (let i = from + 1; i < to; i++) {
    f64[0] = val[i] as number;
    const lo = u32[0] as number;
    const hi = u32[1] as number;
    const xh = (hi ^ ph) >>> 0;
    const xl = (lo ^ pl) >>> 0;
    ph = hi;
    pl = lo;
    if (xh === 0 && xl === 0) {
      w.bits(0, 1);
      continue;
    }
    const lead = xh !== 0 ? Math.clz32(xh) : 32 + Math.clz32(xl);
    const trail = xl !== 0 ? 31 - Math.clz32(xl & -xl) : 32 + (31 - Math.clz32(xh & -xh));
    let useLead: number;
    let useTrail: number;
    if (wLead >= 0 && lead >= wLead && trail >= wTrail) {
      w.bits(2, 2); // '10': inside the previous window
      useLead = wLead;
      useTrail = wTrail;
    } else {
      useLead = lead > 31 ? 31 : lead;
      useTrail = trail;
      const sig = 64 - useLead - useTrail;
      w.bits(3, 2); // '11': new window
      w.bits(useLead, 5);
      w.bits(sig - 1, 6);
      wLead = useLead;
      wTrail = useTrail;
    }
    const sig = 64 - useLead - useTrail;
    // The meaningful bits: (xh:xl) >>> useTrail, `sig` wide.
    let sh: number;
    let sl: number;
    if (useTrail === 0) {
      sh = xh;
      sl = xl;
    } else if (useTrail < 32) {
      sl = ((xl >>> useTrail) | (xh << (32 - useTrail))) >>> 0;
      sh = xh >>> useTrail;
    } else {
      sl = xh >>> (useTrail - 32);
      sh = 0;
    }
    if (sig > 32) {
      w.bits(sh, sig - 32);
      w.bits(sl, 32);
    } else {
      w.bits(sl, sig);
    }
  }
  return w.finish();
}

function decodeXor(buf: Uint8Array, ts: Float64Array, val: Float64Array, off: number, count: number): void {
  const r = new Reader(buf, HEADER_BYTES);
  readTimes(r, ts, off, chunkFirst(buf), count);
  let ph = r.bits(32);
  let pl = r.bits(32);
  u32[0] = pl;
  u32[1] = ph;
  val[off] = f64[0] as number;
  let wLead = 0;
  let wTrail = 0;
  for (let i = 1; i < count; i++) {
    if (r.bit() === 0) {
      val[off + i] = f64[0] as number; // unchanged since the previous sample
      continue;
    }
    if (r.bit() === 1) {
      wLead = r.bits(5);
      wTrail = 64 - wLead - (r.bits(6) + 1);
      if (wTrail < 0) throw corrupt('bad XOR window');
    }
    const sig = 64 - wLead - wTrail;
    let sh: number;
    let sl: number;
    if (sig > 32) {
      sh = r.bits(sig - 32);
      sl = r.bits(32);
    } else {
      sh = 0;
      sl = r.bits(sig);
    }
    // (sh:sl) << wTrail
    let xh: number;
    let xl: number;
    if (wTrail === 0) {
      xh = sh;
      xl = sl;
    } else if (wTrail < 32) {
      xh = (sh << wTrail) | (sl >>> (32 - wTrail));
      xl = sl << wTrail;
    } else {
      xh = sl << (wTrail - 32);
      xl = 0;
    }
    ph = (ph ^ xh) >>> 0;
    pl = (pl ^ xl) >>> 0;
    u32[0] = pl;
    u32[1] = ph;
    val[off + i] = f64[0] as number;
  }
  r.checkEnd();
}

// ---------------------------------------------------------------------------------------------
// Bool and Str

function encodeBool(ts: ArrayLike<number>, val: ArrayLike<boolean>, from: number, to: number): Uint8Array {
  const w = new Writer(HEADER_BYTES + 16 + (to - from) / 4);
  writeHeader(w, CODEC_BOOL, ts, from, to);
  writeTimes(w, ts, from, to);
  w.align();
  w.byte(val[from] ? 1 : 0);
  let run = 1;
  for (let i = from + 1; i < to; i++) {
    if (val[i] === val[i - 1]) run++;
    else {
      w.varint(run);
      run = 1;
    }
  }
  w.varint(run);
  return w.finish();
}

function decodeBool(buf: Uint8Array, ts: Float64Array, val: boolean[], off: number, count: number): void {
  const r = new Reader(buf, HEADER_BYTES);
  readTimes(r, ts, off, chunkFirst(buf), count);
  r.align();
  let v = r.byte() === 1;
  let i = 0;
  while (i < count) {
    const run = r.varint();
    if (run < 1 || i + run > count) throw corrupt('bad Bool run');
    for (const e = i + run; i < e; i++) val[off + i] = v;
    v = !v;
  }
}

function encodeStr(ts: ArrayLike<number>, val: ArrayLike<string>, from: number, to: number): Uint8Array {
  const dict = new Map<string, number>();
  const runs: number[] = []; // index, length pairs
  for (let i = from; i < to; i++) {
    const s = val[i] as string;
    if (i > from && s === val[i - 1]) {
      runs[runs.length - 1] = (runs[runs.length - 1] as number) + 1;
      continue;
    }
    let idx = dict.get(s);
    if (idx === undefined) {
      idx = dict.size;
      dict.set(s, idx);
    }
    runs.push(idx, 1);
  }
  const w = new Writer(HEADER_BYTES + 64 + runs.length * 2);
  writeHeader(w, CODEC_STR, ts, from, to);
  writeTimes(w, ts, from, to);
  w.align();
  w.varint(dict.size);
  for (const s of dict.keys()) {
    const b = utf8Enc.encode(s);
    w.varint(b.length);
    w.bytes(b);
  }
  w.varint(runs.length / 2);
  for (const x of runs) w.varint(x);
  return w.finish();
}

function decodeStr(buf: Uint8Array, ts: Float64Array, val: string[], off: number, count: number): void {
  const r = new Reader(buf, HEADER_BYTES);
  readTimes(r, ts, off, chunkFirst(buf), count);
  r.align();
  const nd = r.varint();
  const dict: string[] = [];
  try {
    for (let i = 0; i < nd; i++) dict.push(utf8Dec.decode(r.bytes(r.varint())));
  } catch (e) {
    if (e instanceof HayloftError) throw e;
    throw corrupt('bad UTF-8 in a Str chunk');
  }
  const nr = r.varint();
  let i = 0;
  for (let k = 0; k < nr; k++) {
    const s = dict[r.varint()];
    const run = r.varint();
    if (s === undefined || run < 1 || i + run > count) throw corrupt('bad Str run');
    for (const e = i + run; i < e; i++) val[off + i] = s;
  }
  if (i !== count) throw corrupt('Str runs do not add up to the count');
}

// ---------------------------------------------------------------------------------------------
// Entry points

/**
 * Encodes samples from..to-1 (sorted by ts, no duplicates, at least one) as one chunk. Number
 * chunks take the smaller of the decimal and XOR encodings.
 */
export function encodeChunk(kind: HisKind, ts: ArrayLike<number>, val: ArrayLike<HisValue>, from: number, to: number): Uint8Array {
  if (to <= from) throw new RangeError('encodeChunk: empty range');
  switch (kind) {
    case 'Number': {
      const nv = val as ArrayLike<number>;
      const dec = encodeDecimal(ts, nv, from, to);
      const xor = encodeXor(ts, nv, from, to);
      return dec !== null && dec.length <= xor.length ? dec : xor;
    }
    case 'Bool':
      return encodeBool(ts, val as ArrayLike<boolean>, from, to);
    case 'Str':
      return encodeStr(ts, val as ArrayLike<string>, from, to);
  }
}

/** The value column type of each kind. */
export interface ValueColumn {
  Number: Float64Array;
  Bool: boolean[];
  Str: string[];
}

export function newValueColumn<K extends HisKind>(kind: K, n: number): ValueColumn[K] {
  // Holey arrays filled in order become packed enough for V8; preallocating avoids regrowth.
  return (kind === 'Number' ? new Float64Array(n) : new Array<unknown>(n)) as ValueColumn[K];
}

/**
 * Decodes a whole chunk into ts[off..off+count) and val[off..off+count); returns count. The
 * chunk's codec must be of `kind` (HL_STORE_UNAVAILABLE otherwise: the data is not what the
 * point's metadata says).
 */
export function decodeChunk(kind: HisKind, buf: Uint8Array, ts: Float64Array, val: Float64Array | boolean[] | string[], off: number): number {
  const count = chunkCount(buf);
  const codec = chunkCodec(buf);
  if (codecKind(codec) !== kind) throw corrupt(`a ${codecKind(codec)} chunk where ${kind} was expected`);
  if (off + count > ts.length || off + count > val.length) throw new RangeError('decodeChunk: output too small');
  switch (codec) {
    case CODEC_DECIMAL:
    case CODEC_DECIMAL_EXC:
      decodeDecimal(buf, ts, val as Float64Array, off, count, codec === CODEC_DECIMAL_EXC);
      break;
    case CODEC_XOR:
      decodeXor(buf, ts, val as Float64Array, off, count);
      break;
    case CODEC_BOOL:
      decodeBool(buf, ts, val as boolean[], off, count);
      break;
    default:
      decodeStr(buf, ts, val as string[], off, count);
  }
  return count;
}

// ---------------------------------------------------------------------------------------------
// Single values (the open tail stores one sample per LevelDB entry)

export function encodeValue(kind: HisKind, v: HisValue): Uint8Array {
  switch (kind) {
    case 'Number': {
      const b = new Uint8Array(8);
      new DataView(b.buffer).setFloat64(0, v as number);
      return b;
    }
    case 'Bool':
      return new Uint8Array([v ? 1 : 0]);
    case 'Str':
      return utf8Enc.encode(v as string);
  }
}

export function decodeValue(kind: HisKind, b: Uint8Array): HisValue {
  switch (kind) {
    case 'Number':
      if (b.length !== 8) throw corrupt('a tail Number is not 8 bytes');
      return new DataView(b.buffer, b.byteOffset, 8).getFloat64(0);
    case 'Bool':
      if (b.length !== 1) throw corrupt('a tail Bool is not 1 byte');
      return b[0] === 1;
    case 'Str':
      try {
        return utf8Dec.decode(b);
      } catch {
        throw corrupt('bad UTF-8 in a tail Str');
      }
  }
}
