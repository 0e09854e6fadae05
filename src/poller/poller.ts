/**
 * The poller: the one scheduler that reads every polled point through its driver into `curVal`,
 * `curStatus`, `curErr` (and connectors' `connStatus`, `connErr`), and collects history.
 *
 * Configuration is the model itself. Connectors (records with a driver's connector marker,
 * `modbusConn`, `bacnetConn`) and points (a driver's Ref tag and address tag, `modbusConnRef` and
 * `modbusCur`) are picked up, changed and dropped as createRec/updateRec/deleteRec commit: the
 * poller listens to model changes and rebuilds only what a change touches. No restart.
 *
 * Scheduling: a connector's points are grouped into buckets by poll time (`pollTime` on the point,
 * else on the connector, else 10 s). A bucket is read with one driver call (the driver batches:
 * Modbus blocks, BACnet ReadPropertyMultiple). Buckets are staggered over the poll time
 * (golden-ratio offsets, so buckets added later still spread out), each at a fixed place in the
 * wall clock's periods of its poll time, early enough in them that history collected every poll
 * time gets a sample in every interval (phaseOf). A connector runs one bucket at
 * a time (and the driver serialises requests per physical link); connectors run independently,
 * so one dead device never delays the others. A bucket that falls behind is not read twice to
 * catch up: it keeps its phase and skips the missed cycles.
 *
 * Status (docs/spec/wire-notes.md §6): `ok` with `curVal`; `down` (the device does not answer, the link is
 * lost) and `fault` (configuration, or the device refuses the point) with `curErr` and no
 * `curVal`; `stale` keeps the last `curVal` when no fresh value came within the stale time
 * (connector `staleTime`, default three poll times and at least 30 s); `disabled` for a
 * `disabled` connector or point; `unknown` until the first read. A down connector is retried
 * with exponential backoff (1 s doubling to 1 min, never faster than its poll time) and returns to
 * `ok` by itself when the device answers.
 *
 * The rules of those tags (which status follows from what, the repeat check, a down connector
 * taking its points down) are point state's (model/point-state.ts): the poller says what happened,
 * `curOk`, `curErr`, `curStale`, `connStatus`.
 *
 * Cost model (100 devices × 100 points a second on a small controller): per cycle one driver call
 * per bucket; a point's transient tags are set only when its value, status or error changed
 * (point state's repeat check: setTransient, watches and read-views are not touched by an
 * unchanged reading).
 */
import { type Driver, type DriverConn, type PointRead, type PreparedPoint, configError } from '../drivers/driver.js';
import type { DriverRegistry } from '../drivers/registry.js';
import { durationTag } from '../drivers/tags.js';
import { HNumber, HRef, type HDict } from '../haystack/values.js';
import type { Clock } from '../lib/clock.js';
import { backoffDelay } from '../lib/backoff.js';
import { ErrorCodes, isHayloftError } from '../lib/errors.js';
import type { Logger } from '../lib/log.js';
import type { Metrics } from '../lib/metrics.js';
import type { Part } from '../lib/part.js';
import type { Model, ModelChange } from '../model/model.js';
import { POINT_KINDS_TEXT, type ConnStatus, type CurStatus, type PointState, driverOf, pointKind, pointUnit, writerOf } from '../model/point-state.js';
import type { HisKind, HistoryStore } from '../store/history.js';
import type { PointWriter } from '../model/point-writer.js';
import { type Collecting, type DatingTrust, HisCollector, collectPlan } from './his-collector.js';
import { WriteQueue } from './write-queue.js';
import { CovManager, DEFAULT_COV_LIFETIME_MS } from './cov.js';

export type PointStatus = CurStatus;
export type { ConnStatus };

export const DEFAULT_POLL_MS = 10_000;
export const MIN_STALE_MS = 30_000;
const MAX_TIMER_MS = 30_000;
const GOLDEN = 0.6180339887498949;

/**
 * Where in the wall clock's periods of its poll time (multiples of the poll time since the epoch,
 * the intervals history collects by) the k-th bucket of a poll time is read: spread by
 * golden-ratio steps over 5-65 % of the period. History takes the first read of each interval
 * (his-collector.ts); a read kept near an interval's end would now and then fall into the next
 * one and leave an interval without a sample. Here a read may end up to 35 % of its poll time
 * late (the event loop, the device) and still land in its own interval.
 */
function phaseOf(k: number, ms: number): number {
  return (0.05 + 0.6 * ((k * GOLDEN) % 1)) * ms;
}

/**
 * How long from a read at `wall` until the next: `phase` into the next period of `ms` of the wall
 * clock. One read per period, whether this one ran early, on time or late (a late one skips the
 * cycles it missed rather than reading twice). From the wall clock each time: after a step or a
 * slew of it the reads keep their place in its intervals; the wait itself is on the monotonic clock.
 */
function untilPhase(phase: number, ms: number, wall: number): number {
  return (Math.floor(wall / ms) + 1) * ms + phase - wall;
}

export interface PollerOptions {
  model: Model;
  /** Where readings, connector status and collected history's his tags go. */
  points: PointState;
  /** Priority arrays: their effective values are written to the devices (write-queue.ts). */
  writer?: PointWriter;
  history: HistoryStore;
  drivers: DriverRegistry;
  clock: Clock;
  log: Logger;
  /** Run on timers (default). False: nothing runs until tick() (tests with a ManualClock). */
  timers?: boolean;
  /** Retry delays of a down connector: from `minMs`, doubling, up to `maxMs`. */
  backoff?: { minMs?: number; maxMs?: number };
  /** Poll time of connectors without `pollTime`. */
  defaultPollMs?: number;
  /** Whether the wall clock may date collected samples (lib/clock-trust.ts); absent: always. */
  trust?: DatingTrust;
}

export interface PollerStats {
  connectors: number;
  points: number;
  buckets: number;
  /** Driver reads done (buckets polled) since start. */
  reads: number;
  /** Of them, reads that found the device down. */
  failures: number;
  /** History samples waiting to be written. */
  hisBacklog: number;
}

/** Per-connector read counts and time, for /metrics. */
export interface ConnectorStats {
  reads: number;
  failures: number;
  /** Total seconds spent in driver reads (with `reads`, the mean latency). */
  seconds: number;
}

interface ConnState {
  readonly id: string;
  /** How messages name it: its name (fully qualified), else `@id`. */
  readonly label: string;
  readonly rec: HDict;
  readonly driver: Driver;
  readonly conn: DriverConn | undefined;
  /** Why it is not polled: a fault (bad tags) or disabled. */
  readonly problem: { status: 'fault' | 'disabled'; err: string | undefined } | undefined;
  readonly pollMs: number;
  readonly staleMs: number | undefined;
  readonly buckets: Map<number, Bucket>;
  busy: boolean;
  closed: boolean;
  failures: number;
  retryAt: number;
}

interface Bucket {
  readonly conn: ConnState;
  readonly pollMs: number;
  staleMs: number;
  points: Polled[];
  prepared: PreparedPoint[];
  due: number;
  /** Where in each period of the wall clock it is read (phaseOf), ms. */
  readonly phase: number;
  /** Time of the last successful read (0: none yet). */
  lastOk: number;
  /** Its ok points were made stale; cleared by the next successful read. */
  stale: boolean;
}

interface Polled {
  readonly id: string;
  readonly rec: HDict;
  readonly driver: Driver;
  readonly connId: string | undefined;
  readonly conn: ConnState | undefined;
  /** Undefined when the point is not polled (fault or disabled). */
  readonly prepared: PreparedPoint | undefined;
  readonly pollMs: number;
  readonly collect: Collecting | undefined;
  /**
   * False once the point is changed (a new Polled replaces it) or removed: a read that was in
   * flight then drops its result. A flag rather than a lookup in `points` per value read.
   */
  current: boolean;
}

function message(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

export class Poller implements Part {
  readonly name = 'poller';
  private readonly model: Model;
  private readonly state: PointState;
  private readonly drivers: DriverRegistry;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly useTimers: boolean;
  private readonly minBackoffMs: number;
  private readonly maxBackoffMs: number;
  private readonly defaultPollMs: number;
  private readonly collector: HisCollector;
  private readonly writes: WriteQueue | undefined;
  private readonly conns = new Map<string, ConnState>();
  private readonly points = new Map<string, Polled>();
  /** Connector id -> the points naming it (whether or not it exists or is a connector). */
  private readonly byConn = new Map<string, Set<Polled>>();
  private readonly dirty = new Set<ConnState>();
  private readonly inflight = new Set<Promise<void>>();
  /** Buckets created per poll time: the golden-ratio sequence index of the next one's offset. */
  private readonly staggered = new Map<number, number>();
  private timer: ReturnType<typeof setTimeout> | undefined;
  private timerAt = Infinity;
  private running = false;
  private reads = 0;
  private failures = 0;
  private readonly perConn = new Map<string, ConnectorStats>();
  /** Points pushed by their device (change of value) instead of polled: cov.ts. */
  private readonly cov: CovManager;

  constructor(opts: PollerOptions) {
    this.model = opts.model;
    this.state = opts.points;
    this.drivers = opts.drivers;
    this.clock = opts.clock;
    this.log = opts.log;
    this.useTimers = opts.timers ?? true;
    this.minBackoffMs = opts.backoff?.minMs ?? 1000;
    this.maxBackoffMs = opts.backoff?.maxMs ?? 60_000;
    this.defaultPollMs = opts.defaultPollMs ?? DEFAULT_POLL_MS;
    const writer = opts.writer;
    this.writes =
      writer === undefined
        ? undefined
        : new WriteQueue({ points: opts.points, writer, events: opts.model.events, clock: opts.clock, log: opts.log, wake: (at) => this.wake(at), ...(opts.backoff ? { backoff: opts.backoff } : {}) });
    // Point state hears the collected history (his tags) as it hears hisWrite's.
    this.collector = new HisCollector({ history: opts.history, log: opts.log, clock: opts.clock, ...(opts.trust ? { trust: opts.trust } : {}) });
    this.cov = new CovManager({
      clock: this.clock,
      log: this.log,
      value: (id, read) => {
        const ps = this.points.get(id);
        if (ps === undefined || !this.running) return;
        this.apply(ps, read, this.clock.now());
        this.collector.flush();
      },
      moved: (connId) => {
        const cs = this.conns.get(connId);
        if (cs === undefined || !this.running) return;
        this.dirty.add(cs);
        this.rebuildDirty();
      },
      covErr: (id, err) => this.state.setCovErr(id, err),
    });
  }

  /** Loads every connector and point from the model and starts polling. */
  start(): void {
    if (this.running) return;
    this.running = true;
    this.model.events.on('records.committed', this, (c) => this.changed(c));
    this.scan();
    this.log.info({ connectors: this.conns.size, points: this.points.size }, 'poller started');
  }

  /** A driver was added to the registry (loaded on demand): its connectors and points poll now. */
  driversChanged(): void {
    if (this.running) this.scan();
  }

  private scan(): void {
    for (const d of this.drivers.all()) for (const id of this.model.idsWithTag(d.connTag)) this.upsertConn(id);
    for (const d of this.drivers.all()) for (const id of this.model.idsWithTag(d.refTag)) this.upsertPoint(id);
    if (this.writes !== undefined) {
      this.writes.start();
      for (const d of this.drivers.all()) if (d.writeTag !== undefined) for (const id of this.model.idsWithTag(d.writeTag)) this.upsertWrite(id);
      this.writes.started();
    }
    this.rebuildDirty();
    this.wake(this.clock.monotonic());
  }

  /** Stops polling: waits for reads in flight and history writes, closes every connection. */
  async stop(): Promise<void> {
    if (!this.running) return;
    this.running = false;
    this.model.events.off(this);
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    this.timerAt = Infinity;
    this.cov.stop();
    await Promise.allSettled([...this.inflight]);
    await this.writes?.stop();
    await this.collector.idle();
    await Promise.allSettled([...this.conns.values()].map((c) => this.closeConn(c)));
    for (const [id, ps] of this.points) {
      ps.current = false;
      this.state.curUnbind(id);
    }
    this.conns.clear();
    this.points.clear();
    this.byConn.clear();
    this.dirty.clear();
  }

  /** Read counts and time per connector id, since start (for connectors still configured). */
  connectorStats(): ReadonlyMap<string, ConnectorStats> {
    const out = new Map<string, ConnectorStats>();
    for (const [id, st] of this.perConn) if (this.conns.has(id)) out.set(id, st);
    return out;
  }

  /** The running totals and the connectors' states, read at scrape time. */
  metrics(metrics: Metrics): void {
    metrics.counter('hayloft_poll_reads_total', 'Driver reads (poll buckets read) since start', () => this.stats().reads);
    metrics.counter('hayloft_poll_failures_total', 'Driver reads that found the device down, since start', () => this.stats().failures);
    // Per connector (labelled by its name, else its id): reads, failures, and time spent reading.
    const perConnector = (pick: (s: ConnectorStats) => number): (() => { labels: Record<string, string>; value: number }[]) => () =>
      [...this.connectorStats()].map(([id, s]) => {
        const name = this.model.stored(id)?.get('name');
        return { labels: { connector: typeof name === 'string' ? name : id }, value: pick(s) };
      });
    metrics.counter('hayloft_connector_reads_total', 'Driver reads per connector since start', () => 0, ['connector'], perConnector((s) => s.reads));
    metrics.counter('hayloft_connector_read_failures_total', 'Driver reads per connector that found the device down', () => 0, ['connector'], perConnector((s) => s.failures));
    metrics.counter('hayloft_connector_read_seconds_total', 'Seconds spent in driver reads per connector (divide by reads for the mean latency)', () => 0, ['connector'], perConnector((s) => s.seconds));
    metrics.gauge('hayloft_history_backlog_samples', 'Collected history samples not yet written', [], () => this.stats().hisBacklog);
    metrics.gauge('hayloft_history_held_samples', 'Collected history samples held in memory while the clock cannot be trusted (docs/clock.md)', [], () => this.collector.heldCount);
    metrics.counter('hayloft_history_held_dropped_total', 'Held history samples dropped (oldest first) because the clock stayed untrusted past the hold limit', () => this.collector.heldDropped);
    metrics.gauge('hayloft_connectors', 'Connectors by connStatus', ['connStatus'], () => {
      // From the connectors' live tags: a filter on connStatus (a live tag, not in the tag index)
      // would make a read view of every record in the model on each scrape.
      const by = new Map<string, number>();
      for (const id of this.conns.keys()) {
        const s = this.model.liveTags(id)?.connStatus;
        if (typeof s === 'string') by.set(s, (by.get(s) ?? 0) + 1);
      }
      return [...by].map(([connStatus, value]) => ({ labels: { connStatus }, value }));
    });
  }

  stats(): PollerStats {
    let buckets = 0;
    for (const c of this.conns.values()) buckets += c.buckets.size;
    return { connectors: this.conns.size, points: this.points.size, buckets, reads: this.reads, failures: this.failures, hisBacklog: this.collector.backlog };
  }

  /**
   * Runs what is due now (reads of due buckets, stale checks) and resolves when the reads it
   * started have ended and their history is written. The timers call it; tests with a ManualClock
   * call it by hand.
   */
  async tick(): Promise<void> {
    if (!this.running) return;
    // Every due time here is on the monotonic clock: a wall-clock step neither stops nor floods.
    const now = this.clock.monotonic();
    const started: Promise<void>[] = [];
    let next = now + MAX_TIMER_MS;
    for (const cs of this.conns.values()) {
      if (cs.conn === undefined || cs.buckets.size === 0) continue;
      let due = Infinity;
      for (const b of cs.buckets.values()) {
        if (b.due < due) due = b.due;
        if (!b.stale && b.lastOk > 0) {
          const staleAt = b.lastOk + b.staleMs;
          if (staleAt <= now) this.makeStale(b);
          else if (staleAt < next) next = staleAt;
        }
      }
      if (cs.busy) continue;
      const at = Math.max(due, cs.retryAt);
      if (at <= now) started.push(this.track(this.runConn(cs)));
      else if (at < next) next = at;
    }
    if (this.writes !== undefined) {
      const w = this.writes.run(now);
      for (const p of w.started) started.push(this.track(p));
      if (w.next < next) next = w.next;
    }
    this.wake(next);
    await Promise.all(started);
    await this.collector.idle();
  }

  // -------------------------------------------------------------------------------------------
  // Reading

  private track(p: Promise<void>): Promise<void> {
    this.inflight.add(p);
    void p.finally(() => this.inflight.delete(p));
    return p;
  }

  /** Reads the due buckets of one connector, one after the other, until none is due or it is down. */
  private async runConn(cs: ConnState): Promise<void> {
    cs.busy = true;
    try {
      while (this.running && !cs.closed) {
        const now = this.clock.monotonic();
        if (now < cs.retryAt) break;
        let b: Bucket | undefined;
        for (const x of cs.buckets.values()) if (x.due <= now && (b === undefined || x.due < b.due)) b = x;
        if (b === undefined) break;
        // Keep the bucket's phase; skip missed cycles rather than reading twice to catch up.
        b.due = now + untilPhase(b.phase, b.pollMs, this.clock.now());
        if (!(await this.poll(cs, b))) break;
      }
    } catch (err) {
      this.log.error({ err, connId: cs.id }, 'poller error');
    } finally {
      cs.busy = false;
      if (this.running && !cs.closed) {
        let due = Infinity;
        for (const x of cs.buckets.values()) if (x.due < due) due = x.due;
        this.wake(Math.max(due, cs.retryAt));
      }
    }
    this.collector.flush();
  }

  /** One driver read of a bucket; false when the device is down. */
  private async poll(cs: ConnState, b: Bucket): Promise<boolean> {
    const conn = cs.conn as DriverConn;
    const points = b.points;
    let results;
    this.reads++;
    let st = this.perConn.get(cs.id);
    if (st === undefined) this.perConn.set(cs.id, (st = { reads: 0, failures: 0, seconds: 0 }));
    st.reads++;
    const t0 = performance.now();
    try {
      results = await conn.read(b.prepared);
      st.seconds += (performance.now() - t0) / 1000;
    } catch (e) {
      st.seconds += (performance.now() - t0) / 1000;
      if (cs.closed) return false;
      this.failures++;
      st.failures++;
      this.state.setPolled(cs.id, this.clock.now(), false);
      this.connDown(cs, e);
      return false;
    }
    if (cs.closed) return false;
    // Samples are dated on the wall clock; the stale check measures on the monotonic one.
    const now = this.clock.now();
    this.state.setPolled(cs.id, now, true);
    const wasDown = cs.failures > 0;
    this.connUp(cs);
    b.lastOk = this.clock.monotonic();
    b.stale = false;
    for (let i = 0; i < points.length; i++) {
      const ps = points[i] as Polled;
      if (ps.current) this.apply(ps, results[i], now); // else changed or removed while reading
    }
    return wasDown ? this.readPushed(cs) : true;
  }

  /**
   * The connector answers again after being down: its points pushed by change of value were
   * taken down with it, and their device sends nothing until a value changes (or, restarted, has
   * forgotten the subscription). They are read once now, in this poll cycle, so they are `ok`
   * again with the polled ones (the subscriptions are renewed beside: cov.ts connectorBack).
   */
  private async readPushed(cs: ConnState): Promise<boolean> {
    const pushed = [...(this.byConn.get(cs.id) ?? [])].filter((ps) => ps.conn === cs && ps.prepared !== undefined && this.cov.pushed(ps.id));
    if (pushed.length === 0) return true;
    let results;
    try {
      results = await (cs.conn as DriverConn).read(pushed.map((ps) => ps.prepared as PreparedPoint));
    } catch (e) {
      if (cs.closed) return false;
      this.connDown(cs, e);
      return false;
    }
    if (cs.closed) return false;
    const now = this.clock.now();
    for (let i = 0; i < pushed.length; i++) {
      const ps = pushed[i] as Polled;
      if (ps.current) this.apply(ps, results[i], now);
    }
    return true;
  }

  /** One point's outcome of a read (or a change-of-value notification) into its tags and history. */
  private apply(ps: Polled, r: PointRead | undefined, now: number): void {
    if (r === undefined) this.state.curFault(ps.id, 'the driver returned no value for this point');
    else if ('val' in r) {
      const v = this.state.curOk(ps.id, r.val);
      if (v !== undefined && ps.collect !== undefined) this.collector.offer(ps.collect, v, now);
    } else this.state.curErr(ps.id, r.err);
  }

  private connDown(cs: ConnState, e: unknown): void {
    const expected = isHayloftError(e, ErrorCodes.DRIVER_DOWN);
    const err = expected ? message(e) : `driver error: ${message(e)}`;
    if (!expected) this.log.error({ err: e, connId: cs.id }, 'unexpected driver error; the connector is treated as down');
    cs.failures++;
    const delay = backoffDelay(cs.failures, { minMs: this.minBackoffMs, maxMs: this.maxBackoffMs });
    cs.retryAt = this.clock.monotonic() + delay;
    if (cs.failures === 1) this.log.warn({ connId: cs.id, err }, 'connector down');
    else this.log.debug({ connId: cs.id, err, failures: cs.failures, retryInMs: delay }, 'connector still down');
    // Point state takes its points down with it.
    this.state.connStatus(cs.id, 'down', err);
  }

  private connUp(cs: ConnState): void {
    if (cs.failures > 0) {
      this.log.info({ connId: cs.id, failures: cs.failures }, 'connector answers again');
      this.writes?.reopened(cs.id);
      // A device that was away may have restarted and forgotten its subscriptions.
      this.cov.connectorBack(cs.id);
    }
    cs.failures = 0;
    cs.retryAt = 0;
    this.state.connStatus(cs.id, 'ok', null);
  }

  private makeStale(b: Bucket): void {
    b.stale = true;
    for (const ps of b.points) if (ps.current) this.state.curStale(ps.id);
  }

  // -------------------------------------------------------------------------------------------
  // Configuration from the model

  private changed(c: ModelChange): void {
    if (!this.running) return;
    for (const rec of c.deleted) {
      const id = (rec.get('id') as HRef).id;
      if (this.conns.has(id)) this.upsertConn(id);
      if (this.points.has(id)) this.upsertPoint(id);
    }
    for (const list of [c.created, c.updated]) {
      for (const rec of list) {
        const id = (rec.get('id') as HRef).id;
        if (this.conns.has(id) || this.drivers.all().some((d) => rec.has(d.connTag))) this.upsertConn(id);
      }
    }
    for (const list of [c.created, c.updated]) {
      for (const rec of list) {
        const id = (rec.get('id') as HRef).id;
        if (this.points.has(id) || this.drivers.all().some((d) => rec.has(d.refTag))) this.upsertPoint(id);
      }
    }
    if (this.writes !== undefined) {
      for (const list of [c.deleted, c.created, c.updated]) {
        for (const rec of list) {
          const id = (rec.get('id') as HRef).id;
          if (this.writes.has(id) || this.drivers.all().some((d) => d.writeTag !== undefined && rec.has(d.writeTag))) this.upsertWrite(id);
        }
      }
    }
    this.rebuildDirty();
  }

  private upsertConn(id: string): void {
    const rec = this.model.stored(id);
    const old = this.conns.get(id);
    if (old !== undefined && old.rec === rec) return;
    if (old !== undefined) {
      this.conns.delete(id);
      void this.closeConn(old);
    }
    const driver = rec === undefined ? undefined : this.drivers.all().find((d) => rec.has(d.connTag));
    if (rec !== undefined && driver !== undefined) {
      let conn: DriverConn | undefined;
      let problem: ConnState['problem'];
      let pollMs = this.defaultPollMs;
      let staleMs: number | undefined;
      if (rec.has('disabled')) problem = { status: 'disabled', err: undefined };
      else {
        try {
          pollMs = durationTag(rec, 'pollTime', this.defaultPollMs);
          staleMs = rec.has('staleTime') ? durationTag(rec, 'staleTime', 0) : undefined;
          conn = driver.open({ id, tags: rec });
        } catch (e) {
          problem = { status: 'fault', err: message(e) };
          if (!isHayloftError(e)) this.log.error({ err: e, connId: id }, 'unexpected error opening a connector');
        }
      }
      const cs: ConnState = {
        id,
        label: this.model.nameOf(id),
        rec,
        driver,
        conn,
        problem,
        pollMs,
        staleMs,
        buckets: new Map(),
        busy: false,
        closed: false,
        failures: 0,
        retryAt: 0,
      };
      this.conns.set(id, cs);
      // Without a problem it keeps showing its last status until its next read.
      if (problem !== undefined) this.state.connStatus(id, problem.status, problem.err ?? null);
      this.log.debug({ connId: id, driver: driver.name, problem }, old === undefined ? 'connector added' : 'connector changed');
    } else if (rec !== undefined && old !== undefined) {
      // No longer a connector (cannot happen through the model: the primary marker is fixed).
      this.state.connStatus(id, null, null);
    }
    // Its points follow: they poll through the new connection, or fault without one.
    for (const ps of [...(this.byConn.get(id) ?? [])]) this.upsertPoint(ps.id);
    for (const pid of this.writes?.idsOf(id) ?? []) this.upsertWrite(pid);
  }

  /** A point's write through its driver (write-queue.ts), from its record and connector. */
  private upsertWrite(id: string): void {
    const writes = this.writes as WriteQueue;
    const rec = this.model.stored(id);
    const driver = rec === undefined ? undefined : writerOf(this.drivers.all(), rec);
    const ref = driver === undefined ? undefined : rec?.get(driver.refTag);
    const cs = ref instanceof HRef ? this.conns.get(ref.id) : undefined;
    if (rec !== undefined && driver !== undefined && (cs === undefined || cs.driver !== driver)) {
      // Named connector missing or of another driver: a fault the operator can see.
      const label = ref instanceof HRef ? this.model.nameOf(ref.id) : '';
      const why = ref instanceof HRef ? `${driver.refTag} ${label} is not a ${driver.connTag} record` : `${driver.refTag} must be a Ref to a ${driver.connTag} record`;
      writes.upsert(id, rec, { id: ref instanceof HRef ? ref.id : '', label, conn: undefined, problem: { status: 'fault', err: why } }, driver.writeTag);
      return;
    }
    writes.upsert(id, rec, cs, driver?.writeTag);
  }

  private async closeConn(cs: ConnState): Promise<void> {
    cs.closed = true;
    cs.buckets.clear();
    this.dirty.delete(cs);
    try {
      await cs.conn?.close();
    } catch (err) {
      this.log.warn({ err, connId: cs.id }, 'error closing a connector');
    }
  }

  private upsertPoint(id: string): void {
    const rec = this.model.stored(id);
    const old = this.points.get(id);
    // Fed by a driver (point state's rule), and read when it has that driver's read address.
    const fed = rec === undefined ? undefined : driverOf(this.drivers.all(), rec);
    const driver = fed !== undefined && rec?.has(fed.curTag) === true ? fed : undefined;
    if (rec === undefined || driver === undefined) {
      if (old === undefined) return;
      this.detach(old);
      old.current = false;
      this.points.delete(id);
      this.collector.forget(id);
      this.cov.remove(id);
      // No longer polled (its driver tags were removed): its driver-set tags go too.
      if (rec !== undefined) this.state.curRemove(id);
      else this.state.curUnbind(id);
      return;
    }
    const ref = rec.get(driver.refTag);
    const connId = ref instanceof HRef ? ref.id : undefined;
    const cs = connId === undefined ? undefined : this.conns.get(connId);
    if (old !== undefined && old.rec === rec && old.conn === cs) return;
    if (old !== undefined) this.detach(old);

    let problem: { status: 'fault' | 'disabled'; err: string | undefined } | undefined;
    let prepared: PreparedPoint | undefined;
    let kind: HisKind = 'Number';
    let unit: string | null = null;
    let pollMs = cs?.pollMs ?? this.defaultPollMs;
    let collect: Collecting | undefined;
    if (connId === undefined) problem = { status: 'fault', err: `${driver.refTag} must be a Ref to a ${driver.connTag} record` };
    else if (cs === undefined || cs.driver !== driver) problem = { status: 'fault', err: `${driver.refTag} ${this.model.nameOf(connId)} is not a ${driver.connTag} record` };
    else if (rec.has('disabled') || cs.problem?.status === 'disabled') problem = { status: 'disabled', err: undefined };
    else if (cs.problem !== undefined) problem = { status: 'fault', err: `connector ${cs.label}: ${cs.problem.err ?? ''}` };
    else {
      try {
        const k = pointKind(rec);
        if (k === undefined) {
          const given = rec.get('kind');
          throw configError(`kind must be ${POINT_KINDS_TEXT}${typeof given === 'string' ? ` (not "${given}")` : ''}`);
        }
        kind = k;
        const u = pointUnit(rec);
        if (kind === 'Number' && u !== null) {
          new HNumber(0, u); // throws for a unit that is not valid unit text
          unit = u;
        }
        pollMs = durationTag(rec, 'pollTime', cs.pollMs);
        const plan = collectPlan(rec);
        const prev = old?.collect;
        if (plan !== undefined) collect = { id, kind, plan, lastSlot: prev?.lastSlot ?? -Infinity, lastVal: prev?.kind === kind ? prev.lastVal : undefined };
        prepared = (cs.conn as DriverConn).prepare({ id, tags: rec });
      } catch (e) {
        problem = { status: 'fault', err: message(e) };
        if (!isHayloftError(e)) this.log.debug({ err: e, pointId: id }, 'point configuration refused');
      }
    }
    if (collect === undefined) this.collector.forget(id);
    const ps: Polled = {
      id,
      rec,
      driver,
      connId,
      conn: cs,
      prepared: problem === undefined ? prepared : undefined,
      pollMs,
      collect,
      current: true,
    };
    if (old !== undefined) old.current = false;
    this.points.set(id, ps);
    if (connId !== undefined) {
      let s = this.byConn.get(connId);
      if (s === undefined) this.byConn.set(connId, (s = new Set()));
      s.add(ps);
    }
    if (cs !== undefined) this.dirty.add(cs);
    this.covOf(ps, cs);
    if (problem !== undefined) this.state.curNotPolled(id, problem.status, problem.err);
    else this.state.curPolled(id, connId as string, kind, unit);
  }

  /** Change of value for a point whose record or connector asks for it (and whose driver has it). */
  private covOf(ps: Polled, cs: ConnState | undefined): void {
    const tags = ps.driver.covTags;
    const cov = cs?.conn?.cov;
    if (cs === undefined || ps.prepared === undefined || tags === undefined || cov === undefined || !(ps.rec.has(tags.marker) || cs.rec.has(tags.marker))) {
      this.cov.remove(ps.id);
      return;
    }
    let lifetimeMs: number;
    try {
      lifetimeMs = durationTag(ps.rec.has(tags.lifetime) ? ps.rec : cs.rec, tags.lifetime, DEFAULT_COV_LIFETIME_MS);
    } catch (e) {
      this.cov.remove(ps.id);
      this.state.setCovErr(ps.id, `${message(e)}; polling instead`);
      return;
    }
    this.cov.add(ps.id, cs.id, ps.prepared, cov, lifetimeMs);
  }

  private detach(ps: Polled): void {
    if (ps.connId !== undefined) {
      const s = this.byConn.get(ps.connId);
      s?.delete(ps);
      if (s?.size === 0) this.byConn.delete(ps.connId);
    }
    if (ps.conn !== undefined) this.dirty.add(ps.conn);
  }

  private rebuildDirty(): void {
    const now = this.clock.monotonic();
    let next = Infinity;
    for (const cs of this.dirty) {
      if (cs.closed || this.conns.get(cs.id) !== cs) continue;
      const groups = new Map<number, Polled[]>();
      for (const ps of this.byConn.get(cs.id) ?? []) {
        if (ps.conn !== cs || ps.prepared === undefined || this.cov.pushed(ps.id)) continue;
        let g = groups.get(ps.pollMs);
        if (g === undefined) groups.set(ps.pollMs, (g = []));
        g.push(ps);
      }
      for (const ms of [...cs.buckets.keys()]) if (!groups.has(ms)) cs.buckets.delete(ms);
      for (const [ms, pts] of groups) {
        pts.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
        let b = cs.buckets.get(ms);
        if (b === undefined) {
          const k = this.staggered.get(ms) ?? 0;
          this.staggered.set(ms, k + 1);
          // The first read at once for the first bucket of a poll time (a new connector shows its
          // values at once), staggered for the others; then at the bucket's phase.
          const offset = Math.floor(((k * GOLDEN) % 1) * ms);
          b = { conn: cs, pollMs: ms, staleMs: 0, points: [], prepared: [], due: now + offset, phase: phaseOf(k, ms), lastOk: 0, stale: false };
          cs.buckets.set(ms, b);
        }
        b.staleMs = cs.staleMs ?? Math.max(3 * ms, MIN_STALE_MS);
        b.points = pts;
        // A new array: drivers cache their request plans by the array's identity.
        b.prepared = pts.map((p) => p.prepared as PreparedPoint);
        if (b.due < next) next = b.due;
      }
    }
    this.dirty.clear();
    if (next < Infinity) this.wake(next);
  }

  // -------------------------------------------------------------------------------------------
  // Timer

  /** Runs tick() at `at`, a monotonic reading. */
  private wake(at: number): void {
    if (!this.useTimers || !this.running) return;
    if (this.timer !== undefined && this.timerAt <= at) return;
    if (this.timer !== undefined) clearTimeout(this.timer);
    const delay = Math.min(MAX_TIMER_MS, Math.max(0, at - this.clock.monotonic()));
    this.timerAt = at;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.timerAt = Infinity;
      this.tick().catch((err: unknown) => this.log.error({ err }, 'poller tick failed'));
    }, delay);
    // Polling alone does not keep the process alive: the HTTP server does, and stop() ends it.
    this.timer.unref();
  }
}
