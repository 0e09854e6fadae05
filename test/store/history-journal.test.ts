/**
 * The open tails and their journal (history.ts, his-tail.ts, his-journal.ts): polled samples
 * written together by a flush, sealed apart, memory bounded, and what a power cut keeps.
 * "A crash" here closes LevelDB under a started history store (no stop, so no last flush) and
 * opens a new store on the folder: what a power cut leaves.
 */
import t from 'tap';
import { Store } from '../../src/store/db.js';
import type { HisValue } from '../../src/store/his-codec.js';
import { HistoryStore, toSamples, type HisSample, type HistoryOptions } from '../../src/store/history.js';
import { prng } from '../helpers/prng.js';
import { tempDir } from '../helpers/tmp.js';

interface X {
  store: Store;
  his: HistoryStore;
}

async function open(dir: string, o: HistoryOptions = {}): Promise<X> {
  const store = await Store.open(dir);
  // No timer flushes unless a test asks for one: flushes are called by the tests.
  const his = new HistoryStore(store, { chunkSize: 32, flushInterval: 3_600_000, ...o });
  await his.start();
  return { store, his };
}

async function crash(x: X, dir: string, o: HistoryOptions = {}): Promise<X> {
  await x.store.close();
  return open(dir, o);
}

async function close(x: X): Promise<void> {
  await x.his.stop();
  await x.store.close();
}

async function keysOf(store: Store, type: number): Promise<number> {
  let n = 0;
  for await (const k of store.his.keys()) if (k[0] === type) n++;
  return n;
}
const J = 0x4a;
const C = 0x43;

function show(xs: readonly HisSample[]): string[] {
  return xs.map((s) => `${s.ts}=${typeof s.val === 'number' && Object.is(s.val, -0) ? '-0' : JSON.stringify(s.val)}`);
}

async function readAll(his: HistoryStore, id: string): Promise<string[]> {
  return show(toSamples(await his.read(id)));
}

function modelOf(m: Map<number, HisValue> | undefined): string[] {
  if (m === undefined) return [];
  return show([...m.entries()].sort((a, b) => a[0] - b[0]).map(([ts, val]) => ({ ts, val })));
}

t.test('polled samples: readable at once, on disk with the next flush, one synced batch for all points', async (t) => {
  const dir = tempDir(t);
  let x = await open(dir);
  const later = async (cycle: number): Promise<void> => {
    await x.his.writeMany(
      Array.from({ length: 20 }, (_, p) => ({ pointId: `p${p}`, kind: 'Number', samples: [{ ts: 1000 * cycle, val: p + cycle / 10 }] })),
      { flush: 'later' },
    );
  };
  for (let c = 1; c <= 3; c++) await later(c);
  t.same(await readAll(x.his, 'p7'), ['1000=7.1', '2000=7.2', '3000=7.3'], 'readable before any flush');
  t.equal(x.his.stats('p7').size, 3);
  t.equal(await keysOf(x.store, J), 0, 'nothing in the journal yet');
  x = await crash(x, dir);
  t.same(await readAll(x.his, 'p7'), [], 'a power cut before the flush loses them (the documented window)');
  t.equal(x.his.points().length, 0, 'and no point is left half made');
  for (let c = 1; c <= 3; c++) await later(c);
  const syncs = x.his.counts.syncs;
  await x.his.flush();
  t.equal(x.his.counts.syncs - syncs, 1, 'one synced batch for 20 points and 3 cycles');
  t.equal(await keysOf(x.store, J), 1, 'one journal entry');
  t.equal(x.his.samplesWritten, 60);
  x = await crash(x, dir);
  t.same(await readAll(x.his, 'p7'), ['1000=7.1', '2000=7.2', '3000=7.3'], 'flushed samples survive a power cut (replayed from the journal)');
  t.equal(x.his.stats('p19').size, 3);
  // Appending after the replay goes on where the tail ended.
  await later(4);
  await x.his.flush();
  x = await crash(x, dir);
  t.same(await readAll(x.his, 'p0'), ['1000=0.1', '2000=0.2', '3000=0.3', '4000=0.4']);
  await close(x);
});

t.test('seals are spread over rounds, not all in one, and the journal is freed as tails seal', async (t) => {
  const dir = tempDir(t);
  let x = await open(dir, { chunkSize: 32 });
  const points = 200;
  const perRound: number[] = [];
  for (let c = 1; c <= 100; c++) {
    await x.his.writeMany(
      Array.from({ length: points }, (_, p) => ({ pointId: `p${p}`, kind: 'Number', samples: [{ ts: 1000 * c, val: c }] })),
      { flush: 'later' },
    );
    const before = x.his.counts.seals;
    await x.his.flush();
    perRound.push(x.his.counts.seals - before);
  }
  const max = Math.max(...perRound);
  t.ok(max < points / 2, `at most ${max} of ${points} points sealed in one round (all ${points} would without the jitter)`);
  t.ok(perRound.filter((n) => n > 0).length >= 10, 'seals happen in many rounds');
  t.ok((await keysOf(x.store, J)) <= 33, `journal entries still needed only by open tails (${await keysOf(x.store, J)})`);
  const want = Array.from({ length: 100 }, (_, i) => `${1000 * (i + 1)}=${i + 1}`);
  t.same(await readAll(x.his, 'p123'), want, 'every sample reads back');
  x = await crash(x, dir);
  t.same(await readAll(x.his, 'p123'), want, 'and after a power cut');
  t.equal(x.his.stats('p5').size, 100);
  await close(x);
});

t.test('memory is bounded: past the tail budget the biggest tails are sealed early', async (t) => {
  const x = await open(tempDir(t), { chunkSize: 1024, tailBudget: 1000 });
  const tss = Array.from({ length: 40 }, (_, i) => i + 1);
  await x.his.writeMany(
    Array.from({ length: 50 }, (_, p) => ({ pointId: `p${p}`, kind: 'Number', ts: tss, val: tss.map((v) => v * p) })),
    { flush: 'later' },
  );
  const m = new Map<string, number>();
  const metrics = {
    counter: () => undefined,
    gauge: (name: string, _h: string, _l: string[], f: () => number) => m.set(name, f()) && undefined,
  };
  x.his.metrics(metrics as never);
  t.equal(m.get('hayloft_history_tail_samples'), 2000, 'over the budget before the flush');
  await x.his.flush();
  x.his.metrics(metrics as never);
  t.ok((m.get('hayloft_history_tail_samples') ?? Infinity) <= 1000, `within the budget after it (${m.get('hayloft_history_tail_samples')})`);
  t.equal(x.his.stats('p9').size, 40);
  t.same((await x.his.read('p9')).val.length, 40);
  await close(x);
});

t.test('a slow point is sealed once its journal is old; small seals fill one partial chunk', async (t) => {
  let now = 0;
  const dir = tempDir(t);
  let x = await open(dir, { chunkSize: 64, journalAge: 1000, monotonic: () => now });
  await x.his.write('slow', 'Number', [1, 2, 3].map((ts) => ({ ts, val: ts })), { flush: 'later' });
  await x.his.flush();
  t.equal(await keysOf(x.store, C), 0, 'young: still in the journal');
  now = 2000;
  await x.his.flush();
  t.equal(await keysOf(x.store, C), 1, 'old: sealed');
  t.equal(await keysOf(x.store, J), 0, 'and its journal entry deleted');
  await x.his.write('slow', 'Number', [4, 5].map((ts) => ({ ts, val: ts })), { flush: 'later' });
  await x.his.flush();
  now = 4000;
  await x.his.flush();
  t.equal(await keysOf(x.store, C), 1, 'the next small seal went into the same, reopened chunk');
  x = await crash(x, dir, { chunkSize: 64, journalAge: 1000, monotonic: () => now });
  t.same(await readAll(x.his, 'slow'), ['1=1', '2=2', '3=3', '4=4', '5=5']);
  await close(x);
});

t.test('a small seal reads the partial last chunk by its key, searches only when that is not known, skips a full one; a bigger tail is a chunk of its own', async (t) => {
  let now = 0;
  const dir = tempDir(t);
  const o = { chunkSize: 64, journalAge: 1000, monotonic: () => now };
  let x = await open(dir, o);
  // Count the store's reads of chunks: backward searches and reads by key.
  const reads = { search: 0, get: 0 };
  const spy = (s: Store): void => {
    const his = s.his;
    const values = his.values.bind(his);
    const get = his.get.bind(his);
    his.values = ((opts: { reverse?: boolean }) => {
      if (opts.reverse === true) reads.search++;
      return values(opts as never);
    }) as typeof his.values;
    his.get = ((k: Uint8Array) => {
      if (k[0] === C) reads.get++;
      return get(k);
    });
  };
  spy(x.store);
  const seal = async (tss: number[]): Promise<void> => {
    await x.his.write('p', 'Number', tss.map((ts) => ({ ts, val: ts })), { flush: 'later' });
    await x.his.flush();
    now += 2000;
    await x.his.flush();
  };
  await seal([10, 20, 30]);
  reads.search = reads.get = 0;
  await seal([40, 50]);
  t.same(reads, { search: 0, get: 1 }, 'the second seal read the chunk it knew the key of');
  t.equal(await keysOf(x.store, C), 1, 'and filled it');

  // A hisWrite into the sealed chunk changes it: the next seal does not trust what it knew.
  await x.his.write('p', 'Number', [{ ts: 25, val: 25 }]);
  reads.search = reads.get = 0;
  await seal([60, 70]);
  t.same(reads, { search: 1, get: 0 }, 'after a write into the chunks: a backward search');
  t.equal(await keysOf(x.store, C), 1);

  // So does a delete of its newest samples.
  await x.his.delete('p', 70, 80);
  reads.search = reads.get = 0;
  await seal([80]);
  t.same(reads, { search: 1, get: 0 }, 'after a delete: a backward search');
  t.same(await readAll(x.his, 'p'), ['10=10', '20=20', '25=25', '30=30', '40=40', '50=50', '60=60', '80=80']);

  // A tail of a sixteenth of a chunk or more (what the tail budget seals at 10,000 points) is a
  // chunk of its own: nothing is read.
  reads.search = reads.get = 0;
  await seal(Array.from({ length: 10 }, (_, i) => 100 + i));
  t.same(reads, { search: 0, get: 0 }, 'a bigger tail is not put into the last chunk');
  t.equal(await keysOf(x.store, C), 2, 'it is a chunk of its own');

  // A small seal after a last chunk of more than half a chunk starts a new one without reading it.
  await seal(Array.from({ length: 40 }, (_, i) => 200 + i));
  reads.search = reads.get = 0;
  await seal([500]);
  t.same(reads, { search: 0, get: 0 }, 'a last chunk full enough is not read');
  t.equal(await keysOf(x.store, C), 4, 'a new chunk');

  // After a restart nothing is known: the first seal searches, the next reads by key.
  x = await crash(x, dir, o);
  spy(x.store);
  reads.search = reads.get = 0;
  await seal([510]);
  await seal([520]);
  t.same(reads, { search: 1, get: 1 }, 'after a restart: one search, then by key');
  const want = ['10=10', '20=20', '25=25', '30=30', '40=40', '50=50', '60=60', '80=80', ...Array.from({ length: 10 }, (_, i) => `${100 + i}=${100 + i}`), ...Array.from({ length: 40 }, (_, i) => `${200 + i}=${200 + i}`), '500=500', '510=510', '520=520'];
  t.same(await readAll(x.his, 'p'), want);
  x = await crash(x, dir, o);
  t.same(await readAll(x.his, 'p'), want, 'all of it after a power cut');
  await close(x);
});

t.test('hisWrite into a tail with pending polled samples: both durable, the later write wins', async (t) => {
  const dir = tempDir(t);
  let x = await open(dir);
  await x.his.write('p', 'Number', [1, 2, 3, 4, 5].map((ts) => ({ ts, val: 10 * ts })), { flush: 'later' });
  await x.his.write('p', 'Number', [
    { ts: 3, val: -3 },
    { ts: 6, val: 60 },
  ]);
  t.same(await readAll(x.his, 'p'), ['1=10', '2=20', '3=-3', '4=40', '5=50', '6=60']);
  x = await crash(x, dir);
  t.same(await readAll(x.his, 'p'), ['1=10', '2=20', '3=-3', '4=40', '5=50', '6=60'], 'the hisWrite made the pending samples before it durable too');
  // Polled samples at or before the end are written like hisWrite (not lost in the tail's order).
  await x.his.write('p', 'Number', [{ ts: 2, val: 22 }], { flush: 'later' });
  x = await crash(x, dir);
  t.same(await readAll(x.his, 'p'), ['1=10', '2=22', '3=-3', '4=40', '5=50', '6=60']);
  await close(x);
});

t.test('deleted tail samples stay deleted after a power cut; deleteAll frees the journal', async (t) => {
  const dir = tempDir(t);
  let x = await open(dir);
  await x.his.write('p', 'Str', [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].map((ts) => ({ ts, val: `s${ts}` })), { flush: 'later' });
  await x.his.flush();
  await x.his.write('p', 'Str', [11, 12].map((ts) => ({ ts, val: `s${ts}` })), { flush: 'later' });
  t.equal(await x.his.delete('p', 5, 12), 7);
  x = await crash(x, dir);
  t.same(await readAll(x.his, 'p'), ['1="s1"', '2="s2"', '3="s3"', '4="s4"', '12="s12"'], 'the journal does not bring them back; the pending 12 kept');
  await x.his.write('q', 'Bool', [1, 2].map((ts) => ({ ts, val: ts === 1 })), { flush: 'later' });
  await x.his.flush();
  t.equal(await keysOf(x.store, J), 1);
  t.equal(await x.his.deleteAll('q'), 2);
  t.equal(await keysOf(x.store, J), 0, 'the entry only q needed is gone');
  x = await crash(x, dir);
  t.same(await readAll(x.his, 'q'), []);
  t.same(await readAll(x.his, 'p'), ['1="s1"', '2="s2"', '3="s3"', '4="s4"', '12="s12"']);
  await close(x);
});

t.test('a flush that fails drops what was pending, counts it, and says so', async (t) => {
  const x = await open(tempDir(t));
  await x.his.write('p', 'Number', [{ ts: 1, val: 1 }]);
  await x.his.write('p', 'Number', [2, 3].map((ts) => ({ ts, val: ts })), { flush: 'later' });
  const told: number[] = [];
  (x.his as unknown as { onFlushError: (e: unknown, n: number) => void }).onFlushError = (_e, n) => told.push(n);
  await x.store.db.close();
  await t.rejects(x.his.flush());
  t.same(told, [2]);
  t.equal(x.his.samplesRefused.error, 2);
  t.equal(x.his.stats('p').size, 1, 'only the durable sample is left');
  await x.his.stop();
});

t.test('a format-1 store: its tail entries become chunks at start', async (t) => {
  const dir = tempDir(t);
  const store = await Store.open(dir);
  // Format 1: 'M' id -> v1 meta (tail count at offset 34), 'T' id 0 ts(8) -> f64 per sample.
  const id = new TextEncoder().encode('old');
  const key = (type: number, ts: number): Uint8Array => {
    const k = new Uint8Array(id.length + 10);
    k[0] = type;
    k.set(id, 1);
    const dv = new DataView(new ArrayBuffer(8));
    dv.setFloat64(0, ts);
    for (let i = 0; i < 8; i++) k[id.length + 2 + i] = i === 0 ? dv.getUint8(i) | 0x80 : dv.getUint8(i);
    return k;
  };
  const meta = new Uint8Array(42);
  const dv = new DataView(meta.buffer);
  meta[0] = 1;
  meta[1] = 1;
  dv.setFloat64(2, 3);
  dv.setFloat64(10, 100);
  dv.setFloat64(18, 300);
  dv.setFloat64(26, -Infinity);
  dv.setFloat64(34, 3);
  await store.his.put(Uint8Array.of(0x4d, ...id), meta);
  for (const ts of [100, 200, 300]) {
    const v = new Uint8Array(8);
    new DataView(v.buffer).setFloat64(0, ts / 100);
    await store.his.put(key(0x54, ts), v);
  }
  const his = new HistoryStore(store, { chunkSize: 32 });
  await his.start();
  t.same(await readAll(his, 'old'), ['100=1', '200=2', '300=3']);
  t.equal(await keysOf(store, 0x54), 0, 'no format-1 tail entry left');
  t.equal(await keysOf(store, C), 1);
  await his.write('old', 'Number', [{ ts: 400, val: 4 }]);
  t.same(his.stats('old'), { kind: 'Number', size: 4, start: 100, end: 400 });
  await his.stop();
  await store.close();
});

t.test('random writes, polled appends, flushes, deletes and power cuts agree with a model', async (t) => {
  const dir = tempDir(t);
  const rnd = prng(7);
  const ids = ['a', 'b', 'c', 'd'];
  const model = new Map<string, Map<number, HisValue>>();
  const next = new Map<string, number>();
  let x = await open(dir, { chunkSize: 8, tailBudget: 40 });
  for (let step = 0; step < 400; step++) {
    const id = ids[Math.floor(rnd() * ids.length)] as string;
    const m = model.get(id) ?? new Map<number, HisValue>();
    model.set(id, m);
    const r = rnd();
    if (r < 0.45) {
      // A poll cycle: appended past the end.
      const ts = (next.get(id) ?? 0) + 1 + Math.floor(rnd() * 3);
      next.set(id, ts);
      const val = Math.round(rnd() * 100) / 10;
      await x.his.write(id, 'Number', [{ ts, val }], { flush: 'later' });
      m.set(ts, val);
    } else if (r < 0.65) {
      // A hisWrite anywhere (old samples into chunks, new ones into the tail).
      const n = 1 + Math.floor(rnd() * 12);
      const samples: HisSample[] = [];
      for (let i = 0; i < n; i++) samples.push({ ts: 1 + Math.floor(rnd() * ((next.get(id) ?? 0) + 10)), val: Math.round(rnd() * 1000) / 10 });
      await x.his.write(id, 'Number', samples);
      for (const s of samples) m.set(s.ts, s.val);
      next.set(id, Math.max(next.get(id) ?? 0, ...samples.map((s) => s.ts)));
    } else if (r < 0.8) {
      await x.his.flush();
    } else if (r < 0.88) {
      const a = Math.floor(rnd() * ((next.get(id) ?? 0) + 2));
      const b = a + 1 + Math.floor(rnd() * 6);
      await x.his.delete(id, a, b);
      for (const ts of [...m.keys()]) if (ts >= a && ts < b) m.delete(ts);
    } else if (r < 0.9) {
      await x.his.deleteAll(id);
      m.clear();
    } else {
      // A power cut right after a flush: nothing acknowledged or flushed is lost.
      await x.his.flush();
      x = await crash(x, dir, { chunkSize: 8, tailBudget: 40 });
    }
    const got = await readAll(x.his, id);
    if (JSON.stringify(got) !== JSON.stringify(modelOf(m))) {
      t.same(got, modelOf(m), `step ${step}: ${id} reads as the model`);
      break;
    }
    if (x.his.stats(id).size !== m.size) {
      t.equal(x.his.stats(id).size, m.size, `step ${step}: ${id} size`);
      break;
    }
  }
  await x.his.flush();
  x = await crash(x, dir, { chunkSize: 8, tailBudget: 40 });
  for (const id of ids) t.same(await readAll(x.his, id), modelOf(model.get(id)), `${id} after the last power cut`);
  await close(x);
});

t.test('a polled sample below a seal edge left by a delete goes into the chunks, not the tail', async (t) => {
  const dir = tempDir(t);
  let x = await open(dir, { chunkSize: 8 });
  await x.his.write('p', 'Number', Array.from({ length: 40 }, (_, i) => ({ ts: i + 1, val: i + 1 })));
  await x.his.delete('p', 30, 41);
  t.equal(x.his.stats('p').end, 29);
  await x.his.write('p', 'Number', [{ ts: 35, val: 3.5 }], { flush: 'later' });
  await x.his.write('p', 'Number', [{ ts: 45, val: 4.5 }], { flush: 'later' });
  const want = [...Array.from({ length: 29 }, (_, i) => `${i + 1}=${i + 1}`), '35=3.5', '45=4.5'];
  t.same(await readAll(x.his, 'p'), want);
  await x.his.flush();
  x = await crash(x, dir, { chunkSize: 8 });
  t.same(await readAll(x.his, 'p'), want, 'both kept, in order, after a power cut');
  await close(x);
});

t.test('writePolled: appended like a later flush; the rest the general way; another kind returned, not written', async (t) => {
  const dir = tempDir(t);
  let x = await open(dir);
  const heard: string[] = [];
  x.his.events.on('his.written', heard, (id, _kind, w, polled) => heard.push(`${id}:${w?.ts.join(',')}:${polled}`));
  t.same(await x.his.writePolled([
    { pointId: 'p', kind: 'Number', ts: [1, 2, 3], val: [10, 20, 30] },
    { pointId: 'q', kind: 'Str', ts: [1], val: ['a'] },
  ]), []);
  t.same(await readAll(x.his, 'p'), ['1=10', '2=20', '3=30'], 'readable at once');
  t.same(heard, ['p:1,2,3:true', 'q:1:true']);
  t.equal(await keysOf(x.store, J), 0, 'nothing on disk before the flush');
  await x.his.flush();
  t.equal(await keysOf(x.store, J), 1, 'one journal entry for both points');

  // Before the end (a clock stepped back): merged, synced at once. Unsorted columns: sorted,
  // pending in the tail like any polled sample (a power cut before the flush loses them).
  t.same(await x.his.writePolled([
    { pointId: 'p', kind: 'Number', ts: [2], val: [22] },
    { pointId: 'q', kind: 'Str', ts: [5, 4], val: ['e', 'd'] },
  ]), []);
  t.same(await readAll(x.his, 'q'), ['1="a"', '4="d"', '5="e"']);
  x = await crash(x, dir);
  t.same(await readAll(x.his, 'p'), ['1=10', '2=22', '3=30']);
  t.same(await readAll(x.his, 'q'), ['1="a"']);

  // A point whose history is of another kind: returned, nothing of it written; the others are.
  const other = await x.his.writePolled([
    { pointId: 'p', kind: 'Bool', ts: [9], val: [true] },
    { pointId: 'q', kind: 'Str', ts: [9], val: ['i'] },
  ]);
  t.same(other.map((w) => w.pointId), ['p']);
  t.same(await readAll(x.his, 'p'), ['1=10', '2=22', '3=30']);
  t.same(await readAll(x.his, 'q'), ['1="a"', '9="i"']);

  // A bad sample refuses the whole call before anything is appended.
  await t.rejects(
    x.his.writePolled([
      { pointId: 'q', kind: 'Str', ts: [10], val: ['j'] },
      { pointId: 'r', kind: 'Number', ts: [10], val: ['ten'] },
    ]),
    { code: 'HL_BAD_VALUE' },
  );
  await t.rejects(x.his.writePolled([{ pointId: 'r', kind: 'Number', ts: [10.5], val: [1] }]), { code: 'HL_BAD_VALUE' });
  t.same(await readAll(x.his, 'q'), ['1="a"', '9="i"'], 'q unchanged');
  t.same(await readAll(x.his, 'r'), []);
  await close(x);
});
