/**
 * Issue 5, end to end: what happens to history over its life, through real HTTP against the real
 * App on LevelDB: hisDelete (as the WideSky client sends it), hisSize/hisStart/hisEnd on the
 * point after writes, deletes and a restart, curVal of a `cur` point fed by hisWrite, HIS_READ
 * and HIS_WRITE from roles and action policies (with filters), and a deleted point taking its
 * history with it.
 */
import t from 'tap';
import { HDateTime, HNumber, HRef, MARKER } from '../../src/haystack/values.js';
import { timeZone } from '../../src/haystack/tz.js';
import { zincVal } from '../../src/haystack/zinc.js';
import { ErrorCodes } from '../../src/lib/errors.js';
import { dt, failed, hisClient, hisStats, multiWrite, ok, series } from '../helpers/his.js';
import { hisWorld } from '../helpers/his-world.js';
import { request } from '../helpers/http.js';

const NY = timeZone('New_York');
const HOUR = 3600_000;
/** 2024-01-12T00:00-05:00 New_York. */
const D0 = Date.UTC(2024, 0, 12, 5);
const hourly = (n: number, unit: string | null = '°F', t0 = D0) => Array.from({ length: n }, (_, i) => [new HDateTime(t0 + i * HOUR, NY), HNumber.of(i, unit)] as const);
const vals = (rows: [string, string][]): number[] => rows.map((r) => parseFloat(r[1]));
const seq = (a: number, b: number): number[] => Array.from({ length: b - a }, (_, i) => a + i);

t.test('hisDelete as the WideSky client sends it: only that range goes; hisSize, hisStart, hisEnd follow', async (t) => {
  const { r, admin } = await hisWorld(t);
  ok(t, await admin.write('temp', hourly(48)), '48 hourly samples over 2024-01-12 and 13');
  ok(t, await admin.write('plain', hourly(48, null)), 'the same for plain');
  t.same(hisStats(await admin.rec('temp')), { size: '48', start: '2024-01-12T00:00:00-05:00 New_York', end: '2024-01-13T23:00:00-05:00 New_York' }, 'stats after the write');

  // Exactly the client's body: cols range then id, JSON-encoded values.
  const wideSky = (range: string, ids: string[]) => {
    const row: Record<string, string> = { range: `s:${range}` };
    const cols = [{ name: 'range' }];
    if (ids.length === 1) {
      row.id = `r:${ids[0] as string}`;
      cols.push({ name: 'id' });
    } else {
      ids.forEach((id, k) => {
        row[`id${k}`] = `r:${id}`;
        cols.push({ name: `id${k}` });
      });
    }
    return request(r.base, '/api/hisDelete', {
      method: 'POST',
      headers: { ...r.auth, 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify({ meta: { ver: '2.0' }, cols, rows: [row] }),
    });
  };
  const gone = ok(t, await wideSky('2024-01-12T10:00:00-05:00 New_York,2024-01-12T13:00:00-05:00 New_York', ['temp']), 'delete 10:00 to 13:00');
  t.same(gone.colNames(), ['empty'], 'an empty grid');
  t.same(vals(await admin.all('temp')), [...seq(0, 10), ...seq(13, 48)], 'start included, end excluded; nothing else touched');
  t.same(vals(await admin.all('plain')), seq(0, 48), 'the other point is untouched');
  t.equal(hisStats(await admin.rec('temp')).size, '45');

  ok(t, await wideSky('first', ['temp']), 'delete first');
  ok(t, await wideSky('last', ['temp']), 'delete last');
  t.same(hisStats(await admin.rec('temp')), { size: '43', start: '2024-01-12T01:00:00-05:00 New_York', end: '2024-01-13T22:00:00-05:00 New_York' }, 'hisStart and hisEnd move in');

  // Both points' deletes in one LevelDB write: all of it lands, or (a crash, an error) none.
  const writes: string[][] = [];
  const onWrite = (ops: { key?: unknown }[]): void => {
    // A history key holds its point's id as UTF-8 (history.ts PointKeys).
    const touched = ['temp', 'plain'].filter((id) => ops.some((o) => Buffer.from(o.key as Uint8Array).toString('latin1').includes(id)));
    if (touched.length > 0) writes.push(touched);
  };
  r.app.store.db.on('write', onWrite);
  ok(t, await wideSky('2024-01-13', ['temp', 'plain']), 'a whole day of two points (id0, id1)');
  r.app.store.db.off('write', onWrite);
  t.same(writes, [['temp', 'plain']], 'one write to the store, holding both points');
  t.same(vals(await admin.all('temp')), [...seq(1, 10), ...seq(13, 24)]);
  t.same(vals(await admin.all('plain')), seq(0, 24));
  t.same(hisStats(await admin.rec('plain')), { size: '24', start: '2024-01-12T00:00:00-05:00 New_York', end: '2024-01-12T23:00:00-05:00 New_York' });

  ok(t, await admin.del('temp', '2024-01-12T05:30:00-05:00 New_York,2024-01-12T05:30:00.001-05:00 New_York'), 'a span with no sample in it');
  t.equal(hisStats(await admin.rec('temp')).size, '20', 'nothing deleted');
  ok(t, await admin.del('fan', 'today'), 'a point without history');
  t.ok([undefined, '0'].includes(hisStats(await admin.rec('fan')).size), 'still none');

  failed(t, await admin.del('temp', 'sometime'), 400, ErrorCodes.BAD_RANGE, /today, yesterday/, 'a bad range');
  failed(t, await admin.del('nope', 'today'), 400, ErrorCodes.NOT_FOUND, /unknown point @nope/, 'an unknown point');
  failed(t, await wideSky('2024-01-12', ['plain', 'nope']), 400, ErrorCodes.NOT_FOUND, /id1: unknown point @nope/, 'one unknown point among two');
  t.equal((await admin.all('plain')).length, 24, 'nothing deleted by the refused requests');
  failed(t, await admin.get('hisDelete', { id: HRef.of('temp'), range: 'today' }), 405, ErrorCodes.METHOD_NOT_ALLOWED, undefined, 'GET hisDelete');

  // client.batch.hisDelete's range: ISO instants without a zone name, the end 1 ms past a sample.
  ok(t, await wideSky('2024-01-12T05:00:00.000Z,2024-01-12T07:00:00.001Z', ['plain']), 'DateTimes without a zone name');
  t.same(vals(await admin.all('plain')), seq(3, 24), '05:00Z, 06:00Z and 07:00Z are gone');

  ok(t, await admin.del('temp', '1970-01-01,2100-12-31'), 'delete everything');
  t.same(hisStats(await admin.rec('temp')), { size: undefined, start: undefined, end: undefined }, 'no his tags once the history is empty (as after a restart)');
  t.same(await admin.all('temp'), []);
  ok(t, await admin.write('temp', [[new HDateTime(D0, NY), HNumber.of(5)]]), 'written again');
  t.same(hisStats(await admin.rec('temp')), { size: '1', start: '2024-01-12T00:00:00-05:00 New_York', end: '2024-01-12T00:00:00-05:00 New_York' });
});

t.test('hisSize, hisStart, hisEnd after writes, deletes and a restart (sealed chunks and the open tail)', async (t) => {
  const { r, admin } = await hisWorld(t);
  // 3000 minutes: more than two sealed chunks of 1024 plus a tail.
  const minutes = Array.from({ length: 3000 }, (_, i) => [new HDateTime(D0 + i * 60_000, NY), HNumber.of(i)] as const);
  ok(t, await admin.write('plain', minutes), '3000 samples');
  ok(t, await admin.write('power', [[dt('2024-01-12T09:00:00+11:00 Sydney'), HNumber.of(1, 'kW')]]), 'one Sydney sample');
  ok(t, await admin.del('plain', '2024-01-12T10:00:00-05:00 New_York,2024-01-12T20:00:00-05:00 New_York'), 'delete ten hours in the middle (across a chunk edge)');
  ok(t, await admin.write('plain', [[dt('2024-01-12T15:00:00-05:00 New_York'), HNumber.of(-1)]]), 'one sample back in the hole');
  const before = { plain: hisStats(await admin.rec('plain')), power: hisStats(await admin.rec('power')) };
  t.same(before.plain, { size: String(3000 - 600 + 1), start: '2024-01-12T00:00:00-05:00 New_York', end: '2024-01-14T01:59:00-05:00 New_York' });
  t.same(before.power, { size: '1', start: '2024-01-12T09:00:00+11:00 Sydney', end: '2024-01-12T09:00:00+11:00 Sydney' }, 'in the point\'s zone');
  const data = await admin.all('plain');
  t.equal(data.length, 2401);

  await r.restart();
  t.same(hisStats(await admin.rec('plain')), before.plain, 'the same after a restart');
  t.same(hisStats(await admin.rec('power')), before.power);
  t.same(hisStats(await admin.rec('temp')), { size: undefined, start: undefined, end: undefined }, 'a point without history has no his tags');
  t.same(await admin.all('plain'), data, 'every sample is still there');
  ok(t, await admin.write('plain', [[dt('2024-01-15T00:00:00-05:00 New_York'), HNumber.of(7)]]), 'and it takes writes');
  t.same(hisStats(await admin.rec('plain')).end, '2024-01-15T00:00:00-05:00 New_York');
  t.same(hisStats(await admin.rec('plain')).size, '2402');
});

t.test('a cur point without a driver shows its newest written sample as curVal', async (t) => {
  const { r, admin } = await hisWorld(t);
  ok(t, await admin.write('live', hourly(3)), 'three samples');
  const cur = async () => {
    const rec = await admin.rec('live');
    return [rec.has('curVal') ? zincVal(rec.get('curVal') ?? null) : undefined, rec.get('curStatus')];
  };
  t.same(await cur(), ['2°F', 'ok'], 'the newest, with the point\'s unit, status ok');
  ok(t, await admin.write('live', [[new HDateTime(D0 - HOUR, NY), HNumber.of(-1)]]), 'an older sample');
  t.same(await cur(), ['2°F', 'ok'], 'does not replace it');
  ok(t, await admin.write('live', [[new HDateTime(D0 + HOUR, NY), HNumber.of(11)]]), 'a sample between');
  t.same(await cur(), ['2°F', 'ok'], 'does not either');
  ok(t, await admin.writeMulti(['temp', 'live'], [[new HDateTime(D0 + 5 * HOUR, NY), HNumber.of(1), HNumber.of(50)], [new HDateTime(D0 + 4 * HOUR, NY), HNumber.of(2), HNumber.of(40)]]), 'newer ones through a multi-point write, unsorted');
  t.same(await cur(), ['50°F', 'ok'], 'the newest of them');
  ok(t, await admin.write('live', [[new HDateTime(D0 + 5 * HOUR, NY), HNumber.of(55)]]), 'the newest instant written again with another value');
  t.same(vals(await admin.all('live')).slice(-1), [55], 'the history holds the new value');
  t.same(await cur(), ['55°F', 'ok'], 'and so does curVal');
  const temp = await admin.rec('temp');
  t.notOk(temp.has('curVal'), 'a point without cur gets no curVal');

  // Concurrent writes: whatever order they land in, curVal ends as the newest sample.
  const writes = [30, 10, 25, 5, 40, 15, 35, 20].map((h) => admin.write('live', [[new HDateTime(D0 + h * HOUR, NY), HNumber.of(h)]]));
  for (const a of await Promise.all(writes)) t.equal(a.status, 200);
  const last = series(ok(t, await admin.read('live', 'last'), 'last'));
  t.same(last.map((r) => r[1]), ['40°F'], 'the newest sample');
  t.same(await cur(), ['40°F', 'ok'], 'curVal after concurrent writes is the newest sample');

  // A cur point polled by a driver keeps its value from the driver.
  ok(t, await admin.post('createRec', [
    { id: HRef.of('plc'), modbusConn: MARKER, name: 'plc' },
    { id: HRef.of('polled'), point: MARKER, his: MARKER, cur: MARKER, kind: 'Number', name: 'polled', modbusConnRef: HRef.of('plc'), tz: 'New_York' },
  ]), 'a driven point');
  ok(t, await admin.write('polled', hourly(2, null)), 'history written to it');
  const polled = await admin.rec('polled');
  t.notOk(polled.has('curVal'), 'its curVal is the driver\'s, not hisWrite\'s');
  t.equal(hisStats(polled).size, '2', 'its his tags are kept');

  // hisDelete of the newest sample: curVal falls back to the newest one left.
  ok(t, await admin.del('live', 'last'), 'the newest sample deleted');
  t.same(await cur(), ['35°F', 'ok'], 'curVal is the newest sample left');
  // A restart: curVal comes back from the history, not lost with the memory.
  await r.restart();
  t.same(await cur(), ['35°F', 'ok'], 'after a restart curVal is still the newest sample');
  ok(t, await admin.del('live', '1970-01-01,2100-12-31'), 'everything deleted');
  t.same(await cur(), [undefined, 'unknown'], 'no history: no curVal, status unknown');
});

t.test('HIS_READ and HIS_WRITE: allowed, denied, scoped by policy filters', async (t) => {
  const { r, admin } = await hisWorld(t);
  ok(t, await admin.write('temp', hourly(3)), 'temp');
  ok(t, await admin.write('power', [[dt('2024-01-12T09:00:00+11:00 Sydney'), HNumber.of(1, 'kW')]]), 'power');
  ok(t, await admin.post('createRec', [
    { id: HRef.of('pol-model'), actionPolicy: MARKER, name: 'model', permissions: ['MODEL_READ'] },
    { id: HRef.of('pol-model-hq'), actionPolicy: MARKER, name: 'model-hq', permissions: ['MODEL_READ'], filter: 'siteRef==@hq' },
    { id: HRef.of('pol-his-read'), actionPolicy: MARKER, name: 'his-read', permissions: ['HIS_READ'] },
    { id: HRef.of('pol-his-write'), actionPolicy: MARKER, name: 'his-write', permissions: ['HIS_WRITE'] },
    { id: HRef.of('pol-his-read-hq'), actionPolicy: MARKER, name: 'his-read-hq', permissions: ['HIS_READ'], filter: 'siteRef==@hq' },
    { id: HRef.of('pol-his-write-syd'), actionPolicy: MARKER, name: 'his-write-syd', permissions: ['HIS_WRITE'], filter: 'siteRef->tz=="Sydney"' },
    { id: HRef.of('r-reader'), role: MARKER, name: 'reader', actionPolicyRefs: [HRef.of('pol-model'), HRef.of('pol-his-read')] },
    { id: HRef.of('r-writer'), role: MARKER, name: 'writer', actionPolicyRefs: [HRef.of('pol-model'), HRef.of('pol-his-write')] },
    { id: HRef.of('r-model'), role: MARKER, name: 'model-only', actionPolicyRefs: [HRef.of('pol-model')] },
    { id: HRef.of('r-hq'), role: MARKER, name: 'hq-reader', actionPolicyRefs: [HRef.of('pol-model'), HRef.of('pol-his-read-hq')] },
    { id: HRef.of('r-syd'), role: MARKER, name: 'syd-writer', actionPolicyRefs: [HRef.of('pol-model'), HRef.of('pol-his-write-syd')] },
    { id: HRef.of('r-blind'), role: MARKER, name: 'blind', actionPolicyRefs: [HRef.of('pol-model-hq'), HRef.of('pol-his-read')] },
  ]), 'policies and roles');
  const userIds: Record<string, string> = {};
  const as = async (role: string) => {
    const name = `${role}@example.com`;
    userIds[role] = await r.app.auth.addUser(name, 'password-12345', role);
    const l = await r.login(name, 'password-12345');
    t.equal(l.status, 200, `${name} logs in`);
    return hisClient(r, { authorization: `Bearer ${l.body.access_token as string}` });
  };
  const reader = await as('reader');
  const writer = await as('writer');
  const model = await as('model-only');
  const hq = await as('hq-reader');
  const syd = await as('syd-writer');
  const blind = await as('blind');
  const sample = (v: number) => [[new HDateTime(D0 + 10 * HOUR, NY), HNumber.of(v)]] as const;
  const sydSample = (v: number) => [[dt('2024-01-12T10:00:00+11:00 Sydney'), HNumber.of(v, 'kW')]] as const;

  t.same(vals(series(ok(t, await reader.read('temp', '2024-01-12'), 'reader: hisRead'))), [0, 1, 2]);
  ok(t, await reader.get('hisRead', { id: HRef.of('temp'), range: 'first' }), 'reader: GET hisRead');
  failed(t, await reader.write('temp', sample(9)), 403, ErrorCodes.FORBIDDEN, /hisWrite needs HIS_WRITE/, 'reader: hisWrite');
  failed(t, await reader.del('temp', '2024-01-12'), 403, ErrorCodes.FORBIDDEN, /hisDelete needs HIS_WRITE/, 'reader: hisDelete');

  ok(t, await writer.write('temp', sample(9)), 'writer: hisWrite');
  failed(t, await writer.read('temp', '2024-01-12'), 403, ErrorCodes.FORBIDDEN, /hisRead needs HIS_READ/, 'writer: hisRead');
  ok(t, await writer.del('temp', 'last'), 'writer: hisDelete');

  failed(t, await model.read('temp', 'today'), 403, ErrorCodes.FORBIDDEN, /HIS_READ/, 'model-only: hisRead');
  failed(t, await model.get('hisRead', { id: HRef.of('temp'), range: 'today' }), 403, ErrorCodes.FORBIDDEN, /HIS_READ/, 'model-only: GET hisRead');
  failed(t, await model.write('temp', sample(9)), 403, ErrorCodes.FORBIDDEN, /HIS_WRITE/, 'model-only: hisWrite');

  ok(t, await hq.read('temp', '2024-01-12'), 'hq-reader: a point of hq');
  failed(t, await hq.read('power', 'first'), 403, ErrorCodes.FORBIDDEN, /hisRead of @power needs HIS_READ/, 'hq-reader: a point of syd');
  failed(t, await hq.readMulti(['temp', 'power'], 'first'), 403, ErrorCodes.FORBIDDEN, /@power/, 'hq-reader: both, id0/id1');
  failed(t, await hq.readBatch(['temp', 'power'], 'first'), 403, ErrorCodes.FORBIDDEN, /@power/, 'hq-reader: both, batch');

  ok(t, await syd.write('power', sydSample(2)), 'syd-writer: a Sydney point');
  failed(t, await syd.write('temp', sample(9)), 403, ErrorCodes.FORBIDDEN, /hisWrite of @temp needs HIS_WRITE/, 'syd-writer: a New York point');
  failed(t, await syd.postGrid('hisWrite', multiWrite(['power', 'temp'], [[dt('2024-01-12T11:00:00+11:00 Sydney'), HNumber.of(3, 'kW'), HNumber.of(3)]])), 403, ErrorCodes.FORBIDDEN, /@temp/, 'syd-writer: both in one request');
  t.same(vals(await admin.all('power')), [1, 2], 'nothing of the refused request written to power');

  failed(t, await blind.read('power', 'first'), 400, ErrorCodes.NOT_FOUND, /unknown point @power/, 'a point the caller may not read looks unknown');
  ok(t, await blind.read('temp', 'first'), 'one it may read');

  // Impersonation: the admin acting as the reader has the reader's rights.
  const imp = hisClient(r, { ...r.auth, 'x-impersonate': userIds.reader as string });
  failed(t, await imp.write('temp', sample(9)), 403, ErrorCodes.FORBIDDEN, /HIS_WRITE/, 'admin as reader: hisWrite');
  ok(t, await imp.read('temp', 'first'), 'admin as reader: hisRead');
  t.same(vals(await admin.all('temp')), [0, 1, 2], 'temp holds what the allowed requests left');
});

t.test('deleting a point deletes its history: a point recreated with the same id starts empty', async (t) => {
  const { r, admin } = await hisWorld(t);
  ok(t, await admin.write('temp', hourly(24)), 'temp');
  ok(t, await admin.write('live', hourly(5)), 'live');
  ok(t, await admin.post('deleteRec', [{ id: HRef.of('hq.ahu.temp') }, { id: HRef.of('live') }]), 'deleteRec both (one by fqname)');
  failed(t, await admin.read('temp', '2024-01-12'), 400, ErrorCodes.NOT_FOUND, /unknown point @temp/, 'hisRead of a deleted point');
  failed(t, await admin.write('temp', hourly(1)), 400, ErrorCodes.NOT_FOUND, /unknown point @temp/, 'hisWrite to a deleted point');
  ok(t, await admin.post('createRec', [
    { id: HRef.of('temp'), point: MARKER, his: MARKER, kind: 'Bool', name: 'temp', siteRef: HRef.of('hq'), equipRef: HRef.of('ahu'), tz: 'New_York' },
    { id: HRef.of('live'), point: MARKER, his: MARKER, cur: MARKER, kind: 'Number', name: 'live', siteRef: HRef.of('hq'), equipRef: HRef.of('ahu'), tz: 'New_York' },
  ]), 'recreated with the same ids (temp now a Bool point)');
  t.same(await admin.all('temp'), [], 'no old samples');
  t.same(await admin.all('live'), []);
  const rec = await admin.rec('live');
  t.same(hisStats(rec), { size: undefined, start: undefined, end: undefined }, 'no his tags of the old point');
  t.notOk(rec.has('curVal'), 'nor its curVal');
  ok(t, await admin.write('temp', [[new HDateTime(D0, NY), true]]), 'Bools are taken at once: the old Number history is gone');
  t.same(await admin.all('temp'), [['2024-01-12T00:00:00-05:00 New_York', 'T']]);
  await r.restart();
  t.same(await admin.all('temp'), [['2024-01-12T00:00:00-05:00 New_York', 'T']], 'after a restart: only the new sample');
  t.same(await admin.all('live'), []);
});

t.test('a point recreated right after deleteRec never sees the old history, even while it is being dropped', async (t) => {
  const { admin } = await hisWorld(t);
  const rec = (kind: string) => ({ id: HRef.of('plain'), point: MARKER, his: MARKER, kind, name: 'plain', siteRef: HRef.of('hq'), equipRef: HRef.of('ahu'), tz: 'New_York' });
  const many = Array.from({ length: 20_000 }, (_, i) => [new HDateTime(D0 + i * 1000, NY), HNumber.of(i)] as const);
  const surprises: string[] = [];
  // The old history is dropped after deleteRec answers; big histories take longest.
  for (let round = 0; round < 8; round++) {
    ok(t, await admin.write('plain', many), `round ${round}: 20000 Number samples`);
    ok(t, await admin.post('deleteRec', [{ id: HRef.of('plain') }]), 'deleteRec');
    ok(t, await admin.post('createRec', [rec('Bool')]), 'recreated as a Bool point');
    const [w, read] = await Promise.all([admin.write('plain', [[new HDateTime(D0 - HOUR, NY), true]]), admin.read('plain', '2024-01-01,2024-12-31')]);
    if (w.status !== 200) surprises.push(`round ${round}: hisWrite ${w.status} ${w.text.slice(0, 160)}`);
    if (read.status !== 200 || (read.grid?.size ?? 0) > 1) surprises.push(`round ${round}: hisRead ${read.status} ${read.grid?.size ?? ''} ${read.text.slice(0, 160)}`);
    ok(t, await admin.post('deleteRec', [{ id: HRef.of('plain') }]), 'deleteRec');
    ok(t, await admin.post('createRec', [rec('Number')]), 'recreated as a Number point');
  }
  t.same(surprises, [], 'every write to the new point is taken, and no read shows the old samples');
});
