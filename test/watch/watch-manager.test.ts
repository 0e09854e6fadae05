/**
 * The WatchManager on a real Model (LevelDB in a temp folder), without HTTP: lease parsing, the
 * lifecycle (timer and listeners gone after stop), the housekeeping timer, and that the change
 * path stays cheap. The behaviour over the wire is test/api/watch.test.ts.
 */
import t, { type Test } from 'tap';
import { HDict, HNumber, HRef, type HVal, MARKER } from '../../src/haystack/values.js';
import { ManualClock } from '../../src/lib/clock.js';
import { ErrorCodes, isHayloftError } from '../../src/lib/errors.js';
import { Model } from '../../src/model/model.js';
import { Store } from '../../src/store/db.js';
import { RecordStore } from '../../src/store/records.js';
import { DEFAULT_LEASE, WatchManager, parseLease } from '../../src/watch/index.js';
import { tempDir } from '../helpers/tmp.js';

const T0 = Date.UTC(2024, 0, 15);

async function modelWith(t: Test, points: number): Promise<{ model: Model; clock: ManualClock }> {
  const store = await Store.open(tempDir(t));
  t.teardown(() => store.close());
  const clock = new ManualClock(T0);
  const model = await Model.load({ records: new RecordStore(store), clock });
  const rows: HDict[] = [HDict.of({ id: HRef.of('s'), site: MARKER, name: 's' })];
  for (let i = 0; i < points; i++) rows.push(HDict.of({ id: HRef.of(`p${i}`), point: MARKER, cur: MARKER, kind: 'Number', siteRef: HRef.of('s') }));
  await model.create(rows);
  return { model, clock };
}

t.test('parseLease', async (t) => {
  t.equal(parseLease(undefined), DEFAULT_LEASE);
  t.equal(parseLease(null), DEFAULT_LEASE);
  const ok: [HNumber, number, HNumber][] = [
    [HNumber.of(15, 's'), 15_000, HNumber.of(15, 's')],
    [HNumber.of(1.5, 'min'), 90_000, HNumber.of(1.5, 'min')],
    [HNumber.of(3, 'hr'), 3 * 3600_000, HNumber.of(3, 'hr')],
    [HNumber.of(5, 'sec'), 10_000, HNumber.of(10, 'sec')],
    [HNumber.of(0.01, 'h'), 36_000, HNumber.of(0.01, 'h')],
    [HNumber.of(0.001, 'h'), 10_000, HNumber.of(10, 's')],
    [HNumber.of(7, 'day'), 86_400_000, HNumber.of(1, 'day')],
  ];
  for (const [v, ms, num] of ok) {
    const l = parseLease(v);
    t.equal(l.ms, ms, `${String(v)}: ${ms} ms`);
    t.same(l.num, num, `${String(v)} answered as ${String(num)}`);
  }
  const bad: HVal[] = [HNumber.of(0), '', HNumber.of(10, 'ms'), HNumber.of(0, 'min'), HNumber.of(-5, 's'), HNumber.of(NaN, 'h'), '1 min', true, MARKER];
  t.same(parseLease(HNumber.of(15000)).num, HNumber.of(15, 's'), 'no unit: milliseconds (the WideSky client documents ms)');
  for (const v of bad) t.throws(() => parseLease(v), { code: ErrorCodes.BAD_LEASE }, `refused: ${String(v)}`);
});

t.test('lifecycle: not started refuses; stop clears timer, listeners and watches', async (t) => {
  const { model, clock } = await modelWith(t, 3);
  const m = new WatchManager({ model, clock, housekeepingMs: 10 });
  t.throws(() => m.subscribe('u', { ids: ['p0'] }), { code: ErrorCodes.INTERNAL }, 'subscribe before start');
  m.start();
  m.start(); // idempotent: one timer, one set of listeners
  const w = m.subscribe('u', { ids: ['p0', 'p1'] });
  model.setTransient('p0', { curVal: HNumber.of(1), curStatus: 'ok' });
  t.equal(m.poll('u', w.watchId).rows.length, 1);
  m.stop();
  t.equal(m.size, 0, 'watches forgotten');
  t.equal(m.watchedPoints, 0);
  m.start();
  const w2 = m.subscribe('u', { ids: ['p0'] });
  model.setTransient('p0', { curVal: HNumber.of(2), curStatus: 'ok' });
  t.equal(m.poll('u', w2.watchId).rows.length, 1, 'one row: the listeners of the first start are gone, not doubled');
  m.stop();
  m.stop();
  t.pass('stop twice is harmless');
});

t.test('the housekeeping timer closes expired watches by the injected clock', async (t) => {
  const { model, clock } = await modelWith(t, 2);
  const m = new WatchManager({ model, clock, housekeepingMs: 10 });
  m.start();
  t.teardown(() => m.stop());
  m.subscribe('u', { ids: ['p0'], lease: HNumber.of(10, 's') });
  const long = m.subscribe('u', { ids: ['p0', 'p1'], lease: HNumber.of(1, 'h') });
  await new Promise((r) => setTimeout(r, 50));
  t.equal(m.size, 2, 'nothing expired yet');
  clock.advance(11_000);
  const end = Date.now() + 2000;
  while (m.size > 1 && Date.now() < end) await new Promise((r) => setTimeout(r, 10));
  t.equal(m.size, 1, 'the 10 s watch closed by the timer');
  t.equal(m.poll('u', long.watchId).rows.length, 0, 'the other lives');
});

t.test('a point is marked changed only when curVal, curStatus or curErr change value', async (t) => {
  const { model, clock } = await modelWith(t, 2);
  const m = new WatchManager({ model, clock });
  m.start();
  t.teardown(() => m.stop());
  const w = m.subscribe('u', { ids: ['p0', 'p1'] }).watchId;
  const ids = (): string[] => m.poll('u', w).rows.map((r) => (r.get('id') as HRef).id);
  model.setTransient('p0', { curVal: HNumber.of(1, '°C'), curStatus: 'ok' });
  t.same(ids(), ['p0']);
  model.setTransient('p0', { curVal: HNumber.of(1, '°C'), curStatus: 'ok' });
  model.setTransient('p1', { curErr: null });
  t.same(ids(), [], 'equal values (a new HNumber, same value and unit) and removing an absent tag are no change');
  model.setTransient('p0', { curVal: HNumber.of(1, '°F') });
  t.same(ids(), ['p0'], 'another unit is a change');
  model.setTransient('p1', { hisSize: HNumber.of(3) });
  t.same(ids(), [], 'tags outside watch rows are not watched');
  model.setTransient('p0', { curStatus: 'down', curErr: 'timeout' });
  model.setTransient('p0', { curErr: null });
  t.same(ids(), ['p0']);
  t.same(model.get('p0')?.get('curErr'), undefined, 'removed');
});

t.test('limits from options; errors are coded', async (t) => {
  const { model, clock } = await modelWith(t, 5);
  const m = new WatchManager({ model, clock, limits: { maxPointsPerWatch: 2 } });
  m.start();
  t.teardown(() => m.stop());
  t.equal(m.limits.maxWatchesPerUser, 50, 'defaults for what is not given');
  try {
    m.subscribe('u', { ids: ['p0', 'p1', 'p2'] });
    t.fail('past the limit');
  } catch (e) {
    t.ok(isHayloftError(e, ErrorCodes.WATCH_LIMIT));
  }
  t.equal(m.size, 0);
  t.throws(() => m.poll('u', 'nope'), { code: ErrorCodes.WATCH_NOT_FOUND });
});

t.test('the change path is cheap: 10 watches x 1,000 points, 100,000 changes', async (t) => {
  const { model, clock } = await modelWith(t, 10_000);
  const m = new WatchManager({ model, clock });
  m.start();
  t.teardown(() => m.stop());
  const ids = Array.from({ length: 10_000 }, (_, i) => `p${i}`);
  const watches = Array.from({ length: 10 }, (_, w) => m.subscribe('u', { ids: ids.slice(w * 1000, (w + 1) * 1000) }).watchId);
  // One shared watch holding every point: each change marks two watches.
  const all = m.subscribe('v', { ids }).watchId;
  const val = HNumber.of(1);
  const t0 = performance.now();
  for (let i = 0; i < 100_000; i++) model.setTransient(`p${(i * 7919) % 10_000}`, { curVal: val, curStatus: 'ok' });
  const perChange = ((performance.now() - t0) * 1000) / 100_000;
  t.ok(perChange < 20, `setTransient with watches: ${perChange.toFixed(2)} us per change (generous bound for a loaded machine)`);
  let rows = 0;
  for (const w of watches) rows += m.poll('u', w).rows.length;
  t.equal(rows, 10_000, 'every point changed once at least: one row each');
  t.equal(m.poll('v', all).rows.length, 10_000);
  t.equal(m.poll('v', all).rows.length, 0);
});

t.test('leases run on the monotonic clock: wall-clock steps neither end nor stretch them', async (t) => {
  const { model, clock } = await modelWith(t, 2);
  const m = new WatchManager({ model, clock, housekeepingMs: 3_600_000 });
  m.start();
  t.teardown(() => m.stop());
  const w = m.subscribe('u', { ids: ['p0'], lease: HNumber.of(1, 'min') });
  clock.stepWall(2 * 3_600_000);
  t.equal(m.housekeep(), 0, 'a step forward of 2 h does not expire a 1 min lease');
  t.doesNotThrow(() => m.poll('u', w.watchId), 'the watch is still open (and the poll renews it)');
  clock.stepWall(-24 * 3_600_000);
  clock.advanceMonotonic(61_000);
  t.equal(m.housekeep(), 1, 'a step back does not keep an unrenewed watch alive past its lease');
  t.throws(() => m.poll('u', w.watchId), { code: ErrorCodes.WATCH_NOT_FOUND });
});
