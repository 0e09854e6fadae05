/**
 * The store's part (store/recovery.ts) on a real LevelDB: a failed write suspends every write
 * (whoever writes, through any sublevel) and the store reopens at the next check, with history's
 * metadata read again and fresh sublevel handles; a reopen that keeps failing with room on the
 * disk makes health say a restart would help (systemd's watchdog then stops being fed); a full
 * disk does not.
 */
import path from 'node:path';
import { ClassicLevel } from 'classic-level';
import t, { type Test } from 'tap';
import { isHayloftError } from '../../src/lib/errors.js';
import { silentLogger } from '../../src/lib/log.js';
import { FORMAT_VERSION, Store } from '../../src/store/db.js';
import { HistoryStore } from '../../src/store/history.js';
import { StoreKeeper } from '../../src/store/recovery.js';
import { DiskSpace, type SpaceReading } from '../../src/store/space.js';
import { tempDir } from '../helpers/tmp.js';

const MIB = 1024 * 1024;

async function world(t: Test, free = 100 * MIB) {
  const dir = tempDir(t);
  const store = await Store.open(dir);
  const reading = { free };
  const space = new DiskSpace({ dir, floorBytes: 0, log: silentLogger(), refreshMs: 3_600_000, statfs: async (): Promise<SpaceReading> => ({ free: reading.free, total: 1000 * MIB }) });
  const history = new HistoryStore(store, { space });
  await history.start();
  const keeper = new StoreKeeper({ store, space, log: silentLogger(), writeBufferBytes: MIB, reload: () => history.reload(), retryMs: 3_600_000 });
  t.teardown(() => keeper.stop());
  return { dir, store, history, keeper, reading };
}

async function codeOf(p: Promise<unknown>): Promise<string | undefined> {
  try {
    await p;
    return undefined;
  } catch (e) {
    return isHayloftError(e) ? e.code : String(e);
  }
}

t.test('a failed write suspends all writes; the next check reopens, nothing acknowledged lost', async (t) => {
  const { store, history, keeper } = await world(t);
  await history.write('p', 'Number', [{ ts: 1000, val: 1 }]);
  const oldRec = store.rec;
  store.writeFailed(new Error('IO error: 000005.log: No space left on device'));
  t.equal(store.state, 'failed');
  t.equal(await codeOf(store.rec.put('x', 'y')), 'HL_STORE_UNAVAILABLE', 'a put through a sublevel is refused');
  t.equal(await codeOf(store.db.batch().put('x', 'y', { sublevel: store.auth }).write()), 'HL_STORE_UNAVAILABLE', 'a chained batch is refused');
  t.equal(await codeOf(history.write('p', 'Number', [{ ts: 2000, val: 2 }])), 'HL_STORE_UNAVAILABLE', 'history is refused');
  t.equal(await store.rec.get('x'), undefined, 'reads still work');
  t.match(await keeper.health(), { ok: false, status: 'failed', restartHelps: false, error: /No space left on device/ });

  await keeper.check();
  t.equal(store.state, 'open', 'reopened');
  t.equal(store.reopens, 1);
  t.not(store.rec, oldRec, 'fresh sublevel handles');
  await store.rec.put('x', 'y');
  t.equal(await store.rec.get('x'), 'y', 'writes go on');
  await history.write('p', 'Number', [{ ts: 2000, val: 2 }]);
  t.same(history.stats('p'), { kind: 'Number', size: 2, start: 1000, end: 2000 }, 'history metadata follows the disk');
  t.match(await keeper.health(), { ok: true, status: 'open', formatVersion: FORMAT_VERSION });
});

t.test('after a reopen history reads its metadata again from the disk', async (t) => {
  const { store, history, keeper } = await world(t);
  // Another writer of the same folder (what a failed write may leave, here on purpose): memory
  // does not know of it until the reopen reads the disk again.
  const other = new HistoryStore(store);
  await other.start();
  await other.write('q', 'Number', [{ ts: 5000, val: 5 }]);
  t.equal(history.stats('q').size, 0, 'not in memory yet');
  store.writeFailed(new Error('IO error'));
  await keeper.check();
  t.same(history.stats('q'), { kind: 'Number', size: 1, start: 5000, end: 5000 }, 'read again on reopening');
  t.same(history.points().sort(), ['q'], 'every point with history');
});

t.test('no reopen while the disk has no room for it; a full disk does not ask for a restart', async (t) => {
  const { store, keeper, reading } = await world(t, 100 * 1024);
  store.writeFailed(new Error('IO error: No space left on device'));
  for (let i = 0; i < 5; i++) await keeper.check();
  t.equal(store.state, 'failed', 'still waiting for room');
  t.equal(store.db.status, 'open', 'the old handle still serves reads');
  t.match(await keeper.health(), { ok: false, restartHelps: false });
  reading.free = 100 * MIB;
  await keeper.check();
  t.equal(store.state, 'open', 'reopened once there is room');
});

t.test('reopening that keeps failing with room on the disk: a restart would help', async (t) => {
  const { dir, store, keeper } = await world(t);
  store.writeFailed(new Error('IO error: Input/output error'));
  // Something else takes the database while the store has it closed: every reopen fails.
  const origReopen = store.reopen.bind(store);
  let thief: ClassicLevel | undefined;
  store.reopen = async (reload) => {
    if (thief === undefined && store.db.status === 'open') {
      await store.db.close();
      thief = new ClassicLevel(path.join(dir, 'db'));
      await thief.open();
    }
    return origReopen(reload);
  };
  for (let i = 0; i < 2; i++) await keeper.check();
  t.match(await keeper.health(), { ok: false, restartHelps: false }, 'not after two attempts');
  await keeper.check();
  t.match(await keeper.health(), { ok: false, restartHelps: true }, 'after three: the watchdog may restart');
  await thief?.close();
  await keeper.check();
  t.equal(store.state, 'open', 'and it recovers when the cause goes');
  t.match(await keeper.health(), { ok: true });
});
