/**
 * Alarms end to end (issue 30, docs/alarms.md): conditions as records (refused when not valid),
 * limits with deadband and delay, Bool state, point status lasting past a delay, a connector
 * down; the alarm life (active, normal, acknowledged, shelved) through HTTP with LevelDB
 * underneath; a restart with alarms active (nothing raised twice, acknowledgements kept);
 * ALARM_ACK and ALARM_SHELVE through the gate; alarmStatus pushed to watches; /metrics.
 * Readings reach the alarms as the poller's do: point state sets live tags, the model emits
 * live.changed and the engine hears it.
 */
import t, { type Test } from 'tap';
import type { HDateTime} from '../../src/haystack/values.js';
import { type HDict, type HGrid, HNumber, HRef, type HVal, MARKER } from '../../src/haystack/values.js';
import { ManualClock } from '../../src/lib/clock.js';
import { ErrorCodes } from '../../src/lib/errors.js';
import { type Running, startApp } from '../helpers/app.js';
import { expectError, expectOk, getGrid, gridOf, postGrid } from '../helpers/http.js';

type Rows = Readonly<Record<string, HVal>> | readonly Readonly<Record<string, HVal>>[];

const T0 = Date.UTC(2024, 0, 15, 9, 0, 0);
const MIN = 60_000;

function client(r: Running, token: string) {
  const headers = { authorization: `Bearer ${token}` };
  return {
    post: (op: string, rows: Rows, meta: Readonly<Record<string, HVal>> = {}) => postGrid(r.base, op, gridOf(rows, meta), { headers }),
    get: (op: string, params: Readonly<Record<string, HVal>> = {}) => getGrid(r.base, op, params, { headers }),
  };
}

async function world(t: Test): Promise<{ r: Running; clock: ManualClock; admin: ReturnType<typeof client> }> {
  const clock = new ManualClock(T0);
  const r = await startApp(t, { clock });
  const admin = client(r, r.token);
  expectOk(
    t,
    await admin.post('createRec', [
      { id: HRef.of('s1'), site: MARKER, name: 'hq', tz: 'UTC' },
      { id: HRef.of('s2'), site: MARKER, name: 'north', tz: 'UTC' },
      { id: HRef.of('zat'), point: MARKER, cur: MARKER, kind: 'Number', unit: '°C', name: 'zat', siteRef: HRef.of('s1') },
      { id: HRef.of('fan'), point: MARKER, cur: MARKER, kind: 'Bool', name: 'fan', siteRef: HRef.of('s1') },
      { id: HRef.of('p1'), point: MARKER, cur: MARKER, kind: 'Number', name: 'p1', siteRef: HRef.of('s1') },
      { id: HRef.of('p2'), point: MARKER, cur: MARKER, kind: 'Number', name: 'p2', siteRef: HRef.of('s1') },
      { id: HRef.of('np'), point: MARKER, cur: MARKER, kind: 'Number', name: 'np', siteRef: HRef.of('s2') },
      { id: HRef.of('c1'), conn: MARKER, name: 'c1' },
      { id: HRef.of('p-read'), actionPolicy: MARKER, name: 'p-read', permissions: ['MODEL_READ'] },
      { id: HRef.of('p-ack'), actionPolicy: MARKER, name: 'p-ack', permissions: ['ALARM_ACK'], filter: 'siteRef==@s1' },
      { id: HRef.of('r-op'), role: MARKER, name: 'operator', actionPolicyRefs: [HRef.of('p-read'), HRef.of('p-ack')] },
      { id: HRef.of('r-viewer'), role: MARKER, name: 'viewer', actionPolicyRefs: [HRef.of('p-read')] },
    ]),
    'site, points, a connector, roles',
  );
  return { r, clock, admin };
}

/** The open alarms as `alarmId -> status`. */
function statuses(g: HGrid): Record<string, string> {
  return Object.fromEntries(g.rows.map((x) => [x.get('alarmId') as string, x.get('status') as string]));
}

function events(g: HGrid): string[] {
  return g.rows.map((x) => `${x.get('event') as string} ${(x.get('sourceRef') as HRef).id}${x.get('user') === undefined ? '' : ` by ${x.get('user') as string}`}`);
}

const num = (v: number, unit?: string): HNumber => HNumber.of(v, unit);

t.test('a limit with deadband and delay: active, back to normal, acknowledged, closed', async (t) => {
  const { r, clock, admin } = await world(t);
  expectOk(t, await admin.post('createRec', { id: HRef.of('hot'), alarmCond: MARKER, name: 'hot', dis: 'Zone too hot or cold', alarmOn: 'limit', pointRef: HRef.of('zat'), hiLimit: num(26, '°C'), loLimit: num(60.8, '°F'), deadband: num(1, '°C'), delay: num(5, 'min'), priority: num(20) }), 'a limit condition');
  // The engine hears a reading in a microtask after it is set, as on the poll path.
  const set = async (v: number): Promise<void> => {
    r.app.points.setCur('zat', { curVal: num(v, '°C'), curStatus: 'ok' });
    await r.app.alarms.settled();
  };
  const open = async (): Promise<Record<string, string>> => statuses(expectOk(t, await admin.get('alarms'), 'alarms'));

  await set(27);
  await r.app.alarms.tick();
  t.same(await open(), {}, 'over the limit, but not yet for its delay');
  clock.advance(4 * MIN);
  await r.app.alarms.tick();
  t.same(await open(), {}, 'four minutes: still not');
  await set(25.5);
  clock.advance(2 * MIN);
  await r.app.alarms.tick();
  t.same(await open(), {}, 'a dip inside the limit starts the delay again');
  await set(27.5);
  clock.advance(4 * MIN);
  await r.app.alarms.tick();
  t.same(await open(), {}, 'four minutes after it went over again');
  clock.advance(MIN);
  await r.app.alarms.tick();
  const g = expectOk(t, await admin.get('alarms'), 'alarms');
  t.same(statuses(g), { 'hot|zat': 'active' }, 'raised after five minutes over the limit');
  const a = g.rows[0] as HDict;
  t.equal(a.get('detail'), 'high');
  t.same(a.get('val'), num(27.5, '°C'));
  t.same(a.get('priority'), num(20));
  t.equal(a.get('dis'), 'Zone too hot or cold');
  t.equal((a.get('activeAt') as HDateTime).epochMs, clock.now(), 'dated when raised');
  t.equal(r.app.model.get('zat')?.get('alarmStatus'), 'active', 'the point shows it');
  t.same(r.app.model.get('hot')?.get('alarmActive'), num(1), 'the condition counts it');

  await set(25.5);
  t.same(await open(), { 'hot|zat': 'active' }, 'inside the limit but not by the deadband: still active');
  await set(24.9);
  t.same(await open(), { 'hot|zat': 'unacked' }, 'inside by the deadband: back to normal, not acknowledged');
  t.equal(r.app.model.get('hot')?.get('alarmActive'), undefined, 'no active alarm on the condition');

  expectOk(t, await admin.post('alarmAck', { alarmId: 'hot|zat', note: 'door was open' }), 'acknowledged');
  t.same(await open(), {}, 'normal and acknowledged: closed');
  t.equal(r.app.model.get('zat')?.get('alarmStatus'), undefined, 'the point shows no alarm');

  // The low limit, given in °F, against a point in °C (60.8 °F = 16 °C).
  await set(15.5);
  clock.advance(5 * MIN);
  await r.app.alarms.tick();
  await r.app.alarms.tick();
  const low = expectOk(t, await admin.get('alarms'), 'alarms');
  t.equal(low.rows[0]?.get('detail'), 'low', 'under the low limit, converted to the point\'s unit');

  const h = expectOk(t, await admin.get('alarmHistory', { alarmId: 'hot|zat' }), 'history');
  t.same(events(h), ['active zat', 'ack zat by admin@example.com', 'normal zat', 'active zat'], 'every transition, newest first');
  t.equal(h.rows[1]?.get('note'), 'door was open', 'with the note');
});

t.test('a Bool state, a point status past a delay (by filter), a connector down; alarmStatus pushed to a watch', async (t) => {
  const { r, clock, admin } = await world(t);
  expectOk(
    t,
    await admin.post('createRec', [
      { id: HRef.of('fanOn'), alarmCond: MARKER, name: 'fanOn', alarmOn: 'state', pointRef: HRef.of('fan'), alarmVal: true },
      { id: HRef.of('dead'), alarmCond: MARKER, name: 'dead', alarmOn: 'status', filter: 'point and siteRef==@s1 and kind=="Number"', statuses: 'down,fault', delay: num(1, 'min') },
      { id: HRef.of('link'), alarmCond: MARKER, name: 'link', alarmOn: 'connDown', connRef: HRef.of('c1') },
    ]),
    'three conditions',
  );
  const watch = expectOk(t, await admin.post('watchSub', [{ id: HRef.of('p1') }], { watchDis: 'alarms', lease: num(1, 'h') }), 'watch p1');
  const watchId = watch.meta.get('watchId') as string;
  expectOk(t, await admin.post('watchPoll', [], { watchId }), 'first poll');

  r.app.points.setCur('fan', { curVal: true, curStatus: 'ok' });
  r.app.points.setCur('p1', { curStatus: 'down', curErr: 'no answer' });
  r.app.points.setCur('p2', { curStatus: 'fault', curErr: 'bad register' });
  r.app.points.setCur('np', { curStatus: 'down' });
  r.app.points.connStatus('c1', 'down', 'timeout');
  await r.app.alarms.settled();
  t.same(statuses(expectOk(t, await admin.get('alarms'), 'alarms')), { 'fanOn|fan': 'active', 'link|c1': 'active' }, 'state and connector at once; statuses wait for their delay');
  clock.advance(MIN);
  await r.app.alarms.tick();
  const all = statuses(expectOk(t, await admin.get('alarms'), 'alarms'));
  t.same(all, { 'fanOn|fan': 'active', 'link|c1': 'active', 'dead|p1': 'active', 'dead|p2': 'active' }, 'down and fault past the delay; np is outside the filter');
  const polled = expectOk(t, await admin.post('watchPoll', [], { watchId }), 'poll');
  t.equal(polled.rows.find((x) => (x.get('id') as HRef).id === 'p1')?.get('alarmStatus'), 'active', 'the watch reports the point\'s alarm');

  const only = statuses(expectOk(t, await admin.get('alarms', { filter: 'kind=="Number"' }), 'filtered'));
  t.same(Object.keys(only).sort(), ['dead|p1', 'dead|p2'], 'a filter over the alarms\' sources');

  r.app.points.setCur('fan', { curVal: false, curStatus: 'ok' });
  r.app.points.connStatus('c1', 'ok', null);
  r.app.points.setCur('p1', { curVal: num(1), curStatus: 'ok', curErr: null });
  await r.app.alarms.settled();
  t.same(statuses(expectOk(t, await admin.get('alarms', { status: 'unacked' }), 'unacked')), { 'fanOn|fan': 'unacked', 'link|c1': 'unacked', 'dead|p1': 'unacked' }, 'back to normal, waiting for acknowledgement');
  const again = expectOk(t, await admin.post('watchPoll', [], { watchId }), 'poll');
  t.equal(again.rows.find((x) => (x.get('id') as HRef).id === 'p1')?.get('alarmStatus'), 'unacked', 'the watch hears that too');

  // Deleting a condition closes its alarms.
  expectOk(t, await admin.post('deleteRec', { id: HRef.of('dead') }), 'delete the status condition');
  t.same(statuses(expectOk(t, await admin.get('alarms'), 'alarms')), { 'fanOn|fan': 'unacked', 'link|c1': 'unacked' }, 'its alarms closed');
  const h = expectOk(t, await admin.get('alarmHistory', { condRef: HRef.of('dead') }), 'history');
  t.same(events(h).slice(0, 2).sort(), ['removed p1', 'removed p2']);
});

t.test('a restart with alarms active: acknowledgements kept, nothing raised twice', async (t) => {
  const { r, admin } = await world(t);
  expectOk(t, await admin.post('createRec', { id: HRef.of('hi'), alarmCond: MARKER, name: 'hi', alarmOn: 'limit', filter: 'point and kind=="Number" and siteRef==@s1', hiLimit: num(10) }), 'condition');
  r.app.points.setCur('p1', { curVal: num(11), curStatus: 'ok' });
  r.app.points.setCur('p2', { curVal: num(12), curStatus: 'ok' });
  await r.app.alarms.settled();
  expectOk(t, await admin.post('alarmAck', { condRef: HRef.of('hi'), sourceRef: HRef.of('hq.p2'), note: 'known' }), 'acknowledge p2 (by name)');
  const before = expectOk(t, await admin.get('alarms'), 'before');
  t.same(statuses(before), { 'hi|p1': 'active', 'hi|p2': 'acked' });

  await r.restart();
  const back = client(r, r.token);
  const after = expectOk(t, await back.get('alarms'), 'after the restart');
  t.same(statuses(after), { 'hi|p1': 'active', 'hi|p2': 'acked' }, 'the same alarms');
  const p2 = after.rows.find((x) => x.get('alarmId') === 'hi|p2') as HDict;
  t.equal(p2.get('ackBy'), 'admin@example.com');
  t.equal(p2.get('ackNote'), 'known');
  t.equal(r.app.model.get('p1')?.get('alarmStatus'), 'active', 'shown at start');
  // The poller reads the same values again after the restart.
  r.app.points.setCur('p1', { curVal: num(11), curStatus: 'ok' });
  r.app.points.setCur('p2', { curVal: num(13), curStatus: 'ok' });
  await r.app.alarms.tick();
  const h = expectOk(t, await back.get('alarmHistory'), 'history');
  t.same(events(h), ['ack p2 by admin@example.com', 'active p2', 'active p1'], 'not raised a second time');
  r.app.points.setCur('p2', { curVal: num(5), curStatus: 'ok' });
  await r.app.alarms.settled();
  t.same(statuses(expectOk(t, await back.get('alarms'), 'alarms')), { 'hi|p1': 'active' }, 'acknowledged and normal: closed');
});

t.test('acknowledging and shelving: permissions, errors, shelving ends by itself', async (t) => {
  const { r, clock, admin } = await world(t);
  expectOk(t, await admin.post('createRec', { id: HRef.of('hi'), alarmCond: MARKER, name: 'hi', alarmOn: 'limit', filter: 'point and kind=="Number"', hiLimit: num(10) }), 'condition');
  for (const id of ['p1', 'p2', 'np']) r.app.points.setCur(id, { curVal: num(20), curStatus: 'ok' });
  await r.app.alarms.settled();
  await r.app.auth.addUser('op@example.com', 'operator-password-1', 'operator');
  await r.app.auth.addUser('viewer@example.com', 'viewer-password-1', 'viewer');
  const tokenOf = async (u: string, p: string): Promise<string> => (await r.login(u, p)).body.access_token as string;
  const op = client(r, await tokenOf('op@example.com', 'operator-password-1'));
  const viewer = client(r, await tokenOf('viewer@example.com', 'viewer-password-1'));

  t.equal(expectOk(t, await viewer.get('alarms'), 'a viewer lists').size, 3, 'a viewer sees the alarms');
  expectError(t, await viewer.post('alarmAck', { alarmId: 'hi|p1' }), 403, ErrorCodes.FORBIDDEN, /ALARM_ACK/, 'a viewer cannot acknowledge');
  expectError(t, await op.post('alarmAck', [{ alarmId: 'hi|p1' }, { alarmId: 'hi|np' }]), 403, ErrorCodes.FORBIDDEN, /ALARM_ACK/, 'not outside the policy\'s filter: all or none');
  expectError(t, await op.post('alarmAck', { alarmId: 'hi|nope' }), 400, ErrorCodes.NOT_FOUND, /no open alarm/, 'unknown alarm');
  expectError(t, await op.post('alarmAck', { alarmId: 'nope' }), 400, ErrorCodes.BAD_REQUEST, /alarmId/, 'malformed alarmId');
  expectError(t, await op.post('alarmAck', { alarmId: 'hi|p1', note: num(1) }), 400, ErrorCodes.BAD_REQUEST, /note/, 'note not a Str');
  expectError(t, await admin.get('alarms', { status: 'odd' }), 400, ErrorCodes.BAD_REQUEST, /status/, 'unknown status');
  expectError(t, await admin.get('alarms', { filter: 'point and' }), 400, ErrorCodes.BAD_FILTER, undefined, 'bad filter');
  t.same(statuses(expectOk(t, await admin.get('alarms'), 'alarms')), { 'hi|p1': 'active', 'hi|p2': 'active', 'hi|np': 'active' }, 'nothing acknowledged by the refusals');
  const acked = expectOk(t, await op.post('alarmAck', [{ alarmId: 'hi|p1' }, { alarmId: 'hi|p2', note: 'seen' }]), 'the operator acknowledges hq\'s');
  t.same(acked.rows.map((x) => x.get('ackBy')), ['op@example.com', 'op@example.com']);

  expectError(t, await op.post('alarmShelve', { alarmId: 'hi|np', duration: num(1, 'h') }), 403, ErrorCodes.FORBIDDEN, /ALARM_SHELVE/, 'shelving needs ALARM_SHELVE');
  expectError(t, await admin.post('alarmShelve', { alarmId: 'hi|np' }), 400, ErrorCodes.BAD_REQUEST, /duration/, 'a shelving needs a duration');
  const sh = expectOk(t, await admin.post('alarmShelve', { alarmId: 'hi|np', duration: num(1, 'h'), note: 'sensor replaced tomorrow' }), 'shelve for an hour');
  t.equal((sh.rows[0]?.get('shelvedUntil') as HDateTime).epochMs, T0 + 60 * MIN);
  t.equal(r.app.model.get('np')?.get('alarmStatus'), 'shelved');
  clock.advance(60 * MIN);
  await r.app.alarms.tick();
  t.equal(r.app.model.get('np')?.get('alarmStatus'), 'active', 'the shelving ended by itself');
  expectOk(t, await admin.post('alarmShelve', { alarmId: 'hi|np', duration: num(1, 'h') }), 'shelve again');
  expectOk(t, await admin.post('alarmShelve', { alarmId: 'hi|np', unshelve: MARKER }), 'unshelve');
  t.equal(r.app.model.get('np')?.get('alarmStatus'), 'active');
  const h = expectOk(t, await admin.get('alarmHistory', { sourceRef: HRef.of('np'), limit: num(3) }), 'history');
  t.same(events(h), ['unshelve np by admin@example.com', 'shelve np by admin@example.com', 'unshelve np'], 'limit 3, newest first');

  const res = await fetch(`${r.base}/metrics`, { headers: { authorization: `Bearer ${r.token}` } });
  const text = await res.text();
  t.match(text, /hayloft_alarms\{status="active"\} 1\b/, 'metrics: one active');
  t.match(text, /hayloft_alarms\{status="acked"\} 2\b/, 'two acknowledged');
  t.match(text, /hayloft_alarm_transitions_total\{event="shelve"\} 2\b/);
});

t.test('conditions that are not valid are refused and nothing is stored', async (t) => {
  const { r, admin } = await world(t);
  const base = { alarmCond: MARKER, name: 'x' };
  const cases: [string, Record<string, HVal>, RegExp][] = [
    ['no alarmOn', { ...base, pointRef: HRef.of('zat') }, /alarmOn must be one of/],
    ['two targets', { ...base, alarmOn: 'status', pointRef: HRef.of('zat'), filter: 'point' }, /exactly one of/],
    ['no target', { ...base, alarmOn: 'status' }, /exactly one of/],
    ['limit without limits', { ...base, alarmOn: 'limit', pointRef: HRef.of('zat') }, /hiLimit, loLimit or both/],
    ['low above high', { ...base, alarmOn: 'limit', pointRef: HRef.of('zat'), hiLimit: num(20), loLimit: num(25) }, /below hiLimit/],
    ['negative deadband', { ...base, alarmOn: 'limit', pointRef: HRef.of('zat'), hiLimit: num(20), deadband: num(-1) }, /deadband/],
    ['delay without unit', { ...base, alarmOn: 'limit', pointRef: HRef.of('zat'), hiLimit: num(20), delay: num(5) }, /delay.*unit/],
    ['state without alarmVal', { ...base, alarmOn: 'state', pointRef: HRef.of('fan') }, /alarmVal/],
    ['unknown status', { ...base, alarmOn: 'status', pointRef: HRef.of('zat'), statuses: 'down,asleep' }, /statuses/],
    ['bad filter', { ...base, alarmOn: 'status', filter: 'point and' }, /filter/],
    ['connDown of a point', { ...base, alarmOn: 'connDown', pointRef: HRef.of('zat') }, /connector/],
    ['priority 0', { ...base, alarmOn: 'status', pointRef: HRef.of('zat'), priority: num(0) }, /priority/],
  ];
  for (const [what, rec, dis] of cases) expectError(t, await admin.post('createRec', rec), 400, ErrorCodes.INVALID_RECORD, dis, what);
  t.equal(r.app.model.idsWithTag('alarmCond').length, 0, 'none stored');
  expectOk(t, await admin.post('createRec', { id: HRef.of('ok'), ...base, alarmOn: 'status', pointRef: HRef.of('zat') }), 'a valid one');
  expectError(t, await admin.post('updateRec', { id: HRef.of('ok'), alarmOn: 'limit' }), 400, ErrorCodes.INVALID_RECORD, /hiLimit/, 'an update that breaks it');
  t.equal(r.app.model.get('ok')?.get('alarmOn'), 'status', 'unchanged');
  expectError(t, await admin.post('updateRec', { id: HRef.of('zat'), alarmStatus: 'active' }), 400, ErrorCodes.LIVE_TAG, undefined, 'alarmStatus is the server\'s');
});

t.test('while the clock cannot be trusted: alarms still go active, their log waits and is dated once it can', async (t) => {
  const FLOOR = Date.UTC(2025, 5, 1);
  const clock = new ManualClock(Date.UTC(1970, 0, 2));
  const r = await startApp(t, { clock, clockTrust: { floorMs: FLOOR, timers: false } });
  const admin = client(r, r.token);
  expectOk(
    t,
    await admin.post('createRec', [
      { id: HRef.of('p1'), point: MARKER, cur: MARKER, kind: 'Number', name: 'p1' },
      { id: HRef.of('hi'), alarmCond: MARKER, name: 'hi', alarmOn: 'limit', pointRef: HRef.of('p1'), hiLimit: num(10) },
    ]),
    'a point and a condition',
  );
  r.app.points.setCur('p1', { curVal: num(11), curStatus: 'ok' });
  await r.app.alarms.tick();
  const g = expectOk(t, await admin.get('alarms'), 'alarms');
  t.same(statuses(g), { 'hi|p1': 'active' }, 'raised on an untrusted clock');
  t.equal(g.rows[0]?.get('activeAt'), undefined, 'but not dated');
  expectError(t, await admin.post('alarmShelve', { alarmId: 'hi|p1', duration: num(1, 'h') }), 503, ErrorCodes.CLOCK_UNTRUSTED, /clock/, 'no shelving: its end would be a wrong date');
  const held = expectOk(t, await admin.get('alarmHistory'), 'history while untrusted');
  t.same(events(held), ['active p1'], 'the transition is shown');
  t.equal(held.rows[0]?.get('ts'), undefined, 'undated');

  clock.advance(10 * MIN);
  const set = Date.UTC(2026, 0, 10);
  clock.stepWall(set - clock.now());
  r.app.clockTrust.check();
  await r.app.alarms.tick();
  const again = await r.login('admin@example.com', 'admin-password-1');
  const after = client(r, again.body.access_token as string);
  const dated = expectOk(t, await after.get('alarms'), 'alarms');
  t.equal((dated.rows[0]?.get('activeAt') as HDateTime).epochMs, set - 10 * MIN, 'dated by the monotonic time since');
  const h = expectOk(t, await after.get('alarmHistory'), 'history');
  t.equal((h.rows[0]?.get('ts') as HDateTime).epochMs, set - 10 * MIN, 'the log entry too');
  await r.restart();
  const back = expectOk(t, await client(r, r.token).get('alarmHistory'), 'after a restart');
  t.equal(back.size, 1, 'stored once');
});
