/**
 * History batches of the uplink: reading a bounded run of samples after a cursor, and writing a
 * multi-point hisWrite grid (columns `ts`, `v0..vN` whose meta `id` names the upstream point)
 * straight to JSON text, without a dict, DateTime or Number per sample (a one-day backlog of
 * 1,000 points is 1.44 M of them).
 */
import type { TimeZone } from '../haystack/tz.js';
import { numberText } from '../haystack/values.js';
import type { HisKind, HisStats, HistoryStore } from '../store/history.js';
import type { Span } from './spans.js';

export type HisVals = Float64Array | boolean[] | string[];

/** A run of one point's samples, in time order. */
export interface Run {
  kind: HisKind;
  ts: Float64Array;
  val: HisVals;
}

/** One point's part of a batch. */
export interface BatchPart {
  /** Upstream id of the point. */
  up: string;
  unit: string | null;
  run: Run;
}

function slice(run: Run, n: number): Run {
  if (run.ts.length <= n) return run;
  return { kind: run.kind, ts: run.ts.subarray(0, n), val: run.val.slice(0, n) };
}

function concat(kind: HisKind, runs: readonly Run[], total: number): Run {
  if (runs.length === 1) return runs[0] as Run;
  const ts = new Float64Array(total);
  let at = 0;
  for (const r of runs) {
    ts.set(r.ts, at);
    at += r.ts.length;
  }
  if (kind === 'Number') {
    const val = new Float64Array(total);
    at = 0;
    for (const r of runs) {
      val.set(r.val as Float64Array, at);
      at += r.ts.length;
    }
    return { kind, ts, val };
  }
  const val: (boolean | string)[] = [];
  for (const r of runs) for (const v of r.val as (boolean | string)[]) val.push(v);
  return { kind, ts, val: val as boolean[] | string[] };
}

/**
 * Up to `max` samples of a point with after < ts <= through, oldest first; null when there are
 * none. Reads spans of time sized from the point's average density and widened over gaps, so
 * memory follows `max`, not the backlog. Returns the kind the store holds (the caller checks it
 * against the point's).
 */
export async function readAfter(history: HistoryStore, pointId: string, after: number, max: number, through = Infinity): Promise<Run | null> {
  const st = history.stats(pointId);
  if (st.kind === undefined || st.start === undefined || st.end === undefined || st.end <= after) return null;
  const kind = st.kind;
  const end = Math.min(st.end, Math.floor(through));
  let from = Math.max(Math.floor(after) + 1, st.start);
  const perSample = st.size > 1 ? (st.end - st.start + 1) / st.size : 1;
  let span = Math.max(1, Math.ceil(perSample * max));
  const runs: Run[] = [];
  let total = 0;
  while (total < max && from <= end) {
    const to = Math.min(from + span, end + 1);
    const c = await history.read(pointId, from, to);
    if (c.kind === null) break; // deleted meanwhile
    if (c.kind !== kind) return { kind: c.kind, ts: new Float64Array(0), val: [] as string[] };
    if (c.ts.length > 0) {
      runs.push({ kind: c.kind, ts: c.ts, val: c.val });
      total += c.ts.length;
    }
    from = to;
    // A gap or sparser history than average: look further next time.
    if (c.ts.length < (max - total) / 2) span *= 2;
  }
  if (total === 0) return null;
  return slice(concat(kind, runs, total), max);
}

/**
 * Samples of a point not yet acknowledged, estimated from its average density (for metrics; `hayloft
 * sync status` counts exactly): its late spans, and what is after its cursor. 0 when caught up.
 */
export function backlogEstimate(st: HisStats, cursor: number, late: readonly Span[]): number {
  if (st.end === undefined || st.start === undefined || (st.end <= cursor && late.length === 0)) return 0;
  const density = st.size / Math.max(1, st.end - st.start + 1);
  let n = 0;
  for (const [f, to] of late) n += Math.max(1, Math.round(density * (Math.min(to, st.end) - Math.max(f, st.start) + 1)));
  if (st.end > cursor) n += cursor < st.start ? st.size : Math.max(1, Math.round((st.size * (st.end - cursor)) / Math.max(1, st.end - st.start)));
  return Math.max(1, Math.min(n, st.size));
}

/** First index in a[from..) whose value is >= x. */
function lowerBound(a: Float64Array, x: number, from: number): number {
  let lo = from;
  let hi = a.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((a[mid] as number) < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** The JSON cell text of sample i (units and zone names need no escaping: see json.ts). */
function cellWriter(part: BatchPart): (i: number) => string {
  const { run } = part;
  switch (run.kind) {
    case 'Number': {
      const val = run.val as Float64Array;
      const tail = part.unit === null ? '"' : ' ' + part.unit + '"';
      return (i) => '"n:' + numberText(val[i] as number) + tail;
    }
    case 'Bool': {
      const val = run.val as boolean[];
      return (i) => (val[i] === true ? 'true' : 'false');
    }
    case 'Str': {
      const val = run.val as string[];
      return (i) => JSON.stringify('s:' + (val[i] as string));
    }
  }
}

/**
 * The hisWrite grid of a batch as JSON text: one row per distinct timestamp (written in `tz`), a
 * cell for each point that has a sample then.
 */
export function encodeHisWrite(parts: readonly BatchPart[], tz: TimeZone): string {
  let head = '{"meta":{"ver":"2.0"},"cols":[{"name":"ts"}';
  parts.forEach((p, k) => (head += ',{"name":"v' + k + '","id":' + JSON.stringify('r:' + p.up) + '}'));
  head += '],"rows":[';
  // The distinct timestamps of the batch, in order.
  let n = 0;
  for (const p of parts) n += p.run.ts.length;
  let rowTs: Float64Array;
  if (parts.length === 1) rowTs = (parts[0] as BatchPart).run.ts;
  else {
    const all = new Float64Array(n);
    let at = 0;
    for (const p of parts) {
      all.set(p.run.ts, at);
      at += p.run.ts.length;
    }
    all.sort();
    let m = 0;
    for (let i = 0; i < all.length; i++) if (m === 0 || all[i] !== all[m - 1]) all[m++] = all[i] as number;
    rowTs = all.subarray(0, m);
  }
  const rows = new Array<string>(rowTs.length);
  for (let r = 0; r < rowTs.length; r++) rows[r] = '{"ts":"t:' + tz.formatInstant(rowTs[r] as number, 2);
  parts.forEach((p, k) => {
    const key = ',"v' + k + '":';
    const cell = cellWriter(p);
    const ts = p.run.ts;
    let r = 0;
    for (let i = 0; i < ts.length; i++) {
      const t = ts[i] as number;
      // Timestamps of a point are a subsequence of the rows: step, or search when far ahead.
      if (rowTs[r] !== t) r = rowTs[r + 1] === t ? r + 1 : lowerBound(rowTs, t, r);
      rows[r] += key + cell(i);
    }
  });
  return head + rows.join('},') + (rows.length > 0 ? '}' : '') + ']}';
}
