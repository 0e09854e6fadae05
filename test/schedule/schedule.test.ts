/**
 * Schedule arithmetic (src/schedule/schedule.ts) in real zones across daylight saving: Sydney and
 * New_York; an event in the skipped hour happens once, at the right instant; one in the repeated
 * hour once; exceptions (a date, a range, a calendar) override the week; records refused.
 */
import t from 'tap';
import { type DateSpan, nextTransitions, parseCalendar, parseSchedule, valueAt } from '../../src/schedule/schedule.js';
import { timeZone } from '../../src/haystack/tz.js';
import { HDate, HDict, HNumber, HRef, HTime, type HVal, MARKER } from '../../src/haystack/values.js';
import { ErrorCodes, HayloftError } from '../../src/lib/errors.js';

const sched = (tags: Record<string, HVal>, cals: readonly string[] = []) =>
  parseSchedule(HDict.of({ id: HRef.of('s'), schedule: MARKER, kind: 'Bool', defaultVal: false, ...tags }), (id) => cals.includes(id));
const ev = (days: string, h: number, m: number, val: HVal): HDict => HDict.of({ days, time: HTime.of(h, m), val });
const none = (): undefined => undefined;
const iso = (ms: number): string => new Date(ms).toISOString();

t.test('New_York: a 02:30 event on the spring-forward day fires once, at 03:30 EDT; on the fall-back day once', async (t) => {
  const ny = timeZone('New_York');
  const s = sched({ weekly: [ev('mon-sun', 2, 30, true), ev('mon-sun', 5, 0, false)] });
  // 2024-03-10: clocks go from 02:00 EST to 03:00 EDT.
  const from = Date.UTC(2024, 2, 10, 5, 0); // 00:00 EST
  const next = nextTransitions(s, from, ny, none, 4);
  t.same(next.map((x) => [iso(x.ts), x.val]), [
    ['2024-03-10T07:30:00.000Z', true], // 02:30 read before the gap = 03:30 EDT
    ['2024-03-10T09:00:00.000Z', false], // 05:00 EDT
    ['2024-03-11T06:30:00.000Z', true], // 02:30 EDT
    ['2024-03-11T09:00:00.000Z', false],
  ]);
  t.equal(valueAt(s, Date.UTC(2024, 2, 10, 7, 29), ny, none), false, 'a minute before');
  t.equal(valueAt(s, Date.UTC(2024, 2, 10, 7, 30), ny, none), true, 'at the instant');
  // 2024-11-03: 01:00-02:00 happens twice (EDT then EST); an event at 01:30 fires the first time only.
  const fall = sched({ weekly: [ev('sun', 1, 30, true), ev('sun', 3, 0, false)] });
  const f = nextTransitions(fall, Date.UTC(2024, 10, 3, 4, 0), ny, none, 2);
  t.same(f.map((x) => iso(x.ts)), ['2024-11-03T05:30:00.000Z', '2024-11-03T08:00:00.000Z'], '01:30 EDT once; 03:00 EST');
  t.equal(valueAt(fall, Date.UTC(2024, 10, 3, 6, 45), ny, none), true, 'still on in the repeated hour');
});

t.test('Sydney: 07:00 on weekdays across both changes', async (t) => {
  const syd = timeZone('Sydney');
  const s = sched({ weekly: [ev('mon-fri', 7, 0, true), ev('mon-fri', 18, 0, false)] });
  // DST starts Sunday 2024-10-06 02:00 AEST (+10) -> 03:00 AEDT (+11).
  const a = nextTransitions(s, Date.UTC(2024, 9, 4, 0, 0), syd, none, 4); // Fri 10:00 AEST
  t.same(a.map((x) => iso(x.ts)), ['2024-10-04T08:00:00.000Z', '2024-10-06T20:00:00.000Z', '2024-10-07T07:00:00.000Z', '2024-10-07T20:00:00.000Z'], 'Friday 18:00 AEST, Monday 07:00 AEDT');
  // DST ends Sunday 2024-04-07 03:00 AEDT -> 02:00 AEST.
  const b = nextTransitions(s, Date.UTC(2024, 3, 5, 8, 0), syd, none, 2); // Fri 19:00 AEDT
  t.same(b.map((x) => iso(x.ts)), ['2024-04-07T21:00:00.000Z', '2024-04-08T08:00:00.000Z'], 'Monday 07:00 and 18:00 AEST');
  t.equal(valueAt(s, Date.UTC(2024, 9, 6, 20, 0), syd, none), true, 'Monday 07:00 AEDT: on');
  t.equal(valueAt(s, Date.UTC(2024, 9, 6, 19, 59), syd, none), false);
});

t.test('exceptions: a date, a range, a shared calendar; the first that covers a day wins', async (t) => {
  const utc = timeZone('UTC');
  const cal: DateSpan[] = parseCalendar(HDict.of({ id: HRef.of('h'), calendar: MARKER, dates: [HDict.of({ date: HDate.of(2024, 1, 26) })] }));
  const s = parseSchedule(
    HDict.of({
      id: HRef.of('s'),
      schedule: MARKER,
      kind: 'Number',
      defaultVal: HNumber.of(18),
      weekly: [HDict.of({ days: 'mon-fri', time: HTime.of(7, 0), val: HNumber.of(21) })],
      exceptions: [
        HDict.of({ date: HDate.of(2024, 1, 22), events: [HDict.of({ time: HTime.of(9, 0), val: HNumber.of(23) })] }),
        HDict.of({ start: HDate.of(2024, 1, 23), end: HDate.of(2024, 1, 24) }),
        HDict.of({ calendarRef: HRef.of('h') }),
      ],
    }),
    (id) => id === 'h',
  );
  const cals = (id: string): DateSpan[] | undefined => (id === 'h' ? cal : undefined);
  const at = (d: number, h: number): string => String((valueAt(s, Date.UTC(2024, 0, d, h), utc, cals) as HNumber).val);
  t.same([at(22, 8), at(22, 10), at(23, 10), at(24, 10), at(25, 10), at(26, 10), at(29, 10)], ['18', '23', '18', '18', '21', '18', '21'], 'date, range, calendar (a holiday), the week around them');
  t.equal(at(27, 10), '18', 'a Saturday: no weekly events');
});

t.test('records that are not valid schedules are refused', async (t) => {
  const cases: [Record<string, HVal>, RegExp][] = [
    [{ kind: 'Ref' }, /kind must be/],
    [{ defaultVal: HNumber.of(1) }, /defaultVal must be a Bool/],
    [{ weekly: [ev('mon-fry', 7, 0, true)] }, /"mon-fry" is not a day/],
    [{ weekly: [HDict.of({ days: 'mon', time: '07:00', val: true })] }, /time must be a Time/],
    [{ weekly: [ev('mon', 7, 0, 'on')] }, /val must be a Bool/],
    [{ exceptions: [HDict.of({ start: HDate.of(2024, 2, 2), end: HDate.of(2024, 2, 1) })] }, /before start/],
    [{ exceptions: [HDict.of({ calendarRef: HRef.of('nope') })] }, /calendarRef must name a calendar/],
    [{ priority: HNumber.of(8) }, /other than 8/],
    [{ tz: 'Mars' }, /not a known zone/],
    [{ pointRefs: ['x'] }, /pointRefs/],
  ];
  for (const [tags, msg] of cases) {
    let err: unknown;
    try {
      sched(tags);
    } catch (e) {
      err = e;
    }
    t.ok(err instanceof HayloftError && err.code === ErrorCodes.INVALID_RECORD && msg.test(err.message), `${String(msg)}: ${String(err)}`);
  }
  t.equal(sched({}).level, 16, 'level 16 by default');
});
