/**
 * src/alarm: alarm conditions (condition.ts), the durable alarms and their log (alarm-store.ts),
 * and this part, the engine, which hangs off the bus (docs/design/README.md "Parts and events"):
 *
 * - `records.batch`: an `alarmCond` record that does not make a condition aborts its commit
 *   (HL_INVALID_RECORD), so nothing half-valid is stored;
 * - `records.committed`: conditions are read again, the points or connectors their filters select
 *   are found again, and alarms whose condition or source went away are closed (`removed`);
 * - `live.changed`: a source's curVal, curStatus or connStatus changed: it is noted and evaluated
 *   in a microtask (the poll path only adds an id to a Set), never by the poller itself.
 *
 * The life of an alarm (docs/alarms.md): active (its condition held for its `delay`), returned to
 * normal, acknowledged (by whom, when, a note), shelved until a time. It closes once it is both
 * normal and acknowledged. Every transition is stored with its log entry in one synced batch, in
 * order (one chain), so alarms survive a restart; an alarm active before a restart is found
 * active after it and is not raised again. While the clock cannot be trusted (lib/clock-trust.ts)
 * transitions still happen, undated: their log entries are held in memory with their monotonic
 * reading and stored, dated, once it can (docs/clock.md), as the point writer does its audit.
 *
 * The source's alarm shows as its live tag `alarmStatus`, the condition's count of active alarms
 * as `alarmActive` (model/live-tags.ts): watches push them, read and filters see them.
 */
import { type HDict, HNumber, type HVal } from '../haystack/values.js';
import type { Clock } from '../lib/clock.js';
import type { DatingTrust } from '../lib/clock-trust.js';
import { ErrorCodes, HayloftError } from '../lib/errors.js';
import type { Logger } from '../lib/log.js';
import type { Metrics, Sample } from '../lib/metrics.js';
import { type Part, every } from '../lib/part.js';
import type { Model, ModelChange } from '../model/model.js';
import { type Alarm, type AlarmDetail, type AlarmEvent, type AlarmLogEntry, type AlarmStore, alarmKey } from './alarm-store.js';
import { type Condition, WATCHED_TAGS, evaluate, parseCondition } from './condition.js';

/** How often delays, shelving ends and held log entries are looked at. */
const TICK_MS = 1000;

/** The source's `alarmStatus`, worst first. */
export const ALARM_STATUS = ['active', 'unacked', 'acked', 'shelved'] as const;

type Dated = 'activeAt' | 'normalAt' | 'ackAt';

export interface AlarmEngineOptions {
  model: Model;
  store: AlarmStore;
  clock: Clock;
  log: Logger;
  trust?: DatingTrust;
  /** The markers of connector records besides `conn` (the driver registry's connMarkers): what a connDown filter selects. */
  connMarkers?: readonly string[];
}

/** Who acknowledges or shelves. */
export interface AlarmActor {
  user: string;
}

export class AlarmEngine implements Part {
  readonly name = 'alarms';
  private readonly o: AlarmEngineOptions;
  private conds = new Map<string, Condition>();
  /** Condition id -> the sources it applies to now. */
  private sources = new Map<string, Set<string>>();
  /** Source id -> the conditions applying to it. */
  private bySource = new Map<string, Set<string>>();
  private readonly alarms = new Map<string, Alarm>();
  /** Alarms whose condition holds but not yet for its delay: since when (monotonic). */
  private readonly pending = new Map<string, number>();
  /** Fields of alarms left undated while the clock could not be trusted: their monotonic reading. */
  private readonly undated = new Map<string, Partial<Record<Dated, number>>>();
  /** Log entries of transitions made while the clock could not be trusted. */
  private held: { entry: AlarmLogEntry; mono: number }[] = [];
  private readonly dirty = new Set<string>();
  private flushQueued = false;
  private chain: Promise<void> = Promise.resolve();
  private timer: { stop(): void } | undefined;
  private readonly transitions = new Map<AlarmEvent, number>();
  private saveFailures = 0;

  constructor(opts: AlarmEngineOptions) {
    this.o = opts;
  }

  async start(): Promise<void> {
    for (const a of await this.o.store.load()) this.alarms.set(alarmKey(a.condId, a.sourceId), a);
    const ev = this.o.model.events;
    ev.on('records.batch', this, (change) => {
      for (const r of change.puts) if (r.has('alarmCond')) parseCondition(r);
    });
    ev.on('records.committed', this, (c) => this.recordsChanged(c));
    ev.on('live.changed', this, (id, changed) => {
      if (!this.bySource.has(id)) return;
      for (let i = 0; i < changed.length; i++) {
        if (WATCHED_TAGS.includes(changed[i] as string)) {
          this.dirty.add(id);
          if (!this.flushQueued) {
            this.flushQueued = true;
            queueMicrotask(() => this.flush());
          }
          return;
        }
      }
    });
    this.loadConditions();
    // Alarms whose condition or source is gone since the last run close now; the others show.
    this.closeOrphans();
    for (const a of this.alarms.values()) this.showTags(a.sourceId, a.condId);
    this.evaluateAll();
    this.timer = every(TICK_MS, () => void this.tick());
  }

  async stop(): Promise<void> {
    this.timer?.stop();
    this.timer = undefined;
    this.o.model.events.off(this);
    await this.chain;
  }

  /**
   * What a timer does every second, and tests call after moving the clock: raises alarms whose
   * delay passed, ends shelving that is due, stores held log entries once the clock is trusted.
   * Resolves once what it changed is stored.
   */
  async tick(): Promise<void> {
    const now = this.o.clock.now();
    if (this.pending.size > 0) {
      for (const key of [...this.pending.keys()]) {
        const [condId, sourceId] = splitKey(key);
        const c = this.conds.get(condId);
        if (c !== undefined) this.evaluateOne(c, sourceId);
      }
    }
    if (this.trusted()) {
      for (const a of [...this.alarms.values()]) {
        if (a.shelvedUntil !== null && a.shelvedUntil <= now) this.transition(a, 'unshelve', null, null, (x) => ((x.shelvedUntil = null), (x.shelvedBy = null)));
      }
      if (this.held.length > 0) this.dateHeld();
    }
    await this.chain;
  }

  // ---------------------------------------------------------------------------------------------
  // What the ops call

  /** The open alarms (not yet closed), most urgent first: active before normal, then priority, then newest. */
  list(): Alarm[] {
    return [...this.alarms.values()].sort((a, b) => Number(b.active) - Number(a.active) || a.priority - b.priority || (b.activeAt ?? Infinity) - (a.activeAt ?? Infinity));
  }

  get(condId: string, sourceId: string): Alarm | undefined {
    return this.alarms.get(alarmKey(condId, sourceId));
  }

  condition(id: string): Condition | undefined {
    return this.conds.get(id);
  }

  /** Log entries, newest first. */
  async readLog(keep: (e: AlarmLogEntry) => boolean, limit: number): Promise<AlarmLogEntry[]> {
    // What is queued is stored first, so the log shows every transition made so far.
    await this.chain;
    // Held entries (undated) are not in the log yet: they come first, being the newest.
    const held = this.held.map((h) => h.entry).filter(keep).reverse();
    return [...held, ...(await this.o.store.readLog(keep, limit))].slice(0, limit);
  }

  /**
   * Acknowledges alarms (all or nothing: an unknown one refuses the lot). Already acknowledged
   * ones are left as they are. Resolves once stored.
   */
  async ack(keys: readonly { condId: string; sourceId: string }[], actor: AlarmActor, note: string | null): Promise<Alarm[]> {
    const list = keys.map((k) => this.mustGet(k.condId, k.sourceId));
    for (const a of list) {
      if (a.acked) continue;
      this.transition(a, 'ack', actor.user, note, (x) => {
        x.acked = true;
        x.ackBy = actor.user;
        x.ackNote = note;
        this.date(x, 'ackAt');
      });
    }
    await this.chain;
    return list;
  }

  /**
   * Shelves alarms until `until` (epoch ms), or ends their shelving (null). A shelved alarm keeps
   * its life (it still goes active and normal) but is not announced. Needs a trusted clock: its
   * end is a date (HL_CLOCK_UNTRUSTED otherwise).
   */
  async shelve(keys: readonly { condId: string; sourceId: string }[], until: number | null, actor: AlarmActor, note: string | null): Promise<Alarm[]> {
    const list = keys.map((k) => this.mustGet(k.condId, k.sourceId));
    if (until !== null && !this.trusted()) {
      throw new HayloftError(ErrorCodes.CLOCK_UNTRUSTED, 'cannot shelve while the clock cannot be trusted: its end would be a wrong date (docs/clock.md); try again once it is set');
    }
    for (const a of list) {
      if (until === null && a.shelvedUntil === null) continue;
      this.transition(a, until === null ? 'unshelve' : 'shelve', actor.user, note, (x) => {
        x.shelvedUntil = until;
        x.shelvedBy = until === null ? null : actor.user;
      }, until);
    }
    await this.chain;
    return list;
  }

  /** Resolves once every transition so far is stored. */
  async settled(): Promise<void> {
    // A live change is evaluated in a microtask queued as it happened: let that run (and enqueue
    // its writes) before waiting for the chain, or a caller right after setCur waits for nothing.
    await Promise.resolve();
    await this.chain;
  }

  // ---------------------------------------------------------------------------------------------
  // Conditions and their sources

  private loadConditions(): void {
    const conds = new Map<string, Condition>();
    for (const id of this.o.model.idsWithTag('alarmCond')) {
      const rec = this.o.model.stored(id);
      if (rec === undefined) continue;
      try {
        conds.set(id, parseCondition(rec));
      } catch (err) {
        // Stored before a check existed, or by an older version: it raises nothing until fixed.
        this.o.log.warn({ err, condId: id }, 'an alarm condition is not valid and is ignored until fixed');
      }
    }
    this.conds = conds;
    this.resolveSources();
  }

  /** Which sources each condition applies to: its Ref, or what its filter selects (points, or connectors for connDown). */
  private resolveSources(): void {
    const sources = new Map<string, Set<string>>();
    const bySource = new Map<string, Set<string>>();
    const m = this.o.model;
    for (const c of this.conds.values()) {
      if (c.disabled) continue;
      const set = new Set<string>();
      if (c.sourceId !== null) {
        if (m.stored(c.sourceId) !== undefined) set.add(c.sourceId);
      } else if (c.filter !== null) {
        for (const rec of m.query(c.filter)) {
          const id = (rec.get('id') as { id: string }).id;
          if (c.on === 'connDown' ? this.isConnector(rec) : rec.has('point')) set.add(id);
        }
      }
      sources.set(c.id, set);
      for (const s of set) {
        let cs = bySource.get(s);
        if (cs === undefined) bySource.set(s, (cs = new Set()));
        cs.add(c.id);
      }
    }
    this.sources = sources;
    this.bySource = bySource;
  }

  private isConnector(rec: HDict): boolean {
    return rec.has('conn') || (this.o.connMarkers ?? []).some((t) => rec.has(t));
  }

  private recordsChanged(c: ModelChange): void {
    const condsChanged = [...c.created, ...c.updated, ...c.deleted].some((r) => r.has('alarmCond'));
    if (condsChanged) this.loadConditions();
    else if ([...this.conds.values()].some((x) => x.filter !== null) || c.deleted.length > 0) this.resolveSources();
    else return;
    this.closeOrphans();
    this.evaluateAll();
  }

  /** Closes the alarms whose condition is gone or disabled, or which no longer apply to their source. */
  private closeOrphans(): void {
    for (const a of [...this.alarms.values()]) {
      if (this.sources.get(a.condId)?.has(a.sourceId) === true) continue;
      this.pending.delete(alarmKey(a.condId, a.sourceId));
      this.transition(a, 'removed', null, null, () => undefined);
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Evaluation

  private flush(): void {
    this.flushQueued = false;
    const ids = [...this.dirty];
    this.dirty.clear();
    for (const id of ids) {
      for (const condId of this.bySource.get(id) ?? []) {
        const c = this.conds.get(condId);
        if (c !== undefined) this.evaluateOne(c, id);
      }
    }
  }

  private evaluateAll(): void {
    for (const [condId, set] of this.sources) {
      const c = this.conds.get(condId) as Condition;
      for (const s of set) this.evaluateOne(c, s);
    }
  }

  private evaluateOne(c: Condition, sourceId: string): void {
    const key = alarmKey(c.id, sourceId);
    const a = this.alarms.get(key);
    const active = a?.active ?? false;
    const unit = this.o.model.stored(sourceId)?.get('unit');
    const r = evaluate(c, this.o.model.liveTags(sourceId), typeof unit === 'string' ? unit : null, active);
    if (r === undefined) {
      this.pending.delete(key);
      return;
    }
    if (!r.alarm) {
      this.pending.delete(key);
      if (a !== undefined && active) this.toNormal(a, r.val);
      return;
    }
    if (active) return;
    if (c.delayMs > 0) {
      const since = this.pending.get(key);
      const mono = this.o.clock.monotonic();
      if (since === undefined) {
        this.pending.set(key, mono);
        return;
      }
      if (mono - since < c.delayMs) return;
    }
    this.pending.delete(key);
    this.raise(c, sourceId, a, r.detail, r.val);
  }

  private raise(c: Condition, sourceId: string, a: Alarm | undefined, detail: AlarmDetail, val: HVal | null): void {
    const alarm: Alarm = a ?? {
      condId: c.id,
      sourceId,
      active: false,
      detail,
      val,
      activeAt: null,
      normalAt: null,
      acked: false,
      ackAt: null,
      ackBy: null,
      ackNote: null,
      shelvedUntil: null,
      shelvedBy: null,
      priority: c.priority,
    };
    if (a === undefined) this.alarms.set(alarmKey(c.id, sourceId), alarm);
    this.transition(alarm, 'active', null, null, (x) => {
      x.active = true;
      x.detail = detail;
      x.val = val;
      x.priority = c.priority;
      x.normalAt = null;
      this.date(x, 'activeAt');
    });
  }

  private toNormal(a: Alarm, val: HVal | null): void {
    this.transition(a, 'normal', null, null, (x) => {
      x.active = false;
      x.val = val;
      this.date(x, 'normalAt');
    });
  }

  /**
   * Applies a change to an alarm, logs it, shows it, and queues it to be stored (with its closing:
   * normal and acknowledged, or removed).
   */
  private transition(a: Alarm, event: AlarmEvent, user: string | null, note: string | null, apply: (a: Alarm) => void, until: number | null = null): void {
    apply(a);
    const key = alarmKey(a.condId, a.sourceId);
    const closed = event === 'removed' || (!a.active && a.acked);
    if (closed) {
      this.alarms.delete(key);
      this.undated.delete(key);
    }
    this.transitions.set(event, (this.transitions.get(event) ?? 0) + 1);
    const entry: AlarmLogEntry = { ts: 0, condId: a.condId, sourceId: a.sourceId, event, detail: a.detail, val: a.val, user, note, until, priority: a.priority };
    const dated = this.trusted();
    if (dated) entry.ts = this.o.clock.now();
    else this.held.push({ entry, mono: this.o.clock.monotonic() });
    const snapshot = { ...a };
    this.enqueue([{ alarm: snapshot, closed }], dated ? [entry] : []);
    this.o.log.info({ condId: a.condId, sourceId: a.sourceId, event, detail: a.detail, user }, `alarm ${event}`);
    this.showTags(a.sourceId, a.condId);
  }

  /** Dates a field of an alarm now, or leaves it undated (null) with its monotonic reading. */
  private date(a: Alarm, field: Dated): void {
    if (this.trusted()) {
      a[field] = this.o.clock.now();
      return;
    }
    a[field] = null;
    const key = alarmKey(a.condId, a.sourceId);
    const u = this.undated.get(key) ?? {};
    u[field] = this.o.clock.monotonic();
    this.undated.set(key, u);
  }

  /** The clock is trusted: held log entries and undated fields get their dates (now less the monotonic time since). */
  private dateHeld(): void {
    const now = this.o.clock.now();
    const mono = this.o.clock.monotonic();
    const held = this.held;
    this.held = [];
    for (const h of held) h.entry.ts = now - (mono - h.mono);
    const changes: { alarm: Alarm; closed: boolean }[] = [];
    for (const [key, fields] of this.undated) {
      const a = this.alarms.get(key);
      if (a === undefined) continue;
      for (const [f, m] of Object.entries(fields) as [Dated, number][]) a[f] = now - (mono - m);
      changes.push({ alarm: { ...a }, closed: false });
    }
    this.undated.clear();
    this.enqueue(changes, held.map((h) => h.entry));
    this.o.log.info({ entries: held.length }, 'the clock is trusted: held alarm log entries stored, dated by the monotonic clock');
  }

  private enqueue(changes: { alarm: Alarm; closed: boolean }[], log: AlarmLogEntry[]): void {
    this.chain = this.chain.then(() =>
      this.o.store.save(changes, log).catch((err: unknown) => {
        // The alarm still lives in memory; a restart before the store recovers may raise it again.
        this.saveFailures++;
        this.o.log.error({ err }, 'cannot store an alarm transition');
      }),
    );
  }

  private trusted(): boolean {
    return this.o.trust?.trusted() !== false;
  }

  private mustGet(condId: string, sourceId: string): Alarm {
    const a = this.alarms.get(alarmKey(condId, sourceId));
    if (a === undefined) {
      throw new HayloftError(ErrorCodes.NOT_FOUND, `no open alarm of condition ${this.o.model.nameOf(condId)} on ${this.o.model.nameOf(sourceId)} (closed alarms are in alarmHistory)`);
    }
    return a;
  }

  // ---------------------------------------------------------------------------------------------
  // Live tags and metrics

  /** The worst status of a source's open alarms. */
  statusOf(a: Alarm): (typeof ALARM_STATUS)[number] {
    if (a.shelvedUntil !== null) return 'shelved';
    if (a.active) return a.acked ? 'acked' : 'active';
    return 'unacked';
  }

  private showTags(sourceId: string, condId: string): void {
    let worst: number | undefined;
    for (const cid of this.bySource.get(sourceId) ?? []) {
      const a = this.alarms.get(alarmKey(cid, sourceId));
      if (a === undefined) continue;
      const i = ALARM_STATUS.indexOf(this.statusOf(a));
      if (worst === undefined || i < worst) worst = i;
    }
    const m = this.o.model;
    m.setTransient(sourceId, { alarmStatus: worst === undefined ? null : (ALARM_STATUS[worst] as string) });
    let n = 0;
    for (const s of this.sources.get(condId) ?? []) if (this.alarms.get(alarmKey(condId, s))?.active === true) n++;
    m.setTransient(condId, { alarmActive: n === 0 ? null : new HNumber(n) });
  }

  metrics(m: Metrics): void {
    m.gauge('hayloft_alarms', 'Open alarms by status: active (not acknowledged), acked (active, acknowledged), unacked (back to normal, not acknowledged), shelved', ['status'], () => {
      const counts = new Map<string, number>(ALARM_STATUS.map((s) => [s, 0]));
      for (const a of this.alarms.values()) counts.set(this.statusOf(a), (counts.get(this.statusOf(a)) ?? 0) + 1);
      return [...counts].map(([status, value]): Sample => ({ labels: { status }, value }));
    });
    m.counter('hayloft_alarm_transitions_total', 'Alarm transitions since start, by event', () => 0, ['event'], () =>
      [...this.transitions].map(([event, value]): Sample => ({ labels: { event }, value })),
    );
    m.gauge('hayloft_alarm_conditions', 'Alarm conditions in force (valid and not disabled)', [], () => this.sources.size);
    m.gauge('hayloft_alarm_log_entries', 'Entries in the alarm log (bounded)', [], () => this.o.store.logSize);
    m.counter('hayloft_alarm_store_failures_total', 'Alarm transitions that could not be stored', () => this.saveFailures);
  }
}

function splitKey(key: string): [string, string] {
  const i = key.indexOf('|');
  return [key.slice(0, i), key.slice(i + 1)];
}

