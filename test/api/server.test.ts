import http from 'node:http';
import net from 'node:net';
import t from 'tap';
import type { Op } from '../../src/api/op.js';
import { createApiServer } from '../../src/api/server.js';
import type { HDict} from '../../src/haystack/values.js';
import { HDateTime, HDate, HGrid, HNumber, HRef, MARKER } from '../../src/haystack/values.js';
import { ErrorCodes, HayloftError } from '../../src/lib/errors.js';
import { silentLogger } from '../../src/lib/log.js';
import { decodeAnswer, errOf, getGrid, gridOf, postGrid, request } from '../helpers/http.js';
import { ManualClock } from '../../src/lib/clock.js';
import { fakeCtx, startServer, until } from '../helpers/api-fixture.js';

/** Answers with the request grid, plus the method in meta. */
const echo: Op = {
  name: 'echo',
  summary: 'echo',
  methods: ['GET', 'POST'],
  run: ({ grid, method }) => new HGrid(grid.meta.with({ method }), grid.cols, grid.rows),
};
const getOnly: Op = { name: 'getOnly', summary: 'GET only', methods: ['GET'], run: () => HGrid.empty() };
const postOnly: Op = { name: 'postOnly', summary: 'POST only', methods: ['POST'], run: () => HGrid.empty() };
const boom: Op = {
  name: 'boom',
  summary: 'throws an unexpected error',
  methods: ['GET', 'POST'],
  run: () => {
    throw new Error('kaboom: secret internals');
  },
};
const asyncBoom: Op = { name: 'asyncBoom', summary: 'rejects', methods: ['GET'], run: () => Promise.reject(new TypeError('async kaboom')) };
const notFound: Op = {
  name: 'notFound',
  summary: 'throws a coded error',
  methods: ['GET', 'POST'],
  run: () => {
    throw new HayloftError(ErrorCodes.NOT_FOUND, 'no record @nope: check the id');
  },
};
const nested: Op = {
  name: 'nested',
  summary: 'a grid in a cell',
  methods: ['GET'],
  run: () => gridOf({ g: HGrid.empty() }),
};

const ops = [echo, getOnly, postOnly, boom, asyncBoom, notFound, nested];

t.test('content negotiation follows the whole Accept header', async (t) => {
  const s = await startServer(t, ops);
  const cases: [string | undefined, string | null][] = [
    [undefined, 'application/json'],
    ['*/*', 'application/json'],
    ['application/json', 'application/json'],
    ['application/json; charset=utf-8', 'application/json'],
    ['application/*', 'application/json'],
    ['application/vnd.haystack+json', 'application/vnd.haystack+json'],
    ['text/zinc', 'text/zinc; charset=utf-8'],
    ['TEXT/ZINC', 'text/zinc; charset=utf-8'],
    ['text/plain', 'text/plain; charset=utf-8'],
    ['text/plain; charset=utf-8', 'text/plain; charset=utf-8'],
    ['text/csv', 'text/csv; charset=utf-8'],
    ['text/zinc,application/vnd.haystack+json', 'text/zinc; charset=utf-8'],
    ['application/vnd.haystack+json,text/zinc', 'application/vnd.haystack+json'],
    ['text/csv;q=0.5, text/zinc;q=0.9', 'text/zinc; charset=utf-8'],
    ['text/zinc;q=0.1, application/json;q=0.2', 'application/json'],
    ['text/*', 'text/zinc; charset=utf-8'],
    ['text/zinc;q=0, text/*', 'text/plain; charset=utf-8'],
    ['text/html, application/xhtml+xml, application/xml;q=0.9, */*;q=0.8', 'application/json'],
    ['image/png, text/csv;q=0.1', 'text/csv; charset=utf-8'],
    ['application/json;q=0, */*', 'application/vnd.haystack+json'],
    // Nothing supported: 406.
    ['application/xml', null],
    ['image/png, text/html', null],
    ['*/*;q=0', null],
    ['text/plain; charset=iso-8859-1', null],
  ];
  // Twice each: the second answer comes from the server's negotiation cache.
  for (const [accept, type] of [...cases, ...cases]) {
    const a = await request(s.base, '/api/echo?x=1', accept === undefined ? {} : { headers: { accept } });
    if (type === null) {
      t.equal(a.status, 406, `${accept} -> 406`);
      t.equal(a.headers.get('content-type'), 'application/json', `${accept}: error in JSON`);
      t.equal(errOf(a)?.code, ErrorCodes.NOT_ACCEPTABLE);
      t.match(errOf(a)?.dis, /text\/zinc/, 'the message lists what is supported');
    } else {
      t.equal(a.status, 200, `${accept} -> 200`);
      t.equal(a.headers.get('content-type'), type, `${accept} -> ${type}`);
      t.equal(a.headers.get('vary'), 'Accept');
      if (!type.startsWith('text/csv')) t.same(a.grid?.first()?.get('x'), HNumber.of(1), `${accept}: the body decodes`);
      else t.equal(a.text, 'x\r\n1\r\n', 'CSV body');
    }
  }
  // An empty Accept is treated as none.
  const empty = await request(s.base, '/api/echo', { headers: { accept: '' } });
  t.equal(empty.status, 200);
  t.equal(empty.headers.get('content-type'), 'application/json');
});

t.test('request bodies in JSON and Zinc, by Content-Type', async (t) => {
  const s = await startServer(t, ops);
  const grid = gridOf([{ id: HRef.of('a'), n: HNumber.of(72.5, '°F') }, { id: HRef.of('b'), s: 'x y' }], { watchId: 'w1' });
  for (const as of ['json', 'zinc'] as const) {
    for (const accept of ['json', 'zinc'] as const) {
      const a = await postGrid(s.base, 'echo', grid, { as, accept });
      t.equal(a.status, 200, `${as} -> ${accept}`);
      t.equal(a.grid?.size, 2);
      t.same(a.grid?.rows[0]?.get('n'), HNumber.of(72.5, '°F'));
      t.equal(a.grid?.rows[1]?.get('s'), 'x y');
      t.equal(a.grid?.meta.get('watchId'), 'w1');
      t.equal(a.grid?.meta.get('method'), 'POST');
    }
  }
  const json = '{"meta":{"ver":"3.0"},"cols":[{"name":"id"}],"rows":[{"id":"r:abc"}]}';
  const zinc = 'ver:"3.0"\nid\n@abc\n';
  const bodies: [string | undefined, string][] = [
    ['application/json', json],
    ['application/json; charset=UTF-8', json],
    ['application/vnd.haystack+json', json],
    ['text/zinc', zinc],
    ['text/zinc; charset=utf-8', zinc],
    ['text/plain', zinc],
    [undefined, json],
  ];
  for (const [type, body] of bodies) {
    const headers: Record<string, string> = type === undefined ? {} : { 'content-type': type };
    // fetch adds text/plain for a string body: send bytes to really omit the header.
    const a = await request(s.base, '/api/echo', { method: 'POST', headers, body: new TextEncoder().encode(body) });
    t.equal(a.status, 200, `${type ?? 'no Content-Type'}`);
    t.same(a.grid?.first()?.get('id'), HRef.of('abc'), `${type ?? 'no Content-Type'} decodes`);
  }
  // Unsupported body types: 415, before reading anything.
  for (const type of ['text/csv', 'application/x-www-form-urlencoded', 'application/xml']) {
    const a = await request(s.base, '/api/echo', { method: 'POST', headers: { 'content-type': type }, body: 'a=1' });
    t.equal(a.status, 415, `${type} -> 415`);
    t.equal(errOf(a)?.code, ErrorCodes.UNSUPPORTED_MEDIA_TYPE);
    t.match(errOf(a)?.dis, /application\/json/);
  }
  // Malformed bodies: 400 with the decoder's code.
  const badJson = await request(s.base, '/api/echo', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"meta":' });
  t.equal(badJson.status, 400);
  t.equal(errOf(badJson)?.code, ErrorCodes.BAD_GRID);
  const badZinc = await request(s.base, '/api/echo', { method: 'POST', headers: { 'content-type': 'text/zinc' }, body: 'ver:"3.0"\na b\n1 2 3\n' });
  t.equal(badZinc.status, 400);
  t.equal(errOf(badZinc)?.code, ErrorCodes.BAD_ZINC);
  const notUtf8 = await request(s.base, '/api/echo', {
    method: 'POST',
    headers: { 'content-type': 'text/zinc' },
    body: new Uint8Array([0x76, 0x65, 0x72, 0xff, 0xfe]),
  });
  t.equal(notUtf8.status, 400);
  t.match(errOf(notUtf8)?.dis, /UTF-8/);
  // No body at all: the empty grid.
  const none = await request(s.base, '/api/echo', { method: 'POST', headers: { 'content-type': 'application/json' } });
  t.equal(none.status, 200);
  t.same(none.grid?.colNames(), ['empty']);
  // A GET with a stray Content-Type and no body is fine, whatever the type.
  const stray = await request(s.base, '/api/echo?a=1', { headers: { 'content-type': 'application/x-whatever' } });
  t.equal(stray.status, 200);
  t.same(stray.grid?.first()?.get('a'), HNumber.of(1));
});

/** A raw request whose body is written by `feed`; resolves with the status and what was sent. */
function rawUpload(
  port: number,
  headers: Record<string, string | number>,
  feed: (req: http.ClientRequest, stop: () => boolean) => Promise<number>,
): Promise<{ status: number; body: string; sent: number; closed: boolean }> {
  return new Promise((resolve, reject) => {
    let done = false;
    let status = 0;
    let body = '';
    let closed = false;
    const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/api/echo', headers, agent: false });
    req.on('response', (res) => {
      status = res.statusCode ?? 0;
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => {
        done = true;
      });
    });
    req.on('error', () => {
      // The server closes the connection while the client is still sending: expected here.
    });
    req.on('close', () => {
      closed = true;
    });
    feed(req, () => done || closed)
      .then(async (sent) => {
        await until(() => done || closed, 5000);
        resolve({ status, body, sent, closed });
      })
      .catch(reject);
  });
}

t.test('413 for a body over the limit, without reading all of it', async (t) => {
  const limit = 4096;
  const s = await startServer(t, ops, { maxBodyBytes: limit });

  t.test('announced by Content-Length', async (t) => {
    // Claims 10 MB, sends 100 bytes and then waits: the answer must come from the header alone.
    const r = await rawUpload(s.port, { 'content-type': 'application/json', 'content-length': 10_000_000 }, async (req, stop) => {
      req.write('x'.repeat(100));
      await until(stop, 3000);
      req.destroy();
      return 100;
    });
    t.equal(r.status, 413);
    t.equal(errOf(gridFromJson(r.body))?.code, ErrorCodes.TOO_LARGE);
    t.match(errOf(gridFromJson(r.body))?.dis, /4,096 bytes/);
  });

  t.test('chunked, crossing the limit while streaming', async (t) => {
    const chunk = 'x'.repeat(1024);
    const total = 2000; // 2 MB if the server read it all
    const r = await rawUpload(s.port, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' }, async (req, stop) => {
      let sent = 0;
      for (let i = 0; i < total && !stop(); i++) {
        req.write(chunk);
        sent++;
        await new Promise((r) => setTimeout(r, 2));
      }
      if (!stop()) req.end();
      return sent;
    });
    t.equal(r.status, 413);
    t.equal(errOf(gridFromJson(r.body))?.code, ErrorCodes.TOO_LARGE);
    t.ok(r.sent < total / 4, `cut off after ${r.sent} of ${total} chunks`);
    t.ok(r.closed, 'the server closed the connection');
  });

  t.test('a body just under the limit is accepted', async (t) => {
    const body = JSON.stringify({ meta: { ver: '3.0' }, cols: [{ name: 's' }], rows: [{ s: 's:' + 'y'.repeat(limit - 100) }] });
    t.ok(body.length <= limit);
    const a = await request(s.base, '/api/echo', { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    t.equal(a.status, 200);
  });

  t.test('the server still serves afterwards', async (t) => {
    t.equal((await getGrid(s.base, 'echo', { a: HNumber.of(1) })).status, 200);
  });
});

const gridFromJson = (text: string): HGrid | undefined => decodeAnswer('application/json', text);

t.test('GET query parameters become a one-row grid of Zinc values', async (t) => {
  const s = await startServer(t, ops);
  const a = await request(
    s.base,
    '/api/echo?id=@abc&limit=10&n=72.5kW&s=%22hello%20world%22&filter=point+and+his&f2=siteRef%3D%3D%40s1+and+equip' +
      '&range=today&quoted=%22today%22&day=2024-01-12&dt=2024-01-12T13:00:00.000Z+UTC&span=2024-01-01,2024-01-31&m=M&pct=100%&esc=a%ZZb&empty=',
  );
  t.equal(a.status, 200);
  const g = a.grid as HGrid;
  t.equal(g.size, 1, 'one row');
  t.same(g.colNames(), ['id', 'limit', 'n', 's', 'filter', 'f2', 'range', 'quoted', 'day', 'dt', 'span', 'm', 'pct', 'esc', 'empty'], 'one column per parameter, in order');
  const r = g.first() as HDict;
  t.same(r.get('id'), HRef.of('abc'), 'ref');
  t.same(r.get('limit'), HNumber.of(10), 'number');
  t.same(r.get('n'), HNumber.of(72.5, 'kW'), 'number with unit');
  t.equal(r.get('s'), 'hello world', 'quoted string');
  t.equal(r.get('filter'), 'point and his', 'bare filter text, + is a space');
  t.equal(r.get('f2'), 'siteRef==@s1 and equip', 'percent-decoded filter');
  t.equal(r.get('range'), 'today', 'bare word');
  t.equal(r.get('quoted'), 'today', 'quoted word');
  t.ok(r.get('day') instanceof HDate, 'a bare date is a Date');
  const dt = r.get('dt');
  t.ok(dt instanceof HDateTime && dt.epochMs === Date.UTC(2024, 0, 12, 13), 'a bare DateTime with a space before the zone');
  t.equal(r.get('span'), '2024-01-01,2024-01-31', 'a two-date range stays text');
  t.equal(r.get('m'), MARKER, 'marker');
  t.same(r.get('pct'), HNumber.of(100, '%'), 'a lone % is a unit (and not a broken escape)');
  t.equal(r.get('esc'), 'a%ZZb', 'a malformed escape is kept as text');
  t.equal(r.get('empty'), '', 'an empty value is an empty Str');
  t.equal(g.meta.get('method'), 'GET');

  const none = await request(s.base, '/api/echo');
  t.same(none.grid?.colNames(), ['empty'], 'no parameters: the empty grid');

  const twice = await request(s.base, '/api/echo?a=1&a=2');
  t.equal(twice.status, 400);
  t.equal(errOf(twice)?.code, ErrorCodes.BAD_REQUEST);
  const badName = await request(s.base, '/api/echo?Bad-Name=1');
  t.equal(badName.status, 400);
  t.match(errOf(badName)?.dis, /Bad-Name/);
  // The helper's GET sends strings bare and other values in Zinc.
  const h = await getGrid(s.base, 'echo', { id: HRef.of('x'), filter: 'site and area > 100', limit: HNumber.of(0) });
  t.same(h.grid?.first()?.get('id'), HRef.of('x'));
  t.equal(h.grid?.first()?.get('filter'), 'site and area > 100');
  t.same(h.grid?.first()?.get('limit'), HNumber.of(0));
});

t.test('unknown op 404, wrong method 405 with Allow, HEAD', async (t) => {
  const s = await startServer(t, ops);
  const unknown = await request(s.base, '/api/nope');
  t.equal(unknown.status, 404);
  t.equal(errOf(unknown)?.code, ErrorCodes.UNKNOWN_OP);
  t.match(errOf(unknown)?.dis, /nope/);
  for (const path of ['/', '/foo', '/api', '/api/', '/api/echo/extra', '/api/%E0%A4%A']) {
    const a = await request(s.base, path);
    t.equal(a.status, 404, `${path} -> 404`);
    t.equal(errOf(a)?.code, ErrorCodes.UNKNOWN_OP);
  }
  const post = await request(s.base, '/api/getOnly', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
  t.equal(post.status, 405);
  t.equal(post.headers.get('allow'), 'GET, HEAD');
  t.equal(errOf(post)?.code, ErrorCodes.METHOD_NOT_ALLOWED);
  const get = await request(s.base, '/api/postOnly');
  t.equal(get.status, 405);
  t.equal(get.headers.get('allow'), 'POST');
  for (const method of ['PUT', 'DELETE', 'PATCH', 'OPTIONS']) {
    const a = await request(s.base, '/api/echo', { method });
    t.equal(a.status, 405, `${method} -> 405`);
    t.equal(a.headers.get('allow'), 'GET, HEAD, POST');
  }
  // An op name with escapes is decoded (and found through polka rather than the direct path).
  const escaped = await request(s.base, '/api/ech%6F?a=1');
  t.equal(escaped.status, 200, 'an escaped op name is decoded');
  t.same(escaped.grid?.first()?.get('a'), HNumber.of(1));
  const head = await request(s.base, '/api/echo?a=1', { method: 'HEAD' });
  t.equal(head.status, 200);
  t.equal(head.text, '', 'HEAD has no body');
  t.ok(Number(head.headers.get('content-length')) > 0, 'but the length of the GET answer');
});

t.test('errors: grid shape, codes to statuses, unexpected errors', async (t) => {
  const s = await startServer(t, ops);
  const nf = await request(s.base, '/api/notFound');
  t.equal(nf.status, 400, 'NOT_FOUND is 400 (docs/spec/wire-notes.md §2)');
  const g = nf.grid as HGrid;
  t.equal(g.meta.get('err'), MARKER, 'meta err is a Marker');
  t.equal(g.meta.get('dis'), 'no record @nope: check the id', 'dis is the message');
  t.equal(g.meta.get('errCode'), ErrorCodes.NOT_FOUND);
  t.notOk(g.meta.has('errTrace'), 'no errTrace without debug');
  t.same(g.colNames(), ['empty']);
  t.equal(g.size, 0);
  t.match(nf.text, /"ver":"2.0"/);

  // Errors follow Accept when the format can carry them.
  const zinc = await request(s.base, '/api/notFound', { headers: { accept: 'text/zinc' } });
  t.equal(zinc.headers.get('content-type'), 'text/zinc; charset=utf-8');
  t.equal(errOf(zinc)?.code, ErrorCodes.NOT_FOUND);
  const csv = await request(s.base, '/api/notFound', { headers: { accept: 'text/csv' } });
  t.equal(csv.headers.get('content-type'), 'application/json', 'CSV has no meta: JSON');
  t.equal(errOf(csv)?.code, ErrorCodes.NOT_FOUND);
  const cannot = await request(s.base, '/api/nested', { headers: { accept: 'text/csv' } });
  t.equal(cannot.status, 406, 'a grid in a CSV cell');
  t.equal(errOf(cannot)?.code, ErrorCodes.CANNOT_ENCODE);

  for (const op of ['boom', 'asyncBoom']) {
    const a = await request(s.base, `/api/${op}`);
    t.equal(a.status, 500, `${op} -> 500`);
    t.equal(errOf(a)?.code, ErrorCodes.INTERNAL);
    t.notMatch(errOf(a)?.dis, /kaboom/, 'internals are not shown');
    t.match(errOf(a)?.dis, /request \d+/, 'the request id ties the answer to the log');
    t.equal(errOf(a)?.trace, undefined);
    t.equal((await getGrid(s.base, 'echo', { a: HNumber.of(1) })).status, 200, 'the next request works');
  }
  const logged = s.logs.filter((l) => l.level === 50);
  t.equal(logged.length, 2, 'each unexpected error is logged');
  t.match((logged[0]?.err as { stack?: string } | undefined)?.stack, /kaboom: secret internals\n\s+at /, 'with its stack');
  t.equal(logged[0]?.path, '/api/boom');
});

t.test('errTrace only with debug', async (t) => {
  const s = await startServer(t, ops, { debug: true });
  const a = await request(s.base, '/api/boom');
  t.equal(a.status, 500);
  t.match(errOf(a)?.trace, /Error: kaboom: secret internals\n\s+at /);
  const nf = await request(s.base, '/api/notFound');
  t.match(errOf(nf)?.trace, /HayloftError: no record @nope/);
});

t.test('one debug line per request, nothing secret', async (t) => {
  const s = await startServer(t, ops);
  await request(s.base, '/api/echo?token=abc', { headers: { authorization: 'Bearer very-secret-token', accept: 'application/json' } });
  await request(s.base, '/api/echo', {
    method: 'POST',
    headers: { authorization: 'Basic c2VjcmV0LWNsaWVudA==', 'content-type': 'application/json' },
    body: '{"meta":{"ver":"3.0"},"cols":[{"name":"password"}],"rows":[{"password":"s:hunter2-secret"}]}',
  });
  await request(s.base, '/api/nope');
  t.ok(await until(() => s.logs.filter((l) => l.msg === 'request').length === 3));
  const lines = s.logs.filter((l) => l.msg === 'request');
  t.match(lines, [
    { level: 20, method: 'GET', path: '/api/echo', status: 200, ms: Number },
    { level: 20, method: 'POST', path: '/api/echo', status: 200 },
    { level: 20, method: 'GET', path: '/api/nope', status: 404 },
  ]);
  const text = s.logText();
  for (const secret of ['very-secret-token', 'c2VjcmV0LWNsaWVudA', 'hunter2', 'token=abc']) t.notMatch(text, secret, `${secret} is not logged`);
});

t.test('the server survives malformed and abandoned requests', async (t) => {
  const s = await startServer(t, ops);
  const raw = (text: string): Promise<string> =>
    new Promise((resolve) => {
      const sock = net.connect(s.port, '127.0.0.1', () => sock.write(text));
      let out = '';
      sock.setEncoding('utf8');
      sock.on('data', (c: string) => (out += c));
      sock.on('error', () => resolve(out));
      sock.on('close', () => resolve(out));
    });

  t.match(await raw('GARBAGE\r\n\r\n'), /^HTTP\/1\.1 400 /, 'a bad request line: 400');
  t.match(await raw(`GET /api/echo HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`), /^HTTP\/1\.1 431 /, 'huge headers: 431');
  t.match(await raw('GET /api/echo?a=%ZZ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'), /^HTTP\/1\.1 200 /, 'a bad escape in the query');
  t.match(
    await raw('POST /api/echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: abc\r\n\r\n'),
    /^HTTP\/1\.1 400 /,
    'a bad Content-Length',
  );

  // An upload abandoned half-way.
  await new Promise<void>((resolve) => {
    const sock = net.connect(s.port, '127.0.0.1', () => {
      sock.write('POST /api/echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"meta":');
      setTimeout(() => {
        sock.destroy();
        resolve();
      }, 50);
    });
  });
  t.ok(await until(() => s.logs.some((l) => l.msg === 'request' && l.aborted === true)), 'the abandoned request is logged as aborted');

  // Requests without a body keep the connection open: three on one socket, all answered.
  const three = await raw(
    'GET /api/echo?a=1 HTTP/1.1\r\nHost: x\r\n\r\n' + 'GET /api/ech%6F?a=2 HTTP/1.1\r\nHost: x\r\n\r\n' + 'GET /api/echo?a=3 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
  );
  t.equal(three.match(/HTTP\/1\.1 200 /g)?.length, 3, 'three answers on one connection');
  t.equal(three.match(/^Connection: keep-alive/gim)?.length, 2, 'kept alive until asked to close');
  t.equal((await getGrid(s.base, 'echo', { a: HNumber.of(1) })).status, 200, 'still serving');
});

t.test('close() waits for requests in flight, then refuses connections', async (t) => {
  let release: () => void = () => {};
  const gate = new Promise<void>((r) => (release = r));
  const slow: Op = {
    name: 'slow',
    summary: 'waits',
    methods: ['GET'],
    run: async () => {
      await gate;
      return gridOf({ done: MARKER });
    },
  };
  const s = await startServer(t, [slow, echo]);
  // A kept-alive idle connection must not hold close() open.
  t.equal((await getGrid(s.base, 'echo')).status, 200);
  const inFlight = getGrid(s.base, 'slow');
  await new Promise((r) => setTimeout(r, 50));
  let closed = false;
  const closing = s.server.close().then(() => (closed = true));
  await new Promise((r) => setTimeout(r, 50));
  t.notOk(closed, 'close() waits for the request in flight');
  release();
  const a = await inFlight;
  t.equal(a.status, 200);
  t.equal(a.grid?.first()?.get('done'), MARKER);
  await closing;
  t.ok(closed, 'then close() resolves');
  await t.rejects(fetch(`${s.base}/api/echo`), 'new connections are refused');
});

t.test('close() cuts a stuck request after its timeout', async (t) => {
  const stuck: Op = { name: 'stuck', summary: 'never answers', methods: ['GET'], run: () => new Promise<HGrid>(() => {}) };
  const s = await startServer(t, [stuck], { closeTimeoutMs: 100 });
  const pending = fetch(`${s.base}/api/stuck`).catch((e: unknown) => e);
  await new Promise((r) => setTimeout(r, 50));
  const started = Date.now();
  await s.server.close();
  t.ok(Date.now() - started < 2000, 'close() returns');
  t.ok((await pending) instanceof Error, 'the stuck request was cut');
});

t.test('listen errors are coded; duplicate op names are refused', async (t) => {
  const s = await startServer(t, ops);
  const other = createApiServer({ ops, ctx: fakeCtx(new ManualClock(0), silentLogger()), auth: null, log: silentLogger(), maxBodyBytes: 1024, debug: false });
  await t.rejects(other.listen(s.port, '127.0.0.1'), { code: ErrorCodes.LISTEN_FAILED, message: /in use/ });
  t.throws(
    () => createApiServer({ ops: [echo, echo], ctx: fakeCtx(new ManualClock(0), silentLogger()), auth: null, log: silentLogger(), maxBodyBytes: 1024, debug: false }),
    { code: ErrorCodes.INTERNAL },
  );
});
