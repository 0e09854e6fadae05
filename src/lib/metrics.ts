/**
 * Metrics for `GET /metrics` (Prometheus text format), on prom-client: the reference client,
 * maintained, with the exposition format, histograms and scrape-time collectors done right, and
 * nothing native. Each App owns one Metrics with its own Registry (never prom-client's global
 * one: no module-level singletons, and tests run several apps in one process).
 *
 * Counters kept on the hot path are cheap label lookups; values that already exist elsewhere
 * (points by status, samples written, bytes on disk) are read at scrape time by collectors
 * instead of being tracked twice.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

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

export class Metrics {
  readonly registry = new Registry();
  /** HTTP requests answered, by op (a known op name or a fixed route name) and status. */
  readonly requests: Counter<'op' | 'status'>;
  /** Time to answer, by op. */
  readonly latency: Histogram<'op'>;
  /** Error answers by error code. */
  readonly errors: Counter<'code'>;

  constructor(opts: MetricsOptions) {
    const registers = [this.registry];
    this.requests = new Counter({ name: 'hayloft_http_requests_total', help: 'HTTP requests answered, by op and status', labelNames: ['op', 'status'], registers });
    this.latency = new Histogram({
      name: 'hayloft_http_request_duration_seconds',
      help: 'Time to answer an HTTP request, by op',
      labelNames: ['op'],
      // From a cached read (sub-millisecond) to a year of history streamed on a Pi (seconds).
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    });
    this.errors = new Counter({ name: 'hayloft_errors_total', help: 'Error answers, by error code', labelNames: ['code'], registers });
    new Gauge({ name: 'hayloft_info', help: 'Hayloft version (always 1)', labelNames: ['version'], registers }).set({ version: opts.productVersion }, 1);
    if (opts.processMetrics === true) collectDefaultMetrics({ register: this.registry });
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
