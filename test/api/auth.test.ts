/**
 * Issue 4, end to end: authentication and authorisation through real HTTP against the real App
 * (test/helpers/app.ts): the token endpoint (password and refresh grants, errors as RFC 6749,
 * lockout), bearer tokens (expiry with a manual clock, logout, tampering, foreign tokens),
 * permissions from roles and action policies created over HTTP, impersonation, updatePassword,
 * and that no secret shows in reads of users or in the logs. Users are made with
 * `app.auth.addUser` (HTTP cannot set a password); everything else goes over the wire.
 */
import t, { type Test } from 'tap';
import { ACCESS_TTL_MS } from '../../src/auth/auth.js';
import { type HDict, type HGrid, HNumber, HRef, type HVal, MARKER } from '../../src/haystack/values.js';
import { ManualClock } from '../../src/lib/clock.js';
import { ErrorCodes } from '../../src/lib/errors.js';
import { ADMIN, CLIENT, type Running, type TokenAnswer, basic, startApp, tokenRequest } from '../helpers/app.js';
import { type Answer, errOf, getGrid, gridOf, postGrid, request } from '../helpers/http.js';

type Tap = Test;
type Rows = Readonly<Record<string, HVal>> | readonly Readonly<Record<string, HVal>>[];

const DAY = 24 * 3600_000;

function bearer(token: string): Record<string, string> {
  return { authorization: `Bearer ${token}` };
}

/** A data op as the holder of `token` (optionally impersonating). */
function as(r: Running, token: string, impersonate?: string) {
  const headers = { ...bearer(token), ...(impersonate === undefined ? {} : { 'x-impersonate': impersonate }) };
  return {
    post: (op: string, rows: Rows) => postGrid(r.base, op, gridOf(rows), { headers }),
    get: (op: string, params: Readonly<Record<string, HVal>> = {}) => getGrid(r.base, op, params, { headers }),
    /** The rows of a read by filter; throws unless 200. */
    async find(filter: string, limit?: number): Promise<HDict[]> {
      const a = await postGrid(r.base, 'read', gridOf({ filter, ...(limit === undefined ? {} : { limit: HNumber.of(limit) }) }), { headers });
      if (a.status !== 200 || a.grid === undefined) throw new Error(`read ${filter}: ${a.status} ${a.text}`);
      return [...a.grid.rows];
    },
  };
}

/** Logs in; fails the test unless 200. Records the tokens as secrets to look for in the logs. */
async function login(t: Tap, r: Running, username: string, password: string, secrets?: Set<string>): Promise<{ access: string; refresh: string; body: Record<string, unknown> }> {
  const a = await r.login(username, password);
  t.equal(a.status, 200, `${username} logs in${a.status === 200 ? '' : `: ${JSON.stringify(a.body)}`}`);
  const access = a.body.access_token as string;
  const refresh = a.body.refresh_token as string;
  secrets?.add(access);
  secrets?.add(refresh);
  return { access, refresh, body: a.body };
}

/** An OAuth error answer: status, RFC 6749 body {error, error_description}, no-store. */
function oauthFailed(t: Tap, a: TokenAnswer, status: number, error: string, description?: RegExp, what = ''): void {
  const p = what === '' ? '' : `${what}: `;
  t.equal(a.status, status, `${p}status ${status}`);
  t.equal(a.body.error, error, `${p}error ${error}`);
  t.type(a.body.error_description, 'string', `${p}error_description`);
  if (description !== undefined) t.match(a.body.error_description, description, `${p}the description says what is wrong`);
  t.notOk('access_token' in a.body, `${p}no token`);
  t.equal(a.headers.get('cache-control'), 'no-store', `${p}not cached`);
}

/** A data-op error: status, error grid (meta err, dis), code. */
function failed(t: Tap, a: Answer, status: number, code: string, dis?: RegExp, what = ''): void {
  const p = what === '' ? '' : `${what}: `;
  t.equal(a.status, status, `${p}status ${status}${a.status === status ? '' : ` (got ${a.status}: ${a.text.slice(0, 300)})`}`);
  const e = errOf(a);
  t.ok(e, `${p}an error grid`);
  t.equal(e?.code, code, `${p}errCode ${code}`);
  if (dis !== undefined) t.match(e?.dis, dis, `${p}the message says why`);
  if (status === 401) t.equal(a.headers.get('www-authenticate'), 'Bearer', `${p}challenges with Bearer`);
}

function ok(t: Tap, a: Answer, what: string): HGrid {
  t.equal(a.status, 200, `${what}: 200${a.status === 200 ? '' : ` (got ${a.status}: ${a.text.slice(0, 300)})`}`);
  return a.grid as HGrid;
}

/** Impersonation refused: 400 with the body exactly `Cannot impersonate`. */
function cannotImpersonate(t: Tap, a: { status: number; text: string; headers: Headers }, what: string): void {
  t.equal(a.status, 400, `${what}: 400`);
  t.equal(a.text, 'Cannot impersonate', `${what}: the body is exactly "Cannot impersonate"`);
  t.match(a.headers.get('content-type'), /^text\/plain/, `${what}: plain text`);
}

function idOf(row: HDict | undefined): string {
  const r = row?.get('id');
  if (!(r instanceof HRef)) throw new Error(`row has no id: ${String(row)}`);
  return r.id;
}

/** No line of the log holds any of the secrets (whole, or as the Basic header carrying them). */
function noSecretsLogged(t: Tap, r: Running, secrets: Iterable<string>): void {
  const all = [...secrets].filter((s) => s.length >= 8);
  t.ok(r.logs.length > 0, 'there are log lines to search');
  const leaks: string[] = [];
  for (const line of r.logs) for (const s of all) if (line.includes(s)) leaks.push(`${s.slice(0, 12)}... in ${line.slice(0, 200)}`);
  t.same(leaks, [], `none of ${all.length} secrets is in ${r.logs.length} log lines`);
}

async function updatePassword(r: Running, path: string, token: string, body: unknown, extra: Record<string, string> = {}): Promise<Answer> {
  return request(r.base, path, {
    method: 'POST',
    headers: { ...bearer(token), 'content-type': 'application/json', ...extra },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

t.test('password grant: Basic client credentials, JSON or form body; the token works', async (t) => {
  const r = await startApp(t);
  const secrets = new Set([ADMIN.password, CLIENT.secret, basic(CLIENT.id, CLIENT.secret).slice(6)]);
  const before = Date.now();
  const a = await r.login(ADMIN.username, ADMIN.password);
  const after = Date.now();
  t.equal(a.status, 200);
  t.same(Object.keys(a.body).sort(), ['access_token', 'expires_in', 'refresh_token', 'token_type']);
  t.equal(a.body.token_type, 'Bearer');
  t.type(a.body.access_token, 'string');
  t.type(a.body.refresh_token, 'string');
  t.match(a.headers.get('content-type'), /^application\/json/);
  t.equal(a.headers.get('cache-control'), 'no-store', 'token answers are not cached');
  const exp = a.body.expires_in as number;
  t.type(exp, 'number');
  t.ok(exp >= before + ACCESS_TTL_MS - 1000 && exp <= after + ACCESS_TTL_MS, `expires_in is the absolute expiry in epoch ms, 7 days ahead (${new Date(exp).toISOString()})`);
  t.equal(ACCESS_TTL_MS, 7 * DAY);
  secrets.add(a.body.access_token as string).add(a.body.refresh_token as string);
  ok(t, await as(r, a.body.access_token as string).get('about'), 'the token works');
  t.equal((await as(r, a.body.access_token as string).find('user')).length, 1, 'and reads');

  const form = await tokenRequest(
    r.base,
    new URLSearchParams({ grant_type: 'password', username: ADMIN.username, password: ADMIN.password }).toString(),
    basic(CLIENT.id, CLIENT.secret),
    'application/x-www-form-urlencoded',
  );
  t.equal(form.status, 200, 'a form-urlencoded body works too');
  t.not(form.body.access_token, a.body.access_token, 'a new session');
  secrets.add(form.body.access_token as string).add(form.body.refresh_token as string);
  ok(t, await as(r, form.body.access_token as string).get('about'), 'that token works');

  const upper = await r.login(ADMIN.username.toUpperCase(), ADMIN.password);
  t.equal(upper.status, 200, 'user names (e-mail addresses) are case-insensitive');
  secrets.add(upper.body.access_token as string).add(upper.body.refresh_token as string);

  const refresh = await tokenRequest(
    r.base,
    new URLSearchParams({ grant_type: 'refresh_token', refresh_token: form.body.refresh_token as string }).toString(),
    basic(CLIENT.id, CLIENT.secret),
    'application/x-www-form-urlencoded',
  );
  t.equal(refresh.status, 200, 'refresh with a form body');
  secrets.add(refresh.body.access_token as string).add(refresh.body.refresh_token as string);
  noSecretsLogged(t, r, secrets);
});

t.test('refresh grant rotates: the old refresh token is refused afterwards', async (t) => {
  const r = await startApp(t);
  const secrets = new Set([ADMIN.password, CLIENT.secret]);
  const first = await login(t, r, ADMIN.username, ADMIN.password, secrets);
  const a = await tokenRequest(r.base, { grant_type: 'refresh_token', refresh_token: first.refresh });
  t.equal(a.status, 200);
  t.equal(a.body.token_type, 'Bearer');
  t.not(a.body.access_token, first.access, 'a new access token');
  t.not(a.body.refresh_token, first.refresh, 'a new refresh token');
  t.ok((a.body.expires_in as number) >= (first.body.expires_in as number), 'expiry moves forward');
  secrets.add(a.body.access_token as string).add(a.body.refresh_token as string);
  ok(t, await as(r, a.body.access_token as string).get('about'), 'the new access token works');
  ok(t, await as(r, first.access).get('about'), 'the old access token still works until it expires');

  const b = await tokenRequest(r.base, { grant_type: 'refresh_token', refresh_token: a.body.refresh_token });
  t.equal(b.status, 200, 'the new refresh token works');
  secrets.add(b.body.access_token as string).add(b.body.refresh_token as string);

  oauthFailed(t, await tokenRequest(r.base, { grant_type: 'refresh_token', refresh_token: first.refresh }), 400, 'invalid_grant', /refresh token/, 'the first refresh token again');
  ok(t, await as(r, b.body.access_token as string).get('about'), 'the session goes on');
  oauthFailed(t, await tokenRequest(r.base, { grant_type: 'refresh_token', refresh_token: a.body.refresh_token }), 400, 'invalid_grant', /refresh token/, 'the second refresh token again');
  // Reuse of the token just rotated away means a copy exists: the session is revoked (src/auth).
  failed(t, await as(r, b.body.access_token as string).get('about'), 401, ErrorCodes.UNAUTHORIZED, /revoked/, 'the session after reuse');
  oauthFailed(t, await tokenRequest(r.base, { grant_type: 'refresh_token', refresh_token: b.body.refresh_token }), 400, 'invalid_grant', undefined, 'the latest refresh token after reuse');

  oauthFailed(t, await tokenRequest(r.base, { grant_type: 'refresh_token', refresh_token: 'not-a-token' }), 400, 'invalid_grant', undefined, 'unknown refresh token');
  oauthFailed(t, await tokenRequest(r.base, { grant_type: 'refresh_token' }), 400, 'invalid_request', /needs refresh_token/, 'no refresh token');
  // A refresh token belongs to the client it was issued to.
  const other = await r.app.auth.addClient('other-client', 'other-client-secret-456');
  secrets.add(other);
  const mine = await login(t, r, ADMIN.username, ADMIN.password, secrets);
  oauthFailed(t, await tokenRequest(r.base, { grant_type: 'refresh_token', refresh_token: mine.refresh }, basic('other-client', other)), 400, 'invalid_grant', undefined, "another client's refresh token");
  noSecretsLogged(t, r, secrets);
});

t.test('expiry after 7 days (manual clock): 401 with WWW-Authenticate: Bearer, then refresh', async (t) => {
  const clock = new ManualClock(Date.UTC(2030, 5, 1, 12));
  const r = await startApp(t, { clock });
  const s = await login(t, r, ADMIN.username, ADMIN.password);
  t.equal(s.body.expires_in, clock.now() + ACCESS_TTL_MS, 'expires_in from the server clock');
  t.equal((await as(r, s.access).find('user')).length, 1, 'the token works');
  clock.advance(ACCESS_TTL_MS - 60_000);
  t.equal((await as(r, s.access).get('about')).status, 200, 'valid a minute before expiry');
  clock.advance(61_000);
  const expired = await as(r, s.access).post('read', { filter: 'site' });
  failed(t, expired, 401, ErrorCodes.UNAUTHORIZED, /expired; refresh it or log in again/, 'after 7 days');
  failed(t, await as(r, s.access).get('about'), 401, ErrorCodes.UNAUTHORIZED, /expired/, 'about too (cached token)');
  const fresh = await tokenRequest(r.base, { grant_type: 'refresh_token', refresh_token: s.refresh });
  t.equal(fresh.status, 200, 'the refresh token still works after the access token expired');
  t.equal(fresh.body.expires_in, clock.now() + ACCESS_TTL_MS, 'a new 7 days');
  ok(t, await as(r, fresh.body.access_token as string).post('read', { filter: 'site' }), 'the refreshed token works');
  const again = await login(t, r, ADMIN.username, ADMIN.password);
  ok(t, await as(r, again.access).get('about'), 'a new password grant works too');
  // Refresh tokens have a lifetime of their own (30 days).
  clock.advance(31 * DAY);
  oauthFailed(t, await tokenRequest(r.base, { grant_type: 'refresh_token', refresh_token: fresh.body.refresh_token }), 400, 'invalid_grant', undefined, 'a refresh token 31 days old');
});

t.test('logout: DELETE /oauth2/token revokes the token and its refresh token', async (t) => {
  const r = await startApp(t);
  const s = await login(t, r, ADMIN.username, ADMIN.password);
  const other = await login(t, r, ADMIN.username, ADMIN.password);
  ok(t, await as(r, s.access).get('about'), 'before logout');
  const out = await request(r.base, '/oauth2/token', { method: 'DELETE', headers: bearer(s.access) });
  t.equal(out.status, 204, 'logout answers 204');
  t.equal(out.text, '');
  failed(t, await as(r, s.access).post('read', { filter: 'site' }), 401, ErrorCodes.UNAUTHORIZED, /revoked/, 'the token after logout');
  oauthFailed(t, await tokenRequest(r.base, { grant_type: 'refresh_token', refresh_token: s.refresh }), 400, 'invalid_grant', undefined, 'its refresh token after logout');
  ok(t, await as(r, other.access).get('about'), 'another session of the same user is untouched');
  const twice = await request(r.base, '/oauth2/token', { method: 'DELETE', headers: bearer(s.access) });
  t.equal(twice.status, 401, 'logging out twice: 401');
  t.equal(twice.headers.get('www-authenticate'), 'Bearer');
  const none = await request(r.base, '/oauth2/token', { method: 'DELETE' });
  t.equal(none.status, 401, 'logout without a token: 401');
  t.equal(none.headers.get('www-authenticate'), 'Bearer');
  // Sessions survive a restart; logout is remembered across one.
  await r.restart();
  ok(t, await as(r, other.access).get('about'), 'a session survives a restart');
  t.equal((await as(r, s.access).get('about')).status, 401, 'a logged-out token stays refused after a restart');
});

t.test('tampered, foreign, missing and malformed credentials on data ops', async (t) => {
  const r = await startApp(t);
  const second = await startApp(t);
  const s = await login(t, r, ADMIN.username, ADMIN.password);
  const [head, body, sig] = s.access.split('.') as [string, string, string];
  t.ok(head && body && sig, 'a JWT');
  const claims = JSON.parse(Buffer.from(body, 'base64url').toString()) as Record<string, unknown>;
  const forgedBody = Buffer.from(JSON.stringify({ ...claims, exp: (claims.exp as number) + 365 * 86400 })).toString('base64url');
  const flip = (c: string): string => (c === 'A' ? 'B' : 'A');
  const none = Buffer.from(JSON.stringify({ alg: 'none', typ: 'JWT' })).toString('base64url');
  const cases: [string, Record<string, string>, RegExp][] = [
    ['signature changed', bearer(`${head}.${body}.${flip(sig[0] as string)}${sig.slice(1)}`), /invalid access token/],
    ['claims changed, old signature', bearer(`${head}.${forgedBody}.${sig}`), /invalid access token/],
    ['alg none', bearer(`${none}.${body}.`), /invalid access token/],
    ['a token from another server', bearer(second.token), /invalid access token/],
    ['garbage', bearer('garbage'), /invalid access token/],
    ['no Authorization', {}, /authentication required: send Authorization: Bearer/],
    ['Bearer without a token', { authorization: 'Bearer' }, /must be "Bearer <access token>"/],
    ['Bearer and a space', { authorization: 'Bearer ' }, /must be "Bearer <access token>"/],
    ['Bearer with two words', { authorization: `Bearer ${s.access} extra` }, /must be "Bearer <access token>"/],
    ['Basic instead of Bearer', { authorization: basic(ADMIN.username, ADMIN.password) }, /must be "Bearer <access token>"/],
    ['the token without a scheme', { authorization: s.access }, /must be "Bearer <access token>"/],
  ];
  for (const [what, headers, dis] of cases) {
    failed(t, await postGrid(r.base, 'read', gridOf({ filter: 'site' }), { headers }), 401, ErrorCodes.UNAUTHORIZED, dis, what);
    failed(t, await getGrid(r.base, 'about', {}, { headers }), 401, ErrorCodes.UNAUTHORIZED, undefined, `${what} (about)`);
  }
  ok(t, await as(r, s.access).get('about'), 'the real token still works');
  t.equal((await request(r.base, '/api/read?filter=site', { headers: { authorization: `bearer ${s.access}` } })).status, 200, 'the scheme is case-insensitive');
  t.equal((await request(r.base, '/api/read?filter=site', { headers: { authorization: `Bearer \t ${s.access}` } })).status, 200, 'any white space after the scheme');
  // The refresh token of one server means nothing to another.
  oauthFailed(t, await tokenRequest(second.base, { grant_type: 'refresh_token', refresh_token: s.refresh }), 400, 'invalid_grant', undefined, 'a refresh token at another server');
  t.notOk(r.logs.some((l) => /"level":50/.test(l)), 'no unexpected error logged');
});

t.test('token endpoint errors: client, password, grant, body (RFC 6749 answers)', async (t) => {
  const r = await startApp(t);
  const secrets = new Set([ADMIN.password, CLIENT.secret, 'wrong-secret-0000000', 'wrong-password-1']);
  const good = { grant_type: 'password', username: ADMIN.username, password: ADMIN.password };
  // The lockout counts failures per address (all of these come from 127.0.0.1): a success
  // between groups of failures keeps this test below its threshold.
  const reset = async (): Promise<void> => void (await login(t, r, ADMIN.username, ADMIN.password, secrets));

  const clientCases: [string, string | undefined][] = [
    ['wrong client secret', basic(CLIENT.id, 'wrong-secret-0000000')],
    ['unknown client', basic('no-such-client', CLIENT.secret)],
    ['no Authorization', undefined],
    ['Bearer instead of Basic', 'Bearer abc'],
  ];
  for (const [i, [what, authorization]] of clientCases.entries()) {
    const a = await (authorization === undefined
      ? fetch(`${r.base}/oauth2/token`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(good) }).then(async (res) => ({
          status: res.status,
          headers: res.headers,
          body: (await res.json()) as Record<string, unknown>,
        }))
      : tokenRequest(r.base, good, authorization));
    oauthFailed(t, a, 401, 'invalid_client', undefined, what);
    t.match(a.headers.get('www-authenticate'), /^Basic/, `${what}: challenges with Basic`);
    if (i === 1) t.equal(a.body.error_description, 'unknown client or wrong client secret', 'an unknown client and a wrong secret look the same');
  }
  await reset();

  const wrong = await r.login(ADMIN.username, 'wrong-password-1');
  oauthFailed(t, wrong, 400, 'invalid_grant', /wrong user name or password/, 'wrong password');
  const nobody = await r.login('nobody@example.com', 'wrong-password-1');
  oauthFailed(t, nobody, 400, 'invalid_grant', undefined, 'unknown user');
  t.equal(nobody.body.error_description, wrong.body.error_description, 'an unknown user and a wrong password look the same');
  await reset();

  const requestCases: [string, unknown, string, RegExp, string?][] = [
    ['unsupported grant_type', { grant_type: 'client_credentials' }, 'unsupported_grant_type', /"client_credentials" is not supported: use password or refresh_token/],
    ['authorization_code', { grant_type: 'authorization_code', code: 'x' }, 'unsupported_grant_type', /not supported/],
    ['no grant_type', { username: ADMIN.username, password: ADMIN.password }, 'invalid_request', /grant_type is required/],
    ['password grant without password', { grant_type: 'password', username: ADMIN.username }, 'invalid_request', /needs username and password/],
    ['password grant without username', { grant_type: 'password', password: ADMIN.password }, 'invalid_request', /needs username and password/],
    ['not JSON', '{"grant_type": ', 'invalid_request', /not valid JSON/],
    ['a JSON array', '[1]', 'invalid_request', /must be a JSON object/],
    ['an XML body', '<x/>', 'invalid_request', /unsupported body type/, 'application/xml'],
    ['an empty body', '', 'invalid_request', /grant_type is required/],
  ];
  for (const [what, body, error, dis, type] of requestCases) {
    oauthFailed(t, await tokenRequest(r.base, body, basic(CLIENT.id, CLIENT.secret), type), 400, error, dis, what);
  }
  // None of this stopped the server or the admin.
  await reset();
  ok(t, await as(r, r.token).get('about'), 'still serving');
  noSecretsLogged(t, r, secrets);
});

t.test('lockout after repeated failures: 429, Retry-After, and a message that says so', async (t) => {
  const clock = new ManualClock(Date.UTC(2030, 0, 1));
  const r = await startApp(t, { clock });
  await r.app.auth.addUser('victim@example.com', 'victim-password-1', 'admin');
  const secrets = new Set(['victim-password-1', 'guess-0000', 'guess-0001', 'guess-0002', 'guess-0003', 'guess-0004', CLIENT.secret, ADMIN.password]);
  for (let i = 0; i < 5; i++) {
    const a = await r.login('victim@example.com', `guess-000${i}`);
    t.equal(a.status, 400, `wrong password ${i + 1}: 400`);
  }
  const locked = await r.login('victim@example.com', 'victim-password-1');
  t.equal(locked.status, 429, 'the right password after five failures: 429');
  t.equal(locked.headers.get('retry-after'), '1', 'Retry-After in seconds');
  t.match(locked.body.error_description, /too many failed logins; try again in 1 s/, 'the message says so, and when');
  t.notOk('access_token' in locked.body);
  const fromSameAddress = await r.login(ADMIN.username, ADMIN.password);
  t.equal(fromSameAddress.status, 200, 'another user at the same address (behind one NAT) is not locked out by it');
  ok(t, await as(r, r.token).get('about'), 'data ops with a valid token are not affected');
  clock.advance(999);
  t.equal((await r.login('victim@example.com', 'victim-password-1')).status, 429, 'still locked just before the time');
  clock.advance(2);
  const after = await login(t, r, 'victim@example.com', 'victim-password-1', secrets);
  ok(t, await as(r, after.access).get('about'), 'after the wait the right password works');
  // A success forgets the failures: four more are not locked out.
  for (let i = 0; i < 4; i++) t.equal((await r.login('victim@example.com', `guess-000${i}`)).status, 400);
  t.equal((await r.login('victim@example.com', 'victim-password-1')).status, 200, 'four failures do not lock');
  // Failures go on doubling the wait: five, then a sixth after the first lock.
  for (let i = 0; i < 5; i++) await r.login('victim@example.com', `guess-000${i}`);
  clock.advance(1001);
  t.equal((await r.login('victim@example.com', 'guess-0000')).status, 400, 'a wrong try after the wait is judged, not refused');
  const longer = await r.login('victim@example.com', 'victim-password-1');
  t.equal(longer.status, 429);
  t.equal(longer.headers.get('retry-after'), '2', 'the wait doubled');
  // Wrong client secrets lock the address as well.
  clock.advance(60_000);
  await login(t, r, ADMIN.username, ADMIN.password, secrets);
  for (let i = 0; i < 20; i++) t.equal((await tokenRequest(r.base, { grant_type: 'password', username: ADMIN.username, password: ADMIN.password }, basic(CLIENT.id, 'wrong-client-secret-00'))).status, 401);
  const byClient = await r.login(ADMIN.username, ADMIN.password);
  t.equal(byClient.status, 429, 'twenty wrong client secrets lock the address');
  t.ok(Number(byClient.headers.get('retry-after')) >= 1);
  secrets.add('wrong-client-secret-00');
  noSecretsLogged(t, r, secrets);
});

/**
 * The permission fixture: sites, equips and points; action policies and roles created over
 * HTTP by the admin; one user per role.
 */
async function permissionWorld(t: Tap, r: Running) {
  const admin = as(r, r.token);
  const g = ok(
    t,
    await admin.post('createRec', [
      { id: HRef.of('north'), site: MARKER, name: 'north', dis: 'North' },
      { id: HRef.of('south'), site: MARKER, name: 'south', dis: 'South' },
      { id: HRef.of('west'), site: MARKER, name: 'west', dis: 'West' },
      { id: HRef.of('n-ahu'), equip: MARKER, name: 'ahu', siteRef: HRef.of('north') },
      { id: HRef.of('s-ahu'), equip: MARKER, name: 'ahu', siteRef: HRef.of('south') },
      { id: HRef.of('n-sat'), point: MARKER, name: 'sat', siteRef: HRef.of('north'), equipRef: HRef.of('north.ahu') },
      { id: HRef.of('p-read-sites'), actionPolicy: MARKER, name: 'p-read-sites', permissions: ['MODEL_READ'], filter: 'site' },
      { id: HRef.of('p-model'), actionPolicy: MARKER, name: 'p-model', permissions: ['MODEL_READ', 'MODEL_CREATE', 'MODEL_UPDATE', 'MODEL_DELETE'] },
      { id: HRef.of('p-equip'), actionPolicy: MARKER, name: 'p-equip', permissions: ['MODEL_READ', 'MODEL_CREATE', 'MODEL_UPDATE', 'MODEL_DELETE'], filter: 'equip' },
      { id: HRef.of('p-users'), actionPolicy: MARKER, name: 'p-users', permissions: ['USER_ADMIN'] },
      { id: HRef.of('p-imp'), actionPolicy: MARKER, name: 'p-imp', permissions: ['IMPERSONATE'] },
      { id: HRef.of('p-read-users'), actionPolicy: MARKER, name: 'p-read-users', permissions: ['MODEL_READ'], filter: 'user' },
      { id: HRef.of('r-reader'), role: MARKER, name: 'reader', actionPolicyRefs: [HRef.of('p-read-sites')] },
      { id: HRef.of('r-editor'), role: MARKER, name: 'editor', actionPolicyRefs: [HRef.of('p-model')] },
      { id: HRef.of('r-equip'), role: MARKER, name: 'equip-editor', actionPolicyRefs: [HRef.of('p-equip')] },
      { id: HRef.of('r-nobody'), role: MARKER, name: 'nobody', actionPolicyRefs: [] },
      { id: HRef.of('r-useradmin'), role: MARKER, name: 'useradmin', actionPolicyRefs: [HRef.of('p-model'), HRef.of('p-users')] },
      { id: HRef.of('r-support'), role: MARKER, name: 'support', actionPolicyRefs: [HRef.of('p-imp'), HRef.of('p-read-users')] },
      { id: HRef.of('r-blind'), role: MARKER, name: 'blind-support', actionPolicyRefs: [HRef.of('p-imp'), HRef.of('p-read-sites')] },
    ]),
    'policies and roles created over HTTP',
  );
  t.equal(g.size, 19);
  const users = {
    reader: 'reader@example.com',
    editor: 'editor@example.com',
    equip: 'equip@example.com',
    nobody: 'nobody@example.com',
    useradmin: 'useradmin@example.com',
    support: 'support@example.com',
    blind: 'blind@example.com',
  };
  const roles: Record<keyof typeof users, string> = {
    reader: 'reader',
    editor: 'editor',
    equip: 'equip-editor',
    nobody: 'nobody',
    useradmin: 'r-useradmin',
    support: 'support',
    blind: 'blind-support',
  };
  const ids = {} as Record<keyof typeof users, string>;
  const tokens = {} as Record<keyof typeof users, string>;
  const secrets = new Set<string>([ADMIN.password, CLIENT.secret]);
  for (const k of Object.keys(users) as (keyof typeof users)[]) {
    const pw = `${k}-password-123`;
    secrets.add(pw);
    ids[k] = await r.app.auth.addUser(users[k], pw, roles[k]);
    tokens[k] = (await login(t, r, users[k], pw, secrets)).access;
  }
  return { admin, users, ids, tokens, secrets };
}

t.test('permissions: each one allowed and denied, through roles and action policies', async (t) => {
  const r = await startApp(t);
  const w = await permissionWorld(t, r);
  const reader = as(r, w.tokens.reader);
  const editor = as(r, w.tokens.editor);
  const equip = as(r, w.tokens.equip);
  const nobody = as(r, w.tokens.nobody);
  const useradmin = as(r, w.tokens.useradmin);

  t.test('MODEL_READ: everything, a policy filter, or nothing', async (t) => {
    t.equal((await editor.find('site or equip or point')).length, 6, 'unfiltered: everything');
    const sites = await reader.find('id');
    t.same(sites.map(idOf).sort(), ['north', 'south', 'west'], 'the filter of the policy: sites only');
    t.same((await reader.find('equip')).map(idOf), [], 'equips are not visible');
    t.same((await reader.find('user or role or actionPolicy')).map(idOf), [], 'nor users, roles or policies');
    t.equal((await reader.find('id', 2)).length, 2, 'limit counts visible records');
    t.ok((await reader.find('id', 2)).every((x) => x.has('site')));
    const byId = ok(t, await reader.post('read', [{ id: HRef.of('n-ahu') }, { id: HRef.of('north') }, { id: HRef.of('north.ahu') }]), 'read by id');
    t.ok(byId.rows[0]?.isEmpty(), 'a hidden record by id: a null row, as if unknown');
    t.equal(idOf(byId.rows[1]), 'north', 'a visible one is answered');
    t.ok(byId.rows[2]?.isEmpty(), 'a hidden record by name: a null row');
    t.equal(ok(t, await reader.get('read', { id: HRef.of('n-sat') }), 'GET read').first()?.isEmpty(), true, 'GET by id of a hidden record too');
    failed(t, await nobody.post('read', { filter: 'site' }), 403, ErrorCodes.FORBIDDEN, /permission denied: read needs MODEL_READ/, 'no MODEL_READ');
    failed(t, await nobody.get('read', { id: HRef.of('north') }), 403, ErrorCodes.FORBIDDEN, undefined, 'no MODEL_READ (GET)');
    ok(t, await nobody.get('about'), 'about needs no permission');
    const eq = (await equip.find('id')).map(idOf).sort();
    t.same(eq, ['n-ahu', 's-ahu'], 'an equip-scoped reader sees equips only');
  });

  t.test('MODEL_CREATE', async (t) => {
    ok(t, await editor.post('createRec', { site: MARKER, name: 'east' }), 'allowed');
    failed(t, await reader.post('createRec', { site: MARKER, name: 'r-site' }), 403, ErrorCodes.FORBIDDEN, /createRec needs MODEL_CREATE/, 'reader');
    failed(t, await nobody.post('createRec', { site: MARKER, name: 'n-site' }), 403, ErrorCodes.FORBIDDEN, /needs MODEL_CREATE/, 'nobody');
    ok(t, await equip.post('createRec', { equip: MARKER, name: 'vav', siteRef: HRef.of('north') }), 'scoped: an equip is allowed');
    failed(t, await equip.post('createRec', { site: MARKER, name: 'e-site' }), 403, ErrorCodes.FORBIDDEN, /permission denied: creating .* needs MODEL_CREATE/, 'scoped: a site is not');
    failed(
      t,
      await equip.post('createRec', [
        { equip: MARKER, name: 'fcu', siteRef: HRef.of('north') },
        { point: MARKER, name: 'p', equipRef: HRef.of('north.fcu') },
      ]),
      403,
      ErrorCodes.FORBIDDEN,
      /row 1: permission denied/,
      'scoped: an equip and a point',
    );
    t.same(await editor.find('name=="r-site" or name=="n-site" or name=="e-site" or name=="fcu"'), [], 'nothing created by refused requests');
    t.equal((await editor.find('name=="vav"')).length, 1);
  });

  t.test('MODEL_UPDATE', async (t) => {
    ok(t, await editor.post('updateRec', { id: HRef.of('north'), dis: 'North campus' }), 'allowed');
    failed(t, await reader.post('updateRec', { id: HRef.of('north'), dis: 'x' }), 403, ErrorCodes.FORBIDDEN, /updateRec needs MODEL_UPDATE/, 'reader');
    ok(t, await equip.post('updateRec', { id: HRef.of('north.ahu'), dis: 'Air handler' }), 'scoped: an equip');
    failed(t, await equip.post('updateRec', { id: HRef.of('south'), dis: 'x' }), 403, ErrorCodes.FORBIDDEN, /updating @south needs MODEL_UPDATE/, 'scoped: a site');
    failed(
      t,
      await equip.post('updateRec', [
        { id: HRef.of('s-ahu'), dis: 'changed' },
        { id: HRef.of('n-sat'), dis: 'changed' },
      ]),
      403,
      ErrorCodes.FORBIDDEN,
      /row 1/,
      'scoped: an equip and a point',
    );
    const sAhu = await editor.find('id==@s-ahu');
    t.equal(sAhu.length, 1);
    t.not(sAhu[0]?.get('dis'), 'changed', 'the allowed row of a refused request was not applied');
    t.equal((await editor.find('id==@north'))[0]?.get('dis'), 'North campus');
    t.equal((await editor.find('id==@n-ahu'))[0]?.get('dis'), 'Air handler');
  });

  t.test('MODEL_DELETE', async (t) => {
    ok(t, await editor.post('createRec', [{ site: MARKER, name: 'tmp1' }, { site: MARKER, name: 'tmp2' }, { equip: MARKER, name: 'tmp3' }]), 'setup');
    ok(t, await editor.post('deleteRec', { id: HRef.of('tmp1') }), 'allowed');
    failed(t, await reader.post('deleteRec', { id: HRef.of('tmp2') }), 403, ErrorCodes.FORBIDDEN, /deleteRec needs MODEL_DELETE/, 'reader');
    failed(t, await reader.get('deleteRec', { id: HRef.of('tmp2') }), 403, ErrorCodes.FORBIDDEN, undefined, 'reader, GET');
    failed(t, await equip.post('deleteRec', { id: HRef.of('tmp2') }), 403, ErrorCodes.FORBIDDEN, /deleting @\S+ needs MODEL_DELETE/, 'scoped: a site');
    failed(t, await equip.post('deleteRec', [{ id: HRef.of('tmp3') }, { id: HRef.of('tmp2') }]), 403, ErrorCodes.FORBIDDEN, undefined, 'scoped: an equip and a site');
    t.equal((await editor.find('name=="tmp2" or name=="tmp3"')).length, 2, 'nothing deleted by refused requests');
    const byFilter = ok(t, await equip.post('deleteRec', { filter: 'name=="tmp2" or name=="tmp3"' }), 'scoped, by filter: only what it may read');
    t.same(byFilter.rows.map((x) => x.get('name')), ['tmp3']);
    t.equal((await editor.find('name=="tmp2"')).length, 1, 'the site was not matched');
    // A refusal for referrers names only those the caller may read.
    ok(t, await editor.post('createRec', [{ id: HRef.of('tmp4'), equip: MARKER, name: 'tmp4' }]), 'setup: an equip');
    ok(
      t,
      await editor.post('createRec', [
        { id: HRef.of('tmp5'), equip: MARKER, name: 'tmp5', equipRef: HRef.of('tmp4') },
        { id: HRef.of('secret-pt'), point: MARKER, name: 'secret-pt', equipRef: HRef.of('tmp4') },
      ]),
      'setup: an equip and a point referencing it',
    );
    const refused = await equip.post('deleteRec', { id: HRef.of('tmp4') });
    failed(t, refused, 400, ErrorCodes.REFERENCED, /tmp5.*; 1 record you cannot read/, 'scoped: referenced');
    t.notMatch(refused.text, /secret-pt/, 'the point it may not read is not named');
    failed(t, await editor.post('deleteRec', { id: HRef.of('tmp4') }), 400, ErrorCodes.REFERENCED, /secret-pt/, 'an editor of everything sees every referrer');
  });

  t.test('USER_ADMIN for user, role and actionPolicy records', async (t) => {
    const tries: [string, string, Rows][] = [
      ['create a policy', 'createRec', { actionPolicy: MARKER, name: 'sneaky', permissions: ['USER_ADMIN', 'IMPERSONATE'] }],
      ['create a role', 'createRec', { role: MARKER, name: 'sneaky-role', actionPolicyRefs: [HRef.of('p-users')] }],
      ['create a user', 'createRec', { user: MARKER, username: 'sneaky@example.com', roleRef: HRef.of('r-useradmin') }],
      ['give its own role USER_ADMIN', 'updateRec', { id: HRef.of('r-editor'), actionPolicyRefs: [HRef.of('p-model'), HRef.of('p-users')] }],
      ['widen a policy', 'updateRec', { id: HRef.of('p-read-sites'), filter: 'id' }],
      ['move its own user to another role', 'updateRec', { id: HRef.of(w.ids.editor), roleRef: HRef.of('r-useradmin') }],
      ['delete a policy', 'deleteRec', { id: HRef.of('p-imp') }],
      ['delete a user', 'deleteRec', { id: HRef.of(w.ids.nobody) }],
    ];
    for (const [what, op, rows] of tries) failed(t, await editor.post(op, rows), 403, ErrorCodes.FORBIDDEN, /of users, roles or action policies needs USER_ADMIN/, `editor: ${what}`);
    failed(t, await reader.post('createRec', { role: MARKER, name: 'x-role' }), 403, ErrorCodes.FORBIDDEN, /needs MODEL_CREATE/, 'reader: create a role');
    // Nothing changed: the editor still cannot administer users.
    failed(t, await editor.post('createRec', { role: MARKER, name: 'again' }), 403, ErrorCodes.FORBIDDEN, /USER_ADMIN/, 'editor, after all that');
    t.same((await useradmin.find('name=="sneaky" or name=="sneaky-role" or username=="sneaky@example.com"')).map(idOf), [], 'nothing created');
    t.equal((await reader.find('equip')).length, 0, 'the reader policy was not widened');

    // With USER_ADMIN all of it works.
    ok(t, await useradmin.post('createRec', [
      { id: HRef.of('p-new'), actionPolicy: MARKER, name: 'p-new', permissions: ['MODEL_READ'], filter: 'equip' },
      { id: HRef.of('r-new'), role: MARKER, name: 'r-new', actionPolicyRefs: [HRef.of('p-new')] },
      { user: MARKER, username: 'made@example.com', roleRef: HRef.of('r-new') },
    ]), 'useradmin creates a policy, a role and a user');
    ok(t, await useradmin.post('updateRec', { id: HRef.of('r-reader'), actionPolicyRefs: [HRef.of('p-read-sites'), HRef.of('p-new')] }), 'useradmin updates a role');
    const equips = (await editor.find('equip')).map(idOf).sort();
    t.ok(equips.length >= 2);
    t.same((await reader.find('equip')).map(idOf).sort(), equips, 'the new rights take effect at once');
    ok(t, await useradmin.post('updateRec', { id: HRef.of('r-reader'), actionPolicyRefs: [HRef.of('p-read-sites')] }), 'and back');
    t.same(await reader.find('equip'), [], 'taken away at once too');
    const made = await useradmin.find('username=="made@example.com"');
    ok(t, await useradmin.post('deleteRec', { id: HRef.of(idOf(made[0])) }), 'useradmin deletes a user');
    failed(t, await useradmin.post('deleteRec', { id: HRef.of('p-new') }), 400, ErrorCodes.REFERENCED, /r-new/, 'a policy a role refers to');
    ok(t, await useradmin.post('deleteRec', [{ id: HRef.of('r-new') }, { id: HRef.of('p-new') }]), 'the role and its policy together');
  });

  noSecretsLogged(t, r, w.secrets);
});

t.test('impersonation (X-IMPERSONATE)', async (t) => {
  const r = await startApp(t);
  const w = await permissionWorld(t, r);

  t.test('allowed: the op runs with the target user\'s permissions', async (t) => {
    const adminAsReader = as(r, r.token, w.ids.reader);
    t.same((await adminAsReader.find('id')).map(idOf).sort(), ['north', 'south', 'west'], 'the admin, as the reader, sees what the reader sees');
    failed(t, await adminAsReader.post('createRec', { site: MARKER, name: 'via-reader' }), 403, ErrorCodes.FORBIDDEN, /needs MODEL_CREATE/, 'and may not create');
    const byId = ok(t, await adminAsReader.get('read', { id: HRef.of('n-ahu') }), 'GET read by id');
    t.ok(byId.first()?.isEmpty(), 'a record hidden from the reader is a null row');
    // The support role: IMPERSONATE and MODEL_READ on users, nothing else.
    const support = as(r, w.tokens.support);
    failed(t, await support.post('createRec', { site: MARKER, name: 'by-support' }), 403, ErrorCodes.FORBIDDEN, undefined, 'support itself may not create');
    t.same((await support.find('site')).map(idOf), [], 'nor read sites');
    const supportAsEditor = as(r, w.tokens.support, w.ids.editor);
    const made = ok(t, await supportAsEditor.post('createRec', { site: MARKER, name: 'by-support' }), 'as the editor, support may create');
    t.equal(made.first()?.get('name'), 'by-support');
    t.equal((await supportAsEditor.find('site')).length, 4, 'and read all sites');
    ok(t, await supportAsEditor.get('about'), 'about');
    // The header does not stick: without it the caller is itself again.
    failed(t, await support.post('createRec', { site: MARKER, name: 'by-support-2' }), 403, ErrorCodes.FORBIDDEN, undefined, 'support again, without the header');
  });

  t.test('refused: 400 "Cannot impersonate"', async (t) => {
    const cases: [string, string, string][] = [
      ['without IMPERSONATE', w.tokens.editor, w.ids.reader],
      ['target not readable', w.tokens.blind, w.ids.reader],
      ['target unknown', r.token, 'no-such-user'],
      ['target not a user (a site)', r.token, 'north'],
      ['target not a user (a role)', r.token, 'r-reader'],
      ['empty target', r.token, ''],
    ];
    for (const [what, token, target] of cases) {
      cannotImpersonate(t, await as(r, token, target).post('read', { filter: 'site' }), what);
      cannotImpersonate(t, await as(r, token, target).get('about'), `${what} (about)`);
    }
    cannotImpersonate(t, await as(r, w.tokens.editor, w.ids.reader).post('createRec', { site: MARKER, name: 'imp-x' }), 'createRec without IMPERSONATE');
    t.same(await as(r, r.token).find('name=="imp-x"'), [], 'nothing was created');
    // Authentication comes first: a bad token is a 401, not an impersonation failure.
    failed(t, await as(r, 'garbage', w.ids.reader).get('about'), 401, ErrorCodes.UNAUTHORIZED, undefined, 'bad token with X-IMPERSONATE');
  });

  t.test('refused on the token endpoint, logout and updatePassword', async (t) => {
    const imp = { 'x-impersonate': w.ids.reader };
    const token = await fetch(`${r.base}/oauth2/token`, {
      method: 'POST',
      headers: { authorization: basic(CLIENT.id, CLIENT.secret), 'content-type': 'application/json', ...imp },
      body: JSON.stringify({ grant_type: 'password', username: ADMIN.username, password: ADMIN.password }),
    });
    cannotImpersonate(t, { status: token.status, text: await token.text(), headers: token.headers }, 'login');
    const s = await login(t, r, w.users.editor, 'editor-password-123');
    const refresh = await fetch(`${r.base}/oauth2/token`, {
      method: 'POST',
      headers: { authorization: basic(CLIENT.id, CLIENT.secret), 'content-type': 'application/json', ...imp },
      body: JSON.stringify({ grant_type: 'refresh_token', refresh_token: s.refresh }),
    });
    cannotImpersonate(t, { status: refresh.status, text: await refresh.text(), headers: refresh.headers }, 'refresh');
    cannotImpersonate(t, await request(r.base, '/oauth2/token', { method: 'DELETE', headers: { ...bearer(r.token), ...imp } }), 'logout');
    ok(t, await as(r, r.token).get('about'), 'the admin was not logged out');
    for (const path of ['/api/updatePassword', '/user/updatePassword']) {
      cannotImpersonate(t, await updatePassword(r, path, r.token, { newPassword: 'impersonated-pw-1' }, imp), `updatePassword at ${path}`);
    }
    t.equal((await r.login(ADMIN.username, ADMIN.password)).status, 200, 'the admin password is unchanged');
    t.equal((await r.login(w.users.reader, 'impersonated-pw-1')).status, 400, 'and so is the target\'s');
    t.equal((await r.login(w.users.reader, 'reader-password-123')).status, 200);
  });
});

t.test('updatePassword: /api and /user paths, newPassword and password properties', async (t) => {
  const r = await startApp(t);
  const admin = as(r, r.token);
  ok(t, await admin.post('createRec', [
    { id: HRef.of('p-r'), actionPolicy: MARKER, name: 'p-r', permissions: ['MODEL_READ'] },
    { id: HRef.of('r-r'), role: MARKER, name: 'r-r', actionPolicyRefs: [HRef.of('p-r')] },
  ]), 'a read-only role');
  const user = 'pat@example.com';
  const secrets = new Set([ADMIN.password, CLIENT.secret, 'first-password-1', 'second-password-2', 'third-password-3', 'short']);
  await r.app.auth.addUser(user, 'first-password-1', 'r-r');
  const a = await login(t, r, user, 'first-password-1', secrets);
  const b = await login(t, r, user, 'first-password-1', secrets);
  const adminOther = await login(t, r, ADMIN.username, ADMIN.password, secrets);

  const changed = await updatePassword(r, '/api/updatePassword', a.access, { newPassword: 'second-password-2' });
  t.equal(changed.status, 200, 'changed');
  t.match(changed.headers.get('content-type'), /^text\/plain/, 'a plain-text answer');
  t.match(changed.text, /Password updated/);
  ok(t, await as(r, a.access).get('about'), 'the current session is kept');
  failed(t, await as(r, b.access).get('about'), 401, ErrorCodes.UNAUTHORIZED, /revoked/, 'another session of the user is revoked');
  oauthFailed(t, await tokenRequest(r.base, { grant_type: 'refresh_token', refresh_token: b.refresh }), 400, 'invalid_grant', undefined, 'with its refresh token');
  ok(t, await as(r, adminOther.access).get('about'), "other users' sessions are untouched");
  oauthFailed(t, await r.login(user, 'first-password-1'), 400, 'invalid_grant', undefined, 'the old password no longer works');
  const c = await login(t, r, user, 'second-password-2', secrets);

  const viaUser = await updatePassword(r, '/user/updatePassword', c.access, { password: 'third-password-3' });
  t.equal(viaUser.status, 200, '/user/updatePassword with "password"');
  t.match(viaUser.headers.get('content-type'), /^text\/plain/);
  failed(t, await as(r, a.access).get('about'), 401, ErrorCodes.UNAUTHORIZED, undefined, 'the first session is revoked now');
  oauthFailed(t, await r.login(user, 'second-password-2'), 400, 'invalid_grant', undefined, 'the second password no longer works');
  const d = await login(t, r, user, 'third-password-3', secrets);

  const short = await updatePassword(r, '/api/updatePassword', d.access, { newPassword: 'short' });
  t.equal(short.status, 400, 'too short: 400');
  t.match(short.headers.get('content-type'), /^text\/plain/, 'plain text');
  t.match(short.text, /at least 8 characters/, 'says how long it must be');
  const bad: [string, unknown][] = [
    ['no property', {}],
    ['a number', { newPassword: 12345678 }],
    ['not JSON', '{"newPassword": '],
    ['an empty password', { newPassword: '' }],
  ];
  for (const [what, body] of bad) {
    const x = await updatePassword(r, '/user/updatePassword', d.access, body);
    t.equal(x.status, 400, `${what}: 400`);
    t.match(x.headers.get('content-type'), /^text\/plain/, `${what}: plain text`);
    t.ok(x.text.length > 10, `${what}: a message: ${x.text}`);
  }
  ok(t, await as(r, d.access).get('about'), 'failed changes revoke nothing');
  t.equal((await r.login(user, 'third-password-3')).status, 200, 'and change nothing');

  const anon = await request(r.base, '/api/updatePassword', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"newPassword":"whatever-123"}' });
  t.equal(anon.status, 401, 'without a token: 401');
  t.equal(anon.headers.get('www-authenticate'), 'Bearer');
  const revoked = await updatePassword(r, '/api/updatePassword', b.access, { newPassword: 'revoked-pw-123' });
  t.equal(revoked.status, 401, 'with a revoked token: 401');
  secrets.add('revoked-pw-123').add('whatever-123');
  noSecretsLogged(t, r, secrets);
});

t.test('secrets: never in reads of users, never in the logs', async (t) => {
  const r = await startApp(t);
  const admin = as(r, r.token);
  const secrets = new Set([ADMIN.password, CLIENT.secret, basic(CLIENT.id, CLIENT.secret).slice(6)]);
  await r.app.auth.addUser('sam@example.com', 'sam-password-1', 'admin');
  secrets.add('sam-password-1');
  const s = await login(t, r, 'sam@example.com', 'sam-password-1', secrets);
  const refreshed = await tokenRequest(r.base, { grant_type: 'refresh_token', refresh_token: s.refresh });
  secrets.add(refreshed.body.access_token as string).add(refreshed.body.refresh_token as string);
  t.equal((await updatePassword(r, '/api/updatePassword', refreshed.body.access_token as string, { newPassword: 'sam-password-2' })).status, 200);
  secrets.add('sam-password-2');
  t.equal((await r.login('sam@example.com', 'sam-wrong-pw-3')).status, 400);
  secrets.add('sam-wrong-pw-3');
  t.equal((await tokenRequest(r.base, { grant_type: 'password', username: 'sam@example.com', password: 'sam-password-2' }, basic(CLIENT.id, 'a-wrong-client-secret'))).status, 401);
  secrets.add('a-wrong-client-secret');
  await request(r.base, '/oauth2/token', { method: 'DELETE', headers: bearer(refreshed.body.access_token as string) });
  // Bad requests carrying a token, to be sure request logging leaves headers out.
  await request(r.base, '/api/nothing', { headers: bearer(s.access) });
  await request(r.base, `/api/read?filter=site&token=${s.access}`, { headers: bearer(s.access) });

  for (const accept of ['json', 'zinc'] as const) {
    const a = await postGrid(r.base, 'read', gridOf({ filter: 'user' }), { headers: r.auth, accept });
    const g = ok(t, a, `read users (${accept})`);
    t.equal(g.size, 2);
    for (const pw of ['sam-password-1', 'sam-password-2', ADMIN.password, CLIENT.secret]) t.notOk(a.text.includes(pw), `no password in the ${accept} answer`);
    t.notOk(/scrypt/i.test(a.text), 'no password hash');
    for (const row of g.rows) {
      t.same(row.names().filter((n) => /pass|hash|secret|salt|token|pw/i.test(n)), [], `no secret-like tag on ${String(row.get('username'))}`);
      for (const [tag, v] of row) {
        if (typeof v === 'string') t.notOk(v.length >= 32 && /^[A-Za-z0-9+/_$.=-]+$/.test(v), `${tag} does not look like a hash`);
      }
      t.same(row.names().sort(), ['dis', 'id', 'mod', 'roleRef', 'user', 'username'], 'only the public tags of a user');
    }
  }
  const byId = await admin.get('read', { id: HRef.of(r.app.auth.userIdByName('sam@example.com') as string) });
  t.notOk(byId.text.includes('sam-password'), 'nor by id');
  noSecretsLogged(t, r, secrets);
  t.ok(r.logs.some((l) => l.includes('failed login')), 'failed logins are logged (without the password)');
});

t.test('deleting a user over HTTP ends its sessions and password, even if its id is used again', async (t) => {
  const r = await startApp(t);
  const admin = as(r, r.token);
  const id = await r.app.auth.addUser('gone@example.com', 'gone-password-1', 'admin');
  const s = await login(t, r, 'gone@example.com', 'gone-password-1');
  ok(t, await as(r, s.access).get('about'), 'the user works');
  const del = ok(t, await admin.post('deleteRec', { id: HRef.of(id) }), 'the admin deletes the user record');
  t.equal(del.size, 1);
  failed(t, await as(r, s.access).get('about'), 401, ErrorCodes.UNAUTHORIZED, undefined, 'its token');
  oauthFailed(t, await r.login('gone@example.com', 'gone-password-1'), 400, 'invalid_grant', undefined, 'its password');
  // A new user record with the same id (ids may be supplied) must not inherit anything.
  const adminRole = (await admin.find('role and name=="admin"'))[0];
  ok(t, await admin.post('createRec', { id: HRef.of(id), user: MARKER, username: 'reborn@example.com', roleRef: HRef.of(idOf(adminRole)) }), 'a new user with the old id');
  failed(t, await as(r, s.access).get('about'), 401, ErrorCodes.UNAUTHORIZED, undefined, 'the old token stays dead');
  oauthFailed(t, await tokenRequest(r.base, { grant_type: 'refresh_token', refresh_token: s.refresh }), 400, 'invalid_grant', undefined, 'the old refresh token stays dead');
  oauthFailed(t, await r.login('reborn@example.com', 'gone-password-1'), 400, 'invalid_grant', undefined, 'the old password does not open the new user');
  // And after a restart too.
  await r.restart();
  failed(t, await as(r, s.access).get('about'), 401, ErrorCodes.UNAUTHORIZED, undefined, 'the old token after a restart');
  oauthFailed(t, await r.login('reborn@example.com', 'gone-password-1'), 400, 'invalid_grant', undefined, 'the old password after a restart');
});

t.test('a successful refresh clears the address failure count, as a successful login does', async (t) => {
  const r = await startApp(t);
  const s = await login(t, r, ADMIN.username, ADMIN.password);
  for (let i = 0; i < 4; i++) t.equal((await tokenRequest(r.base, { grant_type: 'refresh_token', refresh_token: `stale-${i}` })).status, 400, `bad refresh ${i + 1}`);
  const good = await tokenRequest(r.base, { grant_type: 'refresh_token', refresh_token: s.refresh });
  t.equal(good.status, 200, 'a good refresh');
  t.equal((await tokenRequest(r.base, { grant_type: 'refresh_token', refresh_token: 'stale-x' })).status, 400, 'one more bad refresh is judged, not locked out');
  t.equal((await r.login(ADMIN.username, ADMIN.password)).status, 200, 'the address is not locked: the failures were not consecutive');
});

/** A token request as the console's page sends it: no Authorization, `client_id` in the body, the page's Origin. */
async function consoleToken(base: string, body: Record<string, string>, headers: Record<string, string> = { origin: base, 'sec-fetch-site': 'same-origin' }): Promise<TokenAnswer> {
  const res = await fetch(`${base}/oauth2/token`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify({ client_id: 'hayloft-console', ...body }) });
  const text = await res.text();
  return { status: res.status, body: JSON.parse(text) as Record<string, unknown>, headers: res.headers };
}

t.test('the console: a public client from its own origin logs in with user and password alone', async (t) => {
  const r = await startApp(t);
  const secrets = new Set([ADMIN.password, CLIENT.secret]);
  const a = await consoleToken(r.base, { grant_type: 'password', username: ADMIN.username, password: ADMIN.password });
  t.equal(a.status, 200, `logged in without a client secret: ${JSON.stringify(a.body)}`);
  secrets.add(a.body.access_token as string).add(a.body.refresh_token as string);
  ok(t, await as(r, a.body.access_token as string).get('about'), 'its token works');

  // Refresh rotates as for any client, and the console's refresh token is the console's alone.
  const b = await consoleToken(r.base, { grant_type: 'refresh_token', refresh_token: a.body.refresh_token as string });
  t.equal(b.status, 200, 'refresh from the page');
  secrets.add(b.body.access_token as string).add(b.body.refresh_token as string);
  oauthFailed(t, await tokenRequest(r.base, { grant_type: 'refresh_token', refresh_token: b.body.refresh_token }), 400, 'invalid_grant', undefined, "a confidential client with the console's refresh token");
  const prog = await login(t, r, ADMIN.username, ADMIN.password, secrets);
  oauthFailed(t, await consoleToken(r.base, { grant_type: 'refresh_token', refresh_token: prog.refresh }), 400, 'invalid_grant', undefined, "the console with a program's refresh token");

  // Only from the console's own origin.
  const login1 = { grant_type: 'password', username: ADMIN.username, password: ADMIN.password };
  oauthFailed(t, await consoleToken(r.base, login1, {}), 401, 'invalid_client', /own page/, 'no Origin (a program)');
  oauthFailed(t, await consoleToken(r.base, login1, { origin: 'http://evil.example' }), 401, 'invalid_client', /own page/, 'another site');
  oauthFailed(t, await consoleToken(r.base, login1, { origin: r.base.replace('http:', 'https:') }), 401, 'invalid_client', /own page/, 'the same host on another scheme');
  oauthFailed(t, await consoleToken(r.base, login1, { origin: r.base, 'sec-fetch-site': 'same-site' }), 401, 'invalid_client', /own page/, 'a sibling site the browser names');
  oauthFailed(t, await consoleToken(r.base, { grant_type: 'refresh_token', refresh_token: b.body.refresh_token as string }, { origin: 'http://evil.example' }), 401, 'invalid_client', /own page/, 'refresh from another site');
  ok(t, await as(r, b.body.access_token as string).get('about'), 'a refused refresh from elsewhere does not end the session');

  // Other clients still need their secret; the console's id cannot be given one.
  oauthFailed(t, await consoleToken(r.base, { ...login1, client_id: CLIENT.id }), 401, 'invalid_client', /secret/, 'a confidential client without its secret');
  oauthFailed(t, await tokenRequest(r.base, login1, basic('hayloft-console', 'anything-at-all-123')), 401, 'invalid_client', /public/, 'the console client with a secret');
  await t.rejects(r.app.auth.addClient('hayloft-console', 'a-secret-of-some-length'), { code: ErrorCodes.CONFLICT }, 'the console client id is reserved');

  // Lockout applies to the console as to every client.
  for (let i = 0; i < 5; i++) t.equal((await consoleToken(r.base, { ...login1, password: `wrong-${i}-password` })).status, 400, `wrong password ${i + 1}`);
  const locked = await consoleToken(r.base, login1);
  t.equal(locked.status, 429, 'the sixth try is locked out, even with the right password');
  t.ok(locked.headers.get('retry-after'), 'with Retry-After');

  // Logout revokes the console's session as any other.
  const del = await fetch(`${r.base}/oauth2/token`, { method: 'DELETE', headers: bearer(b.body.access_token as string) });
  t.equal(del.status, 204, 'logout');
  failed(t, await as(r, b.body.access_token as string).get('about'), 401, ErrorCodes.UNAUTHORIZED, /revoked/, 'after logout');
  noSecretsLogged(t, r, secrets);
});
