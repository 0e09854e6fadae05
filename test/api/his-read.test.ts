/**
 * Issue 5, end to end: hisRead through real HTTP against the real App on LevelDB, with a manual
 * clock for `today`/`yesterday` (the host runs in UTC; the points are in New York and Sydney, so
 * a day computed in the wrong zone shows). Every range form, POST and GET (quoted, bare, Date and
 * DateTime query values), single point, `id0..idN` and the Haystack 4 batch form, hisStart and
 * hisEnd, zone conversion, Rel for mixed zones, and the daylight-saving days of New York and
 * Sydney. Data is written over HTTP with hisWrite.
 */
import t from 'tap';
import { HDateTime, HNumber, HRef } from '../../src/haystack/values.js';
import { timeZone, UTC } from '../../src/haystack/tz.js';
import { zincVal } from '../../src/haystack/zinc.js';
import { ManualClock } from '../../src/lib/clock.js';
import { ErrorCodes } from '../../src/lib/errors.js';
import { dt, failed, type HisClient, ok, relogin, series, span, table } from '../helpers/his.js';
import { hisWorld } from '../helpers/his-world.js';

const NY = timeZone('New_York');
const SYD = timeZone('Sydney');
const HOUR = 3600_000;
/** 2024-01-12T22:00-05:00 New_York = 2024-01-13T14:00+11:00 Sydney = 2024-01-13T03:00Z. */
const NOW = Date.UTC(2024, 0, 13, 3, 0, 0);
/** 2024-01-10T00:00-05:00 New_York: the first of 120 hourly samples of temp (value = index). */
const NY0 = Date.UTC(2024, 0, 10, 5);
/** 2024-01-10T00:00+11:00 Sydney: the first of 120 hourly samples of power. */
const SYD0 = Date.UTC(2024, 0, 9, 13);

/** temp: 120 hourly samples over 2024-01-10..14 New York; power: the same over those days in Sydney; utc: over those days in UTC. */
async function world(t: Parameters<typeof hisWorld>[0]): Promise<{ admin: HisClient; clock: ManualClock; r: Awaited<ReturnType<typeof hisWorld>>['r'] }> {
  const clock = new ManualClock(NOW);
  const { r, admin } = await hisWorld(t, { clock });
  const hourly = (t0: number, tz: typeof NY, unit: string | null) =>
    Array.from({ length: 120 }, (_, i) => [new HDateTime(t0 + i * HOUR, tz), HNumber.of(i, unit)] as const);
  ok(t, await admin.write('temp', hourly(NY0, NY, '°F')), 'temp history');
  ok(t, await admin.write('power', hourly(SYD0, SYD, 'kW')), 'power history');
  ok(t, await admin.write('utc', hourly(Date.UTC(2024, 0, 10), UTC, null)), 'utc history');
  return { r, admin, clock };
}

const vals = (rows: [string, string][]): number[] => rows.map((r) => parseFloat(r[1]));
const range = (a: number, b: number): number[] => Array.from({ length: b - a }, (_, i) => a + i);

t.test('today and yesterday: days of the point\'s zone, never the host\'s', async (t) => {
  const { r, admin, clock } = await world(t);
  const today = ok(t, await admin.read('temp', 'today'), 'today');
  t.same(vals(series(today)), range(48, 72), 'today in New York is the 12th (the host, in UTC, is on the 13th already)');
  t.same(span(today), ['2024-01-12T00:00:00-05:00 New_York', '2024-01-13T00:00:00-05:00 New_York'], 'hisStart and hisEnd: midnight to midnight');
  t.same(today.meta.get('id'), HRef.of('temp', 'temp'), 'meta id: the point, with its display');
  t.same(today.colNames(), ['ts', 'val']);
  t.equal(series(today)[0]?.[0], '2024-01-12T00:00:00-05:00 New_York', 'timestamps in the point\'s zone');

  const yesterday = ok(t, await admin.read('temp', 'yesterday'), 'yesterday');
  t.same(vals(series(yesterday)), range(24, 48));
  t.same(span(yesterday), ['2024-01-11T00:00:00-05:00 New_York', '2024-01-12T00:00:00-05:00 New_York']);

  const sydToday = ok(t, await admin.read('power', 'today'), 'today in Sydney');
  t.same(vals(series(sydToday)), range(72, 96), 'Sydney is on the 13th');
  t.same(span(sydToday), ['2024-01-13T00:00:00+11:00 Sydney', '2024-01-14T00:00:00+11:00 Sydney']);
  t.same(span(ok(t, await admin.read('power', 'yesterday'), 'yesterday in Sydney')), ['2024-01-12T00:00:00+11:00 Sydney', '2024-01-13T00:00:00+11:00 Sydney']);
  t.same(span(ok(t, await admin.read('utc', 'today'), 'today in UTC')), ['2024-01-13T00:00:00Z UTC', '2024-01-14T00:00:00Z UTC']);

  // The last millisecond of a New York day and the first of the next.
  clock.set(Date.UTC(2024, 0, 12, 4, 59, 59, 999));
  t.same(span(ok(t, await admin.read('temp', 'today'), 'today, 23:59:59.999')), ['2024-01-11T00:00:00-05:00 New_York', '2024-01-12T00:00:00-05:00 New_York']);
  clock.set(Date.UTC(2024, 0, 12, 5));
  t.same(span(ok(t, await admin.read('temp', 'today'), 'today, midnight')), ['2024-01-12T00:00:00-05:00 New_York', '2024-01-13T00:00:00-05:00 New_York']);
  // A day with no samples: no rows, the same span.
  clock.set(Date.UTC(2024, 5, 1, 12));
  await relogin(r);
  const empty = ok(t, await admin.read('temp', 'today'), 'a day without samples');
  t.equal(empty.size, 0, 'no rows');
  t.same(empty.colNames(), ['ts', 'val'], 'but the columns');
  t.same(span(empty), ['2024-06-01T00:00:00-04:00 New_York', '2024-06-02T00:00:00-04:00 New_York'], 'in summer time');
});

t.test('first and last', async (t) => {
  const { admin } = await world(t);
  const first = ok(t, await admin.read('temp', 'first'), 'first');
  t.same(series(first), [['2024-01-10T00:00:00-05:00 New_York', '0°F']]);
  const last = ok(t, await admin.read('temp', 'last'), 'last');
  t.same(series(last), [['2024-01-14T23:00:00-05:00 New_York', '119°F']]);
  const [s, e] = [dt(span(last)[0]).epochMs, dt(span(last)[1]).epochMs];
  t.ok(s <= NY0 + 119 * HOUR && NY0 + 119 * HOUR < e, 'hisStart <= the sample < hisEnd');
  t.equal(ok(t, await admin.read('fan', 'first'), 'first of a point without history').size, 0, 'no rows');
  t.equal(ok(t, await admin.read('fan', 'last'), 'last of a point without history').size, 0, 'no rows');
});

t.test('Date and DateTime ranges: bounds, zones, the space after the comma', async (t) => {
  const { admin } = await world(t);
  const day = ok(t, await admin.read('temp', '2024-01-11'), '{Date}');
  t.same(vals(series(day)), range(24, 48), 'that whole day');
  t.same(span(day), ['2024-01-11T00:00:00-05:00 New_York', '2024-01-12T00:00:00-05:00 New_York']);

  const days = ok(t, await admin.read('temp', '2024-01-11,2024-01-12'), '{Date},{Date}');
  t.same(vals(series(days)), range(24, 72), 'both dates in full (the last sample is 23:00 of the second date)');
  t.same(span(days), ['2024-01-11T00:00:00-05:00 New_York', '2024-01-13T00:00:00-05:00 New_York'], 'hisEnd: midnight after the second date');
  t.same(vals(series(ok(t, await admin.read('temp', '2024-01-11, 2024-01-11'), 'one date twice, with a space'))), range(24, 48));
  t.same(vals(series(ok(t, await admin.read('power', '2024-01-11'), '{Date} of a Sydney point'))), range(24, 48), 'the day of the point\'s zone');

  const from = ok(t, await admin.read('temp', '2024-01-14T20:00:00-05:00 New_York'), '{DateTime}');
  t.same(vals(series(from)), [116, 117, 118, 119], 'from that instant on, the instant included');
  t.equal(span(from)[0], '2024-01-14T20:00:00-05:00 New_York', 'hisStart: the instant');
  t.ok(dt(span(from)[1]).epochMs > NY0 + 119 * HOUR, 'hisEnd: after the last sample');

  const utc = ok(t, await admin.read('temp', '2024-01-15T01:00:00Z UTC'), '{DateTime} in UTC');
  t.same(series(utc), [
    ['2024-01-15T01:00:00Z UTC', '116°F'],
    ['2024-01-15T02:00:00Z UTC', '117°F'],
    ['2024-01-15T03:00:00Z UTC', '118°F'],
    ['2024-01-15T04:00:00Z UTC', '119°F'],
  ], 'answered in the range\'s zone');
  t.equal(span(utc)[0], '2024-01-15T01:00:00Z UTC');

  for (const sep of [',', ', ']) {
    const g = ok(t, await admin.read('temp', `2024-01-12T10:00:00-05:00 New_York${sep}2024-01-12T13:00:00-05:00 New_York`), `{DateTime}${sep}{DateTime}`);
    t.same(vals(series(g)), [58, 59, 60], `"${sep}": start included, end excluded`);
    t.same(span(g), ['2024-01-12T10:00:00-05:00 New_York', '2024-01-12T13:00:00-05:00 New_York'], 'hisStart and hisEnd are the bounds');
  }
  const syd = ok(t, await admin.read('temp', '2024-01-13T02:00:00+11:00 Sydney,2024-01-13T05:00:00+11:00 Sydney'), 'Sydney DateTimes on a New York point');
  t.same(series(syd), [
    ['2024-01-13T02:00:00+11:00 Sydney', '58°F'],
    ['2024-01-13T03:00:00+11:00 Sydney', '59°F'],
    ['2024-01-13T04:00:00+11:00 Sydney', '60°F'],
  ], 'the same samples, converted to Sydney');
  t.same(span(syd), ['2024-01-13T02:00:00+11:00 Sydney', '2024-01-13T05:00:00+11:00 Sydney']);
  t.same(vals(series(ok(t, await admin.read('temp', '2024-01-12T15:00:00Z UTC,2024-01-12T15:00:00Z UTC'), 'an empty span'))), [], 'start = end: nothing');
  t.same(vals(series(ok(t, await admin.read('temp', '2024-01-12T10:00-05:00 New_York,2024-01-12T11:00-05:00 New_York'), 'hh:mm without seconds'))), [58]);
  t.same(vals(series(ok(t, await admin.read('temp', '2024-01-12T10:00:00.001-05:00 New_York,2024-01-12T11:00:00.001-05:00 New_York'), 'fractions'))), [59]);
  t.same(vals(series(ok(t, await admin.read('temp', '"2024-01-11"'), 'a range in quotes'))), range(24, 48));
  t.same(vals(series(ok(t, await admin.read('hq.ahu.temp', '2024-01-11'), 'the point by fully qualified name'))), range(24, 48));
  t.same(ok(t, await admin.read('hq.ahu.temp', '2024-01-11'), 'fqname').meta.get('id'), HRef.of('temp', 'temp'), 'meta id is the point\'s id');

  // Zinc and CSV answers.
  const z = await admin.read('temp', '2024-01-12T10:00:00-05:00 New_York,2024-01-12T12:00:00-05:00 New_York', { accept: 'zinc' });
  t.equal(z.status, 200);
  t.match(z.text, /^ver:"[23]\.0" id:@temp "temp" hisStart:2024-01-12T10:00:00-05:00 New_York hisEnd:2024-01-12T12:00:00-05:00 New_York\nts,val\n2024-01-12T10:00:00-05:00 New_York,58°F\n2024-01-12T11:00:00-05:00 New_York,59°F\n$/, 'Zinc');
  const csv = await admin.read('temp', '2024-01-12T10:00:00-05:00 New_York,2024-01-12T12:00:00-05:00 New_York', { headers: { accept: 'text/csv' } });
  t.equal(csv.status, 200);
  t.match(csv.text, /^ts,val\r?\n2024-01-12T10:00:00-05:00 New_York,58°F\r?\n/, 'CSV');
});

t.test('GET: quoted and bare ranges, Date and DateTime query values, one point and id0..idN', async (t) => {
  const { admin } = await world(t);
  const get = (params: Record<string, string | HRef>) => admin.get('hisRead', params);
  const quoted = ok(t, await get({ id: HRef.of('temp'), range: '"today"' }), 'range="today"');
  t.same(vals(series(quoted)), range(48, 72));
  t.same(span(quoted), ['2024-01-12T00:00:00-05:00 New_York', '2024-01-13T00:00:00-05:00 New_York']);
  t.same(vals(series(ok(t, await get({ id: HRef.of('temp'), range: 'today' }), 'range=today'))), range(48, 72));
  t.same(vals(series(ok(t, await get({ id: HRef.of('temp'), range: 'yesterday' }), 'range=yesterday'))), range(24, 48));
  t.same(vals(series(ok(t, await get({ id: HRef.of('temp'), range: 'first' }), 'range=first'))), [0]);
  t.same(vals(series(ok(t, await get({ id: HRef.of('temp'), range: '"last"' }), 'range="last"'))), [119]);

  const bareDt = ok(t, await get({ id: HRef.of('temp'), range: '2024-01-15T01:00:00.000Z UTC' }), 'range=2024-01-15T01:00:00.000Z UTC (bare: decoded as a DateTime)');
  t.same(vals(series(bareDt)), [116, 117, 118, 119]);
  t.equal(series(bareDt)[0]?.[0], '2024-01-15T01:00:00Z UTC', 'in UTC, the range\'s zone');
  const bareDate = ok(t, await get({ id: HRef.of('temp'), range: '2024-01-12' }), 'range=2024-01-12 (decoded as a Date)');
  t.same(vals(series(bareDate)), range(48, 72));
  t.same(span(bareDate), ['2024-01-12T00:00:00-05:00 New_York', '2024-01-13T00:00:00-05:00 New_York']);
  t.same(vals(series(ok(t, await get({ id: HRef.of('temp'), range: '2024-01-11,2024-01-12' }), 'range=2024-01-11,2024-01-12 bare'))), range(24, 72));
  t.same(vals(series(ok(t, await get({ id: HRef.of('temp'), range: '"2024-01-11,2024-01-12"' }), 'quoted dates'))), range(24, 72));
  t.same(
    vals(series(ok(t, await get({ id: HRef.of('temp'), range: '2024-01-12T10:00:00-05:00 New_York,2024-01-12T13:00:00-05:00 New_York' }), 'two DateTimes bare'))),
    [58, 59, 60],
  );
  t.same(
    vals(series(ok(t, await get({ id: HRef.of('temp'), range: zincVal('2024-01-12T10:00:00-05:00 New_York, 2024-01-12T13:00:00-05:00 New_York') }), 'two DateTimes quoted, with a space'))),
    [58, 59, 60],
  );
  t.same(vals(series(ok(t, await get({ id: HRef.of('hq.ahu.temp'), range: '2024-01-12' }), 'id=@hq.ahu.temp'))), range(48, 72));
  const plus = ok(t, await get({ id: HRef.of('temp'), range: '2024-01-15T12:00:00+11:00 Sydney' }), 'a bare DateTime with a + offset (sent as %2B)');
  t.same(series(plus).map((r) => r[0]), ['2024-01-15T12:00:00+11:00 Sydney', '2024-01-15T13:00:00+11:00 Sydney', '2024-01-15T14:00:00+11:00 Sydney', '2024-01-15T15:00:00+11:00 Sydney']);

  const multi = ok(t, await get({ id0: HRef.of('temp'), id1: HRef.of('utc'), range: '"2024-01-12T10:00:00-05:00 New_York,2024-01-12T12:00:00-05:00 New_York"' }), 'id0, id1');
  t.same(multi.colNames(), ['ts', 'v0', 'v1']);
  t.same(table(multi), [
    ['2024-01-12T10:00:00-05:00 New_York', '58°F', '63'],
    ['2024-01-12T11:00:00-05:00 New_York', '59°F', '64'],
  ], 'one row per instant, in the range\'s zone');
  const z = await admin.get('hisRead', { id: HRef.of('temp'), range: 'first' }, { accept: 'zinc' });
  t.match(z.text, /^ver:"[23]\.0" id:@temp "temp" hisStart:.*\nts,val\n2024-01-10T00:00:00-05:00 New_York,0°F\n$/, 'a GET answered in Zinc');
});

t.test('several points: id0..idN, the batch form, column meta id, zones and Rel', async (t) => {
  const { admin } = await world(t);
  // plain: half-hour samples beside temp's hourly ones, and one at a shared instant.
  ok(t, await admin.write('plain', [[dt('2024-01-12T10:30:00-05:00 New_York'), HNumber.of(1)], [dt('2024-01-12T11:00:00-05:00 New_York'), HNumber.of(2)]]), 'plain');
  ok(t, await admin.write('fan', [[dt('2024-01-12T10:15:00-05:00 New_York'), true]]), 'fan');
  const g = ok(t, await admin.readMulti(['temp', 'plain', 'hq.ahu.fan'], '2024-01-12T10:00:00-05:00 New_York,2024-01-12T12:00:00-05:00 New_York'), 'three points');
  t.same(g.colNames(), ['ts', 'v0', 'v1', 'v2']);
  t.same(g.cols.slice(1).map((c) => c.meta.get('id')), [HRef.of('temp', 'temp'), HRef.of('plain', 'plain'), HRef.of('fan', 'fan')], 'each value column names its point (an fqname answered with the id)');
  t.same(table(g), [
    ['2024-01-12T10:00:00-05:00 New_York', '58°F', '', ''],
    ['2024-01-12T10:15:00-05:00 New_York', '', '', 'T'],
    ['2024-01-12T10:30:00-05:00 New_York', '', '1', ''],
    ['2024-01-12T11:00:00-05:00 New_York', '59°F', '2', ''],
  ], 'merged in time order, one row per instant');
  t.same(span(g), ['2024-01-12T10:00:00-05:00 New_York', '2024-01-12T12:00:00-05:00 New_York']);
  t.notOk(g.meta.has('id'), 'no meta id for several points');

  const shared = ok(t, await admin.readMulti(['temp', 'plain'], '2024-01-12'), 'two New York points, a Date range');
  t.equal(table(shared)[0]?.[0], '2024-01-12T00:00:00-05:00 New_York', 'one shared zone: that zone');
  t.equal(shared.size, 25);

  const mixed = ok(t, await admin.readMulti(['temp', 'power'], '2024-01-12'), 'New York and Sydney, a Date range');
  t.same(span(mixed), ['2024-01-12T05:00:00-00:00 Rel', '2024-01-13T05:00:00-00:00 Rel'], 'Rel, the day of the first point\'s zone');
  t.same(table(mixed).slice(0, 2), [
    ['2024-01-12T05:00:00-00:00 Rel', '48°F', '64kW'],
    ['2024-01-12T06:00:00-00:00 Rel', '49°F', '65kW'],
  ], 'zones differ: normalised to Rel (-00:00)');
  t.same(span(ok(t, await admin.readMulti(['power', 'temp'], 'today'), 'today, Sydney first')), ['2024-01-12T13:00:00-00:00 Rel', '2024-01-13T13:00:00-00:00 Rel'], 'today of the first point (Sydney), in Rel');
  const first = ok(t, await admin.readMulti(['temp', 'power', 'utc'], 'first'), 'first of three zones');
  t.same(table(first), [
    ['2024-01-09T13:00:00-00:00 Rel', '', '0kW', ''],
    ['2024-01-10T00:00:00-00:00 Rel', '', '', '0'],
    ['2024-01-10T05:00:00-00:00 Rel', '0°F', '', ''],
  ], 'the first sample of each, in Rel');
  const withDt = ok(t, await admin.readMulti(['temp', 'power'], '2024-01-12T10:00:00-05:00 New_York,2024-01-12T11:00:00-05:00 New_York'), 'mixed zones, DateTime range');
  t.same(table(withDt), [['2024-01-12T10:00:00-05:00 New_York', '58°F', '74kW']], 'a range DateTime sets the zone, even for mixed points');

  const batch = ok(t, await admin.readBatch(['temp', 'hq.ahu.plain'], '2024-01-12T10:00:00-05:00 New_York,2024-01-12T12:00:00-05:00 New_York'), 'Haystack 4 batch');
  t.same(batch.colNames(), ['ts', 'v0', 'v1']);
  t.same(batch.cols.slice(1).map((c) => c.meta.get('id')), [HRef.of('temp', 'temp'), HRef.of('plain', 'plain')]);
  t.same(table(batch), [
    ['2024-01-12T10:00:00-05:00 New_York', '58°F', ''],
    ['2024-01-12T10:30:00-05:00 New_York', '', '1'],
    ['2024-01-12T11:00:00-05:00 New_York', '59°F', '2'],
  ]);
  const batchOne = ok(t, await admin.readBatch(['temp'], 'first'), 'batch of one');
  t.same(batchOne.colNames(), ['ts', 'v0'], 'a batch answers with v columns even for one point');
  t.same(batchOne.col('v0')?.meta.get('id'), HRef.of('temp', 'temp'));
  t.same(table(ok(t, await admin.readMulti(['temp'], 'first'), 'id0 alone')), [['2024-01-10T00:00:00-05:00 New_York', '0°F']]);
  t.same(table(ok(t, await admin.readMulti(['temp', 'temp'], 'first'), 'one point twice')), [['2024-01-10T00:00:00-05:00 New_York', '0°F', '0°F']]);
});

t.test('daylight saving in New York: 2024-03-10 (23 hours) and 2024-11-03 (25 hours, 01:30 twice)', async (t) => {
  const clock = new ManualClock(Date.UTC(2024, 2, 10, 16));
  const { r, admin } = await hisWorld(t, { clock });
  // Hourly in UTC from the 9th 20:00Z to the 12th: every instant of the day and some around it.
  const hourly = (from: number, n: number) => Array.from({ length: n }, (_, i) => [new HDateTime(from + i * HOUR, UTC), HNumber.of(i)] as const);
  ok(t, await admin.write('plain', hourly(Date.UTC(2024, 2, 9, 20), 60)), 'March samples');
  const spring = ok(t, await admin.read('plain', '2024-03-10'), 'the day clocks spring forward');
  t.equal(spring.size, 23, 'a 23-hour day');
  t.same(span(spring), ['2024-03-10T00:00:00-05:00 New_York', '2024-03-11T00:00:00-04:00 New_York']);
  t.same(series(spring).slice(0, 4).map((r) => r[0]), [
    '2024-03-10T00:00:00-05:00 New_York',
    '2024-03-10T01:00:00-05:00 New_York',
    '2024-03-10T03:00:00-04:00 New_York',
    '2024-03-10T04:00:00-04:00 New_York',
  ], '02:00 does not exist: 01:00 EST is followed by 03:00 EDT');
  t.equal(series(spring)[22]?.[0], '2024-03-10T23:00:00-04:00 New_York');
  t.same(series(ok(t, await admin.read('plain', 'today'), 'today on that day')), series(spring), 'today is the same 23 hours');

  ok(t, await admin.write('plain', hourly(Date.UTC(2024, 10, 2, 22), 36)), 'November samples');
  ok(t, await admin.write('plain', [[dt('2024-11-03T01:30:00-05:00 New_York'), HNumber.of(-5)], [dt('2024-11-03T01:30:00-04:00 New_York'), HNumber.of(-4)]]), 'both 01:30s, the later one written first');
  const fall = ok(t, await admin.read('plain', '2024-11-03'), 'the day clocks fall back');
  t.equal(fall.size, 27, 'a 25-hour day, plus the two 01:30 samples');
  t.same(span(fall), ['2024-11-03T00:00:00-04:00 New_York', '2024-11-04T00:00:00-05:00 New_York']);
  t.same(series(fall).slice(1, 6), [
    ['2024-11-03T01:00:00-04:00 New_York', '7'],
    ['2024-11-03T01:30:00-04:00 New_York', '-4'],
    ['2024-11-03T01:00:00-05:00 New_York', '8'],
    ['2024-11-03T01:30:00-05:00 New_York', '-5'],
    ['2024-11-03T02:00:00-05:00 New_York', '9'],
  ], 'the repeated hour twice, in order, with -04:00 then -05:00');
  const repeated = ok(t, await admin.read('plain', '2024-11-03T01:30:00-04:00 New_York,2024-11-03T01:30:00-05:00 New_York'), 'from the first 01:30 to the second');
  t.same(series(repeated), [
    ['2024-11-03T01:30:00-04:00 New_York', '-4'],
    ['2024-11-03T01:00:00-05:00 New_York', '8'],
  ], 'an hour apart although both read 01:30');
  clock.set(Date.UTC(2024, 10, 4, 12));
  await relogin(r);
  t.same(series(ok(t, await admin.read('plain', 'yesterday'), 'yesterday, the day after')), series(fall), 'yesterday is the same 25 hours');
});

t.test('daylight saving in Sydney: 2024-04-07 (25 hours) and 2024-10-06 (23 hours)', async (t) => {
  const { admin } = await hisWorld(t);
  const hourly = (from: number, n: number) => Array.from({ length: n }, (_, i) => [new HDateTime(from + i * HOUR, UTC), HNumber.of(i, 'kW')] as const);
  ok(t, await admin.write('power', hourly(Date.UTC(2024, 3, 6, 10), 36)), 'April samples');
  ok(t, await admin.write('power', [[dt('2024-04-07T02:30:00+10:00 Sydney'), HNumber.of(-10, 'kW')], [dt('2024-04-07T02:30:00+11:00 Sydney'), HNumber.of(-11, 'kW')]]), 'both 02:30s');
  const autumn = ok(t, await admin.read('power', '2024-04-07'), 'the day Sydney leaves daylight saving');
  t.equal(autumn.size, 27, '25 hours, plus the two 02:30 samples');
  t.same(span(autumn), ['2024-04-07T00:00:00+11:00 Sydney', '2024-04-08T00:00:00+10:00 Sydney']);
  t.same(series(autumn).slice(2, 7), [
    ['2024-04-07T02:00:00+11:00 Sydney', '5kW'],
    ['2024-04-07T02:30:00+11:00 Sydney', '-11kW'],
    ['2024-04-07T02:00:00+10:00 Sydney', '6kW'],
    ['2024-04-07T02:30:00+10:00 Sydney', '-10kW'],
    ['2024-04-07T03:00:00+10:00 Sydney', '7kW'],
  ], '02:00-03:00 twice: +11:00, then +10:00');

  ok(t, await admin.write('power', hourly(Date.UTC(2024, 9, 5, 10), 30)), 'October samples');
  const spring = ok(t, await admin.read('power', '2024-10-06'), 'the day Sydney enters daylight saving');
  t.equal(spring.size, 23, 'a 23-hour day');
  t.same(span(spring), ['2024-10-06T00:00:00+10:00 Sydney', '2024-10-07T00:00:00+11:00 Sydney']);
  t.same(series(spring).slice(1, 3).map((r) => r[0]), ['2024-10-06T01:00:00+10:00 Sydney', '2024-10-06T03:00:00+11:00 Sydney'], '02:00 does not exist');
  // The same instants read in New York (a DateTime range): converted, offsets and all.
  const inNy = ok(t, await admin.read('power', '2024-10-05T11:00:00-04:00 New_York,2024-10-05T14:00:00-04:00 New_York'), 'read in New York');
  t.same(series(inNy).map((r) => r[0]), ['2024-10-05T11:00:00-04:00 New_York', '2024-10-05T12:00:00-04:00 New_York', '2024-10-05T13:00:00-04:00 New_York']);
});

t.test('bad requests: ranges (the message lists the forms), unknown points, shapes', async (t) => {
  const { admin } = await world(t);
  const badRanges = [
    'tomorrow',
    '',
    '   ',
    'today,yesterday',
    '2024-13-01',
    '2024-02-30',
    '2024-1-5',
    '2024-01-12,',
    ',2024-01-12',
    '2024-01-12,2024-01-11',
    '2024-01-12,2024-01-13,2024-01-14',
    '2024-01-12T10:00:00-05:00 New_York,2024-01-13',
    '2024-01-12,2024-01-13T10:00:00-05:00 New_York',
    '2024-01-12T13:00:00-05:00 New_York,2024-01-12T10:00:00-05:00 New_York',
    '2024-01-12T25:00:00-05:00 New_York',
    '2024-01-12T10:00:00+01:00 New_York',
    '2024-01-12 10:00',
    '12/01/2024',
    'last week',
  ];
  for (const text of badRanges) {
    const a = await admin.read('temp', text);
    failed(t, a, 400, ErrorCodes.BAD_RANGE, /today, yesterday/, `range ${JSON.stringify(text)}`);
  }
  const atlantis = await admin.read('temp', '2024-01-12T10:00:00+01:00 Atlantis');
  t.equal(atlantis.status, 400, 'an unknown zone in a range: 400');
  for (const [what, row, code, why] of [
    ['a Number range', { id: HRef.of('temp'), range: HNumber.of(1) }, ErrorCodes.BAD_REQUEST, /range must be a Str/],
    ['no range', { id: HRef.of('temp') }, ErrorCodes.BAD_REQUEST, /range must be a Str/],
    ['an unknown point', { id: HRef.of('nope'), range: 'today' }, ErrorCodes.NOT_FOUND, /unknown point @nope/],
    ['an unknown fqname', { id: HRef.of('hq.ahu.nope'), range: 'today' }, ErrorCodes.NOT_FOUND, /unknown point @hq\.ahu\.nope/],
    ['a Str id', { id: 'temp', range: 'today' }, ErrorCodes.BAD_REQUEST, /id must be a Ref/],
    ['a point without his', { id: HRef.of('nohis'), range: 'today' }, ErrorCodes.BAD_REQUEST, /not a historized point/],
    ['a site', { id: HRef.of('hq'), range: 'today' }, ErrorCodes.BAD_REQUEST, /not a historized point/],
    ['a point without kind', { id: HRef.of('nokind'), range: 'today' }, ErrorCodes.INVALID_RECORD, /no kind tag/],
    ['no id', { range: 'today' }, ErrorCodes.BAD_REQUEST, /needs id \(or id0, id1, \.\.\.\)/],
    ['id0 and id2 without id1', { id0: HRef.of('temp'), id2: HRef.of('plain'), range: 'today' }, ErrorCodes.BAD_REQUEST, /id2 is given but id1 is missing/],
    ['an unknown point among several', { id0: HRef.of('temp'), id1: HRef.of('nope'), range: 'today' }, ErrorCodes.NOT_FOUND, /id1: unknown point @nope/],
  ] as const) {
    failed(t, await admin.post('hisRead', [row]), 400, code, why, what);
  }
  failed(t, await admin.post('hisRead', [{ id: HRef.of('temp'), range: 'today' }, { id: HRef.of('plain'), range: 'today' }]), 400, ErrorCodes.BAD_REQUEST, /takes one row/, 'two rows');
  failed(t, await admin.post('hisRead', []), 400, ErrorCodes.BAD_REQUEST, undefined, 'no rows');
  failed(t, await admin.readBatch(['temp', 'nope'], 'today'), 400, ErrorCodes.NOT_FOUND, /rows\[1\]\.id: unknown point @nope/, 'batch with an unknown point');
  failed(t, await admin.post('hisRead', [{ id: HRef.of('temp') }], { range: HNumber.of(3) }), 400, ErrorCodes.BAD_REQUEST, /meta\.range must be a Str/, 'batch with a Number range');
  failed(t, await admin.get('hisRead', { id: HRef.of('nope'), range: 'today' }), 400, ErrorCodes.NOT_FOUND, /unknown point @nope/, 'GET, unknown point');
  failed(t, await admin.get('hisRead', { id: HRef.of('temp'), range: 'tomorrow' }), 400, ErrorCodes.BAD_RANGE, /today, yesterday/, 'GET, bad range');
  failed(t, await admin.get('hisRead', { id: HRef.of('temp'), range: '2024-13-01' }), 400, ErrorCodes.BAD_RANGE, /today, yesterday/, 'GET, a bad date');
  failed(t, await admin.get('hisRead', { id: HRef.of('temp') }), 400, ErrorCodes.BAD_REQUEST, /range/, 'GET, no range');
});
