/**
 * The point writer as other parts use it (the poller, MQTT commands): effective-value events,
 * timed levels ending through expireDue, the audit bound, and arrays going with deleted points,
 * over a real LevelDB store.
 */
import t from 'tap';
import { HDict, HNumber, HRef, MARKER, type HVal } from '../../src/haystack/values.js';
import { ManualClock } from '../../src/lib/clock.js';
import { ErrorCodes } from '../../src/lib/errors.js';
import { silentLogger } from '../../src/lib/log.js';
import { Model } from '../../src/model/model.js';
import { PointState } from '../../src/model/point-state.js';
import { type Effective, PointWriter } from '../../src/model/point-writer.js';
import { Store } from '../../src/store/db.js';
import { HistoryStore } from '../../src/store/history.js';
import { RecordStore } from '../../src/store/records.js';
import { WriteStore } from '../../src/store/write-store.js';
import { tempDir } from '../helpers/tmp.js';

const T0 = Date.UTC(2024, 0, 15, 9, 0, 0);
const d = (tags: Record<string, HVal>): HDict => HDict.of(tags);

t.test('events, expiry, audit bound, deletion', async (t) => {
  const dir = tempDir(t);
  const clock = new ManualClock(T0);
  const open = async (auditMax: number): Promise<{ store: Store; model: Model; writer: PointWriter; history: HistoryStore }> => {
    const store = await Store.open(dir);
    const model = await Model.load({ records: new RecordStore(store), clock });
    const history = new HistoryStore(store);
    await history.start();
    const points = new PointState({ model, history, drivers: [{ refTag: 'fooConnRef', writeTag: 'fooWrite' }] });
    const writer = new PointWriter({ model, points, store: new WriteStore(store, { auditMax }), clock, log: silentLogger() });
    await writer.start();
    return { store, model, writer, history };
  };
  let { store, model, writer, history } = await open(5);
  await model.create([
    d({ id: new HRef('c'), conn: MARKER }),
    d({ id: new HRef('a'), point: MARKER, writable: MARKER, kind: 'Number' }),
    d({ id: new HRef('b'), point: MARKER, writable: MARKER, kind: 'Bool', fooConnRef: new HRef('c'), fooWrite: 'x' }),
  ]);
  const events: [string, Effective][] = [];
  model.events.on('write.effective', events, (id, eff) => events.push([id, eff]));
  const actor = { user: 'svc' };
  await writer.write({ id: 'a', level: 8, val: HNumber.of(5), duration: HNumber.of(1, 'min'), actor });
  await writer.write({ id: 'a', level: 12, val: HNumber.of(3), actor });
  await writer.write({ id: 'b', level: 17, val: true, actor });
  t.same(events.map(([id, e]) => [id, e.level]), [['a', 8], ['b', 17]], 'a lower-priority level under a set one is no event');
  t.equal(model.get('b')?.get('writeStatus'), undefined, 'a point a driver writes: writeStatus is the poller\'s');
  t.equal(model.get('a')?.get('writeStatus'), 'ok', 'a point no driver writes holds its value');
  t.same(model.get('b')?.get('writeVal'), true);

  clock.advance(60_000);
  await writer.expireDue();
  t.same(events.at(-1), ['a', { val: HNumber.of(3), level: 12 }], 'the timed level ended: level 12 is effective');
  t.same(model.get('a')?.get('writeLevel'), HNumber.of(12));

  for (let i = 0; i < 4; i++) await writer.write({ id: 'a', level: 16, val: HNumber.of(i), actor });
  await t.rejects(writer.write({ id: 'a', level: 16, val: 'x', actor }), { code: 'HL_BAD_VALUE' });
  const audit = await writer.readAudit({ limit: 100 });
  t.equal(audit.length, 5, 'the audit keeps the newest 5');
  t.equal(audit[0]?.result, 'HL_BAD_VALUE', 'newest first, refusals included');
  t.same(audit.slice(1).map((e) => (e.val as HNumber).val), [3, 2, 1, 0]);

  // Deleting a point drops its array in the same batch; the others stay.
  await model.delete(['b']);
  writer.stop();
  await history.stop();
  await store.close();
  ({ store, model, writer, history } = await open(5));
  t.same(writer.writtenPoints(), ['a'], 'only a\'s array is left after a restart');
  t.same(writer.effective('a'), { val: HNumber.of(3), level: 12 });
  writer.stop();
  await history.stop();
  await store.close();
});

t.test('while the clock cannot be trusted: writes work, audit entries are held and stored re-dated, timed overrides refused', async (t) => {
  const store = await Store.open(tempDir(t));
  const clock = new ManualClock(Date.UTC(1970, 0, 1, 0, 1));
  const model = await Model.load({ records: new RecordStore(store), clock });
  const history = new HistoryStore(store);
  await history.start();
  const points = new PointState({ model, history, drivers: [] });
  let trusted = false;
  const writer = new PointWriter({ model, points, store: new WriteStore(store), clock, log: silentLogger(), trust: { trusted: () => trusted } });
  await writer.start();
  t.teardown(async () => {
    await writer.stop();
    await history.stop();
    await store.close();
  });
  await model.create([d({ id: new HRef('a'), point: MARKER, writable: MARKER, kind: 'Number' })]);
  const actor = { user: 'svc' };
  await writer.write({ id: 'a', level: 12, val: HNumber.of(3), actor });
  t.same(model.get('a')?.get('writeVal'), HNumber.of(3), 'the write works');
  await t.rejects(writer.write({ id: 'a', level: 8, val: HNumber.of(5), duration: HNumber.of(1, 'min'), actor }), { code: ErrorCodes.CLOCK_UNTRUSTED }, 'a timed override would end at a wrong time: refused');
  t.same(model.get('a')?.get('writeLevel'), HNumber.of(12), 'and changed nothing');
  t.same(await writer.readAudit({ limit: 10 }), [], 'no audit entry stored under 1970');
  t.equal(writer.heldAuditCount, 2, 'both held (the write and the refusal)');

  // NTP sets the clock 10 s later.
  clock.advance(10_000);
  clock.stepWall(T0 - clock.now());
  trusted = true;
  await writer.write({ id: 'a', level: 16, val: HNumber.of(1), actor });
  const audit = await writer.readAudit({ limit: 10 });
  t.same(
    audit.map((e) => [e.level, e.result, e.ts - T0]),
    [
      [16, 'ok', 0],
      [8, ErrorCodes.CLOCK_UNTRUSTED, -10_000],
      [12, 'ok', -10_000],
    ],
    'the held entries stored, dated by the monotonic time since each write',
  );
  t.equal(writer.heldAuditCount, 0);
});
