import t from 'tap';
import { HDict, HNumber, HRef, MARKER, REMOVE, type HVal } from '../../src/haystack/values.js';
import { ManualClock } from '../../src/lib/clock.js';
import { Model } from '../../src/model/model.js';
import { FORMAT_VERSION, Store } from '../../src/store/db.js';
import { RecordStore } from '../../src/store/records.js';
import { tempDir } from '../helpers/tmp.js';

const d = (tags: Record<string, HVal>): HDict => HDict.of(tags);
const ref = (id: string): HRef => new HRef(id);

async function open(dir: string): Promise<{ store: Store; model: Model }> {
  const store = await Store.open(dir);
  let n = 0;
  const model = await Model.load({ records: new RecordStore(store), clock: new ManualClock(Date.UTC(2024, 0, 1)), newId: () => `gen-${++n}-${Math.random().toString(36).slice(2, 8)}` });
  return { store, model };
}

async function seed(model: Model): Promise<void> {
  await model.create([
    d({ id: ref('s1'), site: MARKER, name: 'hq', dis: 'Head Office', tz: 'Sydney', area: new HNumber(1000, 'm²') }),
    d({ id: ref('e1'), equip: MARKER, name: 'ahu1', siteRef: ref('s1') }),
    d({ id: ref('e2'), equip: MARKER, name: 'ahu2', siteRef: ref('hq') }), // parent by fully qualified name
    d({ id: ref('p1'), point: MARKER, his: MARKER, kind: 'Number', name: 'temp', equipRef: ref('e1'), siteRef: ref('s1') }),
    d({ id: ref('p2'), point: MARKER, his: MARKER, kind: 'Number', name: 'temp', equipRef: ref('e2'), siteRef: ref('s1') }),
    d({ id: ref('p3'), point: MARKER, cur: MARKER, kind: 'Bool', name: 'fan', equipRef: ref('hq.ahu1'), siteRef: ref('s1') }),
  ]);
}

t.test('create, names, fully qualified names, display refs, restart', async (t) => {
  const dir = tempDir(t);
  let { store, model } = await open(dir);
  await seed(model);
  t.equal(model.size, 6);
  t.equal(model.resolveId('hq.ahu1.temp'), 'p1');
  t.equal(model.resolveId('hq.ahu2.temp'), 'p2');
  t.equal(model.resolveId('hq'), 's1');
  t.equal(model.resolveId('hq.nothing'), undefined);
  t.equal(model.fqname('p3'), 'hq.ahu1.fan');
  const e2 = model.get('e2') as HDict;
  t.equal(e2.ref('siteRef')?.id, 's1', 'a Ref given by name is stored as the id');
  t.equal(e2.ref('siteRef')?.dis, 'hq', 'returned Refs carry the name as display');
  t.equal(model.get('hq.ahu1.fan')?.ref('equipRef')?.dis, 'ahu1');
  t.ok(model.get('p1')?.get('mod'), 'mod is stamped');
  await store.close();
  ({ store, model } = await open(dir));
  t.equal(model.size, 6, 'everything is there after a restart');
  t.equal(model.resolveId('hq.ahu1.temp'), 'p1');
  t.same(model.get('s1')?.get('area'), new HNumber(1000, 'm²'));
  await store.close();
});

t.test('queries use the indexes and evaluate the whole filter', async (t) => {
  const { store, model } = await open(tempDir(t));
  await seed(model);
  const ids = (f: string, limit = 0): string[] => model.query(f, limit).map((r) => (r.get('id') as HRef).id);
  t.same(ids('point and his'), ['p1', 'p2']);
  t.same(ids('point and equipRef==@e1'), ['p1', 'p3']);
  t.same(ids('his and equipRef==@e2'), ['p2']);
  t.same(ids('point', 2), ['p1', 'p2']);
  t.same(ids('equipRef->name == "ahu2"'), ['p2']);
  t.same(ids('name =~ /^ahu/'), ['e1', 'e2']);
  t.same(ids('nosuchtag'), []);
  t.same(ids('not point and not site'), ['e1', 'e2']);
  t.same(ids('area > 500m²'), ['s1']);
  t.same(ids('area > 500'), [], 'numbers compare only with identical units');
  t.throws(() => model.query('point and'), { code: 'HL_BAD_FILTER' });
  await store.close();
});

t.test('validation', async (t) => {
  const { store, model } = await open(tempDir(t));
  await seed(model);
  const cases: [string, HDict, string, RegExp][] = [
    ['no primary marker', d({ dis: 'x' }), 'HL_INVALID_RECORD', /one primary marker/],
    ['two primary markers', d({ site: MARKER, equip: MARKER }), 'HL_INVALID_RECORD', /exactly one primary marker; got site, equip/],
    ['name taken among siblings', d({ equip: MARKER, name: 'ahu1', siteRef: ref('s1') }), 'HL_CONFLICT', /name "ahu1" is already used under @s1 \(hq\)/],
    ['name with a dot', d({ site: MARKER, name: 'a.b' }), 'HL_INVALID_RECORD', /no dots/],
    ['name not a Str', d({ site: MARKER, name: new HNumber(1) }), 'HL_INVALID_RECORD', /name must be a Str/],
    ['dangling ref', d({ equip: MARKER, siteRef: ref('nope') }), 'HL_INVALID_RECORD', /siteRef @nope does not exist/],
    ['parent of the wrong kind', d({ point: MARKER, equipRef: ref('s1') }), 'HL_INVALID_RECORD', /equipRef @s1 \(hq\) is not a equip/],
    ['id taken', d({ id: ref('s1'), site: MARKER }), 'HL_CONFLICT', /id @s1 already exists/],
    ['id not a Ref', d({ id: 'x', site: MARKER }), 'HL_INVALID_RECORD', /id must be a Ref/],
    ['a password tag', d({ user: MARKER, username: 'u@x.io', password: 'secret123' }), 'HL_INVALID_RECORD', /passwords are never stored in records/],
  ];
  for (const [what, row, code, message] of cases) await t.rejects(model.create([row]), { code, message }, what);
  // all or nothing: the second row is bad, so the first is not created either
  await t.rejects(model.create([d({ id: ref('ok1'), site: MARKER, name: 'ok' }), d({ equip: MARKER, siteRef: ref('nope') })]), /row 1: siteRef @nope/);
  t.equal(model.get('ok1'), undefined);
  t.equal(model.size, 6);
  // rows later in a request see earlier ones, names included
  await model.create([d({ id: ref('s2'), site: MARKER, name: 'b2' }), d({ equip: MARKER, name: 'x', siteRef: ref('b2') })]);
  t.ok(model.resolveId('b2.x'));
  await t.rejects(model.create([d({ site: MARKER, name: 'dup' }), d({ site: MARKER, name: 'dup' })]), { code: 'HL_CONFLICT' });
  await store.close();
});

t.test('update', async (t) => {
  const dir = tempDir(t);
  let { store, model } = await open(dir);
  await seed(model);
  const [u] = await model.update([d({ id: ref('hq.ahu1.temp'), dis: 'Supply temp', unit: '°C', his: REMOVE })]);
  t.equal(u?.get('dis'), 'Supply temp');
  t.notOk(u?.has('his'));
  t.equal(model.get('p1')?.get('unit'), '°C');
  await t.rejects(model.update([d({ id: ref('p1'), point: REMOVE })]), { code: 'HL_INVALID_RECORD', message: /primary marker "point".*cannot be removed/ });
  await t.rejects(model.update([d({ id: ref('p1'), equip: MARKER })]), { code: 'HL_INVALID_RECORD', message: /cannot be added/ });
  await t.rejects(model.update([d({ id: ref('nope'), dis: 'x' })]), { code: 'HL_NOT_FOUND' });
  await t.rejects(model.update([d({ dis: 'x' })]), { code: 'HL_BAD_REQUEST' });
  await t.rejects(model.update([d({ id: ref('e1'), equipRef: ref('e1') })]), { code: 'HL_INVALID_RECORD', message: /own ancestor/ });
  await t.rejects(model.update([d({ id: ref('e2'), name: 'ahu1' })]), { code: 'HL_CONFLICT' });
  // renaming moves the fully qualified names of the children
  await model.update([d({ id: ref('e2'), name: 'ahu9' })]);
  t.equal(model.resolveId('hq.ahu9.temp'), 'p2');
  t.equal(model.get('p2')?.ref('equipRef')?.dis, 'ahu9', 'displays follow the rename');
  // all or nothing
  await t.rejects(model.update([d({ id: ref('p1'), dis: 'changed' }), d({ id: ref('p2'), siteRef: ref('nope') })]));
  t.equal(model.get('p1')?.get('dis'), 'Supply temp');
  // live tags live in memory only, set by point state, never by createRec/updateRec
  await t.rejects(model.update([d({ id: ref('p3'), curVal: true, curStatus: 'ok' })]), { code: 'HL_LIVE_TAG', message: /"curVal" is kept by the server/ });
  await t.rejects(model.update([d({ id: ref('p3'), dis: 'x', writeVal: HNumber.of(1) })]), { code: 'HL_LIVE_TAG', message: /"writeVal"/ }, 'write tags too');
  await t.rejects(model.create([d({ point: MARKER, dis: 'x', hisSize: HNumber.of(1) })]), { code: 'HL_LIVE_TAG' }, 'and on create');
  t.equal(model.get('p3')?.get('dis'), model.stored('p3')?.get('dis'), 'a refused update changes nothing');
  t.equal(model.query('dis == "x"').length, 0, 'a refused create creates nothing');
  model.setTransient('p3', { curVal: true, curStatus: 'ok' });
  t.equal(model.get('p3')?.get('curVal'), true);
  t.same(model.query('curStatus == "ok"').map((r) => (r.get('id') as HRef).id), ['p3'], 'filters see transient tags');
  t.same(model.query('point and curVal').map((r) => (r.get('id') as HRef).id), ['p3']);
  model.setTransient('p1', { hisSize: new HNumber(3) });
  t.same(model.query('hisSize > 0').map((r) => (r.get('id') as HRef).id), ['p1'], 'and tags set only as transient');
  t.equal(model.stored('p3')?.get('curVal'), undefined);
  await store.close();
  ({ store, model } = await open(dir));
  t.equal(model.get('p3')?.get('curVal'), undefined, 'transient tags are not written to disk');
  t.equal(model.get('p1')?.get('dis'), 'Supply temp');
  await store.close();
});

t.test('delete', async (t) => {
  const { store, model } = await open(tempDir(t));
  await seed(model);
  const err = (await model.delete(['e1']).catch((e: unknown) => e)) as Error & { code: string };
  t.equal(err.code, 'HL_REFERENCED');
  t.match(err.message, /@e1 \(ahu1\) is referenced by @p1 \(temp\) via equipRef; @p3 \(fan\) via equipRef/);
  t.equal(model.size, 6, 'nothing deleted');
  await t.rejects(model.delete(['nope']), { code: 'HL_NOT_FOUND' });
  // deleting the referrers with it is fine
  const gone = await model.delete(['hq.ahu1.temp', 'p3', 'e1']);
  t.same(gone.map((r) => (r.get('id') as HRef).id), ['p1', 'p3', 'e1']);
  t.equal(model.size, 3);
  t.equal(model.resolveId('hq.ahu1'), undefined);
  t.same(model.query('equip').length, 1);
  await store.close();
});

t.test('concurrent commits are serialised', async (t) => {
  const { store, model } = await open(tempDir(t));
  const results = await Promise.allSettled([model.create([d({ site: MARKER, name: 'same' })]), model.create([d({ site: MARKER, name: 'same' })])]);
  t.same(results.map((r) => r.status).sort(), ['fulfilled', 'rejected'], 'only one of two racing creates of one name wins');
  await store.close();
});

t.test('store errors are clear', async (t) => {
  const dir = tempDir(t);
  const a = await Store.open(dir);
  await t.rejects(Store.open(dir), { code: 'HL_STORE_LOCKED', message: /in use by another process/ });
  t.equal(await a.formatVersion(), FORMAT_VERSION);
  await a.meta.put('formatVersion', '99');
  await a.close();
  await t.rejects(Store.open(dir), { code: 'HL_STORE_VERSION', message: /newer Hayloft/ });
});
