/**
 * The permission gate (src/auth/gate.ts) on its own: the allow-all principal, require and its
 * coded errors, the scoped read with a limit, what a watch may show, authorizeWrite, and the gate
 * of a named user (MQTT writeAs) holding the same cached grants as that user's requests.
 */
import t, { type Test } from 'tap';
import { AuthService } from '../../src/auth/auth.js';
import { ALLOW_ALL_PRINCIPAL, Gate, gateOfUser, tokenGates } from '../../src/auth/gate.js';
import { Grants } from '../../src/auth/permissions.js';
import { HDict, HNumber, HRef, MARKER, type HVal } from '../../src/haystack/values.js';
import { ManualClock } from '../../src/lib/clock.js';
import { ErrorCodes } from '../../src/lib/errors.js';
import { silentLogger } from '../../src/lib/log.js';
import { Model } from '../../src/model/model.js';
import { Store } from '../../src/store/db.js';
import { RecordStore } from '../../src/store/records.js';
import { tempDir } from '../helpers/tmp.js';

async function open(t: Test) {
  const dir = tempDir(t);
  const clock = new ManualClock(Date.UTC(2024, 0, 1));
  const store = await Store.open(dir);
  const model = await Model.load({ records: new RecordStore(store), clock });
  const auth = await AuthService.open({ store, model, clock, log: silentLogger(), dataDir: dir });
  t.teardown(async () => {
    auth.stop();
    await store.close();
  });
  await model.create([
    HDict.of({ id: HRef.of('a'), site: MARKER, name: 'a' }),
    HDict.of({ id: HRef.of('b'), site: MARKER, name: 'b' }),
    HDict.of({ id: HRef.of('c'), site: MARKER, name: 'c', open: MARKER }),
    HDict.of({ id: HRef.of('d'), site: MARKER, name: 'd', open: MARKER }),
    HDict.of({ id: HRef.of('p'), point: MARKER, writable: MARKER, kind: 'Number', name: 'p', open: MARKER }),
    HDict.of({ id: HRef.of('q'), point: MARKER, writable: MARKER, kind: 'Number', name: 'q' }),
  ]);
  return { model, auth };
}

/** A gate over these policies (each a dict of tags). */
function gateOf(model: Model, ...policies: Record<string, HVal>[]): Gate {
  const grants = new Grants(model, policies.map((p) => HDict.of({ actionPolicy: MARKER, ...p })));
  return Gate.of({ userId: 'u', username: 'u@example.com', user: HDict.EMPTY, grants, sid: 's' });
}

const rec = (model: Model, id: string): HDict => model.get(id) as HDict;

t.test('the allow-all principal may do everything, and its watches belong to user ""', async (t) => {
  const { model } = await open(t);
  const g = Gate.OPEN;
  t.equal(g.principal, ALLOW_ALL_PRINCIPAL);
  t.equal(g.principal.userId, '');
  t.ok(g.can('USER_ADMIN') && g.canAll('USER_ADMIN') && g.can('MODEL_DELETE', rec(model, 'a')));
  t.doesNotThrow(() => g.require('POINT_WRITE', 'x'));
  t.doesNotThrow(() => g.requireAll('USER_ADMIN', 'x'));
  t.doesNotThrow(() => g.authorizeWrite(rec(model, 'p'), 1), 'every level');
  t.equal(g.watchVisible(), undefined, 'no per-point check');
  t.same(g.read(model, 'site', 2).length, 2, 'the limit as the model applies it');
});

t.test('require throws HL_FORBIDDEN naming the action and the permission', async (t) => {
  const { model } = await open(t);
  const g = gateOf(model, { permissions: ['MODEL_READ'], filter: 'open' });
  t.ok(g.can('MODEL_READ'), 'granted for some entities');
  t.notOk(g.canAll('MODEL_READ'), 'but not for all');
  t.ok(g.can('MODEL_READ', rec(model, 'c')));
  t.notOk(g.can('MODEL_READ', rec(model, 'a')));
  t.doesNotThrow(() => g.require('MODEL_READ', 'read'));
  t.throws(() => g.require('WATCH', 'watchSub'), { code: ErrorCodes.FORBIDDEN, message: 'permission denied: watchSub needs WATCH' });
  t.throws(() => g.require('MODEL_READ', 'reading @a', rec(model, 'a')), { code: ErrorCodes.FORBIDDEN, message: 'permission denied: reading @a needs MODEL_READ' });
  t.throws(() => g.requireAll('MODEL_READ', 'a backup'), { code: ErrorCodes.FORBIDDEN, message: 'permission denied: a backup needs MODEL_READ' });
  t.equal(Gate.of(g.principal), g, 'one gate per principal');
});

t.test('read: with scoped rights the limit counts what the caller may see', async (t) => {
  const { model } = await open(t);
  const g = gateOf(model, { permissions: ['MODEL_READ'], filter: 'open' });
  t.same(g.read(model, 'site', 0).map((r) => (r.get('id') as HRef).id), ['c', 'd'], 'only what it may read');
  t.same(g.read(model, 'site', 1).map((r) => (r.get('id') as HRef).id), ['c'], 'the limit after the filter, not before (a, b come first)');
  t.ok(g.readable(rec(model, 'd')) && !g.readable(rec(model, 'b')));
});

t.test('watchVisible: MODEL_READ and WATCH on the point; undefined when both are granted for all', async (t) => {
  const { model } = await open(t);
  t.equal(gateOf(model, { permissions: ['MODEL_READ', 'WATCH'] }).watchVisible(), undefined);
  const v = gateOf(model, { permissions: ['MODEL_READ'] }, { permissions: ['WATCH'], filter: 'point' }).watchVisible();
  t.ok(v?.(rec(model, 'p')), 'read and watched');
  t.notOk(v?.(rec(model, 'a')), 'read, not watched');
});

t.test('authorizeWrite: unknown without MODEL_READ, forbidden without POINT_WRITE or above the level', async (t) => {
  const { model } = await open(t);
  const g = gateOf(model, { permissions: ['MODEL_READ'], filter: 'open' }, { permissions: ['POINT_WRITE'], pointWriteLevel: HNumber.of(8) });
  t.doesNotThrow(() => g.authorizeWrite(rec(model, 'p'), 8));
  t.throws(() => g.authorizeWrite(rec(model, 'p'), 7), { code: ErrorCodes.FORBIDDEN, message: /levels 8 to 17/ });
  t.throws(() => g.authorizeWrite(rec(model, 'q'), 8), { code: ErrorCodes.NOT_FOUND, message: 'no record @q' }, 'a point it cannot read looks unknown');
  const reader = gateOf(model, { permissions: ['MODEL_READ'] });
  const authorize = reader.authorizeWrite;
  t.throws(() => authorize(rec(model, 'p'), 17), { code: ErrorCodes.FORBIDDEN, message: /needs POINT_WRITE/ }, 'bound: handed on as a function');
});

t.test('gateOfUser: a user by name with its cached grants; refused when there is none', async (t) => {
  const { model, auth } = await open(t);
  const [pol] = await model.create([HDict.of({ actionPolicy: MARKER, name: 'w', permissions: ['MODEL_READ', 'POINT_WRITE'], filter: 'open' })]);
  const [role] = await model.create([HDict.of({ role: MARKER, name: 'writer', actionPolicyRefs: [pol?.get('id') as HRef] })]);
  await auth.addUser('writer@example.com', 'writer-password-1', (role?.get('id') as HRef).id);
  const g = gateOfUser(auth, 'Writer@Example.com', 'mqtt writeAs');
  t.equal(g.principal.username, 'writer@example.com', 'user names are matched as at login');
  t.doesNotThrow(() => g.authorizeWrite(rec(model, 'p'), 1));
  t.throws(() => g.authorizeWrite(rec(model, 'q'), 1), { code: ErrorCodes.NOT_FOUND });
  t.equal(gateOfUser(auth, 'writer@example.com', 'mqtt writeAs').principal.grants, g.principal.grants, 'the grants are cached, not rebuilt per command');
  t.throws(() => gateOfUser(auth, 'nobody@example.com', 'mqtt writeAs'), { code: ErrorCodes.FORBIDDEN, message: 'the mqtt writeAs user "nobody@example.com" does not exist' });
});

t.test('tokenGates: the gate of a token, cached once verified; Gate.OPEN without authentication', async (t) => {
  const { model, auth } = await open(t);
  const client = { id: 'c1', secret: 'client-secret-0123456789' };
  await auth.addClient(client.id, client.secret);
  const [pol] = await model.create([HDict.of({ actionPolicy: MARKER, name: 'r', permissions: ['MODEL_READ', 'WATCH'], filter: 'open' })]);
  const [role] = await model.create([HDict.of({ role: MARKER, name: 'reader', actionPolicyRefs: [pol?.get('id') as HRef] })]);
  await auth.addUser('reader@example.com', 'reader-password-1', (role?.get('id') as HRef).id);
  const { access_token: token } = await auth.passwordGrant(client, 'reader@example.com', 'reader-password-1', '10.0.0.1');
  const gates = tokenGates(auth);
  t.equal(gates.cached(token), undefined, 'not verified yet');
  const g = await gates.of(token);
  t.equal(g.principal.username, 'reader@example.com');
  t.equal(gates.cached(token), g, 'then known without a promise, the same gate');
  t.ok(g.watchVisible()?.(rec(model, 'p')) === true && g.watchVisible()?.(rec(model, 'q')) === false, 'its permissions');
  await t.rejects(gates.of('not-a-token'), { code: ErrorCodes.UNAUTHORIZED });
  await t.rejects(gates.of(token, 'admin'), { code: ErrorCodes.CANNOT_IMPERSONATE }, 'impersonation needs IMPERSONATE');
  const none = tokenGates(null);
  t.equal(none.cached('anything'), Gate.OPEN);
  t.equal(await none.of('anything'), Gate.OPEN);
});
