/**
 * Retention end to end (issue 28): the real App on LevelDB, HTTP in. A point's hisRetention tag,
 * hisRead after retention (the old raw samples gone), a GraphQL aggregate over a range whose raw
 * samples are gone (read from the rollups, equal to what the samples gave), the same after a
 * restart and in a restored backup, bad retention tags refused, and a deleted point taking its
 * rollups with it.
 */
import { Readable } from 'node:stream';
import t from 'tap';
import { HDateTime, HNumber, HRef, MARKER } from '../../src/haystack/values.js';
import { UTC } from '../../src/haystack/tz.js';
import { ManualClock } from '../../src/lib/clock.js';
import { ErrorCodes } from '../../src/lib/errors.js';
import { backupStream, restoreBackup } from '../../src/store/backup.js';
import { Store } from '../../src/store/db.js';
import { RollupStore } from '../../src/store/rollups.js';
import { startApp, type Running } from '../helpers/app.js';
import { failed, hisClient, ok, relogin } from '../helpers/his.js';
import { tempDir } from '../helpers/tmp.js';

const MIN = 60_000;
const DAY = 86_400_000;
const T0 = Date.UTC(2025, 2, 1);

async function gql(s: Running, query: string): Promise<{ data?: unknown; errors?: { message: string }[] }> {
  const res = await fetch(`${s.base}/graphql`, { method: 'POST', headers: { ...s.auth, 'content-type': 'application/json' }, body: JSON.stringify({ query }) });
  return (await res.json()) as { data?: unknown; errors?: { message: string }[] };
}

function points(body: { data?: unknown }, field: string): { time: number; value: string | null }[] {
  const h = (body.data as { haystack: { entity: { history: Record<string, { timeSeries: { dataPoints: { time: number; value: string | null }[] }[] }> } } }).haystack.entity.history;
  return h[field]?.timeSeries[0]?.dataPoints ?? [];
}

const iso = (ms: number): string => new Date(ms).toISOString();

t.test('after retention: hisRead has the recent samples, GraphQL aggregates the rolled-up ones, through a restart and a backup', async (t) => {
  const clock = new ManualClock(T0);
  // Raw samples kept two days by default (historyRetentionDays), one by the tag of `temp`.
  const r = await startApp(t, { clock, env: { HAYLOFT_HISTORY_RETENTION_DAYS: '2' } });
  const admin = hisClient(r);

  // Bad tags are refused when the record is written, and change nothing.
  failed(t, await admin.post('createRec', { point: MARKER, his: MARKER, kind: 'Number', name: 'bad1', tz: 'UTC', hisRetention: 'a week' }), 400, ErrorCodes.INVALID_RECORD, /hisRetention must be a Number with a time unit/, 'a Str retention');
  failed(t, await admin.post('createRec', { point: MARKER, his: MARKER, kind: 'Number', name: 'bad2', tz: 'UTC', hisRetention: HNumber.of(3, 'week') }), 400, ErrorCodes.INVALID_RECORD, /unit "week" is not a time unit/, 'a unit it does not take');
  failed(t, await admin.post('createRec', { point: MARKER, his: MARKER, kind: 'Number', name: 'bad3', tz: 'UTC', hisMaxSamples: HNumber.of(0) }), 400, ErrorCodes.INVALID_RECORD, /hisMaxSamples must be a whole Number of 1 or more/, 'no samples at all');
  t.equal(r.app.model.query('point').length, 0, 'nothing was created');

  ok(
    t,
    await admin.post('createRec', [
      { id: HRef.of('temp'), point: MARKER, his: MARKER, kind: 'Number', name: 'temp', tz: 'UTC', unit: '°C', hisRetention: HNumber.of(1, 'day') },
      { id: HRef.of('other'), point: MARKER, his: MARKER, kind: 'Number', name: 'other', tz: 'UTC', unit: '°C' },
    ]),
    'a point keeping one day of raw samples, and one on the default (two days here)',
  );
  // Three days of one-minute samples, a sensor-like curve.
  const ts: number[] = [];
  const val: number[] = [];
  for (let i = 0; i < 3 * 1440; i++) {
    ts.push(T0 + i * MIN);
    val.push(Math.round(200 + 50 * Math.sin(i / 100)) / 10);
  }
  const rows = ts.map((x, i) => [new HDateTime(x, UTC), HNumber.of(val[i] as number, '°C')] as const);
  ok(t, await admin.write('temp', rows), 'hisWrite of three days');
  ok(t, await admin.write('other', rows), 'the same to the other point');

  clock.set(T0 + 3 * DAY);
  await relogin(r);
  const run = await r.app.retention?.runOnce();
  t.equal(run?.samplesDropped, 3 * 1440, 'the run removed two days of one point, one of the other');

  const metrics = await (await fetch(`${r.base}/metrics`, { headers: r.auth })).text();
  t.match(metrics, /hayloft_retention_samples_dropped_total\{reason="age"\} 4320/, 'metrics: samples dropped by age');
  t.match(metrics, /hayloft_retention_rollup_buckets_written_total 288/, 'metrics: rollup buckets kept');
  t.match(metrics, /hayloft_retention_last_run_timestamp_seconds [1-9]/, 'metrics: the last run');
  const health = (await (await fetch(`${r.base}/api/health`)).json()) as { parts: Record<string, Record<string, unknown>> };
  t.equal(health.parts.retention?.lastRun, iso(T0 + 3 * DAY), 'health: the last run');

  const range = `${iso(T0).slice(0, 10)},${iso(T0 + 3 * DAY).slice(0, 10)}`;
  const read = ok(t, await admin.read('temp', range), 'hisRead of the whole range');
  t.equal(read.rows.length, 1440, 'only the last day is there raw');
  t.equal((read.rows[0]?.get('ts') as HDateTime).epochMs, T0 + 2 * DAY, 'from the cut on');
  t.equal(ok(t, await admin.read('other', range), 'hisRead of the other point').rows.length, 2 * 1440, 'the other point keeps two days: the setting, without a tag');
  t.equal(((await admin.rec('temp')).get('hisStart') as HDateTime).epochMs, T0 + 2 * DAY, 'hisStart follows');

  const q = `{ haystack { entity(id: "temp") { history(rangeAbsolute: {start: "${iso(T0)}", end: "${iso(T0 + 3 * DAY)}"}) {
    mean: aggregate(function: MEAN, groupBy: {groupByUnits: DAY, groupBySize: 1, fill: NONE}) { timeSeries { dataPoints { time value } } }
    count: aggregate(function: COUNT) { timeSeries { dataPoints { time value } } }
    max: select(function: MAX, groupBy: {groupByUnits: HOUR, groupBySize: 6, fill: NONE}) { timeSeries { dataPoints { time value } } }
    raw: timeSeries { dataPoints { time } }
  } } } }`;
  const want = (from: number, to: number, f: (xs: number[]) => number): number => f(val.filter((_, i) => (ts[i] as number) >= from && (ts[i] as number) < to));
  const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;
  const check = (body: Awaited<ReturnType<typeof gql>>, what: string): void => {
    t.same(body.errors, undefined, `${what}: no errors`);
    const m = points(body, 'mean');
    t.same(
      m.map((p) => p.time),
      [T0, T0 + DAY, T0 + 2 * DAY],
      `${what}: a mean for each day, the two rolled-up ones too`,
    );
    for (const [i, p] of m.entries()) t.ok(Math.abs(Number(p.value) - want(T0 + i * DAY, T0 + (i + 1) * DAY, mean)) < 1e-9, `${what}: day ${i} mean as the samples gave it`);
    t.same(points(body, 'count').map((p) => p.value), ['4320'], `${what}: COUNT counts every sample, rolled up or raw`);
    const mx = points(body, 'max');
    t.equal(mx.length, 12, `${what}: a maximum every 6 hours`);
    for (const [i, p] of mx.entries()) t.equal(Number(p.value), want(T0 + i * 6 * 3_600_000, T0 + (i + 1) * 6 * 3_600_000, (xs) => Math.max(...xs)), `${what}: 6-hour max ${i}`);
    const raw = (body.data as { haystack: { entity: { history: { raw: { dataPoints: unknown[] }[] } } } }).haystack.entity.history.raw;
    t.equal(raw[0]?.dataPoints.length, 1440, `${what}: a plain time series is the raw samples there are`);
  };
  check(await gql(r, q), 'after retention');

  await r.restart();
  check(await gql(r, q), 'after a restart');

  // A backup holds the rollups; a store restored from it reads them.
  const backup: Buffer[] = [];
  for await (const c of backupStream(r.app.store, { productVersion: 'test', now: clock.now() })) backup.push(c as Buffer);
  const dir = tempDir(t);
  await restoreBackup(dir, Readable.from([Buffer.concat(backup)]));
  const restored = await Store.open(dir);
  const rs = new RollupStore(restored);
  await rs.start();
  const rolled = await rs.read('temp', -Infinity, Infinity);
  await restored.close();
  t.equal(rolled.ts.length, 2 * 96, 'the restored store has the rollups');
  t.equal(
    [...rolled.count].reduce((a, b) => a + b, 0),
    2 * 1440,
    'all of them',
  );

  // hisDelete of a day takes its rollups too: aggregates no longer show the deleted samples.
  ok(t, await admin.del('temp', iso(T0).slice(0, 10)), 'hisDelete of the first (rolled-up) day');
  const after = await gql(r, q);
  t.same(
    points(after, 'mean').map((p) => p.time),
    [T0 + DAY, T0 + 2 * DAY],
    'its mean is gone, the next days stay',
  );
  t.same(points(after, 'count').map((p) => p.value), ['2880'], 'COUNT no longer counts it');
  t.equal(r.app.rollups.state('temp')?.oldestDay, T0 + DAY, 'the oldest rolled day moved on');

  // A deleted point takes its rollups.
  ok(t, await admin.post('deleteRec', { id: HRef.of('temp') }), 'deleteRec');
  for (let i = 0; i < 100 && r.app.rollups.ids().includes('temp'); i++) await new Promise((res) => setTimeout(res, 10));
  t.notOk(r.app.rollups.ids().includes('temp'), 'its rollups are gone');
  const left = (await r.app.store.roll.keys().all()).map((k) => Buffer.from(k).toString('latin1'));
  t.notOk(left.some((k) => k.includes('temp')), 'no key of it is left');
});
