/**
 * Push of watch changes over socket.io with a current client (socket.io-client 4, Engine.IO 4),
 * against a real Hayloft: pointData as the poll sets values, permission filtering, and the ends
 * (watch closed, lease expired, token revoked, bad token or watch, slow consumer).
 */
import t from 'tap';
import { io, type Socket } from 'socket.io-client';
import { createApiServer } from '../../src/api/server.js';
import { allOps } from '../../src/api/ops/index.js';
import { type PushOptions, pushGroup } from '../../src/api/push.js';
import { HDict, HGrid, HNumber, HRef, type HVal, MARKER } from '../../src/haystack/values.js';
import { type Clock, ManualClock, systemClock } from '../../src/lib/clock.js';
import { silentLogger } from '../../src/lib/log.js';
import { postGrid } from '../helpers/http.js';
import { startApp, type Running } from '../helpers/app.js';

async function points(s: Running, n: number): Promise<string[]> {
  const [site] = await s.app.model.create([HDict.of({ site: MARKER, name: 'hq', tz: 'Sydney' })]);
  const siteRef = site?.get('id') as HRef;
  const recs = await s.app.model.create(
    Array.from({ length: n }, (_, i) => HDict.of({ point: MARKER, cur: MARKER, kind: 'Number', unit: '°C', name: `p${i}`, siteRef })),
  );
  return recs.map((r) => (r.get('id') as HRef).id);
}

function grid(meta: Record<string, HVal>, ids: readonly string[] = []): HGrid {
  return HGrid.fromRows(ids.map((id) => HDict.of({ id: new HRef(id) })), HDict.of(meta), ['id']);
}

async function watchSub(base: string, headers: Record<string, string>, ids: string[], lease = new HNumber(1, 'min')): Promise<string> {
  const a = await postGrid(base, 'watchSub', grid({ watchDis: 'push test', lease }, ids), { headers });
  const w = a.grid?.meta.get('watchId');
  if (typeof w !== 'string') throw new Error(`watchSub failed: ${a.text}`);
  return w;
}

function connect(base: string, watchId: string, token: string, extra: Record<string, string> = {}): Socket {
  return io(`${base}/${watchId}`, { path: '/socket.io', transports: ['websocket'], extraHeaders: { authorization: `Bearer ${token}`, ...extra }, reconnection: false, forceNew: true });
}

/** Another server on the app's model and watches, with push options of its own; its base URL. */
async function pushServer(t: { teardown(f: () => unknown): void }, s: Running, clock: Clock, opts: Partial<PushOptions>): Promise<string> {
  const server = createApiServer({
    ops: allOps,
    auth: s.app.auth,
    ctx: { model: s.app.model, clock, log: silentLogger(), info: { serverName: 't', tz: {} as never, productVersion: '0', bootTime: 0 }, watches: s.app.watches, history: s.app.history, points: s.app.points, writer: s.app.writer },
    log: silentLogger(),
    maxBodyBytes: 1 << 20,
    debug: false,
    groups: [pushGroup({ auth: s.app.auth, watches: s.app.watches, log: silentLogger(), ...opts })],
  });
  const { port } = await server.listen(0, '127.0.0.1');
  t.teardown(() => server.close());
  return `http://127.0.0.1:${port}`;
}

/** The samples of GET /metrics, by name with labels as exposed. */
async function metrics(s: Running): Promise<Map<string, number>> {
  const text = await (await fetch(`${s.base}/metrics`, { headers: s.auth })).text();
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    const m = /^(hayloft_push_\S+) (\S+)$/.exec(line);
    if (m !== null) out.set(m[1] as string, Number(m[2]));
  }
  return out;
}

function next<T>(socket: Socket, event: string): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no ${event} event`)), 10_000);
    socket.once(event, (x: T) => {
      clearTimeout(timer);
      resolve(x);
    });
  });
}

t.test('pointData per changed point, as the poll sets it, in the JSON encoding', async (t) => {
  const s = await startApp(t);
  const ids = await points(s, 3);
  const watchId = await watchSub(s.base, s.auth, ids);
  const sock = connect(s.base, watchId, s.token);
  t.teardown(() => sock.close());
  await next(sock, 'connect');
  const got: Record<string, unknown>[] = [];
  sock.on('pointData', (d: Record<string, unknown>) => got.push(d));
  // What a driver's poll does: curVal/curStatus through point state.
  s.app.points.setCur(ids[0] as string, { curVal: new HNumber(21.5, '°C'), curStatus: 'ok' });
  s.app.points.setCur(ids[2] as string, { curStatus: 'down', curErr: 'device 1 does not answer' });
  while (got.length < 2) await next(sock, 'pointData');
  t.same(got, [
    { id: `r:${ids[0]}`, curVal: 'n:21.5 °C', curStatus: 's:ok' },
    { id: `r:${ids[2]}`, curStatus: 's:down', curErr: 's:device 1 does not answer' },
  ]);
  // A point set twice before the flush goes out once, with its newest value.
  got.length = 0;
  s.app.points.setCur(ids[1] as string, { curVal: new HNumber(1, '°C'), curStatus: 'ok' });
  s.app.points.setCur(ids[1] as string, { curVal: new HNumber(2, '°C'), curStatus: 'ok' });
  s.app.points.setCur(ids[0] as string, { curVal: new HNumber(22, '°C'), curStatus: 'ok' });
  while (got.length < 2) await next(sock, 'pointData');
  t.same(got, [
    { id: `r:${ids[1]}`, curVal: 'n:2 °C', curStatus: 's:ok' },
    { id: `r:${ids[0]}`, curVal: 'n:22 °C', curStatus: 's:ok' },
  ]);
  // Polling still works beside push.
  const poll = await postGrid(s.base, 'watchPoll', grid({ watchId }), { headers: s.auth });
  t.equal(poll.grid?.size, 3, 'watchPoll answers what changed since the watchSub');
  const open = await metrics(s);
  t.equal(open.get('hayloft_push_sockets'), 1, 'metrics: one watch socket');
  t.equal(open.get('hayloft_push_sessions'), 1, 'metrics: one Engine.IO session');
  t.equal(open.get('hayloft_push_events_total'), 4, 'metrics: the four pointData events sent');
  t.equal(open.get('hayloft_push_upgrades_total{result="push"}'), 1, 'metrics: one websocket upgrade');

  // Closing the watch ends its sockets.
  const gone = next<string>(sock, 'disconnect');
  await postGrid(s.base, 'watchUnsub', grid({ watchId, close: MARKER }), { headers: s.auth });
  t.equal(await gone, 'io server disconnect', 'watchUnsub close disconnects the socket');
  const closed = await metrics(s);
  t.equal(closed.get('hayloft_push_sockets'), 0, 'metrics: no watch socket');
  t.equal(closed.get('hayloft_push_disconnects_total{reason="watch_ended"}'), 1, 'metrics: one socket ended with its watch');
});

t.test('the same permission filtering as watchPoll; refusals at connect', async (t) => {
  const s = await startApp(t);
  const ids = await points(s, 2);
  const [pol] = await s.app.model.create([HDict.of({ actionPolicy: MARKER, name: 'watchAll', permissions: ['MODEL_READ', 'WATCH'] })]);
  const [role] = await s.app.model.create([HDict.of({ role: MARKER, name: 'watcher', actionPolicyRefs: [pol?.get('id') as HRef] })]);
  await s.app.auth.addUser('watcher@example.com', 'watcher-password-1', (role?.get('id') as HRef).id);
  const login = await s.login('watcher@example.com', 'watcher-password-1');
  const token = String(login.body.access_token);
  const h = { authorization: `Bearer ${token}` };
  const watchId = await watchSub(s.base, h, ids);
  const sock = connect(s.base, watchId, token);
  t.teardown(() => sock.close());
  await next(sock, 'connect');
  // The policy narrows to p0 after the subscription: p1 is then answered as unknown, as watchPoll does.
  await s.app.model.update([HDict.of({ id: pol?.get('id') as HRef, filter: 'name == "p0"' })]);
  const got: Record<string, unknown>[] = [];
  sock.on('pointData', (d: Record<string, unknown>) => got.push(d));
  s.app.points.setCur(ids[0] as string, { curVal: new HNumber(1, '°C'), curStatus: 'ok' });
  s.app.points.setCur(ids[1] as string, { curVal: new HNumber(2, '°C'), curStatus: 'ok' });
  while (got.length < 2) await next(sock, 'pointData');
  t.same(got, [
    { id: `r:${ids[0]}`, curVal: 'n:1 °C', curStatus: 's:ok' },
    { id: `r:${ids[1]}`, curStatus: 's:unknown', curErr: 's:unknown point' },
  ]);

  // Another user's watch looks unknown; a bad token is refused.
  const admin = connect(s.base, watchId, s.token);
  const e1 = await next<Error & { data?: { errCode?: string } }>(admin, 'connect_error');
  t.equal(e1.data?.errCode, 'HL_WATCH_NOT_FOUND', "another user's watch is unknown");
  admin.close();
  const bad = connect(s.base, watchId, 'not-a-token');
  const e2 = await next<Error & { data?: { errCode?: string } }>(bad, 'connect_error');
  t.equal(e2.data?.errCode, 'HL_UNAUTHORIZED', 'an invalid token is refused');
  bad.close();
  // An admin acting as the watcher (the handshake's auth, as a browser sends it: no header) reaches the watcher's watch.
  const watcherId = String(s.app.auth.listUsers().find((u) => u.username === 'watcher@example.com')?.id);
  const acting = io(`${s.base}/${watchId}`, { path: '/socket.io', transports: ['websocket'], auth: { token: s.token, impersonate: watcherId }, reconnection: false, forceNew: true });
  await next(acting, 'connect');
  t.pass('auth.impersonate in the handshake acts as that user');
  acting.close();

  // Logging out revokes the token: the socket is closed at its next event.
  const gone = next<string>(sock, 'disconnect');
  await fetch(`${s.base}/oauth2/token`, { method: 'DELETE', headers: h });
  s.app.points.setCur(ids[0] as string, { curVal: new HNumber(3, '°C'), curStatus: 'ok' });
  t.equal(await gone, 'io server disconnect', 'a revoked token closes the socket');
});

t.test('an expired lease ends the sockets; a slow consumer is dropped', async (t) => {
  const clock = new ManualClock(Date.UTC(2025, 0, 1));
  const s = await startApp(t, { clock });
  const ids = await points(s, 20);
  const watchId = await watchSub(s.base, s.auth, ids, new HNumber(30, 's'));
  const sock = connect(s.base, watchId, s.token);
  t.teardown(() => sock.close());
  await next(sock, 'connect');
  const gone = next<string>(sock, 'disconnect');
  clock.advance(31_000);
  s.app.watches.housekeep();
  t.equal(await gone, 'io server disconnect', 'the lease expired: the socket is closed');

  // A server whose sockets may queue 5 packets: 20 changes in one poll overflow it.
  const base = await pushServer(t, s, clock, { maxQueued: 5 });
  const w2 = await watchSub(base, s.auth, ids);
  const slow = connect(base, w2, s.token);
  t.teardown(() => slow.close());
  await next(slow, 'connect');
  const dropped = next<string>(slow, 'disconnect');
  for (const id of ids) s.app.points.setCur(id, { curVal: new HNumber(Math.random(), '°C'), curStatus: 'ok' });
  t.equal(await dropped, 'transport close', 'the slow consumer was disconnected, not buffered');
  const poll = await postGrid(base, 'watchPoll', grid({ watchId: w2 }), { headers: s.auth });
  t.equal(poll.grid?.size, 20, 'its changes are still there to poll');
});

t.test('push over HTTP and HTTPS at once; stop() ends the sockets of both', async (t) => {
  const s = await startApp(t);
  const ids = await points(s, 1);
  const watchId = await watchSub(s.base, s.auth, ids);
  const plain = connect(s.base, watchId, s.token);
  const secure = io(`https://127.0.0.1:${s.app.httpsPort}/${watchId}`, {
    path: '/socket.io',
    transports: ['websocket'],
    extraHeaders: { authorization: `Bearer ${s.token}` },
    reconnection: false,
    forceNew: true,
    // The self-signed certificate made at first start.
    rejectUnauthorized: false,
  });
  t.teardown(() => {
    plain.close();
    secure.close();
  });
  await Promise.all([next(plain, 'connect'), next(secure, 'connect')]);
  const ends = Promise.all([next<string>(plain, 'disconnect'), next<string>(secure, 'disconnect')]);
  const stopped = await Promise.race([s.stop().then(() => 'stopped'), new Promise((res) => setTimeout(() => res('still stopping after 8 s'), 8000))]);
  t.equal(stopped, 'stopped', 'stop() does not wait on open sockets');
  t.same((await ends).length, 2, 'both sockets were ended by the server');
});

t.test('the main namespace takes the same token as a watch; a session in no namespace is closed', async (t) => {
  const s = await startApp(t);
  const [pol] = await s.app.model.create([HDict.of({ actionPolicy: MARKER, name: 'readOnly', permissions: ['MODEL_READ'] })]);
  const [role] = await s.app.model.create([HDict.of({ role: MARKER, name: 'reader', actionPolicyRefs: [pol?.get('id') as HRef] })]);
  await s.app.auth.addUser('reader@example.com', 'reader-password-1', (role?.get('id') as HRef).id);
  const reader = String((await s.login('reader@example.com', 'reader-password-1')).body.access_token);
  const root = (opts: Record<string, unknown>): Socket => io(s.base, { path: '/socket.io', transports: ['websocket'], reconnection: false, forceNew: true, ...opts });
  const refusal = async (sock: Socket): Promise<string | undefined> => {
    const e = await next<Error & { data?: { errCode?: string } }>(sock, 'connect_error');
    sock.close();
    return e.data?.errCode;
  };
  t.equal(await refusal(root({})), 'HL_UNAUTHORIZED', 'no token: refused');
  t.equal(await refusal(root({ auth: { token: 'not-a-token' } })), 'HL_UNAUTHORIZED', 'a bad token: refused');
  t.equal(await refusal(root({ auth: { token: reader } })), 'HL_FORBIDDEN', 'a user without WATCH: refused');
  const ok = root({ extraHeaders: { authorization: `Bearer ${s.token}` } });
  await next(ok, 'connect');
  t.pass('a valid token with WATCH connects');
  ok.close();
  const m = await metrics(s);
  t.equal(m.get('hayloft_push_refused_total{code="HL_UNAUTHORIZED"}'), 2, 'metrics: two refused without a valid token');
  t.equal(m.get('hayloft_push_refused_total{code="HL_FORBIDDEN"}'), 1, 'metrics: one refused without WATCH');
  t.equal(m.get('hayloft_push_sockets'), 0, 'metrics: the main namespace holds no watch socket');

  // A server whose sessions must join a namespace within 300 ms.
  const base = await pushServer(t, s, systemClock, { connectTimeoutMs: 300 });
  // Engine.IO handshakes by long polling, as a client starts: EIO 4 joins no namespace until it
  // asks; EIO 3 (socket.io 2) is put in the main namespace at once, which wants a token.
  const handshake = async (query: string): Promise<string> => {
    const a = await fetch(`${base}/socket.io/?transport=polling&${query}`);
    const text = await a.text();
    const m = /"sid":"([^"]+)"/.exec(text);
    if (a.status !== 200 || m === null) throw new Error(`handshake: ${a.status} ${text}`);
    return m[1] as string;
  };
  const poll = async (query: string, sid: string): Promise<{ status: number; text: string }> => {
    const a = await fetch(`${base}/socket.io/?transport=polling&${query}&sid=${sid}`);
    return { status: a.status, text: await a.text() };
  };
  const v4 = await handshake('EIO=4');
  const v3 = await handshake('EIO=3');
  const v3Token = await handshake(`EIO=3&Authorization=${encodeURIComponent(s.token)}`);
  const refused = await poll('EIO=3', v3);
  t.match(refused.text, /HL_UNAUTHORIZED/, 'EIO 3 without a token: the main namespace refuses it');
  const joined = await poll(`EIO=3&Authorization=${encodeURIComponent(s.token)}`, v3Token);
  t.match(joined.text, /^\d+:40$|40$/, `EIO 3 with a token: connected to the main namespace (${joined.text})`);
  await new Promise((r) => setTimeout(r, 1000));
  for (const [what, q, sid] of [['EIO 4 in no namespace', 'EIO=4', v4], ['EIO 3 refused', 'EIO=3', v3]] as const) {
    // The waiting poll gets Engine.IO's close packet ("1", last), and the session is gone.
    const after = await poll(q, sid);
    t.ok(after.status === 200 && after.text.endsWith('1'), `${what}: closed by the server after the connect timeout (${JSON.stringify(after.text)})`);
    const gone = await poll(q, sid);
    t.equal(gone.status, 400, `${what}: then unknown`);
    t.match(gone.text, /Session ID unknown/);
  }
});
