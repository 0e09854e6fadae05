/**
 * bench/uplink: drain of a one-day backlog of 1,000 points at one-minute samples (1.44 M samples)
 * to a cloud Hayloft on loopback, samples/s. Goal: under 60 s.
 *
 * The cloud is a separate process (the compiled CLI, `hayloft serve`), as it would be another
 * machine; the edge runs in this process. The edge's history is written straight into its store
 * first, then the edge starts with the uplink configured and the clock runs from there until every
 * point's cursor has reached its newest sample: mapping (1,011 entities found or created upstream)
 * included. Each case drains to a fresh, empty cloud under another connector name (cursors are
 * per connector), so the edge's data is written once. The cloud's count of samples is checked at
 * the end of each case.
 *
 * Batch sizes are run interleaved over several rounds (this machine is shared and noisy), medians
 * reported.
 *
 *   npm run bench -- uplink [--batch 50000,20000] [--rounds N] [--no-record]
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { App } from '../src/app.js';
import { loadConfig } from '../src/config/index.js';
import { findTimeZone } from '../src/haystack/tz.js';
import { HDict, HRef, MARKER } from '../src/haystack/values.js';
import { silentLogger } from '../src/lib/log.js';
import { fmtRate, hasFlag, machineLine, median, numberArg, recordSection } from './harness.js';

const args = process.argv.slice(2);
const batchArg = args.indexOf('--batch');
const BATCHES = batchArg >= 0 ? (args[batchArg + 1] ?? '').split(',').map(Number) : [10_000, 20_000, 50_000, 200_000];
const ROUNDS = numberArg('--rounds', 3);
const DEFAULT_BATCH = 50_000;
const POINTS = 1000;
const EQUIPS = 10;
const DAY = 1440;
const T0 = Date.UTC(2024, 0, 1);
const ADMIN = { username: 'bench@example.com', password: 'bench-password-1' };
const CLIENT = { id: 'bench', secret: 'bench-client-secret-0123456789' };
const CLI = new URL('../src/cli.js', import.meta.url).pathname;
/** A 0.1-quantized sensor curve, a different phase per point. */
const sensor = (p: number, i: number): number => Math.round((21 + 3 * Math.sin((i + p * 37) / 180) + ((i * 7919 + p) % 7) / 10) * 10) / 10;

function tmp(what: string): string {
  return mkdtempSync(path.join(os.tmpdir(), `hayloft-bench-uplink-${what}-`));
}

const zones = { host: () => 'UTC', known: (n: string) => findTimeZone(n) !== undefined };

async function startCloud(): Promise<{ proc: ChildProcess; base: string; dir: string }> {
  const dir = tmp('cloud');
  const proc = spawn(process.execPath, [CLI, 'serve'], {
    env: {
      ...process.env,
      HAYLOFT_DATA_DIR: dir,
      HAYLOFT_HOST: '127.0.0.1',
      HAYLOFT_PORT: '0',
      HAYLOFT_HTTPS_PORT: 'off',
      HAYLOFT_TZ: 'UTC',
      HAYLOFT_LOG_LEVEL: 'info',
      HAYLOFT_ADMIN_USER: ADMIN.username,
      HAYLOFT_ADMIN_PASSWORD: ADMIN.password,
      HAYLOFT_CLIENT_ID: CLIENT.id,
      HAYLOFT_CLIENT_SECRET: CLIENT.secret,
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`the cloud did not start: ${out}`)), 60_000);
    proc.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
      for (const line of out.split('\n')) {
        if (!line.startsWith('{')) continue;
        try {
          const j = JSON.parse(line) as { msg?: string; port?: number };
          if (j.msg === 'Hayloft is serving' && typeof j.port === 'number') {
            clearTimeout(timer);
            resolve(j.port);
          }
        } catch {
          // partial line
        }
      }
    });
  });
  return { proc, base: `http://127.0.0.1:${port}`, dir };
}

async function stopCloud(c: { proc: ChildProcess; dir: string }): Promise<void> {
  const done = new Promise((r) => c.proc.on('exit', r));
  c.proc.kill('SIGTERM');
  await done;
  rmSync(c.dir, { recursive: true, force: true });
}

async function cloudSamples(base: string): Promise<number> {
  const tok = await fetch(`${base}/oauth2/token`, {
    method: 'POST',
    headers: { authorization: 'Basic ' + Buffer.from(`${CLIENT.id}:${CLIENT.secret}`).toString('base64'), 'content-type': 'application/json' },
    body: JSON.stringify({ grant_type: 'password', ...ADMIN }),
  });
  const token = ((await tok.json()) as { access_token: string }).access_token;
  const res = await fetch(`${base}/api/read`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json' },
    body: JSON.stringify({ meta: { ver: '2.0' }, cols: [{ name: 'filter' }], rows: [{ filter: 's:point and his' }] }),
  });
  const g = (await res.json()) as { rows: { hisSize?: string }[] };
  let n = 0;
  for (const r of g.rows) n += Number((r.hisSize ?? 'n:0').slice(2));
  return n;
}

function edgeConfig(dir: string, uplink: Record<string, unknown> | null) {
  const file = path.join(dir, 'hayloft.json');
  writeFileSync(file, JSON.stringify(uplink === null ? {} : { uplink }));
  return loadConfig({ env: { HAYLOFT_DATA_DIR: path.join(dir, 'data'), HAYLOFT_HOST: '127.0.0.1', HAYLOFT_PORT: '0', HAYLOFT_HTTPS_PORT: 'off', HAYLOFT_TZ: 'UTC', HAYLOFT_CONFIG: file, HAYLOFT_LOG_LEVEL: 'silent' }, zones });
}

/** Writes the edge's model and its one-day backlog straight into its store. */
async function seedEdge(dir: string): Promise<void> {
  const app = await App.open({ config: edgeConfig(dir, null), log: silentLogger(), firstRun: { adminUser: ADMIN.username, adminPassword: ADMIN.password, clientId: CLIENT.id, clientSecret: CLIENT.secret } });
  try {
    const rows: HDict[] = [HDict.of({ id: HRef.of('site'), site: MARKER, name: 'plant', tz: 'UTC' })];
    for (let e = 0; e < EQUIPS; e++) rows.push(HDict.of({ id: HRef.of(`e${e}`), equip: MARKER, name: `ahu${e}`, siteRef: HRef.of('site') }));
    for (let p = 0; p < POINTS; p++) {
      rows.push(HDict.of({ id: HRef.of(`p${p}`), point: MARKER, his: MARKER, sensor: MARKER, name: `t${p}`, kind: 'Number', unit: '°C', tz: 'UTC', siteRef: HRef.of('site'), equipRef: HRef.of(`e${p % EQUIPS}`) }));
    }
    await app.model.create(rows);
    for (let p = 0; p < POINTS; p += 50) {
      const writes = [];
      for (let q = p; q < Math.min(POINTS, p + 50); q++) {
        const samples = new Array<{ ts: number; val: number }>(DAY);
        for (let i = 0; i < DAY; i++) samples[i] = { ts: T0 + i * 60_000, val: sensor(q, i) };
        writes.push({ pointId: `p${q}`, kind: 'Number' as const, samples });
      }
      await app.history.writeMany(writes);
    }
  } finally {
    await app.stop();
  }
}

interface Result {
  batch: number;
  totalMs: number;
  firstAckMs: number;
  batches: number;
  requests: number;
  cloudSamples: number;
  peakRssMiB: number;
  baseRssMiB: number;
}

async function drain(dir: string, batch: number, n: number): Promise<Result> {
  const cloud = await startCloud();
  try {
    const config = edgeConfig(dir, {
      name: `bench${n}`,
      url: cloud.base,
      clientId: CLIENT.id,
      clientSecret: CLIENT.secret,
      ...ADMIN,
      batchSamples: batch,
      scanIntervalMs: 50,
    });
    global.gc?.();
    const baseRss = process.memoryUsage().rss;
    let peak = baseRss;
    const t0 = performance.now();
    const app = await App.start({ config, log: silentLogger() });
    let firstAck = 0;
    try {
      const up = app.uplink;
      if (up === null) throw new Error('no uplink');
      for (;;) {
        await new Promise((r) => setTimeout(r, 20));
        peak = Math.max(peak, process.memoryUsage().rss);
        const s = up.stats();
        if (firstAck === 0 && s.sentBatches > 0) firstAck = performance.now() - t0;
        if (s.lastError !== null && s.failures > 2) throw new Error(`uplink failing: ${s.lastError}`);
        if (s.points === POINTS && s.mapped === POINTS && s.backlogPoints === 0) break;
      }
      const totalMs = performance.now() - t0;
      const s = up.stats();
      return {
        batch,
        totalMs,
        firstAckMs: firstAck,
        batches: s.sentBatches,
        requests: s.requests,
        cloudSamples: await cloudSamples(cloud.base),
        peakRssMiB: peak / 2 ** 20,
        baseRssMiB: baseRss / 2 ** 20,
      };
    } finally {
      await app.stop();
    }
  } finally {
    await stopCloud(cloud);
  }
}

async function main(): Promise<void> {
  const dir = tmp('edge');
  try {
    const t0 = performance.now();
    await seedEdge(dir);
    console.log(`edge seeded: ${POINTS} points x ${DAY} samples in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    const results = new Map<number, Result[]>(BATCHES.map((b) => [b, []]));
    const total = POINTS * DAY;
    let n = 0;
    for (let round = 0; round < ROUNDS; round++) {
      for (const b of BATCHES) {
        const r = await drain(dir, b, n++);
        (results.get(b) as Result[]).push(r);
        console.log(
          `round ${round + 1}, batchSamples ${b}: ${(r.totalMs / 1000).toFixed(2)} s, ${fmtRate(total / (r.totalMs / 1000))} samples/s, ${r.batches} batches, first ack after ${(r.firstAckMs / 1000).toFixed(2)} s, cloud holds ${r.cloudSamples}, RSS ${r.baseRssMiB.toFixed(0)} -> ${r.peakRssMiB.toFixed(0)} MiB`,
        );
        if (r.cloudSamples !== total) throw new Error(`the cloud holds ${r.cloudSamples} samples, not ${total}`);
      }
    }
    const rows = BATCHES.map((b) => {
      const rs = results.get(b) as Result[];
      const ms = median(rs.map((r) => r.totalMs));
      const goal = b === DEFAULT_BATCH ? (ms < 60_000 ? 'met' : 'missed') : '';
      const cells = [
        `${b.toLocaleString('en-US')}${b === DEFAULT_BATCH ? ' (default)' : ''}`,
        `${(ms / 1000).toFixed(2)} s`,
        fmtRate(total / (ms / 1000)),
        String((rs[0] as Result).batches),
        `${(median(rs.map((r) => r.firstAckMs)) / 1000).toFixed(2)} s`,
        `+${median(rs.map((r) => r.peakRssMiB - r.baseRssMiB)).toFixed(0)} MiB`,
        goal,
      ];
      return `| ${cells.join(' | ')} |`;
    });
    const md = `Run: \`npm run bench -- uplink\` on ${machineLine()}; ${POINTS.toLocaleString('en-US')} points (${EQUIPS} equips, one site) with one day of one-minute samples each (${(POINTS * DAY).toLocaleString('en-US')} samples, a 0.1-quantized sensor curve), drained from an edge (this process) to a cloud Hayloft (a separate process, the compiled CLI) on loopback; ${ROUNDS} interleaved rounds per batch size, medians, each run to a fresh cloud. Time from the edge's start to every cursor at its point's newest sample: finding and creating the ${POINTS + EQUIPS + 1} entities upstream (createRec, 500 per request) included; "first ack" is when the first hisWrite was acknowledged. RSS: the edge process's growth while draining (its history store and model included). Every run checks that the cloud holds every sample.

| batchSamples | drain | samples/s | batches | first ack | edge RSS growth | goal < 60 s |
|---:|---:|---:|---:|---:|---:|---|
${rows.join('\n')}`;
    if (!hasFlag('--no-record')) recordSection('uplink', md);
    console.log(md);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
