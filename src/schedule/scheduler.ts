/**
 * src/schedule: schedules and calendars as records (schedule.ts) and this part, which commands
 * points by them (docs/schedules.md).
 *
 * - At start (once the clock can be trusted) each schedule's value due now is written to its
 *   points, and again at each transition, through the point writer at the schedule's level (16 by
 *   default, below an operator's 8, so an override wins and the schedule's value returns when it
 *   is released); the audit names the schedule (`who` and user `schedule:<name>`).
 * - A one-second timer compares the wall clock with each schedule's next transition: a wall-clock
 *   step is seen at the next tick, and nothing fires while the clock cannot be trusted
 *   (lib/clock-trust.ts); once it can, the value due then is written.
 * - `records.batch` refuses a `schedule` or `calendar` record that is not valid; `records.committed`
 *   reads them again: a changed schedule writes its value at once, a point it no longer commands
 *   (or a schedule deleted or disabled) has the schedule's level relinquished.
 */
import { type TimeZone, findTimeZone } from '../haystack/tz.js';
import { HRef, type HVal, equals } from '../haystack/values.js';
import type { Clock } from '../lib/clock.js';
import type { DatingTrust } from '../lib/clock-trust.js';
import type { Logger } from '../lib/log.js';
import type { Metrics } from '../lib/metrics.js';
import { type Part, every } from '../lib/part.js';
import type { Model, ModelChange } from '../model/model.js';
import type { PointWriter } from '../model/point-writer.js';
import { type Calendars, type DateSpan, type Schedule, type Transition, nextTransitions, parseCalendar, parseSchedule, valueAt } from './schedule.js';

const TICK_MS = 1000;

export interface SchedulerOptions {
  model: Model;
  writer: PointWriter;
  clock: Clock;
  log: Logger;
  /** The server's zone: a schedule with no `tz` and no site zone follows it. */
  tz: TimeZone;
  trust?: DatingTrust;
}

/** What the scheduler last wrote for a schedule. */
interface Commanded {
  val: HVal;
  level: number;
  points: readonly string[];
  /** The next transition's instant, when the value due changes next. */
  nextAt: number;
}

export interface ScheduleState {
  id: string;
  val: HVal;
  tz: TimeZone;
  level: number;
  points: readonly string[];
  next: Transition[];
}

export class Scheduler implements Part {
  readonly name = 'schedules';
  private readonly o: SchedulerOptions;
  private schedules = new Map<string, Schedule>();
  private calendars = new Map<string, DateSpan[]>();
  private readonly commanded = new Map<string, Commanded>();
  private timer: { stop(): void } | undefined;
  private chain: Promise<void> = Promise.resolve();
  private writes = 0;
  private failures = 0;
  private readonly cal: Calendars = (id) => this.calendars.get(id);

  constructor(opts: SchedulerOptions) {
    this.o = opts;
  }

  async start(): Promise<void> {
    const ev = this.o.model.events;
    ev.on('records.batch', this, (change) => {
      const cals = new Set(change.puts.filter((r) => r.has('calendar')).map((r) => (r.get('id') as HRef).id));
      for (const r of change.puts) {
        if (r.has('calendar')) parseCalendar(r);
        if (r.has('schedule')) parseSchedule(r, (id) => cals.has(id) || this.o.model.stored(id)?.has('calendar') === true);
      }
    });
    ev.on('records.committed', this, (c) => this.recordsChanged(c));
    this.load();
    await this.tick();
    this.timer = every(TICK_MS, () => void this.tick());
  }

  async stop(): Promise<void> {
    this.timer?.stop();
    this.timer = undefined;
    this.o.model.events.off(this);
    await this.chain;
  }

  /**
   * Writes what is due: each schedule whose value changed since it last wrote (or never wrote,
   * or whose next transition came). Nothing while the clock cannot be trusted. Tests call it
   * after moving the clock; resolves once the writes are stored.
   */
  tick(): Promise<void> {
    if (this.o.trust?.trusted() === false) return this.chain;
    const now = this.o.clock.now();
    for (const s of this.schedules.values()) {
      if (s.disabled) continue;
      const c = this.commanded.get(s.id);
      if (c !== undefined && now < c.nextAt) continue;
      const tz = this.zoneOf(s);
      const val = valueAt(s, now, tz, this.cal);
      const next = nextTransitions(s, now, tz, this.cal, 1)[0];
      const nextAt = next?.ts ?? Infinity;
      if (c !== undefined && equals(c.val, val)) {
        c.nextAt = nextAt;
        continue;
      }
      this.commanded.set(s.id, { val, level: s.level, points: s.pointIds, nextAt });
      for (const p of s.pointIds) this.command(s.id, p, s.level, val);
    }
    return this.chain;
  }

  /** Each schedule's value now and its next transitions (the `schedules` op). */
  state(id: string, count: number): ScheduleState | undefined {
    const s = this.schedules.get(id);
    if (s === undefined) return undefined;
    const tz = this.zoneOf(s);
    const now = this.o.clock.now();
    return { id, val: valueAt(s, now, tz, this.cal), tz, level: s.level, points: s.pointIds, next: nextTransitions(s, now, tz, this.cal, count) };
  }

  ids(): string[] {
    return [...this.schedules.keys()];
  }

  settled(): Promise<void> {
    return this.chain;
  }

  private who(scheduleId: string): string {
    return `schedule:${this.o.model.nameOf(scheduleId).replace(/^@/, '')}`;
  }

  /** Writes one point through the point writer (null: relinquishes the schedule's level), in order. */
  private command(scheduleId: string, pointId: string, level: number, val: HVal | null): void {
    const who = this.who(scheduleId);
    this.chain = this.chain.then(async () => {
      try {
        await this.o.writer.write({ id: pointId, level, val, who, actor: { user: who } });
        this.writes++;
      } catch (err) {
        // Refused (not writable any more, a value the point refuses): audited by the writer.
        this.failures++;
        this.o.log.warn({ err, scheduleId, pointId }, 'a schedule could not write a point');
      }
    });
  }

  /** The schedule's zone: its `tz`, else its site's, else the server's. */
  private zoneOf(s: Schedule): TimeZone {
    if (s.tzName !== null) return findTimeZone(s.tzName) ?? this.o.tz;
    const site = this.o.model.stored(s.id)?.get('siteRef');
    const tz = site instanceof HRef ? this.o.model.stored(site.id)?.get('tz') : undefined;
    return (typeof tz === 'string' ? findTimeZone(tz) : undefined) ?? this.o.tz;
  }

  private load(): void {
    const m = this.o.model;
    const calendars = new Map<string, DateSpan[]>();
    for (const id of m.idsWithTag('calendar')) {
      const rec = m.stored(id);
      if (rec === undefined) continue;
      try {
        calendars.set(id, parseCalendar(rec));
      } catch (err) {
        this.o.log.warn({ err, calendarId: id }, 'a calendar is not valid and is ignored until fixed');
      }
    }
    const schedules = new Map<string, Schedule>();
    for (const id of m.idsWithTag('schedule')) {
      const rec = m.stored(id);
      if (rec === undefined) continue;
      try {
        schedules.set(id, parseSchedule(rec, (c) => calendars.has(c)));
      } catch (err) {
        this.o.log.warn({ err, scheduleId: id }, 'a schedule is not valid and is ignored until fixed');
      }
    }
    this.calendars = calendars;
    this.schedules = schedules;
  }

  private recordsChanged(c: ModelChange): void {
    const touched = [...c.created, ...c.updated, ...c.deleted];
    if (!touched.some((r) => r.has('schedule') || r.has('calendar'))) return;
    this.load();
    // A calendar changed: every schedule may give another value now.
    const all = touched.some((r) => r.has('calendar'));
    const changed = new Set(touched.map((r) => (r.get('id') as HRef).id));
    for (const [id, had] of [...this.commanded]) {
      if (!all && !changed.has(id)) continue;
      const now = this.schedules.get(id);
      // Points it no longer commands at that level (deleted, disabled, removed, another level): relinquished.
      const kept = now === undefined || now.disabled || now.level !== had.level ? [] : now.pointIds;
      for (const p of had.points) if (!kept.includes(p) && this.o.model.stored(p) !== undefined) this.command(id, p, had.level, null);
      // Written again, as it is now, by the tick below.
      this.commanded.delete(id);
    }
    void this.tick();
  }

  metrics(m: Metrics): void {
    m.gauge('hayloft_schedules', 'Schedules in force (valid, not disabled)', [], () => [...this.schedules.values()].filter((s) => !s.disabled).length);
    m.counter('hayloft_schedule_writes_total', 'Point writes made by schedules since start', () => this.writes);
    m.counter('hayloft_schedule_write_failures_total', 'Point writes by schedules the point writer refused', () => this.failures);
  }
}
