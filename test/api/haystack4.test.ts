/**
 * Issue 31, end to end: the standard Haystack 4 API at /haystack/ on the real App (LevelDB, auth,
 * HTTP on loopback). The login of the Haystack auth spec with a SCRAM client written from the RFC
 * (test/helpers/haystack4.ts); the path Haxall's Haystack connector takes, step by step, posting
 * Zinc without Accept (about, nav down to points, watchSub with curValSub, watchPoll, pointWrite,
 * hisRead of a DateTime range, close); formats by Accept (Zinc, Hayson, JSON v3, CSV) with
 * haystack-core as referee; errors as Haystack 4 clients read them; and that /api/ is unchanged.
 */
import t, { type Test } from 'tap';
import core from 'haystack-core';
import { ACCESS_TTL_MS } from '../../src/auth/auth.js';
import { readHayson } from '../../src/haystack/hayson.js';
import { readJsonGrid } from '../../src/haystack/json.js';
import { timeZone } from '../../src/haystack/tz.js';
import type { HDict} from '../../src/haystack/values.js';
import { HDateTime, type HGrid, HNumber, HRef, MARKER } from '../../src/haystack/values.js';
import { readZinc, writeZinc } from '../../src/haystack/zinc.js';
import { ManualClock } from '../../src/lib/clock.js';
import { ErrorCodes } from '../../src/lib/errors.js';
import { ADMIN, type Running, startApp } from '../helpers/app.js';
import { h4Call, h4Login } from '../helpers/haystack4.js';
import { gridOf, postGrid } from '../helpers/http.js';

const START = Date.parse('2026-01-05T12:00:00Z');
const NY = timeZone('New_York');

interface World {
  r: Running;
  clock: ManualClock;
  token: string;
  ids: Record<string, string>;
}

async function world(t: Tap): Promise<World> {
  const clock = new ManualClock(START);
  const r = await startApp(t, { clock });
  const create = async (rows: Record<string, unknown>[]): Promise<string[]> => {
    const a = await postGrid(r.base, 'createRec', gridOf(rows as never), { headers: r.auth });
    if (a.status !== 200) throw new Error(`createRec: ${a.status} ${a.text}`);
    return (a.grid as HGrid).rows.map((x) => (x.get('id') as HRef).id);
  };
  const [site] = await create([{ site: MARKER, name: 'hq', dis: 'HQ', tz: 'New_York' }]);
  const [equip] = await create([{ equip: MARKER, name: 'ahu', dis: 'AHU', siteRef: HRef.of(site as string) }]);
  const [temp, sp] = await create([
    { point: MARKER, name: 'temp', dis: 'Temp', cur: MARKER, his: MARKER, sensor: MARKER, kind: 'Number', unit: '°F', tz: 'New_York', siteRef: HRef.of(site as string), equipRef: HRef.of(equip as string) },
    { point: MARKER, name: 'sp', dis: 'Setpoint', cur: MARKER, writable: MARKER, sp: MARKER, kind: 'Number', unit: '°F', tz: 'New_York', siteRef: HRef.of(site as string), equipRef: HRef.of(equip as string) },
  ]);
  const login = await h4Login(r.base, ADMIN.username, ADMIN.password);
  if (login.authToken === undefined) throw new Error(`login failed: ${login.final.status}`);
  return { r, clock, token: login.authToken, ids: { site: site as string, equip: equip as string, temp: temp as string, sp: sp as string } };
}
type Tap = Test;

function zincOf(t: Tap, a: { status: number; text: string; headers: Headers }, what: string): HGrid {
  t.equal(a.status, 200, `${what}: 200${a.status === 200 ? '' : ` (got ${a.status}: ${a.text.slice(0, 300)})`}`);
  t.match(a.headers.get('content-type') ?? '', /^text\/zinc/, `${what}: answered in Zinc`);
  // haystack-core reads it too (the referee): Haxall and nclient parse the same grammar.
  t.ok(core.ZincReader.readValue(a.text) instanceof core.HGrid, `${what}: haystack-core reads the Zinc`);
  return readZinc(a.text);
}

/** A request grid in Zinc, as Haxall posts it. */
function zinc(rows: Record<string, unknown>[] | Record<string, unknown>, meta: Record<string, unknown> = {}): string {
  return writeZinc(gridOf(rows as never, meta as never));
}

t.test('login: HELLO, SCRAM, BEARER as the Haystack auth spec says', async (t) => {
  const { r } = await world(t);
  const s = await h4Login(r.base, ADMIN.username, ADMIN.password);
  t.equal(s.hello.status, 401, 'HELLO: 401');
  t.match(s.hello.headers.get('www-authenticate'), /^SCRAM handshakeToken=[^,]+, hash=SHA-256$/, 'HELLO: the SCRAM challenge');
  t.equal(s.first.status, 401, 'client-first: 401');
  t.match(s.first.headers.get('www-authenticate'), /^SCRAM handshakeToken=[^,]+, hash=SHA-256, data=[A-Za-z0-9_-]+$/, 'client-first: server-first in data');
  t.equal(s.final.status, 200, 'client-final: 200');
  t.ok(s.authToken, 'an authToken in Authentication-Info');
  t.ok(s.serverVerified, 'the server proves it knows the verifier (v= matches the client\'s computation)');
  const about = zincOf(t, { status: s.final.status, text: await s.final.text(), headers: s.final.headers }, 'the final step answers the op');
  t.equal(about.rows[0]?.get('haystackVersion'), '4.0');

  const wrong = await h4Login(r.base, ADMIN.username, 'not-the-password');
  t.equal(wrong.final.status, 403, 'a wrong password: 403');
  t.equal(wrong.authToken, undefined, 'and no token');
  t.match(await wrong.final.text(), /HL_AUTH_FAILED/, 'an error grid with its code');
  const nobody = await h4Login(r.base, 'nobody@example.com', 'whatever-password');
  t.equal(nobody.hello.status, 401, 'an unknown user gets a challenge like any other');
  t.equal(nobody.first.status, 401, 'and a server-first message');
  t.equal(nobody.final.status, 403, 'and is refused at the end');

  const noAuth = await h4Call(r.base, 'about');
  t.equal(noAuth.status, 401, 'no Authorization: 401');
  t.match(readZinc(noAuth.text).meta.get('dis'), /HELLO/, 'the error grid says how to log in');
  const badToken = await h4Call(r.base, 'about', { token: 'nope' });
  t.equal(badToken.status, 401, 'an unknown authToken: 401');
  const oauth = await h4Call(r.base, 'about', { headers: { authorization: `Bearer ${r.token}` } });
  t.equal(oauth.status, 401, 'the WideSky Bearer scheme is not taken at /haystack/ (Haystack 4 says BEARER authToken=)');
  const wideskyWithH4 = await postGrid(r.base, 'read', gridOf({ filter: 'site' }), { headers: { authorization: `BEARER authToken=${s.authToken ?? ''}` } });
  t.equal(wideskyWithH4.status, 401, '/api/ keeps its own scheme');
});

t.test('a user with a password set before SCRAM gets a verifier at the next WideSky login; lockout applies', async (t) => {
  const { r } = await world(t);
  const role = r.app.model.query('role')[0]?.get('id') as HRef;
  await r.app.auth.addUser('old@example.com', 'old-password-1', role.id);
  const uid = r.app.auth.userIdByName('old@example.com') as string;
  await r.app.store.auth.del(`scram:${uid}`);
  t.equal((await h4Login(r.base, 'old@example.com', 'old-password-1')).final.status, 403, 'no verifier: refused');
  t.equal((await r.login('old@example.com', 'old-password-1')).status, 200, 'a WideSky login');
  t.equal((await h4Login(r.base, 'old@example.com', 'old-password-1')).final.status, 200, 'then the Haystack 4 login works');
  // Five failures for one user at one address lock it (auth.ts LOCK_THRESHOLDS).
  for (let i = 0; i < 5; i++) await h4Login(r.base, 'old@example.com', 'wrong-password');
  const locked = await h4Login(r.base, 'old@example.com', 'old-password-1');
  t.equal(locked.hello.status, 429, 'locked out: 429 at HELLO');
  t.ok(locked.hello.headers.get('retry-after'), 'with Retry-After');
  t.equal((await r.login('old@example.com', 'old-password-1')).status, 429, 'the same lockout as WideSky logins');
});

t.test('the path of Haxall\'s Haystack connector, Zinc posts without Accept', async (t) => {
  const { r, clock, token, ids } = await world(t);
  const about = zincOf(t, await h4Call(r.base, 'about', { token }), 'about');
  t.equal(about.rows[0]?.get('productName'), 'Hayloft');

  const ops = zincOf(t, await h4Call(r.base, 'ops', { token }), 'ops');
  t.same(ops.rows.map((x) => x.get('name')), ['about', 'ops', 'filetypes', 'defs', 'read', 'nav', 'watchSub', 'watchUnsub', 'watchPoll', 'pointWrite', 'hisRead', 'hisWrite', 'close']);

  // nav: sites, then the site's equips, then the equip's points.
  const sites = zincOf(t, await h4Call(r.base, 'nav', { token, body: zinc({ empty: null }) }), 'nav roots');
  t.same(sites.rows.map((x) => x.get('dis')), ['HQ']);
  const siteNav = sites.rows[0]?.get('navId') as HRef;
  t.equal(siteNav.id, ids.site, 'a site row has navId');
  const equips = zincOf(t, await h4Call(r.base, 'nav', { token, body: zinc({ navId: siteNav }) }), 'nav site');
  t.same(equips.rows.map((x) => x.get('dis')), ['AHU']);
  const points = zincOf(t, await h4Call(r.base, 'nav', { token, body: zinc({ navId: equips.rows[0]?.get('navId') }) }), 'nav equip');
  t.same(points.rows.map((x) => x.get('dis')).sort(), ['Setpoint', 'Temp']);
  const temp = points.rows.find((x) => x.get('dis') === 'Temp') as HDict;
  for (const tag of ['point', 'cur', 'his']) t.equal(temp.get(tag), MARKER, `a point row has ${tag}`);
  t.equal(temp.get('kind'), 'Number');
  t.equal(temp.get('navId'), undefined, 'points are leaves');
  t.equal((points.rows.find((x) => x.get('dis') === 'Setpoint') as HDict).get('writable'), MARKER, 'writable shows');
  const unknownNav = await h4Call(r.base, 'nav', { token, body: zinc({ navId: HRef.of('nope') }) });
  t.equal(unknownNav.status, 400, 'an unknown navId: 400');

  // History for the temp point: two samples (also its curVal, as a cur point no driver feeds).
  const hw = await h4Call(r.base, 'hisWrite', {
    token,
    body: zinc(
      [
        { ts: new HDateTime(Date.parse('2026-01-04T10:00:00Z'), NY), val: HNumber.of(70, '°F') },
        { ts: new HDateTime(Date.parse('2026-01-04T11:00:00Z'), NY), val: HNumber.of(71.5, '°F') },
      ],
      { id: HRef.of(ids.temp as string) },
    ),
  });
  zincOf(t, hw, 'hisWrite');

  // watchSub with curValSub: rows in request order (an unknown id keeps its place).
  const sub = zincOf(
    t,
    await h4Call(r.base, 'watchSub', { token, body: zinc([{ id: HRef.of(ids.sp as string) }, { id: HRef.of(ids.temp as string) }], { watchDis: 'SkySpark Conn: hayloft', lease: HNumber.of(60_000), curValSub: MARKER }) }),
    'watchSub',
  );
  const watchId = sub.meta.get('watchId') as string;
  t.type(watchId, 'string', 'a watchId');
  t.ok(sub.meta.get('lease') instanceof HNumber, 'the lease');
  t.same(sub.rows.map((x) => (x.get('id') as HRef).id), [ids.sp, ids.temp], 'rows in request order');
  t.same((sub.rows[1]?.get('curVal') as HNumber).val, 71.5, 'curVal of the temp point');
  t.same(sub.cols.map((c) => c.name).sort(), ['curErr', 'curStatus', 'curVal', 'id'].filter((n) => sub.cols.some((c) => c.name === n)).sort(), 'curValSub: only id and the cur tags');
  t.notOk(sub.rows.some((x) => x.has('dis')), 'curValSub: no whole records');
  const subFull = zincOf(t, await h4Call(r.base, 'watchSub', { token, body: zinc([{ id: HRef.of(ids.temp as string) }, { id: HRef.of('nope') }], { watchId }) }), 'watchSub without curValSub');
  t.equal(subFull.rows[0]?.get('dis'), 'Temp', 'whole records without curValSub');
  t.equal(subFull.rows[1]?.get('id'), undefined, 'an unknown id: an empty row in its place');

  // A change, then watchPoll (curValSub): only the changed point.
  const poll0 = zincOf(t, await h4Call(r.base, 'watchPoll', { token, body: zinc({ empty: null }, { watchId, curValSub: MARKER }) }), 'first poll');
  t.same(poll0.rows.length, 0, 'nothing changed yet');
  clock.advance(1000);
  const hw2 = await h4Call(r.base, 'hisWrite', { token, body: `ver:"2.0" id:@${ids.temp as string}\nts,val\n2026-01-05T07:00:00-05:00 New_York,72°F\n` });
  t.equal(hw2.status, 200, 'a Zinc ver 2.0 request reads');
  await r.app.points.settled();
  const poll1 = zincOf(t, await h4Call(r.base, 'watchPoll', { token, body: zinc({ empty: null }, { watchId, curValSub: MARKER }) }), 'second poll');
  t.same(poll1.rows.map((x) => [(x.get('id') as HRef).id, (x.get('curVal') as HNumber).val]), [[ids.temp, 72]], 'the changed point and its value');
  t.notOk(poll1.rows.some((x) => x.has('dis')), 'curValSub: only the cur tags');
  const refresh = zincOf(t, await h4Call(r.base, 'watchPoll', { token, body: zinc({ empty: null }, { watchId, refresh: MARKER }) }), 'refresh poll');
  t.equal(refresh.rows.length, 2, 'refresh: every point, as whole records');
  t.ok(refresh.rows.every((x) => x.has('dis')), 'whole records without curValSub');

  // pointWrite: level 8 with who and duration, then the array.
  const pw = await h4Call(r.base, 'pointWrite', { token, body: zinc({ id: HRef.of(ids.sp as string), level: HNumber.of(8), val: HNumber.of(68, '°F'), who: 'SkySpark', duration: HNumber.of(1, 'h') }) });
  const arr = zincOf(t, pw, 'pointWrite');
  const l8 = arr.rows.find((x) => (x.get('level') as HNumber).val === 8) as HDict;
  t.equal((l8.get('val') as HNumber).val, 68, 'level 8 holds the value');
  t.equal(l8.get('who'), 'SkySpark');
  t.ok(l8.has('expires'), 'timed');
  const pwBad = await h4Call(r.base, 'pointWrite', { token, body: zinc({ id: HRef.of(ids.sp as string), level: HNumber.of(8), val: 'hot' }) });
  t.equal(pwBad.status, 400, 'a Str for a Number point: 400');
  t.equal(readZinc(pwBad.text).meta.get('err'), MARKER, 'an error grid (err, dis) in Zinc');

  // hisRead of a DateTime range: answered in the range's zone, start inclusive, end exclusive.
  const his = zincOf(t, await h4Call(r.base, 'hisRead', { token, body: zinc({ id: HRef.of(ids.temp as string), range: '2026-01-04T00:00:00-05:00 New_York,2026-01-04T06:00:00-05:00 New_York' }) }), 'hisRead');
  t.same(his.rows.map((x) => (x.get('val') as HNumber).val), [70], 'the sample in the range');
  t.equal((his.meta.get('id') as HRef).id, ids.temp, 'meta id');
  t.ok(his.meta.has('hisStart') && his.meta.has('hisEnd'), 'hisStart, hisEnd');
  const batch = zincOf(t, await h4Call(r.base, 'hisRead', { token, body: zinc([{ id: HRef.of(ids.temp as string) }], { range: '2026-01-04' }) }), 'batch hisRead');
  t.same(batch.cols.map((c) => c.name), ['ts', 'v0'], 'batch: ts, v0');
  t.equal(batch.rows.length, 2, 'both samples of that day');
  const hisJson = await h4Call(r.base, 'hisRead', { token, accept: 'application/json', body: zinc({ id: HRef.of(ids.temp as string), range: '2026-01-04' }) });
  t.equal(hisJson.status, 200, 'hisRead in Hayson');
  t.same((JSON.parse(hisJson.text) as { rows: unknown[] }).rows, [
    { ts: { _kind: 'dateTime', val: '2026-01-04T05:00:00-05:00', tz: 'New_York' }, val: { _kind: 'number', val: 70, unit: '°F' } },
    { ts: { _kind: 'dateTime', val: '2026-01-04T06:00:00-05:00', tz: 'New_York' }, val: { _kind: 'number', val: 71.5, unit: '°F' } },
  ], 'Hayson history rows: dateTime with tz, number with unit');
  const hisGet = zincOf(t, await h4Call(r.base, 'hisRead', { token, query: `?id=@${ids.temp as string}&range=${encodeURIComponent('"2026-01-04"')}` }), 'hisRead by GET');
  t.equal(hisGet.rows.length, 2);

  // watchUnsub, then close: the token stops working.
  zincOf(t, await h4Call(r.base, 'watchUnsub', { token, body: zinc({ empty: null }, { watchId, close: MARKER }) }), 'watchUnsub close');
  zincOf(t, await h4Call(r.base, 'watchUnsub', { token, body: zinc({ empty: null }, { watchId, close: MARKER }) }), 'watchUnsub of a closed watch is no error');
  const gone = await h4Call(r.base, 'watchPoll', { token, body: zinc({ empty: null }, { watchId }) });
  t.equal(gone.status, 400, 'watchPoll of a closed watch: error grid');
  zincOf(t, await h4Call(r.base, 'close', { token, body: zinc({ empty: null }) }), 'close');
  t.equal((await h4Call(r.base, 'about', { token })).status, 401, 'after close the authToken is refused');
});

t.test('formats by Accept, errors, filetypes, defs, read; /api/ unchanged', async (t) => {
  const { r, token, ids } = await world(t);
  const hayson = await h4Call(r.base, 'read', { token, accept: 'application/json', body: JSON.stringify({ _kind: 'grid', meta: { ver: '3.0' }, cols: [{ name: 'id' }], rows: [{ id: { _kind: 'ref', val: ids.temp } }] }), contentType: 'application/json' });
  t.equal(hayson.status, 200, `Hayson in, Hayson out (${hayson.text.slice(0, 200)})`);
  t.match(hayson.headers.get('content-type'), /^application\/json/);
  const j = JSON.parse(hayson.text) as { _kind: string; rows: Record<string, unknown>[] };
  t.equal(j._kind, 'grid', 'a Hayson grid');
  t.same(j.rows[0]?.dis, 'Temp', 'a Str is a plain JSON string');
  t.same(j.rows[0]?.point, { _kind: 'marker' });
  const refereed = core.HGrid.make(JSON.parse(hayson.text) as never);
  t.equal(refereed.get(0)?.get('dis')?.toString(), 'Temp', 'haystack-core reads the Hayson');
  t.same(readHayson(hayson.text).rows[0]?.get('id'), HRef.of(ids.temp as string, 'temp'), 'and it reads back (the Ref\'s dis is the name)');

  const v3 = await h4Call(r.base, 'read', { token, accept: 'application/json; version=3', body: zinc({ id: HRef.of(ids.temp as string) }) });
  t.equal(readJsonGrid(v3.text).rows[0]?.get('dis'), 'Temp', 'JSON v3 where asked');
  t.match(v3.text, /"s:Temp"|"dis":"Temp"/, 'v3 text');
  t.match(v3.text, /"m:"/, 'v3 markers');
  const csv = await h4Call(r.base, 'read', { token, accept: 'text/csv', body: zinc({ filter: 'point' }) });
  t.match(csv.headers.get('content-type'), /^text\/csv/, 'CSV out');
  t.match(csv.text, /Temp/);
  const zinc3 = await h4Call(r.base, 'read', { token, body: `ver:"3.0"\nfilter,limit\n"point and his",10\n` });
  t.equal(readZinc(zinc3.text).rows.length, 1, 'a Zinc ver 3.0 request reads');
  const notAcceptable = await h4Call(r.base, 'about', { token, accept: 'image/png' });
  t.equal(notAcceptable.status, 406, '406 for a format not served');

  const unknownOp = await h4Call(r.base, 'nope', { token });
  t.equal(unknownOp.status, 404, 'an unknown op: 404');
  t.equal(readZinc(unknownOp.text).meta.get('err'), MARKER, 'an error grid in Zinc');
  const badFilter = await h4Call(r.base, 'read', { token, accept: 'application/json', body: zinc({ filter: 'point and (' }) });
  t.equal(badFilter.status, 400, 'a bad filter: 400');
  const err = JSON.parse(badFilter.text) as { meta: Record<string, unknown> };
  t.same(err.meta.err, { _kind: 'marker' }, 'a Hayson error grid: err marker');
  t.type(err.meta.dis, 'string', 'and dis');
  t.equal(err.meta.errCode, ErrorCodes.BAD_FILTER);

  const ft = zincOf(t, await h4Call(r.base, 'filetypes', { token }), 'filetypes');
  t.same(ft.rows.map((x) => x.get('mime')), ['text/zinc', 'application/json', 'text/csv']);
  const defs = zincOf(t, await h4Call(r.base, 'defs', { token }), 'defs');
  t.ok(defs.rows.some((x) => x.get('def') === 'op:nav'), 'defs lists the ops');

  // Impersonation as on /api/.
  const imp = await h4Call(r.base, 'about', { token, headers: { 'x-impersonate': 'nobody' } });
  t.equal(imp.status, 400, 'X-IMPERSONATE of no one: 400 as on /api/');

  // /api/ answers as before: JSON v3 by default, the WideSky about.
  const api = await fetch(`${r.base}/api/about`, { headers: r.auth });
  t.match(api.headers.get('content-type'), /^application\/json/);
  const apiAbout = readJsonGrid(await api.text());
  t.equal(apiAbout.rows[0]?.get('haystackVersion'), undefined, 'no haystackVersion at /api/');
  const apiOps = await postGrid(r.base, 'ops', gridOf({ empty: null }), { headers: r.auth });
  t.notOk((apiOps.grid as HGrid).rows.some((x) => x.get('name') === 'nav'), '/api/ops unchanged (no nav)');
});

t.test('an authToken expires with its session time', async (t) => {
  const { r, clock, token } = await world(t);
  t.equal((await h4Call(r.base, 'about', { token })).status, 200);
  clock.advance(ACCESS_TTL_MS + 1000);
  const a = await h4Call(r.base, 'about', { token });
  t.equal(a.status, 401, 'expired: 401');
  t.match(readZinc(a.text).meta.get('dis'), /expired/);
  t.equal((await h4Login(r.base, ADMIN.username, ADMIN.password)).final.status, 200, 'a new login works');
});
