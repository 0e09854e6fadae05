/**
 * Point state, the one owner of a point's live tags: the facts every part reads the same way,
 * "fed by a driver" from the registered drivers' Ref tags, and history turned into tags, over a
 * real LevelDB store.
 */
import t from 'tap';
import { BacnetDriver, DriverRegistry, ModbusDriver } from '../../src/drivers/index.js';
import { UTC, timeZone } from '../../src/haystack/tz.js';
import { HDateTime, HDict, HNumber, HRef, MARKER, type HVal } from '../../src/haystack/values.js';
import { ManualClock } from '../../src/lib/clock.js';
import { Model } from '../../src/model/model.js';
import { POINT_KINDS_TEXT, PointState, describeKind, pointKind, pointUnit, pointValue, pointZone } from '../../src/model/point-state.js';
import { Store } from '../../src/store/db.js';
import { HistoryStore } from '../../src/store/history.js';
import { RecordStore } from '../../src/store/records.js';
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

t.test('fed by a driver: derived from the registered drivers, hisWrite sets curVal only without one', async (t) => {
  const store = await Store.open(tempDir(t));
  const clock = new ManualClock(T0);
  const drivers = new DriverRegistry([new ModbusDriver(), new BacnetDriver()]);
  const model = await Model.load({ records: new RecordStore(store), clock, drivers });
  const history = new HistoryStore(store);
  await history.start();
  t.teardown(async () => {
    await history.stop();
    await store.close();
  });
  const points = new PointState({ model, history, drivers: drivers.all() });
  await model.create([
    d({ id: new HRef('c1'), modbusConn: MARKER, uri: 'modbus-tcp://127.0.0.1:1' }),
    d({ id: new HRef('c2'), bacnetConn: MARKER, uri: 'bacnet://127.0.0.1/1' }),
    d({ id: new HRef('free'), point: MARKER, cur: MARKER, his: MARKER, kind: 'Number', unit: 'kW', tz: 'UTC' }),
    d({ id: new HRef('mb'), point: MARKER, cur: MARKER, his: MARKER, kind: 'Number', modbusConnRef: new HRef('c1'), modbusCur: 'holding:1' }),
    d({ id: new HRef('bn'), point: MARKER, cur: MARKER, his: MARKER, kind: 'Number', bacnetConnRef: new HRef('c2'), bacnetCur: 'AI1' }),
    d({ id: new HRef('nocur'), point: MARKER, his: MARKER, kind: 'Number' }),
  ]);
  const rec = (id: string): HDict => model.stored(id) as HDict;
  t.notOk(points.fedByDriver(rec('free')));
  t.ok(points.fedByDriver(rec('mb')), 'modbusConnRef names a driver connector');
  t.ok(points.fedByDriver(rec('bn')), 'bacnetConnRef too');
  const onlyModbus = new PointState({ model, history, drivers: [{ refTag: 'modbusConnRef' }] });
  t.notOk(onlyModbus.fedByDriver(rec('bn')), 'a driver not registered feeds nothing');

  for (const id of ['free', 'mb', 'bn', 'nocur']) {
    await history.writeMany([{ pointId: id, kind: 'Number', samples: [{ ts: T0, val: 1 }, { ts: T0 + 60_000, val: 2 }] }]);
    points.hisWritten(id, { ts: T0 + 60_000, val: HNumber.of(2, 'kW') });
  }
  const got = (id: string, tag: string): HVal | undefined => model.get(id)?.get(tag);
  t.same(got('free', 'curVal'), HNumber.of(2, 'kW'), 'a cur point without a driver takes the newest sample');
  t.equal(got('free', 'curStatus'), 'ok');
  t.same(got('free', 'hisSize'), HNumber.of(2));
  t.same(got('free', 'hisStart'), new HDateTime(T0, UTC));
  t.same(got('free', 'hisEnd'), new HDateTime(T0 + 60_000, UTC));
  for (const id of ['mb', 'bn']) {
    t.equal(got(id, 'curVal'), undefined, `${id}: its driver owns curVal`);
    t.same(got(id, 'hisSize'), HNumber.of(2), `${id}: his tags still shown`);
  }
  t.equal(got('nocur', 'curVal'), undefined, 'not a cur point: no curVal');

  // hisDelete of the newest sample: refreshFromHistory takes the one before.
  await history.delete('free', T0 + 60_000, T0 + 60_001);
  await points.refreshFromHistory('free');
  t.same(got('free', 'curVal'), HNumber.of(1, 'kW'), 'the newest sample left, with the point unit');
  t.same(got('free', 'hisSize'), HNumber.of(1));
  await history.delete('free', T0, T0 + 1);
  await points.refreshFromHistory('free');
  t.equal(got('free', 'curVal'), undefined, 'no history: no curVal');
  t.equal(got('free', 'curStatus'), 'unknown');
  t.equal(got('free', 'hisSize'), undefined, 'no his tags without history');

  points.setConn('c1', 'down', 'no answer');
  t.equal(got('c1', 'connStatus'), 'down');
  t.equal(got('c1', 'connErr'), 'no answer');
  points.setConn('c1', null, 'ignored');
  t.equal(got('c1', 'connStatus'), undefined, 'null status removes the conn tags');
  t.equal(got('c1', 'connErr'), undefined);
  t.equal(model.stored('free')?.get('curVal'), undefined, 'live tags never reach the stored record');
});
