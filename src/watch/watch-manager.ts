/**
 * The watch manager: open watches, their points and leases, and which points changed since each
 * watch's last poll.
 *
 * Cost model (the poll hot path is a driver setting thousands of points a second): the model
 * emits `live.changed` (id) for every value set; the manager looks the id up in a per-point Set
 * of the watches holding it and adds the id to each one's `changed` Set. No scan of all points
 * or all watches per change; a poll walks only its own changed ids and reads their values then,
 * so a point set ten times between polls costs one row.
 *
 * Push: sockets listen to a watch (`listen`); a change reaches its listeners in the same call that
 * marks it changed, and a watch that closes or expires tells them it ended.
 *
 * Ownership: a watch belongs to the user (owner key) that opened it; any other owner sees it as
 * unknown, so watch ids reveal nothing across users. Leases: every watchSub and watchPoll renews;
 * an expired watch is closed when next touched or by the housekeeping timer, whichever is first.
 */
import { randomUUID } from 'node:crypto';
import { HDict, type HNumber, HRef, type HVal, newRecord } from '../haystack/values.js';
import type { Clock } from '../lib/clock.js';
import { ErrorCodes, HayloftError } from '../lib/errors.js';
import type { Logger } from '../lib/log.js';
import { ALARM_TAGS, CUR_TAGS } from '../model/live-tags.js';
import type { Model, ModelChange } from '../model/model.js';
import { type Lease, parseLease } from './lease.js';
import type { Part } from '../lib/part.js';

export interface WatchLimits {
  /** Open watches one user may hold at once. */
  maxWatchesPerUser: number;
  /** Points one watch may hold. */
  maxPointsPerWatch: number;
}

/**
 * Generous for supervisory clients (a dashboard opens a handful of watches; a whole building
 * controller rarely has more than a few thousand points) while bounding what a client that
 * leaks watches can make a small device hold.
 */
export const DEFAULT_WATCH_LIMITS: Readonly<WatchLimits> = Object.freeze({ maxWatchesPerUser: 50, maxPointsPerWatch: 10_000 });

export const DEFAULT_HOUSEKEEPING_MS = 5_000;

export interface WatchManagerOptions {
  model: Model;
  clock: Clock;
  log?: Logger;
  limits?: Partial<WatchLimits>;
  /** How often expired watches are closed (real time; expiry itself is judged by `clock.monotonic()`). */
  housekeepingMs?: number;
  /** Watch ids; random UUIDs by default (unguessable: a watch id is not a credential, but close). */
  newId?: () => string;
}

/**
 * Whether the caller may see (and watch) a record; undefined means everything. Points it may not
 * see are answered as unknown, exactly like points that do not exist, so nothing is revealed.
 */
export type Visible = ((rec: HDict) => boolean) | undefined;

export interface SubscribeRequest {
  /** Present to append to an open watch; absent to open a new one. */
  watchId?: string;
  /** Display name of a new watch. */
  dis?: string;
  /** The meta `lease` as sent (validated here); absent keeps the watch's lease (default 1 min for a new one). */
  lease?: HVal;
  /** Ids or fully qualified names, in request order. */
  ids: readonly string[];
  visible?: Visible;
}

export interface WatchAnswer {
  watchId: string;
  lease: HNumber;
  /** Rows of `id`, `curVal`, `curStatus`, `curErr`. */
  rows: HDict[];
}

/** The columns of watch answers, in this order even when no row has a value for one. */
export const WATCH_COLS: readonly string[] = ['id', 'curVal', 'curStatus', 'curErr'];

/** What a push connection is told about the watch it listens to. */
export interface WatchListener {
  /** A point of the watch changed (cur tags, deleted, created again): called once per change, synchronously. */
  changed(id: string): void;
  /** The watch was closed (watchUnsub, or the manager stopped) or its lease expired: nothing more comes. */
  ended(why: 'closed' | 'expired'): void;
}

const UNKNOWN_POINT = 'unknown point';
const DELETED_POINT = 'the point was deleted from the model: remove it with watchUnsub';

class Watch {
  /** Watched point ids, in subscription order (refresh answers in this order). */
  readonly points = new Set<string>();
  /** Ids changed since the last poll, in order of first change. */
  readonly changed = new Set<string>();
  /** Push connections on this watch; undefined while there are none (the common case). */
  listeners: Set<WatchListener> | undefined = undefined;
  lease: Lease;
  /** When the lease ends, on the monotonic clock (lib/clock.ts): a wall-clock step moves it not. */
  expires: number;

  constructor(
    readonly id: string,
    readonly owner: string,
    readonly dis: string,
    lease: Lease,
    now: number,
  ) {
    this.lease = lease;
    this.expires = now + lease.ms;
  }
}

function limitError(message: string): HayloftError {
  return new HayloftError(ErrorCodes.WATCH_LIMIT, message);
}

export class WatchManager implements Part {
  readonly name = 'watches';
  readonly limits: Readonly<WatchLimits>;
  private readonly model: Model;
  private readonly clock: Clock;
  private readonly log: Logger | undefined;
  private readonly housekeepingMs: number;
  private readonly newId: () => string;
  private readonly watches = new Map<string, Watch>();
  private readonly byOwner = new Map<string, Set<Watch>>();
  /** Point id -> the watches holding it: the only lookup a value change makes. */
  private readonly byPoint = new Map<string, Set<Watch>>();
  private timer: ReturnType<typeof setInterval> | undefined;
  private started = false;

  constructor(opts: WatchManagerOptions) {
    this.model = opts.model;
    this.clock = opts.clock;
    this.log = opts.log;
    this.limits = Object.freeze({ ...DEFAULT_WATCH_LIMITS, ...(opts.limits ?? {}) });
    this.housekeepingMs = opts.housekeepingMs ?? DEFAULT_HOUSEKEEPING_MS;
    this.newId = opts.newId ?? randomUUID;
  }

  /** Starts tracking value changes and deletions, and the housekeeping timer. */
  start(): void {
    if (this.started) return;
    this.started = true;
    this.model.events.on('live.changed', this, (id, changed) => {
      // Watch rows carry curVal/curStatus/curErr (and alarmStatus) only: other live tags
      // (hisWrite's hisSize, a write's writeVal) do not report the point again.
      for (let i = 0; i < changed.length; i++) {
        if (CUR_TAGS.includes(changed[i] as string) || ALARM_TAGS.includes(changed[i] as string)) {
          this.touched(id);
          return;
        }
      }
    });
    this.model.events.on('records.committed', this, (c) => this.modelChanged(c));
    this.timer = setInterval(() => this.housekeep(), this.housekeepingMs);
    // Housekeeping alone must not keep the process alive (tests, CLI commands).
    this.timer.unref();
  }

  /** Stops the timer and listeners and forgets every watch (clients re-subscribe after a restart). */
  stop(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
    this.model.events.off(this);
    for (const w of [...this.watches.values()]) this.closeWatch(w, 'closed');
    this.watches.clear();
    this.byOwner.clear();
    this.byPoint.clear();
    this.started = false;
  }

  /** Open watches (all users). */
  get size(): number {
    return this.watches.size;
  }

  /** Distinct points on at least one watch. */
  get watchedPoints(): number {
    return this.byPoint.size;
  }

  /** Open watches of one owner. */
  countOf(owner: string): number {
    return this.byOwner.get(owner)?.size ?? 0;
  }

  /**
   * watchSub: opens a watch (no `watchId`) or appends to one; renews its lease (and changes it
   * when `lease` is given). Answers one row per requested point in request order, points
   * without `cur` left out; unknown or invisible ids get a row of their own (see rowsFor).
   * All or nothing: past a limit nothing is opened or added.
   */
  subscribe(owner: string, req: SubscribeRequest): WatchAnswer {
    this.mustBeStarted();
    const now = this.clock.monotonic();
    const existing = req.watchId === undefined ? undefined : this.open(owner, req.watchId, now);
    const lease = req.lease === undefined && existing !== undefined ? existing.lease : parseLease(req.lease);

    const rows: HDict[] = [];
    const adding: string[] = [];
    const seen = new Set<string>();
    for (const text of req.ids) {
      const id = this.model.resolveId(text);
      const rec = id === undefined ? undefined : this.model.get(id);
      if (id === undefined || rec === undefined || (req.visible !== undefined && !req.visible(rec))) {
        // Unknown id: a row with the id as asked and status `unknown`, rather than Haystack
        // read's all-null row. Rows are not aligned with the request anyway (non-cur points are
        // left out), so only an id tells the client which of its points failed, and `unknown`
        // is the status the spec already gives a point that does not exist (deleted). Not added
        // to the watch: there is no point to track, and it cannot be checked for `cur`.
        rows.push(unknownRow(new HRef(text), UNKNOWN_POINT));
        continue;
      }
      if (!rec.has('cur')) continue;
      rows.push(rowOf(rec));
      if (!seen.has(id) && existing?.points.has(id) !== true) {
        seen.add(id);
        adding.push(id);
      }
    }

    const have = existing?.points.size ?? 0;
    if (have + adding.length > this.limits.maxPointsPerWatch) {
      throw limitError(
        `a watch holds at most ${this.limits.maxPointsPerWatch} points; this would make ${have + adding.length}: ` +
          'split the points over several watches, or remove some with watchUnsub',
      );
    }
    let w = existing;
    if (w === undefined) {
      this.closeExpired(this.byOwner.get(owner), now);
      const open = this.countOf(owner);
      if (open >= this.limits.maxWatchesPerUser) {
        throw limitError(
          `this user already has ${open} open watches, the most allowed: close one with watchUnsub (close marker) ` +
            'or append points to an open one with watchSub and its watchId',
        );
      }
      w = new Watch(this.newId(), owner, req.dis ?? '', lease, now);
      this.watches.set(w.id, w);
      let mine = this.byOwner.get(owner);
      if (mine === undefined) this.byOwner.set(owner, (mine = new Set()));
      mine.add(w);
      this.log?.debug({ watchId: w.id, dis: w.dis, leaseMs: lease.ms }, 'watch opened');
    }
    // Added points are not marked changed: the answer just gave their values, and the first
    // poll reports what changed since this watchSub.
    for (const id of adding) {
      w.points.add(id);
      let holders = this.byPoint.get(id);
      if (holders === undefined) this.byPoint.set(id, (holders = new Set()));
      holders.add(w);
    }
    w.lease = lease;
    w.expires = now + lease.ms;
    return { watchId: w.id, lease: lease.num, rows };
  }

  /**
   * watchPoll: the points changed since the previous poll (or the watchSub that opened the
   * watch), or every point with `refresh`; renews the lease. Throws HL_WATCH_NOT_FOUND for an
   * unknown, closed, expired or foreign watch.
   */
  poll(owner: string, watchId: string, opts: { refresh?: boolean; visible?: Visible } = {}): WatchAnswer {
    this.mustBeStarted();
    const now = this.clock.monotonic();
    const w = this.open(owner, watchId, now);
    w.expires = now + w.lease.ms;
    const ids = opts.refresh === true ? w.points : w.changed;
    const rows = new Array<HDict>(ids.size);
    let n = 0;
    for (const id of ids) rows[n++] = this.rowFor(id, opts.visible);
    w.changed.clear();
    return { watchId: w.id, lease: w.lease.num, rows };
  }

  /**
   * watchUnsub without `close`: removes the points (ids or fully qualified names; ones not on the
   * watch are ignored). An unknown, expired or foreign watch is a no-op: the points are not
   * watched, which is what the client asked for.
   */
  unsubscribe(owner: string, watchId: string, ids: readonly string[]): void {
    const w = this.find(owner, watchId);
    if (w === undefined) return;
    for (const text of ids) {
      // A deleted point's id no longer resolves: fall back to the text, which is then its id.
      const id = this.model.resolveId(text) ?? text;
      if (!w.points.delete(id)) continue;
      w.changed.delete(id);
      this.unindex(w, id);
    }
  }

  /** watchUnsub with `close`. Returns whether a watch was closed (false: unknown, foreign or already gone). */
  close(owner: string, watchId: string): boolean {
    const w = this.find(owner, watchId);
    if (w === undefined) return false;
    this.closeWatch(w, 'closed');
    return true;
  }

  /**
   * Push: calls `l.changed(id)` for every change of a point on the owner's open watch, and
   * `l.ended` when it closes or expires. Does not renew the lease (watchSub and watchPoll do).
   * Throws HL_WATCH_NOT_FOUND as poll does. Returns the function that stops listening.
   */
  listen(owner: string, watchId: string, l: WatchListener): () => void {
    this.mustBeStarted();
    const w = this.open(owner, watchId, this.clock.monotonic());
    (w.listeners ??= new Set()).add(l);
    return () => {
      w.listeners?.delete(l);
    };
  }

  /** Whether the owner has this watch open (for a push connection's handshake). */
  isOpen(owner: string, watchId: string): boolean {
    return this.find(owner, watchId) !== undefined;
  }

  /** A point's row as watchPoll answers it (id, curVal, curStatus, curErr), for push. */
  row(id: string, visible: Visible): HDict {
    return this.rowFor(id, visible);
  }

  /** Closes every expired watch; returns how many. Run by the timer; tests call it directly. */
  housekeep(): number {
    const now = this.clock.monotonic();
    let n = 0;
    for (const w of this.watches.values()) {
      if (w.expires <= now) {
        this.closeWatch(w, 'expired');
        n++;
      }
    }
    return n;
  }

  private mustBeStarted(): void {
    if (!this.started) throw new HayloftError(ErrorCodes.INTERNAL, 'the watch manager is not started');
  }

  /** The owner's live watch, or undefined; an expired one is closed on the way. */
  private find(owner: string, watchId: string): Watch | undefined {
    const w = this.watches.get(watchId);
    if (w === undefined || w.owner !== owner) return undefined;
    if (w.expires <= this.clock.monotonic()) {
      this.closeWatch(w, 'expired');
      return undefined;
    }
    return w;
  }

  private open(owner: string, watchId: string, now: number): Watch {
    const w = this.watches.get(watchId);
    if (w !== undefined && w.owner === owner && w.expires > now) return w;
    if (w !== undefined && w.owner === owner) this.closeWatch(w, 'expired');
    throw new HayloftError(
      ErrorCodes.WATCH_NOT_FOUND,
      `watch "${watchId}" is unknown, closed or expired (a lease ends when no watchSub or watchPoll renews it in time): ` +
        'subscribe again with watchSub to open a new watch',
    );
  }

  private closeExpired(watches: Set<Watch> | undefined, now: number): void {
    if (watches === undefined) return;
    for (const w of [...watches]) if (w.expires <= now) this.closeWatch(w, 'expired');
  }

  private closeWatch(w: Watch, why: 'closed' | 'expired'): void {
    if (this.watches.get(w.id) !== w) return;
    this.watches.delete(w.id);
    const mine = this.byOwner.get(w.owner);
    mine?.delete(w);
    if (mine?.size === 0) this.byOwner.delete(w.owner);
    for (const id of w.points) this.unindex(w, id);
    w.points.clear();
    w.changed.clear();
    this.log?.debug({ watchId: w.id, dis: w.dis }, `watch ${why}`);
    const ls = w.listeners;
    w.listeners = undefined;
    if (ls !== undefined) for (const l of ls) l.ended(why);
  }

  private unindex(w: Watch, id: string): void {
    const holders = this.byPoint.get(id);
    if (holders === undefined) return;
    holders.delete(w);
    if (holders.size === 0) this.byPoint.delete(id);
  }

  /** The hot path: one Map lookup, and one Set add per watch holding the point. */
  private touched(id: string): void {
    const holders = this.byPoint.get(id);
    if (holders === undefined) return;
    for (const w of holders) {
      w.changed.add(id);
      if (w.listeners !== undefined) for (const l of w.listeners) l.changed(id);
    }
  }

  /**
   * A deleted point stays on its watches (the client is expected to watchUnsub it) and is
   * reported once, as unknown, on the next poll; no value change can touch it after that. A
   * record created again under a watched id (a supplied id) is reported as well.
   */
  private modelChanged(c: ModelChange): void {
    for (const rec of c.deleted) this.touched((rec.get('id') as HRef).id);
    for (const rec of c.created) this.touched((rec.get('id') as HRef).id);
  }

  private rowFor(id: string, visible: Visible): HDict {
    const rec = this.model.stored(id) === undefined ? undefined : this.model.get(id);
    if (rec === undefined) return unknownRow(new HRef(id), DELETED_POINT);
    if (visible !== undefined && !visible(rec)) return unknownRow(new HRef(id), UNKNOWN_POINT);
    return rowOf(rec);
  }
}

function unknownRow(id: HRef, err: string): HDict {
  const r = newRecord();
  r.id = id;
  r.curStatus = 'unknown';
  r.curErr = err;
  return HDict.adopt(r);
}

/**
 * A point's watch row. `curStatus` absent means never read (`unknown`), unless a value was set
 * without a status (updateRec of curVal alone, or hisWrite): that value is the point's last
 * known one, so `ok`. `curVal` only with ok or stale (docs/spec/wire-notes.md §6); `curErr` only when not ok.
 */
function rowOf(rec: HDict): HDict {
  const val = rec.get('curVal');
  const st = rec.get('curStatus');
  const status = typeof st === 'string' ? st : val !== undefined ? 'ok' : 'unknown';
  const r = newRecord();
  r.id = rec.get('id') as HRef;
  if (val !== undefined && (status === 'ok' || status === 'stale')) r.curVal = val;
  r.curStatus = status;
  const err = rec.get('curErr');
  if (err !== undefined && status !== 'ok') r.curErr = err;
  // A point's worst open alarm (docs/alarms.md): only while it has one, so other rows are unchanged.
  const alarm = rec.get('alarmStatus');
  if (alarm !== undefined) r.alarmStatus = alarm;
  return HDict.adopt(r);
}
