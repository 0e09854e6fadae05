/**
 * History collection of polled `his` points, and its writes.
 *
 * - `hisCollectInterval` (Number with a time unit): a sample at the first fresh read in each
 *   interval, intervals aligned to the epoch (every 15 min means :00, :15, :30, :45 UTC).
 * - `hisCollectCov`: Marker, a sample whenever the value changes; Number, whenever a Number
 *   point moves by at least that much from the last sample (Bool and Str points: any change).
 *   The first fresh read after a start is always sampled: nothing says what was last stored.
 * Both may be given: a read that meets either is sampled once. Only fresh (ok) values are
 * sampled; an outage leaves a gap rather than repeated old values.
 *
 * Writes: samples gather in memory and go to the history store in one synced batch per poll
 * cycle. At most one write is in flight: samples arriving meanwhile wait for it and go together
 * in the next batch, so a slow flash card makes batches bigger, not more numerous.
 *
 * While the wall clock cannot be trusted (lib/clock-trust.ts: a Pi booted without RTC, before
 * NTP), samples are not dated with it: they are held in memory with their monotonic reading (at
 * most `maxHeld`, 100,000 by default; past it the oldest go, counted), and once the clock is
 * trusted they are written re-dated: now minus the monotonic time elapsed since each was read
 * (docs/clock.md). Held samples are lost if the daemon stops before the clock is set.
 */
import { durationMs } from '../haystack/duration.js';
import { HNumber, type HDict, MARKER } from '../haystack/values.js';
import { configError } from '../drivers/driver.js';
import type { Clock } from '../lib/clock.js';
import type { DatingTrust } from '../lib/clock-trust.js';
import { isHayloftError } from '../lib/errors.js';
import type { Logger } from '../lib/log.js';
import type { HisValue } from '../store/his-codec.js';
import type { HisKind, HistoryStore, PolledWrite } from '../store/history.js';

export interface CollectPlan {
  /** Sample interval, ms; undefined when only COV. */
  readonly intervalMs: number | undefined;
  /** COV tolerance (0: any change); undefined when only by interval. */
  readonly cov: number | undefined;
}

/** Collection state of one point. */
export interface Collecting {
  readonly id: string;
  readonly kind: HisKind;
  readonly plan: CollectPlan;
  /** Interval number of the last sample (-Infinity: none yet). */
  lastSlot: number;
  /** Value of the last sample (undefined: none yet). */
  lastVal: number | boolean | string | undefined;
  /** Its samples waiting for the next write, when they are in the collector's current batch (HisCollector.offer). */
  pend?: Pending;
}

/**
 * The collection plan of a point's tags: undefined when it collects nothing (no `his` marker or
 * no collect tag). Throws HL_DRIVER_CONFIG for malformed collect tags.
 */
export function collectPlan(tags: HDict): CollectPlan | undefined {
  if (!tags.has('his')) return undefined;
  const iv = tags.get('hisCollectInterval');
  const cv = tags.get('hisCollectCov');
  if (iv === undefined && cv === undefined) return undefined;
  let intervalMs: number | undefined;
  if (iv !== undefined) {
    const ms = durationMs(iv);
    if (typeof ms === 'string') throw configError(`hisCollectInterval ${ms}`);
    intervalMs = ms;
  }
  let cov: number | undefined;
  if (cv === MARKER) cov = 0;
  else if (cv instanceof HNumber && Number.isFinite(cv.val) && cv.val >= 0) cov = cv.val;
  else if (cv !== undefined) throw configError('hisCollectCov must be a Marker (every change) or a Number tolerance of 0 or more');
  return { intervalMs, cov };
}

export type { DatingTrust };

export const DEFAULT_MAX_HELD = 100_000;

export interface HisCollectorOptions {
  history: HistoryStore;
  log: Logger;
  /** With `trust`: the monotonic reading of held samples, and the time they are re-dated at. */
  clock?: Clock;
  /** Absent: the clock is always trusted. */
  trust?: DatingTrust;
  maxHeld?: number;
}

/** A sample read while the clock could not be trusted: dated later, by its monotonic reading. */
interface Held {
  readonly id: string;
  readonly kind: HisKind;
  readonly val: number | boolean | string;
  readonly mono: number;
}

/** The samples of one point waiting for the next write: two columns, as the store takes them. */
export interface Pending {
  readonly pointId: string;
  readonly kind: HisKind;
  readonly ts: number[];
  readonly val: HisValue[];
  /** The batch it belongs to (HisCollector's generation): a point's entry of an earlier batch is not added to. */
  readonly gen: number;
}

export class HisCollector {
  private readonly history: HistoryStore;
  private readonly log: Logger;
  /**
   * The batch being gathered: one entry per point (reached from its Collecting, no lookup per
   * sample). A point whose collection changed while gathering (its record updated) may have two,
   * in time order; the store takes them in turn.
   */
  private pending: Pending[] = [];
  private gen = 0;
  private writing: Promise<void> | undefined;
  /**
   * The code of the error the last write failed with (HL_STORAGE_FULL below the free-space floor,
   * HL_STORE_UNAVAILABLE while the store recovers), null while writes succeed: one log line per
   * change, not one per poll cycle. The samples lost are counted by the history store
   * (hayloft_history_refused_samples_total).
   */
  private failing: string | null = null;
  /** Points whose kind differs from their stored history: warned once, not sampled. */
  private readonly kindWarned = new Set<string>();
  private readonly clock: Clock | undefined;
  private readonly trust: DatingTrust | undefined;
  private readonly maxHeld: number;
  private held: Held[] = [];
  /** Held samples dropped (the oldest, past maxHeld) since start. */
  heldDropped = 0;
  /** The trust asked once per poll cycle (reset by flush), and the monotonic reading then. */
  private cycle: { trusted: boolean; mono: number } | undefined;

  constructor(opts: HisCollectorOptions) {
    this.history = opts.history;
    this.log = opts.log;
    this.clock = opts.clock;
    this.trust = opts.clock === undefined ? undefined : opts.trust;
    this.maxHeld = Math.max(1, opts.maxHeld ?? DEFAULT_MAX_HELD);
  }

  /** Samples held while the clock cannot be trusted. */
  get heldCount(): number {
    return this.held.length;
  }

  /** A fresh value of a collecting point, read at `ts`: sampled when its plan says so. */
  offer(c: Collecting, val: number | boolean | string, ts: number): void {
    const p = c.plan;
    let take = false;
    if (p.intervalMs !== undefined) {
      const slot = Math.floor(ts / p.intervalMs);
      // Another interval than the last sample's, not only a later one: after the wall clock
      // stepped back, waiting for the old slot to come round again would stop collection for
      // as long as the step.
      if (slot !== c.lastSlot) {
        c.lastSlot = slot;
        take = true;
      }
    }
    if (p.cov !== undefined && !take) {
      const last = c.lastVal;
      if (last === undefined) take = true;
      else if (typeof val === 'number' && typeof last === 'number') take = p.cov === 0 ? !Object.is(val, last) : Math.abs(val - last) >= p.cov || Number.isNaN(val) !== Number.isNaN(last);
      else take = val !== last;
    }
    if (!take) return;
    if (p.intervalMs !== undefined) c.lastSlot = Math.floor(ts / p.intervalMs);
    c.lastVal = val;
    if (this.trust !== undefined) {
      this.cycle ??= { trusted: this.trust.trusted(), mono: (this.clock as Clock).monotonic() };
      if (!this.cycle.trusted) {
        this.hold({ id: c.id, kind: c.kind, val, mono: this.cycle.mono });
        return;
      }
    }
    const e = c.pend;
    if (e === undefined || e.gen !== this.gen) {
      // Arrays of the one sample a cycle usually brings: `[]` then a push would allocate room
      // for 17 (about 400 bytes a sample at 10,000 points, most of the collector's garbage).
      this.pending.push((c.pend = { pointId: c.id, kind: c.kind, ts: [ts], val: [val], gen: this.gen }));
      return;
    }
    e.ts.push(ts);
    e.val.push(val);
  }

  /** Drops the pending samples of a point that is gone (deleted, or no longer collecting). */
  forget(id: string): void {
    if (this.pending.some((e) => e.pointId === id)) this.pending = this.pending.filter((e) => e.pointId !== id);
    if (this.held.length > 0) this.held = this.held.filter((h) => h.id !== id);
    this.kindWarned.delete(id);
  }

  /** Samples waiting to be written. */
  get backlog(): number {
    let n = 0;
    for (const e of this.pending) n += e.ts.length;
    return n;
  }

  /** Writes what is pending, unless a write is in flight (then it follows that one). */
  flush(): void {
    this.cycle = undefined;
    if (this.held.length > 0 && (this.trust as DatingTrust).trusted()) this.release();
    if (this.writing !== undefined || this.pending.length === 0) return;
    const batch = this.pending;
    this.pending = [];
    this.gen++;
    this.writing = this.write(batch).finally(() => {
      this.writing = undefined;
      this.flush();
    });
  }

  private hold(h: Held): void {
    if (this.held.length === 0) this.log.warn({ maxHeld: this.maxHeld }, 'the clock cannot be trusted: collected history is held in memory until it is set (docs/clock.md)');
    this.held.push(h);
    if (this.held.length > this.maxHeld) {
      // Drop a tenth at once (oldest first): one copy per 10 % rather than per sample.
      const n = Math.max(1, Math.floor(this.maxHeld / 10));
      if (this.heldDropped === 0) this.log.warn({ maxHeld: this.maxHeld }, 'the clock is still not trusted: the oldest held history samples are dropped');
      this.held = this.held.slice(n);
      this.heldDropped += n;
    }
  }

  /** The clock is trusted again: held samples are dated now minus the monotonic time since their read. */
  private release(): void {
    const clock = this.clock as Clock;
    const now = clock.now();
    const mono = clock.monotonic();
    const out = new Map<string, Pending>();
    for (const h of this.held) {
      let e = out.get(h.id);
      if (e === undefined || e.kind !== h.kind) out.set(h.id, (e = { pointId: h.id, kind: h.kind, ts: [], val: [], gen: this.gen }));
      // Whole milliseconds: the monotonic clock has fractions, history stores epoch ms.
      e.ts.push(Math.round(now - (mono - h.mono)));
      e.val.push(h.val);
    }
    this.log.info({ samples: this.held.length, points: out.size }, 'the clock is trusted: held history is written, re-dated by the monotonic clock');
    this.held = [];
    // Older than anything pending: they go first (a point may then have two entries, in time order).
    this.pending = [...out.values(), ...this.pending];
  }

  /** Resolves when nothing is pending or being written. */
  async idle(): Promise<void> {
    this.flush();
    while (this.writing !== undefined) {
      await this.writing;
      this.flush();
    }
  }

  private async write(writes: readonly PolledWrite[]): Promise<void> {
    let other: readonly PolledWrite[];
    try {
      // Written by the next flush (historyFlushMs): a poll cycle costs no fsync of its own.
      other = await this.history.writePolled(writes);
    } catch (err) {
      const code = isHayloftError(err) ? err.code : 'error';
      if (this.failing !== code) {
        this.failing = code;
        this.log.error(
          { err, points: writes.length },
          'cannot store collected history: polled samples are dropped until it can (counted in hayloft_history_refused_samples_total); said once until the reason changes',
        );
      }
      return;
    }
    if (this.failing !== null) {
      this.log.warn({ was: this.failing }, 'collected history is stored again');
      this.failing = null;
    }
    // A point whose kind changed (its old history is of another kind) is left out by the store
    // (a whole batch is all or nothing): said once per point until it is collected again.
    if (this.kindWarned.size > 0) for (const w of writes) if (!other.includes(w)) this.kindWarned.delete(w.pointId);
    for (const w of other) {
      if (this.kindWarned.has(w.pointId)) continue;
      this.kindWarned.add(w.pointId);
      this.log.warn({ pointId: w.pointId, kind: w.kind, stored: this.history.kindOf(w.pointId) }, 'not collecting history: the point holds history of another kind (delete it with hisDelete)');
    }
  }
}
