/**
 * bench/api: read throughput of the REST API on loopback with an authenticated client, beside a
 * bare node:http handler answering a fixed small body, measured with the same load settings
 * (wrk, one thread, 4 connections) in the same run, rounds interleaved, medians reported.
 *
 * Data: 1 site, 10 equips, N points (1,000 and 10,000) with typical tags. Cases: read by id,
 * read `point and his` (every point), read `his and equipRef==@<equip>` (one equip's points).
 *
 *   npm run bench -- api [--rounds N] [--seconds S] [--no-record]
 *
 * Needs wrk (Debian package `wrk`); installed with apt-get when missing and running as root.
 */
import { execFile, spawnSync } from 'node:child_process';
import { promisify } from 'node:util';
import http from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { App } from '../src/app.js';
import { loadConfig } from '../src/config/index.js';
import { findTimeZone } from '../src/haystack/tz.js';
import type { HRef} from '../src/haystack/values.js';
import { HDict, HNumber, MARKER } from '../src/haystack/values.js';
import { silentLogger } from '../src/lib/log.js';
import { fmtRate, hasFlag, machineLine, median, numberArg, recordSection } from './harness.js';

const ROUNDS = numberArg('--rounds', 5);
const SECONDS = numberArg('--seconds', 5);
const CONNECTIONS = 4;

function ensureWrk(): void {
  if (spawnSync('wrk', ['--version']).error === undefined) return;
  if (process.getuid?.() === 0) {
    console.error('bench/api: installing wrk (apt-get install -y wrk)...');
    spawnSync('sh', ['-c', 'apt-get install -y wrk >/dev/null 2>&1 || (apt-get update >/dev/null && apt-get install -y wrk >/dev/null)'], { stdio: 'inherit' });
    if (spawnSync('wrk', ['--version']).error === undefined) return;
  }
  throw new Error('bench/api needs wrk: apt-get install -y wrk');
}

/** Requests per second reported by wrk for one URL (asynchronously: the server under test runs in this process). */
async function wrk(url: string, headers: Record<string, string>, seconds = SECONDS): Promise<number> {
  const h = Object.entries(headers).flatMap(([k, v]) => ['-H', `${k}: ${v}`]);
  const { stdout: out } = await promisify(execFile)('wrk', ['-t1', `-c${CONNECTIONS}`, `-d${seconds}s`, '--latency', ...h, url], { encoding: 'utf8' });
  const m = /Requests\/sec:\s+([\d.]+)/.exec(out);
  const errors = /Non-2xx or 3xx responses: (\d+)/.exec(out);
  if (errors !== null) throw new Error(`wrk saw ${errors[1]} error answers from ${url}:\n${out}`);
  if (m === null) throw new Error(`cannot read wrk's output:\n${out}`);
  return Number(m[1]);
}

async function bare(): Promise<{ url: string; close: () => Promise<void> }> {
  const body = '{"meta":{"ver":"2.0"},"cols":[{"name":"empty"}],"rows":[]}';
  const server = http.createServer((_req, res) => {
    res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
    res.end(body);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  return { url: `http://127.0.0.1:${port}/`, close: () => new Promise((r) => server.close(() => r())) };
}

async function hayloft(points: number): Promise<{ base: string; token: string; pointId: string; equipId: string; stop: () => Promise<void> }> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'hayloft-bench-'));
  const config = loadConfig({
    env: { HAYLOFT_DATA_DIR: dir, HAYLOFT_HOST: '127.0.0.1', HAYLOFT_PORT: '0', HAYLOFT_HTTPS_PORT: 'off', HAYLOFT_TZ: 'UTC', HAYLOFT_LOG_LEVEL: 'warn' },
    zones: { host: () => 'UTC', known: (n) => findTimeZone(n) !== undefined },
  });
  const app = await App.start({
    config,
    log: silentLogger(),
    firstRun: { adminUser: 'bench@example.com', adminPassword: 'bench-password', clientId: 'bench', clientSecret: 'bench-secret-0123456789' },
  });
  const [site] = await app.model.create([HDict.of({ site: MARKER, name: 'site', dis: 'Bench Site', tz: 'Sydney', area: new HNumber(5000, 'm²') })]);
  const siteRef = site?.get('id') as HRef;
  const equips = await app.model.create(
    Array.from({ length: 10 }, (_, e) => HDict.of({ equip: MARKER, ahu: MARKER, name: `ahu${e}`, dis: `AHU ${e}`, siteRef })),
  );
  const perEquip = points / 10;
  for (let e = 0; e < 10; e++) {
    const equipRef = equips[e]?.get('id') as HRef;
    const rows = Array.from({ length: perEquip }, (_, p) =>
      HDict.of({
        point: MARKER,
        his: MARKER,
        cur: MARKER,
        sensor: MARKER,
        temp: MARKER,
        kind: 'Number',
        unit: '°C',
        tz: 'Sydney',
        name: `p${p}`,
        dis: `AHU ${e} point ${p}`,
        equipRef,
        siteRef,
        curVal: new HNumber(21.5, '°C'),
        curStatus: 'ok',
      }),
    );
    await app.model.create(rows);
  }
  const res = await fetch(`http://127.0.0.1:${app.port}/oauth2/token`, {
    method: 'POST',
    headers: { authorization: 'Basic ' + Buffer.from('bench:bench-secret-0123456789').toString('base64'), 'content-type': 'application/json' },
    body: JSON.stringify({ grant_type: 'password', username: 'bench@example.com', password: 'bench-password' }),
  });
  const token = ((await res.json()) as { access_token: string }).access_token;
  const point = app.model.query('point', 1)[0] as HDict;
  return {
    base: `http://127.0.0.1:${app.port}`,
    token,
    pointId: (point.get('id') as HRef).id,
    equipId: (equips[3]?.get('id') as HRef).id,
    stop: async () => {
      await app.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

ensureWrk();
const b = await bare();
const lines: string[] = [
  `Run: \`npm run bench -- api\` on ${machineLine()}; wrk 1 thread, ${CONNECTIONS} connections, ${SECONDS} s per case, ${ROUNDS} interleaved rounds (each starting at another case, 1 s between cases), medians; Node flags: ${process.execArgv.join(' ') || 'none'}; the server and wrk share the machine's 2 cores. Every Hayloft request carries a bearer token (verified, cached, session checked) and answers JSON.`,
  '',
  '| points | case | req/s (median) | vs bare node:http | goal |',
  '|---:|---|---:|---:|---|',
];
for (const points of [1000, 10_000]) {
  const h = await hayloft(points);
  const auth = { Authorization: `Bearer ${h.token}`, Accept: 'application/json' };
  const cases: Record<string, () => Promise<number>> = {
    'bare node:http (baseline)': () => wrk(b.url, {}),
    'read by id': () => wrk(`${h.base}/api/read?id=@${h.pointId}`, auth),
    [`read \`point and his\` (${points} rows)`]: () => wrk(`${h.base}/api/read?filter=${encodeURIComponent('point and his')}`, auth),
    [`read \`his and equipRef==@equip\` (${points / 10} rows)`]: () => wrk(`${h.base}/api/read?filter=${encodeURIComponent(`his and equipRef==@${h.equipId}`)}`, auth),
  };
  const got: Record<string, number[]> = {};
  // One short pass first, discarded: JIT warm-up and first-use caches (views, row texts, tokens).
  for (const url of [`${h.base}/api/read?id=@${h.pointId}`, `${h.base}/api/read?filter=${encodeURIComponent('point and his')}`]) await wrk(url, auth, 2);
  // Each round starts at another case (every case follows every other equally often) and each
  // case starts after a pause: a case must not pay for the garbage its predecessor left (a
  // 1,000-row read leaves hundreds of MB a second for the collector to finish).
  const entries = Object.entries(cases);
  for (let r = 0; r < ROUNDS; r++) {
    for (let i = 0; i < entries.length; i++) {
      const [name, f] = entries[(r + i) % entries.length] as [string, () => Promise<number>];
      await new Promise((resolve) => setTimeout(resolve, 1000));
      (got[name] ??= []).push(await f());
    }
  }
  const baseRate = median(got['bare node:http (baseline)'] as number[]);
  for (const [name, xs] of Object.entries(got)) {
    const rate = median(xs);
    const goal = name.startsWith('read by id')
      ? '≥ 0.70 of bare'
      : name.includes('point and his') && points === 1000
        ? '≥ 276/s (3 × 92)'
        : name.includes('equipRef') && points === 1000
          ? '≥ 2,973/s (3 × 991)'
          : '';
    lines.push(`| ${points.toLocaleString('en')} | ${name} | ${fmtRate(rate)} | ${(rate / baseRate).toFixed(2)} | ${goal} |`);
  }
  await h.stop();
}
await b.close();
lines.push('', 'The reference figures (92 and 991 reads/s, 23,600 req/s by id) are the Haystack reference Java server on this machine class, from the issue.');
const table = lines.join('\n');
console.log(table);
if (!hasFlag('--no-record')) recordSection('api', table);
