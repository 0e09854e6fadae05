/**
 * The poller with a fake driver and a hand-moved clock (deterministic, no waiting): status from
 * reads and errors, buckets and staggering, backoff while down and recovery, stale values,
 * disabled connectors and points, configuration changes without restart, kinds and units,
 * history collection by interval and COV in one write per cycle, and what watches see.
 */
import t, { type Test } from 'tap';
import { DriverRegistry } from '../../src/drivers/registry.js';
import { HDict, HNumber, HRef, type HVal, MARKER, REMOVE } from '../../src/haystack/values.js';
import { ManualClock } from '../../src/lib/clock.js';
import { silentLogger } from '../../src/lib/log.js';
import { Model } from '../../src/model/model.js';
import { PointState } from '../../src/model/point-state.js';
import { Poller } from '../../src/poller/poller.js';
import { Store } from '../../src/store/db.js';
import { HistoryStore, toSamples } from '../../src/store/history.js';
import { RecordStore } from '../../src/store/records.js';
import { FakeDriver } from '../helpers/fake-driver.js';
import { prng } from '../helpers/prng.js';
import { tempDir } from '../helpers/tmp.js';

const T0 = Date.UTC(2024, 0, 1);

interface World {
  model: Model;
  history: HistoryStore;
  clock: ManualClock;
  fake: FakeDriver;
  poller: Poller;
  writes: number;
  written: string[][];
  /** Moves the clock in steps, running what is due at each. */
  run(ms: number, step?: number): Promise<void>;
  create(...rows: Record<string, HVal>[]): Promise<void>;
  update(...rows: Record<string, HVal>[]): Promise<void>;
  cur(id: string): { val: HVal | undefined; status: HVal | undefined; err: HVal | undefined };
}

async function world(t: Test, opts: { backoff?: { minMs?: number; maxMs?: number }; start?: number } = {}): Promise<World> {
  const store = await Store.open(tempDir(t));
  const clock = new ManualClock(opts.start ?? T0);
  const model = await Model.load({ records: new RecordStore(store), clock });
  const history = new HistoryStore(store);
  await history.start();
  const fake = new FakeDriver();
  const w = { model, history, clock, fake, writes: 0, written: [] as string[][] } as World;
  const writePolled = history.writePolled.bind(history);
  history.writePolled = async (writes) => {
    w.writes++;
    w.written.push(writes.map((x) => x.pointId));
    return writePolled(writes);
  };
  const points = new PointState({ model, history, drivers: [fake] });
  await points.start();
  w.poller = new Poller({
    model,
    points,
    history,
    drivers: new DriverRegistry([fake]),
    clock,
    log: silentLogger(),
    timers: false,
    ...(opts.backoff ? { backoff: opts.backoff } : {}),
  });
  t.teardown(async () => {
    await w.poller.stop();
    await points.stop();
    await history.stop();
    await store.close();
  });
  w.run = async (ms, step = 100) => {
    for (let done = 0; done < ms; done += step) {
      clock.advance(Math.min(step, ms - done));
      await w.poller.tick();
    }
  };
  w.create = async (...rows) => void (await model.create(rows.map((r) => HDict.of(r))));
  w.update = async (...rows) => void (await model.update(rows.map((r) => HDict.of(r))));
  w.cur = (id) => {
    const r = model.get(id);
    return { val: r?.get('curVal'), status: r?.get('curStatus'), err: r?.get('curErr') };
  };
  return w;
}

const ref = (id: string): HRef => new HRef(id);
const num = (v: number, unit: string | null = null): HNumber => new HNumber(v, unit);
const conn = (id: string, uri: string, extra: Record<string, HVal> = {}): Record<string, HVal> => ({ id: ref(id), conn: MARKER, fakeConn: MARKER, uri, pollTime: num(1, 's'), ...extra });
const pt = (id: string, c: string, cur: string, extra: Record<string, HVal> = {}): Record<string, HVal> => ({
  id: ref(id),
  point: MARKER,
  cur: MARKER,
  kind: 'Number',
  fakeConnRef: ref(c),
  fakeCur: cur,
  ...extra,
});

t.test('points read ok with curVal in their unit; connectors ok', async (t) => {
  const w = await world(t);
  w.fake.device('d1').set({ a: 21.5, b: true, c: 'hello', d: 3 });
  await w.create(
    conn('c1', 'd1'),
    pt('p1', 'c1', 'a', { unit: '°C' }),
    pt('p2', 'c1', 'b', { kind: 'Bool' }),
    pt('p3', 'c1', 'c', { kind: 'Str' }),
    pt('p4', 'c1', 'd', { kind: 'Bool' }),
    pt('p5', 'c1', 'b'),
  );
  w.poller.start();
  t.same(w.cur('p1'), { val: undefined, status: 'unknown', err: undefined }, 'unknown until read');
  await w.run(1100);
  t.same(w.cur('p1'), { val: num(21.5, '°C'), status: 'ok', err: undefined });
  t.same(w.cur('p2').val, true);
  t.same(w.cur('p3').val, 'hello');
  t.same(w.cur('p4').val, true, 'a number read into a Bool point');
  t.same(w.cur('p5').val, num(1), 'a bool read into a Number point');
  t.equal(w.model.get('c1')?.get('connStatus'), 'ok');
  t.equal(w.fake.device('d1').reads.length, 2, 'read at once (the first bucket of a poll time has no offset), then at its place in the next second (50 ms in)');
  t.same(w.fake.device('d1').reads[0], ['a', 'b', 'c', 'd', 'b'], 'all points in one driver call');
  await w.run(3000);
  t.equal(w.fake.device('d1').reads.length, 5, 'once a second');
});

t.test('buckets by poll time; first polls staggered over the poll time', async (t) => {
  const w = await world(t);
  const rows: Record<string, HVal>[] = [];
  for (let i = 0; i < 8; i++) {
    w.fake.device(`d${i}`).set({ a: i });
    rows.push(conn(`c${i}`, `d${i}`, { pollTime: num(4, 's') }), pt(`p${i}`, `c${i}`, 'a'));
  }
  w.fake.device('d0').set({ fast: 1 });
  rows.push(pt('fast', 'c0', 'fast', { pollTime: num(1, 's') }));
  await w.create(...rows);
  w.poller.start();
  const first = new Map<string, number>();
  for (let ms = 0; ms < 4200; ms += 50) {
    await w.run(50, 50);
    for (let i = 0; i < 8; i++) if (!first.has(`d${i}`) && w.fake.device(`d${i}`).reads.length > 0) first.set(`d${i}`, ms + 50);
  }
  t.equal(first.size, 8, 'every device read within its poll time');
  const times = [...first.values()].sort((a, b) => a - b);
  t.ok(new Set(times).size >= 6, `first polls spread out: ${times.join(', ')}`);
  t.ok(Math.max(...times) - Math.min(...times) >= 2000, 'over most of the poll time');
  const d0 = w.fake.device('d0').reads;
  t.equal(d0.filter((r) => r.includes('fast')).length, 5, 'the 1 s bucket of c0 read every second (at once, then 50 ms into each second)');
  t.equal(d0.filter((r) => r.includes('a')).length, 2, 'its 4 s bucket at once and 200 ms into the next 4 s');
  t.ok(d0.every((r) => r.length === 1), 'buckets are separate reads');
  t.same(w.poller.stats().buckets, 9);
});

t.test('a device that is down: down with curErr, backoff, back to ok by itself; others unaffected', async (t) => {
  const w = await world(t, { backoff: { minMs: 1000, maxMs: 8000 } });
  const d1 = w.fake.device('d1');
  const d2 = w.fake.device('d2');
  d1.set({ a: 1 });
  d2.set({ a: 2 });
  await w.create(conn('c1', 'd1'), conn('c2', 'd2'), pt('p1', 'c1', 'a', { unit: 'kW' }), pt('p2', 'c2', 'a'));
  w.poller.start();
  await w.run(1000);
  t.equal(w.cur('p1').status, 'ok');
  d1.down = true;
  const before = d1.reads.length;
  await w.run(1000);
  t.same(w.cur('p1'), { val: undefined, status: 'down', err: 'device d1 does not answer' }, 'down, no curVal, curErr says why');
  t.equal(w.model.get('c1')?.get('connStatus'), 'down');
  t.equal(w.model.get('c1')?.get('connErr'), 'device d1 does not answer');
  // Retries after 1, 2, 4, 8, 8 s: in 30 s about 6 attempts instead of 30.
  await w.run(30_000);
  const attempts = d1.reads.length - before;
  t.ok(attempts >= 5 && attempts <= 8, `backed off: ${attempts} attempts in 31 s`);
  t.equal(w.cur('p2').status, 'ok', 'the other device is fine');
  t.ok(d2.reads.length >= 31, `and read every second (${d2.reads.length})`);
  d1.down = false;
  await w.run(9000);
  t.same(w.cur('p1'), { val: num(1, 'kW'), status: 'ok', err: undefined }, 'ok again by itself');
  t.equal(w.model.get('c1')?.get('connStatus'), 'ok');
  t.equal(w.model.get('c1')?.get('connErr'), undefined);
  const n = d1.reads.length;
  await w.run(3000);
  t.equal(d1.reads.length - n, 3, 'and read every second again');
});

t.test('a hanging device never delays the others', async (t) => {
  const w = await world(t);
  const slow = w.fake.device('slow');
  slow.set({ a: 1 });
  slow.hang = true;
  w.fake.device('fast').set({ a: 2 });
  await w.create(conn('c1', 'slow'), conn('c2', 'fast'), pt('p1', 'c1', 'a'), pt('p2', 'c2', 'a'));
  w.poller.start();
  // tick() waits for the reads it starts; run the clock without waiting on the hanging one.
  for (let i = 0; i < 50; i++) {
    w.clock.advance(100);
    void w.poller.tick();
    await new Promise((r) => setImmediate(r));
  }
  t.equal(slow.hanging, 1, 'one read of the slow device, still waiting; no second one queued behind it');
  t.ok(w.fake.device('fast').reads.length >= 4, 'the fast device is read every second meanwhile');
  t.equal(w.cur('p2').status, 'ok');
  slow.hang = false;
  slow.release();
  await w.run(1000);
  t.equal(w.cur('p1').status, 'ok');
});

t.test('stale: no fresh value within the stale time keeps curVal as stale', async (t) => {
  const w = await world(t);
  const d = w.fake.device('d1');
  d.set({ a: 5 });
  await w.create(conn('c1', 'd1', { staleTime: num(5, 's') }), pt('p1', 'c1', 'a'));
  w.poller.start();
  await w.run(1000);
  t.equal(w.cur('p1').status, 'ok');
  d.hang = true;
  for (let i = 0; i < 70; i++) {
    w.clock.advance(100);
    void w.poller.tick();
    await new Promise((r) => setImmediate(r));
  }
  t.same(w.cur('p1'), { val: num(5), status: 'stale', err: undefined }, 'stale with its last value');
  d.hang = false;
  d.set({ a: 6 });
  d.release();
  await w.run(1000);
  t.same(w.cur('p1'), { val: num(6), status: 'ok', err: undefined }, 'ok again with a fresh value');
});

t.test('faults: bad configuration, refused points, kinds and units; the rest keeps working', async (t) => {
  const w = await world(t);
  w.fake.device('d1').set({ a: 1, txt: 'x' });
  w.fake.device('d1').refuse.add('gone');
  await w.create(
    { id: ref('site'), site: MARKER },
    conn('c1', 'd1'),
    conn('cbad', 'bad-device', { name: 'boilerPlc' }),
    conn('cpoll', 'd1', { pollTime: num(5) }),
    pt('ok', 'c1', 'a'),
    pt('badcur', 'c1', 'bad:1'),
    pt('refused', 'c1', 'gone'),
    pt('nokind', 'c1', 'a', { kind: REMOVE }),
    pt('coord', 'c1', 'a', { kind: 'Coord' }),
    pt('badunit', 'c1', 'a', { unit: 'not a unit' }),
    pt('textnum', 'c1', 'txt'),
    pt('badpoll', 'c1', 'a', { pollTime: num(1, 'parsec') }),
    pt('badhis', 'c1', 'a', { his: MARKER, hisCollectInterval: num(1) }),
    pt('viaBadConn', 'cbad', 'a'),
    pt('viaBadPoll', 'cpoll', 'a'),
    pt('notAConn', 'site', 'a'),
  );
  w.poller.start();
  await w.run(1000);
  t.equal(w.cur('ok').status, 'ok');
  const fault = (id: string, re: RegExp): void => {
    const c = w.cur(id);
    t.equal(c.status, 'fault', `${id} is fault`);
    t.equal(c.val, undefined, `${id} has no curVal`);
    t.match(String(c.err), re, `${id}: ${String(c.err)}`);
  };
  fault('badcur', /fakeCur bad:1 is not an address/);
  fault('refused', /has no gone/);
  fault('nokind', /kind must be Number, Bool or Str/);
  fault('coord', /not "Coord"/);
  fault('badunit', /not a valid unit/);
  fault('textnum', /sent text/);
  fault('badpoll', /pollTime unit "parsec"/);
  fault('badhis', /hisCollectInterval .*no unit/);
  fault('viaBadConn', /^connector boilerPlc: uri bad-device/);
  fault('viaBadPoll', /^connector @cpoll: pollTime 5 has no unit/);
  fault('notAConn', /fakeConnRef @site is not a fakeConn record/);
  t.equal(w.model.get('cbad')?.get('connStatus'), 'fault');
  t.match(w.model.get('cbad')?.get('connErr'), /names no fake device/);
  // Fixing the configuration is picked up without a restart.
  await w.update({ id: ref('badcur'), fakeCur: 'a' }, { id: ref('cbad'), uri: 'd1' }, { id: ref('nokind'), kind: 'Number' });
  await w.run(1000);
  for (const id of ['badcur', 'viaBadConn', 'nokind']) t.equal(w.cur(id).status, 'ok', `${id} fixed`);
  t.equal(w.model.get('cbad')?.get('connStatus'), 'ok');
});

t.test('disabled connectors and points', async (t) => {
  const w = await world(t);
  const d = w.fake.device('d1');
  d.set({ a: 1 });
  await w.create(conn('c1', 'd1', { disabled: MARKER }), conn('c2', 'd1'), pt('p1', 'c1', 'a'), pt('p2', 'c2', 'a', { disabled: MARKER }), pt('p3', 'c2', 'a'));
  w.poller.start();
  await w.run(2000);
  t.same(w.cur('p1'), { val: undefined, status: 'disabled', err: undefined });
  t.same(w.cur('p2').status, 'disabled');
  t.equal(w.model.get('c1')?.get('connStatus'), 'disabled');
  t.ok(d.reads.every((r) => r.length === 1), 'only p3 is read');
  await w.update({ id: ref('c1'), disabled: REMOVE }, { id: ref('p2'), disabled: REMOVE });
  await w.run(1000);
  t.equal(w.cur('p1').status, 'ok');
  t.equal(w.cur('p2').status, 'ok');
  await w.update({ id: ref('c1'), disabled: MARKER });
  t.same(w.cur('p1'), { val: undefined, status: 'disabled', err: undefined }, 'disabled at once, curVal gone');
});

t.test('configuration changes are picked up without a restart', async (t) => {
  const w = await world(t);
  const d1 = w.fake.device('d1');
  const d2 = w.fake.device('d2');
  d1.set({ a: 1, b: 2 });
  d2.set({ a: 10 });
  await w.create(conn('c1', 'd1'));
  w.poller.start();
  await w.create(pt('p1', 'c1', 'a'));
  await w.run(1000);
  t.same(w.cur('p1').val, num(1), 'a point created after start');
  await w.update({ id: ref('p1'), fakeCur: 'b' });
  await w.run(1000);
  t.same(w.cur('p1').val, num(2), 'a new address');
  await w.update({ id: ref('c1'), uri: 'd2' }, { id: ref('p1'), fakeCur: 'a' });
  await w.run(1000);
  t.same(w.cur('p1').val, num(10), 'a connector pointed at another device');
  t.ok(w.fake.closed >= 1, 'the old connection was closed');
  const n2 = d2.reads.length;
  await w.update({ id: ref('c1'), pollTime: num(2, 's') });
  await w.run(8000);
  const n2b = d2.reads.length - n2;
  t.ok(n2b >= 4 && n2b <= 5, `a new poll time: ${n2b} reads in 8 s`);
  await w.update({ id: ref('p1'), fakeConnRef: REMOVE });
  t.same(w.cur('p1'), { val: undefined, status: undefined, err: undefined }, 'no longer polled: its cur tags are gone');
  t.equal(w.poller.stats().points, 0);
  await w.update({ id: ref('p1'), fakeConnRef: ref('c1') });
  await w.run(2000);
  t.equal(w.cur('p1').status, 'ok', 'polled again');
  await w.model.delete(['p1', 'c1']);
  t.same(w.poller.stats(), { ...w.poller.stats(), connectors: 0, points: 0, buckets: 0 }, 'deleted: nothing left');
  const n = d2.reads.length;
  await w.run(3000);
  t.equal(d2.reads.length, n, 'and nothing read');
});

t.test('history: by interval and by COV, one write per poll cycle', async (t) => {
  const w = await world(t);
  const d = w.fake.device('d1');
  d.set({ a: 1, b: 1, c: 1, e: false, s: 'x' });
  await w.create(
    conn('c1', 'd1'),
    pt('iv', 'c1', 'a', { his: MARKER, hisCollectInterval: num(1, 'min'), unit: 'kW' }),
    pt('cov', 'c1', 'b', { his: MARKER, hisCollectCov: MARKER }),
    pt('tol', 'c1', 'c', { his: MARKER, hisCollectCov: num(0.5) }),
    pt('both', 'c1', 'a', { his: MARKER, hisCollectCov: MARKER, hisCollectInterval: num(30, 's') }),
    pt('bool', 'c1', 'e', { his: MARKER, kind: 'Bool', hisCollectCov: MARKER }),
    pt('str', 'c1', 's', { his: MARKER, kind: 'Str', hisCollectCov: MARKER }),
    pt('nohis', 'c1', 'a', { hisCollectCov: MARKER }),
    pt('nocollect', 'c1', 'a', { his: MARKER }),
  );
  w.poller.start();
  // Values change over 3 minutes of 1 s polls (read 50 ms into each second, here at the 100 ms tick).
  for (let s = 0; s < 181; s++) {
    await w.run(1000);
    if (s === 10) d.set({ b: 2, c: 1.3, e: true });
    if (s === 20) d.set({ b: 2, c: 1.6, s: 'y' });
    if (s === 30) d.set({ c: 1.2, a: 5 });
  }
  const his = async (id: string): Promise<{ ts: number; val: unknown }[]> => toSamples(await w.history.read(id));
  const iv = await his('iv');
  t.same(
    iv.map((x) => x.ts - T0),
    [100, 60_100, 120_100, 180_100],
    'interval: the first read, then the first read of each minute',
  );
  t.same(iv.map((x) => x.val), [1, 5, 5, 5]);
  t.same((await his('cov')).map((x) => x.val), [1, 2], 'COV: every change');
  t.same((await his('tol')).map((x) => x.val), [1, 1.6], 'COV 0.5: moves of 0.5 or more from the last sample');
  t.same((await his('bool')).map((x) => x.val), [false, true]);
  t.same((await his('str')).map((x) => x.val), ['x', 'y']);
  const both = (await his('both')).map((x) => (x.ts - T0) / 1000);
  t.same(both, [0.1, 30.1, 31.1, 60.1, 90.1, 120.1, 150.1, 180.1], 'interval and COV: every 30 s, and at the change');
  t.same((await his('nohis')).length, 0, 'no his marker, no history');
  t.same((await his('nocollect')).length, 0, 'no collect tag, no history');
  t.ok(w.writes <= 180, `one write per poll cycle at most (${w.writes} for 180 cycles)`);
  t.ok(w.written.some((ids) => ids.length > 1), 'several points in one write');
  t.ok(w.written.flat().includes('iv'), 'the writes name the points');
  t.same(w.model.get('iv')?.get('hisSize'), HNumber.of(4), 'point state shows the collected history in hisSize');
});

t.test('history every second with reads running late: a sample in every second of the wall clock', async (t) => {
  // Started 950 ms into a second: a bucket kept at that place would read across the second's end
  // whenever it ran late, leaving one second with two samples and the one before with none.
  const w = await world(t, { start: T0 + 950 });
  w.fake.device('d1').set({ a: 1 });
  await w.create(conn('c1', 'd1'), pt('p', 'c1', 'a', { his: MARKER, hisCollectInterval: num(1, 's'), pollTime: num(1, 's') }));
  w.poller.start();
  // The event loop runs the reads up to 300 ms late: the poller runs every 20-300 ms, at random.
  const late = prng(7);
  for (let i = 0; i < 1200; i++) {
    const step = Math.round(20 + late() * 280);
    await w.run(step, step);
  }
  const seconds = toSamples(await w.history.read('p')).map((x) => Math.floor((x.ts - T0) / 1000));
  const first = seconds[0] as number;
  const last = seconds[seconds.length - 1] as number;
  t.ok(last - first > 100, `${last - first} seconds collected`);
  const missing = [];
  for (let s = first; s <= last; s++) if (!seconds.includes(s)) missing.push(s);
  t.same(missing, [], 'no second without a sample');
});

t.test('a point whose history is of another kind is left out of the batch, not the others', async (t) => {
  const w = await world(t);
  w.fake.device('d1').set({ a: true, b: 2 });
  await w.create(conn('c1', 'd1'), pt('p1', 'c1', 'a', { kind: 'Bool', his: MARKER, hisCollectCov: MARKER }), pt('p2', 'c1', 'b', { his: MARKER, hisCollectCov: MARKER }));
  await w.history.write('p1', 'Number', [{ ts: T0 - 1000, val: 3 }]);
  w.poller.start();
  await w.run(2000);
  t.equal(toSamples(await w.history.read('p2')).length, 1, 'the other point got its sample');
  t.equal(toSamples(await w.history.read('p1')).length, 1, 'the mismatched point kept its old history only');
});

t.test('watches see every change, and only changes', async (t) => {
  const w = await world(t);
  const d = w.fake.device('d1');
  d.set({ a: 1 });
  await w.create(conn('c1', 'd1'), pt('p1', 'c1', 'a'));
  const seen: string[][] = [];
  w.model.events.on('live.changed', seen, (id, changed) => {
    if (id === 'p1') seen.push([...changed].sort());
  });
  w.poller.start();
  await w.run(1000);
  await w.run(5000);
  d.set({ a: 2 });
  await w.run(1000);
  d.down = true;
  await w.run(1000);
  d.down = false;
  await w.run(2000);
  t.same(seen, [['curStatus'], ['curStatus', 'curVal'], ['curVal'], ['curErr', 'curStatus', 'curVal'], ['curErr', 'curStatus', 'curVal']]);
});

t.test('stop ends polling and closes connections', async (t) => {
  const w = await world(t);
  const d = w.fake.device('d1');
  d.set({ a: 1 });
  await w.create(conn('c1', 'd1'), pt('p1', 'c1', 'a'));
  w.poller.start();
  await w.run(1000);
  await w.poller.stop();
  t.equal(w.fake.closed, w.fake.opened, 'every connection closed');
  const n = d.reads.length;
  await w.run(3000);
  t.equal(d.reads.length, n, 'no reads after stop');
  await w.poller.stop();
});
