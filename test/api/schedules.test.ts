/**
 * Schedules end to end (issue 30, docs/schedules.md): schedule and calendar records over HTTP,
 * the point writer at level 16 underneath (LevelDB), the value due now written when a schedule is
 * created and at start after a restart in the middle of a day, transitions in the site's zone,
 * an operator's level 8 winning and the schedule's value back when it is released, an exception
 * from a shared holiday calendar overriding the week, a point leaving a schedule relinquished,
 * nothing written while the clock cannot be trusted; the `schedules` op.
 */
import t, { type Test } from 'tap';
import type { HDateTime } from '../../src/haystack/values.js';
import { HDate, HDict, HNumber, HRef, HTime, type HVal, MARKER } from '../../src/haystack/values.js';
import { ManualClock } from '../../src/lib/clock.js';
import { ErrorCodes } from '../../src/lib/errors.js';
import { type Running, startApp } from '../helpers/app.js';
import { expectError, expectOk, getGrid, gridOf, postGrid } from '../helpers/http.js';

type Rows = Readonly<Record<string, HVal>> | readonly Readonly<Record<string, HVal>>[];
// Monday 2024-01-15 12:00 in New York (EST, UTC-5).
const T0 = Date.UTC(2024, 0, 15, 17, 0);

function client(r: Running) {
  const headers = { authorization: `Bearer ${r.token}` };
  return {
    post: (op: string, rows: Rows, meta: Readonly<Record<string, HVal>> = {}) => postGrid(r.base, op, gridOf(rows, meta), { headers }),
    get: (op: string, params: Readonly<Record<string, HVal>> = {}) => getGrid(r.base, op, params, { headers }),
  };
}

const occEvents = [HDict.of({ days: 'mon-fri', time: HTime.of(7, 0), val: true }), HDict.of({ days: 'mon-fri', time: HTime.of(18, 0), val: false })];

async function seed(t: Test, r: Running): Promise<void> {
  expectOk(
    t,
    await client(r).post('createRec', [
      { id: HRef.of('s1'), site: MARKER, name: 'hq', tz: 'New_York' },
      { id: HRef.of('occ'), point: MARKER, writable: MARKER, kind: 'Bool', name: 'occ', siteRef: HRef.of('s1') },
      { id: HRef.of('occ2'), point: MARKER, writable: MARKER, kind: 'Bool', name: 'occ2', siteRef: HRef.of('s1') },
      { id: HRef.of('hol'), calendar: MARKER, name: 'holidays', dates: [HDict.of({ date: HDate.of(2024, 12, 25) })] },
    ]),
    'a site in New York, two writable points, a holiday calendar',
  );
}

/** The set levels of a point's array: level -> value as text, who. */
async function levels(r: Running, id: string): Promise<Record<number, string>> {
  const g = expectOk(t, await client(r).post('pointWrite', { id: HRef.of(id) }), 'array');
  const out: Record<number, string> = {};
  for (const row of g.rows) {
    const v = row.get('val');
    if (v !== undefined) out[(row.get('level') as HNumber).val] = `${String(v)} ${String(row.get('who'))}`;
  }
  return out;
}

t.test('weekly schedule at level 16: due value at once, transitions, level 8 wins and the schedule resumes, restart mid-day, a holiday', async (t) => {
  const clock = new ManualClock(T0);
  const r = await startApp(t, { clock });
  await seed(t, r);
  expectOk(t, await client(r).post('createRec', { id: HRef.of('sch'), schedule: MARKER, name: 'occSched', dis: 'Occupancy', kind: 'Bool', defaultVal: false, weekly: occEvents, pointRefs: [HRef.of('occ'), HRef.of('occ2')], siteRef: HRef.of('s1') }), 'a schedule');
  await r.app.scheduler.settled();
  t.same(await levels(r, 'occ'), { 16: 'true schedule:hq.occSched' }, 'Monday 12:00 in New York: on, written at once at 16, the audit names the schedule');
  t.same(await levels(r, 'occ2'), { 16: 'true schedule:hq.occSched' });

  const s = expectOk(t, await client(r).get('schedules'), 'schedules');
  t.equal(s.rows[0]?.get('val'), true);
  t.equal(s.rows[0]?.get('tz'), 'New_York', 'the site\'s zone');
  t.equal((s.rows[0]?.get('nextTs') as HDateTime).epochMs, Date.UTC(2024, 0, 15, 23, 0), 'next: 18:00 EST');
  t.equal(((s.rows[0]?.get('next') as HDict[])[1]?.get('ts') as HDateTime).epochMs, Date.UTC(2024, 0, 16, 12, 0), 'then Tuesday 07:00');

  // An operator overrides at 8; the schedule's 16 stays below it.
  expectOk(t, await client(r).post('pointWrite', { id: HRef.of('occ'), level: HNumber.of(8), val: false, who: 'tech' }), 'override at 8');
  t.equal(r.app.model.get('occ')?.get('writeVal'), false, 'the override wins');
  expectOk(t, await client(r).post('pointWrite', { id: HRef.of('occ'), level: HNumber.of(8) }), 'released');
  t.equal(r.app.model.get('occ')?.get('writeVal'), true, 'the schedule\'s value is back at once');
  t.same(r.app.model.get('occ')?.get('writeLevel'), HNumber.of(16));

  clock.set(Date.UTC(2024, 0, 15, 22, 59));
  await r.app.scheduler.tick();
  t.equal(r.app.model.get('occ')?.get('writeVal'), true, '17:59: still on');
  clock.set(Date.UTC(2024, 0, 15, 23, 0));
  await r.app.scheduler.tick();
  t.equal(r.app.model.get('occ')?.get('writeVal'), false, '18:00 New York: off');

  // Stopped overnight; started again on Tuesday at 10:00: the value due now is written at start.
  await r.stop();
  clock.set(Date.UTC(2024, 0, 16, 15, 0));
  const r2 = await startApp(t, { clock, dir: r.dir });
  t.same(await levels(r2, 'occ'), { 16: 'true schedule:hq.occSched' }, 'on at start, mid-morning');
  const audit = expectOk(t, await client(r2).post('pointWriteAudit', { id: HRef.of('occ'), limit: HNumber.of(1) }), 'audit');
  t.equal(audit.rows[0]?.get('user'), 'schedule:hq.occSched');

  // A holiday from the shared calendar overrides the week: off all day, at once.
  expectOk(t, await client(r2).post('updateRec', { id: HRef.of('hol'), dates: [HDict.of({ date: HDate.of(2024, 1, 16) })] }), 'today is a holiday');
  expectOk(t, await client(r2).post('updateRec', { id: HRef.of('sch'), exceptions: [HDict.of({ calendarRef: HRef.of('hol') })] }), 'the schedule follows the calendar');
  await r2.app.scheduler.settled();
  t.equal(r2.app.model.get('occ')?.get('writeVal'), false, 'the holiday wins over Tuesday');
  const st = expectOk(t, await client(r2).get('schedules', { id: HRef.of('hq.occSched') }), 'by name');
  t.equal((st.rows[0]?.get('nextTs') as HDateTime).epochMs, Date.UTC(2024, 0, 17, 12, 0), 'next: Wednesday 07:00');

  // A point leaving the schedule has its level 16 relinquished.
  expectOk(t, await client(r2).post('updateRec', { id: HRef.of('sch'), pointRefs: [HRef.of('occ')] }), 'occ2 leaves');
  await r2.app.scheduler.settled();
  t.same(await levels(r2, 'occ2'), {}, 'relinquished');
  expectOk(t, await client(r2).post('deleteRec', { id: HRef.of('sch') }), 'schedule deleted');
  await r2.app.scheduler.settled();
  t.same(await levels(r2, 'occ'), {}, 'its level relinquished');
});

t.test('bad schedules are refused and store nothing; nothing fires while the clock cannot be trusted', async (t) => {
  const clock = new ManualClock(Date.UTC(1970, 0, 2));
  const r = await startApp(t, { clock, clockTrust: { floorMs: Date.UTC(2025, 5, 1), timers: false } });
  await seed(t, r);
  expectError(t, await client(r).post('createRec', { schedule: MARKER, name: 'x', kind: 'Bool', defaultVal: HNumber.of(1) }), 400, ErrorCodes.INVALID_RECORD, /defaultVal/, 'a bad defaultVal');
  expectError(t, await client(r).post('createRec', { calendar: MARKER, name: 'c', dates: [HDict.of({ start: HDate.of(2024, 1, 2) })] }), 400, ErrorCodes.INVALID_RECORD, /start and end/, 'a bad calendar');
  t.equal(r.app.model.idsWithTag('schedule').length + r.app.model.idsWithTag('calendar').length, 1, 'only the seeded calendar');
  expectOk(t, await client(r).post('createRec', { id: HRef.of('sch'), schedule: MARKER, name: 'always', kind: 'Bool', defaultVal: true, pointRefs: [HRef.of('occ')], siteRef: HRef.of('s1') }), 'a schedule');
  await r.app.scheduler.tick();
  t.same(await levels(r, 'occ'), {}, 'nothing written on a clock in 1970');
  clock.stepWall(Date.UTC(2026, 0, 12, 15, 0) - clock.now());
  r.app.clockTrust.check();
  await r.app.scheduler.tick();
  const again = await r.login('admin@example.com', 'admin-password-1');
  r.token = again.body.access_token as string;
  t.same(await levels(r, 'occ'), { 16: 'true schedule:hq.always' }, 'written once the clock is trusted');
  expectError(t, await client(r).get('schedules', { id: HRef.of('occ') }), 400, ErrorCodes.NOT_FOUND, /no schedule/, 'not a schedule');
});
