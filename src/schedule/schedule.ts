/**
 * Schedules and calendars as records (docs/schedules.md), and the one piece of arithmetic they
 * need: the value a schedule gives at an instant and its next transitions, in its zone.
 *
 * A day starts at the schedule's `defaultVal` (BACnet's Schedule_Default) and each of the day's
 * events sets the value from its time on. The day's events are those of the first exception that
 * covers the date (a date, a range, or a shared `calendar` record's dates), else the weekly events
 * of its weekday. Local times become instants with the zone code Hayloft already has
 * (haystack/tz.ts `localToEpoch`, from the zone's own rules): an event in the hour skipped when
 * daylight saving starts (02:30) happens once, at the instant 02:30 names in the offset before the
 * gap (03:30 daylight time); one in the hour repeated when it ends happens once, the first time.
 * A library such as croner would compute the same from the host's Intl data; the zone rules here
 * are the ones the rest of Hayloft reads (history, his ranges), so both agree on every instant.
 */
import { type TimeZone, findTimeZone } from '../haystack/tz.js';
import { HDate, type HDict, HNumber, HRef, HTime, type HVal, equals } from '../haystack/values.js';
import { ErrorCodes, HayloftError } from '../lib/errors.js';

const DAY = 86_400_000;
const DAYS = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'] as const;
export const SCHEDULE_KINDS = ['Number', 'Bool', 'Str'] as const;
export type ScheduleKind = (typeof SCHEDULE_KINDS)[number];
export const DEFAULT_SCHEDULE_LEVEL = 16;
/** How far ahead next transitions are looked for. */
const HORIZON_DAYS = 400;

export interface DayEvent {
  /** Milliseconds since local midnight. */
  at: number;
  val: HVal;
}

/** A span of dates (epoch days, both inclusive). */
export interface DateSpan {
  from: number;
  to: number;
}

export interface Exception {
  /** The dates it covers: its own, or (calendarRef) a calendar's, looked up when evaluated. */
  spans: readonly DateSpan[];
  calendarId: string | null;
  events: readonly DayEvent[];
}

export interface Schedule {
  id: string;
  kind: ScheduleKind;
  defaultVal: HVal;
  /** Per weekday (0 Monday .. 6 Sunday), its events in time order. */
  week: readonly (readonly DayEvent[])[];
  exceptions: readonly Exception[];
  pointIds: readonly string[];
  level: number;
  disabled: boolean;
  /** The zone named on the schedule (`tz`), if any; else its site's, else the server's. */
  tzName: string | null;
}

/** A calendar's dates, by id: what exceptions with a calendarRef read. */
export type Calendars = (id: string) => readonly DateSpan[] | undefined;

export interface Transition {
  ts: number;
  val: HVal;
}

function bad(rec: HDict, what: string, message: string): HayloftError {
  const id = rec.get('id');
  return new HayloftError(ErrorCodes.INVALID_RECORD, `${what} ${id instanceof HRef ? `@${id.id}` : ''}: ${message}`);
}

function dicts(v: HVal | undefined): HDict[] | undefined {
  if (!Array.isArray(v)) return undefined;
  const list = v as readonly HVal[];
  if (!list.every((x) => x !== null && typeof x === 'object' && 'get' in x && typeof (x).names === 'function')) return undefined;
  return list as HDict[];
}

/** `mon-fri`, `sat,sun`, `mon`: the weekdays (0 Monday). */
function parseDays(text: string): number[] | string {
  const out = new Set<number>();
  for (const part of text.split(',').map((s) => s.trim().toLowerCase())) {
    const [a, b] = part.split('-').map((s) => s.trim());
    const i = DAYS.indexOf(a as (typeof DAYS)[number]);
    const j = b === undefined ? i : DAYS.indexOf(b as (typeof DAYS)[number]);
    if (i < 0 || j < 0) return `"${part}" is not a day or range of days (mon, tue, wed, thu, fri, sat, sun; mon-fri)`;
    for (let k = i; ; k = (k + 1) % 7) {
      out.add(k);
      if (k === j) break;
    }
  }
  return [...out];
}

function checkVal(kind: ScheduleKind, v: HVal | undefined): boolean {
  if (kind === 'Number') return v instanceof HNumber && Number.isFinite(v.val);
  if (kind === 'Bool') return typeof v === 'boolean';
  return typeof v === 'string';
}

function parseEvents(rec: HDict, v: HVal | undefined, kind: ScheduleKind, where: string): DayEvent[] {
  const list = dicts(v ?? []);
  if (list === undefined) throw bad(rec, 'schedule', `${where} must be a List of Dicts with time (Time) and val`);
  return list
    .map((e, i) => {
      const time = e.get('time');
      const val = e.get('val');
      if (!(time instanceof HTime)) throw bad(rec, 'schedule', `${where}[${i}]: time must be a Time (07:00:00)`);
      if (!checkVal(kind, val)) throw bad(rec, 'schedule', `${where}[${i}]: val must be a ${kind}, the schedule's kind`);
      return { at: time.toMillis(), val: val as HVal };
    })
    .sort((a, b) => a.at - b.at);
}

/** The dates of a `calendar` record, or of an exception: `date`, or `start` and `end` (inclusive). */
function parseSpan(rec: HDict, d: HDict, what: string, where: string): DateSpan {
  const date = d.get('date');
  const start = d.get('start');
  const end = d.get('end');
  if (date instanceof HDate && start === undefined && end === undefined) return { from: date.toEpochDay(), to: date.toEpochDay() };
  if (date === undefined && start instanceof HDate && end instanceof HDate) {
    if (end.toEpochDay() < start.toEpochDay()) throw bad(rec, what, `${where}: end ${end.toString()} is before start ${start.toString()}`);
    return { from: start.toEpochDay(), to: end.toEpochDay() };
  }
  throw bad(rec, what, `${where}: give date (a Date), or start and end (Dates)`);
}

/** A calendar record's dates, or throws HL_INVALID_RECORD. */
export function parseCalendar(rec: HDict): DateSpan[] {
  const list = dicts(rec.get('dates'));
  if (list === undefined) throw bad(rec, 'calendar', 'dates must be a List of Dicts, each with date, or start and end');
  return list.map((d, i) => parseSpan(rec, d, 'calendar', `dates[${i}]`));
}

/** The schedule a `schedule` record says, or throws HL_INVALID_RECORD naming what to fix. */
export function parseSchedule(rec: HDict, isCalendar: (id: string) => boolean): Schedule {
  const id = (rec.get('id') as HRef).id;
  const kind = rec.get('kind');
  if (typeof kind !== 'string' || !(SCHEDULE_KINDS as readonly string[]).includes(kind)) throw bad(rec, 'schedule', `kind must be one of ${SCHEDULE_KINDS.join(', ')}`);
  const k = kind as ScheduleKind;
  const defaultVal = rec.get('defaultVal');
  if (!checkVal(k, defaultVal)) throw bad(rec, 'schedule', `defaultVal must be a ${k}: the value each day starts with`);
  const week: DayEvent[][] = DAYS.map(() => []);
  const weekly = dicts(rec.get('weekly') ?? []);
  if (weekly === undefined) throw bad(rec, 'schedule', 'weekly must be a List of Dicts with days (Str: mon-fri), time (Time) and val');
  weekly.forEach((e, i) => {
    const days = e.get('days');
    const parsed = typeof days === 'string' ? parseDays(days) : 'days must be a Str (mon-fri, sat,sun)';
    if (typeof parsed === 'string') throw bad(rec, 'schedule', `weekly[${i}]: ${parsed}`);
    const [ev] = parseEvents(rec, [e], k, `weekly[${i}]`) as [DayEvent];
    for (const d of parsed) (week[d] as DayEvent[]).push(ev);
  });
  for (const d of week) d.sort((a, b) => a.at - b.at);
  const exList = dicts(rec.get('exceptions') ?? []);
  if (exList === undefined) throw bad(rec, 'schedule', 'exceptions must be a List of Dicts: date, start and end, or calendarRef; and events');
  const exceptions = exList.map((e, i): Exception => {
    const where = `exceptions[${i}]`;
    const cal = e.get('calendarRef');
    const events = parseEvents(rec, e.get('events'), k, `${where}.events`);
    if (cal !== undefined) {
      if (!(cal instanceof HRef) || !isCalendar(cal.id)) throw bad(rec, 'schedule', `${where}: calendarRef must name a calendar record`);
      return { spans: [], calendarId: cal.id, events };
    }
    return { spans: [parseSpan(rec, e, 'schedule', where)], calendarId: null, events };
  });
  const refs = rec.get('pointRefs') ?? [];
  if (!Array.isArray(refs) || !(refs as readonly HVal[]).every((r) => r instanceof HRef)) throw bad(rec, 'schedule', 'pointRefs must be a List of Refs: the writable points it commands');
  let level = DEFAULT_SCHEDULE_LEVEL;
  const lv = rec.get('priority');
  if (lv !== undefined) {
    if (!(lv instanceof HNumber) || !Number.isInteger(lv.val) || lv.val < 1 || lv.val > 17 || lv.val === 8) {
      throw bad(rec, 'schedule', 'priority must be a whole Number from 1 to 17 other than 8 (a manual override\'s level); 16 by default');
    }
    level = lv.val;
  }
  const tz = rec.get('tz');
  if (tz !== undefined && (typeof tz !== 'string' || findTimeZone(tz) === undefined)) throw bad(rec, 'schedule', `tz ${JSON.stringify(tz)} is not a known zone`);
  return {
    id,
    kind: k,
    defaultVal: defaultVal as HVal,
    week,
    exceptions,
    pointIds: (refs as readonly HRef[]).map((r) => r.id),
    level,
    disabled: rec.has('disabled'),
    tzName: typeof tz === 'string' ? tz : null,
  };
}

/** The events of a local day (epoch day): the first exception covering it, else the week's. */
export function eventsOf(s: Schedule, day: number, calendars: Calendars): readonly DayEvent[] {
  for (const e of s.exceptions) {
    const spans = e.calendarId === null ? e.spans : (calendars(e.calendarId) ?? []);
    if (spans.some((x) => day >= x.from && day <= x.to)) return e.events;
  }
  // Epoch day 0 (1970-01-01) was a Thursday.
  return s.week[(((day + 3) % 7) + 7) % 7] as readonly DayEvent[];
}

/** A local day's transitions as instants: its start (defaultVal), then its events, in order. */
function dayTransitions(s: Schedule, day: number, tz: TimeZone, calendars: Calendars): Transition[] {
  const out: Transition[] = [{ ts: tz.localToEpoch(day * DAY), val: s.defaultVal }];
  for (const e of eventsOf(s, day, calendars)) {
    // A time skipped by daylight saving maps past a later one of the same day: keep the day's order.
    const ts = Math.max(tz.localToEpoch(day * DAY + e.at), (out[out.length - 1] as Transition).ts);
    if ((out[out.length - 1] as Transition).ts === ts) out.pop();
    out.push({ ts, val: e.val });
  }
  return out;
}

/** The local day (epoch day) an instant falls on in a zone. */
function localDay(t: number, tz: TimeZone): number {
  return Math.floor((t + tz.offsetAt(t) * 1000) / DAY);
}

/** The value the schedule gives at instant `t`. */
export function valueAt(s: Schedule, t: number, tz: TimeZone, calendars: Calendars): HVal {
  let v = s.defaultVal;
  for (const x of dayTransitions(s, localDay(t, tz), tz, calendars)) {
    if (x.ts > t) break;
    v = x.val;
  }
  return v;
}

/** The next `count` instants after `t` where the value changes, within about a year. */
export function nextTransitions(s: Schedule, t: number, tz: TimeZone, calendars: Calendars, count: number): Transition[] {
  const out: Transition[] = [];
  let v = valueAt(s, t, tz, calendars);
  const first = localDay(t, tz);
  for (let d = first; d <= first + HORIZON_DAYS && out.length < count; d++) {
    for (const x of dayTransitions(s, d, tz, calendars)) {
      if (x.ts <= t || equals(x.val, v)) continue;
      v = x.val;
      out.push(x);
      if (out.length >= count) break;
    }
  }
  return out;
}
