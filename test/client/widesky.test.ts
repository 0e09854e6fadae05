/**
 * The published WideSky JavaScript client (@widesky/jswidesky-client), unchanged, against a real
 * Hayloft: login, token refresh, records, impersonation and password change.
 */
import t from 'tap';
import jsWideSky from '@widesky/jswidesky-client';
import { HNumber } from '../../src/haystack/values.js';
import { ADMIN, CLIENT, startApp } from '../helpers/app.js';

const quiet = { name: 'widesky-client', level: 'fatal', raw: true };

function client(base: string, username = ADMIN.username, password = ADMIN.password): InstanceType<typeof jsWideSky.WideSkyClient> {
  return new jsWideSky.WideSkyClient(base, username, password, CLIENT.id, CLIENT.secret, quiet);
}

t.test('the WideSky client logs in, refreshes and works with records', async (t) => {
  const s = await startApp(t);
  const c = client(s.base);
  const token = await c.login();
  t.ok(token.access_token && token.refresh_token, 'login gives both tokens');
  t.ok(token.expires_in > Date.now() + 6 * 24 * 3600_000, 'expires_in is an absolute instant the client can compare with Date.now()');

  const created = await c.create([
    { site: 'm:', name: 's:hq', dis: 's:Head Office', tz: 's:Sydney' },
  ]);
  const siteId = String(created.rows[0]?.id).slice(2).split(' ')[0] as string;
  t.match(created.rows[0]?.id, /^r:[0-9a-f-]{36} hq$/, 'created Ref carries the name as display');
  await c.create([
    { equip: 'm:', name: 's:ahu1', siteRef: `r:${siteId}` },
    { point: 'm:', his: 'm:', kind: 's:Number', name: 's:temp', siteRef: `r:${siteId}`, equipRef: 'r:hq.ahu1', unit: 's:°C', tags: ['s:a', 'n:1'] },
  ]);

  const found = await c.find('point and his');
  t.equal(found.rows.length, 1);
  t.equal(found.rows[0]?.name, 's:temp');
  t.match(found.rows[0]?.equipRef, / ahu1$/);
  const pointId = String(found.rows[0]?.id).slice(2).split(' ')[0] as string;

  const one = await c.read(pointId); // GET read?id=@...
  t.equal(one.rows[0]?.unit, 's:°C');
  const byName = await c.read('hq.ahu1.temp');
  t.equal(String(byName.rows[0]?.id).split(' ')[0], `r:${pointId}`, 'read by fully qualified name');
  const many = await c.read([siteId, pointId]); // POST read with id rows
  t.same(many.rows.map((r) => String(r.id).split(' ')[0]), [`r:${siteId}`, `r:${pointId}`]);

  await c.update({ id: `r:${pointId}`, dis: 's:Supply temperature', tags: 'x:' });
  const upd = await c.read(pointId);
  t.equal(upd.rows[0]?.dis, 's:Supply temperature');
  t.notOk('tags' in (upd.rows[0] ?? {}), 'x: removes a tag, as WideSky 2.0 clients send it');

  // refresh: the client refreshes when it sees its token expired
  const before = c._ws_token as NonNullable<typeof c._ws_token>;
  c._ws_token = { ...before, expires_in: Date.now() - 1000 };
  await c.find('site');
  t.not(c._ws_token?.refresh_token, before.refresh_token, 'the client refreshed and got a rotated refresh token');
  t.ok((c._ws_token?.expires_in ?? 0) > Date.now());

  // a revoked/unknown token: the client logs in again on 401 by itself
  c._ws_token = { ...(c._ws_token), access_token: 'not-a-token' };
  const again = await c.find('site');
  t.equal(again.rows.length, 1, 'after a 401 the client logs in again and the call succeeds');

  await t.rejects(c.deleteById(siteId), 'a referenced site cannot be deleted');
  const del = await c.deleteByFilter('point', 0);
  t.equal(del.rows.length, 1);
  const gone = await c.read(pointId);
  t.notOk(gone.rows[0]?.id, 'an unknown id reads as an empty row');
});

t.test('impersonation and password change through the client', async (t) => {
  const s = await startApp(t);
  const admin = client(s.base);
  const g = await admin.create([{ actionPolicy: 'm:', name: 's:readAll', permissions: ['s:MODEL_READ'] }]);
  const pol = String(g.rows[0]?.id).slice(2).split(' ')[0] as string;
  const r = await admin.create([{ role: 'm:', name: 's:reader', actionPolicyRefs: [`r:${pol}`] }]);
  const role = String(r.rows[0]?.id).slice(2).split(' ')[0] as string;
  const readerId = await s.app.auth.addUser('reader@example.com', 'reader-password-1', role);
  await admin.create([{ site: 'm:', name: 's:hq' }]);

  admin.impersonateAs(readerId);
  const seen = await admin.find('site');
  t.equal(seen.rows.length, 1, 'reads work as the impersonated user');
  await t.rejects(admin.create([{ site: 'm:', name: 's:other' }]), 'and writes are refused: the reader has no MODEL_CREATE');
  admin.unsetImpersonate();

  const reader = client(s.base, 'reader@example.com', 'reader-password-1');
  await reader.login();
  await reader.updatePassword('reader-password-2');
  await reader.find('site'); // its own session is kept
  const fresh = client(s.base, 'reader@example.com', 'reader-password-2');
  t.equal((await fresh.find('site')).rows.length, 1, 'the new password works');
  const old = client(s.base, 'reader@example.com', 'reader-password-1');
  await t.rejects(old.login(), 'the old password does not');
});

t.test('a watch round trip through the client: watchSub, poll, watchExtend, watchUnsub', async (t) => {
  const s = await startApp(t);
  const c = client(s.base);
  await c.create([{ site: 'm:', name: 's:hq' }]);
  const made = await c.create([
    { point: 'm:', cur: 'm:', kind: 's:Number', name: 's:sat', siteRef: 'r:hq', unit: 's:°C' },
    { point: 'm:', cur: 'm:', kind: 's:Number', name: 's:rat', siteRef: 'r:hq' },
    { point: 'm:', cur: 'm:', kind: 's:Bool', name: 's:fan', siteRef: 'r:hq' },
  ]);
  const [sat, rat, fan] = made.rows.map((r) => String(r.id).slice(2).split(' ')[0] as string) as [string, string, string];
  // Readings come from drivers (point state), never from clients.
  s.app.points.setCur(sat, { curVal: new HNumber(18.5, '°C'), curStatus: 'ok' });

  const sub = await c.watchSub([sat, 'hq.rat'], 'n:1 min', 'dashboard');
  const watchId = String(sub.meta.watchId).slice(2);
  t.match(sub.meta.watchId, /^s:.+/, 'watchId is a Str');
  t.equal(sub.meta.lease, 'n:1 min');
  t.same(
    sub.rows.map((r) => [String(r.id).split(' ')[0], r.curVal, r.curStatus]),
    [
      [`r:${sat}`, 'n:18.5 °C', 's:ok'],
      [`r:${rat}`, undefined, 's:unknown'],
    ],
  );

  // The client has no watchPoll method: poll through its submitRequest, as its users do.
  const poll = (refresh = false): Promise<{ rows: Record<string, unknown>[] }> =>
    c.submitRequest('POST', '/api/watchPoll', { meta: { ver: '2.0', watchId: `s:${watchId}`, ...(refresh ? { refresh: 'm:' } : {}) }, cols: [{ name: 'id' }], rows: [] });
  t.equal((await poll()).rows.length, 0, 'nothing changed since watchSub');
  s.app.points.setCur(rat, { curVal: new HNumber(21), curStatus: 'ok' });
  const changed = await poll();
  t.same(changed.rows.map((r) => [String(r.id).split(' ')[0], r.curVal]), [[`r:${rat}`, 'n:21']], 'the changed point');

  const ext = await c.watchExtend(watchId, [fan], 'n:1 h');
  t.equal(ext.meta.lease, 'n:1 h', 'watchExtend appends and changes the lease');
  t.same((await poll(true)).rows.map((r) => String(r.id).split(' ')[0]), [`r:${sat}`, `r:${rat}`, `r:${fan}`]);

  await c.watchUnsub(watchId, [sat], false);
  t.same((await poll(true)).rows.map((r) => String(r.id).split(' ')[0]), [`r:${rat}`, `r:${fan}`], 'watchUnsub without close removes points');

  // Called with no points, the client sends a row `id: r:undefined` beside `close`.
  await c.watchUnsub(watchId, undefined);
  await t.rejects(poll(), 'polling a closed watch fails: the client re-subscribes');
  const ms = await c.watchSub([sat], '60000', 'ms as text');
  t.equal(ms.meta.lease, 'n:60 s', 'a lease without a unit is read as milliseconds, as the client documents it');
});

t.test('a history round trip through the client: hisWrite, hisRead, hisDelete (plain and batch)', async (t) => {
  const s = await startApp(t);
  const c = client(s.base);
  await c.create([{ site: 'm:', name: 's:hq', tz: 's:Sydney' }]);
  const made = await c.create([
    { point: 'm:', his: 'm:', kind: 's:Number', name: 's:temp', siteRef: 'r:hq', unit: 's:°C', tz: 's:Sydney' },
    { point: 'm:', his: 'm:', kind: 's:Bool', name: 's:fan', siteRef: 'r:hq', tz: 's:Sydney' },
  ]);
  const [temp, fan] = made.rows.map((r) => String(r.id).slice(2).split(' ')[0] as string) as [string, string];
  const T0 = Date.UTC(2024, 0, 12); // 2024-01-12T11:00+11:00 Sydney
  const HOUR = 3600_000;
  const ts = (h: number): string => `t:${new Date(T0 + h * HOUR).toISOString()} UTC`; // as Date.toHSJSON writes it

  // HisWritePayload strips units ("n:20 °C" -> "n:20"): the server takes them in the point's unit.
  const payload = new jsWideSky.HisWritePayload();
  payload.add(`r:${temp}`, [0, 1, 2, 3, 4, 5].map((h) => ({ ts: ts(h), val: `n:${20 + h} °C` })));
  payload.add(`r:${fan}`, [0, 1, 2].map((h) => ({ ts: ts(h), val: h % 2 === 0 })));
  t.equal(payload.size, 9);
  const w = await c.hisWrite(payload.payload);
  t.same(w.cols, [{ name: 'empty' }], 'hisWrite answers an empty grid');

  // hisRead with two Dates: GET hisRead?id=@...&range="<from> UTC,<to> UTC"
  const byDates = await c.hisRead(temp, new Date(T0), new Date(T0 + 3 * HOUR));
  t.same(byDates.rows, [
    { ts: 't:2024-01-12T00:00:00Z UTC', val: 'n:20 °C' },
    { ts: 't:2024-01-12T01:00:00Z UTC', val: 'n:21 °C' },
    { ts: 't:2024-01-12T02:00:00Z UTC', val: 'n:22 °C' },
  ], 'start included, end excluded, in UTC (the range\'s zone), with the point\'s unit');
  t.equal(byDates.meta.hisStart, 't:2024-01-12T00:00:00Z UTC');
  t.equal(byDates.meta.hisEnd, 't:2024-01-12T03:00:00Z UTC');
  t.match(byDates.meta.id, new RegExp(`^r:${temp}`));

  // A Date range string: the day of the point's zone, answered in that zone.
  const day = await c.hisRead(temp, '2024-01-12');
  t.equal(day.rows.length, 6, 'all of Sydney\'s 12 January');
  t.same(day.rows[0], { ts: 't:2024-01-12T11:00:00+11:00 Sydney', val: 'n:20 °C' });
  t.equal(day.meta.hisStart, 't:2024-01-12T00:00:00+11:00 Sydney');

  // Several points: id0, id1 in the query; value columns carry the point ids.
  const both = await c.hisRead([temp, fan], new Date(T0), new Date(T0 + 2 * HOUR));
  t.same(both.cols.map((col) => col.name), ['ts', 'v0', 'v1']);
  t.match((both.cols[1] as Record<string, unknown>).id, new RegExp(`^r:${temp}`));
  t.match((both.cols[2] as Record<string, unknown>).id, new RegExp(`^r:${fan}`));
  t.same(both.rows, [
    { ts: 't:2024-01-12T00:00:00Z UTC', v0: 'n:20 °C', v1: true },
    { ts: 't:2024-01-12T01:00:00Z UTC', v0: 'n:21 °C', v1: false },
  ]);

  // hisDelete: the client's POST with range and id (its range must be an s: Str).
  await c.hisDelete(temp, 's:2024-01-12T01:00:00Z UTC,2024-01-12T03:00:00Z UTC');
  const after = await c.hisRead(temp, new Date(T0), new Date(T0 + 6 * HOUR));
  t.same(after.rows.map((r) => r.val), ['n:20 °C', 'n:23 °C', 'n:24 °C', 'n:25 °C'], 'only that span is gone');
  await c.hisDelete([temp, fan], 's:2024-01-12');
  t.equal((await c.hisRead([temp, fan], '2024-01-12')).rows.length, 0, 'a Date range over two points (id0, id1) deletes both');

  // Errors reach the caller as rejections, and nothing is written.
  await t.rejects(c.hisWrite({ [ts(0)]: { [`r:${temp}`]: 's:warm' } }), 'a Str to a Number point is refused');
  await t.rejects(c.hisWrite({ [ts(0)]: { [`r:${temp}`]: 'n:1', 'r:nope': 'n:2' } }), 'an unknown point is refused');
  t.equal((await c.hisRead(temp, '2024-01-12')).rows.length, 0, 'nothing of either was written');
  await t.rejects(c.hisRead(temp, 'tomorrow'), 'a bad range is refused');

  // The batch helpers: hisWrite split in several requests, hisRead per point.
  const big = new jsWideSky.HisWritePayload();
  big.add(`r:${temp}`, Array.from({ length: 250 }, (_, i) => ({ ts: ts(i), val: `n:${i}` })));
  big.add(`r:${fan}`, Array.from({ length: 250 }, (_, i) => ({ ts: ts(i), val: i % 3 === 0 })));
  const bw = await c.batch.hisWrite(big, { batchSize: 100 });
  t.same(bw.errors, [], 'batch.hisWrite: no errors');
  const br = await c.batch.hisRead([temp, fan], new Date(T0), new Date(T0 + 250 * HOUR));
  t.same(br.errors, [], 'batch.hisRead: no errors');
  t.same(br.success.map((rows) => rows.length), [250, 250], 'every sample of both points');
  t.same(br.success[0]?.[249], { ts: 't:2024-01-22T09:00:00Z UTC', val: 'n:249 °C' });

  // batch.hisDelete first reads the span, then finds its start with Date.parse(ts without "t:"):
  // Date.parse('2024-01-12T00:00:00Z UTC') is NaN, so the client throws "Invalid time value"
  // before it sends a single hisDelete. Every Haystack DateTime this server writes carries its
  // zone name (docs/spec/interface.md: `t:<date>T<time><offset> <tz>`), so this is the client's to fix.
  await t.test('batch.hisDelete', { todo: 'the client Date.parses Haystack DateTimes with their zone name (NaN -> "Invalid time value")' }, async (t) => {
    const bd = await c.batch.hisDelete([temp, fan], new Date(T0 + 10 * HOUR), new Date(T0 + 250 * HOUR), { batchSize: 50 });
    t.same(bd.errors, [], 'batch.hisDelete: no errors');
    const left = await c.batch.hisRead([temp, fan], new Date(T0), new Date(T0 + 250 * HOUR));
    t.same(left.success.map((rows) => rows.length), [10, 10], 'batch.hisDelete removed its span of both points');
  });
});

t.test('pointWrite at level 17 through the client, as WideSky users call it', async (t) => {
  const s = await startApp(t);
  const c = client(s.base);
  await c.create([{ site: 'm:', name: 's:hq' }]);
  const made = await c.create([{ point: 'm:', writable: 'm:', kind: 's:Number', name: 's:sp', siteRef: 'r:hq', unit: 's:°C' }]);
  const sp = String(made.rows[0]?.id).slice(2).split(' ')[0] as string;
  // The client has no pointWrite method: its users call it through submitRequest, in JSON v2.
  const call = (row: Record<string, unknown>): Promise<{ rows: Record<string, unknown>[] }> =>
    c.submitRequest('POST', '/api/pointWrite', { meta: { ver: '2.0' }, cols: Object.keys(row).map((name) => ({ name })), rows: [row] });
  const written = await call({ id: `r:${sp}`, level: 'n:17', val: 'n:21.5 °C', who: 's:widesky' });
  t.equal(written.rows.length, 17, 'the answer is the array');
  t.same(written.rows[16], { level: 'n:17', levelDis: 's:17 (default)', val: 'n:21.5 °C', who: 's:widesky' }, 'level 17 holds the value and who');
  const read = await call({ id: `r:${sp}` });
  t.same(read.rows.filter((r) => 'val' in r).map((r) => r.level), ['n:17'], 'read back: only level 17 is set');
  const rec = await c.read(sp);
  t.equal(rec.rows[0]?.writeVal, 'n:21.5 °C', 'the point shows writeVal');
  t.equal(rec.rows[0]?.writeLevel, 'n:17');
  await call({ id: `r:${sp}`, level: 'n:17', who: 's:widesky' });
  t.equal((await c.read(sp)).rows[0]?.writeVal, undefined, 'a write without val relinquishes');
});
