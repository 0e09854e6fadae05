/**
 * Point state: the one owner of a point's live tags (live-tags.ts), of the rules that set them,
 * and of the facts every part reads the same way (its kind, its unit, its zone, whether a driver
 * feeds it).
 *
 * Callers say what happened; point state decides what the tags become (Haxall keeps these rules in
 * the point's ConnPoint and ConnPointCurState; here it is one service built by the composition
 * root):
 * - the poller: `curPolled` when a driver reads a point (and `curNotPolled`, `curRemove`,
 *   `curUnbind` when it stops), then per read `curOk`, `curErr`, `curFault`, `curStale`;
 *   `connStatus` for a connector's link (a down connector takes its points down with it) and
 *   `setPolled` after each read of a connector;
 * - the point writer (point-writer.ts): `writeValue` with the effective value of the priority
 *   array, `writeRemove` when a point stops being writable; the write queue: `writeResult` with
 *   how writing it to the device went, `writeReleased` when no driver writes it any more. Who
 *   owns writeStatus is `writerOf`, decided here only;
 * - nobody for history: point state hears every committed history write and delete
 *   (the bus's 'his.written', subscribed in `start`) and sets hisSize/hisStart/hisEnd, and curVal
 *   of a cur point no driver feeds; polled samples of a point a driver reads show in its his tags
 *   at the pace of the history flush (hisTagsMs), not once per sample;
 * - the uplink: `setSync`; change of value and learning: `setCovErr`, `setLearnProgress`.
 *
 * The repeat check of readings, connector and write status is here: only tags whose value differs
 * from what the point shows are passed on. The poll path (thousands of readings a second)
 * compares with what point state keeps per read point (Reading) before it allocates, so an
 * unchanged reading costs one Map lookup and no garbage; the rest compares with the model's tags
 * (Model.liveTags). (The model's setTransient still tells watches only of the
 * tags that changed, for the rarer tags set as they come: his*, sync*.) The tags live in the
 * model's memory (Model.setTransient): read and filters see them, nothing is written to disk per
 * change, watches hear of changes. Clients cannot set them: the model refuses them in
 * createRec/updateRec.
 */
import { REL, type TimeZone, UTC, findTimeZone } from '../haystack/tz.js';
import { HDateTime, HNumber, type HDict, type HVal } from '../haystack/values.js';
import { ErrorCodes } from '../lib/errors.js';
import type { HisValue } from '../store/his-codec.js';
import type { HisKind, HistoryStore } from '../store/history.js';
import type { Metrics } from '../lib/metrics.js';
import type { Part } from '../lib/part.js';
import type { Model } from './model.js';

/** The kinds a point may have (what history, drivers and writes can hold). */
export const POINT_KINDS: readonly HisKind[] = ['Number', 'Bool', 'Str'];
export type PointKind = HisKind;
/** The kinds for messages: `Number, Bool or Str`. */
export const POINT_KINDS_TEXT = `${POINT_KINDS.slice(0, -1).join(', ')} or ${POINT_KINDS[POINT_KINDS.length - 1] ?? ''}`;

/** A point's kind, or undefined when its `kind` tag is missing or not one of POINT_KINDS. */
export function pointKind(rec: HDict): PointKind | undefined {
  const k = rec.get('kind');
  return typeof k === 'string' && (POINT_KINDS as readonly string[]).includes(k) ? (k as PointKind) : undefined;
}

/** Why a point's kind is not usable, for messages: `kind "Ref"`, `no kind tag`. */
export function describeKind(rec: HDict): string {
  const k = rec.get('kind');
  return typeof k === 'string' ? `kind "${k}"` : 'no kind tag';
}

/** A point's `unit`, or null without one. */
export function pointUnit(rec: HDict): string | null {
  const u = rec.get('unit');
  return typeof u === 'string' ? u : null;
}

/** A point's zone: its `tz` tag when it names a known zone, else `fallback` (the server's). */
export function pointZone(rec: HDict, fallback: TimeZone): TimeZone {
  const tz = rec.get('tz');
  return (typeof tz === 'string' ? findTimeZone(tz) : undefined) ?? fallback;
}

/** A value of a point's kind as the model shows it (Numbers carry the point's unit). */
export function pointValue(kind: PointKind, unit: string | null, v: number | boolean | string): HVal {
  return kind === 'Number' ? new HNumber(v as number, unit) : v;
}

export type CurStatus = 'ok' | 'stale' | 'down' | 'fault' | 'disabled' | 'unknown';

/** Changes to a point's reading; a tag left out is unchanged, null removes it. */
export interface CurTags {
  curVal?: HVal | null;
  curStatus?: CurStatus | null;
  curErr?: string | null;
}

/** Changes to a point's uplink status; a tag left out is unchanged, null removes it. */
export interface SyncTags {
  syncStatus?: string | null;
  syncErr?: string | null;
  syncLast?: HDateTime | null;
}

export type WriteStatus = 'ok' | 'down' | 'fault' | 'disabled' | 'pending' | 'unknown';

/** Changes to a point's write state; a tag left out is unchanged, null removes it. */
export interface WriteTags {
  writeVal?: HVal | null;
  writeLevel?: HNumber | null;
  writeStatus?: WriteStatus | null;
  writeErr?: string | null;
}

/** What point state needs to know of a driver: the tags that bind a point to it. */
export interface DriverTags {
  /** The Ref tag naming its connector (`modbusConnRef`). */
  readonly refTag: string;
  /** The tag holding the address it writes to (`modbusWrite`), for drivers that write. */
  readonly writeTag?: string;
}

/**
 * The driver that feeds a point: the one whose connector the point names (its Ref tag; drivers'
 * Ref tags are distinct, registry.ts). The one rule for "fed by a driver": such a point's curVal,
 * curStatus and curErr are the driver's (the poller reads it when it also has the driver's read
 * address; without one it is write-only and has no curVal), never its history's. A cur point fed
 * by none takes its newest history sample as curVal.
 */
export function driverOf<D extends DriverTags>(drivers: readonly D[], rec: HDict): D | undefined {
  for (const d of drivers) if (rec.has(d.refTag)) return d;
  return undefined;
}

/**
 * The driver that writes a point: its driver (driverOf), when the point has that driver's write
 * address. It owns the point's writeStatus and writeErr (the write queue reports how the device
 * took the value); without one, the point writer's value is all there is and writeStatus follows
 * it. The one rule for who owns writeStatus.
 */
export function writerOf<D extends DriverTags>(drivers: readonly D[], rec: HDict): D | undefined {
  const d = driverOf(drivers, rec);
  return d?.writeTag !== undefined && rec.has(d.writeTag) ? d : undefined;
}

/** A connector's link status (connStatus). */
export type ConnStatus = 'ok' | 'down' | 'fault' | 'disabled';

/** A value as a point of a kind holds it, before it is a Haystack value: what drivers read. */
export type PointRaw = HisValue;

/** A read value as the point's kind holds it, or why it cannot be (the point faults). */
function convert(kind: PointKind, v: PointRaw): PointRaw | { err: string } {
  switch (kind) {
    case 'Number':
      if (typeof v === 'number') return v;
      if (typeof v === 'boolean') return v ? 1 : 0;
      return { err: `the device sent text ("${v.slice(0, 40)}") for a Number point` };
    case 'Bool':
      if (typeof v === 'boolean') return v;
      if (typeof v === 'number') return v !== 0;
      return { err: `the device sent text ("${v.slice(0, 40)}") for a Bool point` };
    case 'Str':
      return typeof v === 'string' ? v : String(v);
  }
}

/** Leaves curVal as it is (a stale point keeps its last value). */
const KEEP = Symbol('keep');
/** A shown curVal that no reading equals (a Number in another unit, a value of no point kind). */
const OTHER = Symbol('other');

/**
 * A point a driver reads: through which connector, as which kind, in which unit, and what it
 * shows (Haxall's ConnPointCurState): the repeat check compares with these fields, so an
 * unchanged reading costs no lookup in the model's tags. Taken from the tags when bound, kept by
 * showCur; setCur, the one other writer of a read point's cur tags, takes them again.
 */
interface Reading {
  readonly id: string;
  readonly connId: string;
  readonly kind: PointKind;
  readonly unit: string | null;
  status: CurStatus | undefined;
  raw: PointRaw | undefined | typeof OTHER;
  err: string | undefined;
  /** Paced his tags (hisTagsMs): the point's slot (-1: none yet, its next sample shows at once), and whether it waits in it. */
  hisSlot: number;
  hisDue: boolean;
}

export interface PointStateOptions {
  model: Model;
  history: HistoryStore;
  /** The registered drivers' tags (from the driver registry). */
  drivers: readonly DriverTags[];
  /**
   * How late the his tags (hisSize, hisStart, hisEnd) of a point a driver reads may show its
   * polled samples, in ms: the history flush interval (historyFlushMs), after which they are on
   * disk too. 0: at once. A point's first polled sample shows at once; after that its tags are
   * refreshed once per interval, the points spread over it, so 10,000 points polled every second
   * cost a fifth of the model updates at a 5 s interval and no burst. hisWrite's samples and
   * deletes show at once, always. Default 0.
   */
  hisTagsMs?: number;
}

/** Slots the paced his tags are spread over: one is refreshed every hisTagsMs / HIS_SLOTS. */
const HIS_SLOTS = 5;

export class PointState implements Part {
  readonly name = 'points';
  private readonly model: Model;
  private readonly history: HistoryStore;
  private readonly drivers: readonly DriverTags[];
  /** Points a driver reads, by id and by connector (a down connector takes them down). */
  private readonly readings = new Map<string, Reading>();
  private readonly byConn = new Map<string, Set<Reading>>();
  /** Re-reads of the newest sample after a history delete, still running, and the first that failed. */
  private readonly refreshing = new Set<Promise<void>>();
  private refreshFailed: { err: unknown } | undefined;
  /** Paced his tags (hisTagsMs): each point's slot, and per slot the points with unshown samples. */
  private readonly hisTagsMs: number;
  private hisDue: Reading[][] = Array.from({ length: HIS_SLOTS }, () => []);
  private hisNextSlot = 0;
  private hisTick = 0;
  private hisTimer: NodeJS.Timeout | undefined;

  constructor(opts: PointStateOptions) {
    this.model = opts.model;
    this.history = opts.history;
    this.drivers = [...opts.drivers];
    this.hisTagsMs = opts.hisTagsMs ?? 0;
  }

  /**
   * Starts hearing history writes and deletes, and shows every point's history as it is now: the
   * his tags, and for a cur point no driver feeds its newest sample as curVal.
   */
  async start(): Promise<void> {
    this.history.events.off(this);
    this.history.events.on('his.written', this, (id, kind, written, polled) => this.heard(id, kind, written, polled));
    if (this.hisTagsMs > 0 && this.hisTimer === undefined) {
      // A timer, not the wall clock: a clock step changes nothing here.
      this.hisTimer = setInterval(() => this.showDue(this.hisTick++ % HIS_SLOTS), this.hisTagsMs / HIS_SLOTS);
      this.hisTimer.unref();
    }
    const ids = this.history.points().filter((id) => this.model.stored(id)?.has('point') === true);
    for (let i = 0; i < ids.length; i += 64) await Promise.all(ids.slice(i, i + 64).map((id) => this.refreshFromHistory(id)));
  }

  /** Stops hearing history; waits for the re-reads still running. */
  async stop(): Promise<void> {
    this.history.events.off(this);
    clearInterval(this.hisTimer);
    this.hisTimer = undefined;
    for (let slot = 0; slot < HIS_SLOTS; slot++) this.showDue(slot);
    // A read-back that failed no longer matters: the tags go with the process.
    await this.settled().catch(() => undefined);
  }

  /**
   * Resolves once what point state does in answer to the history changes so far shows (after a
   * delete, the newest sample left is read back). For a caller that answers only once the tags
   * follow its change (hisDelete); it gets the error of a read-back that failed since.
   */
  async settled(): Promise<void> {
    while (this.refreshing.size > 0) await Promise.all([...this.refreshing]);
    const failed = this.refreshFailed;
    this.refreshFailed = undefined;
    if (failed !== undefined) throw failed.err;
  }

  /** Whether a driver feeds the point (driverOf): it then owns curVal. */
  fedByDriver(rec: HDict): boolean {
    return driverOf(this.drivers, rec) !== undefined;
  }

  /** Whether a driver writes the point (writerOf): the write queue then owns writeStatus and writeErr. */
  writtenByDriver(rec: HDict): boolean {
    return writerOf(this.drivers, rec) !== undefined;
  }

  // -------------------------------------------------------------------------------------------
  // cur*: a driver's readings

  /**
   * A driver reads the point through connector `connId`, as `kind` in `unit`. It shows `unknown`
   * (no curVal) until the first read, unless it already shows a reading of that kind and unit
   * (its record changed in other tags): a point that was not read, or is read differently now,
   * has no value yet.
   */
  curPolled(id: string, connId: string, kind: PointKind, unit: string | null): void {
    const old = this.readings.get(id);
    if (old !== undefined && old.connId === connId && old.kind === kind && old.unit === unit) return;
    if (old !== undefined) this.unbind(old);
    const r: Reading = { id, connId, kind, unit, status: undefined, raw: undefined, err: undefined, hisSlot: -1, hisDue: false };
    this.shown(r);
    this.readings.set(id, r);
    let s = this.byConn.get(connId);
    if (s === undefined) this.byConn.set(connId, (s = new Set()));
    s.add(r);
    const sameReading = old !== undefined && old.kind === kind && old.unit === unit;
    if (!sameReading || r.status === undefined || r.status === 'fault' || r.status === 'disabled') this.showCur(r, 'unknown', undefined, undefined);
  }

  /** A driver's point that is not read: its configuration is at fault (`err`), or it is disabled. */
  curNotPolled(id: string, status: 'fault' | 'disabled', err: string | undefined): void {
    this.curUnbind(id);
    // Not on the poll path: the model's setTransient drops what is unchanged.
    this.model.setTransient(id, { curStatus: status, curVal: null, curErr: err ?? null });
  }

  /** The point is no longer a driver's: its cur tags go (its record remains). */
  curRemove(id: string): void {
    this.curUnbind(id);
    this.model.setTransient(id, { curVal: null, curStatus: null, curErr: null });
  }

  /** The driver stops reading the point (the poller stops); its tags stay as they are. */
  curUnbind(id: string): void {
    const r = this.readings.get(id);
    if (r !== undefined) this.unbind(r);
  }

  /**
   * A read value: `ok` with it as curVal, once converted to the point's kind (a value the kind
   * cannot hold faults the point). Returns the value as the point holds it, for its history, or
   * undefined when the point faulted or is not read by a driver.
   */
  curOk(id: string, raw: PointRaw): PointRaw | undefined {
    const r = this.readings.get(id);
    if (r === undefined) return undefined;
    const v = convert(r.kind, raw);
    if (typeof v === 'object') {
      this.showCur(r, 'fault', undefined, v.err);
      return undefined;
    }
    this.showCur(r, 'ok', v, undefined);
    return v;
  }

  /** A read that failed for this point: `down` when the device or link did not answer, else `fault`. */
  curErr(id: string, err: { readonly code: string; readonly message: string }): void {
    const r = this.readings.get(id);
    if (r !== undefined) this.showCur(r, err.code === ErrorCodes.DRIVER_DOWN ? 'down' : 'fault', undefined, err.message);
  }

  /** The point is at fault for this read (the driver returned nothing or nothing usable for it). */
  curFault(id: string, err: string): void {
    const r = this.readings.get(id);
    if (r !== undefined) this.showCur(r, 'fault', undefined, err);
  }

  /** No fresh value came within the stale time: an `ok` point becomes `stale` and keeps its curVal. */
  curStale(id: string): void {
    const r = this.readings.get(id);
    if (r?.status === 'ok') this.showCur(r, 'stale', KEEP, undefined);
  }

  /** Sets a point's cur tags as given, without rules: for a source point state has no rules for (tests, simulations). */
  setCur(id: string, tags: CurTags): void {
    this.model.setTransient(id, tags as Record<string, HVal>);
    const r = this.readings.get(id);
    if (r !== undefined) this.shown(r);
  }

  /** Shows status, value and error, passing on only the tags that differ from what the point shows. */
  private showCur(r: Reading, status: CurStatus, raw: PointRaw | undefined | typeof KEEP, err: string | undefined): void {
    const sameStatus = r.status === status;
    const sameVal = raw === KEEP || Object.is(r.raw, raw);
    const sameErr = r.err === err;
    if (sameStatus && sameVal && sameErr) return;
    const tags: CurTags = {};
    if (!sameStatus) tags.curStatus = r.status = status;
    if (!sameVal) {
      tags.curVal = raw === undefined ? null : typeof raw === 'number' ? new HNumber(raw, r.unit) : raw;
      r.raw = raw;
    }
    if (!sameErr) {
      tags.curErr = err ?? null;
      r.err = err;
    }
    this.model.setTransient(r.id, tags as Record<string, HVal>);
  }

  /** Takes what a read point shows from its tags (when bound, and after setCur). */
  private shown(r: Reading): void {
    const live = this.model.liveTags(r.id);
    const status = live?.curStatus;
    const val = live?.curVal;
    const err = live?.curErr;
    r.status = typeof status === 'string' ? (status as CurStatus) : undefined;
    r.err = typeof err === 'string' ? err : undefined;
    if (val === undefined) r.raw = undefined;
    else if (val instanceof HNumber) r.raw = val.unit === r.unit ? val.val : OTHER;
    else r.raw = typeof val === 'boolean' || typeof val === 'string' ? val : OTHER;
  }

  private unbind(r: Reading): void {
    this.readings.delete(r.id);
    const s = this.byConn.get(r.connId);
    s?.delete(r);
    if (s?.size === 0) this.byConn.delete(r.connId);
  }

  // -------------------------------------------------------------------------------------------
  // conn*: a connector's link

  /**
   * A connector's link status; null removes both tags. A `down` connector takes every point read
   * through it down with the same error (they return to `ok` with their next value).
   */
  connStatus(connId: string, status: ConnStatus | null, err: string | null): void {
    const live = this.model.liveTags(connId);
    const e = status === null ? null : err;
    if (live?.connStatus !== (status ?? undefined) || live?.connErr !== (e ?? undefined)) {
      this.model.setTransient(connId, { connStatus: status, connErr: e });
    }
    if (status !== 'down') return;
    for (const r of this.byConn.get(connId) ?? []) this.showCur(r, 'down', undefined, err ?? undefined);
  }

  /**
   * Records a finished poll of a connector (the poller, after every read): `connLastPoll` when it
   * ended, and `connLastOk` too when the device answered, so a dead device shows when it last did.
   * In the connector's zone (`tz`), else UTC. Kept while the connector is disabled: when it was
   * last polled is still true.
   */
  setPolled(connId: string, at: number, answered: boolean): void {
    // The stored record (its tz): a read view would be built anew each time (its live tags change).
    const rec = this.model.stored(connId);
    if (rec === undefined) return;
    const t = new HDateTime(at, pointZone(rec, UTC));
    this.model.setTransient(connId, answered ? { connLastPoll: t, connLastOk: t } : { connLastPoll: t });
  }

  // -------------------------------------------------------------------------------------------
  // write*: the priority array and the device

  /**
   * The point writer's effective value and level (writeVal, writeLevel). A point no driver writes
   * (writerOf) holds its value here, so nothing can fail: its writeStatus is `ok` (`disabled` when
   * disabled). A driven point's writeStatus is the write queue's (writeResult).
   */
  writeValue(id: string, val: HVal | null, level: number): void {
    const rec = this.model.stored(id);
    if (rec === undefined) return;
    const tags: WriteTags = { writeVal: val, writeLevel: new HNumber(level) };
    if (!this.writtenByDriver(rec)) {
      tags.writeStatus = rec.has('disabled') ? 'disabled' : 'ok';
      tags.writeErr = null;
    }
    this.model.setTransient(id, tags as Record<string, HVal>);
  }

  /** The point is no longer writable: its write tags go. */
  writeRemove(id: string): void {
    this.model.setTransient(id, { writeVal: null, writeLevel: null, writeStatus: null, writeErr: null });
  }

  /** How writing the effective value to the device went (the write queue): writeStatus and writeErr. */
  writeResult(id: string, status: WriteStatus, err: string | undefined): void {
    const live = this.model.liveTags(id);
    if (live?.writeStatus === status && live.writeErr === err) return;
    this.model.setTransient(id, { writeStatus: status, writeErr: err ?? null });
  }

  /** No driver writes the point any more: the driver's writeStatus and writeErr go. */
  writeReleased(id: string): void {
    this.model.setTransient(id, { writeStatus: null, writeErr: null });
  }

  // -------------------------------------------------------------------------------------------
  // The rest: change of value, learning, the uplink

  /** Sets (or clears, null) why a point's change of value fell back to polling (poller/cov.ts). */
  setCovErr(id: string, err: string | null): void {
    this.model.setTransient(id, { covErr: err });
  }

  /** Sets (or clears, null) how far a learn of a connector got, in percent (poller/commission.ts). */
  setLearnProgress(connId: string, percent: number | null): void {
    this.model.setTransient(connId, { learnProgress: percent === null ? null : new HNumber(percent, '%') });
  }

  /** Sets a point's uplink status. */
  setSync(id: string, tags: SyncTags): void {
    this.model.setTransient(id, tags as Record<string, HVal>);
  }

  // -------------------------------------------------------------------------------------------
  // his*: heard from the history store

  /**
   * A committed history write (`written`, in time order) or delete (null) of a point. A write's
   * newest sample is the point's current value when it is the newest the point has now (a
   * concurrent write that landed an older sample after a newer one must not set curVal back).
   * Runs inside the store's write: synchronous and cheap, except the read-back after a delete.
   * Polled samples of a point a driver reads (its curVal is the driver's) show in its his tags
   * at the pace of hisTagsMs.
   */
  private heard(id: string, kind: HisKind, written: { readonly ts: readonly number[]; readonly val: readonly HisValue[] } | null, polled: boolean): void {
    // The poll path: one lookup per sample, the slot and its list on the point's reading.
    if (polled && this.hisTagsMs > 0) {
      const r = this.readings.get(id);
      if (r !== undefined) {
        if (r.hisSlot >= 0) {
          if (!r.hisDue) {
            r.hisDue = true;
            (this.hisDue[r.hisSlot] as Reading[]).push(r);
          }
          return;
        }
        r.hisSlot = this.hisNextSlot++ % HIS_SLOTS;
      }
    }
    if (written === null) {
      // Deleted history (a deleted point's too): its next polled sample shows at once again.
      const r = this.readings.get(id);
      if (r !== undefined) r.hisSlot = -1;
      const p = this.refreshFromHistory(id)
        .catch((err: unknown) => void (this.refreshFailed ??= { err }))
        .finally(() => this.refreshing.delete(p));
      this.refreshing.add(p);
      return;
    }
    const n = written.ts.length - 1;
    const ts = written.ts[n];
    if (ts === undefined || ts < (this.history.stats(id).end ?? -Infinity)) this.hisWritten(id, undefined);
    else this.hisWritten(id, { kind, val: written.val[n] as HisValue });
  }

  /** Shows the his tags of the points of a slot with polled samples not shown yet. */
  private showDue(slot: number): void {
    const due = this.hisDue[slot] as Reading[];
    this.hisDue[slot] = [];
    for (const r of due) {
      r.hisDue = false;
      // An unbound or rebound point's reading is not its own any more (a new one shows its next sample at once).
      if (this.readings.get(r.id) === r) this.hisWritten(r.id, undefined);
    }
  }

  /**
   * Shows a point's his tags from the store's stats, and for a cur point no driver feeds
   * `newest` (its newest sample) as curVal.
   */
  private hisWritten(id: string, newest: { kind: HisKind; val: HisValue } | undefined): void {
    const rec = this.model.stored(id);
    if (rec === undefined) return;
    const s = this.history.stats(id);
    const tz = pointZone(rec, REL);
    const some = s.size > 0;
    // Only what changed (hisStart seldom does): the poll path refreshes every point's tags.
    const live = this.model.liveTags(id);
    const tags: Record<string, HVal> = {};
    if (!sameNumber(live?.hisSize, some ? s.size : undefined)) tags.hisSize = some ? new HNumber(s.size) : null;
    const start = some ? s.start : undefined;
    if (!sameTime(live?.hisStart, start, tz)) tags.hisStart = start !== undefined ? new HDateTime(start, tz) : null;
    const end = some ? s.end : undefined;
    if (!sameTime(live?.hisEnd, end, tz)) tags.hisEnd = end !== undefined ? new HDateTime(end, tz) : null;
    if (newest !== undefined && this.takesCurFromHistory(rec)) {
      tags.curVal = pointValue(newest.kind, pointUnit(rec), newest.val);
      tags.curStatus = 'ok';
      tags.curErr = null;
    }
    this.model.setTransient(id, tags);
  }

  /** A cur point without a driver: its newest history sample is its current value. */
  private takesCurFromHistory(rec: HDict): boolean {
    return rec.has('cur') && !this.fedByDriver(rec);
  }

  /**
   * Re-reads what a point shows from its history: the his tags, and for a cur point no driver
   * feeds its newest sample as curVal (or no curVal when it has none). At start, and after a
   * delete (which may remove the newest sample).
   */
  private async refreshFromHistory(id: string): Promise<void> {
    const rec = this.model.stored(id);
    if (rec === undefined) return;
    if (!this.takesCurFromHistory(rec)) {
      this.hisWritten(id, undefined);
      return;
    }
    const last = await this.history.last(id);
    // A write that landed while reading showed a newer sample already.
    if (last !== undefined && last.ts < (this.history.stats(id).end ?? -Infinity)) return;
    if (last === undefined) {
      this.hisWritten(id, undefined);
      this.model.setTransient(id, { curVal: null, curStatus: 'unknown', curErr: null });
      return;
    }
    this.hisWritten(id, { kind: this.history.stats(id).kind ?? pointKind(rec) ?? 'Number', val: last.val });
  }

  /** Points by curStatus, read at scrape time. */
  metrics(metrics: Metrics): void {
    metrics.gauge('hayloft_points', 'Points by curStatus (none: no current value)', ['curStatus'], () => {
      const by = new Map<string, number>();
      // From the tag index and the live tags: no read view of each point is built (at 10,000
      // points polled, every view is out of date at each scrape).
      for (const id of this.model.idsWithTag('point')) {
        const s = this.model.liveTags(id)?.curStatus;
        const k = typeof s === 'string' ? s : 'none';
        by.set(k, (by.get(k) ?? 0) + 1);
      }
      return [...by].map(([curStatus, value]) => ({ labels: { curStatus }, value }));
    });
  }
}

/** Whether a live tag shows the unitless number `n` (undefined: absent). */
function sameNumber(v: HVal | undefined, n: number | undefined): boolean {
  return n === undefined ? v === undefined : v instanceof HNumber && v.val === n && v.unit === null;
}

/** Whether a live tag shows the instant `ms` in `tz` (undefined: absent). */
function sameTime(v: HVal | undefined, ms: number | undefined, tz: TimeZone): boolean {
  return ms === undefined ? v === undefined : v instanceof HDateTime && v.epochMs === Math.trunc(ms) && v.tz === tz;
}
