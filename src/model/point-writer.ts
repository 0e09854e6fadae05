/**
 * Point writes (Haystack 3/4 pointWrite semantics): the priority array of every `writable` point,
 * levels 1-16 and the default, 17. The effective value is the set level of highest priority
 * (lowest number); points show it as `writeVal` and `writeLevel` (point state).
 *
 * - A level is set with a value and a `who`; null relinquishes it. Level 8 (manual) may be timed
 *   (`duration`): it ends by itself at `expires`, also across a restart (levels past their end
 *   are dropped when loaded, and never shown once ended). `expires` is a wall-clock instant by
 *   nature (stored, shown to clients, kept across restarts), so it is judged on the wall clock,
 *   unlike every interval of the poller (docs/clock.md): after the clock steps, an override ends
 *   when the corrected clock reaches its end (the timer looks again at least hourly).
 * - Every change is stored (write-store.ts, synced) before write() resolves, with its audit
 *   entry in the same batch; refused writes are audited too, and every write is logged.
 * - While the clock cannot be trusted (lib/clock-trust.ts), writes still work and are stored,
 *   but their audit entries are held in memory (at most 1,000) and stored once it is, re-dated by
 *   the monotonic clock, so none is filed under 1970; a timed override is refused
 *   (HL_CLOCK_UNTRUSTED): its end would be a wrong time (docs/clock.md).
 * - Values are checked against the point: its kind; for Numbers the unit (converted to the
 *   point's when another unit of the same quantity is given, refused otherwise) and
 *   `minVal`/`maxVal`; for Strs an `enum` list when there is one.
 *
 * One service for every writer: the pointWrite op, the console (through the op) and the MQTT
 * uplink call write(). A change of the effective value is emitted on the bus as 'write.effective'
 * (model/events.ts): the poller's write queue hears it and sends the value to the device (the
 * model layer cannot call the poller above it; docs/design/paths.md follows a write end to end). Permissions are the caller's: it passes `authorize`, run on the resolved point
 * before anything changes, so a refusal is audited like any other.
 */
import { durationMs } from '../haystack/duration.js';
import { convertUnit } from '../haystack/units.js';
import { type HDict, HNumber, type HRef, type HVal, equals } from '../haystack/values.js';
import type { Clock } from '../lib/clock.js';
import type { DatingTrust } from '../lib/clock-trust.js';
import { ErrorCodes, HayloftError, isHayloftError } from '../lib/errors.js';
import type { Logger } from '../lib/log.js';
import type { AuditEntry, StoredLevel, WriteStore } from '../store/write-store.js';
import type { Model, ModelChange } from './model.js';
import { type PointKind, type PointState, describeKind, pointKind, pointUnit } from './point-state.js';
import type { Part } from '../lib/part.js';
import type { Effective } from './events.js';

export type { Effective, EffectiveListener } from './events.js';

export const LEVEL_COUNT = 17;
/** The default level: the value when no other level is set. */
export const DEFAULT_LEVEL = 17;
/** The manual operator level: the only one that takes a duration. */
export const MANUAL_LEVEL = 8;

const LEVEL_NAMES: Readonly<Record<number, string>> = { 1: 'emergency', 8: 'manual', 17: 'default' };

/** How a level is shown in the array: `1 (emergency)`, `2`, `8 (manual)`, `17 (default)`. */
export function levelDis(level: number): string {
  const n = LEVEL_NAMES[level];
  return n === undefined ? String(level) : `${level} (${n})`;
}

/** One row of a point's array as pointWrite answers it. */
export interface LevelRow {
  level: number;
  levelDis: string;
  val: HVal | null;
  who: string | null;
  /** Epoch ms when a timed level ends. */
  expires: number | null;
}

/** The value a point's array gives: the set level of highest priority; null at 17 when none. */

/** Who asks for a write. */
export interface Actor {
  /** The user the request acts as (after impersonation). */
  user: string;
  /** The real caller's user when impersonating. */
  impersonatedBy?: string | null;
}

export interface PointWriteRequest {
  /** Point id or fully qualified name. */
  id: string;
  level: number;
  /** The value; null or undefined relinquishes the level. */
  val?: HVal | null;
  /** Shown in the array; the actor's user when absent. */
  who?: string | null;
  /** A Number with a time unit (level 8 only): the level ends by itself after it. */
  duration?: HVal | null;
  actor: Actor;
  /** Throws (HL_FORBIDDEN ...) to refuse, given the point's record and the level. */
  authorize?: (rec: HDict, level: number) => void;
}


export interface PointWriterOptions {
  model: Model;
  points: PointState;
  store: WriteStore;
  clock: Clock;
  log: Logger;
  /** Whether the wall clock may date audit entries and timed overrides; absent: always. */
  trust?: DatingTrust;
}

const MAX_HELD_AUDIT = 1000;

function bad(message: string): HayloftError {
  return new HayloftError(ErrorCodes.BAD_REQUEST, message);
}

function badValue(message: string): HayloftError {
  return new HayloftError(ErrorCodes.BAD_VALUE, message);
}

function describe(v: HVal): string {
  if (typeof v === 'string') return `a Str ("${v.slice(0, 40)}")`;
  if (typeof v === 'boolean') return `a Bool (${String(v)})`;
  if (v instanceof HNumber) return `a Number (${v.numText()}${v.unit ?? ''})`;
  return 'that value';
}

/** A limit tag (`minVal`, `maxVal`) in the point's unit, or undefined. */
function limit(rec: HDict, tag: string, unit: string | null): number | undefined {
  const v = rec.get(tag);
  if (!(v instanceof HNumber)) return undefined;
  if (v.unit === null || unit === null || v.unit === unit) return v.val;
  const c = convertUnit(v.val, v.unit, unit);
  return typeof c === 'number' ? c : undefined;
}

export class PointWriter implements Part {
  readonly name = 'writer';
  private readonly model: Model;
  private readonly points: PointState;
  private readonly store: WriteStore;
  private readonly clock: Clock;
  private readonly log: Logger;
  /** Point id -> its set levels, by level. */
  private readonly arrays = new Map<string, Map<number, StoredLevel>>();
  private readonly published = new Map<string, Effective>();
  private lock: Promise<unknown> = Promise.resolve();
  private timer: ReturnType<typeof setTimeout> | undefined;
  private timerAt = Infinity;
  private running = false;
  private readonly trust: DatingTrust | undefined;
  /** Audit entries of writes made while the clock could not be trusted, with their monotonic time. */
  private heldAudit: { entry: AuditEntry; mono: number }[] = [];
  private heldTimer: ReturnType<typeof setInterval> | undefined;

  constructor(opts: PointWriterOptions) {
    this.model = opts.model;
    this.points = opts.points;
    this.store = opts.store;
    this.clock = opts.clock;
    this.log = opts.log;
    this.trust = opts.trust;
  }

  /** Loads every array (ended levels dropped), shows the write tags of writable points. */
  async start(): Promise<void> {
    if (this.running) return;
    this.running = true;
    const now = this.clock.now();
    const ended: string[] = [];
    for (const [id, levels] of await this.store.load()) {
      const m = new Map<number, StoredLevel>();
      for (const l of levels) {
        if (l.expires !== null && l.expires <= now) ended.push(id);
        else m.set(l.level, l);
      }
      if (m.size > 0) this.arrays.set(id, m);
    }
    if (ended.length > 0) {
      await this.store.save([...new Set(ended)].map((id) => ({ pointId: id, levels: this.levelsOf(id) })), []);
      this.log.info({ points: [...new Set(ended)] }, 'timed point overrides ended while stopped');
    }
    this.model.events.on('records.committed', this, (c) => this.changed(c));
    // A deleted point's array goes in the same batch as the point.
    this.model.events.on('records.batch', this, (change, ops) => {
      const ids = change.deleted.map((r) => (r.get('id') as HRef).id).filter((id) => this.arrays.has(id));
      if (ids.length > 0) this.store.dropInBatch(ops, ids);
    });
    for (const id of this.model.idsWithTag('writable')) this.publish(id);
    this.schedule();
  }

  async stop(): Promise<void> {
    this.running = false;
    this.model.events.off(this);
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    this.timerAt = Infinity;
    await this.serialise(() => this.releaseAudit());
    if (this.heldTimer !== undefined) clearInterval(this.heldTimer);
    this.heldTimer = undefined;
    if (this.heldAudit.length > 0) {
      // Never filed under a wrong date; the log has every write (logWrite).
      this.log.warn({ entries: this.heldAudit.length }, 'stopping before the clock was set: the audit entries of writes made meanwhile are not stored (each write is in the log)');
      this.heldAudit = [];
    }
  }

  /** Audit entries held while the clock cannot be trusted. */
  get heldAuditCount(): number {
    return this.heldAudit.length;
  }

  /** Stores the held audit entries once the clock is trusted, dated now less the monotonic time since each write. */
  private async releaseAudit(): Promise<void> {
    if (this.heldAudit.length === 0 || this.trust?.trusted() === false) return;
    const now = this.clock.now();
    const mono = this.clock.monotonic();
    const held = this.heldAudit;
    this.heldAudit = [];
    try {
      await this.store.save(
        [],
        held.map((h) => ({ ...h.entry, ts: Math.round(now - (mono - h.mono)) })),
      );
      this.log.info({ entries: held.length }, 'the clock is trusted: held audit entries stored, re-dated by the monotonic clock');
    } catch (err) {
      this.log.error({ err, entries: held.length }, 'cannot store the held audit entries');
    }
    if (this.heldTimer !== undefined) clearInterval(this.heldTimer);
    this.heldTimer = undefined;
  }

  /** Keeps an audit entry of a write made while the clock cannot be trusted; looks every 5 s whether it can. */
  private holdAudit(entry: AuditEntry): void {
    if (this.heldAudit.length === 0) this.log.warn('the clock cannot be trusted: audit entries of point writes are held until it is set (docs/clock.md)');
    this.heldAudit.push({ entry, mono: this.clock.monotonic() });
    if (this.heldAudit.length > MAX_HELD_AUDIT) this.heldAudit.shift();
    if (this.heldTimer === undefined && this.running) {
      this.heldTimer = setInterval(() => void this.serialise(() => this.releaseAudit()), 5000);
      this.heldTimer.unref();
    }
  }

  /** Stores levels with their audit entries, or holds the entries while the clock cannot be trusted. */
  private async saveAudited(changes: { pointId: string; levels: StoredLevel[] }[], entry: AuditEntry, dated: boolean): Promise<void> {
    if (dated) {
      await this.store.save(changes, [entry]);
      return;
    }
    if (changes.length > 0) await this.store.save(changes, []);
    this.holdAudit(entry);
  }

  /** Whether a record is a writable point. */
  isWritable(rec: HDict): boolean {
    return rec.has('point') && rec.has('writable');
  }

  /** The 17 levels of a writable point (id or name). Throws HL_NOT_FOUND / HL_NOT_WRITABLE. */
  array(idOrName: string): LevelRow[] {
    const { id } = this.writablePoint(idOrName);
    const set = this.arrays.get(id);
    const now = this.clock.now();
    const rows: LevelRow[] = [];
    for (let level = 1; level <= LEVEL_COUNT; level++) {
      const l = set?.get(level);
      const live = l !== undefined && (l.expires === null || l.expires > now);
      rows.push({ level, levelDis: levelDis(level), val: live ? l.val : null, who: live ? l.who : null, expires: live ? l.expires : null });
    }
    return rows;
  }

  /** A point's effective value as of now (ended levels ignored). */
  effective(id: string): Effective {
    const set = this.arrays.get(id);
    const now = this.clock.now();
    if (set !== undefined) {
      for (let level = 1; level <= LEVEL_COUNT; level++) {
        const l = set.get(level);
        if (l !== undefined && (l.expires === null || l.expires > now)) return { val: l.val, level };
      }
    }
    return { val: null, level: DEFAULT_LEVEL };
  }

  /** Writable points with at least one set level. */
  writtenPoints(): string[] {
    return [...this.arrays.keys()];
  }

  /**
   * Sets or relinquishes one level. Resolves once the change is stored; throws (and audits) a
   * refusal: unknown or non-writable point, bad level, duration or value, or `authorize`'s.
   */
  write(req: PointWriteRequest): Promise<Effective> {
    return this.serialise(async () => {
      await this.expireNow();
      await this.releaseAudit();
      const dated = this.trust?.trusted() !== false;
      const now = this.clock.now();
      const asked = req.val ?? null;
      const who = typeof req.who === 'string' && req.who !== '' ? req.who : req.actor.user;
      let durationMsAsked: number | null = null;
      let pointId = req.id;
      const audit = (result: string, err: string | null, val: HVal | null): AuditEntry => ({
        ts: now,
        pointId,
        user: req.actor.user,
        impersonatedBy: req.actor.impersonatedBy ?? null,
        who,
        level: Number.isInteger(req.level) ? req.level : null,
        val,
        durationMs: durationMsAsked,
        result,
        err,
      });
      let stored: StoredLevel | null;
      let val: HVal | null;
      try {
        const { id, rec } = this.writablePoint(req.id);
        pointId = id;
        if (!Number.isInteger(req.level) || req.level < 1 || req.level > LEVEL_COUNT) throw bad(`level must be a whole Number from 1 to ${LEVEL_COUNT}`);
        if (req.duration !== undefined && req.duration !== null) {
          const ms = durationMs(req.duration);
          if (typeof ms === 'string') throw bad(`duration ${ms}`);
          durationMsAsked = ms;
          if (req.level !== MANUAL_LEVEL) throw bad(`duration is for level ${MANUAL_LEVEL} (manual) only, not level ${req.level}`);
          if (asked === null) throw bad('duration needs a val: relinquishing a level takes no duration');
          if (!dated) throw new HayloftError(ErrorCodes.CLOCK_UNTRUSTED, 'the clock is not set yet (docs/clock.md): a timed override would end at a wrong time; write without a duration, or again once the clock is set');
        }
        req.authorize?.(rec, req.level);
        val = asked === null ? null : this.checkValue(id, rec, asked);
        stored = val === null ? null : { level: req.level, val, who, expires: durationMsAsked === null ? null : now + durationMsAsked };
      } catch (e) {
        const code = isHayloftError(e) ? e.code : ErrorCodes.INTERNAL;
        const msg = e instanceof Error ? e.message : String(e);
        const entry = audit(code, msg, asked);
        this.logWrite(entry);
        try {
          await this.saveAudited([], entry, dated);
        } catch (err) {
          this.log.error({ err }, 'cannot store an audit entry of a refused point write');
        }
        throw e;
      }
      const next = new Map(this.arrays.get(pointId) ?? []);
      if (stored === null) next.delete(req.level);
      else next.set(req.level, stored);
      const entry = audit('ok', null, val);
      await this.saveAudited([{ pointId, levels: [...next.values()].sort((a, b) => a.level - b.level) }], entry, dated);
      // In memory only once stored: what the array shows is always on disk.
      if (next.size === 0) this.arrays.delete(pointId);
      else this.arrays.set(pointId, next);
      this.logWrite(entry);
      this.publish(pointId);
      this.schedule();
      return this.effective(pointId);
    });
  }

  /** Relinquishes timed levels that ended (stored first); the timer runs it, so may a test. */
  expireDue(): Promise<void> {
    return this.serialise(() => this.expireNow());
  }

  /** The newest audit entries first (of one point when given). */
  readAudit(opts: { pointId?: string; limit: number }): Promise<AuditEntry[]> {
    return this.store.readAudit(opts);
  }

  // -------------------------------------------------------------------------------------------

  private async expireNow(): Promise<void> {
    const now = this.clock.now();
    const ended: string[] = [];
    for (const [id, set] of this.arrays) {
      for (const l of set.values()) if (l.expires !== null && l.expires <= now) ended.push(id);
    }
    if (ended.length === 0) return;
    const ids = [...new Set(ended)];
    const after = new Map<string, Map<number, StoredLevel>>();
    for (const id of ids) {
      const m = new Map<number, StoredLevel>();
      for (const [k, l] of this.arrays.get(id) ?? []) if (l.expires === null || l.expires > now) m.set(k, l);
      after.set(id, m);
    }
    await this.store.save(
      ids.map((id) => ({ pointId: id, levels: [...(after.get(id) as Map<number, StoredLevel>).values()] })),
      [],
    );
    for (const [id, m] of after) {
      if (m.size === 0) this.arrays.delete(id);
      else this.arrays.set(id, m);
      this.log.info({ pointId: id }, 'timed point override ended');
      this.publish(id);
    }
    this.schedule();
  }

  private levelsOf(id: string): StoredLevel[] {
    return [...(this.arrays.get(id)?.values() ?? [])];
  }

  private writablePoint(idOrName: string): { id: string; rec: HDict } {
    const id = this.model.resolveId(idOrName);
    const rec = id === undefined ? undefined : this.model.get(id);
    if (id === undefined || rec === undefined) throw new HayloftError(ErrorCodes.NOT_FOUND, `no record @${idOrName}`);
    if (!this.isWritable(rec)) {
      throw new HayloftError(ErrorCodes.NOT_WRITABLE, `${this.model.nameOf(id)} is not a writable point (it needs the point and writable markers)`);
    }
    return { id, rec };
  }

  /** The value as stored: of the point's kind, Numbers in the point's unit and within limits. */
  private checkValue(id: string, rec: HDict, v: HVal): HVal {
    // Messages name the point as people know it (its fully qualified name), not by its id;
    // looked up only for a message.
    const name = (): string => this.model.nameOf(id);
    const kind: PointKind | undefined = pointKind(rec);
    if (kind === undefined) throw new HayloftError(ErrorCodes.INVALID_RECORD, `${name()} has ${describeKind(rec)}; writable points are of kind Number, Bool or Str`);
    switch (kind) {
      case 'Bool':
        if (typeof v !== 'boolean') throw badValue(`${name()} is a Bool point; val must be true or false, not ${describe(v)}`);
        return v;
      case 'Str': {
        if (typeof v !== 'string') throw badValue(`${name()} is a Str point; val must be a Str, not ${describe(v)}`);
        const e = rec.get('enum');
        if (typeof e === 'string' && e.trim() !== '') {
          const names = e.split(',').map((x) => x.trim());
          if (!names.includes(v)) throw badValue(`"${v.slice(0, 40)}" is not one of the enum of ${name()}: ${names.join(', ')}`);
        }
        return v;
      }
      case 'Number': {
        if (!(v instanceof HNumber)) throw badValue(`${name()} is a Number point; val must be a Number, not ${describe(v)}`);
        if (!Number.isFinite(v.val)) throw badValue(`val must be a finite Number, not ${v.numText()}`);
        const unit = pointUnit(rec);
        let x = v.val;
        if (v.unit !== null && v.unit !== unit) {
          if (unit === null) throw badValue(`${name()} has no unit; write a plain Number, not one in ${v.unit}`);
          const c = convertUnit(v.val, v.unit, unit);
          if (typeof c !== 'number') throw badValue(`cannot write ${v.numText()}${v.unit} to ${name()} in ${unit}: ${c.err}`);
          x = c;
        }
        const min = limit(rec, 'minVal', unit);
        const max = limit(rec, 'maxVal', unit);
        const shown = `${String(x)}${unit ?? ''}`;
        if (min !== undefined && x < min) throw new HayloftError(ErrorCodes.OUT_OF_RANGE, `${shown} is below the minVal of ${name()} (${String(min)}${unit ?? ''})`);
        if (max !== undefined && x > max) throw new HayloftError(ErrorCodes.OUT_OF_RANGE, `${shown} is above the maxVal of ${name()} (${String(max)}${unit ?? ''})`);
        return new HNumber(x, unit);
      }
    }
  }

  /** Shows a point's write tags and tells listeners when its effective value changed. */
  private publish(id: string): void {
    const rec = this.model.stored(id);
    if (rec === undefined || !this.isWritable(rec)) {
      if (this.published.delete(id) && rec !== undefined) this.points.writeRemove(id);
      return;
    }
    const eff = this.effective(id);
    // Point state decides whose writeStatus it is (writerOf): this value's, or the device's.
    this.points.writeValue(id, eff.val, eff.level);
    const old = this.published.get(id);
    this.published.set(id, eff);
    if (old !== undefined && old.level === eff.level && (old.val === eff.val || (old.val !== null && eff.val !== null && equals(old.val, eff.val)))) return;
    this.model.events.emit('write.effective', id, eff);
  }

  private changed(c: ModelChange): void {
    for (const rec of c.deleted) {
      const id = (rec.get('id') as HRef).id;
      this.arrays.delete(id);
      this.published.delete(id);
    }
    for (const list of [c.created, c.updated]) {
      for (const rec of list) {
        const id = (rec.get('id') as HRef).id;
        if (this.published.has(id) || rec.has('writable')) this.publish(id);
      }
    }
  }

  private logWrite(e: AuditEntry): void {
    const fields = { pointId: e.pointId, level: e.level, val: e.val === null ? null : describe(e.val), who: e.who, user: e.user, impersonatedBy: e.impersonatedBy, durationMs: e.durationMs, result: e.result };
    if (e.result === 'ok') this.log.info(fields, 'point write');
    else this.log.warn({ ...fields, err: e.err }, 'point write refused');
  }

  private schedule(): void {
    if (!this.running) return;
    let at = Infinity;
    for (const set of this.arrays.values()) for (const l of set.values()) if (l.expires !== null && l.expires < at) at = l.expires;
    if (at === this.timerAt) return;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    this.timerAt = at;
    if (at === Infinity) return;
    // Long overrides: wake at most every hour and look again (setTimeout caps near 24.8 days).
    const delay = Math.min(3_600_000, Math.max(0, at - this.clock.now()));
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.timerAt = Infinity;
      this.expireDue()
        .catch((err: unknown) => this.log.error({ err }, 'cannot end a timed point override'))
        .finally(() => this.schedule());
    }, delay);
    this.timer.unref();
  }

  private serialise<T>(f: () => Promise<T>): Promise<T> {
    const run = this.lock.then(f, f);
    this.lock = run.catch(() => undefined);
    return run;
  }
}
