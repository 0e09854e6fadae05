/**
 * Late samples and the uplink's marks of them (SyncState.markLate through HistoryStore.onPlan), on
 * a real LevelDB: a write at or before a point's cursor marks its span in the write's own batch;
 * a write that fails marks nothing; the marks survive a reopen; a write while a batch is read or in
 * flight is marked; what was marked while a late span was being sent stays after its ack.
 */
import t from 'tap';
import { Store } from '../../src/store/db.js';
import { HistoryStore } from '../../src/store/history.js';
import { SyncState } from '../../src/sync/state.js';
import { tempDir } from '../helpers/tmp.js';

interface Open {
  store: Store;
  his: HistoryStore;
  state: SyncState;
}

async function open(dir: string): Promise<Open> {
  const store = await Store.open(dir);
  const his = new HistoryStore(store, { chunkSize: 8 });
  await his.start();
  const state = new SyncState(store, 'up');
  await state.load();
  his.events.on('his.plan', state, (id, first, last, before, batch) => state.markLate(id, first, last, before, batch));
  return { store, his, state };
}

async function close(x: Open): Promise<void> {
  await x.his.stop();
  await x.store.close();
}

const n = (...ts: number[]): { ts: number; val: number }[] => ts.map((x) => ({ ts: x, val: x / 10 }));

t.test('a write at or before the cursor marks its span, in its own batch', async (t) => {
  const dir = tempDir(t);
  let x = await open(dir);
  await x.his.write('p', 'Number', n(100, 200, 300));
  t.same(x.state.lateSpans('p'), [], 'no cursor yet: nothing is late');
  await x.state.ack([['p', 300]], 1);
  await x.his.write('p', 'Number', n(400, 500));
  t.same(x.state.lateSpans('p'), [], 'samples after the cursor are not late');
  await x.his.write('p', 'Number', n(50, 60));
  await x.his.write('p', 'Number', n(200));
  t.same(x.state.lateSpans('p'), [[50, 60], [200, 200]], 'a backfill and a correction');
  await x.his.write('p', 'Number', n(250, 450));
  t.same(x.state.lateSpans('p'), [[50, 60], [200, 200], [250, 300]], 'a write across the cursor: late up to the cursor only');
  await t.rejects(x.his.write('p', 'Str', [{ ts: 10, val: 'x' }]), /Number history/, 'a write refused');
  t.same(x.state.lateSpans('p'), [[50, 60], [200, 200], [250, 300]], 'marks nothing');
  await close(x);
  x = await open(dir);
  t.same(x.state.lateSpans('p'), [[50, 60], [200, 200], [250, 300]], 'the marks are on disk');
  t.same(x.state.late('p'), [50, 60], 'oldest first');
  await close(x);
});

t.test('while a batch is read and in flight, writes it may miss are marked', async (t) => {
  const x = await open(tempDir(t));
  await x.his.write('p', 'Number', n(100, 200, 300));
  await x.state.ack([['p', 100]], 1);
  // The uplink claims the point (everything) while it reads, then up to the last sample it read.
  x.state.claim('p', Infinity);
  await x.his.write('p', 'Number', n(900));
  t.same(x.state.lateSpans('p'), [], 'during the read, a write after every sample: beyond what the read can hold, not late');
  await x.his.write('p', 'Number', n(250));
  t.same(x.state.lateSpans('p'), [[250, 250]], 'during the read, a write among the samples: the read may have missed it');
  x.state.claim('p', 300);
  await x.his.write('p', 'Number', n(280, 1000));
  t.same(x.state.lateSpans('p'), [[250, 250], [280, 300]], 'a write into the batch in flight: its part up to the batch end');
  await x.his.write('p', 'Number', n(1100));
  t.same(x.state.lateSpans('p'), [[250, 250], [280, 300]], 'a write after the batch: not late');
  x.state.releaseClaims();
  await x.his.write('p', 'Number', n(290));
  t.same(x.state.lateSpans('p'), [[250, 250], [280, 300]], 'claims released: after the cursor is not late');
  await x.his.write('p', 'Number', n(50));
  t.same(x.state.lateSpans('p'), [[50, 50], [250, 250], [280, 300]], 'before it is');
  await close(x);
});

t.test('the ack of a late span keeps what was marked since it was read', async (t) => {
  const dir = tempDir(t);
  let x = await open(dir);
  await x.his.write('p', 'Number', n(100, 200, 300, 400));
  await x.state.ack([['p', 400]], 1);
  await x.his.write('p', 'Number', n(100, 200, 300));
  t.same(x.state.late('p'), [100, 300]);
  // Sent in part (a batch's budget): 100..200; meanwhile 150 and 120 are written again.
  await x.state.beginReads(x.his, [{ id: 'p', late: true }]);
  await x.his.write('p', 'Number', n(150));
  await x.his.write('p', 'Number', n(120));
  await x.state.ackSent(x.his, [], 2, [['p', 100, 200]]);
  t.same(x.state.lateSpans('p'), [[120, 120], [150, 150], [201, 300]], 'the rest of the span, and the samples written again since the read');
  await x.state.beginReads(x.his, [{ id: 'p', late: true }]);
  await x.state.ackSent(x.his, [], 3, [['p', 120, 300]]);
  t.same(x.state.lateSpans('p'), [], 'all sent');
  await close(x);
  x = await open(dir);
  t.same(x.state.lateSpans('p'), [], 'and gone from the disk');
  t.equal(x.state.cursor('p'), 400, 'the cursor did not move');
  await close(x);
});

t.test('forgetting a point cursor forgets its late spans', async (t) => {
  const dir = tempDir(t);
  let x = await open(dir);
  await x.his.write('p', 'Number', n(100, 200));
  await x.state.ack([['p', 200]], 1);
  await x.his.write('p', 'Number', n(100));
  await x.state.forget(['p'], { cursor: true, mapping: true });
  t.same(x.state.lateSpans('p'), []);
  await close(x);
  x = await open(dir);
  t.same(x.state.lateSpans('p'), [], 'on disk too');
  await close(x);
});
