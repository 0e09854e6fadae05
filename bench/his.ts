/**
 * bench/his: history over HTTP as users run it: `hayloft serve` as its own process (started by
 * its bin, startDaemon in bench/harness.ts), the client in this process streaming bytes (no
 * parsing of answers), every request with a bearer token.
 *   (1) hisWrite in batches of 10,000 samples (the WideSky client sends up to 20,000), one after
 *       another on one connection, each durable before its answer; and in 100,000-row batches;
 *   (2) hisRead of 100,000 samples (JSON) and of a point-year (JSON and Zinc), to the last byte;
 * beside, as the baseline of the same run, a bare node:http server (its own process) taking the
 * same 10,000-sample body (POST, answered 100 bytes) and sending as many bytes as the 100,000-sample
 * answer (GET). Rounds are interleaved; medians, and the slowest round of the hisRead goal.
 *
 *   npm run bench -- his [--rounds N] [--no-record]
 */
import http from 'node:http';
import { timeZone } from '../src/haystack/tz.js';
import { fmtRate, hasFlag, jsonGrid, loginDaemon, machineLine, median, numberArg, postOp, recordSection, startBare, startDaemon, stopDaemon } from './harness.js';

const ROUNDS = numberArg('--rounds', 5);
const SMALL = 10_000;
const SMALL_BATCHES = 20; // per round: 200,000 samples
const LARGE = 100_000;
const READ = 100_000;
const YEAR = 525_600;
const T0 = Date.UTC(2024, 0, 1);
const TZ = 'Sydney';
const sensor = (i: number): number => Math.round((21 + 3 * Math.sin(i / 720) + ((i * 7919) % 7) / 10) * 10) / 10;

const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });

/** One HTTP exchange; resolves once the whole answer has streamed in. */
function exchange(base: string, method: string, pathname: string, headers: Record<string, string>, body?: Buffer): Promise<{ status: number; bytes: number; text: string }> {
  const url = new URL(pathname, base);
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: url.hostname, port: url.port, method, path: url.pathname + url.search, agent, headers: body ? { ...headers, 'content-length': String(body.length) } : headers },
      (res) => {
        let bytes = 0;
        let head = '';
        res.on('data', (c: Buffer) => {
          if (head.length < 300) head += c.toString('utf8', 0, Math.min(c.length, 300));
          bytes += c.length;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, bytes, text: head }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

function hisWriteBody(pointId: string, from: number, n: number): Buffer {
  const tz = timeZone(TZ);
  const rows = new Array<string>(n);
  for (let i = 0; i < n; i++) {
    const t = from + i * 60_000;
    rows[i] = `{"ts":"t:${tz.formatInstant(t)} ${TZ}","val":"n:${sensor(t / 60_000)} °C"}`;
  }
  return Buffer.from(`{"meta":{"ver":"3.0","id":"r:${pointId}"},"cols":[{"name":"ts"},{"name":"val"}],"rows":[${rows.join(',')}]}`);
}

const d = await startDaemon([], { HAYLOFT_TZ: TZ });
const bare = await startBare();
const token = await loginDaemon(d.base);
const auth = { authorization: `Bearer ${token}` };
const json = { ...auth, 'content-type': 'application/json', accept: 'application/json' };
await postOp(d.base, token, 'createRec', jsonGrid([{ site: 'm:', name: 'site', tz: `s:${TZ}` }]));
const pts = await postOp(
  d.base,
  token,
  'createRec',
  jsonGrid(['small', 'large', 'reader'].map((name) => ({ point: 'm:', his: 'm:', kind: 's:Number', unit: 's:°C', tz: `s:${TZ}`, name, siteRef: 'r:site' }))),
);
const [small, large, reader] = pts.rows.map((r) => String(r.id).slice(2).split(' ')[0] as string) as [string, string, string];

// The point-year to read, written as clients write history (100,000-row batches).
for (let start = 0; start < YEAR; start += LARGE) {
  const a = await exchange(d.base, 'POST', '/api/hisWrite', json, hisWriteBody(reader, T0 + start * 60_000, Math.min(LARGE, YEAR - start)));
  if (a.status !== 200) throw new Error(`hisWrite answered ${a.status}: ${a.text}`);
}

let smallAt = 0;
let largeAt = 0;
const yearRange = encodeURIComponent('"2024-01-01,2024-12-30"');
const readRange = encodeURIComponent(`${new Date(T0).toISOString().slice(0, 19)}Z ${'UTC'},${new Date(T0 + READ * 60_000).toISOString().slice(0, 19)}Z UTC`);
const smallBody = hisWriteBody(small, T0, SMALL);
const cases: Record<string, () => Promise<number>> = {
  // One round: 20 batches of 10,000 one after another, ms for all of them.
  [`hisWrite, ${SMALL_BATCHES} batches of 10,000 samples`]: async () => {
    const bodies = Array.from({ length: SMALL_BATCHES }, (_, i) => hisWriteBody(small, T0 + (smallAt + i * SMALL) * 60_000, SMALL));
    smallAt += SMALL_BATCHES * SMALL;
    const t = performance.now();
    for (const b of bodies) {
      const a = await exchange(d.base, 'POST', '/api/hisWrite', json, b);
      if (a.status !== 200) throw new Error(`hisWrite answered ${a.status}: ${a.text}`);
    }
    return performance.now() - t;
  },
  [`baseline: bare node:http taking ${SMALL_BATCHES} bodies of 10,000 samples`]: async () => {
    const t = performance.now();
    for (let i = 0; i < SMALL_BATCHES; i++) await exchange(bare.base, 'POST', '/', { 'content-type': 'application/json' }, smallBody);
    return performance.now() - t;
  },
  'hisWrite, one batch of 100,000 samples': async () => {
    const body = hisWriteBody(large, T0 + largeAt * 60_000, LARGE);
    largeAt += LARGE;
    const t = performance.now();
    const a = await exchange(d.base, 'POST', '/api/hisWrite', json, body);
    if (a.status !== 200) throw new Error(`hisWrite answered ${a.status}: ${a.text}`);
    return performance.now() - t;
  },
  'hisRead, 100,000 samples, JSON': async () => {
    const t = performance.now();
    const a = await exchange(d.base, 'GET', `/api/hisRead?id=@${reader}&range=${readRange}`, { ...auth, accept: 'application/json' });
    if (a.status !== 200) throw new Error(`hisRead answered ${a.status}: ${a.text}`);
    readBytes = a.bytes;
    return performance.now() - t;
  },
  'baseline: bare node:http sending as many bytes': async () => {
    const t = performance.now();
    await exchange(bare.base, 'GET', `/bytes/${readBytes}`, {});
    return performance.now() - t;
  },
  'hisRead, a point-year, JSON': async () => {
    const t = performance.now();
    const a = await exchange(d.base, 'GET', `/api/hisRead?id=@${reader}&range=${yearRange}`, { ...auth, accept: 'application/json' });
    if (a.status !== 200) throw new Error(`hisRead answered ${a.status}: ${a.text}`);
    yearBytes = a.bytes;
    return performance.now() - t;
  },
  'hisRead, a point-year, Zinc': async () => {
    const t = performance.now();
    const a = await exchange(d.base, 'GET', `/api/hisRead?id=@${reader}&range=${yearRange}`, { ...auth, accept: 'text/zinc' });
    if (a.status !== 200) throw new Error(`hisRead answered ${a.status}: ${a.text}`);
    return performance.now() - t;
  },
};
let readBytes = 0;
let yearBytes = 0;

const times = new Map<string, number[]>();
const names = Object.keys(cases);
for (let r = 0; r < ROUNDS + 1; r++) {
  for (let i = 0; i < names.length; i++) {
    const name = names[(r + i) % names.length] as string;
    await new Promise((resolve) => setTimeout(resolve, 300));
    const ms = await (cases[name] as () => Promise<number>)();
    if (r > 0) times.set(name, [...(times.get(name) ?? []), ms]); // the first round warms up
  }
  console.log(`round ${r}: ${names.map((n) => `${n}: ${(times.get(n)?.at(-1) ?? NaN).toFixed(0)} ms`).join('; ')}`);
}
await stopDaemon(d);
await bare.stop();
agent.destroy();

const med = (name: string): number => median(times.get(name) ?? []);
const worst = (name: string): number => Math.max(...(times.get(name) ?? []));
// The range's end is Sydney's 2024-12-31 00:00 (13:00 UTC the day before), exclusive.
const yearN = (Date.UTC(2024, 11, 30, 13) - T0) / 60_000;
const W = `hisWrite, ${SMALL_BATCHES} batches of 10,000 samples`;
// [case, label, samples, goal, baseline case]
const rows: [string, string, number, string, string][] = [
  [W, `hisWrite, ${SMALL_BATCHES} batches of 10,000 samples one after another (${(smallBody.length / 1e6).toFixed(2)} MB each), each durable on its answer`, SMALL * SMALL_BATCHES, '≥ 600 k/s', names[1] as string],
  ['hisWrite, one batch of 100,000 samples', 'hisWrite, one batch of 100,000 samples, durable on its answer', LARGE, '≥ 500 k/s', ''],
  ['hisRead, 100,000 samples, JSON', `hisRead, 100,000 samples, JSON (${(readBytes / 1e6).toFixed(1)} MB)`, READ, '≥ 1.5 M/s in every round', names[4] as string],
  ['hisRead, a point-year, JSON', `hisRead, a point-year (${yearN.toLocaleString('en')} samples), JSON (${(yearBytes / 1e6).toFixed(0)} MB)`, yearN, '≥ 1.5 M/s', ''],
  ['hisRead, a point-year, Zinc', 'hisRead, the same, Zinc', yearN, '', ''],
];
const lines = [
  `Run: \`npm run bench -- his\` on ${machineLine()}; the daemon is \`hayloft serve\` as its own process started by its bin (its own runtime settings), the bare server another process, the client this one (node:http, one keep-alive connection, answers streamed and counted, not parsed); ${ROUNDS} interleaved rounds after a warm-up, medians (and the slowest round). Point of kind Number with unit °C in Sydney; a 0.1-quantized sensor curve at one-minute steps; JSON v3 bodies as the WideSky client sends them.`,
  '',
  '| case | median | samples/s (median) | slowest round | goal | bare node:http, same bytes | vs bare |',
  '|---|---:|---:|---:|---|---:|---:|',
];
for (const [name, label, n, goal, baseline] of rows) {
  const m = med(name);
  const b = baseline === '' ? NaN : med(baseline);
  lines.push(
    `| ${label} | ${m.toFixed(0)} ms | ${fmtRate((n / m) * 1000)} | ${fmtRate((n / worst(name)) * 1000)} | ${goal} | ${Number.isNaN(b) ? '' : `${b.toFixed(0)} ms`} | ${Number.isNaN(b) ? '' : (b / m).toFixed(2)} |`,
  );
}
lines.push('', '"vs bare" is the bare server\'s time over Hayloft\'s for the same bytes on the wire: the share of the time that is moving the bytes at all. The reference Java server did 70,600 samples/s written and 212,000 read on this machine class (issue 2).');
const table = lines.join('\n');
console.log(table);
if (!hasFlag('--no-record')) recordSection('his', table);
