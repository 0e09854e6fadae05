/**
 * Wall-clock steps (issue 28, "Clock"): the poller's schedule (buckets, stale detection, backoff,
 * collection intervals) run on the monotonic clock (the write queue: write-queue.test.ts), so a step of the wall
 * clock either way neither stops nor floods them; samples stay dated on the wall clock.
 */
import t, { type Test } from 'tap';
import { DriverRegistry } from '../../src/drivers/registry.js';
import { HDict, HNumber, HRef, type HVal, MARKER } from '../../src/haystack/values.js';
import { ManualClock } from '../../src/lib/clock.js';
import { silentLogger } from '../../src/lib/log.js';
import { Model } from '../../src/model/model.js';
import { PointState } from '../../src/model/point-state.js';
import { Poller } from '../../src/poller/poller.js';
import { HisCollector } from '../../src/poller/his-collector.js';
import { Store } from '../../src/store/db.js';
import { HistoryStore, toSamples } from '../../src/store/history.js';
import { RecordStore } from '../../src/store/records.js';
import { FakeDriver } from '../helpers/fake-driver.js';
import { tempDir } from '../helpers/tmp.js';

const T0 = Date.UTC(2024, 0, 1, 12);
const HOUR = 3_600_000;

interface World {
  model: Model;
  history: HistoryStore;
  clock: ManualClock;
  fake: FakeDriver;
  poller: Poller;
  /** `ms` of time pass in steps, running what is due at each. */
  run(ms: number, step?: number): Promise<void>;
}

async function world(t: Test, trust?: { trusted(): boolean }): Promise<World> {
  const store = await Store.open(tempDir(t));
  const clock = new ManualClock(T0);
  const model = await Model.load({ records: new RecordStore(store), clock });
  const history = new HistoryStore(store);
  await history.start();
  const fake = new FakeDriver();
  const points = new PointState({ model, history, drivers: [fake] });
  await points.start();
  const poller = new Poller({ model, points, history, drivers: new DriverRegistry([fake]), clock, log: silentLogger(), timers: false, backoff: { minMs: 1000, maxMs: 4000 }, ...(trust ? { trust } : {}) });
  t.teardown(async () => {
    await poller.stop();
    await points.stop();
    await history.stop();
    await store.close();
  });
  return {
    model,
    history,
    clock,
    fake,
    poller,
    run: async (ms, step = 100) => {
      for (let done = 0; done < ms; done += step) {
        clock.advance(Math.min(step, ms - done));
        await poller.tick();
      }
    },
  };
}

const ref = (id: string): HRef => new HRef(id);
const num = (v: number, unit: string | null = null): HNumber => new HNumber(v, unit);
const rows = (...r: Record<string, HVal>[]): HDict[] => r.map((x) => HDict.of(x));
const conn = (id: string): Record<string, HVal> => ({ id: ref(id), conn: MARKER, fakeConn: MARKER, uri: 'd1', pollTime: num(1, 's'), staleTime: num(5, 's') });

t.test('a wall-clock step back of 1 h: polling and interval collection go on, samples dated on the wall clock', async (t) => {
  const w = await world(t);
  const d = w.fake.device('d1');
  d.set({ a: 1 });
  await w.model.create(rows(conn('c1'), { id: ref('p1'), point: MARKER, cur: MARKER, kind: 'Number', fakeConnRef: ref('c1'), fakeCur: 'a', his: MARKER, hisCollectInterval: num(10, 's') }));
  w.poller.start();
  await w.run(3000);
  t.same(w.model.get('p1')?.get('curVal'), num(1));
  const before = d.reads.length;

  w.clock.stepWall(-HOUR);
  for (let i = 2; i <= 31; i++) {
    d.set({ a: i });
    await w.run(1000);
    t.same(w.model.get('p1')?.get('curVal'), num(i), `curVal follows the device ${i - 1} s after the step`);
  }
  t.equal(w.model.get('p1')?.get('curStatus'), 'ok', 'never stale');
  t.ok(d.reads.length - before >= 29 && d.reads.length - before <= 31, `one read a second through the step (${d.reads.length - before} in 30 s)`);

  const ts = toSamples(await w.history.read('p1')).map((s) => s.ts);
  const after = ts.filter((x) => x < T0);
  t.ok(after.length >= 3, `collection goes on every 10 s after the step (${after.length} samples)`);
  t.ok(
    after.every((x) => x >= T0 - HOUR && x < T0 - HOUR + 40_000),
    'and dated on the stepped wall clock',
  );
});

t.test('a wall-clock step forward of 1 h: no flood of reads, nothing made stale', async (t) => {
  const w = await world(t);
  const d = w.fake.device('d1');
  d.set({ a: 1 });
  await w.model.create(rows(conn('c1'), { id: ref('p1'), point: MARKER, cur: MARKER, kind: 'Number', fakeConnRef: ref('c1'), fakeCur: 'a' }));
  w.poller.start();
  await w.run(3000);
  const seen: unknown[] = [];
  w.model.events.on('live.changed', seen, (id, changed) => {
    if (changed.includes('curStatus')) seen.push(w.model.get(id)?.get('curStatus'));
  });
  t.teardown(() => w.model.events.off(seen));
  const before = d.reads.length;
  w.clock.stepWall(HOUR);
  await w.run(10_000);
  t.ok(d.reads.length - before <= 11, `one read a second (${d.reads.length - before} in 10 s)`);
  t.same(seen, [], 'curStatus never left ok (a stale check on the wall clock calls the point stale at the step)');
});

t.test('a down connector is retried on its backoff whatever the wall clock does', async (t) => {
  const w = await world(t);
  const d = w.fake.device('d1');
  d.set({ a: 1 });
  await w.model.create(rows(conn('c1'), { id: ref('p1'), point: MARKER, cur: MARKER, kind: 'Number', fakeConnRef: ref('c1'), fakeCur: 'a' }));
  d.down = true;
  w.poller.start();
  await w.run(2000);
  t.equal(w.model.get('c1')?.get('connStatus'), 'down');
  w.clock.stepWall(-HOUR);
  d.down = false;
  d.set({ a: 2 });
  await w.run(5000);
  t.equal(w.model.get('c1')?.get('connStatus'), 'ok', 'retried within its backoff (4 s at most)');
  t.same(w.model.get('p1')?.get('curVal'), num(2));
});

t.test('while the clock cannot be trusted: polling goes on, collected history is held, then written re-dated', async (t) => {
  let trusted = false;
  const w = await world(t, { trusted: () => trusted });
  // The Pi booted in 1970 (no RTC); NTP will step the clock.
  w.clock.stepWall(Date.UTC(1970, 0, 1) - w.clock.now());
  const d = w.fake.device('d1');
  d.set({ a: 1 });
  await w.model.create(rows(conn('c1'), { id: ref('p1'), point: MARKER, cur: MARKER, kind: 'Number', fakeConnRef: ref('c1'), fakeCur: 'a', his: MARKER, hisCollectCov: MARKER }));
  w.poller.start();
  for (let i = 1; i <= 5; i++) {
    d.set({ a: i });
    await w.run(1000);
  }
  t.same(w.model.get('p1')?.get('curVal'), num(5), 'live values go on');
  // The monotonic clock has fractions of a ms (performance.now()); history stores whole ms.
  w.clock.advanceMonotonic(0.25);
  t.equal(toSamples(await w.history.read('p1')).length, 0, 'nothing stored under a 1970 date');
  t.equal(w.poller.stats().hisBacklog, 0);

  // NTP sets the clock; 2 s later the clock is known good.
  w.clock.stepWall(T0 - w.clock.now());
  await w.run(2000);
  trusted = true;
  d.set({ a: 6 });
  await w.run(1000);
  const samples = toSamples(await w.history.read('p1'));
  t.same(samples.map((x) => x.val), [1, 2, 3, 4, 5, 6], 'every held sample written, in order, with the first after trust');
  t.same(
    samples.map((x) => x.ts - T0),
    // Read at monotonic +100 ms, then 50 ms into each second (at the 100 ms tick: +1.1 s ... +4.1 s);
    // the step at +5 s; trusted at +7 s, and 6 read at +7.1 s.
    [-4900, -3900, -2900, -1900, -900, 2100],
    'held samples dated by the monotonic time since their read',
  );
  t.ok(samples.every((x) => x.ts > Date.UTC(2000, 0, 1)), 'none in 1970');
});

t.test('the hold is bounded: the oldest go first, counted', async (t) => {
  const clock = new ManualClock(0);
  const written: number[] = [];
  const history = {
    kindOf: () => undefined,
    writePolled: async (ws: { val: unknown[] }[]) => {
      written.push(...ws.flatMap((x) => x.val as number[]));
      return [];
    },
  };
  let trusted = false;
  const c = new HisCollector({ history: history as never, log: silentLogger(), clock, trust: { trusted: () => trusted }, maxHeld: 10 });
  const point = { id: 'p', kind: 'Number' as const, plan: { intervalMs: undefined, cov: 0 }, lastSlot: -Infinity, lastVal: undefined };
  for (let i = 0; i < 25; i++) {
    c.offer(point, i, clock.now());
    c.flush();
    clock.advance(1000);
  }
  t.ok(c.heldCount <= 10, `at most maxHeld held (${c.heldCount})`);
  t.equal(c.heldDropped + c.heldCount, 25, 'what is not held was counted as dropped');
  trusted = true;
  await c.idle();
  t.same(written, Array.from({ length: c.heldDropped === 0 ? 25 : 25 - c.heldDropped }, (_, k) => k + c.heldDropped), 'the newest are written');
});
