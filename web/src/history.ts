/**
 * A point's history for the trend, as much as a chart can show: the raw samples (hisRead) over a
 * short window, and over a long one the store's aggregates (GraphQL `history` grouped by time:
 * the mean of each bucket with its minimum and maximum), so a year of one-minute samples is a few
 * hundred buckets computed by the server, not half a million samples sent to the browser.
 *
 * RAW_MAX_MS decides: a window up to 12 hours is drawn sample by sample (at a 10 s collect
 * interval, 4,320 samples); a longer one in buckets of the smallest nice size that makes at most
 * MAX_BUCKETS of them (about one per two pixels of a laptop-wide chart). Where retention removed
 * the raw samples, the server answers aggregates from its 15-minute rollups (docs/history.md), so
 * a year view still draws; a short window there is drawn from the rollups too.
 */
import { type Session, grid, num, time } from './api.js';

export const RAW_MAX_MS = 12 * 3_600_000;
const MAX_BUCKETS = 600;

type Unit = 'MINUTE' | 'HOUR' | 'DAY' | 'WEEK';
const BUCKETS: readonly { size: number; unit: Unit; ms: number; label: string }[] = [
  { size: 1, unit: 'MINUTE', ms: 60_000, label: '1 min' },
  { size: 5, unit: 'MINUTE', ms: 300_000, label: '5 min' },
  { size: 15, unit: 'MINUTE', ms: 900_000, label: '15 min' },
  { size: 30, unit: 'MINUTE', ms: 1_800_000, label: '30 min' },
  { size: 1, unit: 'HOUR', ms: 3_600_000, label: '1 h' },
  { size: 3, unit: 'HOUR', ms: 10_800_000, label: '3 h' },
  { size: 6, unit: 'HOUR', ms: 21_600_000, label: '6 h' },
  { size: 12, unit: 'HOUR', ms: 43_200_000, label: '12 h' },
  { size: 1, unit: 'DAY', ms: 86_400_000, label: '1 day' },
  { size: 1, unit: 'WEEK', ms: 604_800_000, label: '1 week' },
];

export interface Series {
  /** Seconds since the epoch (uPlot's time scale). */
  xs: number[];
  ys: (number | null)[];
  /** The bucket minimum and maximum, when aggregated. */
  lows?: (number | null)[];
  highs?: (number | null)[];
  /** `raw`: one point per sample; else the bucket size (`5 min`). */
  bucket: string;
}

/** A hisRead range of two instants (docs/spec/interface.md: `start,end` DateTimes). */
export function rangeText(startMs: number, endMs: number): string {
  const dt = (ms: number): string => `${new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z')} UTC`;
  return `${dt(startMs)},${dt(endMs)}`;
}

/** The bucket for a window, or undefined when it is short enough for raw samples. */
export function bucketFor(spanMs: number): (typeof BUCKETS)[number] | undefined {
  if (spanMs <= RAW_MAX_MS) return undefined;
  return BUCKETS.find((b) => spanMs / b.ms <= MAX_BUCKETS) ?? BUCKETS[BUCKETS.length - 1];
}

async function raw(session: Session, id: string, startMs: number, endMs: number): Promise<Series> {
  const g = await session.op('hisRead', grid([{ id: `r:${id}`, range: `s:${rangeText(startMs, endMs)}` }]));
  const xs: number[] = [];
  const ys: number[] = [];
  for (const r of g.rows) {
    const t = time(r.ts);
    const v = r.val === true ? 1 : r.val === false ? 0 : num(r.val)?.val;
    if (t === undefined || v === undefined) continue;
    xs.push(t / 1000);
    ys.push(v);
  }
  return { xs, ys, bucket: 'raw' };
}

const QUERY = `query Trend($id: String!, $start: iso8601!, $end: iso8601!, $units: duration!, $size: Int!) {
  haystack { entity(id: $id) { history(rangeAbsolute: { start: $start, end: $end }) {
    mean: aggregate(function: MEAN, groupBy: { groupByUnits: $units, groupBySize: $size, fill: NONE }) { ...series }
    low: select(function: MIN, groupBy: { groupByUnits: $units, groupBySize: $size, fill: NONE }) { ...series }
    high: select(function: MAX, groupBy: { groupByUnits: $units, groupBySize: $size, fill: NONE }) { ...series }
  } } }
}
fragment series on History { timeSeries { dataPoints { time valueKind { ... on Number { value } } } } }`;

interface Points {
  timeSeries: { dataPoints: { time: number; valueKind: { value?: number | null } | null }[] | null }[] | null;
}

function pointsOf(h: Points | null | undefined): Map<number, number | null> {
  const out = new Map<number, number | null>();
  for (const p of h?.timeSeries?.[0]?.dataPoints ?? []) out.set(p.time, p.valueKind?.value ?? null);
  return out;
}

async function aggregated(session: Session, id: string, startMs: number, endMs: number, b: (typeof BUCKETS)[number]): Promise<Series> {
  const res = await session.fetch('/graphql', {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ query: QUERY, variables: { id, start: new Date(startMs).toISOString(), end: new Date(endMs).toISOString(), units: b.unit, size: b.size } }),
  });
  const body = (await res.json()) as { data?: { haystack?: { entity?: { history?: { mean?: Points; low?: Points; high?: Points } | null } | null } }; errors?: { message: string }[] };
  if (body.errors !== undefined && body.errors.length > 0) throw new Error(body.errors.map((e) => e.message).join('; '));
  const h = body.data?.haystack?.entity?.history;
  const mean = pointsOf(h?.mean);
  const low = pointsOf(h?.low);
  const high = pointsOf(h?.high);
  const xs = [...mean.keys()].sort((a, b) => a - b);
  return {
    xs: xs.map((t) => t / 1000),
    ys: xs.map((t) => mean.get(t) ?? null),
    lows: xs.map((t) => low.get(t) ?? null),
    highs: xs.map((t) => high.get(t) ?? null),
    bucket: b.label,
  };
}

/** The 15-minute bucket: what retention keeps once raw samples are gone (docs/history.md). */
const ROLLUP_BUCKET = BUCKETS[2] as (typeof BUCKETS)[number];

/**
 * The history of a window: raw samples when short (or not a Number), aggregates when long. A
 * short window of a Number point with no raw samples left (retention removed them) shows the
 * 15-minute rollups the server kept instead, as a long window would.
 */
export async function loadHistory(session: Session, id: string, kind: string, startMs: number, endMs: number): Promise<Series> {
  const b = bucketFor(endMs - startMs);
  if (kind !== 'Number') return raw(session, id, startMs, endMs);
  if (b !== undefined) return aggregated(session, id, startMs, endMs, b);
  const r = await raw(session, id, startMs, endMs);
  return r.xs.length > 0 ? r : aggregated(session, id, startMs, endMs, ROLLUP_BUCKET);
}
