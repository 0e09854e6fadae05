/**
 * History retention (docs/history.md): raw samples are bounded by age and by count per point
 * (store/retention-policy.ts: the point's tags, else the configuration), and the whole store by
 * size (`historyMaxBytes`) and by the disk's free-space floor (store/space.ts). Oldest first;
 * before raw samples go they are rolled up into 15-minute buckets (store/rollups.ts), which are
 * kept much longer under their own age bound. Space is given back: LevelDB's compactRange runs
 * over each range removed, so its tombstones and the files they shadow go, and the free space
 * is read again afterwards.
 *
 * A part on monotonic timers (Node's timers do not follow wall-clock steps): a run every `everyMs`
 * walks the points with work, a few per step (`pointsPerStep`), with `stepGapMs` between steps,
 * and at most a day of one point's raw samples per step, so a year of backlog is worked off in
 * small pieces, never in one storm. Between runs the room is checked every `checkMs`: past the
 * size bound, or near the floor (below 1.25 times it), retention makes room first, oldest raw
 * samples of all points first (never the last 24 hours of a point: below that the floor refuses
 * writes, docs/configuration.md "Disk space"), then the oldest rollups, until the store is back
 * under 95 % of its bound and the disk above 1.5 times the floor. So history writes are refused
 * only when retention cannot keep up.
 *
 * Age needs a trusted "now": nothing runs while the clock cannot be trusted (lib/clock-trust.ts).
 *
 * Each step of a point, in order (crash-safe, nothing counted twice): read its raw samples before
 * the cut; roll them up, move its horizon to the cut and mark the roll pending, in one synced
 * batch; remove the raw samples before the cut (HistoryStore.deleteSpans); clear the mark. A crash
 * between leaves the mark: at the next start, the raw samples before its cut (already counted) are
 * removed. Only HistoryStore's public API is used (read, stats, points, deleteSpans, keyRanges).
 */
import type { Clock } from '../lib/clock.js';
import type { DatingTrust } from '../lib/clock-trust.js';
import type { Logger } from '../lib/log.js';
import type { Metrics } from '../lib/metrics.js';
import type { Part, PartHealth } from '../lib/part.js';
import { storeSizeBytes } from './backup.js';
import type { Store } from './db.js';
import type { HisColumns, HistoryStore } from './history.js';
import type { RetentionPolicy } from './retention-policy.js';
import { DAY_MS, ROLLUP_MS, type RollupStore, bucketOf } from './rollups.js';
import type { DiskSpace } from './space.js';

/** Room-making never removes a point's raw samples of the last day. */
export const MIN_KEEP_MS = DAY_MS;

export interface RetentionOptions {
  history: Pick<HistoryStore, 'read' | 'stats' | 'points' | 'deleteSpans' | 'keyRanges'>;
  rollups: RollupStore;
  store: Store;
  /** The free-space floor: retention makes room before it is reached. */
  space?: Pick<DiskSpace, 'freeBytes' | 'floorBytes' | 'refresh'>;
  clock: Clock;
  /** Whether "now" can be trusted; absent: always. */
  trust?: DatingTrust;
  log: Logger;
  /** The policy of a point (its tags, else the configuration's defaults). */
  policy: (id: string) => RetentionPolicy;
  /** config historyMaxBytes: bytes the store may take (0: no bound, and no room made near the floor either). */
  maxStoreBytes: number;
  /** Between runs, ms (default 1 h). */
  everyMs?: number;
  /** Between checks of the room, ms (default 10 s). */
  checkMs?: number;
  /** Between steps of a run, ms (default 200 ms). */
  stepGapMs?: number;
  /** Points per step (default 4). */
  pointsPerStep?: number;
  /** Run on timers (default); false: tests call runOnce() and makeRoom(). */
  timers?: boolean;
  /** The store's bytes on disk (default: its LevelDB files). */
  storeBytes?: () => number;
}

export interface RunSummary {
  points: number;
  samplesDropped: number;
  bucketsRolled: number;
  bucketsDropped: number;
}

type Reason = 'age' | 'size' | 'room';

interface Outcome {
  dropped: number;
  rolled: number;
  bucketsDropped: number;
  /** More of this point is due (another slice). */
  more: boolean;
}

const NOTHING: Outcome = { dropped: 0, rolled: 0, bucketsDropped: 0, more: false };

/** The first samples of columns (time order) up to index n. */
function head(cols: HisColumns, n: number): HisColumns {
  if (n >= cols.ts.length) return cols;
  switch (cols.kind) {
    case 'Number':
      return { kind: 'Number', ts: cols.ts.subarray(0, n), val: cols.val.subarray(0, n) };
    case 'Bool':
      return { kind: 'Bool', ts: cols.ts.subarray(0, n), val: cols.val.slice(0, n) };
    case 'Str':
      return { kind: 'Str', ts: cols.ts.subarray(0, n), val: cols.val.slice(0, n) };
    default:
      return cols;
  }
}

function countBefore(ts: Float64Array, cut: number): number {
  let lo = 0;
  let hi = ts.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((ts[mid] as number) < cut) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function bucketCeil(t: number): number {
  return Math.ceil(t / ROLLUP_MS) * ROLLUP_MS;
}

export class Retention implements Part {
  readonly name = 'retention';
  private readonly o: RetentionOptions;
  private readonly everyMs: number;
  private readonly checkMs: number;
  private readonly stepGapMs: number;
  private readonly perStep: number;
  private readonly storeBytes: () => number;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  /** The work in progress: timer ticks, runOnce and makeRoom take turns, never two at once. */
  private turn: Promise<unknown> = Promise.resolve();
  private stopped = false;
  /** Points left in the current run; undefined between runs. */
  private queue: string[] | undefined;
  private run: RunSummary & { startedMono: number } = { points: 0, samplesDropped: 0, bucketsRolled: 0, bucketsDropped: 0, startedMono: 0 };
  /** Key ranges removed in this run, compacted once at its end (a compaction per step would rewrite the same files again and again). */
  private removed: [Uint8Array, Uint8Array][] = [];
  /** Points this run removed something of. */
  private touched = new Set<string>();
  private nextRunMono = -Infinity;
  /** Making room (past the size bound or near the floor), until back under with a margin. */
  private rooming: string | null = null;
  /** Room is needed and nothing more can go. */
  private stuck = false;
  private waitingClock = false;
  /** Figures since start (metrics). */
  readonly dropped: Record<Reason, number> = { age: 0, size: 0, room: 0 };
  bucketsRolled = 0;
  bucketsDropped = 0;
  /** Samples written below a cut while it was applied, removed without being rolled up. */
  unrolled = 0;
  runs = 0;
  /** Wall time (epoch ms) the last run ended, and how long it took; null before the first. */
  lastRun: { at: number; ms: number; summary: RunSummary } | null = null;

  constructor(o: RetentionOptions) {
    this.o = o;
    this.everyMs = o.everyMs ?? 3_600_000;
    this.checkMs = o.checkMs ?? 10_000;
    this.stepGapMs = o.stepGapMs ?? 200;
    this.perStep = o.pointsPerStep ?? 4;
    this.storeBytes = o.storeBytes ?? (() => storeSizeBytes(o.store));
  }

  metrics(m: Metrics): void {
    m.counter(
      'hayloft_retention_samples_dropped_total',
      'Raw history samples retention removed since start (rolled up first): reason="age" past their retention, "size" past hisMaxSamples, "room" to keep the store under historyMaxBytes or the disk above its floor',
      () => this.dropped.age + this.dropped.size + this.dropped.room,
      ['reason'],
      () => (['age', 'size', 'room'] as const).map((reason) => ({ labels: { reason }, value: this.dropped[reason] })),
    );
    m.counter('hayloft_retention_rollup_buckets_written_total', '15-minute rollup buckets written (or merged into) by retention since start', () => this.bucketsRolled);
    m.counter('hayloft_retention_rollup_buckets_dropped_total', '15-minute rollup buckets removed past their own retention (or to make room) since start', () => this.bucketsDropped);
    m.counter('hayloft_retention_unrolled_samples_total', 'Samples written below a retention cut while it was applied, removed without being rolled up', () => this.unrolled);
    m.counter('hayloft_retention_runs_total', 'Retention runs completed since start', () => this.runs);
    m.gauge('hayloft_retention_last_run_timestamp_seconds', 'When the last retention run ended (epoch seconds; 0: none yet)', [], () => (this.lastRun === null ? 0 : this.lastRun.at / 1000));
    m.gauge('hayloft_retention_last_run_duration_seconds', 'How long the last retention run took, its gaps between steps included', [], () => (this.lastRun === null ? 0 : this.lastRun.ms / 1000));
  }

  health(): PartHealth {
    return {
      ok: true,
      ...(this.stuck && this.rooming !== null ? { degraded: `retention cannot make room (${this.rooming}): only the last day of raw history and no rollups are left to remove` } : {}),
      ...(this.waitingClock ? { waiting: 'the clock is not trusted: retention waits (docs/clock.md)' } : {}),
      ...(this.rooming === null ? {} : { makingRoom: this.rooming }),
      ...(this.lastRun === null ? {} : { lastRun: new Date(this.lastRun.at).toISOString() }),
    };
  }

  /** Finishes rolls a crash interrupted, then starts the timers. */
  async start(): Promise<void> {
    this.stopped = false;
    await this.recover();
    if (this.o.timers === false) return;
    // The first run a minute after start: the daemon's own start (polling, the uplink) goes first.
    this.nextRunMono = this.o.clock.monotonic() + Math.min(60_000, this.everyMs);
    this.schedule(this.checkMs);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    await this.running;
    await this.turn;
  }

  /** Raw samples before a pending roll's cut were counted: removed now (store/rollups.ts). */
  private async recover(): Promise<void> {
    const pending = await this.o.rollups.pending();
    if (pending.length === 0) return;
    let removed = 0;
    for (const { id, cut } of pending) {
      if (this.o.history.stats(id).size > 0) removed += ((await this.o.history.deleteSpans([{ pointId: id, start: -Infinity, end: cut }])) as [number])[0];
      await this.o.rollups.done([id]);
    }
    this.o.log.warn({ points: pending.length, samplesRemoved: removed }, 'history retention: finished the rolls a stop interrupted');
  }

  private schedule(ms: number): void {
    if (this.stopped || this.o.timers === false) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.running = this.tick().finally(() => {
        this.running = undefined;
      });
    }, ms);
    this.timer.unref();
  }

  /** Runs `f` once the work before it ended. */
  private one<T>(f: () => Promise<T>): Promise<T> {
    const mine = this.turn.then(f, f);
    this.turn = mine.catch(() => undefined);
    return mine;
  }

  private async tick(): Promise<void> {
    let busy = false;
    try {
      busy = await this.one(() => this.work());
    } catch (err) {
      this.o.log.error({ err }, 'history retention failed; it tries again at its next check');
      this.queue = undefined;
    }
    this.schedule(busy ? this.stepGapMs : this.checkMs);
  }

  private trusted(): boolean {
    const ok = this.o.trust?.trusted() ?? true;
    if (ok === !this.waitingClock) return ok;
    this.waitingClock = !ok;
    if (!ok) this.o.log.warn('history retention waits: the clock is not trusted, and the age of history needs a trusted now (docs/clock.md)');
    return ok;
  }

  /** One step of whatever is due; true when more follows at once (after the step gap). */
  private async work(): Promise<boolean> {
    if (!this.trusted()) return false;
    if (this.roomNeeded()) return this.roomStep();
    if (this.queue === undefined && this.o.clock.monotonic() >= this.nextRunMono) this.beginRun();
    if (this.queue === undefined) return false;
    await this.runStep();
    return this.queue !== undefined;
  }

  /** A whole run at once, no gaps (tests and the CLI); returns its summary. */
  async runOnce(): Promise<RunSummary | undefined> {
    return this.one(async () => {
      if (!this.trusted()) return undefined;
      this.beginRun();
      while (this.queue !== undefined) await this.runStep();
      return this.lastRun?.summary;
    });
  }

  /** Makes room until none is needed or nothing more can go (tests); returns samples removed. */
  async makeRoom(): Promise<number> {
    return this.one(async () => {
      if (!this.trusted()) return 0;
      const before = this.dropped.room;
      while (this.roomNeeded() && (await this.roomStep()));
      return this.dropped.room - before;
    });
  }

  private beginRun(): void {
    const ids = new Set([...this.o.history.points(), ...this.o.rollups.ids()]);
    this.queue = [...ids];
    this.run = { points: 0, samplesDropped: 0, bucketsRolled: 0, bucketsDropped: 0, startedMono: this.o.clock.monotonic() };
    this.removed = [];
    this.touched = new Set();
    this.nextRunMono = this.o.clock.monotonic() + this.everyMs;
  }

  private async runStep(): Promise<void> {
    const queue = this.queue as string[];
    const now = this.o.clock.now();
    const batch = queue.splice(0, this.perStep);
    for (const id of batch) {
      const out = await this.trimPoint(id, now, null, this.removed);
      if (out.dropped > 0 || out.bucketsDropped > 0) this.touched.add(id);
      this.run.samplesDropped += out.dropped;
      this.run.bucketsRolled += out.rolled;
      this.run.bucketsDropped += out.bucketsDropped;
      // A point with more than a day due comes back at the end of the run, a day at a time.
      if (out.more) queue.push(id);
    }
    if (queue.length > 0) return;
    await this.compact(this.removed);
    this.removed = [];
    this.run.points = this.touched.size;
    this.touched = new Set();
    this.queue = undefined;
    this.runs++;
    const { startedMono, ...summary } = this.run;
    this.lastRun = { at: this.o.clock.now(), ms: this.o.clock.monotonic() - startedMono, summary };
    this.o.log.info({ ...summary, ms: Math.round(this.lastRun.ms) }, 'history retention run');
  }

  /**
   * One step of one point: a slice of its raw samples (at most a day) past its age or count bound
   * (or before `roomCut`) rolled up and removed, and its rollups past their own age removed.
   */
  private async trimPoint(id: string, now: number, roomCut: number | null, ranges: [Uint8Array, Uint8Array][]): Promise<Outcome> {
    const { history, rollups } = this.o;
    const policy = this.o.policy(id);
    const out = { ...NOTHING };
    const st = history.stats(id);
    if (st.start !== undefined && st.size > 0) {
      const horizon = rollups.horizon(id);
      // Age: whole buckets past the point's retention. Late samples (before the horizon) go
      // whatever their age: the rollups already stand for that time.
      let want = policy.rawMs === null ? -Infinity : bucketOf(now - policy.rawMs);
      if (st.start < horizon) want = Math.max(want, horizon);
      const excess = policy.maxSamples === null ? 0 : st.size - policy.maxSamples;
      const dayEnd = bucketCeil(st.start + DAY_MS);
      let limit = Math.min(want, dayEnd);
      if (excess > 0 || roomCut !== null) limit = Math.max(limit, Math.min(dayEnd, roomCut ?? dayEnd));
      if (limit > st.start) {
        const cols = await history.read(id, -Infinity, limit);
        let cut = Math.min(want, limit);
        let reason: Reason = 'age';
        if (excess > 0) {
          const sizeCut = Math.min(limit, cols.ts.length <= excess ? limit : bucketOf(cols.ts[excess - 1] as number) + ROLLUP_MS);
          if (sizeCut > cut) [cut, reason] = [sizeCut, 'size'];
        }
        if (roomCut !== null && Math.min(roomCut, limit) > cut) [cut, reason] = [Math.min(roomCut, limit), 'room'];
        const n = countBefore(cols.ts, cut);
        if (n > 0) {
          out.rolled = await rollups.roll(id, head(cols, n), cut);
          const [removed] = (await history.deleteSpans([{ pointId: id, start: -Infinity, end: cut }])) as [number];
          await rollups.done([id]);
          if (removed > n) {
            this.unrolled += removed - n;
            this.o.log.warn({ pointId: id, samples: removed - n, cut: new Date(cut).toISOString() }, 'history retention removed samples written below its cut while it applied it, without rolling them up');
          }
          out.dropped = removed;
          this.dropped[reason] += removed;
          this.bucketsRolled += out.rolled;
          ranges.push(...history.keyRanges(id, -Infinity, cut));
          const after = history.stats(id);
          out.more = after.start !== undefined && (after.start < Math.min(want, now) || (policy.maxSamples !== null && after.size > policy.maxSamples));
        }
      }
    }
    const rs = rollups.state(id);
    if (rs !== undefined && policy.rollupMs !== null && rs.oldestDay + DAY_MS <= now - policy.rollupMs) {
      const before = now - policy.rollupMs;
      out.bucketsDropped = await rollups.dropBefore(id, before);
      this.bucketsDropped += out.bucketsDropped;
      ranges.push(rollups.dayRange(id, before));
    }
    return out;
  }

  /**
   * Gives the space back: LevelDB compacts the ranges removed (their tombstones, the files they
   * shadow). Ranges that start at the same key (the slices of one point) are compacted once, to
   * the furthest end.
   */
  private async compact(ranges: readonly [Uint8Array, Uint8Array][]): Promise<void> {
    const widest = new Map<string, [Uint8Array, Uint8Array]>();
    for (const [from, to] of ranges) {
      const k = Buffer.from(from).toString('latin1');
      const had = widest.get(k);
      if (had === undefined || Buffer.compare(had[1], to) < 0) widest.set(k, [from, to]);
    }
    for (const [from, to] of widest.values()) await this.o.store.db.compactRange(from, to, { keyEncoding: 'view' });
  }

  /** Whether room must be made now (with hysteresis: once started, until back under with a margin). */
  private roomNeeded(): boolean {
    const { space, maxStoreBytes } = this.o;
    const floor = space?.floorBytes ?? 0;
    const free = space?.freeBytes();
    const size = maxStoreBytes > 0 ? this.storeBytes() : 0;
    const overSize = maxStoreBytes > 0 && size > (this.rooming === null ? maxStoreBytes : 0.95 * maxStoreBytes);
    // historyMaxBytes 0 turns size-based retention off, making room near the floor included:
    // history is then only refused at the floor, never removed for room (docs/history.md).
    const nearFloor = maxStoreBytes > 0 && floor > 0 && free !== undefined && free < (this.rooming === null ? 1.25 : 1.5) * floor;
    const why = overSize ? `the store takes ${size} bytes, its bound is ${maxStoreBytes} (historyMaxBytes)` : nearFloor ? `${free} bytes free, the floor is ${floor} (historyMinFreeBytes)` : null;
    if ((why === null) !== (this.rooming === null)) {
      if (why !== null) this.o.log.warn({ reason: why }, 'history retention makes room: the oldest history goes first');
      else this.o.log.info('history retention made room');
      this.stuck = false;
    }
    this.rooming = why;
    return why !== null;
  }

  /**
   * Makes room: the points whose raw samples are oldest lose their oldest day (never their last
   * day); when none is left, the oldest rollups go. Returns false when nothing could go.
   */
  private async roomStep(): Promise<boolean> {
    const { history, rollups, space } = this.o;
    const now = this.o.clock.now();
    const keepFrom = bucketOf(now - MIN_KEEP_MS);
    const oldest = history
      .points()
      .map((id) => ({ id, start: history.stats(id).start ?? Infinity }))
      .filter((p) => p.start < keepFrom)
      .sort((a, b) => a.start - b.start)
      .slice(0, this.perStep);
    const ranges: [Uint8Array, Uint8Array][] = [];
    let progress = false;
    if (oldest.length > 0) {
      // One cut for all: the oldest day of the oldest points, so every point loses its oldest first.
      const cut = Math.min(keepFrom, bucketCeil((oldest[0] as { start: number }).start + DAY_MS));
      for (const { id } of oldest) {
        const out = await this.trimPoint(id, now, cut, ranges);
        if (out.dropped > 0) progress = true;
      }
    } else {
      const days = rollups
        .ids()
        .map((id) => ({ id, day: rollups.state(id)?.oldestDay ?? Infinity }))
        .filter((d) => d.day < Infinity)
        .sort((a, b) => a.day - b.day)
        .slice(0, this.perStep);
      for (const { id, day } of days) {
        const n = await rollups.dropBefore(id, day + DAY_MS);
        this.bucketsDropped += n;
        ranges.push(rollups.dayRange(id, day + DAY_MS));
        if (n > 0) progress = true;
      }
    }
    await this.compact(ranges);
    await space?.refresh();
    if (!progress && !this.stuck) this.o.log.error({ reason: this.rooming }, 'history retention cannot make room: only the last day of raw history is left');
    this.stuck = !progress;
    return progress;
  }
}
