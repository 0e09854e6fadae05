/**
 * Issue 6, end to end: watches (watchSub, watchPoll, watchUnsub) through real HTTP against the
 * real App (test/helpers/app.ts) with a manual clock for leases. Values change the three ways a
 * real device changes them: updateRec over HTTP, a driver calling model.setTransient (done here
 * through app.model, as the poller will), and deletion of a watched point.
 */
import t, { type Test } from 'tap';
import { type HDict, type HGrid, HNumber, HRef, type HVal, MARKER } from '../../src/haystack/values.js';
import { ManualClock } from '../../src/lib/clock.js';
import type { CurTags } from '../../src/model/point-state.js';
import { ErrorCodes } from '../../src/lib/errors.js';
import { type Running, startApp } from '../helpers/app.js';
import { readZincVal } from '../../src/haystack/zinc.js';
import { type Answer, errOf, expectError, expectOk, gridOf, postGrid } from '../helpers/http.js';

type Tap = Test;
type Meta = Readonly<Record<string, HVal>>;

const T0 = Date.UTC(2024, 0, 15, 9, 0, 0);
const SEC = 1000;
const MIN = 60 * SEC;

const ok = expectOk;
const failed = expectError;

/** A row as plain data: id, and the value as Zinc-ish text so t.same reads well. */
interface Row {
  id: string;
  val?: string;
  status?: string;
  err?: string;
}

function rowsOf(g: HGrid | undefined): Row[] {
  return (g?.rows ?? []).map((r: HDict) => {
    const out: Row = { id: (r.get('id') as HRef).id };
    const v = r.get('curVal');
    if (v !== undefined) out.val = v instanceof HNumber ? `${v.val}${v.unit ?? ''}` : String(v);
    const st = r.get('curStatus');
    if (typeof st === 'string') out.status = st;
    const e = r.get('curErr');
    if (typeof e === 'string') out.err = e;
    return out;
  });
}

const idsIn = (g: HGrid | undefined): string[] => rowsOf(g).map((r) => r.id);

/** Calls as one bearer token. */
function as(r: Running, headers: Record<string, string>) {
  const post = (op: string, rows: readonly Readonly<Record<string, HVal>>[], meta: Meta = {}): Promise<Answer> =>
    postGrid(r.base, op, gridOf(rows, meta), { headers });
  const idRows = (ids: readonly string[]) => ids.map((id) => ({ id: HRef.of(id) }));
  return {
    post,
    sub: (ids: readonly string[], meta: Meta = { watchDis: 'test', lease: HNumber.of(1, 'min') }) => post('watchSub', idRows(ids), meta),
    append: (watchId: string, ids: readonly string[], meta: Meta = {}) => post('watchSub', idRows(ids), { watchId, ...meta }),
    poll: (watchId: string, refresh = false) => post('watchPoll', [], refresh ? { watchId, refresh: MARKER } : { watchId }),
    unsub: (watchId: string, ids: readonly string[]) => post('watchUnsub', idRows(ids), { watchId }),
    close: (watchId: string, rows: readonly Readonly<Record<string, HVal>>[] = []) => post('watchUnsub', rows, { watchId, close: MARKER }),
  };
}
type Client = ReturnType<typeof as>;

/** Opens a watch and returns its id (fails the test otherwise). */
async function open(t: Tap, c: Client, ids: readonly string[], meta?: Meta): Promise<{ id: string; grid: HGrid }> {
  const g = ok(t, await c.sub(ids, meta), 'watchSub');
  const id = g.meta.get('watchId');
  t.type(id, 'string', 'watchId is a Str');
  return { id: id as string, grid: g };
}

/**
 * hq (s1) > ahu1 (e1) > sat (p1), rat (p2), fan (p3), energy (p4, his only: not cur);
 * depot (s2) > t (p5). Created over HTTP by the admin.
 */
async function seed(t: Tap, r: Running): Promise<void> {
  const admin = as(r, r.auth);
  ok(
    t,
    await admin.post('createRec', [
      { id: HRef.of('s1'), site: MARKER, name: 'hq' },
      { id: HRef.of('e1'), equip: MARKER, name: 'ahu1', siteRef: HRef.of('s1') },
      { id: HRef.of('p1'), point: MARKER, cur: MARKER, kind: 'Number', name: 'sat', siteRef: HRef.of('s1'), equipRef: HRef.of('e1') },
      { id: HRef.of('p2'), point: MARKER, cur: MARKER, kind: 'Number', name: 'rat', siteRef: HRef.of('s1'), equipRef: HRef.of('e1') },
      { id: HRef.of('p3'), point: MARKER, cur: MARKER, kind: 'Bool', name: 'fan', siteRef: HRef.of('s1'), equipRef: HRef.of('e1') },
      { id: HRef.of('p4'), point: MARKER, his: MARKER, kind: 'Number', name: 'energy', siteRef: HRef.of('s1'), equipRef: HRef.of('e1') },
      { id: HRef.of('s2'), site: MARKER, name: 'depot' },
      { id: HRef.of('p5'), point: MARKER, cur: MARKER, kind: 'Number', name: 't', siteRef: HRef.of('s2') },
    ]),
    'seed',
  );
}

async function world(t: Tap, env: Record<string, string> = {}): Promise<{ r: Running; clock: ManualClock; admin: Client }> {
  const clock = new ManualClock(T0);
  const r = await startApp(t, { clock, env });
  await seed(t, r);
  return { r, clock, admin: as(r, r.auth) };
}

/** A driver reading a point: what the poller does, through point state. */
function driverSets(r: Running, id: string, tags: CurTags): void {
  r.app.points.setCur(id, tags);
}

t.test('watchSub opens a watch: rows in request order, non-cur left out, unknown ids, statuses', async (t) => {
  const { r, admin } = await world(t);
  driverSets(r, 'p1', { curVal: HNumber.of(18.5, '°C'), curStatus: 'ok' });
  driverSets(r, 'p2', { curVal: HNumber.of(22, '°C'), curStatus: 'down', curErr: 'timeout reading 10.0.0.7' });
  driverSets(r, 'p5', { curVal: HNumber.of(4), curStatus: 'stale' });

  const { id, grid } = await open(t, admin, ['hq.ahu1.rat', 'p4', 'p1', 'nope', 'p3', 'p5'], { watchDis: 'dashboard', lease: HNumber.of(30, 's') });
  t.ok(id.length >= 16, 'an unguessable watch id');
  t.same(grid.meta.get('lease'), HNumber.of(30, 's'), 'lease answered as a Number with unit');
  t.same(grid.colNames(), ['id', 'curVal', 'curStatus', 'curErr']);
  t.same(rowsOf(grid), [
    { id: 'p2', status: 'down', err: 'timeout reading 10.0.0.7' },
    { id: 'p1', val: '18.5°C', status: 'ok' },
    { id: 'nope', status: 'unknown', err: 'unknown point' },
    { id: 'p3', status: 'unknown' },
    { id: 'p5', val: '4', status: 'stale' },
  ], 'request order; by fully qualified name answered with the id; p4 (no cur) left out; curVal only with ok or stale; never read = unknown');
  t.equal((grid.rows[0]?.get('id') as HRef).dis, 'rat', 'Refs carry the display name');

  // The unknown id and the non-cur point are not on the watch.
  t.same(idsIn(ok(t, await admin.poll(id, true), 'refresh')), ['p2', 'p1', 'p3', 'p5']);

  const dflt = await open(t, admin, ['p1'], { watchDis: 'no lease given' });
  t.same(dflt.grid.meta.get('lease'), HNumber.of(1, 'min'), 'default lease 1 min');
  const bare = ok(t, await admin.post('watchSub', [], { watchDis: 'empty' }), 'a watch may open with no rows (points appended later)');
  t.type(bare.meta.get('watchId'), 'string');

  failed(t, await admin.post('watchSub', [{ id: 'p1' }], { watchDis: 'x' }), 400, ErrorCodes.BAD_REQUEST, /rows\[0\]\.id must be a Ref/, 'a Str id');
  failed(t, await admin.post('watchSub', [{ id: HRef.of('p1') }], { watchDis: HNumber.of(1) }), 400, ErrorCodes.BAD_REQUEST, /watchDis/, 'watchDis not a Str');
  failed(t, await admin.post('watchSub', [{ id: HRef.of('p1') }], { watchId: HNumber.of(3) }), 400, ErrorCodes.BAD_REQUEST, /watchId must be/, 'watchId not a Str');
});

t.test('leases: units, default, clamping, refusals', async (t) => {
  const { admin } = await world(t);
  const cases: [HVal, HNumber][] = [
    [HNumber.of(30, 's'), HNumber.of(30, 's')],
    [HNumber.of(45, 'sec'), HNumber.of(45, 'sec')],
    [HNumber.of(0.5, 'min'), HNumber.of(0.5, 'min')],
    [HNumber.of(1, 'h'), HNumber.of(1, 'h')],
    [HNumber.of(2, 'hr'), HNumber.of(2, 'hr')],
    [HNumber.of(1, 'day'), HNumber.of(1, 'day')],
    [HNumber.of(1, 's'), HNumber.of(10, 's')],
    [HNumber.of(0.1, 'min'), HNumber.of(10, 's')],
    [HNumber.of(2, 'day'), HNumber.of(1, 'day')],
    [HNumber.of(48, 'h'), HNumber.of(24, 'h')],
    [HNumber.of(Infinity, 'min'), HNumber.of(1440, 'min')],
    // no unit: milliseconds, as the WideSky client documents its lease argument
    [HNumber.of(60000), HNumber.of(60, 's')],
    ['90000', HNumber.of(90, 's')],
  ];
  for (const [asked, got] of cases) {
    const g = ok(t, await admin.sub(['p1'], { watchDis: 'l', lease: asked }), `lease ${String(asked)}`);
    t.same(g.meta.get('lease'), got, `lease ${String(asked)} -> ${String(got)}`);
    ok(t, await admin.close(g.meta.get('watchId') as string), 'close');
  }
  const bad: [HVal, RegExp][] = [
    [HNumber.of(0), /more than 0/],
    [HNumber.of(500, 'ms'), /"ms" is not a supported time unit/],
    [HNumber.of(1, 'week'), /"week"/],
    [HNumber.of(0, 's'), /more than 0/],
    [HNumber.of(-1, 'min'), /more than 0/],
    [HNumber.of(NaN, 's'), /more than 0/],
    ['1h', /must be a Number, not a Str/],
  ];
  for (const [lease, why] of bad) {
    const a = await admin.sub(['p1'], { watchDis: 'l', lease });
    failed(t, a, 400, ErrorCodes.BAD_LEASE, why, `lease ${String(lease)}`);
    t.match(errOf(a)?.dis, /s, sec, min, h, hr, day/, 'the message lists the units');
  }
});

t.test('watchPoll: changes since the last poll (the first: since watchSub), refresh, value sources', async (t) => {
  const { r, admin } = await world(t);
  driverSets(r, 'p1', { curVal: HNumber.of(18), curStatus: 'ok' });
  const { id } = await open(t, admin, ['p1', 'p2', 'p3']);

  driverSets(r, 'p2', { curVal: HNumber.of(1), curStatus: 'ok' });
  const first = ok(t, await admin.poll(id), 'first poll');
  t.same(rowsOf(first), [{ id: 'p2', val: '1', status: 'ok' }], 'the first poll: what changed since watchSub');
  t.equal(first.meta.get('watchId'), id, 'poll answers carry the watchId');

  const none = ok(t, await admin.poll(id), 'nothing changed');
  t.equal(none.size, 0, 'no rows');
  t.same(none.colNames(), ['id', 'curVal', 'curStatus', 'curErr'], 'but the columns');

  // Clients cannot set live tags: refused, and nothing is reported.
  failed(t, await admin.post('updateRec', [{ id: HRef.of('p3'), curVal: true, curStatus: 'ok' }]), 400, 'HL_LIVE_TAG', /"curVal" is kept by the server/, 'updateRec curVal');
  t.equal(ok(t, await admin.poll(id), 'poll').size, 0, 'a refused updateRec reports nothing');
  // Several driver readings of one point.
  driverSets(r, 'p3', { curVal: true, curStatus: 'ok' });
  for (let i = 0; i < 5; i++) driverSets(r, 'p1', { curVal: HNumber.of(20 + i), curStatus: 'ok' });
  driverSets(r, 'p2', { curStatus: 'down', curErr: 'no answer' });
  t.same(
    rowsOf(ok(t, await admin.poll(id), 'poll')),
    [
      { id: 'p3', val: 'true', status: 'ok' },
      { id: 'p1', val: '24', status: 'ok' },
      { id: 'p2', status: 'down', err: 'no answer' },
    ],
    'each changed point once, with its latest value; down: curErr and no curVal',
  );
  driverSets(r, 'p1', { curVal: HNumber.of(30) });
  driverSets(r, 'p2', { curStatus: 'ok', curErr: null });
  t.same(rowsOf(ok(t, await admin.poll(id), 'poll')), [
    { id: 'p1', val: '30', status: 'ok' },
    { id: 'p2', val: '1', status: 'ok' },
  ]);

  // Changes to points not on the watch, or non-transient changes, report nothing.
  driverSets(r, 'p5', { curVal: HNumber.of(9), curStatus: 'ok' });
  ok(t, await admin.post('updateRec', [{ id: HRef.of('p1'), dis: 'Supply air' }]), 'updateRec of a tag');
  t.equal(ok(t, await admin.poll(id), 'poll').size, 0, 'nothing to report');

  const all = ok(t, await admin.poll(id, true), 'refresh');
  t.same(idsIn(all), ['p1', 'p2', 'p3'], 'refresh: every point, in subscription order');
  driverSets(r, 'p3', { curVal: false, curStatus: 'ok' });
  ok(t, await admin.poll(id, true), 'refresh');
  t.equal(ok(t, await admin.poll(id), 'poll').size, 0, 'a refresh counts as a poll: changes before it are not repeated');

  failed(t, await admin.poll('no-such-watch'), 400, ErrorCodes.WATCH_NOT_FOUND, /subscribe again with watchSub/, 'unknown watch');
  failed(t, await admin.post('watchPoll', [], {}), 400, ErrorCodes.BAD_REQUEST, /needs the meta watchId/, 'no watchId');
});

t.test('only real changes of curVal/curStatus/curErr are reported: same values, his stats and hisWrite', async (t) => {
  const { r, admin } = await world(t);
  ok(
    t,
    await admin.post('createRec', [{ id: HRef.of('ph'), point: MARKER, cur: MARKER, his: MARKER, kind: 'Number', tz: 'UTC', name: 'meter', siteRef: HRef.of('s1') }]),
    'a cur+his point without a driver',
  );
  driverSets(r, 'p1', { curVal: HNumber.of(5), curStatus: 'ok' });
  const { id } = await open(t, admin, ['p1', 'ph']);
  driverSets(r, 'p1', { curVal: HNumber.of(5), curStatus: 'ok' });
  driverSets(r, 'p1', { curVal: HNumber.of(5) });
  t.equal(ok(t, await admin.poll(id), 'poll').size, 0, 'the same value set again is no change');

  const his = (ts: string, v: number): Promise<Answer> =>
    postGrid(r.base, 'hisWrite', gridOf([{ ts: readZincVal(ts), val: HNumber.of(v) }], { id: HRef.of('ph') }), { headers: r.auth });
  ok(t, await his('2024-01-15T08:00:00Z UTC', 10), 'hisWrite a sample');
  t.same(rowsOf(ok(t, await admin.poll(id), 'poll')), [{ id: 'ph', val: '10', status: 'ok' }], 'hisWrite of the newest sample sets curVal of a point without a driver');
  ok(t, await his('2024-01-15T07:00:00Z UTC', 3), 'hisWrite an older sample');
  t.equal(ok(t, await admin.poll(id), 'poll').size, 0, 'an older sample changes his stats only: no row');
  r.app.model.setTransient('p1', { hisSize: HNumber.of(99) });
  t.equal(ok(t, await admin.poll(id), 'poll').size, 0, 'other transient tags are not watched');
});

t.test('watchSub append: points added, lease kept or changed, only requested rows answered', async (t) => {
  const { r, clock, admin } = await world(t);
  const { id } = await open(t, admin, ['p1'], { watchDis: 'w', lease: HNumber.of(2, 'min') });
  driverSets(r, 'p2', { curVal: HNumber.of(7), curStatus: 'ok' });
  const app = ok(t, await admin.append(id, ['hq.ahu1.rat', 'p4', 'p1']), 'append');
  t.equal(app.meta.get('watchId'), id, 'same watch');
  t.same(app.meta.get('lease'), HNumber.of(2, 'min'), 'lease kept when not given');
  t.same(rowsOf(app), [
    { id: 'p2', val: '7', status: 'ok' },
    { id: 'p1', status: 'unknown' },
  ], 'rows for the requested points (again p1: harmless), non-cur left out');
  t.same(idsIn(ok(t, await admin.poll(id, true), 'refresh')), ['p1', 'p2'], 'p1 once');
  driverSets(r, 'p2', { curVal: HNumber.of(8), curStatus: 'ok' });
  t.same(idsIn(ok(t, await admin.poll(id), 'poll')), ['p2'], 'appended points report changes');

  const longer = ok(t, await admin.append(id, [], { lease: HNumber.of(1, 'h') }), 'append nothing, new lease');
  t.same(longer.meta.get('lease'), HNumber.of(1, 'h'));
  clock.advance(30 * MIN);
  ok(t, await admin.poll(id), 'alive after 30 min: the new lease holds');
  failed(t, await admin.append(id, ['p3'], { lease: HNumber.of(3, 'parsecs') }), 400, ErrorCodes.BAD_LEASE, undefined, 'bad lease on append');
  t.same(idsIn(ok(t, await admin.poll(id, true), 'refresh')), ['p1', 'p2'], 'nothing added by the refused append');
  failed(t, await admin.append('gone', ['p3']), 400, ErrorCodes.WATCH_NOT_FOUND, /subscribe again/, 'append to an unknown watch');
});

t.test('leases end watches: housekeeping, or found expired at poll; watchSub and watchPoll renew', async (t) => {
  const { r, clock, admin } = await world(t);
  const a = await open(t, admin, ['p1'], { watchDis: 'a', lease: HNumber.of(1, 'min') });
  const b = await open(t, admin, ['p1', 'p2'], { watchDis: 'b', lease: HNumber.of(1, 'min') });
  const c = await open(t, admin, ['p2'], { watchDis: 'c', lease: HNumber.of(10, 'min') });
  t.equal(r.app.watches.size, 3);

  for (let i = 0; i < 4; i++) {
    clock.advance(40 * SEC);
    ok(t, await admin.poll(a.id), `poll ${i + 1} renews a (${(i + 1) * 40} s in, lease 60 s)`);
  }
  ok(t, await admin.append(a.id, []), 'watchSub renews too');
  clock.advance(59 * SEC);
  t.equal(r.app.watches.housekeep(), 1, 'housekeeping closes b (160 s + 59 s without a renewal)');
  ok(t, await admin.poll(a.id), 'a is alive (59 s since its watchSub)');
  failed(t, await admin.poll(b.id), 400, ErrorCodes.WATCH_NOT_FOUND, /unknown, closed or expired.*subscribe again/, 'b expired');
  t.equal(r.app.watches.size, 2);
  t.equal(r.app.watches.watchedPoints, 2, 'b released nothing a and c still hold');

  clock.advance(60 * SEC);
  // No housekeeping run: the poll itself finds the lease over.
  failed(t, await admin.poll(a.id), 400, ErrorCodes.WATCH_NOT_FOUND, /subscribe again/, 'a expired, found at poll');
  t.equal(r.app.watches.size, 1, 'and closed');
  ok(t, await admin.poll(c.id), 'c (10 min) lives on');
  t.same(r.app.watches.watchedPoints, 1);
  clock.advance(11 * MIN);
  t.equal(r.app.watches.housekeep(), 1, 'c too, after 11 min');
  t.equal(r.app.watches.watchedPoints, 0);
  // The timer that runs housekeeping by itself: test/watch/watch-manager.test.ts.
});

t.test('watchUnsub: remove points, close with and without rows, r:undefined rows', async (t) => {
  const { r, admin } = await world(t);
  const { id } = await open(t, admin, ['p1', 'p2', 'p3']);
  ok(t, await admin.unsub(id, ['hq.ahu1.sat', 'p4', 'p5', 'nope']), 'remove p1 by name; non-cur, unwatched and unknown ids ignored');
  driverSets(r, 'p1', { curVal: HNumber.of(1), curStatus: 'ok' });
  driverSets(r, 'p2', { curVal: HNumber.of(2), curStatus: 'ok' });
  t.same(idsIn(ok(t, await admin.poll(id), 'poll')), ['p2'], 'a removed point reports nothing');
  t.same(idsIn(ok(t, await admin.poll(id, true), 'refresh')), ['p2', 'p3']);
  const empty = ok(t, await admin.unsub(id, ['p2']), 'remove p2');
  t.same(empty.colNames(), ['empty'], 'watchUnsub answers an empty grid');
  failed(t, await admin.post('watchUnsub', [{ id: 'p3' }], { watchId: id }), 400, ErrorCodes.BAD_REQUEST, /rows\[0\]\.id must be a Ref/, 'remove with a Str id');
  failed(t, await admin.post('watchUnsub', [{ id: HRef.of('p3') }], {}), 400, ErrorCodes.BAD_REQUEST, /watchId/, 'no watchId');

  ok(t, await admin.close(id), 'close with no rows');
  failed(t, await admin.poll(id), 400, ErrorCodes.WATCH_NOT_FOUND, /subscribe again/, 'closed');
  ok(t, await admin.close(id), 'closing again is harmless');
  ok(t, await admin.unsub(id, ['p1']), 'removing from a closed watch is harmless');

  const w2 = await open(t, admin, ['p1', 'p2']);
  ok(t, await admin.close(w2.id, [{ id: HRef.of('p1') }, { id: HRef.of('p2') }]), 'close with rows: the watch closes, whatever the rows');
  failed(t, await admin.poll(w2.id), 400, ErrorCodes.WATCH_NOT_FOUND);

  const w3 = await open(t, admin, ['p1']);
  // What the WideSky client sends for watchUnsub(watchId, undefined, true).
  ok(t, await admin.close(w3.id, [{ id: HRef.of('undefined') }]), 'close with r:undefined rows');
  const w4 = await open(t, admin, ['p1']);
  ok(t, await admin.close(w4.id, [{ id: 'not a ref' }, {}]), 'close ignores even malformed rows');
  t.equal(r.app.watches.size, 0, 'all closed');
  t.equal(r.app.watches.watchedPoints, 0, 'nothing left indexed');
});

t.test('a watched point deleted from the model: unknown once on the next poll, until watchUnsub', async (t) => {
  const { r, admin } = await world(t);
  driverSets(r, 'p2', { curVal: HNumber.of(5), curStatus: 'ok' });
  const a = await open(t, admin, ['p1', 'p2']);
  const b = await open(t, admin, ['p2']);
  ok(t, await admin.post('deleteRec', [{ id: HRef.of('hq.ahu1.rat') }]), 'deleteRec p2');
  const rows = rowsOf(ok(t, await admin.poll(a.id), 'poll a'));
  t.equal(rows.length, 1);
  t.equal(rows[0]?.id, 'p2');
  t.equal(rows[0]?.status, 'unknown', 'reported with curStatus unknown');
  t.notOk(rows[0]?.val, 'no curVal');
  t.match(rows[0]?.err, /deleted.*watchUnsub/, 'curErr says what to do');
  t.same(rowsOf(ok(t, await admin.poll(b.id), 'poll b')).map((x) => x.status), ['unknown'], 'every watch holding it hears of it');
  t.equal(ok(t, await admin.poll(a.id), 'poll a again').size, 0, 'reported once');
  t.same(rowsOf(ok(t, await admin.poll(a.id, true), 'refresh')).map((x) => `${x.id}:${x.status ?? ''}`), ['p1:unknown', 'p2:unknown'], 'still on the watch (the client is to watchUnsub it)');
  ok(t, await admin.unsub(a.id, ['p2']), 'watchUnsub by id of the deleted point');
  t.same(idsIn(ok(t, await admin.poll(a.id, true), 'refresh')), ['p1']);

  // Created again under the same id while still watched by b: reported again.
  ok(t, await admin.post('createRec', [{ id: HRef.of('p2'), point: MARKER, cur: MARKER, kind: 'Number', name: 'rat2', siteRef: HRef.of('s1') }]), 'createRec p2 again');
  t.same(rowsOf(ok(t, await admin.poll(b.id), 'poll b')), [{ id: 'p2', status: 'unknown' }], 'back, never read yet');
});

t.test('many watches sharing points: a reading reaches every watch; polls are independent', async (t) => {
  const { r, admin } = await world(t);
  const ws = [];
  for (let i = 0; i < 5; i++) ws.push(await open(t, admin, i % 2 === 0 ? ['p1', 'p2'] : ['p2', 'p3']));
  driverSets(r, 'p2', { curVal: HNumber.of(42), curStatus: 'ok' });
  driverSets(r, 'p1', { curVal: HNumber.of(1), curStatus: 'ok' });
  for (const [i, w] of ws.entries()) {
    const rows = rowsOf(ok(t, await admin.poll(w.id), `poll ${i}`));
    t.same(rows, i % 2 === 0 ? [{ id: 'p2', val: '42', status: 'ok' }, { id: 'p1', val: '1', status: 'ok' }] : [{ id: 'p2', val: '42', status: 'ok' }], `watch ${i}`);
  }
  driverSets(r, 'p3', { curVal: true, curStatus: 'ok' });
  t.same(idsIn(ok(t, await admin.poll((ws[1] as { id: string }).id), 'poll 1')), ['p3']);
  t.same(idsIn(ok(t, await admin.poll((ws[3] as { id: string }).id), 'poll 3')), ['p3'], 'polling one watch leaves the others their changes');
  t.same(idsIn(ok(t, await admin.poll((ws[0] as { id: string }).id), 'poll 0')), [], 'p3 is not on watch 0');
  t.equal(r.app.watches.watchedPoints, 3);
  ok(t, await admin.close((ws[0] as { id: string }).id), 'close 0');
  ok(t, await admin.unsub((ws[2] as { id: string }).id, ['p1']), 'remove p1 from 2');
  t.equal(r.app.watches.watchedPoints, 3, 'p1 is still on watch 4');
  ok(t, await admin.close((ws[4] as { id: string }).id), 'close 4');
  t.equal(r.app.watches.watchedPoints, 2, 'p1 no longer watched by anyone');
});

t.test('limits: watches per user, points per watch', async (t) => {
  const { r, clock, admin } = await world(t, { HAYLOFT_WATCH_MAX_PER_USER: '2', HAYLOFT_WATCH_MAX_POINTS: '3' });
  const a = await open(t, admin, ['p1'], { watchDis: 'a', lease: HNumber.of(10, 'min') });
  const b = await open(t, admin, ['p1'], { watchDis: 'b', lease: HNumber.of(1, 'min') });
  failed(t, await admin.sub(['p1']), 400, ErrorCodes.WATCH_LIMIT, /already has 2 open watches.*close one/, 'a third watch');
  ok(t, await admin.close(a.id), 'close a');
  const c = await open(t, admin, ['p1'], { watchDis: 'c', lease: HNumber.of(10, 'min') });
  failed(t, await admin.sub(['p1']), 400, ErrorCodes.WATCH_LIMIT, undefined, 'full again');
  clock.advance(2 * MIN);
  await open(t, admin, ['p1'], { watchDis: 'd' });
  t.pass('an expired watch (b) does not count, even before housekeeping');
  failed(t, await admin.poll(b.id), 400, ErrorCodes.WATCH_NOT_FOUND);

  failed(t, await admin.append(c.id, ['p2', 'p3', 'p5']), 400, ErrorCodes.WATCH_LIMIT, /at most 3 points; this would make 4/, 'append past the point limit');
  t.same(idsIn(ok(t, await admin.poll(c.id, true), 'refresh')), ['p1'], 'nothing added');
  ok(t, await admin.append(c.id, ['p2', 'p3', 'p2', 'p1', 'p4']), 'duplicates, points already on the watch and non-cur points do not count');
  t.same(idsIn(ok(t, await admin.poll(c.id, true), 'refresh')), ['p1', 'p2', 'p3']);
  ok(t, await admin.close(c.id), 'close c');
  failed(t, await admin.sub(['p1', 'p2', 'p3', 'p5']), 400, ErrorCodes.WATCH_LIMIT, /at most 3 points/, 'a new watch past the point limit');
  t.equal(r.app.watches.size, 1, 'the refused watchSub opened nothing (d is the one open watch)');
});

t.test('permissions: WATCH for the ops, MODEL_READ on points, watches belong to their user', async (t) => {
  const { r, admin } = await world(t);
  ok(
    t,
    await admin.post('createRec', [
      { id: HRef.of('pol-watch'), actionPolicy: MARKER, name: 'watch', permissions: ['WATCH'] },
      { id: HRef.of('pol-read'), actionPolicy: MARKER, name: 'read-all', permissions: ['MODEL_READ'] },
      { id: HRef.of('pol-read-hq'), actionPolicy: MARKER, name: 'read-hq', permissions: ['MODEL_READ'], filter: 'siteRef==@s1' },
      { id: HRef.of('r-watcher'), role: MARKER, name: 'watcher', actionPolicyRefs: [HRef.of('pol-watch'), HRef.of('pol-read')] },
      { id: HRef.of('r-hq'), role: MARKER, name: 'hq-watcher', actionPolicyRefs: [HRef.of('pol-watch'), HRef.of('pol-read-hq')] },
      { id: HRef.of('r-reader'), role: MARKER, name: 'reader', actionPolicyRefs: [HRef.of('pol-read')] },
    ]),
    'roles',
  );
  const tokenOf = async (user: string, role: string): Promise<Record<string, string>> => {
    await r.app.auth.addUser(user, 'password-12345', role);
    const l = await r.login(user, 'password-12345');
    t.equal(l.status, 200, `${user} logs in`);
    return { authorization: `Bearer ${l.body.access_token as string}` };
  };
  const watcher = as(r, await tokenOf('watcher@example.com', 'watcher'));
  const other = as(r, await tokenOf('other@example.com', 'watcher'));
  const hq = as(r, await tokenOf('hq@example.com', 'hq-watcher'));
  const reader = as(r, await tokenOf('reader@example.com', 'reader'));

  failed(t, await reader.sub(['p1']), 403, ErrorCodes.FORBIDDEN, /watchSub needs WATCH/, 'watchSub without WATCH');
  failed(t, await reader.poll('x'), 403, ErrorCodes.FORBIDDEN, /watchPoll needs WATCH/, 'watchPoll without WATCH');
  failed(t, await reader.close('x'), 403, ErrorCodes.FORBIDDEN, /watchUnsub needs WATCH/, 'watchUnsub without WATCH');

  driverSets(r, 'p5', { curVal: HNumber.of(3), curStatus: 'ok' });
  const h = await open(t, hq, ['p1', 'p5', 'depot.t']);
  t.same(rowsOf(h.grid), [
    { id: 'p1', status: 'unknown' },
    { id: 'p5', status: 'unknown', err: 'unknown point' },
    { id: 'depot.t', status: 'unknown', err: 'unknown point' },
  ], 'a point the caller may not read looks exactly like an unknown one');
  driverSets(r, 'p5', { curVal: HNumber.of(4), curStatus: 'ok' });
  t.same(idsIn(ok(t, await hq.poll(h.id, true), 'refresh')), ['p1'], 'and is not watched');

  const w = await open(t, watcher, ['p1', 'p5']);
  failed(t, await other.poll(w.id), 400, ErrorCodes.WATCH_NOT_FOUND, undefined, 'another user cannot poll it');
  failed(t, await other.append(w.id, ['p2']), 400, ErrorCodes.WATCH_NOT_FOUND, undefined, 'nor append to it');
  ok(t, await other.close(w.id), 'closing another user\'s watch answers like an unknown watch...');
  ok(t, await other.unsub(w.id, ['p1']), '... as does removing points from it');
  t.same(idsIn(ok(t, await watcher.poll(w.id, true), 'owner refresh')), ['p1', 'p5'], '...but changes nothing');
  failed(t, await admin.poll(w.id), 400, ErrorCodes.WATCH_NOT_FOUND, undefined, 'not even the admin polls it');
  const owner = (await admin.post('read', [{ filter: 'username=="watcher@example.com"' }])).grid?.first()?.get('id') as HRef;
  ok(t, await postGrid(r.base, 'watchPoll', gridOf([], { watchId: w.id }), { headers: { ...r.auth, 'x-impersonate': owner.id } }), 'impersonating the owner does');

  // Read rights taken away later: the point turns unknown on the next refresh.
  ok(t, await admin.post('updateRec', [{ id: HRef.of('r-hq'), actionPolicyRefs: [HRef.of('pol-watch')] }]), 'hq-watcher loses MODEL_READ');
  t.same(rowsOf(ok(t, await hq.poll(h.id, true), 'refresh')), [{ id: 'p1', status: 'unknown', err: 'unknown point' }], 'a point no longer readable is answered as unknown');
});
