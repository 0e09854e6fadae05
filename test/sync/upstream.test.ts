/**
 * Issue 9, part 1: the upstream client (OAuth2 password and refresh grants, token renewal on
 * expiry and on 401, rotated refresh tokens kept across restarts, error codes) and the mapping
 * of local entities to upstream ones by fully qualified name (created parents first, found when
 * they exist, tags kept in step), against a second real Hayloft on loopback.
 */
import t from 'tap';
import { HDict, HRef, MARKER, REMOVE } from '../../src/haystack/values.js';
import { ManualClock } from '../../src/lib/clock.js';
import { ErrorCodes } from '../../src/lib/errors.js';
import { silentLogger } from '../../src/lib/log.js';
import { UpstreamClient, UpstreamError } from '../../src/sync/client.js';
import { Mapper } from '../../src/sync/mapping.js';
import { SyncState } from '../../src/sync/state.js';
import { ADMIN, CLIENT, type Running, basic, startApp } from '../helpers/app.js';
import { post, readRec, seedEdge } from '../helpers/uplink.js';

const T0 = Date.UTC(2024, 0, 1);

function clientFor(cloud: Running, state: SyncState, clock: ManualClock, over: Partial<ConstructorParameters<typeof UpstreamClient>[0]> = {}): UpstreamClient {
  return new UpstreamClient({
    url: cloud.base,
    clientId: CLIENT.id,
    clientSecret: CLIENT.secret,
    username: ADMIN.username,
    password: ADMIN.password,
    refreshToken: null,
    timeoutMs: 5000,
    clock,
    tokens: state,
    ...over,
  });
}

const emptyRead = JSON.stringify({ meta: { ver: '2.0' }, cols: [{ name: 'filter' }], rows: [{ filter: 's:site' }] });

async function codeOf(p: Promise<unknown>): Promise<string | undefined> {
  try {
    await p;
  } catch (e) {
    return e instanceof UpstreamError ? e.code : `not an UpstreamError: ${String(e)}`;
  }
  return undefined;
}

t.test('client: password grant, token reuse, renewal on expiry with rotation kept', async (t) => {
  const clock = new ManualClock(T0);
  const cloud = await startApp(t, { clock });
  const edge = await startApp(t);
  const state = new SyncState(edge.app.store, 'c1');
  const c = clientFor(cloud, state, clock);
  const g = await c.call('read', emptyRead);
  t.equal(g.size, 0, 'read answered');
  t.equal(c.requests, 2, 'one token request, one read');
  await c.call('read', emptyRead);
  t.equal(c.requests, 3, 'the token is reused');
  const first = await state.loadToken();
  t.ok(first?.token, 'the refresh token of the login is kept');
  t.equal(first?.from, null, 'from a password login');

  clock.advance(7 * 24 * 3600_000); // the cloud's access token has expired
  await c.call('read', emptyRead);
  t.equal(c.requests, 5, 'renewed before the request, not after a 401');
  const second = await state.loadToken();
  t.not(second?.token, first?.token, 'the rotated refresh token replaced the old one');
});

t.test('client: only a refresh token; the rotated one survives a restart', async (t) => {
  const clock = new ManualClock(T0);
  const cloud = await startApp(t, { clock });
  const edge = await startApp(t);
  const login = await cloud.login(ADMIN.username, ADMIN.password);
  const configured = login.body.refresh_token as string;
  const state = new SyncState(edge.app.store, 'c2');
  const opts = { username: null, password: null, refreshToken: configured };
  const c1 = clientFor(cloud, state, clock, opts);
  await c1.call('read', emptyRead);
  const kept = await state.loadToken();
  t.not(kept?.token, configured, 'the configured token was used and rotated');

  // A new client (a restart) must start from the rotated token: the configured one is spent,
  // and showing it again would make the cloud revoke the session as stolen.
  const c2 = clientFor(cloud, state, clock, opts);
  await c2.call('read', emptyRead);
  t.pass('the restarted client logged in with the stored token');
  const c3 = clientFor(cloud, new SyncState(edge.app.store, 'other'), clock, opts);
  t.equal(await codeOf(c3.call('read', emptyRead)), ErrorCodes.UPLINK_AUTH, 'the spent configured token is refused, without a password to fall back on');
});

t.test('client: revoked upstream (401) falls back to the password; errors by kind', async (t) => {
  const clock = new ManualClock(T0);
  const cloud = await startApp(t, { clock });
  const edge = await startApp(t);
  const state = new SyncState(edge.app.store, 'c3');
  let lastAuth = '';
  const spy: typeof fetch = async (input, init) => {
    const h = init?.headers as Record<string, string> | undefined;
    if (h?.authorization?.startsWith('Bearer ') === true) lastAuth = h.authorization;
    return fetch(input, init);
  };
  const c = clientFor(cloud, state, clock, { fetch: spy });
  await c.call('read', emptyRead);
  // Log the session out upstream: access and refresh token both stop working.
  const out = await fetch(`${cloud.base}/oauth2/token`, { method: 'DELETE', headers: { authorization: lastAuth } });
  t.ok(out.status < 300, 'logged out upstream');
  await c.call('read', emptyRead);
  t.pass('401, refused refresh, then a password login: the call went through');

  const bad = clientFor(cloud, new SyncState(edge.app.store, 'c4'), clock, { clientSecret: 'wrong-secret-xxxxxxxx' });
  t.equal(await codeOf(bad.call('read', emptyRead)), ErrorCodes.UPLINK_AUTH, 'a wrong client secret');
  const badPw = clientFor(cloud, new SyncState(edge.app.store, 'c5'), clock, { password: 'wrong-password' });
  t.equal(await codeOf(badPw.call('read', emptyRead)), ErrorCodes.UPLINK_AUTH, 'a wrong password');
  t.equal(await codeOf(c.call('nope', emptyRead)), ErrorCodes.UPLINK_REJECTED, 'an unknown op');
  t.equal(await codeOf(c.call('read', '{"meta":{}}')), ErrorCodes.UPLINK_REJECTED, 'a grid the upstream refuses');
  const closed = clientFor({ ...cloud, base: 'http://127.0.0.1:9' }, state, clock);
  t.equal(await codeOf(closed.call('read', emptyRead)), ErrorCodes.UPLINK_UNREACHABLE, 'nothing listening');
  t.equal(basic('a', 'b'), 'Basic YTpi', 'helper sanity');
});

t.test('mapping by fully qualified name: create, find, keep tags in step', async (t) => {
  const clock = new ManualClock(T0);
  const cloud = await startApp(t, { clock });
  const edge = await startApp(t);
  await seedEdge(t, edge);
  // The cloud already has a site "syd" (created by someone else): it is found, not duplicated.
  await post(t, cloud, 'createRec', { site: MARKER, name: 'syd', dis: 'Sydney office', cloudOnly: MARKER });
  const state = new SyncState(edge.app.store, 'map');
  await state.load();
  const client = clientFor(cloud, state, clock);
  const mapper = new Mapper({ model: edge.app.model, client, state, createMissing: true, updateTags: true, log: silentLogger() });
  const points = ['temp', 'fan', 'mode', 'power'];
  const first = await mapper.sync(points);
  t.same([...first.faults], [], 'no faults');
  t.ok(first.changed);

  const temp = await readRec(cloud, 'hq.ahu.temp');
  t.ok(temp, 'hq.ahu.temp exists upstream');
  const ahu = await readRec(cloud, 'hq.ahu');
  const hq = await readRec(cloud, 'hq');
  t.match(temp, { point: 'M', his: 'M', kind: '"Number"', unit: '"°F"', sensor: 'M', tz: '"UTC"', name: '"temp"' }, 'tags copied');
  t.match(temp?.equipRef, new RegExp(`^${ahu?.id?.split(' ')[0]}`), 'equipRef is the upstream equip');
  t.match(temp?.siteRef, new RegExp(`^${hq?.id?.split(' ')[0]}`), 'siteRef is the upstream site');
  t.not(temp?.id?.split(' ')[0], '@temp', 'upstream ids are its own');
  t.match(hq, { dis: '"Headquarters"', area: '1200ft²' });
  const syd = await readRec(cloud, 'syd');
  t.match(syd, { cloudOnly: 'M', dis: '"Sydney office"', tz: '"Sydney"' }, 'the existing site was adopted: our tags added, its own kept');
  const sites = await post(t, cloud, 'read', { filter: 'site' });
  t.equal(sites.grid?.size, 2, 'no duplicate site');
  t.equal(state.mapping('nohis'), undefined, 'points not asked for are not mapped');
  t.same(await mapper.sync(points), { faults: new Map(), changed: false }, 'a second pass changes nothing');
  const requests = client.requests;
  await mapper.sync(points);
  t.equal(client.requests, requests, 'and sends nothing');

  // Tags change locally: updateRec upstream; a removed tag goes; a tag only upstream stays.
  await edge.app.model.update([HDict.of({ id: HRef.of('temp'), unit: '°C', sensor: REMOVE, dis: 'Supply temp' })]);
  await post(t, cloud, 'updateRec', { id: HRef.of('hq.ahu.temp'), cloudNote: 'kept' });
  await mapper.sync(points);
  t.match(await readRec(cloud, 'hq.ahu.temp'), { unit: '"°C"', dis: '"Supply temp"', cloudNote: '"kept"' });
  t.notOk((await readRec(cloud, 'hq.ahu.temp'))?.sensor, 'sensor removed upstream');

  // A rename follows the entity (known by upstream id), it is not created again.
  await edge.app.model.update([HDict.of({ id: HRef.of('ahu'), name: 'ahu1' })]);
  await mapper.sync(points);
  t.ok(await readRec(cloud, 'hq.ahu1.temp'), 'renamed upstream');
  t.notOk(await readRec(cloud, 'hq.ahu.temp'), 'no copy under the old name');

  // A point without a name cannot be found by name: a fault, the others carry on.
  await post(t, edge, 'createRec', { id: HRef.of('anon'), point: MARKER, his: MARKER, kind: 'Number', siteRef: HRef.of('hq') });
  const r = await mapper.sync([...points, 'anon']);
  t.match(r.faults.get('anon'), /no name/);
  t.equal(r.faults.size, 1);
});

t.test('mapping without createMissing: missing entities are faults', async (t) => {
  const clock = new ManualClock(T0);
  const cloud = await startApp(t, { clock });
  const edge = await startApp(t);
  await seedEdge(t, edge);
  const state = new SyncState(edge.app.store, 'nocreate');
  await state.load();
  const mapper = new Mapper({ model: edge.app.model, client: clientFor(cloud, state, clock), state, createMissing: false, updateTags: true, log: silentLogger() });
  const r = await mapper.sync(['temp']);
  t.match(r.faults.get('temp'), /hq does not exist upstream \(and uplink.createMissing is off\)/);
  t.notOk(await readRec(cloud, 'hq'), 'nothing created');
});
