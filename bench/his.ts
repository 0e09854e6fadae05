/**
 * bench/his: history over HTTP, end to end (HTTP in, JSON codec, checks, LevelDB underneath):
 *   (1) hisWrite of 100,000-row JSON batches, samples/s;
 *   (2) hisRead of one point-year of one-minute samples (525,600), samples/s, JSON and Zinc;
 *   and, as the baseline in the same run, raw classic-level with one entry per sample: write
 *   (chained batch) and scan of the same 525,600 samples.
 * Bytes per sample on disk by data shape are measured by bench/his-store.
 *
 *   npm run bench -- his [--rounds N] [--no-record]
 *
 * The client runs in this process but only streams bytes (no parsing), so nearly all the time
 * measured is the server's.
 */
import http from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ClassicLevel } from 'classic-level';
import { App } from '../src/app.js';
import { loadConfig } from '../src/config/index.js';
import { findTimeZone, timeZone } from '../src/haystack/tz.js';
import type { HRef} from '../src/haystack/values.js';
import { HDict, MARKER } from '../src/haystack/values.js';
import { silentLogger } from '../src/lib/log.js';
import { fmtRate, hasFlag, machineLine, median, numberArg, recordSection } from './harness.js';

const ROUNDS = numberArg('--rounds', 5);
const BATCH = 100_000;
const YEAR = 525_600;
const T0 = Date.UTC(2024, 0, 1);
const sensor = (i: number): number => Math.round((21 + 3 * Math.sin(i / 720) + ((i * 7919) % 7) / 10) * 10) / 10;

function tmp(): string {
  return mkdtempSync(path.join(os.tmpdir(), 'hayloft-bench-his-'));
}

/** One HTTP exchange; resolves with the status once the whole answer has streamed in. */
function exchange(port: number, method: string, pathname: string, headers: Record<string, string>, body?: Buffer): Promise<{ status: number; bytes: number }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path: pathname, headers: body ? { ...headers, 'content-length': String(body.length) } : headers }, (res) => {
      let bytes = 0;
      res.on('data', (c: Buffer) => (bytes += c.length));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, bytes }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

function hisWriteBody(pointId: string, tzName: string, from: number): Buffer {
  const tz = timeZone(tzName);
  const rows = new Array<string>(BATCH);
  for (let i = 0; i < BATCH; i++) {
    const t = from + i * 60_000;
    rows[i] = `{"ts":"t:${tz.formatInstant(t)} ${tzName}","val":"n:${sensor(t / 60_000)} °C"}`;
  }
  return Buffer.from(`{"meta":{"ver":"2.0","id":"r:${pointId}"},"cols":[{"name":"ts"},{"name":"val"}],"rows":[${rows.join(',')}]}`);
}

async function rawBaseline(): Promise<{ write: number; scan: number }> {
  const dir = tmp();
  const db = new ClassicLevel<Uint8Array, Uint8Array>(dir, { keyEncoding: 'view', valueEncoding: 'view' });
  await db.open();
  const t0 = performance.now();
  for (let start = 0; start < YEAR; start += 10_000) {
    const batch = db.batch();
    for (let i = start; i < Math.min(YEAR, start + 10_000); i++) {
      const k = new Uint8Array(16);
      k.set(Buffer.from('point-1\0'));
      new DataView(k.buffer).setFloat64(8, T0 + i * 60_000);
      const v = new Uint8Array(8);
      new DataView(v.buffer).setFloat64(0, sensor(i));
      batch.put(k, v);
    }
    await batch.write({ sync: false } as object);
  }
  const write = performance.now() - t0;
  const t1 = performance.now();
  let n = 0;
  for await (const [, v] of db.iterator()) n += v.length > 0 ? 1 : 0;
  const scan = performance.now() - t1;
  if (n !== YEAR) throw new Error(`raw scan saw ${n} samples`);
  await db.close();
  rmSync(dir, { recursive: true, force: true });
  return { write, scan };
}

const dir = tmp();
const config = loadConfig({
  env: { HAYLOFT_DATA_DIR: dir, HAYLOFT_HOST: '127.0.0.1', HAYLOFT_PORT: '0', HAYLOFT_HTTPS_PORT: 'off', HAYLOFT_TZ: 'Sydney', HAYLOFT_LOG_LEVEL: 'warn' },
  zones: { host: () => 'UTC', known: (n) => findTimeZone(n) !== undefined },
});
const app = await App.start({ config, log: silentLogger(), firstRun: { adminUser: 'bench@example.com', adminPassword: 'bench-password', clientId: 'bench', clientSecret: 'bench-secret-0123456789' } });
const [site] = await app.model.create([HDict.of({ site: MARKER, name: 'site', tz: 'Sydney' })]);
const mk = async (name: string): Promise<string> => {
  const [p] = await app.model.create([HDict.of({ point: MARKER, his: MARKER, kind: 'Number', unit: '°C', tz: 'Sydney', name, siteRef: site?.get('id') as HRef })]);
  return (p?.get('id') as HRef).id;
};
const tokenRes = await fetch(`http://127.0.0.1:${app.port}/oauth2/token`, {
  method: 'POST',
  headers: { authorization: 'Basic ' + Buffer.from('bench:bench-secret-0123456789').toString('base64'), 'content-type': 'application/json' },
  body: JSON.stringify({ grant_type: 'password', username: 'bench@example.com', password: 'bench-password' }),
});
const auth = { authorization: `Bearer ${((await tokenRes.json()) as { access_token: string }).access_token}` };

// (1) hisWrite: each round appends one 100,000-row batch (the next 100,000 minutes) to a point.
const writer = await mk('writer');
const writeMs: number[] = [];
for (let r = 0; r < ROUNDS + 1; r++) {
  const body = hisWriteBody(writer, 'Sydney', T0 + r * BATCH * 60_000);
  const t = performance.now();
  const a = await exchange(app.port, 'POST', '/api/hisWrite', { ...auth, 'content-type': 'application/json' }, body);
  const dt = performance.now() - t;
  if (a.status !== 200) throw new Error(`hisWrite answered ${a.status}`);
  if (r > 0) writeMs.push(dt); // the first round warms up
}

// (2) hisRead of a point-year: written through the store (the write path is measured above).
const reader = await mk('reader');
for (let start = 0; start < YEAR; start += 50_000) {
  const samples = [];
  for (let i = start; i < Math.min(YEAR, start + 50_000); i++) samples.push({ ts: T0 + i * 60_000, val: sensor(i) });
  await app.history.write(reader, 'Number', samples);
}
const range = encodeURIComponent('"2024-01-01,2024-12-30"');
const readMs: Record<string, number[]> = { json: [], zinc: [] };
let jsonBytes = 0;
for (let r = 0; r < ROUNDS + 1; r++) {
  for (const [fmt, accept] of [
    ['json', 'application/json'],
    ['zinc', 'text/zinc'],
  ] as const) {
    const t = performance.now();
    const a = await exchange(app.port, 'GET', `/api/hisRead?id=@${reader}&range=${range}`, { ...auth, accept });
    const dt = performance.now() - t;
    if (a.status !== 200) throw new Error(`hisRead answered ${a.status}`);
    if (fmt === 'json') jsonBytes = a.bytes;
    if (r > 0) readMs[fmt]?.push(dt);
  }
}
const stats = app.history.stats(reader);
await app.stop();
rmSync(dir, { recursive: true, force: true });

const raw: { write: number; scan: number }[] = [];
for (let r = 0; r < 3; r++) raw.push(await rawBaseline());

const w = median(writeMs);
const rj = median(readMs.json as number[]);
const rz = median(readMs.zinc as number[]);
const rw = median(raw.map((x) => x.write));
const rs = median(raw.map((x) => x.scan));
const readN = stats.size - 1440; // the range ends with 2024-12-30: the last day (Dec 31) is out
const lines = [
  `Run: \`npm run bench -- his\` on ${machineLine()}; ${ROUNDS} rounds after one warm-up, medians. Point of kind Number with unit °C in Sydney; a 0.1-quantized sensor curve at one-minute steps. Over HTTP on loopback with a bearer token; the client only streams bytes.`,
  '',
  '| case | median | samples/s | goal | reference Java server |',
  '|---|---:|---:|---|---:|',
  `| hisWrite, 100,000-row JSON batch (${(hisWriteBody(writer, 'Sydney', T0).length / 1e6).toFixed(1)} MB), durable on answer | ${w.toFixed(0)} ms | ${fmtRate((BATCH / w) * 1000)} | ≥ 500 k/s | 70.6 k/s |`,
  `| hisRead, one point-year (${readN.toLocaleString('en')} samples), JSON (${(jsonBytes / 1e6).toFixed(0)} MB) | ${rj.toFixed(0)} ms | ${fmtRate((readN / rj) * 1000)} | ≥ 1.5 M/s | 212 k/s |`,
  `| hisRead, the same, Zinc | ${rz.toFixed(0)} ms | ${fmtRate((readN / rz) * 1000)} | | |`,
  `| baseline: raw classic-level write, one entry per sample (${YEAR.toLocaleString('en')}) | ${rw.toFixed(0)} ms | ${fmtRate((YEAR / rw) * 1000)} | | |`,
  `| baseline: raw classic-level scan of them | ${rs.toFixed(0)} ms | ${fmtRate((YEAR / rs) * 1000)} | | |`,
];
const table = lines.join('\n');
console.log(table);
if (!hasFlag('--no-record')) recordSection('his', table);
