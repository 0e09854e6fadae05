/**
 * Point state, the one owner of a point's live tags and their rules: the facts every part reads
 * the same way, "fed by a driver" and who owns writeStatus from the registered drivers' tags, the
 * status transitions of a driver's readings and the repeat check, a connector's status over its
 * points, and history heard from the store (real LevelDB) without anyone telling point state.
 */
import t, { type Test } from 'tap';
import { BacnetDriver, DriverRegistry, ModbusDriver } from '../../src/drivers/index.js';
import { REL, UTC, timeZone } from '../../src/haystack/tz.js';
import { HDateTime, HDict, HNumber, HRef, MARKER, type HVal } from '../../src/haystack/values.js';
import { ManualClock } from '../../src/lib/clock.js';
import { ErrorCodes } from '../../src/lib/errors.js';
import { Model } from '../../src/model/model.js';
import { POINT_KINDS_TEXT, PointState, describeKind, pointKind, pointUnit, pointValue, pointZone, driverOf, writerOf } from '../../src/model/point-state.js';
import { Store } from '../../src/store/db.js';
import { HistoryStore } from '../../src/store/history.js';
import { RecordStore } from '../../src/store/records.js';
import { until } from '../helpers/api-fixture.js';
import { tempDir } from '../helpers/tmp.js';

const d = (tags: Record<string, HVal>): HDict => HDict.of(tags);
const T0 = Date.UTC(2024, 0, 15, 9, 0, 0);

t.test('facts: kind, unit, zone, values', async (t) => {
  t.equal(pointKind(d({ kind: 'Number' })), 'Number');
  t.equal(pointKind(d({ kind: 'Bool' })), 'Bool');
  t.equal(pointKind(d({ kind: 'Str' })), 'Str');
  t.equal(pointKind(d({ kind: 'Coord' })), undefined, 'not a point kind');
  t.equal(pointKind(d({})), undefined);
  t.equal(describeKind(d({ kind: 'Coord' })), 'kind "Coord"');
  t.equal(describeKind(d({})), 'no kind tag');
  t.equal(POINT_KINDS_TEXT, 'Number, Bool or Str');
  t.equal(pointUnit(d({ unit: '°C' })), '°C');
  t.equal(pointUnit(d({ unit: HNumber.of(1) })), null, 'a unit that is not a Str is none');
  const fallback = timeZone('Sydney');
  t.equal(pointZone(d({ tz: 'New_York' }), fallback).name, 'New_York');
  t.equal(pointZone(d({ tz: 'Nowhere' }), fallback), fallback, 'an unknown zone falls back');
  t.equal(pointZone(d({}), fallback), fallback);
  t.same(pointValue('Number', 'kW', 3), HNumber.of(3, 'kW'));
  t.equal(pointValue('Bool', 'kW', true), true, 'only Numbers carry the unit');
});


interface World {
  model: Model;
  history: HistoryStore;
  points: PointState;
  /** How many times setTransient was called so far. */
  calls: () => number;
  got: (id: string, tag: string) => HVal | undefined;
}

/** A model, a history store and a started point state over a fresh LevelDB folder. */
async function world(t: Test, hisTagsMs?: number): Promise<World> {
  const store = await Store.open(tempDir(t));
  const clock = new ManualClock(T0);
  const drivers = new DriverRegistry([new ModbusDriver(), new BacnetDriver()]);
  const model = await Model.load({ records: new RecordStore(store), clock, drivers });
  const history = new HistoryStore(store);
  await history.start();
  const points = new PointState({ model, history, drivers: drivers.tags(), ...(hisTagsMs === undefined ? {} : { hisTagsMs }) });
  await points.start();
  t.teardown(async () => {
    await points.stop();
    await history.stop();
    await store.close();
  });
  let n = 0;
  const set = model.setTransient.bind(model);
  model.setTransient = (id, tags) => {
    n++;
    set(id, tags);
  };
  await model.create([
    d({ id: new HRef('c1'), modbusConn: MARKER, uri: 'modbus-tcp://127.0.0.1:1' }),
    d({ id: new HRef('c2'), bacnetConn: MARKER, uri: 'bacnet://127.0.0.1/1' }),
    d({ id: new HRef('free'), point: MARKER, cur: MARKER, his: MARKER, kind: 'Number', unit: 'kW', tz: 'UTC' }),
    d({ id: new HRef('mb'), point: MARKER, cur: MARKER, his: MARKER, kind: 'Number', unit: 'kW', modbusConnRef: new HRef('c1'), modbusCur: 'holding:1' }),
    d({ id: new HRef('mb2'), point: MARKER, cur: MARKER, kind: 'Bool', modbusConnRef: new HRef('c1'), modbusCur: 'coil:1' }),
    d({ id: new HRef('bn'), point: MARKER, cur: MARKER, his: MARKER, kind: 'Number', bacnetConnRef: new HRef('c2'), bacnetCur: 'AI1' }),
    d({ id: new HRef('nocur'), point: MARKER, his: MARKER, kind: 'Number' }),
    d({ id: new HRef('wo'), point: MARKER, cur: MARKER, his: MARKER, writable: MARKER, kind: 'Number', modbusConnRef: new HRef('c1'), modbusWrite: 'holding:2' }),
    d({ id: new HRef('sp'), point: MARKER, writable: MARKER, kind: 'Number' }),
  ]);
  return { model, history, points, calls: () => n, got: (id, tag) => model.get(id)?.get(tag) };
}

t.test('fed by a driver and who owns writeStatus: one rule each, from the registered drivers', async (t) => {
  const { model, history, points } = await world(t);
  const rec = (id: string): HDict => model.stored(id) as HDict;
  t.notOk(points.fedByDriver(rec('free')));
  t.ok(points.fedByDriver(rec('mb')), 'modbusConnRef names a Modbus connector');
  t.ok(points.fedByDriver(rec('bn')), 'bacnetConnRef a BACnet one');
  t.ok(points.fedByDriver(rec('wo')), 'a write-only point of a driver is fed by it too (it has no curVal to take)');
  t.ok(points.writtenByDriver(rec('wo')), 'and Modbus writes it');
  t.notOk(points.writtenByDriver(rec('mb')), 'no write address: no driver writes it');
  t.notOk(points.writtenByDriver(rec('sp')), 'no connector Ref: no driver writes it');
  const modbusOnly = [{ refTag: 'modbusConnRef', writeTag: 'modbusWrite' }];
  t.equal(driverOf(modbusOnly, rec('mb')), modbusOnly[0], 'driverOf names the driver');
  t.equal(driverOf(modbusOnly, rec('bn')), undefined, 'a driver not registered feeds nothing');
  t.equal(writerOf(modbusOnly, rec('wo')), modbusOnly[0]);
  const onlyModbus = new PointState({ model, history, drivers: modbusOnly });
  t.notOk(onlyModbus.fedByDriver(rec('bn')));
});

t.test('polled samples of a point a driver reads show in its his tags at the pace of hisTagsMs; hisWrite at once', async (t) => {
  const { history, points, got, calls } = await world(t, 300);
  points.curPolled('mb', 'c1', 'Number', 'kW');
  const polled = async (id: string, ts: number): Promise<void> => history.writeMany([{ pointId: id, kind: 'Number', samples: [{ ts, val: 1 }] }], { flush: 'later' });
  await polled('mb', T0);
  t.same(got('mb', 'hisSize'), HNumber.of(1), "a point's first polled sample shows at once");
  const before = calls();
  for (let i = 1; i <= 20; i++) await polled('mb', T0 + i * 1000);
  t.same(got('mb', 'hisSize'), HNumber.of(1), 'the next ones wait for their slot');
  t.equal(calls(), before, 'no model update per polled sample');
  t.ok(await until(() => got('mb', 'hisSize')?.toString() === HNumber.of(21).toString(), 5000), 'shown within the interval');
  t.same(got('mb', 'hisEnd'), new HDateTime(T0 + 20_000, REL));
  t.ok(calls() - before <= 2, `one update for the 20 samples (${calls() - before})`);
  await history.writeMany([{ pointId: 'mb', kind: 'Number', samples: [{ ts: T0 + 30_000, val: 2 }] }]);
  t.same(got('mb', 'hisSize'), HNumber.of(22), 'hisWrite shows at once');
  await polled('free', T0);
  await polled('free', T0 + 1000);
  t.same(got('free', 'hisSize'), HNumber.of(2), 'a point no driver reads (its curVal is its history): at once');
  t.same(got('free', 'curVal'), HNumber.of(1, 'kW'));
  await polled('mb', T0 + 40_000);
  await points.stop();
  t.same(got('mb', 'hisSize'), HNumber.of(23), 'stop shows what is due');
});

t.test('history: his tags and curVal follow every write and delete without anyone telling point state', async (t) => {
  const { model, history, points, got } = await world(t);
  for (const id of ['free', 'mb', 'bn', 'nocur', 'wo']) {
    await history.writeMany([{ pointId: id, kind: 'Number', samples: [{ ts: T0, val: 1 }, { ts: T0 + 60_000, val: 2 }] }]);
  }
  t.same(got('free', 'curVal'), HNumber.of(2, 'kW'), 'a cur point without a driver takes the newest sample, in its unit');
  t.equal(got('free', 'curStatus'), 'ok');
  t.same(got('free', 'hisSize'), HNumber.of(2));
  t.same(got('free', 'hisStart'), new HDateTime(T0, UTC));
  t.same(got('free', 'hisEnd'), new HDateTime(T0 + 60_000, UTC));
  for (const id of ['mb', 'bn']) {
    t.equal(got(id, 'curVal'), undefined, `${id}: its driver owns curVal`);
    t.same(got(id, 'hisSize'), HNumber.of(2), `${id}: his tags still shown`);
  }
  t.equal(got('wo', 'curVal'), undefined, 'a write-only point of a driver: not from history either');
  t.same(got('wo', 'hisSize'), HNumber.of(2));
  t.equal(got('nocur', 'curVal'), undefined, 'not a cur point: no curVal');

  await history.writeMany([{ pointId: 'free', kind: 'Number', samples: [{ ts: T0 - 60_000, val: 9 }] }]);
  t.same(got('free', 'curVal'), HNumber.of(2, 'kW'), 'an older sample written later does not set curVal back');
  t.same(got('free', 'hisSize'), HNumber.of(3), 'but counts');
  t.same(got('free', 'hisStart'), new HDateTime(T0 - 60_000, UTC));

  // A delete of the newest sample: point state reads back the one before.
  await history.delete('free', T0 + 60_000, T0 + 60_001);
  await points.settled();
  t.same(got('free', 'curVal'), HNumber.of(1, 'kW'), 'the newest sample left, with the point unit');
  t.same(got('free', 'hisSize'), HNumber.of(2));
  await history.delete('free', T0 - 60_000, T0 + 1);
  await points.settled();
  t.equal(got('free', 'curVal'), undefined, 'no history: no curVal');
  t.equal(got('free', 'curStatus'), 'unknown');
  t.equal(got('free', 'hisSize'), undefined, 'no his tags without history');
  t.equal(model.stored('mb')?.get('hisSize'), undefined, 'live tags never reach the stored record');

  t.same(got('mb', 'hisEnd'), new HDateTime(T0 + 60_000, REL), 'a point without tz: his tags in Rel');

  // A read-back that fails reaches whoever waits for it (hisDelete answers with the error).
  const last = history.last.bind(history);
  history.last = () => Promise.reject(new Error('disk gone'));
  await history.writeMany([{ pointId: 'free', kind: 'Number', samples: [{ ts: T0, val: 5 }, { ts: T0 + 1000, val: 6 }] }]);
  await history.delete('free', T0 + 1000, T0 + 1001);
  await t.rejects(points.settled(), { message: 'disk gone' });
  history.last = last;
  await t.resolves(points.settled(), 'told once');
});

t.test('start shows the history already there; stop stops hearing', async (t) => {
  const store = await Store.open(tempDir(t));
  const clock = new ManualClock(T0);
  const history = new HistoryStore(store);
  await history.start();
  t.teardown(async () => {
    await history.stop();
    await store.close();
  });
  const model = await Model.load({ records: new RecordStore(store), clock });
  await model.create([d({ id: new HRef('p'), point: MARKER, cur: MARKER, his: MARKER, kind: 'Bool', tz: 'UTC' })]);
  await history.writeMany([{ pointId: 'p', kind: 'Bool', samples: [{ ts: T0, val: true }] }]);
  t.equal(model.get('p')?.get('hisSize'), undefined, 'nobody heard it yet');
  const points = new PointState({ model, history, drivers: [] });
  await points.start();
  t.same(model.get('p')?.get('hisSize'), HNumber.of(1), 'start shows it');
  t.equal(model.get('p')?.get('curVal'), true, 'and the newest sample as curVal');
  await points.stop();
  await history.writeMany([{ pointId: 'p', kind: 'Bool', samples: [{ ts: T0 + 1000, val: false }] }]);
  t.equal(model.get('p')?.get('curVal'), true, 'stopped: writes are no longer heard');
});

t.test('readings: status transitions of a point a driver reads', async (t) => {
  const { points, got, calls } = await world(t);
  const cur = (id: string): [HVal | undefined, HVal | undefined, HVal | undefined] => [got(id, 'curVal'), got(id, 'curStatus'), got(id, 'curErr')];
  points.curPolled('mb', 'c1', 'Number', 'kW');
  t.same(cur('mb'), [undefined, 'unknown', undefined], 'read by a driver: unknown until the first read');
  t.equal(points.curOk('mb', 21.5), 21.5, 'curOk returns the value for history');
  t.same(cur('mb'), [HNumber.of(21.5, 'kW'), 'ok', undefined], 'ok, in the point unit');
  t.equal(points.curOk('mb', true), 1, 'a Bool read for a Number point is 0 or 1');
  t.same(cur('mb'), [HNumber.of(1, 'kW'), 'ok', undefined]);
  t.equal(points.curOk('mb', 'hello'), undefined, 'text for a Number point: nothing to collect');
  t.same(cur('mb'), [undefined, 'fault', 'the device sent text ("hello") for a Number point'], 'fault, no curVal');
  points.curOk('mb', 3);
  t.same(cur('mb'), [HNumber.of(3, 'kW'), 'ok', undefined], 'the next good read clears the fault');

  points.curStale('mb');
  t.same(cur('mb'), [HNumber.of(3, 'kW'), 'stale', undefined], 'stale keeps the last value');
  points.curOk('mb', 3);
  t.equal(got('mb', 'curStatus'), 'ok', 'a fresh read of the same value: ok again');

  points.curErr('mb', { code: ErrorCodes.DRIVER_DOWN, message: 'no answer' });
  t.same(cur('mb'), [undefined, 'down', 'no answer'], 'the device did not answer: down, no curVal');
  points.curStale('mb');
  t.equal(got('mb', 'curStatus'), 'down', 'only an ok point goes stale');
  points.curErr('mb', { code: ErrorCodes.DRIVER_CONFIG, message: 'no such register' });
  t.same(cur('mb'), [undefined, 'fault', 'no such register'], 'any other error: fault');
  points.curFault('mb', 'the driver returned no value for this point');
  t.equal(got('mb', 'curErr'), 'the driver returned no value for this point');

  points.curOk('mb', 4);
  points.curPolled('mb', 'c1', 'Number', 'kW');
  t.same(cur('mb'), [HNumber.of(4, 'kW'), 'ok', undefined], 'read the same way again (another tag changed): keeps its reading');
  points.curPolled('mb', 'c1', 'Number', 'W');
  t.same(cur('mb'), [undefined, 'unknown', undefined], 'read in another unit: no value until the next read');
  points.curOk('mb', 4000);
  t.same(got('mb', 'curVal'), HNumber.of(4000, 'W'));

  points.curNotPolled('mb', 'fault', 'modbusCur: bad address');
  t.same(cur('mb'), [undefined, 'fault', 'modbusCur: bad address'], 'not read (bad configuration): fault');
  const n = calls();
  t.equal(points.curOk('mb', 5), undefined, 'a reading of a point no longer read is dropped');
  t.equal(calls(), n);
  points.curPolled('mb', 'c1', 'Number', 'W');
  t.same(cur('mb'), [undefined, 'unknown', undefined], 'read again after a fault: unknown');
  points.curNotPolled('mb', 'disabled', undefined);
  t.same(cur('mb'), [undefined, 'disabled', undefined]);
  points.curPolled('mb', 'c1', 'Number', 'W');
  t.equal(got('mb', 'curStatus'), 'unknown', 'enabled again: unknown until read');

  points.curOk('mb2', true);
  t.equal(got('mb2', 'curVal'), undefined, 'never bound: ignored');
  points.curPolled('mb2', 'c1', 'Bool', null);
  points.curOk('mb2', 0);
  t.same(cur('mb2'), [false, 'ok', undefined], 'a Number read for a Bool point is false or true');
  points.curRemove('mb2');
  t.same(cur('mb2'), [undefined, undefined, undefined], 'no longer a driver point: its cur tags go');
});

t.test('the repeat check: an unchanged reading does not reach the model', async (t) => {
  const { model, points, calls } = await world(t);
  const heard: string[][] = [];
  model.events.on('live.changed', heard, (id, changed) => heard.push([id, ...changed]));
  points.curPolled('mb', 'c1', 'Number', 'kW');
  points.curOk('mb', 7);
  heard.length = 0;
  const n = calls();
  for (let i = 0; i < 1000; i++) points.curOk('mb', 7);
  t.equal(calls() - n, 0, 'the same value a thousand times: no setTransient at all');
  t.same(heard, [], 'and no watch hears of it');
  points.curOk('mb', 8);
  t.same(heard, [['mb', 'curVal']], 'a new value: only curVal changed');
  points.curErr('mb', { code: ErrorCodes.DRIVER_DOWN, message: 'gone' });
  points.curErr('mb', { code: ErrorCodes.DRIVER_DOWN, message: 'gone' });
  t.same(heard.slice(1), [['mb', 'curStatus', 'curVal', 'curErr']], 'down once, not twice');
  points.curOk('mb', Number.NaN);
  const m = calls();
  points.curOk('mb', Number.NaN);
  t.equal(calls(), m, 'NaN is NaN');
  // Someone else set the tags (a test, as a driver would): the check compares with what shows.
  points.setCur('mb', { curVal: HNumber.of(1, 'kW') });
  points.curOk('mb', Number.NaN);
  t.ok(Number.isNaN((model.get('mb')?.get('curVal') as HNumber).val), 'after setCur the check compares with what it set, not with the reading before');

  points.connStatus('c1', 'ok', null);
  const k = calls();
  points.connStatus('c1', 'ok', null);
  t.equal(calls(), k, 'connector status: the same again does nothing');
  points.writeResult('wo', 'pending', undefined);
  const w = calls();
  points.writeResult('wo', 'pending', undefined);
  t.equal(calls(), w, 'write status: the same again does nothing');
});

t.test('connector status over its points', async (t) => {
  const { points, got } = await world(t);
  points.curPolled('mb', 'c1', 'Number', 'kW');
  points.curPolled('mb2', 'c1', 'Bool', null);
  points.curPolled('bn', 'c2', 'Number', null);
  points.curNotPolled('free', 'fault', 'connector c1: bad uri');
  for (const id of ['mb', 'mb2', 'bn']) points.curOk(id, 1);
  points.connStatus('c1', 'ok', null);
  t.equal(got('c1', 'connStatus'), 'ok');
  t.equal(got('c1', 'connErr'), undefined);
  points.connStatus('c1', 'down', 'connection refused');
  t.equal(got('c1', 'connStatus'), 'down');
  t.equal(got('c1', 'connErr'), 'connection refused');
  for (const id of ['mb', 'mb2']) {
    t.equal(got(id, 'curStatus'), 'down', `${id}: read through the down connector, down too`);
    t.equal(got(id, 'curErr'), 'connection refused');
    t.equal(got(id, 'curVal'), undefined);
  }
  t.equal(got('bn', 'curStatus'), 'ok', 'a point of another connector is untouched');
  t.equal(got('free', 'curStatus'), 'fault', 'a point not read keeps its own status');
  points.connStatus('c1', 'ok', null);
  t.equal(got('mb', 'curStatus'), 'down', 'back up: points stay down until their next read');
  points.curOk('mb', 2);
  t.equal(got('mb', 'curStatus'), 'ok');
  points.curUnbind('mb2');
  points.connStatus('c1', 'down', 'again');
  t.equal(got('mb', 'curErr'), 'again');
  t.equal(got('mb2', 'curErr'), 'connection refused', 'a point no longer read through it is not taken down');
  points.connStatus('c1', null, 'ignored');
  t.equal(got('c1', 'connStatus'), undefined, 'null status removes the conn tags');
  t.equal(got('c1', 'connErr'), undefined);
});

t.test('write tags: whose writeStatus it is', async (t) => {
  const { model, points, got } = await world(t);
  points.writeValue('sp', HNumber.of(20), 8);
  t.same(got('sp', 'writeVal'), HNumber.of(20));
  t.same(got('sp', 'writeLevel'), HNumber.of(8));
  t.equal(got('sp', 'writeStatus'), 'ok', 'no driver writes it: its value is all there is');
  await model.update([d({ id: new HRef('sp'), disabled: MARKER })]);
  points.writeValue('sp', HNumber.of(20), 8);
  t.equal(got('sp', 'writeStatus'), 'disabled');
  points.writeValue('wo', HNumber.of(5), 16);
  t.equal(got('wo', 'writeStatus'), undefined, 'a driver writes it: the status is the device\'s');
  points.writeResult('wo', 'pending', undefined);
  points.writeValue('wo', HNumber.of(6), 16);
  t.equal(got('wo', 'writeStatus'), 'pending', 'and a new value leaves it to the write queue');
  points.writeResult('wo', 'down', 'no answer');
  t.equal(got('wo', 'writeErr'), 'no answer');
  points.writeResult('wo', 'ok', undefined);
  t.equal(got('wo', 'writeErr'), undefined);
  points.writeReleased('wo');
  t.equal(got('wo', 'writeStatus'), undefined, 'released by its driver: the driver\'s tags go');
  t.same(got('wo', 'writeVal'), HNumber.of(6), 'the value stays');
  points.writeRemove('wo');
  t.equal(got('wo', 'writeVal'), undefined, 'no longer writable: every write tag goes');
});
