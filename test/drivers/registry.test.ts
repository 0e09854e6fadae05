/**
 * The driver registry's on-demand loading: a driver known by its kind is loaded only when a tag of
 * its kind exists, once however many ask, and a failed load is tried again at the next ask. The
 * built-in kinds' tags are the loaded drivers' own.
 */
import t from 'tap';
import { builtinDriverKinds, DriverRegistry, driverTags, type DriverKind } from '../../src/drivers/index.js';
import { FakeDriver } from '../helpers/fake-driver.js';

function fakeKind(loads: { n: number; fail?: boolean }): DriverKind {
  return {
    ...driverTags('fake', { write: false, cov: false }),
    dis: 'Fake',
    features: { cur: true, write: false, his: false, learn: false, discover: false, cov: false },
    load: async () => {
      loads.n++;
      if (loads.fail === true) throw new Error('no build for this platform');
      return new FakeDriver();
    },
  };
}

t.test('a kind loads when one of its tags exists, once', async (t) => {
  const loads = { n: 0 };
  const reg = new DriverRegistry([], [fakeKind(loads)]);
  t.same(reg.refTags(), ['fakeConnRef'], 'its Ref tag is known before loading');
  t.equal(await reg.loadFor(() => false), false, 'no record of its kind: not loaded');
  t.equal(reg.all().length, 0);
  t.ok(reg.hasUnloaded());
  const [a, b] = await Promise.all([reg.loadFor((tag) => tag === 'fakeConnRef'), reg.loadFor((tag) => tag === 'fakeConn')]);
  t.ok(a && b);
  t.equal(loads.n, 1, 'loaded once for two asks');
  t.equal(reg.byName('fake')?.connTag, 'fakeConn');
  t.notOk(reg.hasUnloaded());
  t.equal(await reg.loadFor(() => true), false, 'nothing left to load');
  await reg.close();
});

t.test('a failed load is tried again; a driver with other tags than its kind is refused', async (t) => {
  const loads = { n: 0, fail: true };
  const reg = new DriverRegistry([], [fakeKind(loads)]);
  await t.rejects(reg.loadFor(() => true), /no build for this platform/);
  loads.fail = false;
  t.equal(await reg.loadFor(() => true), true, 'loaded at the next ask');
  const wrong = new DriverRegistry([], [{ ...fakeKind({ n: 0 }), connTag: 'otherConn' }]);
  await t.rejects(wrong.loadFor(() => true), /does not have the tags of its kind/);
  t.throws(() => new DriverRegistry([new FakeDriver()], [fakeKind({ n: 0 })]), /clashes/);
  const learns = { ...fakeKind({ n: 0 }), features: { ...fakeKind({ n: 0 }).features, learn: true } };
  t.throws(() => new DriverRegistry([], [learns]), /feature learn disagrees/, 'a kind that says it learns has a learn');
});

t.test('the built-in kinds name the tags of the drivers they load', async (t) => {
  const reg = new DriverRegistry([], builtinDriverKinds());
  t.same(reg.refTags().sort(), ['bacnetConnRef', 'modbusConnRef']);
  t.equal(await reg.loadFor(() => true), true);
  t.same(reg.all().map((d) => d.name).sort(), ['bacnet', 'modbus']);
  await reg.close();
});
