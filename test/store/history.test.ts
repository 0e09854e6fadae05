import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { Store } from '../../src/store/db.js';
import { CODEC_DECIMAL, CODEC_DECIMAL_EXC, CODEC_XOR, type HisKind, type HisValue } from '../../src/store/his-codec.js';
import { HistoryStore, toSamples, type HisSample } from '../../src/store/history.js';
import { tempDir } from '../helpers/tmp.js';
import { CRASH_POINTS, crashExpected } from './fixtures/his-crash-data.js';
import { prng } from '../helpers/prng.js';

const MIN = 60_000;
const T0 = Date.UTC(2024, 0, 1);

async function open(dir: string, chunkSize = 8): Promise<{ store: Store; his: HistoryStore }> {
  const store = await Store.open(dir);
  const his = new HistoryStore(store, { chunkSize });
  await his.start();
  return { store, his };
}

async function close(x: { store: Store; his: HistoryStore }): Promise<void> {
  await x.his.stop();
  await x.store.close();
}

/** Values as text that tells NaN, -0 and 0 apart, for exact comparisons. */
function show(v: HisValue): string {
  if (typeof v === 'number') return Object.is(v, -0) ? '-0' : String(v);
  return JSON.stringify(v);
}

function showAll(xs: readonly HisSample[]): string[] {
  return xs.map((s) => `${s.ts}=${show(s.val)}`);
}

async function readAll(his: HistoryStore, id: string, start?: number, end?: number): Promise<HisSample[]> {
  return toSamples(await his.read(id, start, end));
}

/** Kept sorted, last write wins: the model the store is compared to. */
function modelRange(m: Map<number, HisValue> | undefined, start = -Infinity, end = Infinity): HisSample[] {
  if (m === undefined) return [];
  return [...m.entries()]
    .filter(([ts]) => ts >= start && ts < end)
    .sort((a, b) => a[0] - b[0])
    .map(([ts, val]) => ({ ts, val }));
}

async function chunkCodecs(store: Store): Promise<number[]> {
  const out: number[] = [];
  for await (const [k, v] of store.his.iterator()) if (k[0] === 0x43) out.push(v[0] as number);
  return out;
}

t.test('round trips per kind and codec', async (t) => {
  const x = await open(tempDir(t), 8);
  const { his, store } = x;
  const rnd = prng(1);
  const ts = (i: number): number => T0 + i * MIN;
  const cases: [string, HisKind, HisValue[]][] = [
    ['0.1-quantized sensor (decimal)', 'Number', Array.from({ length: 37 }, (_, i) => Math.round((21 + 3 * Math.sin(i / 5) + rnd()) * 10) / 10)],
    ['random floats (XOR)', 'Number', Array.from({ length: 37 }, () => (rnd() - 0.5) * 2 ** (rnd() * 200 - 100))],
    ['special floats', 'Number', [NaN, Infinity, -Infinity, -0, 0, 5e-324, -5e-324, Number.MAX_VALUE, -Number.MAX_VALUE, 1e-300, 1e300, 0.1 + 0.2, 1, 1, NaN, 2 ** 53, -(2 ** 53) - 2, 123456.789]],
    ['step-like setpoint', 'Number', Array.from({ length: 40 }, (_, i) => [21, 22.5, 18][Math.floor(i / 9) % 3] as number)],
    ['bools', 'Bool', Array.from({ length: 29 }, (_, i) => i % 7 < 3)],
    ['strings', 'Str', ['', 'a', '', 'héllo wörld', '日本語', '🌍🚀', 'a\u0000b', 'x'.repeat(5000), 'a', 'a', 'a', '', 'occupied', 'unoccupied', 'occupied']],
  ];
  for (const [name, kind, vals] of cases) {
    const id = `p-${name}`;
    const samples = vals.map((val, i) => ({ ts: ts(i), val }));
    await his.write(id, kind, samples);
    t.same(showAll(await readAll(his, id)), showAll(samples), name);
    t.same(his.stats(id), { kind, size: vals.length, start: ts(0), end: ts(vals.length - 1) }, `${name}: stats`);
  }
  await close(x);
  // And again after reopening.
  const y = await open(store.dir, 8);
  for (const [name, , vals] of cases) {
    t.same(showAll(await readAll(y.his, `p-${name}`)), showAll(vals.map((val, i) => ({ ts: ts(i), val }))), `${name} after reopen`);
  }
  await close(y);
});

t.test('Number chunks take the smaller codec', async (t) => {
  const dir = tempDir(t);
  const x = await open(dir, 64);
  const rnd = prng(2);
  await x.his.write('sensor', 'Number', Array.from({ length: 64 }, (_, i) => ({ ts: T0 + i * MIN, val: Math.round((20 + 2 * Math.sin(i / 9)) * 10) / 10 })));
  t.same(await chunkCodecs(x.store), [CODEC_DECIMAL], 'short decimals: decimal codec');
  await x.his.deleteAll('sensor');
  await x.his.write('rand', 'Number', Array.from({ length: 64 }, (_, i) => ({ ts: T0 + i * MIN, val: rnd() })));
  t.same(await chunkCodecs(x.store), [CODEC_XOR], 'random floats: XOR');
  await x.his.deleteAll('rand');
  await x.his.write('nan', 'Number', Array.from({ length: 64 }, (_, i) => ({ ts: T0 + i * MIN, val: i === 10 ? NaN : i / 10 })));
  t.same(await chunkCodecs(x.store), [CODEC_DECIMAL_EXC], 'a NaN is kept raw beside the decimals (codec 5), not a reason for XOR');
  t.ok(Number.isNaN((await x.his.read('nan')).val[10]));
  await close(x);
});

t.test('timestamps: negative, extreme, irregular', async (t) => {
  const x = await open(tempDir(t), 4);
  const tss = [-(2 ** 53) + 1, -1e15, -86_400_000, -1, 0, 1, 2, 3, 1000, 1001, 1_000_000_000, 4_102_444_800_000, 2 ** 52, 2 ** 53 - 2, 2 ** 53 - 1];
  const samples = tss.map((ts, i) => ({ ts, val: i * 1.5 }));
  await x.his.write('p', 'Number', [...samples].reverse());
  t.same(showAll(await readAll(x.his, 'p')), showAll(samples));
  t.same(showAll(await readAll(x.his, 'p', -1, 2)), showAll(samples.filter((s) => s.ts >= -1 && s.ts < 2)));
  t.same(await x.his.first('p'), samples[0]);
  t.same(await x.his.last('p'), samples[samples.length - 1]);
  await t.rejects(x.his.write('p', 'Number', [{ ts: 1.5, val: 1 }]), { code: 'HL_BAD_VALUE' });
  await t.rejects(x.his.write('p', 'Number', [{ ts: 2 ** 53, val: 1 }]), { code: 'HL_BAD_VALUE' });
  await t.rejects(x.his.write('p', 'Number', [{ ts: NaN, val: 1 }]), { code: 'HL_BAD_VALUE' });
  await close(x);
});

t.test('out-of-order writes and overwrites, in the tail and in sealed chunks', async (t) => {
  const x = await open(tempDir(t), 4);
  const { his } = x;
  const model = new Map<number, HisValue>();
  const put = async (samples: HisSample[]): Promise<void> => {
    await his.write('p', 'Number', samples);
    for (const s of samples) model.set(s.ts, s.val);
  };
  // Same call: the last sample of a timestamp wins, in any order.
  await put([
    { ts: 5, val: 1 },
    { ts: 3, val: 2 },
    { ts: 5, val: 3 },
    { ts: 1, val: 4 },
    { ts: 3, val: 5 },
  ]);
  t.same(showAll(await readAll(his, 'p')), ['1=4', '3=5', '5=3']);
  t.equal(his.stats('p').size, 3);
  // Tail overwrite across calls.
  await put([{ ts: 3, val: 30 }]);
  t.same(showAll(await readAll(his, 'p')), ['1=4', '3=30', '5=3']);
  t.equal(his.stats('p').size, 3, 'an overwrite does not grow the size');
  // Fill past several chunks (chunkSize 4), out of order.
  const more: HisSample[] = [];
  for (let i = 40; i >= 6; i--) more.push({ ts: i, val: i / 10 });
  await put(more);
  t.same(showAll(await readAll(his, 'p')), showAll(modelRange(model)));
  // Overwrites and inserts into sealed chunks: middle, first sample, gaps, before everything.
  await put([
    { ts: 7, val: -7 },
    { ts: 1, val: -1 },
    { ts: 2, val: -2 },
    { ts: 4, val: -4 },
    { ts: 0, val: -0 },
    { ts: -5, val: 55 },
    { ts: 20, val: 0.5 },
    { ts: 20, val: 0.25 },
  ]);
  t.same(showAll(await readAll(his, 'p')), showAll(modelRange(model)));
  t.same(his.stats('p'), { kind: 'Number', size: model.size, start: -5, end: 40 });
  // A split whose second piece starts at the old chunk's key: that piece must survive.
  await his.write('r', 'Number', [10, 20, 30, 40, 50].map((ts) => ({ ts, val: ts })));
  await his.write('r', 'Number', [1, 2, 3, 4, 11, 12].map((ts) => ({ ts, val: -ts })));
  t.same(
    (await his.read('r')).ts,
    new Float64Array([1, 2, 3, 4, 10, 11, 12, 20, 30, 40, 50]),
    'a chunk split keeping the old first timestamp loses nothing',
  );
  // Many inserts into one sealed chunk: it splits instead of growing without bound.
  const sparse = Array.from({ length: 41 }, (_, i) => ({ ts: i * 1000, val: i }));
  await his.write('q', 'Number', sparse);
  const dense = Array.from({ length: 100 }, (_, i) => ({ ts: 5001 + i, val: -i }));
  await his.write('q', 'Number', dense);
  t.same(showAll(await readAll(his, 'q')), showAll(modelRange(new Map([...sparse, ...dense].map((s) => [s.ts, s.val])))));
  let maxChunk = 0;
  for await (const [k, v] of x.store.his.iterator()) if (k[0] === 0x43) maxChunk = Math.max(maxChunk, new DataView(v.buffer, v.byteOffset).getUint32(1));
  t.ok(maxChunk <= 8, `chunks stay at most twice the chunk size (largest ${maxChunk})`);
  t.equal(his.stats('q').size, 141);
  t.equal(his.stats('p').size, model.size);
  await close(x);
});

t.test('range reads at chunk boundaries, start inclusive, end exclusive', async (t) => {
  const x = await open(tempDir(t), 4);
  // 18 samples at 10, 20, ... 180: chunks [10..40] [50..80] [90..120] [130..160] [170, 180].
  const samples = Array.from({ length: 18 }, (_, i) => ({ ts: (i + 1) * 10, val: `s${i}` }));
  await x.his.write('p', 'Str', samples);
  const model = new Map(samples.map((s) => [s.ts, s.val] as [number, HisValue]));
  const bounds = [-Infinity, 0, 9, 10, 11, 39, 40, 41, 49, 50, 51, 80, 81, 160, 161, 169, 170, 171, 180, 181, Infinity];
  let checked = 0;
  for (const a of bounds) {
    for (const b of bounds) {
      const got = await readAll(x.his, 'p', a, b);
      const want = modelRange(model, a, b);
      if (showAll(got).join() !== showAll(want).join()) t.fail(`read [${a}, ${b})`, { got: showAll(got), want: showAll(want) });
      checked++;
    }
  }
  t.pass(`${checked} ranges match`);
  t.same((await x.his.read('p', 40, 41)).val, ['s3'], 'a range of one sample, the last of a chunk');
  t.same((await x.his.read('p', 50, 51)).val, ['s4'], 'the first of a chunk');
  t.same((await x.his.read('p', 170, 170)).val, [], 'an empty range');
  t.same((await x.his.read('nobody')).kind, null, 'no history');
  await t.rejects(x.his.read('p', NaN, 1), { code: 'HL_BAD_RANGE' });
  await close(x);
});

t.test('deletes: partial chunks, whole chunks, the tail, whole points', async (t) => {
  const x = await open(tempDir(t), 4);
  const { his } = x;
  const model = new Map<number, HisValue>();
  for (let i = 1; i <= 30; i++) model.set(i * 10, i % 2 === 0);
  await his.write('p', 'Bool', modelRange(model));
  const del = async (a: number, b: number): Promise<void> => {
    let n = 0;
    for (const ts of [...model.keys()]) {
      if (ts >= a && ts < b) {
        model.delete(ts);
        n++;
      }
    }
    t.equal(await his.delete('p', a, b), n, `delete [${a}, ${b}) removes ${n}`);
    t.same(showAll(await readAll(his, 'p')), showAll(modelRange(model)), `after delete [${a}, ${b})`);
    const all = modelRange(model);
    t.same(his.stats('p'), all.length === 0 ? { kind: undefined, size: 0, start: undefined, end: undefined } : { kind: 'Bool', size: all.length, start: all[0]?.ts, end: all[all.length - 1]?.ts });
    t.same(await his.first('p'), all[0]);
    t.same(await his.last('p'), all[all.length - 1]);
  };
  await del(20, 30); // inside the first chunk
  await del(10, 11); // the very first sample (re-keys a chunk, moves hisStart)
  await del(60, 150); // across chunks, whole ones in the middle
  await del(285, 1000); // the end of the tail (moves hisEnd)
  await del(0, 5); // nothing there
  // Writes after deletes still land where they belong.
  for (const ts of [10, 70, 145, 290, 400]) model.set(ts, ts > 100);
  await his.write('p', 'Bool', [10, 70, 145, 290, 400].map((ts) => ({ ts, val: ts > 100 })));
  t.same(showAll(await readAll(his, 'p')), showAll(modelRange(model)));
  t.equal(his.stats('p').size, model.size);
  await del(-Infinity, 160); // everything sealed
  await del(-Infinity, Infinity); // everything
  t.equal(await his.deleteAll('p'), 0, 'deleteAll of a point without history');
  await his.write('p', 'Str', [{ ts: 1, val: 'kind may change once the history is empty' }]);
  t.equal(await his.deleteAll('p'), 1);
  t.same((await his.read('p')).ts.length, 0);
  t.equal(his.points().length, 0);
  let keys = 0;
  for await (const k of x.store.his.keys()) if (k[0] !== 0x52) keys++;
  t.equal(keys, 0, 'nothing is left on disk (but the next point number: numbers are not reused)');
  await close(x);
});

t.test('writes below the seal edge after every chunk was deleted; corrupt data', async (t) => {
  const x = await open(tempDir(t), 4);
  const { his } = x;
  // Chunks [0..3] [4..7], tail 8, 9: the seal edge is 7.
  await his.write('p', 'Number', Array.from({ length: 8 }, (_, i) => ({ ts: i, val: i })));
  await his.write('p', 'Number', [{ ts: 8, val: 8 }]);
  await his.write('p', 'Number', [{ ts: 9, val: 9 }]);
  t.equal(await his.delete('p', 0, 8), 8, 'every chunk goes');
  t.same(his.stats('p'), { kind: 'Number', size: 2, start: 8, end: 9 }, 'hisStart now comes from the tail');
  await his.write('p', 'Number', [
    { ts: 3, val: 30 },
    { ts: 1, val: 10 },
  ]);
  t.same(showAll(await readAll(his, 'p')), ['1=10', '3=30', '8=8', '9=9'], 'old samples start a new chunk');
  t.same(await his.first('p'), { ts: 1, val: 10 });
  await his.write('p', 'Number', Array.from({ length: 10 }, (_, i) => ({ ts: 20 + i, val: i })));
  t.equal(his.stats('p').size, 14);
  t.same(await his.last('p'), { ts: 29, val: 9 });
  // Corrupt a chunk: reads say so with a store error instead of returning garbage.
  for await (const [k, v] of x.store.his.iterator()) {
    if (k[0] === 0x43) {
      const bad = v.slice();
      bad[0] = 99;
      await x.store.his.put(k, bad);
      break;
    }
  }
  await t.rejects(his.read('p'), { code: 'HL_STORE_UNAVAILABLE' });
  await t.rejects(his.write('p', 'Number', [{ ts: 2, val: 2 }]), { code: 'HL_STORE_UNAVAILABLE' });
  await close(x);
});

/** Samples per chunk on disk, in key order, and the samples of point `p` not in a chunk (its open tail). */
async function layout(x: { store: Store; his: HistoryStore }): Promise<{ chunks: number[]; tail: number }> {
  const chunks: number[] = [];
  for await (const [k, v] of x.store.his.iterator()) {
    if (k[0] === 0x43) chunks.push(new DataView(v.buffer, v.byteOffset).getUint32(1));
  }
  return { chunks, tail: x.his.stats('p').size - chunks.reduce((a, b) => a + b, 0) };
}

t.test('a write that fills the tail seals all of it; a partial last chunk is reopened', async (t) => {
  const dir = tempDir(t);
  let x = await open(dir, 4);
  const model = new Map<number, HisValue>();
  const write = async (tss: number[], what: string): Promise<void> => {
    const samples = tss.map((ts) => ({ ts, val: ts * 10 + model.size }));
    await x.his.write('p', 'Number', samples);
    for (const s of samples) model.set(s.ts, s.val);
    t.same(showAll(await readAll(x.his, 'p')), showAll(modelRange(model)), `${what}: what was written reads back`);
    t.equal(x.his.stats('p').size, model.size, `${what}: size`);
  };
  const range = (a: number, n: number): number[] => Array.from({ length: n }, (_, i) => a + i);
  await write(range(0, 6), 'a batch past the chunk size');
  t.same(await layout(x), { chunks: [4, 2], tail: 0 }, 'a full chunk and a partial one, no tail entry per sample');
  await write(range(6, 6), 'the next batch');
  t.same(await layout(x), { chunks: [4, 4, 4], tail: 0 }, 'the partial chunk was reopened and filled');
  await write([12], 'one sample');
  await write([13], 'one more');
  t.same(await layout(x), { chunks: [4, 4, 4], tail: 2 }, 'samples one at a time go to the tail');
  await write([14, 15, 16], 'enough to seal');
  t.same(await layout(x), { chunks: [4, 4, 4, 4, 1], tail: 0 }, 'tail and samples sealed, the tail emptied');
  await write([3, 16, 17, 18], 'a batch both into old chunks and past the seal edge');
  t.equal((await layout(x)).tail, 2, 'what is past the seal edge goes to the tail');
  await write([19, 20, 21, 22, 23], 'a seal of the reopened chunk, the tail and a batch');
  t.same(await layout(x), { chunks: [4, 4, 4, 4, 4, 4], tail: 0 });
  await close(x);
  x = await open(dir, 4);
  await write(range(24, 5), 'after a restart');
  await x.his.delete('p', 25, 27);
  for (const ts of [25, 26]) model.delete(ts);
  t.same(showAll(await readAll(x.his, 'p')), showAll(modelRange(model)), 'a delete inside the partial last chunk');
  await write(range(29, 7), 'after the delete');
  await x.his.delete('p', 33, 100);
  for (const ts of [...model.keys()]) if (ts >= 33) model.delete(ts);
  await write([40], 'a sample past a seal edge left above the last chunk');
  await write(range(41, 5), 'sealing after that');
  const { chunks, tail } = await layout(x);
  t.equal(tail, 0);
  t.ok(chunks.every((n) => n <= 8), 'chunks stay at most twice the chunk size');
  t.same(await x.his.first('p'), modelRange(model)[0]);
  t.same(await x.his.last('p'), modelRange(model).at(-1));
  await close(x);
});

t.test('writes as columns: the same as samples; mixed in one call; checked the same way', async (t) => {
  const x = await open(tempDir(t), 4);
  const { his } = x;
  const ts = Float64Array.from([30, 10, 20, 10, 50, 40]);
  const val = Float64Array.from([3, 1, 2, 11, 5, 4]);
  await his.writeMany([{ pointId: 'c', kind: 'Number', ts, val }]);
  await his.write('s', 'Number', Array.from(ts, (t, i) => ({ ts: t, val: val[i] as number })));
  t.same(showAll(await readAll(his, 'c')), showAll(await readAll(his, 's')), 'columns and samples store the same');
  t.same(showAll(await readAll(his, 'c')), ['10=11', '20=2', '30=3', '40=4', '50=5'], 'sorted, the last of a timestamp wins');
  t.same(Array.from(ts), [30, 10, 20, 10, 50, 40], 'the columns given are left as they were');
  await his.writeMany([
    { pointId: 'c', kind: 'Number', ts: [60, 70], val: [6, 7] },
    { pointId: 'c', kind: 'Number', samples: [{ ts: 70, val: 77 }] },
  ]);
  t.same(showAll(await readAll(his, 'c')).slice(-2), ['60=6', '70=77'], 'parts of one point in one call: in their order');
  await t.rejects(his.writeMany([{ pointId: 'c', kind: 'Number', ts: Float64Array.from([1, NaN]), val: Float64Array.from([1, 2]) }]), { code: 'HL_BAD_VALUE', message: /sample 1 has timestamp NaN/ });
  await t.rejects(his.writeMany([{ pointId: 'c', kind: 'Bool', ts: [1], val: [true] }]), { code: 'HL_HIS_KIND' });
  await t.rejects(his.writeMany([{ pointId: 'b', kind: 'Bool', ts: [1, 2], val: [true, 0] }]), { code: 'HL_BAD_VALUE', message: /sample 1 is number/ });
  t.equal(his.stats('c').size, 7, 'refused writes changed nothing');
  t.equal(his.stats('b').size, 0);
  await close(x);
});

t.test('deleteAll removes chunks, tail and metadata', async (t) => {
  const x = await open(tempDir(t), 4);
  await x.his.write('a', 'Number', Array.from({ length: 50 }, (_, i) => ({ ts: i, val: i })));
  await x.his.write('b', 'Number', [{ ts: 1, val: 1 }]);
  t.equal(await x.his.deleteAll('a'), 50);
  t.same(x.his.stats('a').size, 0);
  t.same(x.his.points(), ['b']);
  t.same(await x.his.first('a'), undefined);
  t.same(await x.his.last('a'), undefined);
  await close(x);
});

t.test('errors: kinds, values, all-or-nothing, lifecycle', async (t) => {
  const dir = tempDir(t);
  const x = await open(dir, 4);
  const { his } = x;
  await his.write('n', 'Number', [{ ts: 1, val: 1 }]);
  await t.rejects(his.write('n', 'Bool', [{ ts: 2, val: true }]), { code: 'HL_HIS_KIND' });
  await t.rejects(his.write('n', 'Number', [{ ts: 2, val: '3' }]), { code: 'HL_BAD_VALUE' });
  await t.rejects(his.write('b', 'Bool', [{ ts: 2, val: 1 }]), { code: 'HL_BAD_VALUE' });
  await t.rejects(his.write('', 'Number', []), { code: 'HL_BAD_REQUEST' });
  await t.rejects(his.write('x', 'Ref' as HisKind, []), { code: 'HL_BAD_REQUEST' });
  await t.rejects(
    his.writeMany([
      { pointId: 'd', kind: 'Str', samples: [{ ts: 1, val: 'a' }] },
      { pointId: 'd', kind: 'Bool', samples: [{ ts: 1, val: true }] },
    ]),
    { code: 'HL_BAD_REQUEST' },
  );
  // A multi-point write that fails on one point writes nothing at all.
  await t.rejects(
    his.writeMany([
      { pointId: 'fresh', kind: 'Number', samples: Array.from({ length: 20 }, (_, i) => ({ ts: i, val: i })) },
      { pointId: 'n', kind: 'Number', samples: [{ ts: 5, val: 5 }] },
      { pointId: 'n', kind: 'Number', samples: [{ ts: 6, val: 6 }] },
      { pointId: 'n2', kind: 'Str', samples: [{ ts: 5, val: 5 }] },
    ]),
    { code: 'HL_BAD_VALUE' },
  );
  await his.write('k', 'Str', [{ ts: 1, val: 'a' }]);
  await t.rejects(
    his.writeMany([
      { pointId: 'fresh', kind: 'Number', samples: Array.from({ length: 20 }, (_, i) => ({ ts: i, val: i })) },
      { pointId: 'k', kind: 'Number', samples: [{ ts: 5, val: 5 }] },
    ]),
    { code: 'HL_HIS_KIND' },
  );
  t.same(his.stats('fresh').size, 0, 'the failed batch left nothing in memory');
  t.same(showAll(await readAll(his, 'n')), ['1=1']);
  await close(x);
  const y = await open(dir, 4);
  t.same((await y.his.read('fresh')).ts.length, 0, 'and nothing on disk');
  await y.his.stop();
  await t.rejects(y.his.write('n', 'Number', [{ ts: 2, val: 2 }]), { code: 'HL_STORE_UNAVAILABLE' });
  await y.store.close();
  const z = new HistoryStore(y.store);
  await t.rejects(z.read('n'), { code: 'HL_STORE_UNAVAILABLE' }, 'not started');
  t.throws(() => new HistoryStore(y.store, { chunkSize: 1 }), RangeError);
});

t.test('many points interleaved, concurrent writes, reopen', async (t) => {
  const dir = tempDir(t);
  let x = await open(dir, 16);
  const models = new Map<string, Map<number, HisValue>>();
  const ids = Array.from({ length: 25 }, (_, i) => `pt-${i}`);
  for (const id of ids) models.set(id, new Map());
  // Poll-cycle style: every cycle writes one sample of every point in one batch.
  for (let cycle = 0; cycle < 40; cycle++) {
    const ts = T0 + cycle * MIN;
    await x.his.writeMany(
      ids.map((id, p) => {
        const val = Math.round((p + Math.sin(cycle / 3)) * 10) / 10;
        models.get(id)?.set(ts, val);
        return { pointId: id, kind: 'Number' as const, samples: [{ ts, val }] };
      }),
    );
  }
  // Concurrent writes to the same points, racing: the lock serialises them.
  const racing: Promise<void>[] = [];
  for (let k = 0; k < 30; k++) {
    const id = ids[k % 3] as string;
    const samples = Array.from({ length: 7 }, (_, i) => ({ ts: T0 + ((k * 7 + i) % 60) * MIN + 1, val: k * 100 + i }));
    for (const s of samples) models.get(id)?.set(s.ts, s.val);
    racing.push(x.his.write(id, 'Number', samples));
  }
  await Promise.all(racing);
  const check = async (label: string): Promise<void> => {
    for (const id of ids) {
      const m = models.get(id);
      const want = modelRange(m);
      const got = await readAll(x.his, id);
      if (showAll(got).join() !== showAll(want).join()) t.fail(`${label}: ${id}`, { got: showAll(got), want: showAll(want) });
      t.equal(x.his.stats(id).size, want.length, `${label}: ${id} size`);
    }
  };
  await check('before reopen');
  await close(x);
  x = await open(dir, 16);
  await check('after reopen');
  t.equal(x.his.points().length, ids.length);
  await close(x);
});

// HAYLOFT_HIS_SEEDS=N runs N seeds instead of the eight below (a longer hunt for bugs).
const extraSeeds = Number(process.env.HAYLOFT_HIS_SEEDS ?? 0);
const seeds = extraSeeds > 0 ? Array.from({ length: extraSeeds }, (_, i) => 1000 + i) : [11, 22, 33, 44, 55, 66, 77, 88];

t.test('store vs an in-memory model over random operations', async (t) => {
  for (const seed of seeds) {
    const rnd = prng(seed);
    const int = (n: number): number => Math.floor(rnd() * n);
    const dir = tempDir(t);
    const chunkSize = 2 + int(7);
    let x = await open(dir, chunkSize);
    const points: [string, HisKind][] = [
      ['num', 'Number'],
      ['bool', 'Bool'],
      ['str', 'Str'],
      ['num2', 'Number'],
    ];
    const models = new Map<string, Map<number, HisValue>>(points.map(([id]) => [id, new Map()]));
    const value = (kind: HisKind): HisValue => {
      if (kind === 'Bool') return rnd() < 0.5;
      if (kind === 'Str') return ['', 'on', 'off', 'ü✓', `s${int(50)}`][int(5)] as string;
      const r = rnd();
      if (r < 0.5) return Math.round(rnd() * 300) / 10;
      if (r < 0.6) return [NaN, Infinity, -Infinity, -0, 0][int(5)] as number;
      if (r < 0.8) return 20; // runs of equal values
      return (rnd() - 0.5) * 1e6;
    };
    const span = 400;
    const randTs = (): number => int(span) - 50;
    let failures = 0;
    const fail = (op: number, what: string, extra?: object): void => {
      failures++;
      t.fail(`seed ${seed} chunkSize ${chunkSize} op ${op}: ${what}`, extra ?? {});
    };
    for (let op = 0; op < 300 && failures === 0; op++) {
      const r = rnd();
      const [id, kind] = points[int(points.length)] as [string, HisKind];
      const m = models.get(id) as Map<number, HisValue>;
      if (r < 0.45) {
        const n = rnd() < 0.1 ? int(3 * chunkSize * 4) : 1 + int(6);
        const samples: HisSample[] = [];
        const base = rnd() < 0.5 ? Math.max(-50, ...m.keys()) + 1 : randTs(); // appends and backfills
        for (let i = 0; i < n; i++) samples.push({ ts: rnd() < 0.7 ? base + i : randTs(), val: value(kind) });
        if (rnd() < 0.3) samples.reverse();
        await x.his.write(id, kind, samples);
        for (const s of samples) m.set(s.ts, s.val);
      } else if (r < 0.55) {
        // One batch over every point.
        const writes = points.map(([pid, pkind]) => ({ pointId: pid, kind: pkind, samples: [{ ts: randTs(), val: value(pkind) }] }));
        await x.his.writeMany(writes);
        for (const w of writes) for (const s of w.samples) models.get(w.pointId)?.set(s.ts, s.val);
      } else if (r < 0.7) {
        const a = rnd() < 0.1 ? -Infinity : randTs();
        const b = rnd() < 0.1 ? Infinity : a + int(span / 3);
        const before = m.size;
        for (const ts of [...m.keys()]) if (ts >= a && ts < b) m.delete(ts);
        const n = await x.his.delete(id, a, b);
        if (n !== before - m.size) fail(op, `delete [${a}, ${b}) returned ${n}, expected ${before - m.size}`);
      } else if (r < 0.72) {
        const n = await x.his.deleteAll(id);
        if (n !== m.size) fail(op, `deleteAll returned ${n}, expected ${m.size}`);
        m.clear();
      } else if (r < 0.75) {
        await close(x);
        x = await open(dir, chunkSize);
      } else {
        const a = rnd() < 0.1 ? -Infinity : randTs();
        const b = rnd() < 0.1 ? Infinity : a + int(span / 2);
        const got = showAll(await readAll(x.his, id, a, b)).join(' ');
        const want = showAll(modelRange(m, a, b)).join(' ');
        if (got !== want) fail(op, `read ${id} [${a}, ${b})`, { got, want });
      }
      // Cheap invariants after every operation.
      const all = modelRange(m);
      const st = x.his.stats(id);
      const wantStats = all.length === 0 ? { size: 0, start: undefined, end: undefined } : { size: all.length, start: all[0]?.ts, end: all[all.length - 1]?.ts };
      if (st.size !== wantStats.size || st.start !== wantStats.start || st.end !== wantStats.end) fail(op, `stats of ${id}`, { got: st, want: wantStats });
    }
    for (const [id] of points) {
      const all = modelRange(models.get(id));
      t.same(showAll(await readAll(x.his, id)), showAll(all), `seed ${seed}: final ${id}`);
      t.same(await x.his.first(id), all[0], `seed ${seed}: first ${id}`);
      const lastGot = await x.his.last(id);
      t.same(lastGot === undefined ? undefined : showAll([lastGot]), all.length === 0 ? undefined : showAll(all.slice(-1)), `seed ${seed}: last ${id}`);
    }
    await close(x);
  }
});

t.test('kill -9 mid-stream loses no acknowledged batch and half-writes none', async (t) => {
  const dir = tempDir(t);
  const child = fileURLToPath(new URL('./fixtures/his-crash-child.ts', import.meta.url));
  for (const killAfter of [10, 25, 60, 90]) {
    const proc = spawn(process.execPath, ['--import', 'tsx', child, dir], { stdio: ['ignore', 'pipe', 'pipe'], cwd: path.resolve(path.dirname(child), '../../..') });
    let out = '';
    let err = '';
    let killed = false;
    proc.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const done = new Promise<void>((resolve) => proc.on('close', () => resolve()));
    proc.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      const acks = out.split('\n').filter((l) => l.startsWith('ack ')).length;
      if (!killed && acks >= killAfter) {
        killed = true;
        // Let it get into the next batch, then kill it without warning.
        setTimeout(() => proc.kill('SIGKILL'), Math.floor(Math.random() * 3));
      }
    });
    await done;
    t.ok(killed, `the child was killed (stderr: ${err.slice(0, 500)})`);
    const acked = out
      .split('\n')
      .filter((l) => l.startsWith('ack '))
      .map((l) => Number(l.slice(4)));
    const last = Math.max(...acked);
    const x = await open(dir, 16);
    for (const { pointId, kind } of CRASH_POINTS) {
      const got = showAll(await readAll(x.his, pointId)).join(' ');
      const asAcked = showAll(modelRange(crashExpected(kind, last))).join(' ');
      const withNext = showAll(modelRange(crashExpected(kind, last + 1))).join(' ');
      t.ok(got === asAcked || got === withNext, `${pointId}: every batch up to ${last} is there, and the one in flight wholly or not at all`);
      t.equal(x.his.stats(pointId).size, got === '' ? 0 : got.split(' ').length, `${pointId}: stats agree`);
    }
    await close(x);
  }
});

t.test('deleteSpans: the spans of several points in one commit, all or none', async (t) => {
  const x = await open(tempDir(t), 4);
  const { his } = x;
  for (const id of ['a', 'b', 'c']) await his.write(id, 'Number', Array.from({ length: 8 }, (_, i) => ({ ts: i, val: i })));
  t.same(await his.deleteSpans([{ pointId: 'a', start: 0, end: 2 }, { pointId: 'b', start: 6, end: 100 }, { pointId: 'c', start: 50, end: 60 }]), [2, 2, 0], 'how many each span removed');
  t.same([his.stats('a'), his.stats('b'), his.stats('c').size], [{ kind: 'Number', size: 6, start: 2, end: 7 }, { kind: 'Number', size: 6, start: 0, end: 5 }, 8], 'the points after');
  await t.rejects(his.deleteSpans([{ pointId: 'a', start: 0, end: 3 }, { pointId: 'a', start: 5, end: 6 }]), { code: 'HL_BAD_REQUEST', message: /@a is named twice/ }, 'one span per point');
  t.equal(his.stats('a').size, 6, 'nothing deleted by the refused call');

  // c's first chunk corrupt: a span through it cannot be planned, and a's span (first) is not deleted either.
  for await (const [k, v] of x.store.his.iterator()) {
    if (k[0] === 0x43 && Buffer.from(k).toString('latin1').includes('c')) {
      const bad = v.slice();
      bad[0] = 99;
      await x.store.his.put(k, bad);
      break;
    }
  }
  await t.rejects(his.deleteSpans([{ pointId: 'a', start: 2, end: 4 }, { pointId: 'c', start: 1, end: 2 }]), { code: 'HL_STORE_UNAVAILABLE' }, 'a corrupt chunk: a store error');
  t.same(showAll(await readAll(his, 'a')), ['2=2', '3=3', '4=4', '5=5', '6=6', '7=7'], "a's samples all kept");
  t.same(his.stats('a'), { kind: 'Number', size: 6, start: 2, end: 7 }, "a's stats as before");
  await close(x);
});
