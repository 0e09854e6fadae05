/**
 * The outbox (src/sync/outbox.ts), the store-and-forward engine under the REST uplink and the
 * MQTT edge node, on a real LevelDB: which points are pending and in what order, reads under the
 * claim protocol, acknowledgements stored at once or in memory until flushed, the tails of live
 * samples, forgetting deleted points, per-point sync status and the backoff after failed passes.
 */
import t from 'tap';
import { UTC } from '../../src/haystack/tz.js';
import { HDateTime, HDict, HRef, MARKER } from '../../src/haystack/values.js';
import { ManualClock } from '../../src/lib/clock.js';
import { Model } from '../../src/model/model.js';
import { PointState } from '../../src/model/point-state.js';
import { Store } from '../../src/store/db.js';
import { HistoryStore } from '../../src/store/history.js';
import { RecordStore } from '../../src/store/records.js';
import { Outbox, type OutboxOptions } from '../../src/sync/outbox.js';
import { SyncState } from '../../src/sync/state.js';
import { tempDir } from '../helpers/tmp.js';

const T0 = Date.UTC(2024, 0, 15, 9, 0, 0);

interface Open {
  store: Store;
  his: HistoryStore;
  model: Model;
  points: PointState;
  clock: ManualClock;
  box: Outbox;
}

async function open(dir: string, opts: Partial<OutboxOptions> = {}, withStatus = false): Promise<Open> {
  const store = await Store.open(dir);
  const clock = new ManualClock(T0);
  const model = await Model.load({ records: new RecordStore(store), clock });
  const his = new HistoryStore(store, { chunkSize: 8 });
  await his.start();
  const points = new PointState({ model, history: his, drivers: [] });
  const box = new Outbox({
    connector: { name: 'up', retryMinMs: 1000, retryMaxMs: 8000 },
    model,
    history: his,
    store,
    clock,
    random: () => 0.5,
    ...(withStatus ? { status: { points, zone: () => UTC } } : {}),
    ...opts,
  });
  await box.start();
  return { store, his, model, points, clock, box };
}

async function close(x: Open): Promise<void> {
  x.box.stop();
  await x.his.stop();
  await x.store.close();
}

const n = (...ts: number[]): { ts: number; val: number }[] => ts.map((x) => ({ ts: x, val: x / 10 }));

/** The cursors stored on disk, as a fresh SyncState loads them. */
async function stored(x: Open, id: string): Promise<number> {
  const s = new SyncState(x.store, 'up');
  await s.load();
  return s.cursor(id);
}

t.test('pending: late spans and samples after the cursor, oldest first, ties in the order given', async (t) => {
  const x = await open(tempDir(t));
  t.teardown(() => close(x));
  await x.his.write('b', 'Number', n(100, 200, 300));
  await x.his.write('a', 'Number', n(100, 200));
  await x.his.write('c', 'Number', n(50, 60));
  await x.his.write('d', 'Number', n(10));
  await x.box.state.ack([['c', 60], ['d', 10], ['b', 100]], 1);
  t.same(x.box.pending(['a', 'b', 'c', 'd', 'none']), [
    { id: 'a', from: 100, late: undefined, tail: false },
    { id: 'b', from: 101, late: undefined, tail: false },
  ], 'caught-up points and points without history are not pending; the rest from cursor + 1, at least their first sample');
  await x.his.write('c', 'Number', n(55));
  await x.his.write('d', 'Number', n(5, 20));
  t.same(x.box.pending(['a', 'b', 'c', 'd']), [
    { id: 'd', from: 5, late: [5, 10], tail: false },
    { id: 'c', from: 55, late: [55, 55], tail: false },
    { id: 'a', from: 100, late: undefined, tail: false },
    { id: 'b', from: 101, late: undefined, tail: false },
  ], 'a late span goes first, from where it starts');
  await x.his.write('e', 'Number', n(100));
  t.same(x.box.pending(['e', 'a']).map((d) => d.id), ['e', 'a'], 'a tie keeps the order given');
  t.same(x.box.pending(['a', 'e']).map((d) => d.id), ['a', 'e']);
});

t.test('read, claim and ack: the cursor moves once acknowledged, stored at once; a write into the batch in flight is late', async (t) => {
  const dir = tempDir(t);
  let x = await open(dir);
  await x.his.write('p', 'Number', n(100, 200, 300, 400));
  let [due] = x.box.pending(['p']);
  if (due === undefined) throw new Error('p is pending');
  await x.box.beginReads([due]);
  const r = await x.box.read(due, 'Number', 3);
  t.same([...(r.run?.ts ?? [])], [100, 200, 300], 'up to the limit');
  t.ok(r.full, 'more is waiting');
  const sent = x.box.sent(due, r.run as NonNullable<typeof r.run>);
  t.same(sent, { id: 'p', last: 300, late: null });
  await x.his.write('p', 'Number', n(250));
  t.same(x.box.state.lateSpans('p'), [[250, 250]], 'a write into the batch in flight is marked');
  await x.his.write('p', 'Number', n(500));
  t.same(x.box.state.lateSpans('p'), [[250, 250]], 'a write after all the point held is not');
  await x.box.ack([sent]);
  x.box.releaseClaims();
  t.equal(x.box.state.cursor('p'), 300);
  t.equal(await stored(x, 'p'), 300, 'stored at once');
  t.equal(x.box.state.info.lastAck, T0, 'when, by the injected clock');

  [due] = x.box.pending(['p']);
  if (due?.late === undefined) throw new Error('p has a late span');
  await x.box.beginReads([due]);
  const l = await x.box.read(due, 'Number', 10);
  t.same([...(l.run?.ts ?? [])], [250], 'the late span, up to the cursor');
  await x.box.ack([x.box.sent(due, l.run as NonNullable<typeof l.run>)]);
  x.box.releaseClaims();
  t.same(x.box.state.lateSpans('p'), [], 'the late span leaves once acknowledged');
  await close(x);

  x = await open(dir);
  t.teardown(() => close(x));
  t.equal(x.box.state.cursor('p'), 300, 'the cursor survives a reopen');
  t.same(x.box.state.lateSpans('p'), []);
  t.same(x.box.pending(['p']), [{ id: 'p', from: 301, late: undefined, tail: false }]);
});

t.test('a late span whose samples are gone is settled', async (t) => {
  const x = await open(tempDir(t));
  t.teardown(() => close(x));
  await x.his.write('p', 'Number', n(100, 200, 300));
  await x.box.state.ack([['p', 300]], 1);
  await x.his.write('p', 'Number', n(150));
  await x.his.delete('p', 140, 160);
  const [due] = x.box.pending(['p']);
  if (due?.late === undefined) throw new Error('p has a late span');
  await x.box.beginReads([due]);
  const r = await x.box.read(due, 'Number', 10);
  t.equal(r.run, null, 'nothing to read');
  t.notOk(r.full);
  await x.box.ack([x.box.settled(due.id, due.late)]);
  x.box.releaseClaims();
  t.same(x.box.state.lateSpans('p'), [], 'the span is gone');
  t.same(x.box.pending(['p']), []);
});

t.test('advance: cursors move in memory, flush() stores them; late spans are stored at once', async (t) => {
  const x = await open(tempDir(t));
  t.teardown(() => close(x));
  await x.his.write('p', 'Number', n(100, 200));
  await x.his.write('q', 'Number', n(100, 200));
  await x.box.state.ack([['q', 200]], 1);
  await x.his.write('q', 'Number', n(150));
  const dues = x.box.pending(['p', 'q']);
  await x.box.beginReads(dues);
  const sent = [];
  for (const due of dues) {
    const r = await x.box.read(due, 'Number', 10);
    if (r.run !== null) sent.push(x.box.sent(due, r.run));
  }
  t.same(sent, [
    { id: 'p', last: 200, late: null },
    { id: 'q', last: 150, late: 150 },
  ]);
  await x.box.advance(sent);
  t.equal(x.box.state.cursor('p'), 200, 'moved in memory');
  t.equal(await stored(x, 'p'), -Infinity, 'not stored yet');
  t.same(x.box.state.lateSpans('q'), [], 'the late span left');
  const s = new SyncState(x.store, 'up');
  await s.load();
  t.same(s.lateSpans('q'), [], 'and is stored');
  await x.his.write('p', 'Number', n(50));
  t.same(x.box.state.lateSpans('p'), [[50, 50]], 'the claims ended: the cursor alone decides');
  x.clock.advance(5000);
  await x.box.flush();
  t.equal(await stored(x, 'p'), 200, 'stored by flush()');
  t.equal(x.box.state.info.lastAck, T0 + 5000);
});

t.test('tails: what the store commits after a cursor is read from memory', async (t) => {
  const x = await open(tempDir(t), { tails: true });
  t.teardown(() => close(x));
  await x.his.write('p', 'Number', n(100, 200));
  await x.box.state.ack([['p', 200]], 1);
  t.same(x.box.pending(['p']), [], 'caught up: from now on the store says what comes');
  await x.his.write('p', 'Number', n(300, 400));
  let [due] = x.box.pending(['p']);
  t.same(due, { id: 'p', from: 300, late: undefined, tail: true }, 'from the tail');
  if (due === undefined) throw new Error('p is pending');
  // Not read from the store: deleting the samples there leaves the tail's copy (a delete of a
  // point's history ends its tail, see below).
  t.same(x.box.readTail(due, 'Number', 1).run?.ts, Float64Array.of(300), 'readTail: the same without a promise');
  let r = await x.box.read(due, 'Number', 1);
  t.same([...(r.run?.ts ?? [])], [300]);
  t.same([...((r.run?.val as Float64Array | undefined) ?? [])], [30]);
  t.ok(r.full, 'one more in the tail');
  r = await x.box.read(due, 'Number', 10);
  t.same([...(r.run?.ts ?? [])], [300, 400]);
  t.notOk(r.full);
  await x.box.advance([x.box.sent(due, r.run as NonNullable<typeof r.run>)]);
  t.same(x.box.pending(['p']), [], 'the tail up to the cursor is dropped');
  await x.his.write('p', 'Number', n(500));
  await x.his.write('p', 'Number', n(450));
  [due] = x.box.pending(['p']);
  t.same(due, { id: 'p', from: 401, late: undefined, tail: false }, 'a write older than the newest kept: read from the store again');
  if (due === undefined) throw new Error('p is pending');
  await x.box.beginReads([due]);
  await x.his.write('p', 'Number', n(600));
  r = await x.box.read(due, 'Number', 10);
  t.same([...(r.run?.ts ?? [])], [450, 500, 600]);
  await x.box.advance([x.box.sent(due, r.run as NonNullable<typeof r.run>)]);
  await x.his.write('p', 'Number', n(700));
  t.same(x.box.pending(['p']), [{ id: 'p', from: 700, late: undefined, tail: true }], 'known again after a read to the end');
  x.box.keepTails(() => false);
  t.same(x.box.pending(['p']), [{ id: 'p', from: 601, late: undefined, tail: false }], 'keepTails drops the tails of points no longer sent');
});

t.test('deleted points: cursors, late spans and mappings are forgotten at the next pass', async (t) => {
  const dir = tempDir(t);
  let changes = 0;
  let x = await open(dir, { modelChanged: () => changes++ });
  await x.model.create([HDict.of({ id: new HRef('p'), point: MARKER, his: MARKER, kind: 'Number' }), HDict.of({ id: new HRef('q'), point: MARKER, his: MARKER, kind: 'Number' })]);
  t.equal(changes, 1, 'the sender hears model changes');
  await x.his.write('p', 'Number', n(100, 200));
  await x.his.write('q', 'Number', n(100, 200));
  await x.box.state.ack([['p', 200], ['q', 100]], 1);
  await x.box.state.setMappings([['p', { up: 'P', tags: {} }]]);
  await x.his.write('p', 'Number', n(150));
  x.box.state.advance([['p', 200]]);
  await x.model.delete(['p']);
  t.equal(x.box.state.cursor('p'), 200, 'kept until the pass');
  await x.box.forgetDeleted();
  t.equal(x.box.state.cursor('p'), -Infinity);
  t.same(x.box.state.lateSpans('p'), []);
  t.equal(x.box.state.mapping('p'), undefined);
  await x.box.flush();
  await close(x);
  x = await open(dir);
  t.teardown(() => close(x));
  t.equal(x.box.state.cursor('p'), -Infinity, 'a cursor advanced and not flushed is not stored again');
  t.same(x.box.state.lateSpans('p'), []);
  t.equal(x.box.state.mapping('p'), undefined);
  t.equal(x.box.state.cursor('q'), 100, 'the others stay');
});

t.test('status: syncStatus, syncErr and syncLast shown through point state', async (t) => {
  const x = await open(tempDir(t), {}, true);
  t.teardown(() => close(x));
  await x.model.create([HDict.of({ id: new HRef('p'), point: MARKER, his: MARKER, kind: 'Number' }), HDict.of({ id: new HRef('q'), point: MARKER, his: MARKER, kind: 'Number' })]);
  const tag = (id: string, name: string): unknown => x.model.get(id)?.get(name);
  await x.his.write('p', 'Number', n(T0 - 2000, T0 - 1000));
  x.box.refreshStatus('p');
  t.equal(tag('p', 'syncStatus'), 'pending', 'samples waiting');
  t.equal(tag('p', 'syncLast'), undefined, 'nothing acknowledged yet');
  await x.box.state.ack([['p', T0 - 1000]], 1);
  x.box.refreshStatus('p', false);
  t.equal(tag('p', 'syncStatus'), 'pending', 'caught up but not ready (not found upstream)');
  x.box.refreshStatus('p');
  t.equal(tag('p', 'syncStatus'), 'ok');
  t.same(tag('p', 'syncLast'), new HDateTime(T0 - 1000, UTC));
  x.box.setStatus('q', 'fault', 'refused');
  t.equal(tag('q', 'syncErr'), 'refused');

  t.equal(x.box.failed('unreachable', ['p', 'q']), 750, 'the first delay: 1000 drawn at 0.5 between half and all');
  t.equal(x.box.failed('unreachable', ['p', 'q']), 1500, 'doubled');
  t.equal(x.box.failures, 2);
  t.equal(tag('p', 'syncStatus'), 'down');
  t.equal(tag('p', 'syncErr'), 'unreachable');
  t.equal(tag('q', 'syncStatus'), 'fault', 'a fault stays');
  t.same(x.box.byStatus(['p', 'q', 'r']), { ok: 0, pending: 1, down: 1, fault: 1 }, 'a point without a status counts as pending');
  t.ok(x.box.recovered(), 'it had failed');
  t.notOk(x.box.recovered());
  t.equal(x.box.failed('unreachable'), 750, 'the backoff starts over');

  t.notOk(x.box.faultsDue());
  x.clock.advance(8000);
  t.ok(x.box.faultsDue(), 'a fault is tried again after retry.maxMs');
  x.box.resetStatus(new Set(['p']), new Set());
  t.equal(tag('q', 'syncStatus'), undefined, 'a point no longer selected loses its tags');
  t.equal(tag('p', 'syncStatus'), 'down', 'a selected one keeps them until refreshed');
  t.notOk(x.box.faultsDue());
});

t.test('without status: nothing is shown on the points, the figures are kept', async (t) => {
  const x = await open(tempDir(t));
  t.teardown(() => close(x));
  await x.model.create([HDict.of({ id: new HRef('p'), point: MARKER, his: MARKER, kind: 'Number' })]);
  x.box.setStatus('p', 'fault', 'refused');
  t.equal(x.model.get('p')?.get('syncStatus'), undefined);
  t.same(x.box.byStatus(['p']), { ok: 0, pending: 0, down: 0, fault: 1 });
});

t.test('backlog figures and starting at the newest sample', async (t) => {
  const x = await open(tempDir(t));
  t.teardown(() => close(x));
  await x.his.write('p', 'Number', n(100, 200, 300, 400));
  await x.his.write('q', 'Number', n(100, 200));
  await x.his.write('r', 'Number', n(100));
  await x.box.state.ack([['q', 200]], 1);
  const b = x.box.backlog(['p', 'q', 'none']);
  t.equal(b.points, 1, 'q is caught up');
  t.ok(b.samples >= 3 && b.samples <= 4, `about p's four samples (${b.samples})`);
  await x.box.startAtEnd(['p', 'q', 'none']);
  t.equal(x.box.state.cursor('p'), 400, 'a point without a cursor starts at its newest sample');
  t.equal(x.box.state.cursor('q'), 200, 'a cursor stays');
  t.equal(x.box.state.cursor('none'), -Infinity, 'nothing to start at');
  t.same(x.box.backlog(['p', 'q', 'r']), { points: 1, samples: 1 });
});
