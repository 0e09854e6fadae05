/**
 * Metrics for `GET /metrics` (Prometheus text format), on prom-client: the reference client,
 * maintained, with the exposition format, histograms and scrape-time collectors done right, and
 * nothing native. Each App owns one Metrics with its own Registry (never prom-client's global
 * one: no module-level singletons, and tests run several apps in one process).
 *
 * HTTP request counts and latency are plain numbers on the hot path (Metrics.request), given to
 * prom-client at scrape time; values that already exist elsewhere
 * (points by status, samples written, bytes on disk) are read at scrape time by collectors
 * instead of being tracked twice.
 */
import type { Counter as CounterOf, Metric } from 'prom-client';
// prom-client's files one by one: its index also loads the Pushgateway and the cluster
// aggregator, and with them zlib, http, https and cluster, which a gateway does not use
// (prom-client-parts.d.ts gives their types).
import Counter from 'prom-client/lib/counter.js';
import collectDefaultMetrics from 'prom-client/lib/defaultMetrics.js';
import Gauge from 'prom-client/lib/gauge.js';
import Registry from 'prom-client/lib/registry.js';

export interface MetricsOptions {
  /** Process metrics (CPU, memory, event-loop lag, open files): on for the daemon, off in tests. */
  processMetrics?: boolean;
  productVersion: string;
}

/** One labelled value of a scrape-time gauge. */
export interface Sample {
  labels?: Record<string, string>;
  value: number;
}

/** Latency bucket bounds in seconds: from a cached read (sub-millisecond) to a year of history streamed on a Pi. */
const LATENCY_BOUNDS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/** One op's requests in plain numbers (see Metrics.request). */
interface OpStats {
  readonly byStatus: Map<number, number>;
  /** Requests per latency bucket (not cumulative); the last slot is above every bound. */
  readonly buckets: Float64Array;
  sum: number;
  count: number;
}

export class Metrics {
  readonly registry = new Registry();
  /** Error answers by error code. */
  readonly errors: CounterOf<'code'>;
  private readonly http = new Map<string, OpStats>();

  constructor(opts: MetricsOptions) {
    const registers = [this.registry];
    const http = this.http;
    new Counter({
      name: 'hayloft_http_requests_total',
      help: 'HTTP requests answered, by op and status',
      labelNames: ['op', 'status'],
      registers,
      collect() {
        this.reset();
        for (const [op, s] of http) for (const [status, n] of s.byStatus) this.inc({ op, status: String(status) }, n);
      },
    });
    this.registry.registerMetric(latencyHistogram(http));
    this.errors = new Counter({ name: 'hayloft_errors_total', help: 'Error answers, by error code', labelNames: ['code'], registers });
    new Gauge({ name: 'hayloft_info', help: 'Hayloft version (always 1)', labelNames: ['version'], registers }).set({ version: opts.productVersion }, 1);
    if (opts.processMetrics === true) collectDefaultMetrics({ register: this.registry });
  }

  /**
   * One answered HTTP request: its op (a known op name, `unknown`, or a route's name), status and
   * time. Kept in plain numbers and turned into `hayloft_http_requests_total` and
   * `hayloft_http_request_duration_seconds` at scrape time: prom-client's labelled children hash
   * their labels on every call, a visible share of a cached read's cost.
   */
  request(op: string, status: number, seconds: number): void {
    let s = this.http.get(op);
    if (s === undefined) this.http.set(op, (s = { byStatus: new Map(), buckets: new Float64Array(LATENCY_BOUNDS.length + 1), sum: 0, count: 0 }));
    s.byStatus.set(status, (s.byStatus.get(status) ?? 0) + 1);
    let i = 0;
    while (i < LATENCY_BOUNDS.length && seconds > (LATENCY_BOUNDS[i] as number)) i++;
    (s.buckets[i] as number)++;
    s.sum += seconds;
    s.count++;
  }

  /** A gauge whose samples are computed at each scrape. */
  gauge(name: string, help: string, labelNames: readonly string[], read: () => Sample[] | number): void {
    new Gauge({
      name,
      help,
      labelNames: [...labelNames],
      registers: [this.registry],
      collect() {
        const r = read();
        this.reset();
        if (typeof r === 'number') this.set(r);
        else for (const s of r) this.set(s.labels ?? {}, s.value);
      },
    });
  }

  /** A counter kept elsewhere (a running total, or one per label set), read at each scrape. */
  counter(name: string, help: string, read: () => number, labelNames?: readonly string[], readLabelled?: () => Sample[]): void {
    new Counter({
      name,
      help,
      labelNames: [...(labelNames ?? [])],
      registers: [this.registry],
      collect() {
        this.reset();
        if (readLabelled !== undefined) for (const s of readLabelled()) this.inc(s.labels ?? {}, s.value);
        else this.inc(read());
      },
    });
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  /** The exposition text. */
  text(): Promise<string> {
    return this.registry.metrics();
  }
}

/**
 * The latency histogram as a metric of the registry, read from the per-op numbers at each scrape
 * in the shape prom-client's own histograms give (cumulative `_bucket` with `le`, `_sum`, `_count`).
 */
function latencyHistogram(http: ReadonlyMap<string, OpStats>): Metric {
  const name = 'hayloft_http_request_duration_seconds';
  const help = 'Time to answer an HTTP request, by op';
  const read = (): { labels: Record<string, string | number>; value: number; metricName: string }[] => {
    const values: { labels: Record<string, string | number>; value: number; metricName: string }[] = [];
    for (const [op, s] of http) {
      let acc = 0;
      LATENCY_BOUNDS.forEach((le, i) => {
        acc += s.buckets[i] as number;
        values.push({ labels: { le, op }, value: acc, metricName: `${name}_bucket` });
      });
      values.push({ labels: { le: '+Inf', op }, value: s.count, metricName: `${name}_bucket` });
      values.push({ labels: { op }, value: s.sum, metricName: `${name}_sum` });
      values.push({ labels: { op }, value: s.count, metricName: `${name}_count` });
    }
    return values;
  };
  const metric = {
    name,
    help,
    type: 'histogram',
    aggregator: 'sum',
    get: () => Promise.resolve({ name, help, type: 'histogram', aggregator: 'sum', values: read() }),
    reset: () => undefined,
  };
  return metric as unknown as Metric;
}
