/**
 * Aggregation of history into time buckets, one pass over the samples (InfluxQL's conventions,
 * which WideSky's GraphQL `aggregate`/`select` options mirror): buckets are `size` ms long,
 * aligned to the UNIX epoch in UTC (shifted by `offset`), a grouped point's time is the start of
 * its bucket, and a bucket without samples is left out, null, the previous value, or linearly
 * interpolated (`fill`).
 *
 * Each bucket keeps a few running figures (count, sum, Welford's mean and M2, min, max, first,
 * last, with their times), never its samples: memory grows with the number of buckets (bounded
 * by the caller), not with the samples. Functions that need every sample of a bucket (median,
 * mode, distinct, percentile, top, bottom) are therefore not offered.
 */
import { ErrorCodes, HayloftError } from '../lib/errors.js';
import type { RollupColumns } from './rollups.js';

export type AggFunction = 'COUNT' | 'MEAN' | 'SUM' | 'SPREAD' | 'STDDEV' | 'MIN' | 'MAX' | 'FIRST' | 'LAST';
export type Fill = 'NONE' | 'NULLVALUE' | 'PREVIOUS' | 'LINEAR';
export type PointValue = number | boolean | string | null;

export interface Buckets {
  /** Bucket length, ms (> 0). */
  size: number;
  /** Shift of the boundaries from the epoch, ms (positive: later). */
  offset: number;
  fill: Fill;
}

/** Samples in time order: ArrayLikes so typed arrays from the store are used as they are. */
export interface Series {
  ts: ArrayLike<number>;
  val: ArrayLike<PointValue>;
  /**
   * 15-minute rollups (rollups.ts) of the time before the samples, where retention removed the
   * raw samples: each bucket counts in the group holding its start, as its samples would have
   * (exactly so when the grouping is a multiple of 15 minutes).
   */
  rolled?: RollupColumns;
}

export interface Points {
  ts: number[];
  val: PointValue[];
}

const NUMERIC: ReadonlySet<AggFunction> = new Set(['MEAN', 'SUM', 'SPREAD', 'STDDEV', 'MIN', 'MAX']);

/** Running figures of one bucket (or of the whole range when not grouped). */
class Acc {
  n = 0;
  sum = 0;
  mean = 0;
  m2 = 0;
  min = Infinity;
  minTs = 0;
  max = -Infinity;
  maxTs = 0;
  firstTs = Infinity;
  first: PointValue = null;
  lastTs = -Infinity;
  last: PointValue = null;

  add(ts: number, v: PointValue, numeric: boolean): void {
    if (v === null) return;
    this.n++;
    if (ts < this.firstTs) {
      this.firstTs = ts;
      this.first = v;
    }
    if (ts >= this.lastTs) {
      this.lastTs = ts;
      this.last = v;
    }
    if (!numeric) return;
    const x = typeof v === 'number' ? v : v === true ? 1 : 0;
    this.sum += x;
    const d = x - this.mean;
    this.mean += d / this.n;
    this.m2 += d * (x - this.mean);
    if (x < this.min || (x === this.min && ts < this.minTs)) {
      this.min = x;
      this.minTs = ts;
    }
    if (x > this.max || (x === this.max && ts < this.maxTs)) {
      this.max = x;
      this.maxTs = ts;
    }
  }

  /**
   * A rollup bucket's figures, as if its samples were added (the time of each: the bucket's
   * start). Welford's M2 is not kept in rollups, so STDDEV refuses them (`checkRolled`).
   */
  merge(r: RollupColumns, i: number, numeric: boolean): void {
    const n = r.count[i] as number;
    if (!(n > 0)) return;
    const ts = r.ts[i] as number;
    this.n += n;
    if (ts < this.firstTs) {
      this.firstTs = ts;
      this.first = r.first[i] as PointValue;
    }
    if (ts >= this.lastTs) {
      this.lastTs = ts;
      this.last = r.last[i] as PointValue;
    }
    if (!numeric) return;
    const min = r.min[i] as number;
    const max = r.max[i] as number;
    this.sum += r.sum[i] as number;
    this.mean = this.sum / this.n;
    if (min < this.min || (min === this.min && ts < this.minTs)) {
      this.min = min;
      this.minTs = ts;
    }
    if (max > this.max || (max === this.max && ts < this.maxTs)) {
      this.max = max;
      this.maxTs = ts;
    }
  }

  /** The function's value and, for selectors, the time of the selected sample. */
  result(f: AggFunction): { val: PointValue; ts: number } | undefined {
    if (this.n === 0) return undefined;
    switch (f) {
      case 'COUNT':
        return { val: this.n, ts: this.firstTs };
      case 'MEAN':
        // sum / n, as a reader computing it by hand would (Welford's running mean drifts in the last digit).
        return { val: this.sum / this.n, ts: this.firstTs };
      case 'SUM':
        return { val: this.sum, ts: this.firstTs };
      case 'SPREAD':
        return { val: this.max - this.min, ts: this.firstTs };
      case 'STDDEV':
        // Sample standard deviation, as InfluxQL: undefined for a single value.
        return { val: this.n < 2 ? null : Math.sqrt(this.m2 / (this.n - 1)), ts: this.firstTs };
      case 'MIN':
        return { val: this.min, ts: this.minTs };
      case 'MAX':
        return { val: this.max, ts: this.maxTs };
      case 'FIRST':
        return { val: this.first, ts: this.firstTs };
      case 'LAST':
        return { val: this.last, ts: this.lastTs };
    }
  }
}

function isNumeric(f: AggFunction): boolean {
  return NUMERIC.has(f);
}

/** Refuses a numeric function over Str samples (a Str has no mean). */
export function checkKind(f: AggFunction, kind: 'Number' | 'Bool' | 'Str' | null): void {
  if (kind === 'Str' && isNumeric(f)) throw new HayloftError(ErrorCodes.BAD_REQUEST, `${f} needs Number or Bool history; this point's samples are Str`);
}

/** Refuses STDDEV over rollups: they keep no sum of squares (rollups.ts). */
export function checkRolled(f: AggFunction, series: readonly Series[]): void {
  if (f !== 'STDDEV') return;
  for (const s of series) {
    if (s.rolled !== undefined && s.rolled.ts.length > 0) {
      throw new HayloftError(
        ErrorCodes.BAD_REQUEST,
        `STDDEV needs the raw samples, and before ${new Date(s.rolled.ts[s.rolled.ts.length - 1] as number).toISOString()} retention kept only 15-minute rollups (count, min, max, mean, first, last; docs/history.md): ask for a later range`,
      );
    }
  }
}

/**
 * One function over one or more series within [start, end): one point per bucket when grouped,
 * else a single point (time: the range start for aggregates, the selected sample's time for
 * selectors, as InfluxQL). `maxBuckets` bounds the answer before any work is done.
 */
export function aggregate(series: readonly Series[], f: AggFunction, start: number, end: number, buckets: Buckets | undefined, maxBuckets: number): Points {
  const numeric = isNumeric(f);
  checkRolled(f, series);
  if (buckets === undefined) {
    const acc = new Acc();
    for (const s of series) {
      if (s.rolled !== undefined) for (let i = 0; i < s.rolled.ts.length; i++) acc.merge(s.rolled, i, numeric);
      for (let i = 0; i < s.ts.length; i++) acc.add(s.ts[i] as number, s.val[i] as PointValue, numeric);
    }
    const r = acc.result(f);
    if (r === undefined) return { ts: [], val: [] };
    const selector = f === 'MIN' || f === 'MAX' || f === 'FIRST' || f === 'LAST';
    return { ts: [selector ? r.ts : start], val: [r.val] };
  }
  const { size, offset } = buckets;
  const k0 = Math.floor((start - offset) / size);
  const k1 = Math.ceil((end - offset) / size);
  const n = k1 - k0;
  if (n > maxBuckets) {
    throw new HayloftError(
      ErrorCodes.GRAPHQL_LIMIT,
      `this grouping makes ${n} buckets; an answer holds at most ${maxBuckets} history points: group by a longer interval or read a shorter range`,
    );
  }
  const accs = new Array<Acc | undefined>(Math.max(n, 0));
  for (const s of series) {
    const r = s.rolled;
    if (r !== undefined) {
      for (let i = 0; i < r.ts.length; i++) {
        const t = r.ts[i] as number;
        if (t < start || t >= end) continue;
        const k = Math.floor((t - offset) / size) - k0;
        (accs[k] ??= new Acc()).merge(r, i, numeric);
      }
    }
    for (let i = 0; i < s.ts.length; i++) {
      const t = s.ts[i] as number;
      if (t < start || t >= end) continue;
      const k = Math.floor((t - offset) / size) - k0;
      (accs[k] ??= new Acc()).add(t, s.val[i] as PointValue, numeric);
    }
  }
  const ts: number[] = [];
  const val: PointValue[] = [];
  const filled: (PointValue | undefined)[] = new Array<PointValue | undefined>(n);
  for (let k = 0; k < n; k++) filled[k] = accs[k]?.result(f)?.val;
  let prev: PointValue = null;
  for (let k = 0; k < n; k++) {
    const t = (k0 + k) * size + offset;
    const v = filled[k];
    if (v !== undefined) {
      ts.push(t);
      val.push(v);
      prev = v;
      continue;
    }
    switch (buckets.fill) {
      case 'NONE':
        break;
      case 'NULLVALUE':
        ts.push(t);
        val.push(null);
        break;
      case 'PREVIOUS':
        ts.push(t);
        val.push(prev);
        break;
      case 'LINEAR':
        ts.push(t);
        val.push(linear(filled, k));
        break;
    }
  }
  return { ts, val };
}

/** Between the nearest buckets with numbers on both sides; null at the ends (as InfluxQL). */
function linear(filled: readonly (PointValue | undefined)[], k: number): PointValue {
  let a = k - 1;
  while (a >= 0 && filled[a] === undefined) a--;
  let b = k + 1;
  while (b < filled.length && filled[b] === undefined) b++;
  const va = filled[a];
  const vb = filled[b];
  if (typeof va !== 'number' || typeof vb !== 'number') return null;
  return va + ((vb - va) * (k - a)) / (b - a);
}
