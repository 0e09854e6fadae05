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
 * Late samples: a write at or before a point's cursor (a backfill, a correction) marks its span
 * in the write's own LevelDB batch (SyncState.markLate, on the bus's 'his.plan'); those spans
 * are sent first, in the same batches, and leave the mark once acknowledged. While a point's
 * samples are read and in flight, it is claimed (SyncState.claim), so a write the read may miss
 * is marked too.
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
import type { HRef} from '../haystack/values.js';
import { HDateTime, type HDict } from '../haystack/values.js';
import type { Clock } from '../lib/clock.js';
import { ErrorCodes, isHayloftError } from '../lib/errors.js';
import type { Logger } from '../lib/log.js';
import type { Metrics } from '../lib/metrics.js';
import type { Part as DaemonPart } from '../lib/part.js';
import type { Model } from '../model/model.js';
import { POINT_KINDS_TEXT, type PointState, type SyncTags, describeKind, pointKind, pointUnit, pointZone } from '../model/point-state.js';
import type { Store } from '../store/db.js';
import type { HisKind, HistoryStore } from '../store/history.js';
import { UpstreamClient, UpstreamError } from './client.js';
import { type BatchPart, type Run, backlogEstimate, encodeHisWrite, readAfter } from './his-batch.js';
import { Mapper } from './mapping.js';
import type { Span } from './spans.js';
import { SyncState } from './state.js';

export type SyncStatus = 'ok' | 'pending' | 'down' | 'fault';

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

/** A point's span of time: its id, from, to (epoch ms, both included). */
type Span3 = readonly [string, number, number];

/** One point's part of a batch: samples after its cursor, or a late range up to it. */
interface Part {
  p: SyncPoint;
  part: BatchPart;
  /** The part's newest sample. */
  last: number;
  /** For a late span: where it started when it was read (from there to `last` is sent). */
  late: number | null;
}

interface PointStatus {
  status: SyncStatus;
  err: string | null;
  /** When a fault was set (faults are tried again after retryMaxMs). */
  since: number;
}


export class Uplink implements DaemonPart {
  readonly name = 'uplink';
  private readonly o: UplinkOptions;
  private readonly cfg: UplinkSettings;
  readonly state: SyncState;
  private readonly client: UpstreamClient;
  private readonly mapper: Mapper;
  private readonly random: () => number;
  private points = new Map<string, SyncPoint>();
  private readonly status = new Map<string, PointStatus>();
  /** Local ids deleted from the model, whose cursors and mappings go at the next pass. */
  private readonly deleted = new Set<string>();
  private modelDirty = true;
  private batchSamples: number;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | null = null;
  private stopping = false;
  private started = false;
  private phase: UplinkStats['state'] = 'starting';
  private failures = 0;
  private retryAt: number | null = null;
  private counters = { sentSamples: 0, sentBatches: 0, errors: 0 };

  constructor(opts: UplinkOptions) {
    this.o = opts;
    this.cfg = opts.config;
    this.random = opts.random ?? Math.random;
    this.batchSamples = opts.config.batchSamples;
    this.state = new SyncState(opts.store, opts.config.name);
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

  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    await this.state.load();
    // Samples written at or before what was sent (a backfill, a correction) are marked in the
    // write's own batch, and sent again (see SyncState.markLate).
    this.o.history.events.on('his.plan', this, (id, first, last, before, batch) => this.state.markLate(id, first, last, before, batch));
    this.o.model.events.on('records.committed', this, (c) => {
      this.modelDirty = true;
      for (const r of c.deleted) this.deleted.add((r.get('id') as HRef).id);
    });
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
    this.o.model.events.off(this);
    this.o.history.events.off(this);
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
      if (this.failures > 0) this.o.log.info({ connector: this.cfg.name }, 'uplink: the upstream answers again');
      this.failures = 0;
      this.retryAt = null;
      this.phase = 'idle';
      await this.state.setError(null);
    } catch (e) {
      if (this.stopping) return;
      this.counters.errors++;
      this.failures++;
      const message = (e as Error).message;
      const expected = isHayloftError(e, ErrorCodes.UPLINK_UNREACHABLE) || isHayloftError(e, ErrorCodes.UPLINK_AUTH) || isHayloftError(e, ErrorCodes.UPLINK_REJECTED);
      if (expected) this.o.log.warn({ connector: this.cfg.name, failures: this.failures, err: message }, 'uplink: pass failed; retrying later');
      else this.o.log.error({ connector: this.cfg.name, err: e }, 'uplink: unexpected error; retrying later');
      for (const id of this.points.keys()) {
        const s = this.status.get(id);
        if (s?.status !== 'fault') this.setStatus(id, 'down', message);
      }
      await this.state.setError(message).catch(() => undefined);
      const delay = this.backoff();
      this.retryAt = this.o.clock.now() + delay;
      this.phase = 'retrying';
      this.schedule(delay);
      return;
    }
    this.schedule(more ? 0 : this.cfg.scanIntervalMs);
  }

  /** Delay before retry n (1, 2, ...): min doubled n-1 times, capped, drawn in [half, all]. */
  private backoff(): number {
    const cap = Math.min(this.cfg.retryMaxMs, this.cfg.retryMinMs * 2 ** Math.min(this.failures - 1, 40));
    return Math.round(cap / 2 + (this.random() * cap) / 2);
  }

  /** Returns true when there may be more to send at once. */
  private async run(): Promise<boolean> {
    if (this.deleted.size > 0) {
      const ids = [...this.deleted];
      this.deleted.clear();
      await this.state.forget(ids, { cursor: true, mapping: true });
    }
    const now = this.o.clock.now();
    for (const s of this.status.values()) if (s.status === 'fault' && now - s.since >= this.cfg.retryMaxMs) this.modelDirty = true;
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
        this.setStatus(id, 'fault', `${describeKind(stored)} is not a history kind (${POINT_KINDS_TEXT})`);
        continue;
      }
      next.set(id, { id, kind, unit: pointUnit(stored), tz: pointZone(stored, this.o.defaultTz) });
    }
    // Points no longer selected lose their status tags (their cursors stay, should they return);
    // faults of the others are looked at afresh.
    for (const id of [...this.status.keys()]) {
      if (badKind.has(id)) continue;
      this.status.delete(id);
      if (!next.has(id)) this.o.points.setSync(id, { syncStatus: null, syncErr: null, syncLast: null });
    }
    this.points = next;
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
      if (why !== undefined) this.setStatus(id, 'fault', why);
      else this.refreshStatus(id);
    }
  }

  private setStatus(id: string, status: SyncStatus, err: string | null): void {
    const old = this.status.get(id);
    if (old?.status !== status || old.err !== err) this.status.set(id, { status, err, since: this.o.clock.now() });
    const tags: SyncTags = { syncStatus: status, syncErr: err };
    const cursor = this.state.cursor(id);
    const p = this.points.get(id);
    if (cursor > -Infinity) tags.syncLast = new HDateTime(cursor, p?.tz ?? this.o.defaultTz);
    this.o.points.setSync(id, tags);
  }

  /** ok or pending, from the point's cursor and newest sample (faults stay until cleared). */
  private refreshStatus(id: string): void {
    if (this.status.get(id)?.status === 'fault') return;
    const end = this.o.history.stats(id).end;
    const mapped = this.state.mapping(id) !== undefined;
    const caughtUp = (end === undefined || end <= this.state.cursor(id)) && this.state.late(id) === undefined;
    this.setStatus(id, mapped && caughtUp ? 'ok' : 'pending', null);
  }

  private eligible(p: SyncPoint): boolean {
    const s = this.status.get(p.id);
    return s?.status !== 'fault' && this.state.mapping(p.id) !== undefined;
  }

  /** Builds and sends one batch; false when nothing is pending. */
  private async sendBatch(): Promise<boolean> {
    const { history } = this.o;
    // Oldest pending first: by the first sample not yet acknowledged (at least cursor + 1), or
    // where a point's late samples start (written at or before its cursor: sent again up to it).
    const pending: { p: SyncPoint; from: number; late: Span | undefined }[] = [];
    for (const p of this.points.values()) {
      if (!this.eligible(p)) continue;
      const late = this.state.late(p.id);
      if (late !== undefined) {
        pending.push({ p, from: late[0], late });
        continue;
      }
      const st = history.stats(p.id);
      const cursor = this.state.cursor(p.id);
      if (st.end === undefined || st.start === undefined || st.end <= cursor) continue;
      pending.push({ p, from: Math.max(cursor + 1, st.start), late: undefined });
    }
    if (pending.length === 0) return false;
    pending.sort((a, b) => a.from - b.from || (a.p.id < b.p.id ? -1 : 1));
    // One zone per batch: rows carry one timestamp for all points, written in the points' zone,
    // as strict servers want hisWrite timestamps in the zone of the point.
    const tz = (pending[0] as { p: SyncPoint }).p.tz;
    const parts: Part[] = [];
    const settled: Span3[] = [];
    let budget = this.batchSamples;
    try {
      for (const { p, from, late } of pending) {
        if (budget <= 0 || parts.length >= this.cfg.batchPoints) break;
        if (p.tz !== tz) continue;
        const cursor = this.state.cursor(p.id);
        // From here every write the read below may miss marks the point late.
        await this.state.beginReads(history, [{ id: p.id, late: late !== undefined }]);
        const run: Run | null = late !== undefined ? await readAfter(history, p.id, from - 1, budget, Math.min(late[1], cursor)) : await readAfter(history, p.id, cursor, budget);
        if (run === null) {
          // A late span whose samples are gone (deleted meanwhile): nothing to send again.
          if (late !== undefined) settled.push([p.id, late[0], late[1]]);
          continue;
        }
        if (run.kind !== p.kind) {
          this.setStatus(p.id, 'fault', `the point is of kind ${p.kind} but its history holds ${run.kind} samples`);
          continue;
        }
        const last = run.ts[run.ts.length - 1] as number;
        if (late === undefined) this.state.claim(p.id, last);
        const up = this.state.mapping(p.id)?.up as string;
        parts.push({ p, part: { up, unit: p.unit, run }, last, late: late === undefined ? null : from });
        budget -= run.ts.length;
      }
      if (settled.length > 0) await this.acknowledge([], settled);
      // Nothing readable after all (history deleted meanwhile): look again at the next scan.
      if (parts.length === 0) return settled.length > 0;
      await this.send(parts, tz);
      return true;
    } finally {
      this.state.releaseClaims();
    }
  }

  /**
   * Records what the upstream acknowledged: cursors of the parts after their cursor, and late
   * ranges sent (under those points' history locks, see SyncState.ack).
   */
  private async acknowledge(parts: readonly Part[], settled: readonly Span3[] = []): Promise<void> {
    const cursors: [string, number][] = [];
    const late: Span3[] = [...settled];
    for (const x of parts) {
      if (x.late !== null) late.push([x.p.id, x.late, x.last]);
      else cursors.push([x.p.id, x.last]);
    }
    await this.state.ackSent(this.o.history, cursors, this.o.clock.now(), late);
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
        this.setStatus(x.p.id, 'pending', null);
        return;
      }
      this.o.log.warn({ connector: this.cfg.name, id: x.p.id, err: e.message }, 'uplink: the upstream refused the history of a point');
      this.setStatus(x.p.id, 'fault', e.message);
      return;
    }
    await this.acknowledge(parts);
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
    let faulted = 0;
    let backlogPoints = 0;
    let backlogSamples = 0;
    const byStatus: Record<SyncStatus, number> = { ok: 0, pending: 0, down: 0, fault: 0 };
    for (const id of this.points.keys()) {
      if (this.state.mapping(id) !== undefined) mapped++;
      const status = this.status.get(id)?.status ?? 'pending';
      byStatus[status]++;
      if (status === 'fault') faulted++;
      const n = backlogEstimate(this.o.history.stats(id), this.state.cursor(id), this.state.lateSpans(id));
      if (n === 0) continue;
      backlogPoints++;
      backlogSamples += n;
    }
    return {
      name: this.cfg.name,
      url: this.cfg.url,
      state: this.phase,
      points: this.points.size,
      mapped,
      faulted,
      byStatus,
      backlogPoints,
      backlogSamples,
      ...this.counters,
      failures: this.failures,
      lastAck: this.state.info.lastAck,
      lastError: this.state.info.lastError,
      retryAt: this.retryAt,
      requests: this.client.requests,
    };
  }
}
