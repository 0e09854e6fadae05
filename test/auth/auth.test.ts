import { statSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { ACCESS_TTL_MS, AuthService } from '../../src/auth/auth.js';
import { HDict, HRef, MARKER, type HVal } from '../../src/haystack/values.js';
import { ManualClock } from '../../src/lib/clock.js';
import { silentLogger } from '../../src/lib/log.js';
import { Model } from '../../src/model/model.js';
import { Store } from '../../src/store/db.js';
import { RecordStore } from '../../src/store/records.js';
import { tempDir } from '../helpers/tmp.js';

const T0 = Date.UTC(2024, 0, 1);

async function open(dir: string, clock = new ManualClock(T0)) {
  const store = await Store.open(dir);
  const model = await Model.load({ records: new RecordStore(store), clock });
  const auth = await AuthService.open({ store, model, clock, log: silentLogger(), dataDir: dir });
  return { store, model, auth, clock, close: async () => { auth.stop(); await store.close(); } };
}

const client = { id: 'c1', secret: 'client-secret-0123456789' };

t.test('bootstrap, login, refresh rotation, logout, restart', async (t) => {
  const dir = tempDir(t);
  let h = await open(dir);
  t.ok(h.auth.needsBootstrap());
  const b = await h.auth.bootstrap({ adminUser: 'admin@example.com', adminPassword: 'correct horse', clientId: 'c1', clientSecret: client.secret });
  t.same(b, { adminUser: 'admin@example.com', clientId: 'c1' }, 'given secrets are not echoed');
  t.notOk(h.auth.needsBootstrap());
  const keyMode = statSync(path.join(dir, 'jwt-signing.key')).mode & 0o777;
  t.equal(keyMode, 0o600, 'the signing key is owner-only');

  const tok = await h.auth.passwordGrant(client, 'ADMIN@example.com', 'correct horse', '10.0.0.1');
  t.equal(tok.token_type, 'Bearer');
  t.equal(tok.expires_in, T0 + ACCESS_TTL_MS, 'expires_in is the absolute expiry in epoch ms');
  const p = await h.auth.authenticate(tok.access_token);
  t.equal(p.username, 'admin@example.com');
  t.ok(p.grants.hasAll('USER_ADMIN'));
  t.notOk(p.user.has('password'), 'no password tag on the user');

  const r1 = await h.auth.refreshGrant(client, tok.refresh_token, '10.0.0.1');
  t.not(r1.refresh_token, tok.refresh_token, 'refresh tokens rotate');
  await t.rejects(h.auth.refreshGrant(client, 'nonsense', '10.0.0.1'), { code: 'HL_INVALID_GRANT' });
  await t.rejects(h.auth.refreshGrant({ id: 'c1', secret: 'wrong-secret-xxxxxxxx' }, r1.refresh_token, '10.0.0.9'), { code: 'HL_INVALID_CLIENT' });

  // restart: sessions survive
  await h.close();
  h = await open(dir);
  const p2 = await h.auth.authenticate(r1.access_token);
  t.equal(p2.userId, p.userId);
  const r2 = await h.auth.refreshGrant(client, r1.refresh_token, '10.0.0.1');

  // reuse of a rotated-away refresh token revokes the session
  await t.rejects(h.auth.refreshGrant(client, r1.refresh_token, '10.0.0.1'), { code: 'HL_INVALID_GRANT' });
  await t.rejects(h.auth.authenticate(r2.access_token), { code: 'HL_UNAUTHORIZED', message: /revoked/ });
  await t.rejects(h.auth.refreshGrant(client, r2.refresh_token, '10.0.0.1'), { code: 'HL_INVALID_GRANT' });

  // logout
  const t3 = await h.auth.passwordGrant(client, 'admin@example.com', 'correct horse', '10.0.0.1');
  await h.auth.authenticate(t3.access_token);
  await h.auth.logout(t3.access_token);
  await t.rejects(h.auth.authenticate(t3.access_token), { code: 'HL_UNAUTHORIZED' }, 'revocation takes effect at once, cache or not');
  await t.rejects(h.auth.refreshGrant(client, t3.refresh_token, '10.0.0.1'), { code: 'HL_INVALID_GRANT' });
  await h.close();
});

t.test('expiry, tampering and foreign tokens', async (t) => {
  const dir = tempDir(t);
  const h = await open(dir);
  await h.auth.bootstrap({ adminUser: 'a@x.io', adminPassword: 'password1', clientId: 'c1', clientSecret: client.secret });
  const tok = await h.auth.passwordGrant(client, 'a@x.io', 'password1', '1.1.1.1');
  await h.auth.authenticate(tok.access_token); // cached now
  h.clock.advance(ACCESS_TTL_MS + 1000);
  await t.rejects(h.auth.authenticate(tok.access_token), { code: 'HL_UNAUTHORIZED', message: /expired/ }, 'a cached token expires too');
  const fresh = await h.auth.refreshGrant(client, tok.refresh_token, '1.1.1.1');
  await h.auth.authenticate(fresh.access_token);
  const [head, body, sig] = fresh.access_token.split('.') as [string, string, string];
  const claims = JSON.parse(Buffer.from(body, 'base64url').toString()) as Record<string, unknown>;
  const forged = Buffer.from(JSON.stringify({ ...claims, sub: 'someone-else' })).toString('base64url');
  await t.rejects(h.auth.authenticate(`${head}.${forged}.${sig}`), { code: 'HL_UNAUTHORIZED', message: /invalid/ });
  const none = Buffer.from(JSON.stringify({ alg: 'none', typ: 'JWT' })).toString('base64url');
  await t.rejects(h.auth.authenticate(`${none}.${body}.`), { code: 'HL_UNAUTHORIZED' });
  // a token signed by another Hayloft (another key) is refused
  const other = await open(tempDir(t));
  await other.auth.bootstrap({ adminUser: 'a@x.io', adminPassword: 'password1', clientId: 'c1', clientSecret: client.secret });
  const foreign = await other.auth.passwordGrant(client, 'a@x.io', 'password1', '1.1.1.1');
  await t.rejects(h.auth.authenticate(foreign.access_token), { code: 'HL_UNAUTHORIZED' });
  await t.rejects(h.auth.authenticate('garbage'), { code: 'HL_UNAUTHORIZED' });
  await other.close();
  await h.close();
});

t.test('lockout slows guessing and says so; others behind the same address are not locked out by one user', async (t) => {
  const h = await open(tempDir(t));
  await h.auth.bootstrap({ adminUser: 'a@x.io', adminPassword: 'password1', clientId: 'c1', clientSecret: client.secret });
  await h.auth.addUser('b@x.io', 'password2', 'admin');
  for (let i = 0; i < 5; i++) await t.rejects(h.auth.passwordGrant(client, 'a@x.io', 'wrong', '2.2.2.2'), { code: 'HL_INVALID_GRANT' });
  const e = (await h.auth.passwordGrant(client, 'a@x.io', 'password1', '2.2.2.2').catch((x: unknown) => x)) as { code: string; retryAfter: number; message: string };
  t.equal(e.code, 'HL_LOCKED_OUT', 'five failures: the user is locked at that address, right password or not');
  t.ok(e.retryAfter >= 1);
  t.match(e.message, /too many failed logins; try again in \d+ s/);
  t.ok((await h.auth.passwordGrant(client, 'b@x.io', 'password2', '2.2.2.2')).access_token, 'another user behind the same address (a NAT) logs in');
  h.clock.advance(1500);
  const ok = await h.auth.passwordGrant(client, 'a@x.io', 'password1', '2.2.2.2');
  t.ok(ok.access_token, 'after the wait a right password works');
  // the next wrong try doubles from zero again
  await t.rejects(h.auth.passwordGrant(client, 'a@x.io', 'wrong', '2.2.2.2'), { code: 'HL_INVALID_GRANT' });

  // Guessing one account from many addresses: ten failures lock it everywhere.
  for (let i = 0; i < 9; i++) await t.rejects(h.auth.passwordGrant(client, 'b@x.io', 'wrong', `4.4.4.${i}`), { code: 'HL_INVALID_GRANT' });
  await t.rejects(h.auth.passwordGrant(client, 'b@x.io', 'wrong', '5.5.5.5'), { code: 'HL_INVALID_GRANT' }, 'the tenth');
  await t.rejects(h.auth.passwordGrant(client, 'b@x.io', 'password2', '6.6.6.6'), { code: 'HL_LOCKED_OUT' }, 'then the user is locked from any address');
  h.clock.advance(1500);

  // Guessing across accounts from one address: twenty failures lock the address for everyone.
  for (let i = 0; i < 20; i++) await t.rejects(h.auth.passwordGrant(client, `nobody${i}@x.io`, 'wrong', '7.7.7.7'), { code: 'HL_INVALID_GRANT' });
  await t.rejects(h.auth.passwordGrant(client, 'a@x.io', 'password1', '7.7.7.7'), { code: 'HL_LOCKED_OUT' }, 'twenty failures from an address lock it for every user');
  t.ok((await h.auth.passwordGrant(client, 'a@x.io', 'password1', '8.8.8.8')).access_token, 'not elsewhere');
  await h.close();
});

t.test('permissions, policy filters, impersonation, password change', async (t) => {
  const h = await open(tempDir(t));
  await h.auth.bootstrap({ adminUser: 'admin@x.io', adminPassword: 'password1', clientId: 'c1', clientSecret: client.secret });
  const m = h.model;
  const d = (x: Record<string, HVal>): HDict => HDict.of(x);
  await m.create([
    d({ id: new HRef('s1'), site: MARKER, name: 's1' }),
    d({ id: new HRef('s2'), site: MARKER, name: 's2' }),
    d({ id: new HRef('pRead'), actionPolicy: MARKER, permissions: ['MODEL_READ', 'HIS_READ'], filter: 'siteRef==@s1 or id==@s1' }),
    d({ id: new HRef('pImp'), actionPolicy: MARKER, permissions: ['IMPERSONATE'] }),
    d({ id: new HRef('pUsers'), actionPolicy: MARKER, permissions: ['MODEL_READ'], filter: 'user' }),
    d({ id: new HRef('pBroken'), actionPolicy: MARKER, permissions: ['MODEL_DELETE'], filter: 'and and' }),
    d({ id: new HRef('rViewer'), role: MARKER, name: 'viewer', actionPolicyRefs: [new HRef('pRead'), new HRef('pBroken')] }),
    d({ id: new HRef('rSupport'), role: MARKER, name: 'support', actionPolicyRefs: [new HRef('pImp'), new HRef('pUsers')] }),
  ]);
  await m.create([d({ equip: MARKER, name: 'e1', siteRef: new HRef('s1') }), d({ equip: MARKER, name: 'e2', siteRef: new HRef('s2') })]);
  const viewerId = await h.auth.addUser('viewer@x.io', 'password2', 'viewer');
  await h.auth.addUser('support@x.io', 'password3', 'rSupport');
  await t.rejects(h.auth.addUser('viewer@x.io', 'password2', 'viewer'), { code: 'HL_CONFLICT' });
  await t.rejects(h.auth.addUser('x@x.io', 'short', 'viewer'), { code: 'HL_WEAK_PASSWORD' });
  await t.rejects(h.auth.addUser('y@x.io', 'password9', 'nope'), { code: 'HL_NOT_FOUND' });

  const viewer = await h.auth.authenticate((await h.auth.passwordGrant(client, 'viewer@x.io', 'password2', 'a')).access_token);
  t.ok(viewer.grants.has('MODEL_READ'));
  t.notOk(viewer.grants.hasAll('MODEL_READ'));
  t.ok(viewer.grants.allows('MODEL_READ', m.get('s1.e1') as HDict));
  t.notOk(viewer.grants.allows('MODEL_READ', m.get('s2.e2') as HDict));
  t.notOk(viewer.grants.has('MODEL_DELETE'), 'a policy with a broken filter grants nothing');
  t.notOk(viewer.grants.has('HIS_WRITE'), 'no permission its policies do not list');

  const support = await h.auth.authenticate((await h.auth.passwordGrant(client, 'support@x.io', 'password3', 'a')).access_token);
  const as = h.auth.impersonate(support, viewerId);
  t.equal(as.userId, viewerId);
  t.equal(as.impersonatedBy, support.userId);
  t.ok(as.grants.allows('MODEL_READ', m.get('s1') as HDict), 'runs with the target\'s permissions');
  t.notOk(as.grants.has('IMPERSONATE'));
  t.throws(() => h.auth.impersonate(viewer, support.userId), { code: 'HL_CANNOT_IMPERSONATE', message: 'Cannot impersonate' });
  t.throws(() => h.auth.impersonate(support, 'no-such-user'), { code: 'HL_CANNOT_IMPERSONATE' });
  t.throws(() => h.auth.impersonate(support, 's1'), { code: 'HL_CANNOT_IMPERSONATE' }, 'only users can be impersonated');

  // role changes take effect at once
  await m.update([d({ id: new HRef('rViewer'), actionPolicyRefs: [new HRef('pImp')] })]);
  const again = await h.auth.authenticate((await h.auth.passwordGrant(client, 'viewer@x.io', 'password2', 'a')).access_token);
  t.notOk(again.grants.has('MODEL_READ'));

  // password change revokes the user's other sessions but not this one
  const other = await h.auth.passwordGrant(client, 'viewer@x.io', 'password2', 'a');
  await h.auth.updatePassword(again, 'new-password-1');
  await t.rejects(h.auth.authenticate(other.access_token), { code: 'HL_UNAUTHORIZED' });
  await h.auth.authenticate((await h.auth.passwordGrant(client, 'viewer@x.io', 'new-password-1', 'a')).access_token);
  await t.rejects(h.auth.passwordGrant(client, 'viewer@x.io', 'password2', 'b'), { code: 'HL_INVALID_GRANT' });
  await t.rejects(h.auth.updatePassword(again, 'short'), { code: 'HL_WEAK_PASSWORD' });
  t.same((await h.auth.listClients()), ['c1']);
  t.same(h.auth.listUsers().map((u) => u.username).sort(), ['admin@x.io', 'support@x.io', 'viewer@x.io']);
  await h.close();
});

t.test('tokens issued while the clock cannot be trusted survive the step that sets it, and still expire', async (t) => {
  const dir = tempDir(t);
  // A Pi booting without its clock: 1970 until NTP steps it to today.
  const clock = new ManualClock(3_600_000);
  let trusted = false;
  const store = await Store.open(dir);
  const model = await Model.load({ records: new RecordStore(store), clock });
  const auth = await AuthService.open({ store, model, clock, log: silentLogger(), dataDir: dir, trust: { trusted: () => trusted } });
  t.teardown(async () => {
    auth.stop();
    await store.close();
  });
  await auth.bootstrap({ adminUser: 'admin@example.com', adminPassword: 'correct horse', clientId: 'c1', clientSecret: client.secret });
  const tok = await auth.passwordGrant(client, 'admin@example.com', 'correct horse', '10.0.0.1');
  t.equal((await auth.authenticate(tok.access_token)).username, 'admin@example.com');
  // NTP steps the clock 56 years forward; a minute passes.
  clock.stepWall(T0);
  trusted = true;
  clock.advance(60_000);
  t.equal((await auth.authenticate(tok.access_token)).username, 'admin@example.com', 'the access token still works after the step');
  t.ok(auth.cachedPrincipal(tok.access_token) !== undefined, 'and from the cache');
  const next = await auth.refreshGrant(client, tok.refresh_token, '10.0.0.1');
  t.equal((await auth.authenticate(next.access_token)).username, 'admin@example.com', 'its refresh token works too');
  // Its lifetime is counted on the monotonic clock from its issue: it does not last for years.
  clock.advance(ACCESS_TTL_MS);
  await t.rejects(auth.authenticate(tok.access_token), { code: 'HL_UNAUTHORIZED' }, 'the old access token expires one lifetime after its issue');
  t.equal(auth.cachedPrincipal(tok.access_token), undefined);
  t.equal((await auth.authenticate((await auth.refreshGrant(client, next.refresh_token, '10.0.0.1')).access_token)).username, 'admin@example.com', 'a token issued once trusted is dated on the wall clock');
});
