/**
 * A new driver is its kind and one registration (issue 27, docs/drivers.md "Adding a driver"):
 * given to the registry, a third kind's connector marker is a primary marker of the model, its
 * record check runs on createRec and updateRec, the `drivers` op lists it with its features, and
 * commissioning learns its connectors, without any other file knowing of it. The fake kind
 * below stands for that driver's folder; the built-in kinds are registered beside it.
 */
import t from 'tap';
import type { OpContext, OpRequest } from '../../src/api/op.js';
import { createRecOp, driversOp, learnOp, updateRecOp } from '../../src/api/ops/index.js';
import { type DriverKind, DriverRegistry, builtinDriverKinds, driverTags } from '../../src/drivers/index.js';
import { HDict, HGrid, HNumber, HRef, MARKER, type HVal } from '../../src/haystack/values.js';
import { ManualClock } from '../../src/lib/clock.js';
import { ErrorCodes, HayloftError, isHayloftError } from '../../src/lib/errors.js';
import { silentLogger } from '../../src/lib/log.js';
import { Model } from '../../src/model/model.js';
import { PointState } from '../../src/model/point-state.js';
import { Commissioning } from '../../src/poller/commission.js';
import { Store } from '../../src/store/db.js';
import { HistoryStore } from '../../src/store/history.js';
import { RecordStore } from '../../src/store/records.js';
import { FakeDriver } from '../helpers/fake-driver.js';
import { tempDir } from '../helpers/tmp.js';
import { Gate } from '../../src/auth/gate.js';

const T0 = Date.UTC(2024, 0, 15, 9, 0, 0);

/** What the fake kind was asked, to show that the generic code called it. */
interface Seen {
  checks: { id: string; update: boolean }[];
  progress: number[];
}

/** The fake protocol: a connector needs a `fakeBus` Number; learn proposes two addresses. */
function fakeKind(seen: Seen): DriverKind {
  return {
    ...driverTags('fake', { write: false, cov: false }),
    dis: 'Fake bus',
    features: { cur: true, write: false, his: false, learn: true, discover: false, cov: false },
    checkRecord(rec, old) {
      if (!rec.has('fakeConn')) return;
      seen.checks.push({ id: (rec.get('id') as HRef).id, update: old !== undefined });
      if (!(rec.get('fakeBus') instanceof HNumber)) throw new HayloftError(ErrorCodes.INVALID_RECORD, 'a fakeConn needs fakeBus, the bus number');
    },
    learn: (ctx) => {
      ctx.progress(50);
      seen.progress.push(50);
      const bound = new Map(ctx.points().map((p) => [p.tags.get('fakeCur'), p.id]));
      return Promise.resolve(
        ['a1', 'a2'].map((addr) => {
          const row: Record<string, HVal> = { name: addr, point: MARKER, cur: MARKER, kind: 'Number', fakeConnRef: new HRef(ctx.conn.id, ctx.displayOf(ctx.conn.id)), fakeCur: addr };
          const id = bound.get(addr);
          if (id !== undefined) row.id = new HRef(id);
          return HDict.of(row);
        }),
      );
    },
    load: () => Promise.resolve(new FakeDriver()),
  };
}

t.test('a third driver kind, registered, is known to the model, the ops and commissioning', async (t) => {
  const store = await Store.open(tempDir(t));
  const clock = new ManualClock(T0);
  const history = new HistoryStore(store);
  await history.start();
  t.teardown(async () => {
    await history.stop();
    await store.close();
  });
  const seen: Seen = { checks: [], progress: [] };
  const drivers = new DriverRegistry([], [...builtinDriverKinds(), fakeKind(seen)]);
  const model = await Model.load({ records: new RecordStore(store), clock, drivers });
  const points = new PointState({ model, history, drivers: drivers.tags() });
  const commission = new Commissioning({ model, points, drivers, clock, log: silentLogger() });
  const ctx = { model, clock, log: silentLogger(), points, drivers: drivers.infos(), commission: () => Promise.resolve(commission) } as unknown as OpContext;
  const req = (op: string, rows: Record<string, HVal>[]): OpRequest => ({ op, method: 'POST', grid: HGrid.fromRows(rows.map((r) => HDict.of(r))), ctx, gate: Gate.OPEN });
  const refused = async (p: unknown, code: string, message: RegExp, what: string): Promise<void> => {
    try {
      await p;
      t.fail(`${what}: accepted`);
    } catch (e) {
      t.ok(isHayloftError(e) && e.code === code && message.test(e.message), `${what}: ${e instanceof Error ? e.message : String(e)}`);
    }
  };

  // Without the registry the model knows no fakeConn: the marker is not a primary one.
  const bare = await Store.open(tempDir(t));
  t.teardown(() => bare.close());
  const plain = await Model.load({ records: new RecordStore(bare), clock });
  await refused(plain.create([HDict.of({ fakeConn: MARKER, fakeBus: HNumber.of(1) })]), ErrorCodes.INVALID_RECORD, /needs one primary marker/, 'a model without drivers');

  await refused(createRecOp.run(req('createRec', [{ id: HRef.of('bad'), fakeConn: MARKER }])), ErrorCodes.INVALID_RECORD, /needs fakeBus/, 'its check refuses a connector without fakeBus');
  t.equal(model.stored('bad'), undefined, 'and nothing was stored');
  await createRecOp.run(req('createRec', [{ id: HRef.of('bus1'), name: 'bus1', fakeConn: MARKER, fakeBus: HNumber.of(1) }]));
  t.ok(model.stored('bus1')?.has('fakeConn'), 'createRec of a fakeConn: its marker is the primary one');
  await refused(
    createRecOp.run(req('createRec', [{ fakeConn: MARKER, equip: MARKER, fakeBus: HNumber.of(2) }])),
    ErrorCodes.INVALID_RECORD,
    /exactly one primary marker; got .*fakeConn/,
    'fakeConn counts as a primary marker',
  );
  await refused(updateRecOp.run(req('updateRec', [{ id: HRef.of('bus1'), fakeBus: 'one' }])), ErrorCodes.INVALID_RECORD, /needs fakeBus/, 'its check runs on updateRec too');
  t.same(seen.checks.filter((c) => c.id === 'bus1'), [{ id: 'bus1', update: false }, { id: 'bus1', update: true }], 'the check was given the old record on update');

  const listed = (await driversOp.run(req('drivers', []))).rows.map((r) => [r.get('name'), r.get('connTag'), r.get('refTag'), r.get('curTag'), (r.get('features') as HDict).has('learn')]);
  t.same(listed, [
    ['modbus', 'modbusConn', 'modbusConnRef', 'modbusCur', true],
    ['bacnet', 'bacnetConn', 'bacnetConnRef', 'bacnetCur', true],
    ['fake', 'fakeConn', 'fakeConnRef', 'fakeCur', true],
  ], 'the drivers op lists it, with tags derived from its name');

  await model.create([HDict.of({ id: HRef.of('p1'), name: 'p1', point: MARKER, cur: MARKER, kind: 'Number', fakeConnRef: HRef.of('bus1'), fakeCur: 'a2' })]);
  const learned = (await learnOp.run(req('learn', [{ connId: HRef.of('bus1') }]))).rows;
  t.same(learned.map((r) => [r.get('fakeCur'), (r.get('id') as HRef | undefined)?.id]), [['a1', undefined], ['a2', 'p1']], 'learn ran its learn, with the points already bound');
  t.same(seen.progress, [50], 'it reported progress');
  t.notOk(model.get('bus1')?.has('learnProgress'), 'cleared once the learn ended');
  await refused(learnOp.run(req('learn', [{ connId: 'bus1' }])), ErrorCodes.BAD_REQUEST, /modbusConn or bacnetConn or fakeConn/, 'learn names its marker among the learnable');
});
