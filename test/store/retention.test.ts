/**
 * History retention on a real LevelDB store (store/retention.ts, store/rollups.ts): raw samples
 * bounded by age and by count, rolled up into 15-minute buckets before they go, rollups under
 * their own age, the store's size bound and the disk floor making room oldest first, a roll a
 * crash interrupted finished at start, and nothing while the clock is untrusted. Time is a
 * ManualClock; runs are driven by hand (timers off).
 */
import type { Writable } from 'node:stream';
import t, { type Test } from 'tap';
import { ManualClock } from '../../src/lib/clock.js';
import { createLogger } from '../../src/lib/log.js';
import { Store } from '../../src/store/db.js';
import { type AggFunction, aggregate } from '../../src/store/his-aggregate.js';
import { type HisValue, HistoryStore } from '../../src/store/history.js';
import { storeSizeBytes } from '../../src/store/backup.js';
import { Retention, type RetentionOptions } from '../../src/store/retention.js';
import type { RetentionPolicy } from '../../src/store/retention-policy.js';
import { DAY_MS, ROLLUP_MS, RollupStore } from '../../src/store/rollups.js';
import { prng } from '../helpers/prng.js';
import { tempDir } from '../helpers/tmp.js';

const MIN = 60_000;
const HOUR = 3_600_000;
const T0 = Date.UTC(2025, 0, 1);

interface World {
  store: Store;
  his: HistoryStore;
  rollups: RollupStore;
  clock: ManualClock;
  logs: string[];
  retention(o?: Partial<RetentionOptions>): Retention;
  close(): Promise<void>;
}

async function world(t: Test, dir = tempDir(t), policy: (id: string) => RetentionPolicy = () => ({ rawMs: DAY_MS, rollupMs: null, maxSamples: null })): Promise<World> {
  const store = await Store.open(dir);
  const his = new HistoryStore(store, { chunkSize: 64 });
  await his.start();
  const rollups = new RollupStore(store);
  await rollups.start();
  const clock = new ManualClock(T0);
  const logs: string[] = [];
  const log = createLogger({ level: 'debug', destination: { write: (s: string) => void logs.push(s) } as unknown as Writable });
  const made: Retention[] = [];
  let closed = false;
  const w: World = {
    store,
    his,
    rollups,
    clock,
    logs,
    retention: (o = {}) => {
      const r = new Retention({ history: his, rollups, store, clock, log, policy, maxStoreBytes: 0, timers: false, ...o });
      made.push(r);
      return r;
    },
    close: async () => {
      if (closed) return;
      closed = true;
      for (const r of made) await r.stop();
      await his.stop();
      await store.close();
    },
  };
  t.teardown(() => w.close());
  return w;
}


/** `n` samples every `step` ms from `t0`: a sensor-like curve (0.1 steps). */
function curve(t0: number, n: number, step: number, seed = 1): { ts: number[]; val: number[] } {
  const rnd = prng(seed);
  const ts: number[] = [];
  const val: number[] = [];
  let v = 20;
  for (let i = 0; i < n; i++) {
    ts.push(t0 + i * step);
    v = Math.round((v + (rnd() - 0.5)) * 10) / 10;
    val.push(v);
  }
  return { ts, val };
}

async function writeCurve(his: HistoryStore, id: string, c: { ts: number[]; val: number[] }): Promise<void> {
  await his.writeMany([{ pointId: id, kind: 'Number', ts: c.ts, val: c.val }]);
}

/** What a GraphQL aggregate answers from what is kept: rollups before the horizon, raw from it. */
async function kept(w: World, id: string, f: AggFunction, start: number, end: number, size: number): Promise<{ ts: number[]; val: unknown[] }> {
  const h = w.rollups.horizon(id);
  const raw = await w.his.read(id, Math.max(start, h), end);
  const rolled = await w.rollups.read(id, start, Math.min(end, h));
  return aggregate([{ ts: raw.ts, val: raw.val, rolled }], f, start, end, { size, offset: 0, fill: 'NONE' }, 10_000);
}

function expected(c: { ts: number[]; val: HisValue[] }, f: AggFunction, start: number, end: number, size: number): { ts: number[]; val: unknown[] } {
  return aggregate([{ ts: c.ts, val: c.val }], f, start, end, { size, offset: 0, fill: 'NONE' }, 10_000);
}

function close(a: { ts: number[]; val: unknown[] }, b: { ts: number[]; val: unknown[] }): boolean {
  if (a.ts.length !== b.ts.length) return false;
  return a.ts.every((x, i) => x === b.ts[i] && Math.abs((a.val[i] as number) - (b.val[i] as number)) < 1e-9);
}

t.test('age: raw samples past retention are rolled up, then removed; aggregates read the same from the rollups', async (t) => {
  const w = await world(t);
  const c = curve(T0, 3 * 1440, MIN);
  await writeCurve(w.his, 'p', c);
  w.clock.set(T0 + 3 * DAY_MS);
  const r = w.retention();
  const sum = await r.runOnce();
  const cut = T0 + 2 * DAY_MS;
  t.equal(w.rollups.horizon('p'), cut, 'the horizon is the cut: now less a day, on a 15-minute boundary');
  const raw = await w.his.read('p');
  t.equal(raw.ts[0], cut, 'raw samples start at the cut');
  t.equal(raw.ts.length, 1440, 'the last day is kept raw');
  t.equal(sum?.samplesDropped, 2 * 1440, 'the run says what it removed');
  t.equal(sum?.bucketsRolled, 2 * 96, 'and how many buckets it rolled');
  t.equal(r.dropped.age, 2 * 1440);
  const rolled = await w.rollups.read('p', -Infinity, Infinity);
  t.equal(rolled.ts.length, 2 * 96, 'one bucket per 15 minutes');
  t.equal(rolled.ts[1]! - rolled.ts[0]!, ROLLUP_MS);
  t.same([...rolled.count].reduce((a, b) => a + b, 0), 2 * 1440, 'every removed sample is counted');
  for (const f of ['MEAN', 'MIN', 'MAX', 'COUNT', 'SUM', 'FIRST', 'LAST', 'SPREAD'] as const) {
    for (const size of [HOUR, DAY_MS, ROLLUP_MS]) {
      t.ok(close(await kept(w, 'p', f, T0, T0 + 3 * DAY_MS, size), expected(c, f, T0, T0 + 3 * DAY_MS, size)), `${f} by ${size / MIN} min: from rollups as from the samples`);
    }
  }
  t.throws(() => aggregate([{ ts: raw.ts, val: raw.val, rolled }], 'STDDEV', T0, T0 + 3 * DAY_MS, undefined, 10), /STDDEV needs the raw samples/, 'STDDEV refuses rollups');
  t.match(w.logs.join(''), /"samplesDropped":2880.*history retention run/, 'a log line for the run');

  // Nothing is due: a second run changes nothing.
  const again = await r.runOnce();
  t.equal(again?.samplesDropped, 0, 'a second run removes nothing');
  t.equal((await w.rollups.read('p', -Infinity, Infinity)).ts.length, 2 * 96, 'and keeps the rollups as they were');
});

t.test('a backlog goes a day of a point per step, and a late sample is rolled in at the next run', async (t) => {
  const w = await world(t);
  const c = curve(T0, 10 * 1440, MIN);
  await writeCurve(w.his, 'a', c);
  await writeCurve(w.his, 'b', curve(T0, 10 * 1440, MIN, 2));
  w.clock.set(T0 + 10 * DAY_MS);
  const r = w.retention({ pointsPerStep: 1 });
  const steps: number[] = [];
  const orig = w.his.deleteSpans.bind(w.his);
  w.his.deleteSpans = async (spans) => {
    for (const s of spans) steps.push((await w.his.read(s.pointId, -Infinity, s.end)).ts.length);
    return orig(spans);
  };
  await r.runOnce();
  w.his.deleteSpans = orig;
  t.equal(steps.length, 18, 'nine days of each point, one day per step');
  t.ok(steps.every((n) => n <= 1440), 'never more than a day of samples at once');
  t.equal((await w.his.read('a')).ts.length, 1440);

  // A backfill older than the horizon: counted in its bucket at the next run, then removed.
  const late = T0 + 5 * MIN + 30_000;
  await w.his.write('a', 'Number', [{ ts: late, val: 1000 }]);
  const before = await w.rollups.read('a', T0, T0 + ROLLUP_MS);
  await r.runOnce();
  const after = await w.rollups.read('a', T0, T0 + ROLLUP_MS);
  t.equal(after.count[0], (before.count[0] as number) + 1, 'the late sample is counted');
  t.equal(after.max[0], 1000, 'and is the bucket maximum');
  t.equal(after.sum[0], (before.sum[0] as number) + 1000, 'and in the sum');
  t.equal((await w.his.read('a', -Infinity, T0 + DAY_MS)).ts.length, 0, 'and the raw sample is gone');
});

t.test('count: hisMaxSamples keeps the newest raw samples; rollups age out under their own bound', async (t) => {
  const policy = (id: string): RetentionPolicy => (id === 'n' ? { rawMs: null, rollupMs: 5 * DAY_MS, maxSamples: 1000 } : { rawMs: null, rollupMs: null, maxSamples: null });
  const w = await world(t, undefined, policy);
  await writeCurve(w.his, 'n', curve(T0, 4000, MIN));
  await writeCurve(w.his, 'keep', curve(T0, 4000, MIN));
  w.clock.set(T0 + 4000 * MIN);
  const r = w.retention();
  await r.runOnce();
  const left = w.his.stats('n').size;
  t.ok(left <= 1000 && left > 1000 - 15, `about 1,000 samples are kept, whole 15-minute buckets removed (${left})`);
  t.equal((await w.his.read('n')).ts.at(-1), T0 + 3999 * MIN, 'the newest ones');
  t.equal(r.dropped.size, 4000 - left, 'counted as size');
  t.equal(w.his.stats('keep').size, 4000, 'a point without bounds keeps everything');
  const rolled = await w.rollups.read('n', -Infinity, Infinity);
  t.equal([...rolled.count].reduce((a, b) => a + b, 0), 4000 - left, 'what went is in the rollups');

  w.clock.set(T0 + 6 * DAY_MS + HOUR);
  await r.runOnce();
  const partly = await w.rollups.read('n', -Infinity, Infinity);
  t.equal(partly.ts[0], T0 + DAY_MS, 'the first day, five days old, is removed; the next is not yet');
  t.equal(w.rollups.state('n')?.oldestDay, T0 + DAY_MS);
  w.clock.set(T0 + 9 * DAY_MS);
  await r.runOnce();
  const older = await w.rollups.read('n', -Infinity, Infinity);
  t.equal(older.ts.length, 0, 'rollups of days older than their five days are removed');
  t.equal(r.bucketsDropped, rolled.ts.length);
  t.equal(w.rollups.state('n')?.oldestDay, Infinity, 'none left');
});

t.test('nothing runs while the clock is not trusted', async (t) => {
  const w = await world(t);
  await writeCurve(w.his, 'p', curve(T0, 3 * 1440, MIN));
  w.clock.set(T0 + 3 * DAY_MS);
  let trusted = false;
  const r = w.retention({ trust: { trusted: () => trusted } });
  t.equal(await r.runOnce(), undefined, 'no run');
  t.equal(await r.makeRoom(), 0, 'no room made either');
  t.equal(w.his.stats('p').size, 3 * 1440, 'nothing removed');
  t.match(r.health(), { ok: true, waiting: /clock is not trusted/ });
  t.match(w.logs.join(''), /retention waits: the clock is not trusted/);
  trusted = true;
  await r.runOnce();
  t.equal(w.his.stats('p').size, 1440, 'runs once the clock is trusted');
});

t.test('a roll a stop interrupted: its raw samples go at the next start, counted once', async (t) => {
  const dir = tempDir(t);
  const w = await world(t, dir);
  const c = curve(T0, 2 * 1440, MIN);
  await writeCurve(w.his, 'p', c);
  const cut = T0 + DAY_MS;
  // The first half of a step: rolled up and marked, the raw samples not yet removed (a crash).
  await w.rollups.roll('p', await w.his.read('p', -Infinity, cut), cut);
  await w.close();
  const w2 = await world(t, dir);
  t.same(await w2.rollups.pending(), [{ id: 'p', cut }], 'the roll is pending after a restart');
  const r = w2.retention();
  await r.start();
  t.same(await w2.rollups.pending(), [], 'finished at start');
  t.equal((await w2.his.read('p')).ts[0], cut, 'the raw samples before the cut are gone');
  w2.clock.set(T0 + 2 * DAY_MS);
  t.ok(close(await kept(w2, 'p', 'COUNT', T0, T0 + 2 * DAY_MS, DAY_MS), { ts: [T0, T0 + DAY_MS], val: [1440, 1440] }), 'each sample counted once');
  t.match(w2.logs.join(''), /finished the rolls a stop interrupted/);
});

t.test('size: past historyMaxBytes the oldest raw samples of all points go first, and the space comes back', async (t) => {
  const w = await world(t, undefined, () => ({ rawMs: null, rollupMs: null, maxSamples: null }));
  const rnd = prng(7);
  // Random floats (8 bytes a sample, the codec's worst): 6 days of 10-second samples, 3 points.
  for (const id of ['x', 'y', 'z']) {
    const ts: number[] = [];
    const val: number[] = [];
    for (let i = 0; i < 6 * 8640; i++) {
      ts.push(T0 + i * 10_000 + (id === 'z' ? DAY_MS : 0));
      val.push(rnd() * 1000);
    }
    await w.his.writeMany([{ pointId: id, kind: 'Number', ts, val }]);
  }
  await w.store.db.compactRange('\x00', '\xff');
  const full = storeSizeBytes(w.store);
  w.clock.set(T0 + 8 * DAY_MS);
  const bound = Math.floor(full * 0.6);
  const r = w.retention({ maxStoreBytes: bound });
  const removed = await r.makeRoom();
  const now = storeSizeBytes(w.store);
  t.ok(now <= bound * 0.95, `the store is back under 95 % of its bound (${now} of ${bound}, was ${full})`);
  t.ok(removed > 0 && r.dropped.room === removed, 'counted as room');
  const starts = ['x', 'y', 'z'].map((id) => w.his.stats(id).start as number);
  t.ok(starts[0]! > T0 && starts[1]! > T0, 'x and y lost their oldest days');
  t.ok(starts[2]! >= starts[0]! - ROLLUP_MS, 'z, which started a day later, is not cut before the others');
  t.equal([...(await w.rollups.read('x', -Infinity, Infinity)).count].reduce((a, b) => a + b, 0), 6 * 8640 - w.his.stats('x').size, 'what went is rolled up');
  t.match(w.logs.join(''), /retention makes room/);
});

t.test('the disk floor: room is made before the floor is reached, never the last day', async (t) => {
  const w = await world(t, undefined, () => ({ rawMs: null, rollupMs: null, maxSamples: null }));
  const rnd = prng(3);
  const ts: number[] = [];
  const val: number[] = [];
  for (let i = 0; i < 4 * 8640; i++) {
    ts.push(T0 + i * 10_000);
    val.push(rnd() * 1000);
  }
  await w.his.writeMany([{ pointId: 'p', kind: 'Number', ts, val }]);
  await w.store.db.compactRange('\x00', '\xff');
  const full = storeSizeBytes(w.store);
  // A disk whose free space is what the store leaves of it: the floor is just under what is free now.
  const disk = full * 2;
  let refreshes = 0;
  const space = {
    floorBytes: Math.floor((disk - full) / 1.1),
    freeBytes: () => disk - storeSizeBytes(w.store),
    refresh: async () => void refreshes++,
  };
  w.clock.set(T0 + 4 * DAY_MS);
  const off = w.retention({ space, maxStoreBytes: 0 });
  t.equal(await off.makeRoom(), 0, 'with size-based retention off (historyMaxBytes 0) no room is made: writes are refused at the floor');
  const r = w.retention({ space, maxStoreBytes: 1024 ** 4 });
  await r.makeRoom();
  t.ok(space.freeBytes() >= 1.5 * space.floorBytes || w.his.stats('p').start! >= T0 + 3 * DAY_MS, 'back above 1.5 times the floor, or only the last day left');
  t.ok(refreshes > 0, 'the free space is read again after each step');
  t.ok(w.his.stats('p').start! <= T0 + 3 * DAY_MS, 'the last day is never removed to make room');

  // Nothing left to remove but the last day: said once, health degraded.
  const tight = { ...space, floorBytes: disk };
  const r2 = w.retention({ space: tight, maxStoreBytes: 1024 ** 4 });
  await r2.makeRoom();
  await r2.makeRoom();
  t.equal(w.his.stats('p').start, T0 + 3 * DAY_MS, 'the last day stays');
  t.match(r2.health(), { ok: true, degraded: /cannot make room/ });
  t.equal(w.logs.filter((l) => l.includes('cannot make room')).length, 1, 'logged once');
});

t.test('Bool and Str points keep count, first and last (and Bool the share of true)', async (t) => {
  const w = await world(t);
  const ts = Array.from({ length: 2 * 96 }, (_, i) => T0 + i * ROLLUP_MS + 60_000);
  await w.his.writeMany([
    { pointId: 'b', kind: 'Bool', ts: [...ts, ...ts.map((x) => x + 60_000)], val: [...ts.map(() => true), ...ts.map(() => false)] },
    { pointId: 's', kind: 'Str', ts, val: ts.map((_, i) => `m${i % 3}`) },
  ]);
  w.clock.set(T0 + 3 * DAY_MS);
  await w.retention().runOnce();
  const b = await w.rollups.read('b', -Infinity, Infinity);
  t.same([b.count[0], b.sum[0], b.min[0], b.max[0], b.first[0], b.last[0]], [2, 1, 0, 1, true, false], 'Bool: count, trues, extremes, first, last');
  t.equal((await kept(w, 'b', 'MEAN', T0, T0 + DAY_MS, DAY_MS)).val[0], 0.5, 'MEAN is the share of true');
  const s = await w.rollups.read('s', -Infinity, Infinity);
  t.same([s.count[0], s.first[0], s.last[0], s.count.length], [1, 'm0', 'm0', 2 * 96], 'Str: count, first, last');
  t.same((await kept(w, 's', 'LAST', T0, T0 + DAY_MS, DAY_MS)).val, ['m2'], 'LAST of a day from rollups');
});

t.test('deleting a point drops its rollups', async (t) => {
  const w = await world(t);
  await writeCurve(w.his, 'p', curve(T0, 2 * 1440, MIN));
  w.clock.set(T0 + 2 * DAY_MS);
  await w.retention().runOnce();
  t.ok(w.rollups.ids().includes('p'));
  await w.rollups.dropPoint('p');
  t.same(w.rollups.ids(), []);
  t.same(await w.store.roll.keys().all(), [], 'no key of it is left');
});

t.test('as a part: runs on its own timers, a few points per step, and stops', async (t) => {
  const w = await world(t);
  for (const id of ['a', 'b', 'c', 'd', 'e']) await writeCurve(w.his, id, curve(T0, 2 * 1440, MIN));
  w.clock.set(T0 + 2 * DAY_MS);
  const r = w.retention({ timers: true, everyMs: HOUR, checkMs: 5, stepGapMs: 1, pointsPerStep: 2 });
  const steps: number[] = [];
  const orig = w.his.deleteSpans.bind(w.his);
  w.his.deleteSpans = async (spans) => {
    steps.push(spans.length);
    return orig(spans);
  };
  await r.start();
  // The first run a minute after start, on the monotonic clock (the wall clock stepping back changes nothing).
  w.clock.stepWall(-30 * DAY_MS);
  w.clock.stepWall(30 * DAY_MS);
  await new Promise((res) => setTimeout(res, 50));
  t.equal(r.lastRun, null, 'not before its first minute');
  w.clock.advanceMonotonic(60_000);
  for (let i = 0; i < 500 && r.lastRun === null; i++) await new Promise((res) => setTimeout(res, 10));
  t.not(r.lastRun, null, 'it ran');
  t.same(steps, [1, 1, 1, 1, 1], 'one point at a time, each its own delete');
  for (const id of ['a', 'b', 'c', 'd', 'e']) t.equal(w.his.stats(id).start, T0 + DAY_MS, `${id} trimmed`);
  t.equal(r.runs, 1, 'one run, not one per check');
  await r.stop();
  w.his.deleteSpans = orig;
});
