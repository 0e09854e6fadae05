/**
 * bench/mqtt: the Sparkplug B edge node against a local mosquitto.
 *
 * 1. Live: 10,000 points, a new sample for each every second. The daemon is its own process (the
 *    compiled CLI, `hayloft serve`); this process feeds it one multi-point hisWrite per second
 *    over HTTP and subscribes to spBv1.0/# to count what arrives. The daemon's CPU (utime + stime
 *    from /proc) and resident memory are read over the window, with the edge node configured and,
 *    as the baseline of the same run, without it (the same feed): the difference is what
 *    publishing costs. Cases alternate over the rounds; medians.
 * 2. Backlog: one day of 1,000 points at one-minute samples (1.44 M) in the store with every
 *    cursor at its start, as after a day without a broker; the daemon starts and drains it as
 *    historical DDATA: samples/s from the start of the process to the last sample received.
 *
 *   npm run bench -- mqtt [--seconds 20] [--rounds 2] [--no-record]
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import mqtt from 'mqtt';
import { App } from '../src/app.js';
import { loadConfig } from '../src/config/index.js';
import { UTC, findTimeZone } from '../src/haystack/tz.js';
import { HDict, HRef, MARKER } from '../src/haystack/values.js';
import { silentLogger } from '../src/lib/log.js';
import { encodeHisWrite } from '../src/sync/his-batch.js';
import { decode } from '../src/sync/mqtt/sparkplug.js';
import { SyncState } from '../src/sync/state.js';
import { hasFlag, machineLine, median, numberArg, recordSection, serverPid } from './harness.js';

const SECONDS = numberArg('--seconds', 20);
const ROUNDS = numberArg('--rounds', 2);
const LIVE_POINTS = 10_000;
const LIVE_EQUIPS = 100;
const BACKLOG_POINTS = 1000;
const DAY = 1440;
const T0 = Date.UTC(2024, 0, 1);
const ADMIN = { username: 'bench@example.com', password: 'bench-password-1' };
const CLIENT = { id: 'bench', secret: 'bench-client-secret-0123456789' };
const CLI = new URL('../src/cli.js', import.meta.url).pathname;
const zones = { host: () => 'UTC', known: (n: string) => findTimeZone(n) !== undefined };
const CLK_TCK = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;
const nodeFlags = (JSON.parse(readFileSync('package.json', 'utf8')) as { hayloft?: { nodeFlags?: string[] } }).hayloft?.nodeFlags ?? [];

function tmp(what: string): string {
  return mkdtempSync(path.join(os.tmpdir(), `hayloft-bench-mqtt-${what}-`));
}

async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

async function startBroker(): Promise<{ proc: ChildProcess; url: string; dir: string }> {
  const dir = tmp('broker');
  const port = await freePort();
  const conf = path.join(dir, 'mosquitto.conf');
  writeFileSync(conf, `listener ${port} 127.0.0.1\nallow_anonymous true\npersistence false\n${process.getuid?.() === 0 ? 'user root\n' : ''}`);
  const proc = spawn('/usr/sbin/mosquitto', ['-c', conf], { stdio: 'ignore' });
  for (let i = 0; i < 100; i++) {
    const ok = await new Promise<boolean>((r) => net.connect(port, '127.0.0.1').once('connect', function (this: net.Socket) { this.destroy(); r(true); }).once('error', () => r(false)));
    if (ok) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  return { proc, url: `mqtt://127.0.0.1:${port}`, dir };
}

function configFile(dir: string, brokerUrl: string | null): string {
  const file = path.join(dir, 'hayloft.json');
  const mqttSection = { url: brokerUrl, groupId: 'Bench', edgeNodeId: 'edge', publishIntervalMs: 1000 };
  writeFileSync(file, JSON.stringify(brokerUrl === null ? {} : { mqtt: mqttSection }));
  return file;
}

/** Points (and, for the backlog, a day of history with cursors at its start) straight into a store. */
async function seed(dir: string, points: number, equips: number, history: boolean): Promise<void> {
  const config = loadConfig({ env: { HAYLOFT_DATA_DIR: path.join(dir, 'data'), HAYLOFT_TZ: 'UTC', HAYLOFT_CONFIG: configFile(dir, null) }, zones });
  const app = await App.open({ config, log: silentLogger(), firstRun: { adminUser: ADMIN.username, adminPassword: ADMIN.password, clientId: CLIENT.id, clientSecret: CLIENT.secret } });
  try {
    const rows: HDict[] = [HDict.of({ id: HRef.of('site'), site: MARKER, name: 'plant', tz: 'UTC' })];
    for (let e = 0; e < equips; e++) rows.push(HDict.of({ id: HRef.of(`e${e}`), equip: MARKER, name: `ahu${e}`, siteRef: HRef.of('site') }));
    for (let p = 0; p < points; p++) {
      rows.push(HDict.of({ id: HRef.of(`p${p}`), point: MARKER, his: MARKER, sensor: MARKER, name: `t${p}`, kind: 'Number', unit: '°C', tz: 'UTC', siteRef: HRef.of('site'), equipRef: HRef.of(`e${p % equips}`) }));
    }
    await app.model.create(rows);
    if (history) {
      for (let p = 0; p < points; p += 50) {
        const writes = [];
        for (let q = p; q < Math.min(points, p + 50); q++) {
          const samples = new Array<{ ts: number; val: number }>(DAY);
          for (let i = 0; i < DAY; i++) samples[i] = { ts: T0 + i * 60_000, val: Math.round((21 + 3 * Math.sin((i + q * 37) / 180)) * 10) / 10 };
          writes.push({ pointId: `p${q}`, kind: 'Number' as const, samples });
        }
        await app.history.writeMany(writes);
      }
    }
  } finally {
    await app.stop();
  }
}

/** No cursors: every point starts at its newest sample (the live case: no backlog from the run before). */
async function forgetCursors(dir: string): Promise<void> {
  const config = loadConfig({ env: { HAYLOFT_DATA_DIR: path.join(dir, 'data'), HAYLOFT_TZ: 'UTC', HAYLOFT_CONFIG: configFile(dir, null) }, zones });
  const app = await App.open({ config, log: silentLogger() });
  try {
    const state = new SyncState(app.store, 'mqtt');
    await state.load();
    await state.forget(state.cursorIds(), { cursor: true, mapping: false });
  } finally {
    await app.stop();
  }
}

/** Every point's cursor just before its first sample: a day's backlog. */
async function resetCursors(dir: string): Promise<void> {
  const config = loadConfig({ env: { HAYLOFT_DATA_DIR: path.join(dir, 'data'), HAYLOFT_TZ: 'UTC', HAYLOFT_CONFIG: configFile(dir, null) }, zones });
  const app = await App.open({ config, log: silentLogger() });
  try {
    const state = new SyncState(app.store, 'mqtt');
    await state.load();
    const cursors: [string, number][] = [];
    for (let p = 0; p < BACKLOG_POINTS; p++) cursors.push([`p${p}`, T0 - 1]);
    await state.ack(cursors, 0);
  } finally {
    await app.stop();
  }
}

async function serve(dir: string, brokerUrl: string | null): Promise<{ proc: ChildProcess; base: string; token: string; startedAt: number }> {
  const startedAt = performance.now();
  const prof = hasFlag('--prof') && brokerUrl !== null ? ['--cpu-prof', '--cpu-prof-dir=/tmp/hayloft-mqtt-prof'] : [];
  const proc = spawn(process.execPath, [...nodeFlags, ...prof, CLI, 'serve'], {
    env: { ...process.env, HAYLOFT_DATA_DIR: path.join(dir, 'data'), HAYLOFT_HOST: '127.0.0.1', HAYLOFT_PORT: '0', HAYLOFT_TZ: 'UTC', HAYLOFT_LOG_LEVEL: 'info', HAYLOFT_CONFIG: configFile(dir, brokerUrl) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`hayloft did not start: ${out}`)), 120_000);
    proc.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
      for (const line of out.split('\n')) {
        if (!line.includes('Hayloft is serving')) continue;
        try {
          const j = JSON.parse(line) as { port?: number };
          if (typeof j.port === 'number') {
            clearTimeout(timer);
            resolve(j.port);
          }
        } catch {
          // a partial line
        }
      }
      if (out.length > 100_000) out = out.slice(-10_000);
    });
  });
  const base = `http://127.0.0.1:${port}`;
  const tok = await fetch(`${base}/oauth2/token`, {
    method: 'POST',
    headers: { authorization: 'Basic ' + Buffer.from(`${CLIENT.id}:${CLIENT.secret}`).toString('base64'), 'content-type': 'application/json' },
    body: JSON.stringify({ grant_type: 'password', ...ADMIN }),
  });
  const token = ((await tok.json()) as { access_token: string }).access_token;
  return { proc, base, token, startedAt };
}

async function stop(proc: ChildProcess): Promise<void> {
  const done = new Promise((r) => proc.on('exit', r));
  proc.kill('SIGTERM');
  await done;
}

/** utime + stime of a process, in seconds. */
function cpuSeconds(pid: number): number {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const rest = f.slice(f.lastIndexOf(')') + 2).split(' ');
  return (Number(rest[11]) + Number(rest[12])) / CLK_TCK;
}

function rssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m?.[1] ?? 0) / 1024;
}

/** A subscriber counting the samples of DDATA (live and historical). */
async function counter(url: string): Promise<{ live: number; historical: number; last: number; close(): Promise<void> }> {
  const c = await mqtt.connectAsync(url, { clean: true });
  const n = { live: 0, historical: 0, last: 0, close: () => c.endAsync() };
  c.on('message', (topic, payload) => {
    if (!topic.includes('/DDATA/')) return;
    for (const m of decode(payload).metrics ?? []) {
      if (m.isHistorical === true) n.historical++;
      else n.live++;
    }
    n.last = performance.now();
  });
  await c.subscribeAsync('spBv1.0/#', { qos: 0 });
  return n;
}

interface LiveResult {
  cpu: number;
  rss: number;
  /** Samples/s the feed got into the history store (the daemon's counter). */
  written: number;
  /** Live samples/s the daemon published (its counter). */
  published: number;
  /** Live samples/s the subscriber received. */
  delivered: number;
}

async function counters(d: { base: string; token: string }): Promise<{ published: number; written: number }> {
  const text = await (await fetch(`${d.base}/metrics`, { headers: { authorization: `Bearer ${d.token}` } })).text();
  const get = (name: string): number => Number(new RegExp(`^${name} (\\d+)`, 'm').exec(text)?.[1] ?? 0);
  return { published: get('hayloft_mqtt_samples_live_total'), written: get('hayloft_history_samples_written_total') };
}

async function live(dir: string, brokerUrl: string, withMqtt: boolean): Promise<LiveResult> {
  if (withMqtt) await forgetCursors(dir);
  const d = await serve(dir, withMqtt ? brokerUrl : null);
  const sub = await counter(brokerUrl);
  const pid = serverPid(d.proc.pid as number);
  const ids = Array.from({ length: LIVE_POINTS }, (_, p) => `p${p}`);
  let k = 0;
  const feed = async (): Promise<void> => {
    const ts = Float64Array.of(Date.now());
    const body = encodeHisWrite(
      ids.map((id, p) => ({ up: id, unit: '°C', run: { kind: 'Number' as const, ts, val: Float64Array.of(20 + ((p + k) % 50) / 10) } })),
      UTC,
    );
    k++;
    const r = await fetch(`${d.base}/api/hisWrite`, { method: 'POST', headers: { authorization: `Bearer ${d.token}`, 'content-type': 'application/json', accept: 'application/json' }, body });
    if (r.status !== 200) throw new Error(`hisWrite: ${r.status} ${(await r.text()).slice(0, 200)}`);
  };
  // Warm up: births, first samples, JIT.
  for (let i = 0; i < 5; i++) {
    await feed();
    await new Promise((r) => setTimeout(r, 1000));
  }
  const cpu0 = cpuSeconds(pid);
  const t0 = performance.now();
  const delivered0 = sub.live;
  const c0 = await counters(d);
  const rss: number[] = [];
  for (let i = 0; i < SECONDS; i++) {
    const next = t0 + (i + 1) * 1000;
    await feed();
    rss.push(rssMiB(pid));
    await new Promise((r) => setTimeout(r, Math.max(0, next - performance.now())));
  }
  const wall = (performance.now() - t0) / 1000;
  const cpu = ((cpuSeconds(pid) - cpu0) / wall) * 100;
  const delivered = (sub.live - delivered0) / wall;
  const c1 = await counters(d);
  const published = (c1.published - c0.published) / wall;
  const written = (c1.written - c0.written) / wall;
  await sub.close();
  await stop(d.proc);
  return { cpu, rss: median(rss), written, published, delivered };
}

async function backlog(dir: string, brokerUrl: string): Promise<{ seconds: number; rate: number; rss: number }> {
  await resetCursors(dir);
  const sub = await counter(brokerUrl);
  const total = BACKLOG_POINTS * DAY;
  const d = await serve(dir, brokerUrl);
  const pid = serverPid(d.proc.pid as number);
  let peak = 0;
  while (sub.historical < total) {
    peak = Math.max(peak, rssMiB(pid));
    await new Promise((r) => setTimeout(r, 100));
    if (performance.now() - d.startedAt > 600_000) throw new Error(`backlog not drained in 10 min: ${sub.historical} of ${total}`);
  }
  const seconds = (sub.last - d.startedAt) / 1000;
  await sub.close();
  await stop(d.proc);
  return { seconds, rate: total / seconds, rss: peak };
}

async function main(): Promise<void> {
  const broker = await startBroker();
  const liveDir = tmp('live');
  const backDir = tmp('backlog');
  try {
    await seed(liveDir, LIVE_POINTS, LIVE_EQUIPS, false);
    await seed(backDir, BACKLOG_POINTS, 10, true);
    const base: LiveResult[] = [];
    const withMqtt: LiveResult[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      base.push(await live(liveDir, broker.url, false));
      withMqtt.push(await live(liveDir, broker.url, true));
      console.log(`round ${r + 1}: baseline ${JSON.stringify(base.at(-1))}, mqtt ${JSON.stringify(withMqtt.at(-1))}`);
    }
    const drains: { seconds: number; rate: number; rss: number }[] = [];
    for (let r = 0; r < (hasFlag('--live-only') ? 0 : ROUNDS); r++) {
      drains.push(await backlog(backDir, broker.url));
      console.log(`backlog round ${r + 1}: ${JSON.stringify(drains.at(-1))}`);
    }
    if (hasFlag('--live-only')) return;
    const m = (xs: LiveResult[], k: keyof LiveResult): number => median(xs.map((x) => x[k]));
    const md = `Measured ${new Date().toISOString().slice(0, 10)} on ${machineLine()}; mosquitto 2.0 on loopback; the daemon is its own process
(\`hayloft serve\`, compiled, with package.json's Node flags), CPU from /proc (utime + stime over the window), medians of ${ROUNDS} rounds.

Live, ${LIVE_POINTS.toLocaleString('en-US')} points in ${LIVE_EQUIPS} devices, a sample per point per second fed by one multi-point hisWrite per
second over HTTP, ${SECONDS} s windows; the baseline is the same daemon and feed without the \`mqtt\` section:

| | baseline (no mqtt) | with the edge node | difference |
|---|---|---|---|
| CPU, share of one core | ${m(base, 'cpu').toFixed(1)} % | ${m(withMqtt, 'cpu').toFixed(1)} % | ${(m(withMqtt, 'cpu') - m(base, 'cpu')).toFixed(1)} points (x${(m(withMqtt, 'cpu') / m(base, 'cpu')).toFixed(2)}) |
| resident memory (median) | ${m(base, 'rss').toFixed(0)} MB | ${m(withMqtt, 'rss').toFixed(0)} MB | ${(m(withMqtt, 'rss') - m(base, 'rss')).toFixed(0)} MB |
| samples written to history by the feed | ${m(base, 'written').toFixed(0)} /s | ${m(withMqtt, 'written').toFixed(0)} /s | |
| live samples published (the daemon's counter) | – | ${m(withMqtt, 'published').toFixed(0)} /s | |
| live samples received by a subscriber (QoS 0, in the feeding process) | – | ${m(withMqtt, 'delivered').toFixed(0)} /s | |

Backlog: one day of ${BACKLOG_POINTS.toLocaleString('en-US')} points at one-minute samples (${(BACKLOG_POINTS * DAY).toLocaleString('en-US')}), every cursor at its start, drained as
historical DDATA (1,000 metrics per message) from the start of the process to the last sample received:
${median(drains.map((x) => x.seconds)).toFixed(1)} s, **${Math.round(median(drains.map((x) => x.rate))).toLocaleString('en-US')} samples/s**; peak resident memory ${median(drains.map((x) => x.rss)).toFixed(0)} MB.
`;
    console.log(md);
    if (!hasFlag('--no-record')) recordSection('mqtt', md);
  } finally {
    broker.proc.kill('SIGTERM');
    rmSync(liveDir, { recursive: true, force: true });
    rmSync(backDir, { recursive: true, force: true });
    rmSync(broker.dir, { recursive: true, force: true });
  }
}

await main();
