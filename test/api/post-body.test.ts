/**
 * A small POST body from a known caller is taken whole as Node's parser delivers it, and the op
 * run then (ExchangeRequest.takeBody, src/api/exchange.ts), not read through the request stream.
 * End to end over raw sockets against the real App on LevelDB: a body in several pieces, two
 * requests in one packet, a bad body, a refused caller, a client gone mid-body, a chunked body;
 * each answered as before, and the connection kept for the next request.
 */
import net from 'node:net';
import t from 'tap';
import { HRef, MARKER } from '../../src/haystack/values.js';
import { type Running, startApp } from '../helpers/app.js';
import { gridOf, postGrid, request } from '../helpers/http.js';

const sleep = (ms: number): Promise<void> => new Promise((res) => setTimeout(res, ms));

/** Opens a socket, writes the pieces with a pause between them, and collects what comes back until `answers` answers are in (or the socket closes). */
async function exchange(r: Running, pieces: readonly string[], answers: number, pauseMs = 50): Promise<string[]> {
  const s = net.connect(r.app.port, '127.0.0.1');
  s.on('error', () => {});
  let got = '';
  const done = new Promise<void>((resolve) => {
    s.on('data', (c: Buffer) => {
      got += c.toString('latin1');
      if (splitAnswers(got).length >= answers) resolve();
    });
    s.on('close', () => resolve());
  });
  for (const [i, p] of pieces.entries()) {
    if (i > 0) await sleep(pauseMs);
    s.write(p);
  }
  await done;
  s.destroy();
  return splitAnswers(got);
}

/** The complete answers in `raw` (Latin-1: a character a byte; each with a Content-Length). */
function splitAnswers(raw: string): string[] {
  const out: string[] = [];
  let rest = raw;
  for (;;) {
    const head = rest.indexOf('\r\n\r\n');
    if (head < 0) return out;
    const len = Number(/content-length: (\d+)/i.exec(rest.slice(0, head))?.[1] ?? NaN);
    if (!(len >= 0)) return out;
    const end = head + 4 + len;
    if (rest.length < end) return out;
    out.push(rest.slice(0, end));
    rest = rest.slice(end);
  }
}

const statusOf = (a: string | undefined): number => Number(/^HTTP\/1\.1 (\d{3})/.exec(a ?? '')?.[1] ?? 0);

t.test('small POST bodies taken whole as they are parsed', async (t) => {
  const r = await startApp(t);
  const made = await postGrid(r.base, 'createRec', gridOf({ site: MARKER, name: 'hq', dis: 'Head office' }), { headers: r.auth });
  const id = (made.grid?.first()?.get('id') as HRef).id;
  const auth = r.auth.authorization as string;
  const body = JSON.stringify({ meta: { ver: '3.0' }, cols: [{ name: 'id' }], rows: [{ id: `r:${id}` }] });
  const post = (b: string, extra = ''): string =>
    `POST /api/read HTTP/1.1\r\nhost: x\r\nauthorization: ${auth}\r\ncontent-type: application/json\r\naccept: application/json\r\n${extra}content-length: ${Buffer.byteLength(b)}\r\n\r\n${b}`;

  t.test('a body that comes in three pieces', async (t) => {
    const whole = post(body);
    const cut = whole.length - body.length;
    const [a] = await exchange(r, [whole.slice(0, cut + 10), whole.slice(cut + 10, cut + 40), whole.slice(cut + 40)], 1);
    t.equal(statusOf(a), 200, 'answered 200');
    t.match(a, /Head office/, 'with the record asked for');
  });

  t.test('two requests in one packet, answered in order on one connection', async (t) => {
    const other = JSON.stringify({ meta: { ver: '3.0' }, cols: [{ name: 'filter' }], rows: [{ filter: 's:site' }] });
    const answers = await exchange(r, [post(body) + post(other)], 2);
    t.equal(answers.length, 2, 'both answered');
    t.equal(statusOf(answers[0]), 200);
    t.equal(statusOf(answers[1]), 200);
    t.match(answers[0], new RegExp(`"rows":\\[\\{"id":"r:${id} [^"]*","site"`), 'the first is the read by id');
    t.match(answers[1], /"rows":\[\{"id"/, 'the second is the filter read');
  });

  t.test('a body that is not a grid: 400, and the connection serves the next request', async (t) => {
    const answers = await exchange(r, [post('{"meta":'), post(body)], 2);
    t.equal(statusOf(answers[0]), 400, `the bad body is refused (${(answers[0] ?? '').slice(0, 80)})`);
    t.match(answers[0], /HL_BAD_REQUEST|HL_BAD_GRID|"err":"m:"/, 'with an error grid');
    t.equal(statusOf(answers[1]), 200, 'the next request on the same connection is answered');
  });

  t.test('a body of a type the op does not read: 415 before a byte of it is read', async (t) => {
    const [a] = await exchange(r, [post(body).replace('content-type: application/json', 'content-type: image/png')], 1);
    t.equal(statusOf(a), 415, (a ?? '').slice(0, 300));
  });

  t.test('an unknown token: 401, and the connection serves the next request', async (t) => {
    const bad = post(body).replace(`authorization: ${auth}`, 'authorization: Bearer not-a-token');
    const answers = await exchange(r, [bad, post(body)], 2);
    t.equal(statusOf(answers[0]), 401, 'the unknown token is refused');
    t.equal(statusOf(answers[1]), 200, 'the next request on the same connection is answered');
  });

  t.test('a client gone in the middle of its body', async (t) => {
    const whole = post(body);
    const s = net.connect(r.app.port, '127.0.0.1');
    s.on('error', () => {});
    s.write(whole.slice(0, whole.length - 20));
    await sleep(100);
    s.destroy();
    await sleep(100);
    const after = await request(r.base, '/api/about', { headers: r.auth });
    t.equal(after.status, 200, 'the server goes on');
  });

  t.test('a chunked body is read through the stream, as before', async (t) => {
    const head = `POST /api/read HTTP/1.1\r\nhost: x\r\nauthorization: ${auth}\r\ncontent-type: application/json\r\naccept: application/json\r\ntransfer-encoding: chunked\r\n\r\n`;
    const chunk = (s: string): string => `${Buffer.byteLength(s).toString(16)}\r\n${s}\r\n`;
    const [a] = await exchange(r, [head + chunk(body.slice(0, 20)), chunk(body.slice(20)) + '0\r\n\r\n'], 1);
    t.equal(statusOf(a), 200);
    t.match(a, /Head office/);
  });

  t.test('the same body again is answered from the same grid, and sees changes to the record', async (t) => {
    await postGrid(r.base, 'updateRec', gridOf({ id: HRef.of(id), dis: 'Main office' }), { headers: r.auth });
    const [a] = await exchange(r, [post(body)], 1);
    t.match(a, /Main office/, 'the answer is the record as it is now');
  });
});

t.test('refused requests whose bodies come after the answer leave nothing on a kept connection', async (t) => {
  const r = await startApp(t);
  const warnings: string[] = [];
  const onWarning = (w: Error): void => {
    warnings.push(`${w.name}: ${w.message}`);
  };
  process.on('warning', onWarning);
  t.teardown(() => process.off('warning', onWarning));
  const s = net.connect(r.app.port, '127.0.0.1');
  s.on('error', () => {});
  t.teardown(() => s.destroy());
  let got = '';
  s.on('data', (c: Buffer) => (got += c.toString('latin1')));
  const body = '{"rows":[]}';
  // 30 times, one connection: the headers (a token that is not one), the 401, then the body.
  for (let i = 1; i <= 30; i++) {
    s.write(`POST /api/read HTTP/1.1\r\nhost: x\r\nauthorization: Bearer not-a-token-${i}\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n`);
    while (splitAnswers(got).length < i) await sleep(5);
    s.write(body);
  }
  const answers = splitAnswers(got);
  t.same(answers.map(statusOf), Array.from({ length: 30 }, () => 401), 'every one answered 401 on the same connection');
  await sleep(50);
  t.same(warnings.filter((w) => w.startsWith('MaxListenersExceededWarning')), [], 'no listener piles up on the connection');
  const after = await request(r.base, '/api/about', { headers: r.auth });
  t.equal(after.status, 200, 'the server still serves');
});
