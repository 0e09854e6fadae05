/**
 * The poller's write queue: sends each writable point's effective value (from the point writer)
 * to its device through the driver, and shows how that went in `writeStatus`/`writeErr`.
 *
 * A point is written by a driver when it names the driver's connector (`modbusConnRef`) and
 * write address (`modbusWrite`, `bacnetWrite`); it need not be read too. Tuning, as Haxall's:
 * - `writeMinTime` (duration): changes closer together are coalesced: the newest value goes at
 *   most once per writeMinTime;
 * - `writeMaxTime` (duration): the value is written again that long after the last write, so a
 *   device that lost it (a restart) gets it back;
 * - `writeOnOpen` (marker): written again when its connector answers after being down;
 * - `writeOnStart` (marker): written when Hayloft starts (otherwise only changes are written).
 *
 * Status: `unknown` until something is to be written, `pending` while it waits, `ok` once the
 * device took it, `down` (no answer) or `fault` (refused, or a value the address cannot take)
 * with `writeErr`, `disabled` for a disabled point or connector. A failed write is retried with
 * backoff (1 s doubling to 1 min); a newer value replaces it at once.
 *
 * Writes of one connector go one after the other, beside its polls (the driver queues both on
 * the link), and never hold up other connectors: a dead device costs its own points only.
 *
 * Every time here (writeMinTime, writeMaxTime, backoff, due) is on the monotonic clock
 * (lib/clock.ts), so a wall-clock step neither holds writes back nor repeats them.
 */
import type { DriverConn, PreparedWrite, RawValue } from '../drivers/driver.js';
import { durationTag } from '../drivers/tags.js';
import { HNumber, type HDict, type HVal } from '../haystack/values.js';
import type { Clock } from '../lib/clock.js';
import { backoffDelay } from '../lib/backoff.js';
import { ErrorCodes, isHayloftError } from '../lib/errors.js';
import type { Logger } from '../lib/log.js';
import type { EventBus } from '../lib/events.js';
import type { ModelEvents } from '../model/events.js';
import type { PointState, WriteStatus } from '../model/point-state.js';
import type { Effective, PointWriter } from '../model/point-writer.js';

/** What the queue needs of a connector the poller holds. */
export interface WriteTarget {
  readonly id: string;
  /** How messages name it: its name (fully qualified), else `@id`. */
  readonly label: string;
  readonly conn: DriverConn | undefined;
  /** Why the connector cannot be used: a fault or disabled. */
  readonly problem: { status: 'fault' | 'disabled'; err: string | undefined } | undefined;
}

interface Pending {
  readonly id: string;
  readonly rec: HDict;
  readonly target: WriteTarget;
  readonly prepared: PreparedWrite | undefined;
  readonly minMs: number;
  readonly maxMs: number;
  readonly onOpen: boolean;
  /** The value to send; undefined: nothing asked yet. */
  want: RawValue | null | undefined;
  /** The value the device holds from us, once a write succeeded. */
  sent: { val: RawValue | null } | undefined;
  lastAt: number;
  due: number;
  failures: number;
  status: WriteStatus | undefined;
  err: string | undefined;
}

export interface WriteQueueOptions {
  points: PointState;
  writer: PointWriter;
  /** The bus the writer emits 'write.effective' on (model/events.ts). */
  events: EventBus<ModelEvents>;
  clock: Clock;
  log: Logger;
  /** Asks the poller's timer to run tick() at `at`. */
  wake: (at: number) => void;
  backoff?: { minMs?: number; maxMs?: number };
}

function message(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

function rawOf(v: HVal | null): RawValue | null {
  if (v === null) return null;
  if (v instanceof HNumber) return v.val;
  if (typeof v === 'boolean' || typeof v === 'string') return v;
  return null;
}

export class WriteQueue {
  private readonly o: WriteQueueOptions;
  private readonly byId = new Map<string, Pending>();
  private readonly busy = new Set<string>();
  private readonly inflight = new Set<Promise<void>>();
  private readonly minBackoffMs: number;
  private readonly maxBackoffMs: number;
  private starting = true;

  constructor(opts: WriteQueueOptions) {
    this.o = opts;
    this.minBackoffMs = opts.backoff?.minMs ?? 1000;
    this.maxBackoffMs = opts.backoff?.maxMs ?? 60_000;
  }

  start(): void {
    this.o.events.on('write.effective', this, (id, eff) => this.changed(id, eff));
  }

  /** Points configured at start are in: from now on, new points write only what changes. */
  started(): void {
    this.starting = false;
  }

  async stop(): Promise<void> {
    this.o.events.off(this);
    await Promise.allSettled([...this.inflight]);
    this.byId.clear();
  }

  get size(): number {
    return this.byId.size;
  }

  /** Ids of the points written through a connector. */
  idsOf(connId: string): string[] {
    const out: string[] = [];
    for (const p of this.byId.values()) if (p.target.id === connId) out.push(p.id);
    return out;
  }

  has(id: string): boolean {
    return this.byId.has(id);
  }

  /** Adds, changes or drops a point's write (it is dropped unless a driver writes it). */
  upsert(id: string, rec: HDict | undefined, target: WriteTarget | undefined, writeTag: string | undefined): void {
    const old = this.byId.get(id);
    if (rec === undefined || target === undefined || writeTag === undefined || !rec.has('writable') || !rec.has(writeTag)) {
      if (old !== undefined) {
        this.byId.delete(id);
        if (rec !== undefined) this.o.points.writeReleased(id);
      }
      return;
    }
    if (old !== undefined && old.rec === rec && old.target === target) return;
    let prepared: PreparedWrite | undefined;
    let problem: { status: WriteStatus; err: string | undefined } | undefined;
    let minMs = 0;
    let maxMs = Infinity;
    if (rec.has('disabled') || target.problem?.status === 'disabled') problem = { status: 'disabled', err: undefined };
    else if (target.problem !== undefined) problem = { status: 'fault', err: `connector ${target.label}: ${target.problem.err ?? ''}` };
    else if (target.conn?.prepareWrite === undefined) problem = { status: 'fault', err: `the driver of ${target.label} does not write` };
    else {
      try {
        minMs = rec.has('writeMinTime') ? durationTag(rec, 'writeMinTime', 0) : 0;
        maxMs = rec.has('writeMaxTime') ? durationTag(rec, 'writeMaxTime', 0) : Infinity;
        prepared = target.conn.prepareWrite({ id, tags: rec });
      } catch (e) {
        problem = { status: 'fault', err: message(e) };
        if (!isHayloftError(e)) this.o.log.debug({ err: e, pointId: id }, 'write configuration refused');
      }
    }
    const eff = this.o.writer.effective(id);
    // What to send: a point already queued keeps its value; at start only writeOnStart points
    // send what they hold; a point configured later sends its value when it has one.
    let want: RawValue | null | undefined;
    if (old !== undefined) want = old.want;
    else if (this.starting) want = rec.has('writeOnStart') ? rawOf(eff.val) : undefined;
    else want = eff.val === null ? undefined : rawOf(eff.val);
    const p: Pending = {
      id,
      rec,
      target,
      prepared,
      minMs,
      maxMs,
      onOpen: rec.has('writeOnOpen'),
      want,
      // Changed configuration (another address, another connector): written again.
      sent: undefined,
      lastAt: old?.lastAt ?? -Infinity,
      due: this.o.clock.monotonic(),
      failures: 0,
      status: old?.status,
      err: old?.err,
    };
    this.byId.set(id, p);
    if (problem !== undefined) this.publish(p, problem.status, problem.err);
    else if (p.want === undefined) this.publish(p, 'unknown', undefined);
    else if (old === undefined || old.prepared === undefined || old.status === 'disabled') this.publish(p, 'pending', undefined);
    this.o.wake(p.due);
  }

  /** The connector answers again after being down: writeOnOpen points are written again. */
  reopened(connId: string): void {
    const now = this.o.clock.monotonic();
    for (const p of this.byId.values()) {
      if (p.target.id !== connId || !p.onOpen || p.want === undefined || p.prepared === undefined) continue;
      // A device that was away may have restarted and lost the value: what it holds from us is
      // unknown, so the value counts as a change (due now, writeMinTime still applies).
      p.sent = undefined;
      p.due = now;
      p.failures = 0;
    }
    this.o.wake(now);
  }

  /**
   * Starts the writes that are due (one chain per connector); returns when the next is due and
   * the promises of those started.
   */
  run(now: number): { next: number; started: Promise<void>[] } {
    let next = Infinity;
    const started: Promise<void>[] = [];
    const due = new Map<string, Pending[]>();
    for (const p of this.byId.values()) {
      if (p.prepared === undefined || p.want === undefined) continue;
      const at = this.dueAt(p);
      if (at > now) {
        if (at < next) next = at;
        continue;
      }
      let l = due.get(p.target.id);
      if (l === undefined) due.set(p.target.id, (l = []));
      l.push(p);
    }
    for (const [connId, list] of due) {
      if (this.busy.has(connId)) continue;
      const run = this.runConn(connId, list);
      this.inflight.add(run);
      void run.finally(() => this.inflight.delete(run));
      started.push(run);
    }
    return { next, started };
  }

  /** When a point's write is due: a change (not before writeMinTime), a retry, or writeMaxTime. */
  private dueAt(p: Pending): number {
    const changed = p.sent === undefined || p.sent.val !== p.want;
    if (changed || p.failures > 0) return Math.max(p.due, p.lastAt + p.minMs);
    return Math.max(p.due, p.lastAt + p.maxMs);
  }

  private async runConn(connId: string, list: Pending[]): Promise<void> {
    this.busy.add(connId);
    try {
      for (const p of list) {
        if (this.byId.get(p.id) !== p || p.want === undefined) continue;
        await this.writeOne(p);
      }
    } finally {
      this.busy.delete(connId);
    }
    this.o.wake(this.o.clock.monotonic());
  }

  private async writeOne(p: Pending): Promise<void> {
    const conn = p.target.conn as DriverConn;
    const val = p.want as RawValue | null;
    if (conn.write === undefined) return;
    try {
      await conn.write(p.prepared as PreparedWrite, val);
      const now = this.o.clock.monotonic();
      p.sent = { val };
      p.lastAt = now;
      p.due = now;
      if (p.failures > 0) this.o.log.info({ pointId: p.id, failures: p.failures }, 'point write succeeded again');
      p.failures = 0;
      // A newer value may have come while this one was on its way: it stays pending.
      if (this.byId.get(p.id) === p) this.publish(p, p.want === val ? 'ok' : 'pending', undefined);
    } catch (e) {
      const now = this.o.clock.monotonic();
      p.failures++;
      p.lastAt = now;
      const delay = backoffDelay(p.failures, { minMs: this.minBackoffMs, maxMs: this.maxBackoffMs });
      p.due = now + delay;
      const down = isHayloftError(e, ErrorCodes.DRIVER_DOWN);
      if (!isHayloftError(e)) this.o.log.error({ err: e, pointId: p.id }, 'unexpected driver error writing a point');
      if (p.failures === 1) this.o.log.warn({ pointId: p.id, err: message(e) }, 'point write failed; retrying');
      if (this.byId.get(p.id) === p) this.publish(p, down ? 'down' : 'fault', message(e));
    }
  }

  private changed(id: string, eff: Effective): void {
    const p = this.byId.get(id);
    if (p === undefined) return;
    p.want = rawOf(eff.val);
    p.due = this.o.clock.monotonic();
    p.failures = 0;
    if (p.prepared !== undefined) this.publish(p, 'pending', undefined);
    this.o.wake(this.dueAt(p));
  }

  private publish(p: Pending, status: WriteStatus, err: string | undefined): void {
    if (p.status === status && p.err === err) return;
    p.status = status;
    p.err = err;
    this.o.points.writeResult(p.id, status, err);
  }
}
