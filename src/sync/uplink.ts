/**
 * The uplink: store-and-forward of history (and the model) to an upstream Haystack REST service.
 *
 * One loop, never two passes at once: map (only when the model changed: find or create the synced
 * points upstream, keep tags in step), then drain: build a batch (points of one time zone, oldest
 * pending first, at most `batchSamples` samples and `batchPoints` points, read from each point's
 * cursor on), send it as one multi-point hisWrite, and only once the upstream has acknowledged it
 * move the cursors of its points. Repeat until nothing is pending, then look again every
 * `scanIntervalMs` (the history store's stats are in memory, so looking costs a Map lookup per
 * point). A batch whose answer is lost is sent again: hisWrite keeps the last value of a timestamp,
 * so nothing is doubled upstream. A crash anywhere loses at most the cursor moves not yet written,
 * which again only means sending a batch again.
 *
 * Cursors, late samples (a write at or before a point's cursor: a backfill, a correction, sent
 * again first, in the same batches), claims, the choice of pending points, the reads, the
 * acknowledgements, the backoff, the points' sync status and the backlog figures are the
 * outbox's (outbox.ts), shared with the MQTT edge node; this file is how they go over REST.
 *
 * Failures: an unreachable upstream, a 5xx or refused credentials stop the pass; it is retried
 * after an exponential backoff with jitter (retryMinMs doubling to retryMaxMs, each delay drawn
 * between half and all of it, so a fleet of devices does not come back in step). A request the
 * upstream refuses (an error grid) is narrowed down to the point that causes it by sending the
 * batch's points one by one; that point goes to `fault` with the upstream's message, and the
 * others carry on. Faulted points are tried again when the model changes, or after retryMaxMs.
 *
 * Status: each synced point shows `syncStatus` (ok: caught up; pending: samples waiting; down:
 * the upstream cannot be reached; fault: this point cannot be synced), `syncErr` and `syncLast`
 * (the newest sample the upstream acknowledged), transient tags like curVal (no disk write).
 * stats() gives the figures for /metrics.
 */
import type { UplinkSettings } from './settings.js';
import type { TimeZone } from '../haystack/tz.js';
import type { HDict, HRef } from '../haystack/values.js';
import type { Clock } from '../lib/clock.js';
import { ErrorCodes, isHayloftError } from '../lib/errors.js';
import type { Logger } from '../lib/log.js';
import type { Metrics } from '../lib/metrics.js';
import type { Part as DaemonPart } from '../lib/part.js';
import type { Model } from '../model/model.js';
import { POINT_KINDS_TEXT, type PointState, describeKind, pointKind, pointUnit, pointZone } from '../model/point-state.js';
import type { Store } from '../store/db.js';
import type { HisKind, HistoryStore } from '../store/history.js';
import { UpstreamClient, UpstreamError } from './client.js';
import { type BatchPart, encodeHisWrite } from './his-batch.js';
import { Mapper } from './mapping.js';
import { type Due, Outbox, type Sent, type SyncStatus } from './outbox.js';
import type { SyncState } from './state.js';

export type { SyncStatus } from './outbox.js';

export interface UplinkOptions {
  config: UplinkSettings;
  model: Model;
  /** The owner of points' live tags: syncStatus, syncErr, syncLast go through it. */
  points: PointState;
  history: HistoryStore;
  store: Store;
  clock: Clock;
  log: Logger;
  /** Zone of points without a `tz` tag (the server's). */
  defaultTz: TimeZone;
  /** Injectable for tests. */
  fetch?: typeof fetch;
  /** Random numbers in [0, 1) for the backoff jitter; Math.random by default. */
  random?: () => number;
}

export interface UplinkStats {
  name: string;
  url: string;
  /** idle: caught up; sending; retrying: waiting after a failure; stopped. */
  state: 'starting' | 'idle' | 'sending' | 'retrying' | 'stopped';
  /** Points selected by the filter (with his and a history kind). */
  points: number;
  /** Points found or created upstream. */
  mapped: number;
  faulted: number;
  /** Synced points by syncStatus. */
  byStatus: Record<SyncStatus, number>;
  /** Points with samples not yet acknowledged upstream. */
  backlogPoints: number;
  /** Samples not yet acknowledged upstream: an estimate from each point's average density (exact: `hayloft sync status`). */
  backlogSamples: number;
  sentSamples: number;
  sentBatches: number;
  /** Requests that failed (network, 5xx, refusals). */
  errors: number;
  /** Consecutive failed passes (0 when the last one succeeded). */
  failures: number;
  /** Epoch ms of the last acknowledged batch, or null. */
  lastAck: number | null;
  lastError: string | null;
  /** Epoch ms of the next attempt while retrying, else null. */
  retryAt: number | null;
  /** Upstream requests made (token requests included). */
  requests: number;
}

interface SyncPoint {
  id: string;
  kind: HisKind;
  unit: string | null;
  tz: TimeZone;
}

/** One point's part of a batch: samples after its cursor, or a late range up to it. */
interface Part {
  p: SyncPoint;
  part: BatchPart;
  /** What the upstream's acknowledgement of the part acknowledges. */
  sent: Sent;
}

export class Uplink implements DaemonPart {
  readonly name = 'uplink';
  private readonly o: UplinkOptions;
  private readonly cfg: UplinkSettings;
  private readonly outbox: Outbox;
  private readonly client: UpstreamClient;
  private readonly mapper: Mapper;
  private points = new Map<string, SyncPoint>();
  /** The ids of `points` sorted: pending points that tie go by id (deterministic batches). */
  private order: string[] = [];
  private modelDirty = true;
  private batchSamples: number;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | null = null;
  private stopping = false;
  private started = false;
  private phase: UplinkStats['state'] = 'starting';
  private retryAt: number | null = null;
  private counters = { sentSamples: 0, sentBatches: 0, errors: 0 };

  constructor(opts: UplinkOptions) {
    this.o = opts;
    this.cfg = opts.config;
    this.batchSamples = opts.config.batchSamples;
    this.outbox = new Outbox({
      ...opts,
      connector: opts.config,
      status: { points: opts.points, zone: (id) => this.points.get(id)?.tz ?? opts.defaultTz },
      modelChanged: () => (this.modelDirty = true),
    });
    this.client = new UpstreamClient({
      url: this.cfg.url,
      clientId: this.cfg.clientId,
      clientSecret: this.cfg.clientSecret,
      username: this.cfg.username,
      password: this.cfg.password,
      refreshToken: this.cfg.refreshToken,
      timeoutMs: this.cfg.timeoutMs,
      clock: opts.clock,
      tokens: this.state,
      ...(opts.fetch ? { fetch: opts.fetch } : {}),
    });
    this.mapper = new Mapper({ model: opts.model, client: this.client, state: this.state, createMissing: this.cfg.createMissing, updateTags: this.cfg.updateTags, log: opts.log });
  }

  /** The connector's cursors, mappings and tokens (the outbox's). */
  get state(): SyncState {
    return this.outbox.state;
  }

  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    await this.outbox.start();
    this.o.log.info({ connector: this.cfg.name, url: this.cfg.url, filter: this.cfg.filter }, 'uplink starting');
    this.schedule(0);
  }

  /** Stops the loop: aborts a request in flight (its batch is sent again next time) and waits for the pass to end. */
  async stop(): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    this.phase = 'stopped';
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    this.outbox.stop();
    this.client.close();
    await this.running;
  }

  private schedule(ms: number): void {
    if (this.stopping) return;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.running = this.pass().finally(() => (this.running = null));
    }, ms);
  }

  /** One pass; schedules the next. Never throws. */
  private async pass(): Promise<void> {
    let more = false;
    try {
      more = await this.run();
      if (this.outbox.recovered()) this.o.log.info({ connector: this.cfg.name }, 'uplink: the upstream answers again');
      this.retryAt = null;
      this.phase = 'idle';
      await this.state.setError(null);
    } catch (e) {
      if (this.stopping) return;
      this.counters.errors++;
      const message = (e as Error).message;
      const delay = this.outbox.failed(message, this.points.keys());
      const expected = isHayloftError(e, ErrorCodes.UPLINK_UNREACHABLE) || isHayloftError(e, ErrorCodes.UPLINK_AUTH) || isHayloftError(e, ErrorCodes.UPLINK_REJECTED);
      if (expected) this.o.log.warn({ connector: this.cfg.name, failures: this.outbox.failures, err: message }, 'uplink: pass failed; retrying later');
      else this.o.log.error({ connector: this.cfg.name, err: e }, 'uplink: unexpected error; retrying later');
      await this.state.setError(message).catch(() => undefined);
      this.retryAt = this.o.clock.now() + delay;
      this.phase = 'retrying';
      this.schedule(delay);
      return;
    }
    this.schedule(more ? 0 : this.cfg.scanIntervalMs);
  }

  /** Returns true when there may be more to send at once. */
  private async run(): Promise<boolean> {
    await this.outbox.forgetDeleted();
    if (this.outbox.faultsDue()) this.modelDirty = true;
    if (this.modelDirty) await this.map();
    this.phase = 'sending';
    // Drain: batches until nothing is pending; stop early to map again when the model changed.
    for (let n = 0; !this.stopping; n++) {
      if (this.modelDirty) return true;
      const sent = await this.sendBatch();
      if (!sent) return false;
      // Yield to the event loop between batches so requests to this server are served.
      if (n % 8 === 7) await new Promise((r) => setImmediate(r));
    }
    return false;
  }

  /** Selects the synced points and maps them upstream. */
  private async map(): Promise<void> {
    this.modelDirty = false;
    const { model } = this.o;
    const next = new Map<string, SyncPoint>();
    const badKind = new Set<string>();
    let matched: HDict[];
    try {
      matched = model.query(this.cfg.filter);
    } catch (e) {
      this.o.log.error({ err: (e as Error).message, filter: this.cfg.filter }, 'uplink: the filter does not parse; nothing is synced');
      matched = [];
    }
    for (const rec of matched) {
      if (!rec.has('point') || !rec.has('his')) continue;
      const id = (rec.get('id') as HRef).id;
      const stored = model.stored(id);
      if (stored === undefined) continue;
      const kind = pointKind(stored);
      if (kind === undefined) {
        badKind.add(id);
        this.outbox.setStatus(id, 'fault', `${describeKind(stored)} is not a history kind (${POINT_KINDS_TEXT})`);
        continue;
      }
      next.set(id, { id, kind, unit: pointUnit(stored), tz: pointZone(stored, this.o.defaultTz) });
    }
    // Points no longer selected lose their status tags (their cursors stay, should they return);
    // faults of the others are looked at afresh.
    this.outbox.resetStatus(next, badKind);
    this.points = next;
    this.order = [...next.keys()].sort();
    let outcome;
    try {
      outcome = await this.mapper.sync([...next.keys()]);
    } catch (e) {
      this.modelDirty = true;
      throw e;
    }
    if (outcome.changed) this.modelDirty = true;
    for (const id of next.keys()) {
      const why = outcome.faults.get(id);
      if (why !== undefined) this.outbox.setStatus(id, 'fault', why);
      else this.refreshStatus(id);
    }
  }

  /** ok or pending (a point not yet found upstream is pending). */
  private refreshStatus(id: string): void {
    this.outbox.refreshStatus(id, this.state.mapping(id) !== undefined);
  }

  private eligible(id: string): boolean {
    return this.outbox.statusOf(id) !== 'fault' && this.state.mapping(id) !== undefined;
  }

  /** Builds and sends one batch; false when nothing is pending. */
  private async sendBatch(): Promise<boolean> {
    const pending = this.outbox.pending(this.eligibleIds());
    if (pending.length === 0) return false;
    // One zone per batch: rows carry one timestamp for all points, written in the points' zone,
    // as strict servers want hisWrite timestamps in the zone of the point.
    const tz = (this.points.get((pending[0] as Due).id) as SyncPoint).tz;
    const parts: Part[] = [];
    const settled: Sent[] = [];
    let budget = this.batchSamples;
    try {
      for (const due of pending) {
        if (budget <= 0 || parts.length >= this.cfg.batchPoints) break;
        const p = this.points.get(due.id) as SyncPoint;
        if (p.tz !== tz) continue;
        // Point by point: a point claimed but not read (over the budget) would mark writes late for nothing.
        await this.outbox.beginReads([due]);
        const { run } = await this.outbox.read(due, p.kind, budget);
        if (run === null) {
          // A late span whose samples are gone (deleted meanwhile): nothing to send again.
          if (due.late !== undefined) settled.push(this.outbox.settled(due.id, due.late));
          continue;
        }
        if (run.kind !== p.kind) {
          this.outbox.setStatus(p.id, 'fault', `the point is of kind ${p.kind} but its history holds ${run.kind} samples`);
          continue;
        }
        const up = this.state.mapping(p.id)?.up as string;
        parts.push({ p, part: { up, unit: p.unit, run }, sent: this.outbox.sent(due, run) });
        budget -= run.ts.length;
      }
      if (settled.length > 0) await this.outbox.ack(settled);
      // Nothing readable after all (history deleted meanwhile): look again at the next scan.
      if (parts.length === 0) return settled.length > 0;
      await this.send(parts, tz);
      return true;
    } finally {
      this.outbox.releaseClaims();
    }
  }

  private *eligibleIds(): Iterable<string> {
    for (const id of this.order) if (this.eligible(id)) yield id;
  }

  /** Sends parts as one hisWrite; on a refusal narrows it down to the points refused. */
  private async send(parts: readonly Part[], tz: TimeZone): Promise<void> {
    const body = encodeHisWrite(
      parts.map((x) => x.part),
      tz,
    );
    try {
      await this.client.call('hisWrite', body);
    } catch (e) {
      if (!(e instanceof UpstreamError) || e.code !== ErrorCodes.UPLINK_REJECTED) throw e;
      this.counters.errors++;
      if (e.status === 413 && this.batchSamples > 1) {
        // The upstream takes smaller requests than configured: halve and go again.
        this.batchSamples = Math.max(1, Math.floor(this.batchSamples / 2));
        this.o.log.warn({ connector: this.cfg.name, batchSamples: this.batchSamples }, 'uplink: batch too large for the upstream; sending smaller ones');
        return;
      }
      if (parts.length > 1) {
        for (const x of parts) await this.send([x], tz);
        return;
      }
      const x = parts[0] as Part;
      if (e.upstreamCode === ErrorCodes.NOT_FOUND) {
        // The point is gone upstream: find or create it again.
        await this.state.forget([x.p.id], { cursor: false, mapping: true });
        this.modelDirty = true;
        this.outbox.setStatus(x.p.id, 'pending', null);
        return;
      }
      this.o.log.warn({ connector: this.cfg.name, id: x.p.id, err: e.message }, 'uplink: the upstream refused the history of a point');
      this.outbox.setStatus(x.p.id, 'fault', e.message);
      return;
    }
    await this.outbox.ack(parts.map((x) => x.sent));
    this.counters.sentBatches++;
    for (const x of parts) {
      this.counters.sentSamples += x.part.run.ts.length;
      this.refreshStatus(x.p.id);
    }
  }

  /** The uplink's figures (stats()), read at scrape time. */
  metrics(metrics: Metrics): void {
    const connector = this.state.name;
    metrics.gauge('hayloft_uplink_points', 'Points synced upstream, by syncStatus', ['connector', 'syncStatus'], () =>
      Object.entries(this.stats().byStatus).map(([syncStatus, value]) => ({ labels: { connector, syncStatus }, value })),
    );
    metrics.gauge('hayloft_uplink_backlog_points', 'Points with samples not yet acknowledged upstream', ['connector'], () => [{ labels: { connector }, value: this.stats().backlogPoints }]);
    metrics.gauge('hayloft_uplink_backlog_samples', 'Samples not yet acknowledged upstream (estimated from each point\'s density)', ['connector'], () => [
      { labels: { connector }, value: this.stats().backlogSamples },
    ]);
    metrics.counter('hayloft_uplink_samples_sent_total', 'History samples acknowledged upstream since start', () => this.stats().sentSamples);
    metrics.counter('hayloft_uplink_batches_sent_total', 'hisWrite batches acknowledged upstream since start', () => this.stats().sentBatches);
    metrics.counter('hayloft_uplink_errors_total', 'Failed upstream requests since start', () => this.stats().errors);
    metrics.gauge('hayloft_uplink_consecutive_failures', 'Failed uplink passes in a row (0: the last one succeeded)', ['connector'], () => [{ labels: { connector }, value: this.stats().failures }]);
    metrics.gauge('hayloft_uplink_last_ack_timestamp_seconds', 'When the upstream last acknowledged a batch (0: never)', ['connector'], () => [
      { labels: { connector }, value: (this.stats().lastAck ?? 0) / 1000 },
    ]);
  }

  stats(): UplinkStats {
    let mapped = 0;
    for (const id of this.points.keys()) if (this.state.mapping(id) !== undefined) mapped++;
    const byStatus = this.outbox.byStatus(this.points.keys());
    const backlog = this.outbox.backlog(this.points.keys());
    return {
      name: this.cfg.name,
      url: this.cfg.url,
      state: this.phase,
      points: this.points.size,
      mapped,
      faulted: byStatus.fault,
      byStatus,
      backlogPoints: backlog.points,
      backlogSamples: backlog.samples,
      ...this.counters,
      failures: this.outbox.failures,
      lastAck: this.state.info.lastAck,
      lastError: this.state.info.lastError,
      retryAt: this.retryAt,
      requests: this.client.requests,
    };
  }
}
