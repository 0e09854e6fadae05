/**
 * The poller's write queue on its own (src/poller/write-queue.ts): when a point's effective value
 * goes to the device under writeMinTime, writeMaxTime and writeOnOpen, retries with backoff, and
 * relinquishing. Real model, point state and point writer over a temp LevelDB (values reach the
 * queue as a pointWrite does), a device that records what it is sent, and a manual clock: the
 * test plays the poller's timer by running the queue at the times it asks for.
 */
import t, { type Test } from 'tap';
import { type DriverConn, type PointSpec, type PreparedWrite, type RawValue, downError, refusedError } from '../../src/drivers/driver.js';
import { HDict, HNumber, HRef, MARKER, type HVal } from '../../src/haystack/values.js';
import { ManualClock } from '../../src/lib/clock.js';
import type { HayloftError } from '../../src/lib/errors.js';
import { silentLogger } from '../../src/lib/log.js';
import { Model } from '../../src/model/model.js';
import { PointState } from '../../src/model/point-state.js';
import { PointWriter } from '../../src/model/point-writer.js';
import { WriteQueue, type WriteTarget } from '../../src/poller/write-queue.js';
import { Store } from '../../src/store/db.js';
import { HistoryStore } from '../../src/store/history.js';
import { RecordStore } from '../../src/store/records.js';
import { WriteStore } from '../../src/store/write-store.js';
import { tempDir } from '../helpers/tmp.js';

const T0 = Date.UTC(2024, 0, 15, 9, 0, 0);
const actor = { user: 'tech' };

/** A device that records every write (when, which address, what) and fails while told to. */
class RecordingDevice {
  readonly writes: { at: number; addr: string; val: RawValue | null }[] = [];
  /** Every attempt, failed ones included. */
  readonly attempts: number[] = [];
  failWith: (() => HayloftError) | undefined;

  constructor(private readonly clock: ManualClock) {}

  conn(): DriverConn {
    return {
      prepare: () => {
        throw new Error('this device is only written');
      },
      read: () => Promise.reject(new Error('this device is only written')),
      prepareWrite: (p: PointSpec): PreparedWrite & { addr: string } => ({ id: p.id, addr: String(p.tags.get('fakeWrite')) }),
      write: async (p: PreparedWrite, val: RawValue | null): Promise<void> => {
        await Promise.resolve();
        this.attempts.push(this.clock.now());
        if (this.failWith !== undefined) throw this.failWith();
        this.writes.push({ at: this.clock.now(), addr: (p as PreparedWrite & { addr: string }).addr, val });
      },
      close: async () => {},
    };
  }

  /** The values written to one address, in order. */
  valuesAt(addr: string): (RawValue | null)[] {
    return this.writes.filter((w) => w.addr === addr).map((w) => w.val);
  }
}

interface World {
  clock: ManualClock;
  model: Model;
  writer: PointWriter;
  queue: WriteQueue;
  /** Sets a level of a point's priority array, as pointWrite does. */
  write(id: string, val: HVal | null, level?: number): Promise<void>;
  /** Adds a point the queue writes through `target` (its record: extra tags on a writable Number). */
  point(id: string, target: WriteTarget, tags?: Record<string, HVal>): Promise<void>;
  /** Plays the poller's timer up to `ms` from now: runs the queue at every time it asks for. */
  runFor(ms: number): Promise<void>;
  status(id: string): [HVal | undefined, HVal | undefined];
}

async function world(t: Test): Promise<World> {
  const dir = tempDir(t);
  const clock = new ManualClock(T0);
  const store = await Store.open(dir);
  const model = await Model.load({ records: new RecordStore(store), clock });
  const history = new HistoryStore(store);
  await history.start();
  const points = new PointState({ model, history, drivers: [{ refTag: 'fakeConnRef', writeTag: 'fakeWrite' }] });
  const log = silentLogger();
  const writer = new PointWriter({ model, points, store: new WriteStore(store, { auditMax: 100 }), clock, log });
  await writer.start();
  const queue = new WriteQueue({ points, writer, events: model.events, clock, log, wake: () => {} });
  queue.start();
  // Nothing configured at start: points added from here on write what they are given.
  queue.started();
  t.teardown(async () => {
    await queue.stop();
    writer.stop();
    await history.stop();
    await store.close();
  });
  const run = async (): Promise<number> => {
    for (let i = 0; i < 100; i++) {
      const r = queue.run(clock.monotonic());
      if (r.started.length === 0) return r.next;
      await Promise.all(r.started);
    }
    throw new Error('the queue keeps starting writes at the same instant');
  };
  return {
    clock,
    model,
    writer,
    queue,
    async write(id, val, level = 16) {
      await writer.write({ id, level, val, actor });
    },
    async point(id, target, tags = {}) {
      const conns = target.id === '' ? [] : [target.id].filter((c) => model.get(c) === undefined);
      await model.create([
        ...conns.map((c) => HDict.of({ id: new HRef(c), conn: MARKER, fakeConn: MARKER })),
        HDict.of({ id: new HRef(id), point: MARKER, writable: MARKER, kind: 'Number', fakeConnRef: new HRef(target.id), fakeWrite: id, ...tags }),
      ]);
      queue.upsert(id, model.stored(id), target, 'fakeWrite');
    },
    async runFor(ms) {
      // The queue's times are monotonic (lib/clock.ts): time passes by advancing both readings.
      const end = clock.monotonic() + ms;
      for (;;) {
        const next = await run();
        if (next > end) break;
        clock.advance(next - clock.monotonic());
      }
      clock.advance(end - clock.monotonic());
      await run();
    },
    status(id) {
      const rec = model.get(id);
      return [rec?.get('writeStatus'), rec?.get('writeErr')];
    },
  };
}

function target(id: string, device: RecordingDevice): WriteTarget {
  return { id, label: id, conn: device.conn(), problem: undefined };
}

const minutes = (n: number): HNumber => HNumber.of(n, 'min');
const seconds = (n: number): HNumber => HNumber.of(n, 's');

t.test('without tuning: each change goes to the device at once, and only once', async (t) => {
  const w = await world(t);
  const dev = new RecordingDevice(w.clock);
  await w.point('p', target('c', dev));
  t.same(w.status('p'), ['unknown', undefined], 'nothing to write yet');
  await w.write('p', HNumber.of(1));
  t.same(w.status('p'), ['pending', undefined], 'a value waits for the next run');
  await w.runFor(0);
  t.same(dev.writes, [{ at: T0, addr: 'p', val: 1 }]);
  t.same(w.status('p'), ['ok', undefined]);
  await w.runFor(3_600_000);
  t.equal(dev.writes.length, 1, 'no writeMaxTime: an unchanged value is not written again');
});

t.test('writeMinTime: no two writes closer than it, and the newest value wins', async (t) => {
  const w = await world(t);
  const dev = new RecordingDevice(w.clock);
  await w.point('p', target('c', dev), { writeMinTime: seconds(10) });
  await w.write('p', HNumber.of(1));
  await w.runFor(0);
  t.same(dev.valuesAt('p'), [1], 'the first change goes at once');

  for (const v of [2, 3, 4]) {
    w.clock.advance(2_000);
    await w.write('p', HNumber.of(v));
    await w.runFor(0);
  }
  t.same(dev.valuesAt('p'), [1], 'changes within writeMinTime of the last write wait');
  t.same(w.status('p'), ['pending', undefined]);
  await w.runFor(10_000);
  t.same(dev.valuesAt('p'), [1, 4], 'then only the newest goes, once');
  t.equal(dev.writes[1]?.at, T0 + 10_000, 'writeMinTime after the previous write');
  t.same(w.status('p'), ['ok', undefined]);

  // A change long after the last write is not held back.
  w.clock.advance(60_000);
  await w.write('p', HNumber.of(5));
  await w.runFor(0);
  t.same(dev.valuesAt('p'), [1, 4, 5]);
  const gaps = dev.writes.slice(1).map((x, i) => x.at - (dev.writes[i]?.at ?? 0));
  t.ok(gaps.every((g) => g >= 10_000), `no two writes closer than 10 s (${gaps.join(', ')} ms)`);
});

t.test('writeMaxTime: the effective value is written again that long after the last write', async (t) => {
  const w = await world(t);
  const dev = new RecordingDevice(w.clock);
  await w.point('p', target('c', dev), { writeMaxTime: minutes(1) });
  await w.write('p', HNumber.of(7));
  await w.runFor(59_000);
  t.same(dev.valuesAt('p'), [7], 'not again before writeMaxTime');
  await w.runFor(1_000);
  t.same(dev.writes.map((x) => x.at), [T0, T0 + 60_000], 'again at writeMaxTime');
  await w.runFor(180_000);
  t.same(
    dev.writes.map((x) => x.at - T0),
    [0, 60_000, 120_000, 180_000, 240_000],
    'and every writeMaxTime after that',
  );
  t.same(dev.valuesAt('p'), [7, 7, 7, 7, 7], 'the same effective value each time');
  t.same(w.status('p'), ['ok', undefined]);

  // A change restarts the period from its own write.
  w.clock.advance(30_000);
  await w.write('p', HNumber.of(8));
  await w.runFor(59_000);
  t.same(dev.valuesAt('p').slice(-1), [8]);
  t.equal(dev.writes.length, 6, 'the change was written, nothing since');
  await w.runFor(1_000);
  t.same(dev.writes.at(-1), { at: T0 + 240_000 + 30_000 + 60_000, addr: 'p', val: 8 });
});

t.test('writeMaxTime and writeMinTime are measured on the monotonic clock: wall-clock steps change nothing', async (t) => {
  const w = await world(t);
  const dev = new RecordingDevice(w.clock);
  await w.point('p', target('c', dev), { writeMaxTime: minutes(1), writeMinTime: seconds(5) });
  await w.write('p', HNumber.of(7));
  await w.runFor(0);
  t.same(dev.valuesAt('p'), [7]);
  w.clock.stepWall(-3_600_000);
  await w.runFor(60_000);
  t.same(dev.valuesAt('p'), [7, 7], 'written again a minute later though the wall clock stepped back an hour');
  await w.write('p', HNumber.of(8));
  w.clock.stepWall(7_200_000);
  await w.runFor(1_000);
  t.same(dev.valuesAt('p'), [7, 7], 'a step forward does not cut writeMinTime short');
  await w.runFor(4_000);
  t.same(dev.valuesAt('p'), [7, 7, 8], 'the change goes once writeMinTime has passed');
});

t.test('writeOnOpen: written again when the connector answers after being down', async (t) => {
  const w = await world(t);
  const dev = new RecordingDevice(w.clock);
  const other = new RecordingDevice(w.clock);
  const c = target('c', dev);
  await w.point('open', c, { writeOnOpen: MARKER });
  await w.point('plain', c);
  await w.point('elsewhere', target('d', other), { writeOnOpen: MARKER });
  await w.write('open', HNumber.of(1));
  await w.write('plain', HNumber.of(2));
  await w.write('elsewhere', HNumber.of(3));
  await w.runFor(0);
  t.same([dev.valuesAt('open'), dev.valuesAt('plain'), other.valuesAt('elsewhere')], [[1], [2], [3]]);

  w.clock.advance(30_000);
  w.queue.reopened('c');
  await w.runFor(0);
  t.same(dev.valuesAt('open'), [1, 1], 'a writeOnOpen point is written again');
  t.same(dev.valuesAt('plain'), [2], 'a point without writeOnOpen is not');
  t.same(other.valuesAt('elsewhere'), [3], 'nor a point of another connector');
  t.equal(dev.writes.at(-1)?.at, T0 + 30_000, 'at once');

  // A writeOnOpen point waiting in backoff is tried at once when its connector is back.
  dev.failWith = () => downError('no answer');
  await w.write('open', HNumber.of(4));
  await w.runFor(0);
  await w.runFor(1_000);
  await w.runFor(1_500);
  t.same(w.status('open'), ['down', 'no answer']);
  const tried = dev.attempts.length;
  dev.failWith = undefined;
  w.queue.reopened('c');
  await w.runFor(0);
  t.equal(dev.attempts.length, tried + 1, 'tried again without waiting out its backoff');
  t.same(dev.valuesAt('open').at(-1), 4);
  t.same(w.status('open'), ['ok', undefined]);
});

t.test('a failed write is retried with backoff, 1 s doubling to 1 min; a newer value goes at once', async (t) => {
  const w = await world(t);
  const dev = new RecordingDevice(w.clock);
  await w.point('p', target('c', dev));
  dev.failWith = () => downError('device c does not answer');
  await w.write('p', HNumber.of(1));
  await w.runFor(0);
  t.same(w.status('p'), ['down', 'device c does not answer'], 'no answer: down, with why');
  await w.runFor(300_000);
  const gaps = dev.attempts.slice(1).map((at, i) => at - (dev.attempts[i] ?? 0));
  t.same(gaps.slice(0, 9), [1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 60_000, 60_000, 60_000], 'doubling, capped at 1 min');
  t.equal(dev.writes.length, 0);

  // A refusal is a fault, retried the same way.
  dev.failWith = () => refusedError('register 7 is read-only');
  await w.runFor(60_000);
  t.same(w.status('p'), ['fault', 'register 7 is read-only']);

  // A newer value does not wait out the backoff; once taken, the status is ok again.
  dev.failWith = undefined;
  const before = dev.attempts.length;
  w.clock.advance(1_000);
  await w.write('p', HNumber.of(2));
  await w.runFor(0);
  t.equal(dev.attempts.length, before + 1, 'written at once');
  t.same(dev.writes, [{ at: w.clock.now(), addr: 'p', val: 2 }], 'the newer value, not the failed one');
  t.same(w.status('p'), ['ok', undefined]);

  // The next failure starts the backoff over from 1 s.
  dev.failWith = () => downError('gone again');
  await w.write('p', HNumber.of(3));
  const from = dev.attempts.length;
  await w.runFor(3_000);
  const again = dev.attempts.slice(from);
  t.same(again.slice(1).map((at, i) => at - (again[i] ?? 0)), [1_000, 2_000], 'backoff starts over');
});

t.test('relinquishing: the device is sent null (it decides what that means), and the write is done', async (t) => {
  const w = await world(t);
  const dev = new RecordingDevice(w.clock);
  await w.point('p', target('c', dev));
  await w.write('p', HNumber.of(21), 8);
  await w.runFor(0);
  await w.write('p', HNumber.of(18), 12);
  await w.runFor(0);
  t.same(dev.valuesAt('p'), [21], 'a lower-priority level under a set one changes nothing');

  await w.write('p', null, 8);
  await w.runFor(0);
  t.same(dev.valuesAt('p'), [21, 18], 'relinquishing a level sends the next one');
  await w.write('p', null, 12);
  await w.runFor(0);
  t.same(dev.valuesAt('p'), [21, 18, null], 'relinquishing the last level sends null');
  t.same(w.status('p'), ['ok', undefined]);
  t.equal(w.model.get('p')?.get('writeVal'), undefined, 'no effective value shown');
  await w.runFor(3_600_000);
  t.equal(dev.writes.length, 3, 'and null is not sent again');
});

t.test('a point no longer written by the driver leaves the queue, and its writeStatus goes', async (t) => {
  const w = await world(t);
  const dev = new RecordingDevice(w.clock);
  const c = target('c', dev);
  await w.point('p', c);
  await w.write('p', HNumber.of(1));
  await w.runFor(0);
  t.same(w.status('p'), ['ok', undefined]);
  // The poller upserts a point whose write address was removed (an updateRec) as this.
  const rec = w.model.stored('p')?.without('fakeWrite');
  w.queue.upsert('p', rec, c, 'fakeWrite');
  t.notOk(w.queue.has('p'));
  t.same(w.status('p'), [undefined, undefined], 'writeStatus and writeErr removed');
  await w.write('p', HNumber.of(2));
  await w.runFor(3_600_000);
  t.same(dev.valuesAt('p'), [1], 'its changes no longer go to the device');
});
