/**
 * pointWrite and pointWriteAudit through HTTP, LevelDB underneath: the 17-level array, the
 * effective value in writeVal/writeLevel/writeStatus, timed overrides (a manual clock) ending by
 * themselves and across a restart, relinquish, values checked against kind, unit and limits,
 * POINT_WRITE with a filter and a highest level, impersonation, and the audit log.
 */
import t, { type Test } from 'tap';
import { HDateTime, type HDict, type HGrid, HNumber, HRef, type HVal, MARKER } from '../../src/haystack/values.js';
import { ManualClock } from '../../src/lib/clock.js';
import { ErrorCodes } from '../../src/lib/errors.js';
import { type Running, startApp } from '../helpers/app.js';
import { type Answer, expectError, expectOk, getGrid, gridOf, postGrid } from '../helpers/http.js';

type Tap = Test;
type Rows = Readonly<Record<string, HVal>> | readonly Readonly<Record<string, HVal>>[];

const T0 = Date.UTC(2024, 0, 15, 9, 0, 0);
const MIN = 60_000;

const ok = expectOk;
const failed = expectError;

function client(r: Running, token: string, impersonate?: string) {
  const headers = { authorization: `Bearer ${token}`, ...(impersonate === undefined ? {} : { 'x-impersonate': impersonate }) };
  return {
    post: (op: string, rows: Rows) => postGrid(r.base, op, gridOf(rows), { headers }),
    get: (op: string, params: Readonly<Record<string, HVal>>) => getGrid(r.base, op, params, { headers }),
    write: (id: string, level: number, val: HVal | null, extra: Record<string, HVal> = {}) =>
      postGrid(r.base, 'pointWrite', gridOf({ id: HRef.of(id), level: HNumber.of(level), ...(val === null ? {} : { val }), ...extra }), { headers }),
    array: (id: string) => postGrid(r.base, 'pointWrite', gridOf({ id: HRef.of(id) }), { headers }),
  };
}

/** The set levels of an array answer: level -> [val as text, who, expires]. */
function levels(g: HGrid): Record<number, [string, string, number | null]> {
  const out: Record<number, [string, string, number | null]> = {};
  for (const row of g.rows) {
    const v = row.get('val');
    if (v === undefined) continue;
    const e = row.get('expires');
    out[(row.get('level') as HNumber).val] = [v instanceof HNumber ? `${v.numText()}${v.unit ?? ''}` : String(v), String(row.get('who')), e instanceof HDateTime ? e.epochMs : null];
  }
  return out;
}

async function seed(t: Tap, r: Running): Promise<void> {
  const admin = client(r, r.token);
  ok(
    t,
    await admin.post('createRec', [
      { id: HRef.of('s1'), site: MARKER, name: 'hq', tz: 'UTC' },
      { id: HRef.of('north'), site: MARKER, name: 'north', tz: 'UTC' },
      { id: HRef.of('sp'), point: MARKER, writable: MARKER, kind: 'Number', unit: '°C', minVal: HNumber.of(10, '°C'), maxVal: HNumber.of(30, '°C'), name: 'sp', siteRef: HRef.of('s1') },
      { id: HRef.of('fan'), point: MARKER, writable: MARKER, kind: 'Bool', name: 'fan', siteRef: HRef.of('s1') },
      { id: HRef.of('mode'), point: MARKER, writable: MARKER, kind: 'Str', enum: 'off,heat,cool', name: 'mode', siteRef: HRef.of('s1') },
      { id: HRef.of('plain'), point: MARKER, writable: MARKER, kind: 'Number', name: 'plain', siteRef: HRef.of('s1') },
      { id: HRef.of('ro'), point: MARKER, kind: 'Number', name: 'ro', siteRef: HRef.of('s1') },
      { id: HRef.of('nsp'), point: MARKER, writable: MARKER, kind: 'Number', name: 'nsp', siteRef: HRef.of('north') },
      // A technician: every level from 8 on, of hq's points only; a viewer: reads only.
      { id: HRef.of('p-read'), actionPolicy: MARKER, name: 'p-read', permissions: ['MODEL_READ'] },
      { id: HRef.of('p-tech'), actionPolicy: MARKER, name: 'p-tech', permissions: ['POINT_WRITE'], filter: 'siteRef==@s1', pointWriteLevel: HNumber.of(8) },
      { id: HRef.of('p-bad'), actionPolicy: MARKER, name: 'p-bad', permissions: ['POINT_WRITE'], pointWriteLevel: HNumber.of(0) },
      { id: HRef.of('r-tech'), role: MARKER, name: 'tech', actionPolicyRefs: [HRef.of('p-read'), HRef.of('p-tech')] },
      { id: HRef.of('r-viewer'), role: MARKER, name: 'viewer', actionPolicyRefs: [HRef.of('p-read'), HRef.of('p-bad')] },
    ]),
    'points, policies and roles',
  );
}

async function world(t: Tap): Promise<{ r: Running; clock: ManualClock; admin: ReturnType<typeof client> }> {
  const clock = new ManualClock(T0);
  const r = await startApp(t, { clock });
  await seed(t, r);
  return { r, clock, admin: client(r, r.token) };
}

t.test('the array: 17 levels, effective value, override, timed override, relinquish, restart', async (t) => {
  const { r, clock, admin } = await world(t);
  const empty = ok(t, await admin.array('sp'), 'read the array');
  t.same(empty.colNames(), ['level', 'levelDis', 'val', 'who', 'expires']);
  t.equal(empty.size, 17, '17 rows');
  t.same(empty.rows.map((x) => (x.get('level') as HNumber).val), [...Array(17).keys()].map((i) => i + 1));
  t.same([1, 8, 16, 17].map((l) => empty.rows[l - 1]?.get('levelDis')), ['1 (emergency)', '8 (manual)', '16', '17 (default)']);
  t.same(levels(empty), {}, 'nothing set');
  const sp = (): HDict => r.app.model.get('sp') as HDict;
  t.same(sp().get('writeLevel'), HNumber.of(17), 'writeLevel 17 with nothing set');
  t.equal(sp().get('writeVal'), undefined, 'no writeVal');
  t.equal(sp().get('writeStatus'), 'ok');

  // WideSky and Haystack 3 clients write the default level, who as given.
  ok(t, await admin.write('sp', 17, HNumber.of(21, '°C'), { who: 'widesky' }), 'level 17');
  ok(t, await admin.write('sp', 16, HNumber.of(20)), 'level 16, no unit: the point\'s');
  const a1 = ok(t, await admin.write('sp', 8, HNumber.of(71.6, '°F'), { who: 'tech on site', duration: HNumber.of(30, 'min') }), 'timed override in °F');
  t.same(levels(a1), { 8: ['22°C', 'tech on site', T0 + 30 * MIN], 16: ['20°C', 'admin@example.com', null], 17: ['21°C', 'widesky', null] }, 'the write answers the array: °F converted to the point\'s °C, who defaults to the user');
  t.same(sp().get('writeVal'), HNumber.of(22, '°C'), 'the effective value is level 8');
  t.same(sp().get('writeLevel'), HNumber.of(8));
  t.equal(r.app.model.stored('sp')?.get('writeVal'), undefined, 'write tags are live, not stored in the record');

  // The override ends by itself.
  clock.advance(29 * MIN);
  t.same(levels(ok(t, await admin.array('sp'), 'read'))[8]?.[0], '22°C', 'still there a minute before its end');
  clock.advance(MIN);
  const after = ok(t, await admin.array('sp'), 'read after the end');
  t.equal(levels(after)[8], undefined, 'level 8 relinquished at its end');
  t.same(sp().get('writeVal'), HNumber.of(20, '°C'), 'effective: level 16 again');
  t.same(sp().get('writeLevel'), HNumber.of(16));

  // Relinquish: val absent or null.
  ok(t, await admin.write('sp', 16, null), 'relinquish 16');
  t.same(sp().get('writeLevel'), HNumber.of(17));
  t.same(sp().get('writeVal'), HNumber.of(21, '°C'), 'the default');

  // Levels survive a restart; a timed one that ends while stopped is gone after it.
  ok(t, await admin.write('sp', 8, HNumber.of(25), { duration: HNumber.of(1, 'h') }), 'a timed override');
  ok(t, await admin.write('fan', 1, true, { who: 'fire system' }), 'emergency level of another point');
  ok(t, await admin.write('mode', 10, 'heat'), 'a Str');
  await r.restart();
  const back = client(r, r.token);
  t.same(levels(ok(t, await back.array('sp'), 'after restart')), { 8: ['25°C', 'admin@example.com', T0 + 30 * MIN + 60 * MIN], 17: ['21°C', 'widesky', null] }, 'every level back, the timed one with its end');
  t.same(levels(ok(t, await back.array('fan'), 'fan')), { 1: ['true', 'fire system', null] });
  t.same(r.app.model.get('fan')?.get('writeVal'), true, 'writeVal shown at start');
  t.same(r.app.model.get('sp')?.get('writeLevel'), HNumber.of(8));
  clock.advance(2 * 3600_000);
  await r.restart();
  t.same(levels(ok(t, await client(r, r.token).array('sp'), 'after a restart past its end')), { 17: ['21°C', 'widesky', null] }, 'the timed override ended while stopped');
  t.same(r.app.model.get('sp')?.get('writeLevel'), HNumber.of(17), 'and the point shows the default at once');

  // A deleted point takes its array with it.
  ok(t, await client(r, r.token).post('deleteRec', { id: HRef.of('mode') }), 'delete a written point');
  ok(t, await client(r, r.token).post('createRec', { id: HRef.of('mode'), point: MARKER, writable: MARKER, kind: 'Str', name: 'mode', siteRef: HRef.of('s1') }), 'created again');
  t.same(levels(ok(t, await client(r, r.token).array('mode'), 'array')), {}, 'with an empty array');
});

t.test('GET reads the array; writes need POST', async (t) => {
  const { admin } = await world(t);
  ok(t, await admin.write('fan', 17, false), 'write');
  const g = ok(t, await admin.get('pointWrite', { id: HRef.of('hq.fan') }), 'GET by fully qualified name');
  t.same(levels(g), { 17: ['false', 'admin@example.com', null] });
  failed(t, await admin.get('pointWrite', { id: HRef.of('fan'), level: HNumber.of(17), val: true }), 405, ErrorCodes.METHOD_NOT_ALLOWED, /POST/);
});

t.test('bad writes are refused with a code and change nothing', async (t) => {
  const { r, admin } = await world(t);
  ok(t, await admin.write('sp', 17, HNumber.of(21)), 'a first value');
  const cases: [string, Answer, string, RegExp][] = [
    ['unknown point', await admin.write('nope', 17, HNumber.of(1)), ErrorCodes.NOT_FOUND, /no record @nope/],
    ['not writable', await admin.write('ro', 17, HNumber.of(1)), ErrorCodes.NOT_WRITABLE, /^hq\.ro is not a writable point/],
    ['level 0', await admin.write('sp', 0, HNumber.of(20)), ErrorCodes.BAD_REQUEST, /level must be a whole Number from 1 to 17/],
    ['level 18', await admin.write('sp', 18, HNumber.of(20)), ErrorCodes.BAD_REQUEST, /from 1 to 17/],
    ['level 8.5', await admin.write('sp', 8.5, HNumber.of(20)), ErrorCodes.BAD_REQUEST, /whole Number/],
    ['duration not at 8', await admin.write('sp', 9, HNumber.of(20), { duration: HNumber.of(5, 'min') }), ErrorCodes.BAD_REQUEST, /level 8 \(manual\) only/],
    ['duration without a unit', await admin.write('sp', 8, HNumber.of(20), { duration: HNumber.of(5) }), ErrorCodes.BAD_REQUEST, /duration/],
    ['duration to relinquish', await admin.write('sp', 8, null, { duration: HNumber.of(5, 'min') }), ErrorCodes.BAD_REQUEST, /relinquishing/],
    ['Str to a Number point', await admin.write('sp', 17, 'warm'), ErrorCodes.BAD_VALUE, /Number point.*Str/],
    ['Number to a Bool point', await admin.write('fan', 17, HNumber.of(1)), ErrorCodes.BAD_VALUE, /^hq\.fan is a Bool point/],
    ['Str outside the enum', await admin.write('mode', 17, 'dry'), ErrorCodes.BAD_VALUE, /enum.*off, heat, cool/],
    ['unit of another quantity', await admin.write('sp', 17, HNumber.of(20, 'kPa')), ErrorCodes.BAD_VALUE, /cannot write 20kPa.*temperature/],
    ['unknown unit', await admin.write('sp', 17, HNumber.of(20, 'furlongs')), ErrorCodes.BAD_VALUE, /not a Haystack unit/],
    ['a unit to a point without one', await admin.write('plain', 17, HNumber.of(20, '%')), ErrorCodes.BAD_VALUE, /no unit/],
    ['below minVal', await admin.write('sp', 17, HNumber.of(9.5)), ErrorCodes.OUT_OF_RANGE, /^9\.5°C is below the minVal of hq\.sp \(10°C\)$/],
    ['above maxVal after conversion', await admin.write('sp', 17, HNumber.of(90, '°F')), ErrorCodes.OUT_OF_RANGE, /above the maxVal/],
    ['who not a Str', await admin.write('sp', 17, HNumber.of(20), { who: HNumber.of(1) }), ErrorCodes.BAD_REQUEST, /who must be a Str/],
    ['id not a Ref', await admin.post('pointWrite', { id: 'sp', level: HNumber.of(17), val: HNumber.of(20) }), ErrorCodes.BAD_REQUEST, /Ref/],
    ['two rows', await admin.post('pointWrite', [{ id: HRef.of('sp') }, { id: HRef.of('fan') }]), ErrorCodes.BAD_REQUEST, /one row/],
  ];
  for (const [what, a, code, dis] of cases) failed(t, a, 400, code, dis, what);
  t.same(levels(ok(t, await admin.array('sp'), 'array')), { 17: ['21°C', 'admin@example.com', null] }, 'nothing changed');
  t.same(r.app.model.get('sp')?.get('writeVal'), HNumber.of(21, '°C'));
  t.same(levels(ok(t, await admin.array('fan'), 'fan')), {});
  // Writes via createRec/updateRec of the live tags are refused.
  failed(t, await admin.post('updateRec', { id: HRef.of('sp'), writeVal: HNumber.of(5) }), 400, ErrorCodes.LIVE_TAG, /pointWrite/, 'updateRec writeVal');
});

t.test('POINT_WRITE: filter scope, highest level, impersonation, audit', async (t) => {
  const { r, admin } = await world(t);
  const techId = await r.app.auth.addUser('tech@example.com', 'tech-password-123', 'tech');
  await r.app.auth.addUser('viewer@example.com', 'viewer-password-123', 'viewer');
  const tokenOf = async (u: string, p: string): Promise<string> => (await r.login(u, p)).body.access_token as string;
  const tech = client(r, await tokenOf('tech@example.com', 'tech-password-123'));
  const viewer = client(r, await tokenOf('viewer@example.com', 'viewer-password-123'));
  const asTech = client(r, r.token, techId);

  ok(t, await tech.write('sp', 8, HNumber.of(23), { duration: HNumber.of(10, 'min') }), 'the technician writes level 8');
  ok(t, await tech.write('sp', 17, HNumber.of(20)), 'and 17');
  failed(t, await tech.write('sp', 1, HNumber.of(23)), 403, ErrorCodes.FORBIDDEN, /levels 8 to 17 of this point, not level 1/, 'not level 1');
  failed(t, await tech.write('nsp', 17, HNumber.of(1)), 403, ErrorCodes.FORBIDDEN, /needs POINT_WRITE/, 'not a point outside the policy filter');
  failed(t, await viewer.write('sp', 16, HNumber.of(1)), 403, ErrorCodes.FORBIDDEN, /needs POINT_WRITE/, 'a policy with a bad pointWriteLevel grants nothing');
  ok(t, await viewer.array('sp'), 'but reading the array needs MODEL_READ only');
  failed(t, await asTech.write('sp', 2, HNumber.of(24)), 403, ErrorCodes.FORBIDDEN, /not level 2/, 'the admin impersonating the technician has the technician\'s rights');
  ok(t, await asTech.write('sp', 9, HNumber.of(24)), 'level 9 as the technician');
  t.same(levels(ok(t, await admin.array('sp'), 'array')), {
    8: ['23°C', 'tech@example.com', T0 + 10 * MIN],
    9: ['24°C', 'tech@example.com', null],
    17: ['20°C', 'tech@example.com', null],
  }, 'only the allowed writes landed');

  failed(t, await viewer.post('pointWriteAudit', {}), 403, ErrorCodes.FORBIDDEN, /POINT_WRITE/, 'the audit needs POINT_WRITE');
  const audit = ok(t, await admin.post('pointWriteAudit', { id: HRef.of('sp'), limit: HNumber.of(10) }), 'audit of sp');
  const rows = audit.rows.map((x) => ({
    user: x.get('user'),
    by: x.get('impersonatedBy') ?? null,
    level: (x.get('level') as HNumber | undefined)?.val,
    val: (x.get('val') as HNumber | undefined)?.val ?? null,
    duration: (x.get('duration') as HNumber | undefined)?.val ?? null,
    result: x.get('result'),
  }));
  t.same(rows, [
    { user: 'tech@example.com', by: 'admin@example.com', level: 9, val: 24, duration: null, result: 'ok' },
    { user: 'tech@example.com', by: 'admin@example.com', level: 2, val: 24, duration: null, result: 'HL_FORBIDDEN' },
    { user: 'viewer@example.com', by: null, level: 16, val: 1, duration: null, result: 'HL_FORBIDDEN' },
    { user: 'tech@example.com', by: null, level: 1, val: 23, duration: null, result: 'HL_FORBIDDEN' },
    { user: 'tech@example.com', by: null, level: 17, val: 20, duration: null, result: 'ok' },
    { user: 'tech@example.com', by: null, level: 8, val: 23, duration: 600, result: 'ok' },
  ], 'newest first: who, impersonated by, level, value, duration, result');
  t.ok(audit.rows.every((x) => x.get('ts') instanceof HDateTime && x.get('id') instanceof HRef), 'with time and point');
  t.match(audit.rows[1]?.get('err'), /not level 2/, 'a refusal says why');
  const limited = ok(t, await admin.post('pointWriteAudit', { limit: HNumber.of(2) }), 'limit 2');
  t.equal(limited.size, 2);
  const logged = r.logs.filter((l) => l.includes('"point write'));
  t.ok(logged.some((l) => l.includes('"msg":"point write"') && l.includes('tech@example.com')), 'writes are logged');
  t.ok(logged.some((l) => l.includes('point write refused') && l.includes('HL_FORBIDDEN')), 'refusals too');
  // The technician reads the audit of what it may read (hq's points).
  const techAudit = ok(t, await tech.post('pointWriteAudit', {}), 'the technician reads the audit');
  t.ok(techAudit.size >= 6, 'its entries');
});
