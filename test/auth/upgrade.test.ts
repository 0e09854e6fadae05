/**
 * A data folder made before POINT_WRITE existed: at start, the administrators' policy made by the
 * first start (`admin-all`) that holds every permission of then is given it, so the administrator
 * can command points as it could do everything before; a policy narrowed on purpose, and any other
 * policy, is left as it is. Through HTTP against the real App on LevelDB, restarted on its folder.
 */
import t from 'tap';
import { HDict, HNumber, HRef, MARKER } from '../../src/haystack/values.js';
import { startApp, type Running } from '../helpers/app.js';
import { gridOf, postGrid } from '../helpers/http.js';

const OLD = ['MODEL_READ', 'MODEL_CREATE', 'MODEL_UPDATE', 'MODEL_DELETE', 'HIS_READ', 'HIS_WRITE', 'WATCH', 'IMPERSONATE', 'USER_ADMIN'];

async function policy(r: Running, name: string): Promise<HDict> {
  const a = await postGrid(r.base, 'read', gridOf({ filter: `actionPolicy and name == "${name}"` }), { headers: r.auth });
  return a.grid?.first() as HDict;
}

const write = (r: Running): ReturnType<typeof postGrid> => postGrid(r.base, 'pointWrite', gridOf({ id: HRef.of('sp'), level: HNumber.of(17), val: HNumber.of(21, '°C') }), { headers: r.auth });

t.test('the administrators\' policy of an older folder gets POINT_WRITE at start', async (t) => {
  const r = await startApp(t);
  const admin = await policy(r, 'admin-all');
  await postGrid(r.base, 'createRec', gridOf({ point: MARKER, writable: MARKER, kind: 'Number', unit: '°C', name: 'sp', id: HRef.of('sp') }), { headers: r.auth });
  await postGrid(r.base, 'createRec', gridOf({ actionPolicy: MARKER, name: 'everything-mine', permissions: OLD }), { headers: r.auth });
  // As an older release left it: every permission of then, not POINT_WRITE.
  const made = await r.app.model.update([HDict.of({ id: admin.get('id') as HRef, permissions: OLD })]);
  t.equal(made.length, 1);
  t.equal((await write(r)).status, 403, 'before: the administrator cannot command a point');

  await r.restart();
  const after = await policy(r, 'admin-all');
  t.same(after.get('permissions'), [...OLD, 'POINT_WRITE'], 'after the start: POINT_WRITE added, the rest as it was');
  t.ok(r.logs.some((l) => l.includes('given the permissions added since it was made') && l.includes('POINT_WRITE')), 'and logged');
  t.equal((await write(r)).status, 200, 'the administrator commands the point');
  t.same((await policy(r, 'everything-mine')).get('permissions'), OLD, 'another policy is not touched');

  // Narrowed on purpose (no USER_ADMIN): left as it is.
  const narrowed = OLD.filter((p) => p !== 'USER_ADMIN');
  await r.app.model.update([HDict.of({ id: after.get('id') as HRef, permissions: narrowed })]);
  const mod = (await policy(r, 'admin-all')).get('mod');
  await r.restart();
  const kept = await policy(r, 'admin-all');
  t.same(kept.get('permissions'), narrowed, 'a narrowed policy is left as it is');
  t.same(kept.get('mod'), mod, 'not even rewritten');
});
