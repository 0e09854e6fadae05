/**
 * A hostile load for memory tests and the bench (issue 18: "a few thousand malformed requests
 * from an authenticated client"): a seeded, repeatable mix of requests that must be refused
 * (4xx/503; a pattern valid in RE2 answered at once instead) and change nothing, sent over the wire to a daemon in another process, a few at once.
 * The mix: grids nested 10,000 deep (JSON and Zinc, in a cell and in meta), 200 MB announced by
 * Content-Length (the server must answer before reading), values past maxValueChars (70,000
 * chars, and a 5 MB Ref), bad and over-long filters, regular expressions that backtrack
 * catastrophically or use refused features, truncated JSON and Zinc grids, bad values and
 * over-long ranges.
 */
import http from 'node:http';
import net from 'node:net';
import { prng } from './prng.js';

export interface Malformed {
  /** What it is, for the tally. */
  kind: string;
  op: string;
  contentType: string;
  /** The body sent; absent for an announced-only body (`announce`). */
  body?: string;
  /** A Content-Length far beyond what is sent: only the head and a little of the body go out. */
  announce?: number;
  /**
   * Hostile but valid: a 200 is right too. A pattern that backtracks catastrophically in V8 but
   * is plain RE2 (`(a+)+$`) must be answered, at once; those RE2 refuses must be a 400.
   */
  mayAnswer?: boolean;
}

const MIB = 1024 * 1024;
const READ_OPS = ['read', 'watchSub', 'watchPoll', 'hisRead', 'deleteRec'];
const WRITE_OPS = ['createRec', 'updateRec', 'hisWrite'];

const grid = (cols: string[], rows: Record<string, string>[], meta: Record<string, string> = {}): string =>
  JSON.stringify({ meta: { ver: '3.0', ...meta }, cols: cols.map((name) => ({ name })), rows });
const filterGrid = (filter: string): string => grid(['filter'], [{ filter: `s:${filter}` }]);

const REDOS = ['(a+)+$', '(a|aa)+$', '(.*a){20}', '([a-z]+)*!', '(?<=a*)*b'];
// Backreference, lookahead, a capture inside a lookbehind, a broken group (docs/filters.md).
const REFUSED_RE = ['(a)\\1', 'a(?=b)', '(?<=(a+)+)!', '(?P<x)'];
const BAD_FILTERS = ['point and (', 'dis ==', '== 3', 'a and and b', 'x->', '(((((((((((((((((', 'point and dis == "unterminated', 'n < 1x2'];

/** The request number `i` of the mix (every kind in turn, details from the seeded generator). */
function one(i: number, rnd: () => number): Malformed {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)] as T;
  const depth = 10_000;
  switch (i % 12) {
    case 0: {
      const deep = '['.repeat(depth) + ']'.repeat(depth);
      const where = pick(['cell', 'meta', 'col']);
      const body =
        where === 'cell'
          ? `{"meta":{"ver":"3.0"},"cols":[{"name":"id"}],"rows":[{"id":${deep}}]}`
          : where === 'meta'
            ? `{"meta":{"ver":"3.0","x":${deep}},"cols":[{"name":"id"}],"rows":[]}`
            : `{"meta":{"ver":"3.0"},"cols":[{"name":"id","x":${deep}}],"rows":[]}`;
      return { kind: 'deep JSON', op: pick([...READ_OPS, ...WRITE_OPS]), contentType: 'application/json', body };
    }
    case 1:
      return { kind: 'deep Zinc', op: pick([...READ_OPS, ...WRITE_OPS]), contentType: 'text/zinc', body: `ver:"3.0"\nid\n${'['.repeat(depth)}${']'.repeat(depth)}\n` };
    case 2:
      return { kind: '200 MB Content-Length', op: pick(['hisWrite', 'createRec', 'read']), contentType: 'application/json', announce: 200 * MIB };
    case 3:
      return { kind: 'long Str', op: 'createRec', contentType: 'application/json', body: grid(['dis', 'site'], [{ dis: `s:${'x'.repeat(70_000)}`, site: 'm:' }]) };
    case 4:
      // A 5 MB Ref now and then (one in 48): the largest body of the mix, read whole before refused.
      return i % 48 === 4
        ? { kind: '5 MB Ref', op: 'createRec', contentType: 'application/json', body: grid(['id'], [{ id: `r:${'x'.repeat(5 * MIB)}` }]) }
        : { kind: 'long Ref', op: pick(['read', 'watchSub']), contentType: 'application/json', body: grid(['id'], [{ id: `r:${'@'.repeat(60_000)}` }]) };
    case 5:
      return { kind: 'bad filter', op: pick(['read', 'deleteRec']), contentType: 'application/json', body: filterGrid(pick(BAD_FILTERS)) };
    case 6:
      return { kind: 'long filter', op: 'read', contentType: 'application/json', body: filterGrid('a and '.repeat(2000) + 'b') };
    case 7:
      return rnd() < 0.5
        ? { kind: 'ReDoS pattern', op: 'read', contentType: 'application/json', body: filterGrid(`point and dis =~ /${pick(REDOS)}/`), mayAnswer: true }
        : { kind: 'refused regex', op: 'read', contentType: 'application/json', body: filterGrid(`point and dis =~ /${pick(REFUSED_RE)}/`) };
    case 8: {
      const full = grid(['id', 'dis', 'curVal'], Array.from({ length: 40 }, (_, k) => ({ id: `r:p${k}`, dis: `s:Point ${k}`, curVal: `n:${k}.5 °C` })));
      return { kind: 'truncated JSON', op: pick([...READ_OPS, ...WRITE_OPS]), contentType: 'application/json', body: full.slice(0, 1 + Math.floor(rnd() * (full.length - 2))) };
    }
    case 9: {
      const full = `ver:"3.0" id:@p1\nts,val\n${Array.from({ length: 40 }, (_, k) => `2024-03-10T0${k % 10}:00:00Z UTC,${k}.5°C`).join('\n')}\n`;
      // Cut inside the rows: the header stays, so the Zinc reader gets as far as the values.
      const cut = 24 + Math.floor(rnd() * (full.length - 26));
      return { kind: 'truncated Zinc', op: pick(['hisWrite', 'read', 'createRec']), contentType: 'text/zinc', body: `${full.slice(0, cut)}"unterminated` };
    }
    case 10:
      return {
        kind: 'bad values',
        op: pick(WRITE_OPS),
        contentType: 'application/json',
        body: grid(['id', 'ts', 'val'], [{ id: 'r:', ts: 't:2024-13-45T99:00:00Z Nowhere', val: pick(['n:abc', 'n:1e999x', 'x:??', 'r:@@', 'd:2024-02-30']) }]),
      };
    default:
      return { kind: 'long range', op: 'hisRead', contentType: 'application/json', body: grid(['id', 'range'], [{ id: 'r:hq.p1', range: `s:${'2024-01-01,'.repeat(10_000)}` }]) };
  }
}

/** `n` requests of the mix, the same for the same seed. */
export function malformedMix(n: number, seed = 18): Malformed[] {
  const rnd = prng(seed);
  return Array.from({ length: n }, (_, i) => one(i, rnd));
}

export interface Tally {
  /** Answers by status. */
  byStatus: Map<number, number>;
  /** Requests answered with a status outside 4xx/503 (and not a 200 where `mayAnswer`), with the kind: each is a failure. */
  unexpected: string[];
}

/** An announced body: head and 64 KiB sent, the answer read, the connection dropped (as a client gives up). */
function announced(port: number, m: Malformed, authorization: string): Promise<number> {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    let got = '';
    let done = false;
    const finish = (status: number): void => {
      if (done) return;
      done = true;
      s.destroy();
      resolve(status);
    };
    s.setEncoding('utf8');
    s.on('data', (c: string) => {
      got += c;
      const head = got.indexOf('\r\n\r\n');
      const len = /content-length: (\d+)/i.exec(got)?.[1];
      if (head >= 0 && len !== undefined && got.length >= head + 4 + Number(len)) finish(Number(/^HTTP\/1\.1 (\d{3})/.exec(got)?.[1] ?? 0));
    });
    s.on('error', () => finish(Number(/^HTTP\/1\.1 (\d{3})/.exec(got)?.[1] ?? 0)));
    s.on('close', () => finish(Number(/^HTTP\/1\.1 (\d{3})/.exec(got)?.[1] ?? 0)));
    s.write(
      `POST /api/${m.op} HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: ${authorization}\r\ncontent-type: ${m.contentType}\r\n` +
        `content-length: ${m.announce as number}\r\n\r\n`,
    );
    s.write(Buffer.alloc(64 * 1024, 0x20));
  });
}

/**
 * Sends the mix to `port` with `concurrency` requests in flight (keep-alive connections), each
 * with the bearer token. Resolves with the tally once every request is answered.
 */
export async function sendMalformed(port: number, token: string, mix: readonly Malformed[], concurrency = 4): Promise<Tally> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  const authorization = `Bearer ${token}`;
  const tally: Tally = { byStatus: new Map(), unexpected: [] };
  const post = (m: Malformed): Promise<number> =>
    new Promise((resolve) => {
      const body = Buffer.from(m.body ?? '', 'utf8');
      const req = http.request(
        { host: '127.0.0.1', port, path: `/api/${m.op}`, method: 'POST', agent, headers: { authorization, 'content-type': m.contentType, accept: 'application/json', 'content-length': body.length } },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
          res.on('error', () => resolve(res.statusCode ?? 0));
        },
      );
      // The server may answer (413) and close before the whole body is written.
      req.on('error', () => resolve(0));
      req.end(body);
    });
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < mix.length) {
      const m = mix[next++] as Malformed;
      const status = m.announce !== undefined ? await announced(port, m, authorization) : await post(m);
      tally.byStatus.set(status, (tally.byStatus.get(status) ?? 0) + 1);
      const refused = (status >= 400 && status < 500) || status === 503;
      if (!refused && !(m.mayAnswer === true && status === 200)) tally.unexpected.push(`${m.kind} (${m.op}): ${status}`);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  agent.destroy();
  return tally;
}
