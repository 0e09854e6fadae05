/**
 * One point's open tail, in memory: the samples past its seal edge, sorted by time, duplicate
 * free, as two growable columns (no object per sample). The history store (history.ts) keeps one
 * per point; the journal (his-journal.ts) makes them durable, sealing moves them into chunks.
 *
 * `durable` counts the samples at the front that a committed journal entry (or chunk) holds; the
 * rest are pending until the next flush. Appends only ever add at the end, so a failed flush
 * drops what is pending by truncating to `durable`.
 */
import type { HisKind, HisValue } from './his-codec.js';

const MIN_CAPACITY = 8;

/**
 * Journal entry numbers, in the order they were added, kept as runs of consecutive numbers
 * (first, count): a tail journaled by every flush round holds one run, not a number per round.
 */
export class SeqRuns {
  private runs: number[] = [];

  /** The number added last (undefined: none). */
  get last(): number | undefined {
    const r = this.runs;
    return r.length === 0 ? undefined : (r[r.length - 2] as number) + (r[r.length - 1] as number) - 1;
  }

  push(seq: number): void {
    const r = this.runs;
    if (r.length > 0 && (r[r.length - 2] as number) + (r[r.length - 1] as number) === seq) r[r.length - 1] = (r[r.length - 1] as number) + 1;
    else r.push(seq, 1);
  }

  clear(): void {
    this.runs = [];
  }

  *[Symbol.iterator](): Iterator<number> {
    const r = this.runs;
    for (let i = 0; i < r.length; i += 2) {
      const first = r[i] as number;
      const end = first + (r[i + 1] as number);
      for (let s = first; s < end; s++) yield s;
    }
  }
}

export class Tail {
  readonly kind: HisKind;
  ts: Float64Array;
  /** Float64Array for Number, an array for Bool and Str. */
  val: Float64Array | HisValue[];
  n = 0;
  /** Samples [0, durable) are in a committed journal entry; [durable, n) are pending. */
  durable = 0;
  /** Journal entries holding this tail's durable samples. */
  readonly seqs = new SeqRuns();
  /** Monotonic ms when the oldest durable sample was journaled (for the journal's age bound); NaN when none. */
  since = Number.NaN;
  /** Bumped whenever samples move (a merge, a shift, a cut): indices taken before are stale. */
  epoch = 0;
  /** Samples at which the tail is sealed; jittered per point so that points started together do not all seal at once. */
  threshold: number;

  constructor(kind: HisKind, threshold: number) {
    this.kind = kind;
    this.threshold = threshold;
    this.ts = new Float64Array(0);
    this.val = kind === 'Number' ? this.ts : new Array<HisValue>();
    this.alloc(MIN_CAPACITY);
  }

  /**
   * New columns of `cap` samples, the first `n` copied. A Number tail's two columns share one
   * buffer: one allocation and one ArrayBuffer per point, not two.
   */
  private alloc(cap: number): void {
    const n = this.n;
    if (this.val instanceof Float64Array) {
      const buf = new ArrayBuffer(cap * 16);
      const ts = new Float64Array(buf, 0, cap);
      const val = new Float64Array(buf, cap * 8, cap);
      ts.set(this.ts.subarray(0, n));
      val.set(this.val.subarray(0, n));
      this.ts = ts;
      this.val = val;
    } else {
      const ts = new Float64Array(cap);
      ts.set(this.ts.subarray(0, n));
      this.ts = ts;
    }
  }

  get last(): number {
    return this.n === 0 ? -Infinity : (this.ts[this.n - 1] as number);
  }

  get first(): number {
    return this.n === 0 ? Infinity : (this.ts[0] as number);
  }

  /**
   * Room for `need` samples. Growing by half (not doubling) leaves less unused: at 10,000 points
   * the tails are most of the daemon's memory, each between empty and its seal.
   */
  private grow(need: number): void {
    if (need <= this.ts.length) return;
    let cap = this.ts.length;
    while (cap < need) cap = (cap + (cap >> 1) + 3) & ~3;
    this.alloc(cap);
  }

  /** Appends samples [from, to) of sorted columns whose first timestamp is past `last`. */
  append(ts: ArrayLike<number>, val: ArrayLike<HisValue>, from: number, to: number): void {
    this.grow(this.n + (to - from));
    const t = this.ts;
    const v = this.val;
    let n = this.n;
    for (let i = from; i < to; i++, n++) {
      t[n] = ts[i] as number;
      v[n] = val[i] as number;
    }
    this.n = n;
  }

  /**
   * Merges samples [from, to) of sorted, duplicate-free columns into the tail (theirs win on
   * equal timestamps); returns how many were new. Everything becomes durable when `durable`.
   */
  merge(ts: ArrayLike<number>, val: ArrayLike<HisValue>, from: number, to: number): number {
    if (from >= to) return 0;
    if ((ts[from] as number) > this.last) {
      this.append(ts, val, from, to);
      return to - from;
    }
    this.epoch++;
    const oldTs = this.ts.slice(0, this.n);
    const oldVal = this.val.slice(0, this.n);
    const n0 = this.n;
    this.n = 0;
    this.grow(n0 + (to - from));
    const t = this.ts;
    const v = this.val;
    let i = 0;
    let j = from;
    let n = 0;
    while (i < n0 && j < to) {
      const x = oldTs[i] as number;
      const y = ts[j] as number;
      if (x < y) {
        t[n] = x;
        v[n++] = oldVal[i++] as number;
      } else {
        t[n] = y;
        v[n++] = val[j++] as number;
        if (x === y) i++;
      }
    }
    for (; i < n0; i++, n++) {
      t[n] = oldTs[i] as number;
      v[n] = oldVal[i] as number;
    }
    for (; j < to; j++, n++) {
      t[n] = ts[j] as number;
      v[n] = val[j] as number;
    }
    this.n = n;
    return n - n0;
  }

  /** Drops samples from `n` on (what a failed flush leaves: the pending ones). */
  truncate(n: number): void {
    if (n >= this.n) return;
    this.epoch++;
    if (!(this.val instanceof Float64Array)) this.val.length = n;
    this.n = n;
    if (this.durable > n) this.durable = n;
  }

  /** Drops the first `k` samples (sealed into chunks). */
  shift(k: number): void {
    if (k <= 0) return;
    this.epoch++;
    const rest = this.n - k;
    this.ts.copyWithin(0, k, this.n);
    if (this.val instanceof Float64Array) this.val.copyWithin(0, k, this.n);
    else this.val.splice(0, k);
    this.n = Math.max(0, rest);
    this.durable = Math.max(0, this.durable - k);
    // Give memory back once a big tail (a replay, a burst) was sealed.
    if (this.ts.length > 4 * Math.max(MIN_CAPACITY, this.n) && this.ts.length > 64) this.shrink();
  }

  private shrink(): void {
    this.alloc(Math.max(MIN_CAPACITY, (this.n * 2 + 3) & ~3));
  }

  /** First index whose timestamp is >= x (> x when `strict`). */
  lowerBound(x: number, strict = false): number {
    let lo = 0;
    let hi = this.n;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const v = this.ts[mid] as number;
      if (v < x || (strict && v === x)) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** A copy of samples [a, b). */
  copy(a: number, b: number): { ts: Float64Array; val: Float64Array | HisValue[] } {
    return { ts: this.ts.slice(a, b), val: this.val.slice(a, b) };
  }
}
