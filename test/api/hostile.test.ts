/**
 * Issue 18, end to end against the real App: hostile input from an authenticated client on the
 * LAN. Each case is one of the issue's findings: a catastrophic regex, grids nested 10,000 deep,
 * a 200 MB upload announced by Content-Length, error texts as large as the attack, a burst of
 * bodies past the budget, slow and idle clients. Every refusal is an error grid with its code,
 * changes nothing, and the server answers the next request.
 */
import net from 'node:net';
import { io } from 'socket.io-client';
import t, { type Test } from 'tap';
import { HNumber, HRef, MARKER } from '../../src/haystack/values.js';
import { ErrorCodes } from '../../src/lib/errors.js';
import { ADMIN, type Running, startApp, tokenRequest } from '../helpers/app.js';
import { freeUdpPort } from '../helpers/bacnet-device.js';
import { type Answer, errOf, gridOf, postGrid, request } from '../helpers/http.js';

const MIB = 1024 * 1024;

/** A raw HTTP exchange over a socket: the head is written, then `body` bytes in 1 MiB pieces while the server reads them. */
function rawPost(
  port: number,
  path: string,
  headers: Record<string, string | number>,
  bodyBytes: number,
): Promise<{ response: string; written: number; writeError: string | undefined }> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    let response = '';
    let written = 0;
    let writeError: string | undefined;
    let answered = false;
    const piece = Buffer.alloc(MIB, 0x20);
    socket.setEncoding('utf8');
    socket.on('data', (c: string) => {
      response += c;
      // The whole error grid is in: stop sending, as a client that reads early answers does.
      if (!answered && /\r\n\r\n[\s\S]*\}$/.test(response)) {
        answered = true;
        socket.end();
      }
    });
    socket.on('error', (e: NodeJS.ErrnoException) => {
      writeError = e.code ?? e.message;
    });
    socket.on('close', () => resolve({ response, written, writeError }));
    const head = Object.entries({ host: '127.0.0.1', ...headers }).map(([k, v]) => `${k}: ${v}\r\n`).join('');
    socket.write(`POST ${path} HTTP/1.1\r\n${head}\r\n`);
    const pump = (): void => {
      while (!answered && !socket.destroyed && written < bodyBytes) {
        const n = Math.min(piece.length, bodyBytes - written);
        written += n;
        if (!socket.write(n === piece.length ? piece : piece.subarray(0, n))) {
          socket.once('drain', pump);
          return;
        }
      }
    };
    pump();
  });
}

function statusOf(raw: string): number {
  return Number(/^HTTP\/1\.1 (\d{3})/.exec(raw)?.[1] ?? 0);
}

function bodyOf(raw: string): { meta?: Record<string, string> } {
  const i = raw.indexOf('\r\n\r\n');
  const len = Number(/content-length: (\d+)/i.exec(raw)?.[1]);
  return JSON.parse(raw.slice(i + 4, i + 4 + len)) as { meta?: Record<string, string> };
}

/** Asserts an error grid with the code, and a message short whatever the input's size. */
function refused(t: Tap, a: Answer, status: number, code: string, what: string): string {
  t.equal(a.status, status, `${what}: ${status}${a.status === status ? '' : ` (got ${a.status}: ${a.text.slice(0, 200)})`}`);
  const e = errOf(a);
  t.equal(a.grid?.meta.get('err'), MARKER, `${what}: an error grid`);
  t.equal(e?.code, code, `${what}: ${code}`);
  t.ok(a.text.length < 2000, `${what}: the answer is short (${a.text.length} bytes)`);
  return e?.dis ?? '';
}

type Tap = Test;

async function stillServes(t: Tap, r: Running): Promise<void> {
  const a = await request(r.base, '/api/about', { headers: r.auth });
  t.equal(a.status, 200, 'the server still answers');
}

async function world(r: Running): Promise<void> {
  const site = await postGrid(r.base, 'createRec', gridOf({ site: MARKER, name: 'hq', dis: 'HQ' }), { headers: r.auth });
  const siteId = (site.grid?.first()?.get('id') as HRef).id;
  await postGrid(r.base, 'createRec', gridOf({ point: MARKER, his: MARKER, kind: 'Number', tz: 'UTC', name: 'p1', siteRef: HRef.of(siteId), dis: 'a'.repeat(48) + '!' }), {
    headers: r.auth,
  });
}

const jsonHeaders = (r: Running): Record<string, string> => ({ ...r.auth, 'content-type': 'application/json', accept: 'application/json' });

t.test('a catastrophic regex answers at once and other requests go on', async (t) => {
  const r = await startApp(t);
  await world(r);
  // Under V8's backtracking engine this single request took more than 10 s with the event loop held.
  const [redos, about] = await Promise.all([
    postGrid(r.base, 'read', gridOf({ filter: 'point and dis =~ /(a+)+$/' }), { headers: r.auth }),
    request(r.base, '/api/about', { headers: r.auth }),
  ]);
  t.equal(redos.status, 200);
  t.equal(redos.grid?.size, 0, 'no match: the text ends with "!"');
  t.equal(about.status, 200);
  const anchored = await postGrid(r.base, 'read', gridOf({ filter: 'point and dis =~ /^(a|aa)+!$/' }), { headers: r.auth });
  t.equal(anchored.grid?.size, 1, 'and a match where there is one');
  const back = refused(t, await postGrid(r.base, 'read', gridOf({ filter: 'dis =~ /(a)\\1/' }), { headers: r.auth }), 400, ErrorCodes.BAD_FILTER, 'a backreference');
  t.match(back, /backreferences .* are not supported/);
});

t.test('grids nested 10,000 deep are a 400 naming the limit on every op', async (t) => {
  const r = await startApp(t);
  const deep = '['.repeat(10_000) + ']'.repeat(10_000);
  const bodies: [string, string][] = [
    ['cell', `{"meta":{"ver":"3.0"},"cols":[{"name":"id"}],"rows":[{"id":${deep}}]}`],
    ['grid meta', `{"meta":{"ver":"3.0","x":${deep}},"cols":[{"name":"id"}],"rows":[]}`],
    ['column meta', `{"meta":{"ver":"3.0"},"cols":[{"name":"id","x":${deep}}],"rows":[]}`],
  ];
  for (const op of ['read', 'createRec', 'updateRec', 'deleteRec', 'hisRead', 'hisWrite', 'watchSub', 'watchPoll', 'watchUnsub']) {
    for (const [where, body] of bodies) {
      const a = await request(r.base, `/api/${op}`, { method: 'POST', headers: jsonHeaders(r), body });
      const dis = refused(t, a, 400, ErrorCodes.LIMIT, `${op}, ${where}`);
      t.match(dis, /above the limit of 32 \(maxDepth\)/);
    }
  }
  const zinc = await request(r.base, '/api/read', { method: 'POST', headers: { ...r.auth, 'content-type': 'text/zinc' }, body: `ver:"3.0"\nid\n${deep}\n` });
  refused(t, zinc, 400, ErrorCodes.LIMIT, 'zinc');
  const all = await postGrid(r.base, 'read', gridOf({ filter: 'id' }), { headers: r.auth });
  t.equal(all.grid?.rows.filter((d) => !d.has('user') && !d.has('role') && !d.has('actionPolicy')).length, 0, 'nothing was created');
  await stillServes(t, r);
});

t.test('error texts stay short whatever the input', async (t) => {
  const r = await startApp(t);
  await world(r);
  const range = refused(t, await postGrid(r.base, 'hisRead', gridOf({ id: HRef.of('hq.p1'), range: 'x'.repeat(60_000) }), { headers: r.auth }), 400, ErrorCodes.LIMIT, 'a 60,000-char range');
  t.equal(range, 'range: a text of 60,000 chars is above the limit of 256 (maxRangeChars)');
  const ref = `{"meta":{"ver":"3.0"},"cols":[{"name":"id"}],"rows":[{"id":"r:${'x'.repeat(5 * MIB)}"}]}`;
  const big = await request(r.base, '/api/createRec', { method: 'POST', headers: jsonHeaders(r), body: ref });
  t.match(refused(t, big, 400, ErrorCodes.LIMIT, 'a 5 MB Ref'), /^rows\[0\]\.id: a text of 5,242,882 chars is above the limit of 65,536 \(maxValueChars\)$/);
  const bad = await request(r.base, '/api/read', { method: 'POST', headers: jsonHeaders(r), body: `{"meta":{"ver":"3.0"},"cols":[{"name":"id"}],"rows":[{"id":"r:${'@'.repeat(60_000)}"}]}` });
  t.match(refused(t, bad, 400, ErrorCodes.BAD_VALUE, 'a bad 60,000-char Ref'), /"r:@{98}…" \(60,002 chars\) is not a Ref/);
  const filter = await postGrid(r.base, 'read', gridOf({ filter: 'a and '.repeat(2000) + 'b' }), { headers: r.auth });
  t.match(refused(t, filter, 400, ErrorCodes.LIMIT, 'a long filter'), /\(maxFilterChars\)/);
  t.notOk(r.logs.join('').includes('x'.repeat(1000)), 'nor do the logs repeat the input');
  await stillServes(t, r);
});

t.test('413 from Content-Length before reading, per op', async (t) => {
  const r = await startApp(t);
  // The issue's case: a 200 MB hisWrite with a Content-Length, over a real socket. The client
  // must read a 413 with an error grid, not EPIPE or a reset before any status line.
  const huge = await rawPost(r.app.port, '/api/hisWrite', { authorization: r.auth.authorization as string, 'content-type': 'application/json', 'content-length': 200 * MIB }, 200 * MIB);
  t.equal(statusOf(huge.response), 413, `413 (got ${huge.response.slice(0, 80)}; write error ${huge.writeError ?? 'none'})`);
  t.equal(huge.response.match(/HTTP\/1\.1/g)?.length, 1, 'one answer: nothing more when the client gives up its upload');
  t.equal(bodyOf(huge.response).meta?.errCode, `s:${ErrorCodes.TOO_LARGE}`);
  t.match(bodyOf(huge.response).meta?.dis, /limit of 67,108,864 bytes \(maxBodyBytes\)/);
  // Without a token at all: still the 413 first, from the header alone.
  const anon = await rawPost(r.app.port, '/api/hisWrite', { 'content-type': 'application/json', 'content-length': 200 * MIB }, 4 * MIB);
  t.equal(statusOf(anon.response), 413, 'before authentication');
  // Reads and watch ops take far less than bulk writes.
  const twoMib = `{"meta":{"ver":"3.0"},"cols":[{"name":"id"}],"rows":[${Array.from({ length: 60_000 }, (_, i) => `{"id":"r:p${String(i).padStart(30, '0')}"}`).join(',')}]}`;
  t.ok(twoMib.length > MIB && twoMib.length < 64 * MIB);
  for (const op of ['read', 'watchSub', 'watchPoll', 'watchUnsub', 'deleteRec', 'hisRead']) {
    const a = await request(r.base, `/api/${op}`, { method: 'POST', headers: jsonHeaders(r), body: twoMib });
    t.match(refused(t, a, 413, ErrorCodes.TOO_LARGE, op), /limit of 1,048,576 bytes \(maxRequestBodyBytes\)/);
  }
  const write = await request(r.base, '/api/createRec', { method: 'POST', headers: jsonHeaders(r), body: twoMib });
  t.not(write.status, 413, 'createRec takes it (and refuses it for what it says)');
  await stillServes(t, r);
});

t.test('bodies past the budget in flight are answered 503 with Retry-After', async (t) => {
  const r = await startApp(t, { env: { HAYLOFT_MAX_BODY_BYTES_IN_FLIGHT: String(MIB), HAYLOFT_MAX_REQUEST_BODY_BYTES: String(MIB) } });
  // A slow upload holds all but 4 KiB of the budget: it announced them and sends a little at a time.
  const slow = net.connect(r.app.port, '127.0.0.1');
  slow.on('error', () => {});
  const n = MIB - 4096;
  slow.write(`POST /api/read HTTP/1.1\r\nhost: x\r\nauthorization: ${r.auth.authorization as string}\r\ncontent-type: application/json\r\ncontent-length: ${n}\r\n\r\n{"meta":`);
  await new Promise((res) => setTimeout(res, 200));
  const body = `{"meta":{"ver":"3.0"},"cols":[{"name":"filter"}],"rows":[{"filter":"s:site"}]}`.padEnd(300 * 1024, ' ');
  const busy = await request(r.base, '/api/read', { method: 'POST', headers: jsonHeaders(r), body });
  refused(t, busy, 503, ErrorCodes.BUSY, 'a second body past the budget');
  t.equal(busy.headers.get('retry-after'), '2');
  // GraphQL queries and the administration calls read their bodies under the same budget.
  const query = JSON.stringify({ query: '{ haystack { search(filter: "site") { entity { id } } } }' }).padEnd(8 * 1024, ' ');
  const gql = await request(r.base, '/graphql', { method: 'POST', headers: jsonHeaders(r), body: query });
  refused(t, gql, 503, ErrorCodes.BUSY, 'a GraphQL query past the budget');
  t.equal(gql.headers.get('retry-after'), '2', 'GraphQL: Retry-After');
  const user = JSON.stringify({ email: 'new@example.com', name: 'New', roles: ['admin'], password: 'new-password-123' }).padEnd(8 * 1024, ' ');
  const admin = await request(r.base, '/api/admin/user', { method: 'PUT', headers: jsonHeaders(r), body: user });
  refused(t, admin, 503, ErrorCodes.BUSY, 'an admin call past the budget');
  t.equal(admin.headers.get('retry-after'), '2', 'admin: Retry-After');
  // So do the token endpoint and the password change (in their own answer shapes).
  const tokenBody = JSON.stringify({ grant_type: 'password', username: 'admin@example.com', password: 'x' }).padEnd(8 * 1024, ' ');
  const tok = await tokenRequest(r.base, tokenBody);
  t.equal(tok.status, 503, 'a token request past the budget: 503');
  t.equal(tok.body.error, 'temporarily_unavailable', 'in the OAuth error shape');
  t.equal(tok.headers.get('retry-after'), '2', 'token: Retry-After');
  const pw = await request(r.base, '/api/updatePassword', { method: 'POST', headers: jsonHeaders(r), body: JSON.stringify({ newPassword: 'another-password-1' }).padEnd(8 * 1024, ' ') });
  t.equal(pw.status, 503, `a password change past the budget: 503 (${pw.text.slice(0, 100)})`);
  t.equal(pw.headers.get('retry-after'), '2', 'updatePassword: Retry-After');
  const none = await r.login('new@example.com', 'new-password-123');
  t.equal(none.status, 400, 'the refused createUser created no one');
  slow.destroy();
  await new Promise((res) => setTimeout(res, 200));
  const after = await request(r.base, '/api/read', { method: 'POST', headers: jsonHeaders(r), body });
  t.equal(after.status, 200, 'the budget is given back when the slow client goes');
  const gqlAfter = await request(r.base, '/graphql', { method: 'POST', headers: jsonHeaders(r), body: query });
  t.equal(gqlAfter.status, 200, `GraphQL answers once there is budget (${gqlAfter.text.slice(0, 200)})`);
  const adminAfter = await request(r.base, '/api/admin/user', { method: 'PUT', headers: jsonHeaders(r), body: user });
  t.equal(adminAfter.status, 200, `and so does createUser (${adminAfter.text.slice(0, 200)})`);
  t.equal((await r.login(ADMIN.username, ADMIN.password)).status, 200, 'the password was not changed, and logins work again');
});

t.test('slow and idle clients do not pile up', async (t) => {
  const r = await startApp(t, { env: { HAYLOFT_HEADERS_TIMEOUT_MS: '1000', HAYLOFT_REQUEST_TIMEOUT_MS: '2000', HAYLOFT_KEEP_ALIVE_TIMEOUT_MS: '300', HAYLOFT_MAX_CONNECTIONS_PER_ADDRESS: '8' } });
  const closed = (s: net.Socket): Promise<string> =>
    new Promise((resolve) => {
      let got = '';
      s.setEncoding('utf8');
      s.on('data', (c: string) => (got += c));
      s.on('error', () => {});
      s.on('close', () => resolve(got));
    });

  t.test('slowloris: headers dribbled in are cut after headersTimeoutMs', async (t) => {
    const s = net.connect(r.app.port, '127.0.0.1');
    const done = closed(s);
    s.write('POST /api/read HTTP/1.1\r\nhost: x\r\n');
    const drip = setInterval(() => s.writable && s.write('x-slow: 1\r\n'), 200);
    const got = await done;
    clearInterval(drip);
    t.match(got, /^HTTP\/1\.1 408/, 'answered 408 and closed');
  });

  t.test('a websocket upgrade to /socket.io dribbled in is cut the same way', async (t) => {
    const s = net.connect(r.app.port, '127.0.0.1');
    const done = closed(s);
    s.write('GET /socket.io/?EIO=4&transport=websocket HTTP/1.1\r\nhost: x\r\nupgrade: websocket\r\nconnection: Upgrade\r\n');
    const drip = setInterval(() => s.writable && s.write('x-slow: 1\r\n'), 200);
    const got = await done;
    clearInterval(drip);
    t.match(got, /^HTTP\/1\.1 408/, 'answered 408 and closed');
  });

  t.test('a socket.io polling body dribbled in is cut after requestTimeoutMs', async (t) => {
    const s = net.connect(r.app.port, '127.0.0.1');
    const done = closed(s);
    s.write('POST /socket.io/?EIO=4&transport=polling&sid=x HTTP/1.1\r\nhost: x\r\ncontent-type: text/plain\r\ncontent-length: 1000\r\n\r\n4');
    const drip = setInterval(() => s.writable && s.write('0'), 200);
    const got = await done;
    clearInterval(drip);
    t.match(got, /^HTTP\/1\.1 (408|400)/, `cut, not held open (${got.slice(0, 40)})`);
  });

  t.test('idle keep-alive sockets are closed after keepAliveTimeoutMs', async (t) => {
    const sockets = Array.from({ length: 6 }, () => net.connect(r.app.port, '127.0.0.1'));
    const all = sockets.map(closed);
    for (const s of sockets) s.write(`GET /api/about HTTP/1.1\r\nhost: x\r\nauthorization: ${r.auth.authorization as string}\r\n\r\n`);
    const answers = await Promise.all(all);
    for (const a of answers) t.match(a, /^HTTP\/1\.1 200/, 'answered, kept alive, then closed by the server when idle');
  });

  t.test('connections past maxConnectionsPerAddress are closed at once', async (t) => {
    const sockets = Array.from({ length: 12 }, () => net.connect(r.app.port, '127.0.0.1'));
    const ends = sockets.map(closed);
    await new Promise((res) => setTimeout(res, 300));
    const open = sockets.filter((s) => !s.destroyed && s.readyState === 'open').length;
    t.ok(open <= 8, `at most 8 stay open (${open})`);
    for (const s of sockets) s.destroy();
    await Promise.all(ends);
    await stillServes(t, r);
  });
});

t.test('clients that stop midway are cut after the stall time; nothing else is', async (t) => {
  // Stall time: twice the larger of headersTimeoutMs and keepAliveTimeoutMs, 2 s here; the
  // whole-request timeout stays at its 5 minutes, so only the stall watch can cut these.
  const bacnet = { HAYLOFT_BACNET_INTERFACE: '127.0.0.8', HAYLOFT_BACNET_PORT: String(await freeUdpPort('127.0.0.8')) };
  const r = await startApp(t, { env: { HAYLOFT_HEADERS_TIMEOUT_MS: '1000', HAYLOFT_KEEP_ALIVE_TIMEOUT_MS: '300', HAYLOFT_MAX_BODY_BYTES_IN_FLIGHT: String(12 * MIB), ...bacnet } });
  const sleep = (ms: number): Promise<void> => new Promise((res) => setTimeout(res, ms));

  t.test('a socket that sends nothing is answered 408 after headersTimeoutMs', async (t) => {
    const t0 = Date.now();
    const s = net.connect(r.app.port, '127.0.0.1');
    let got = '';
    s.setEncoding('utf8');
    s.on('data', (c: string) => (got += c));
    s.on('error', () => {});
    await new Promise((res) => s.on('close', res));
    t.match(got, /^HTTP\/1\.1 408/, 'answered 408 and closed');
    t.ok(Date.now() - t0 < 4000, `within a few seconds (${Date.now() - t0} ms)`);
  });

  t.test('a client that stops reading a large answer is cut, and its answer with it', async (t) => {
    // 24 records of 60,000 characters each, 10 times: about 29 MB of answer (the name twice, in the id and in dis), more than the
    // kernel's buffers on both ends of a loopback connection hold.
    for (let b = 0; b < 10; b++) {
      const rows = Array.from({ length: 24 }, (_, i) => ({ site: MARKER, dis: `${b}-${i}-`.padEnd(60_000, 'x'), bulk: MARKER }));
      const made = await postGrid(r.base, 'createRec', gridOf(rows), { headers: r.auth });
      t.equal(made.status, 200, `batch ${b} created${made.status === 200 ? "" : ` (${made.text.slice(0, 200)})`}`);
      if (made.status !== 200) return;
    }
    const path = `/api/read?filter=bulk`;
    const whole = await request(r.base, path, { headers: jsonHeaders(r) });
    t.equal(whole.status, 200);
    const full = Buffer.byteLength(whole.text);
    t.ok(full > 25_000_000, `a client that reads gets it all (${full} bytes)`);

    const s = net.connect(r.app.port, '127.0.0.1');
    s.write(`GET ${path} HTTP/1.1\r\nhost: x\r\nauthorization: ${r.auth.authorization as string}\r\naccept: application/json\r\n\r\n`);
    s.pause();
    let received = 0;
    s.on('data', (c: Buffer) => (received += c.length));
    s.on('error', () => {});
    const closed = new Promise((res) => s.on('close', res));
    // Not read for twice the stall time, then read to the end.
    await sleep(4500);
    s.resume();
    await closed;
    t.ok(received > 0 && received < full, `cut part way: ${received} of ${full} bytes came`);
    await stillServes(t, r);
  });

  t.test('a client that stops sending its body is cut, and its share of the body budget freed', async (t) => {
    const s = net.connect(r.app.port, '127.0.0.1');
    s.on('error', () => {});
    const closed = new Promise((res) => s.on('close', res));
    s.write(`POST /api/hisWrite HTTP/1.1\r\nhost: x\r\nauthorization: ${r.auth.authorization as string}\r\ncontent-type: application/json\r\ncontent-length: ${10 * MIB}\r\n\r\n`);
    s.write(Buffer.alloc(MIB, 0x20));
    await sleep(500);
    // 10 of the 12 MiB budget are held: a second 10 MiB body waits its turn.
    const busy = await rawPost(r.app.port, '/api/hisWrite', { authorization: r.auth.authorization as string, 'content-type': 'application/json', 'content-length': 10 * MIB }, MIB);
    t.equal(statusOf(busy.response), 503, 'while the stalled body holds the budget, another is refused 503');
    const t0 = Date.now();
    await closed;
    t.ok(Date.now() - t0 < 5000, `the stalled client is cut after about 2 s (${Date.now() - t0} ms more)`);
    const after = await rawPost(r.app.port, '/api/hisWrite', { authorization: r.auth.authorization as string, 'content-type': 'application/json', 'content-length': 10 * MIB }, 10 * MIB);
    t.not(statusOf(after.response), 503, `then the budget is free: the same body is read (${statusOf(after.response)})`);
  });

  t.test('a request that waits on a slow op is not cut', async (t) => {
    // A discover that listens 4 s (longer than the stall time) for a device that never answers:
    // nothing flows either way while it waits.
    const silent = `127.0.0.9:${await freeUdpPort('127.0.0.9')}`;
    const t0 = Date.now();
    const a = await postGrid(r.base, 'discover', gridOf({ proto: 'bacnet', address: silent, timeout: HNumber.of(4, 's') }), { headers: r.auth });
    t.ok(Date.now() - t0 >= 3900, `it ran its 4 s (${Date.now() - t0} ms)`);
    t.equal(a.status, 200, `and was answered (${a.text.slice(0, 200)})`);
  });
});

t.test('socket.io requests are under the same limits as the rest', async (t) => {
  const r = await startApp(t, { env: { HAYLOFT_MAX_CONNECTIONS_PER_ADDRESS: '4', HAYLOFT_MAX_BODY_BYTES_IN_FLIGHT: String(MIB), HAYLOFT_MAX_REQUEST_BODY_BYTES: String(MIB) } });
  const sleep = (ms: number): Promise<void> => new Promise((res) => setTimeout(res, ms));

  // Websockets: six from one address, at most four get through.
  const sockets = Array.from({ length: 6 }, () => io(r.base, { path: '/socket.io', transports: ['websocket'], auth: { token: r.token }, reconnection: false, forceNew: true, timeout: 5000 }));
  const outcomes = await Promise.all(
    sockets.map((s) => new Promise<string>((resolve) => {
      s.once('connect', () => resolve('connected'));
      s.once('connect_error', (e: Error) => resolve(`refused: ${e.message}`));
    })),
  );
  const connected = outcomes.filter((o) => o === 'connected').length;
  t.ok(connected >= 1 && connected <= 4, `websockets past maxConnectionsPerAddress are refused (${connected} of 6 connected)`);
  for (const s of sockets) s.close();
  await sleep(300);

  // Polling sessions hold no connection between polls: they are capped per address too.
  const handshake = (): Promise<Answer> => request(r.base, '/socket.io/?EIO=4&transport=polling');
  const shakes: Answer[] = [];
  for (let i = 0; i < 6; i++) shakes.push(await handshake());
  const sids = shakes.filter((a) => a.status === 200 && a.text.startsWith('0{')).map((a) => (JSON.parse(a.text.slice(1)) as { sid: string }).sid);
  t.equal(sids.length, 4, `four polling sessions (${shakes.map((a) => a.status).join(' ')})`);
  t.equal(shakes[5]?.status, 403, 'the fifth and sixth are refused');
  t.match(shakes[5]?.text, /maxConnectionsPerAddress/);
  const sid = sids[0] as string;
  const poll = `/socket.io/?EIO=4&transport=polling&sid=${sid}`;

  // A polling packet over its limit: 413 from Content-Length, before reading, as an error grid.
  const huge = await rawPost(r.app.port, poll, { 'content-type': 'text/plain;charset=UTF-8', 'content-length': 200 * MIB }, 8 * MIB);
  t.equal(statusOf(huge.response), 413, `413 (got ${huge.response.slice(0, 80)}; write error ${huge.writeError ?? 'none'})`);
  t.equal(bodyOf(huge.response).meta?.errCode, `s:${ErrorCodes.TOO_LARGE}`);
  t.match(bodyOf(huge.response).meta?.dis, /limit of 16,384 bytes/);

  // Polling bodies are read under the budget of bodies in flight.
  const slow = net.connect(r.app.port, '127.0.0.1');
  slow.on('error', () => {});
  slow.write(`POST /api/read HTTP/1.1\r\nhost: x\r\nauthorization: ${r.auth.authorization as string}\r\ncontent-type: application/json\r\ncontent-length: ${MIB - 4096}\r\n\r\n{"meta":`);
  await sleep(200);
  const packet = '40'.padEnd(8 * 1024, ' ');
  const busy = await request(r.base, poll, { method: 'POST', headers: { 'content-type': 'text/plain;charset=UTF-8' }, body: packet });
  refused(t, busy, 503, ErrorCodes.BUSY, 'a polling packet past the budget');
  t.equal(busy.headers.get('retry-after'), '2');
  slow.destroy();
  await sleep(200);
  const ok = await request(r.base, `/socket.io/?EIO=4&transport=polling&sid=${sids[1] as string}`, { method: 'POST', headers: { 'content-type': 'text/plain;charset=UTF-8' }, body: '40' });
  t.equal(ok.status, 200, `the engine reads it once there is budget (${ok.text})`);

  // Counted in the metrics like every request.
  const metrics = await request(r.base, '/metrics', { headers: r.auth });
  t.match(metrics.text, /hayloft_http_requests_total\{op="push",status="200"\} \d+/, 'socket.io requests are in the metrics');
  t.match(metrics.text, /hayloft_http_requests_total\{op="push",status="413"\} 1/);
  const forbidden = Number(/hayloft_push_refused_total\{code="engine_Forbidden"\} (\d+)/.exec(metrics.text)?.[1] ?? 0);
  t.ok(forbidden >= 2, `sessions refused over the cap are in the push metrics (${forbidden})`);
  await stillServes(t, r);
});
