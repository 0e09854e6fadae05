/**
 * The published WideSky client (@widesky/jswidesky-client), unchanged, for what goes beyond the
 * REST ops: its watch socket (socket.io-client 2.x, Engine.IO 3) receiving pointData as the
 * demo device is polled, its GraphQL helpers (findAsId, entityCount, batch.multiFind with
 * 2,000 filters, sent 200 aliased searches to a query) and its admin calls (createUser, then logging in as the new user;
 * reloadCache).
 */
import t from 'tap';
import jsWideSky from '@widesky/jswidesky-client';
import { DemoDevice, seedDemo } from '../../src/demo.js';
import { HNumber } from '../../src/haystack/values.js';
import { systemClock } from '../../src/lib/clock.js';
import { ADMIN, CLIENT, startApp } from '../helpers/app.js';

const quiet = { name: 'widesky-client', level: 'fatal', raw: true };

function client(base: string, username = ADMIN.username, password = ADMIN.password): InstanceType<typeof jsWideSky.WideSkyClient> {
  return new jsWideSky.WideSkyClient(base, username, password, CLIENT.id, CLIENT.secret, quiet);
}

function idOf(ref: unknown): string {
  return String(ref).slice(2).split(' ')[0] as string;
}

t.test('getWatchSocket receives pointData when a polled point changes', async (t) => {
  const s = await startApp(t);
  const device = await DemoDevice.start(systemClock);
  t.teardown(() => device.stop());
  await seedDemo(s.app.model, device, { tz: 'Sydney', pollTime: new HNumber(300, 'ms') });
  const c = client(s.base);
  await c.login();
  const found = await c.read('demo.ahu1.supplyTemp');
  const pointId = idOf(found.rows[0]?.id);
  const sub = await c.watchSub([pointId], 'n:1 min', 'client push test');
  const watchId = String(sub.meta.watchId).replace(/^s:/, '');
  const socket = c.getWatchSocket(watchId);
  t.teardown(() => socket.close());
  const data = await new Promise<Record<string, unknown>>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('no pointData within 20 s')), 20_000);
    socket.on('pointData', (d: Record<string, unknown>) => {
      if (d.curStatus !== 's:ok') return;
      clearTimeout(timer);
      resolve(d);
    });
    socket.on('error', (e: unknown) => {
      clearTimeout(timer);
      reject(new Error(`socket error: ${JSON.stringify(e)}`));
    });
    socket.open();
  });
  t.equal(data.id, `r:${pointId}`, 'the changed point');
  t.match(data.curVal, /^n:-?[\d.]+(e-?\d+)? °C$/, 'curVal in the JSON encoding, with its unit');
  t.equal(data.curStatus, 's:ok');
});

t.test('findAsId, entityCount and batch.multiFind through /graphql', async (t) => {
  const s = await startApp(t);
  const c = client(s.base);
  const created = await c.create([{ site: 'm:', name: 's:hq', dis: 's:Head Office', tz: 's:Sydney' }]);
  const siteId = idOf(created.rows[0]?.id);
  const points = Array.from({ length: 30 }, (_, i) => ({ point: 'm:', his: 'm:', kind: 's:Number', name: `s:p${i}`, unit: 's:kW', siteRef: `r:${siteId}`, n: `n:${i}` }));
  const made = await c.create(points);
  const ids = made.rows.map((r) => idOf(r.id)).sort();
  t.same((await c.findAsId('point')).sort(), ids, 'findAsId answers bare ids');
  t.equal((await c.findAsId('point', 5)).length, 5, 'with a limit');
  t.equal(await c.entityCount('point and unit == "kW"'), 30, 'entityCount (a filter with quotes)');
  t.equal(await c.entityCount('site'), 1);

  const filters = Array.from({ length: 2000 }, (_, i) => [`point and n == ${i % 30}`, 0]);
  // The client sends them as aliased searches, up to 200 to a query (its batchSize limit).
  const { success, errors } = await c.batch.multiFind(filters, { batchSize: 200 });
  t.same(errors, [], 'no errors');
  t.equal(success.length, 2000, 'one result per filter');
  const first = success[7]?.[0] as Record<string, string>;
  t.equal(first.name, 's:p7', 'tags converted back to the JSON encoding by the client');
  t.equal(first.n, 'n:7');
  t.equal(first.point, 'm:');
  t.equal(first.siteRef, `r:${siteId}`);
});

t.test('createUser then log in as the new user; reloadCache', async (t) => {
  const s = await startApp(t);
  const admin = client(s.base);
  const g = await admin.create([{ actionPolicy: 'm:', name: 's:readAll', permissions: ['s:MODEL_READ'] }]);
  await admin.create([{ role: 'm:', name: 's:reader', actionPolicyRefs: [`r:${idOf(g.rows[0]?.id)}`] }]);
  await admin.create([{ site: 'm:', name: 's:hq' }]);
  const made = await admin.createUser('new.user@example.com', 'New User', 'Tester', ['reader'], 'new-user-password-1');
  t.match(made, { email: 'new.user@example.com' }, 'createUser answers the new user');
  const user = client(s.base, 'new.user@example.com', 'new-user-password-1');
  const seen = await user.find('site');
  t.equal(seen.rows.length, 1, 'the new user logs in and reads');
  await t.rejects(user.create([{ site: 'm:', name: 's:other' }]), 'with the role it was given (read only)');
  const rec = await admin.read(s.app.auth.userIdByName('new.user@example.com') as string);
  t.equal(rec.rows[0]?.dis, 's:New User');
  t.equal(rec.rows[0]?.primaryFunction, 's:Tester', 'description becomes primaryFunction, as WideSky');
  await t.rejects(user.createUser('x@example.com', 'X', 'X', ['reader'], 'x-password-12'), 'createUser needs USER_ADMIN');
  await t.rejects(admin.createUser('y@example.com', 'Y', 'Y', ['reader'], null), 'a password is required');
  const grid = await admin.reloadCache();
  t.match(grid, { meta: { ver: String }, cols: Array, rows: [] }, 'reloadCache answers an empty grid');
  t.same((grid as { rows: unknown[] }).rows, []);
});
