/**
 * The published WideSky JavaScript client (@widesky/jswidesky-client), unchanged, against a real
 * Hayloft: login, token refresh, records, impersonation and password change.
 */
import t from 'tap';
import jsWideSky from '@widesky/jswidesky-client';
import { ADMIN, CLIENT, startApp } from '../helpers/app.js';

const quiet = { name: 'widesky-client', level: 'fatal', raw: true };

function client(base: string, username = ADMIN.username, password = ADMIN.password): InstanceType<typeof jsWideSky.WideSkyClient> {
  return new jsWideSky.WideSkyClient(base, username, password, CLIENT.id, CLIENT.secret, quiet);
}

t.test('the WideSky client logs in, refreshes and works with records', async (t) => {
  const s = await startApp(t);
  const c = client(s.base);
  const token = await c.login();
  t.ok(token.access_token && token.refresh_token, 'login gives both tokens');
  t.ok(token.expires_in > Date.now() + 6 * 24 * 3600_000, 'expires_in is an absolute instant the client can compare with Date.now()');

  const created = await c.create([
    { site: 'm:', name: 's:hq', dis: 's:Head Office', tz: 's:Sydney' },
  ]);
  const siteId = String(created.rows[0]?.id).slice(2).split(' ')[0] as string;
  t.match(created.rows[0]?.id, /^r:[0-9a-f-]{36} hq$/, 'created Ref carries the name as display');
  await c.create([
    { equip: 'm:', name: 's:ahu1', siteRef: `r:${siteId}` },
    { point: 'm:', his: 'm:', kind: 's:Number', name: 's:temp', siteRef: `r:${siteId}`, equipRef: 'r:hq.ahu1', unit: 's:°C', tags: ['s:a', 'n:1'] },
  ]);

  const found = await c.find('point and his');
  t.equal(found.rows.length, 1);
  t.equal(found.rows[0]?.name, 's:temp');
  t.match(found.rows[0]?.equipRef, / ahu1$/);
  const pointId = String(found.rows[0]?.id).slice(2).split(' ')[0] as string;

  const one = await c.read(pointId); // GET read?id=@...
  t.equal(one.rows[0]?.unit, 's:°C');
  const byName = await c.read('hq.ahu1.temp');
  t.equal(String(byName.rows[0]?.id).split(' ')[0], `r:${pointId}`, 'read by fully qualified name');
  const many = await c.read([siteId, pointId]); // POST read with id rows
  t.same(many.rows.map((r) => String(r.id).split(' ')[0]), [`r:${siteId}`, `r:${pointId}`]);

  await c.update({ id: `r:${pointId}`, dis: 's:Supply temperature', tags: 'x:' });
  const upd = await c.read(pointId);
  t.equal(upd.rows[0]?.dis, 's:Supply temperature');
  t.notOk('tags' in (upd.rows[0] ?? {}), 'x: removes a tag, as WideSky 2.0 clients send it');

  // refresh: the client refreshes when it sees its token expired
  const before = c._ws_token as NonNullable<typeof c._ws_token>;
  c._ws_token = { ...before, expires_in: Date.now() - 1000 };
  await c.find('site');
  t.not(c._ws_token?.refresh_token, before.refresh_token, 'the client refreshed and got a rotated refresh token');
  t.ok((c._ws_token?.expires_in ?? 0) > Date.now());

  // a revoked/unknown token: the client logs in again on 401 by itself
  c._ws_token = { ...(c._ws_token), access_token: 'not-a-token' };
  const again = await c.find('site');
  t.equal(again.rows.length, 1, 'after a 401 the client logs in again and the call succeeds');

  await t.rejects(c.deleteById(siteId), 'a referenced site cannot be deleted');
  const del = await c.deleteByFilter('point', 0);
  t.equal(del.rows.length, 1);
  const gone = await c.read(pointId);
  t.notOk(gone.rows[0]?.id, 'an unknown id reads as an empty row');
});

t.test('impersonation and password change through the client', async (t) => {
  const s = await startApp(t);
  const admin = client(s.base);
  const g = await admin.create([{ actionPolicy: 'm:', name: 's:readAll', permissions: ['s:MODEL_READ'] }]);
  const pol = String(g.rows[0]?.id).slice(2).split(' ')[0] as string;
  const r = await admin.create([{ role: 'm:', name: 's:reader', actionPolicyRefs: [`r:${pol}`] }]);
  const role = String(r.rows[0]?.id).slice(2).split(' ')[0] as string;
  const readerId = await s.app.auth.addUser('reader@example.com', 'reader-password-1', role);
  await admin.create([{ site: 'm:', name: 's:hq' }]);

  admin.impersonateAs(readerId);
  const seen = await admin.find('site');
  t.equal(seen.rows.length, 1, 'reads work as the impersonated user');
  await t.rejects(admin.create([{ site: 'm:', name: 's:other' }]), 'and writes are refused: the reader has no MODEL_CREATE');
  admin.unsetImpersonate();

  const reader = client(s.base, 'reader@example.com', 'reader-password-1');
  await reader.login();
  await reader.updatePassword('reader-password-2');
  await reader.find('site'); // its own session is kept
  const fresh = client(s.base, 'reader@example.com', 'reader-password-2');
  t.equal((await fresh.find('site')).rows.length, 1, 'the new password works');
  const old = client(s.base, 'reader@example.com', 'reader-password-1');
  await t.rejects(old.login(), 'the old password does not');
});

t.test('a watch round trip through the client: watchSub, poll, watchExtend, watchUnsub', async (t) => {
  const s = await startApp(t);
  const c = client(s.base);
  await c.create([{ site: 'm:', name: 's:hq' }]);
  const made = await c.create([
    { point: 'm:', cur: 'm:', kind: 's:Number', name: 's:sat', siteRef: 'r:hq', unit: 's:°C' },
    { point: 'm:', cur: 'm:', kind: 's:Number', name: 's:rat', siteRef: 'r:hq' },
    { point: 'm:', cur: 'm:', kind: 's:Bool', name: 's:fan', siteRef: 'r:hq' },
  ]);
  const [sat, rat, fan] = made.rows.map((r) => String(r.id).slice(2).split(' ')[0] as string) as [string, string, string];
  await c.update({ id: `r:${sat}`, curVal: 'n:18.5 °C', curStatus: 's:ok' });

  const sub = await c.watchSub([sat, 'hq.rat'], 'n:1 min', 'dashboard');
  const watchId = String(sub.meta.watchId).slice(2);
  t.match(sub.meta.watchId, /^s:.+/, 'watchId is a Str');
  t.equal(sub.meta.lease, 'n:1 min');
  t.same(
    sub.rows.map((r) => [String(r.id).split(' ')[0], r.curVal, r.curStatus]),
    [
      [`r:${sat}`, 'n:18.5 °C', 's:ok'],
      [`r:${rat}`, undefined, 's:unknown'],
    ],
  );

  // The client has no watchPoll method: poll through its submitRequest, as its users do.
  const poll = (refresh = false): Promise<{ rows: Record<string, unknown>[] }> =>
    c.submitRequest('POST', '/api/watchPoll', { meta: { ver: '2.0', watchId: `s:${watchId}`, ...(refresh ? { refresh: 'm:' } : {}) }, cols: [{ name: 'id' }], rows: [] });
  t.equal((await poll()).rows.length, 0, 'nothing changed since watchSub');
  await c.update({ id: `r:${rat}`, curVal: 'n:21', curStatus: 's:ok' });
  const changed = await poll();
  t.same(changed.rows.map((r) => [String(r.id).split(' ')[0], r.curVal]), [[`r:${rat}`, 'n:21']], 'the changed point');

  const ext = await c.watchExtend(watchId, [fan], 'n:1 h');
  t.equal(ext.meta.lease, 'n:1 h', 'watchExtend appends and changes the lease');
  t.same((await poll(true)).rows.map((r) => String(r.id).split(' ')[0]), [`r:${sat}`, `r:${rat}`, `r:${fan}`]);

  await c.watchUnsub(watchId, [sat], false);
  t.same((await poll(true)).rows.map((r) => String(r.id).split(' ')[0]), [`r:${rat}`, `r:${fan}`], 'watchUnsub without close removes points');

  // Called with no points, the client sends a row `id: r:undefined` beside `close`.
  await c.watchUnsub(watchId, undefined);
  await t.rejects(poll(), 'polling a closed watch fails: the client re-subscribes');
  await t.rejects(c.watchSub([sat], '60000', 'ms as text'), 'a lease without a time unit is refused');
});
