/**
 * bench/mqtt: the Sparkplug B edge node against a local mosquitto.
 *
 * 1. Live, fed as a gateway is: by its drivers. 10 simulated Modbus TCP devices in this process
 *    (bench/modbus-sim), whose registers change every second; the daemon (its own process,
 *    started by its bin: harness startDaemon) polls 10,000 points on them every second. Each
 *    point is `his` with `hisCollectInterval: 1s`: a gateway that forwards live values and keeps
 *    them for store-and-forward. The edge node publishes each point's curVal as it changes
 *    (report by exception, dated when the reading came) and its history only after an outage
 *    (src/sync/mqtt/edge-node.ts). One Sparkplug device per equip, one equip per
 *    Modbus device (the default deviceBy: equip). Two data folders with the same devices and
 *    points: one without the `mqtt` section (the baseline), one with it; cases alternate over the
 *    rounds, medians. The daemon's CPU (utime + stime from /proc) and resident memory are read
 *    from the server process; a QoS 0 subscriber in this process counts the live samples that
 *    arrive and times each from its timestamp (the end of the poll read that produced it, same
 *    clock) to its arrival.
 * 2. Backlog: one day of 1,000 points at one-minute samples (1.44 M) in the store with every
 *    cursor at its start, as after a day without a broker; the daemon starts and drains it as
 *    historical DDATA: samples/s from the start of the process to the last sample received.
 *
 *   npm run bench -- mqtt [--seconds 15] [--warmup 10] [--rounds 3] [--backlog-rounds 2] [--live-only] [--no-record]
 *
 * `--cur-only`: the live case with points without `his` (published on curVal change; the
 * figures are printed, not recorded).
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import mqtt from 'mqtt';
import { App } from '../src/app.js';
import { loadConfig } from '../src/config/index.js';
import { findTimeZone } from '../src/haystack/tz.js';
import { HDict, HRef, MARKER } from '../src/haystack/values.js';
import { silentLogger } from '../src/lib/log.js';
import { decode, num } from '../src/sync/mqtt/sparkplug.js';
import { SyncState } from '../src/sync/state.js';
import { BENCH_ADMIN, BENCH_CLIENT, type Daemon, hasFlag, jsonGrid, loginDaemon, machineLine, median, numberArg, postOp, recordSection, sleep, startDaemon, stopDaemon } from './harness.js';
import { changingDevices } from './modbus-sim.js';

const SECONDS = numberArg('--seconds', 15);
const WARMUP = numberArg('--warmup', 10);
const ROUNDS = numberArg('--rounds', 3);
const BACKLOG_ROUNDS = hasFlag('--live-only') ? 0 : numberArg('--backlog-rounds', 2);
/** Points without `his`: published on curVal change, no history, no store and forward (not recorded). */
const CUR_ONLY = hasFlag('--cur-only');
const LIVE_POINTS = 10_000;
const DEVICES = 10;
const PER_DEVICE = LIVE_POINTS / DEVICES;
const BACKLOG_POINTS = 1000;
const DAY = 1440;
const T0 = Date.UTC(2024, 0, 1);
const zones = { host: () => 'UTC', known: (n: string) => findTimeZone(n) !== undefined };

const CLK_TCK = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;

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
    await sleep(50);
  }
  return { proc, url: `mqtt://127.0.0.1:${port}`, dir };
}

/** The config file of a data folder: the `mqtt` section, or none (the baseline). */
function configFile(dir: string, brokerUrl: string | null): string {
  const file = path.join(dir, 'hayloft.json');
  const mqttSection = { url: brokerUrl, groupId: 'Bench', edgeNodeId: 'edge', publishIntervalMs: 1000 };
  writeFileSync(file, JSON.stringify(brokerUrl === null ? {} : { mqtt: mqttSection }));
  return file;
}

/** The daemon on a data folder of this bench (kept across its restarts), with its config file. */
async function serveOn(dir: string, brokerUrl: string | null): Promise<{ d: Daemon; token: string }> {
  const d = await startDaemon([], { HAYLOFT_DATA_DIR: path.join(dir, 'data'), HAYLOFT_CONFIG: configFile(dir, brokerUrl) });
  return { d, token: await loginDaemon(d.base) };
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

async function counters(base: string, token: string): Promise<{ published: number; written: number; reads: number }> {
  const text = await (await fetch(`${base}/metrics`, { headers: { authorization: `Bearer ${token}` } })).text();
  const get = (name: string): number => Number(new RegExp(`^${name} (\\d+)`, 'm').exec(text)?.[1] ?? 0);
  return { published: get('hayloft_mqtt_samples_live_total'), written: get('hayloft_history_samples_written_total'), reads: get('hayloft_poll_reads_total') };
}

/**
 * A subscriber (QoS 0) counting the samples of DDATA, live and historical. Live samples whose
 * timestamp falls in `window` (epoch ms, from inclusive, to exclusive) are counted apart, with
 * each one's delay from its timestamp to its arrival: counting by timestamp rather than by
 * arrival keeps whole publish passes from landing in or out of a window at its edges.
 */
async function subscriber(url: string): Promise<{ live: number; historical: number; distinct: Set<number>; last: number; window: [number, number]; delays: number[]; close(): Promise<void> }> {
  const c = await mqtt.connectAsync(url, { clean: true });
  const n = { live: 0, historical: 0, distinct: new Set<number>(), last: 0, window: [Infinity, Infinity] as [number, number], delays: [] as number[], close: () => c.endAsync() };
  c.on('message', (topic, payload) => {
    if (!topic.includes('/DDATA/')) return;
    const at = Date.now();
    for (const m of decode(payload).metrics ?? []) {
      if (m.isHistorical === true) {
        n.historical++;
        // (alias, timestamp) as one safe integer: aliases stay under 2^11, timestamps under 2^41.
        n.distinct.add(num(m.alias) * 2 ** 41 + num(m.timestamp));
      } else if (m.properties === undefined || m.properties === null) {
        n.live++;
        const ts = num(m.timestamp);
        if (ts >= n.window[0] && ts < n.window[1]) n.delays.push(at - ts);
      }
    }
    n.last = performance.now();
  });
  await c.subscribeAsync('spBv1.0/#', { qos: 0 });
  return n;
}

/** The gateway's model, created over HTTP as an integrator would: a site, one equip and one connector per device, the points. */
async function createModel(base: string, token: string, ports: number[]): Promise<void> {
  const top: object[] = [{ id: 'r:site', site: 'm:', name: 's:plant', tz: 's:UTC' }];
  ports.forEach((p, d) => {
    top.push({ id: `r:eq${d}`, equip: 'm:', name: `s:plc${d}`, siteRef: 'r:site' });
    top.push({ id: `r:dev${d}`, modbusConn: 'm:', name: `s:dev${d}`, uri: `u:modbus-tcp://127.0.0.1:${p}`, modbusSlave: 'n:1', pollTime: 'n:1 s' });
  });
  await postOp(base, token, 'createRec', jsonGrid(top));
  for (let d = 0; d < DEVICES; d++) {
    const rows: object[] = [];
    for (let a = 0; a < PER_DEVICE; a++) {
      rows.push({
        id: `r:dev${d}-p${a}`,
        point: 'm:',
        cur: 'm:',
        ...(CUR_ONLY ? {} : { his: 'm:', hisCollectInterval: 'n:1 s' }),
        sensor: 'm:',
        name: `s:r${a}`,
        kind: 's:Number',
        tz: 's:UTC',
        siteRef: 'r:site',
        equipRef: `r:eq${d}`,
        modbusConnRef: `r:dev${d}`,
        modbusCur: `s:input:${a}`,
      });
    }
    await postOp(base, token, 'createRec', jsonGrid(rows));
  }
}

interface LiveResult {
  cpu: number;
  rss: number;
  /** Samples/s collected into history from the polls (the daemon's counter). */
  written: number;
  /** Live samples/s the daemon published (its counter). */
  published: number;
  /** Live samples/s the subscriber received, by their timestamps in the window. */
  delivered: number;
  /** Poll to arrival, ms: median and 99th percentile of the window's live samples (his points only). */
  p50: number;
  p99: number;
  /** 1-minute load average of the machine at the end of the window. */
  load: number;
}

type Subscriber = Awaited<ReturnType<typeof subscriber>>;

async function live(dir: string, brokerUrl: string | null, sub: Subscriber, ports: number[], first: boolean): Promise<LiveResult> {
  const { d, token } = await serveOn(dir, brokerUrl);
  try {
    if (first) await createModel(d.base, token, ports);
    await sleep(WARMUP * 1000);
    const cpu0 = cpuSeconds(d.pid);
    const t0 = performance.now();
    const c0 = await counters(d.base, token);
    sub.delays = [];
    sub.window = [Date.now(), Infinity];
    const rss: number[] = [];
    for (let i = 0; i < SECONDS; i++) {
      await sleep(Math.max(0, t0 + (i + 1) * 1000 - performance.now()));
      rss.push(rssMiB(d.pid));
    }
    const wall = (performance.now() - t0) / 1000;
    const cpu = ((cpuSeconds(d.pid) - cpu0) / wall) * 100;
    const c1 = await counters(d.base, token);
    sub.window = [sub.window[0], sub.window[0] + wall * 1000];
    // The window's last samples go out at the next pass: wait for it (a publish interval and a margin).
    await sleep(2500);
    const delivered = sub.delays.length / wall;
    // A curVal report carries the time of the pass, not of the poll: no latency for those.
    const delays = CUR_ONLY ? [] : sub.delays.sort((a, b) => a - b);
    sub.window = [Infinity, Infinity];
    const pct = (q: number): number => delays[Math.min(delays.length - 1, Math.floor(q * delays.length))] ?? NaN;
    return {
      cpu,
      rss: median(rss),
      written: (c1.written - c0.written) / wall,
      published: (c1.published - c0.published) / wall,
      delivered,
      p50: pct(0.5),
      p99: pct(0.99),
      load: os.loadavg()[0] as number,
    };
  } finally {
    await stopDaemon(d);
  }
}

/** Points and a day of history, with cursors at its start, straight into a store (the backlog case). */
async function seedBacklog(dir: string): Promise<void> {
  const config = loadConfig({ env: { HAYLOFT_DATA_DIR: path.join(dir, 'data'), HAYLOFT_TZ: 'UTC', HAYLOFT_CONFIG: configFile(dir, null) }, zones });
  const app = await App.open({ config, log: silentLogger(), firstRun: { adminUser: BENCH_ADMIN.username, adminPassword: BENCH_ADMIN.password, clientId: BENCH_CLIENT.id, clientSecret: BENCH_CLIENT.secret } });
  try {
    const equips = 10;
    const rows: HDict[] = [HDict.of({ id: HRef.of('site'), site: MARKER, name: 'plant', tz: 'UTC' })];
    for (let e = 0; e < equips; e++) rows.push(HDict.of({ id: HRef.of(`e${e}`), equip: MARKER, name: `ahu${e}`, siteRef: HRef.of('site') }));
    for (let p = 0; p < BACKLOG_POINTS; p++) {
      rows.push(HDict.of({ id: HRef.of(`p${p}`), point: MARKER, his: MARKER, sensor: MARKER, name: `t${p}`, kind: 'Number', unit: '°C', tz: 'UTC', siteRef: HRef.of('site'), equipRef: HRef.of(`e${p % equips}`) }));
    }
    await app.model.create(rows);
    for (let p = 0; p < BACKLOG_POINTS; p += 50) {
      const writes = [];
      for (let q = p; q < Math.min(BACKLOG_POINTS, p + 50); q++) {
        const samples = new Array<{ ts: number; val: number }>(DAY);
        for (let i = 0; i < DAY; i++) samples[i] = { ts: T0 + i * 60_000, val: Math.round((21 + 3 * Math.sin((i + q * 37) / 180)) * 10) / 10 };
        writes.push({ pointId: `p${q}`, kind: 'Number' as const, samples });
      }
      await app.history.writeMany(writes);
    }
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

/** The drain of a day's backlog: from the daemon's start to the last of its samples received, each once. */
async function backlog(dir: string, brokerUrl: string): Promise<{ seconds: number; rate: number; rss: number; load: number }> {
  await resetCursors(dir);
  const sub = await subscriber(brokerUrl);
  const total = BACKLOG_POINTS * DAY;
  const startedAt = performance.now();
  const d = await startDaemon([], { HAYLOFT_DATA_DIR: path.join(dir, 'data'), HAYLOFT_CONFIG: configFile(dir, brokerUrl) });
  try {
    let peak = 0;
    while (sub.distinct.size < total) {
      peak = Math.max(peak, rssMiB(d.pid));
      await sleep(100);
      if (performance.now() - startedAt > 600_000) throw new Error(`backlog not drained in 10 min: ${sub.historical} of ${total}`);
    }
    const seconds = (sub.last - startedAt) / 1000;
    // Every sample of the day arrived; a sample sent twice would make the rate look better than it is.
    if (sub.historical !== total) throw new Error(`${sub.historical} historical samples received for ${total} distinct`);
    return { seconds, rate: total / seconds, rss: peak, load: os.loadavg()[0] as number };
  } finally {
    await sub.close();
    await stopDaemon(d);
  }
}

async function main(): Promise<void> {
  // The devices: every register changes every second.
  const devices = await changingDevices(DEVICES, PER_DEVICE);
  const { ports } = devices;
  const broker = await startBroker();
  const baseDir = tmp('base');
  const mqttDir = tmp('live');
  const backDir = tmp('backlog');
  const sub = await subscriber(broker.url);
  const started = performance.now();
  try {
    const base: LiveResult[] = [];
    const withMqtt: LiveResult[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      base.push(await live(baseDir, null, sub, ports, r === 0));
      withMqtt.push(await live(mqttDir, broker.url, sub, ports, r === 0));
      console.log(`round ${r + 1}: baseline ${JSON.stringify(base.at(-1))}\n         mqtt ${JSON.stringify(withMqtt.at(-1))}`);
    }
    const drains: { seconds: number; rate: number; rss: number; load: number }[] = [];
    if (BACKLOG_ROUNDS > 0) await seedBacklog(backDir);
    for (let r = 0; r < BACKLOG_ROUNDS; r++) {
      drains.push(await backlog(backDir, broker.url));
      console.log(`backlog round ${r + 1}: ${JSON.stringify(drains.at(-1))}`);
    }
    console.log(`bench/mqtt took ${((performance.now() - started) / 1000).toFixed(0)} s`);
    if (BACKLOG_ROUNDS === 0 || ROUNDS === 0 || CUR_ONLY) return;
    const m = (xs: LiveResult[], k: keyof LiveResult): number => median(xs.map((x) => x[k]));
    const loads = [...base, ...withMqtt].map((x) => x.load);
    const md = `Measured on ${machineLine()}; mosquitto 2.0 on loopback; the daemon is its own process
(\`hayloft serve\` started by its bin), CPU (utime + stime over the window) and memory read from /proc of the server
process; medians of ${ROUNDS} interleaved rounds. Load average (1 min) at the end of the windows: ${Math.min(...loads).toFixed(1)} to ${Math.max(...loads).toFixed(1)}
(median ${median(loads).toFixed(1)}; the machine is shared).

Live: ${LIVE_POINTS.toLocaleString('en-US')} points on ${DEVICES} simulated Modbus TCP devices (this process; every register changes every second),
polled every second by the daemon, each \`his\` with \`hisCollectInterval: 1s\`; one Sparkplug device per equip, one equip per
Modbus device (${PER_DEVICE.toLocaleString('en-US')} metrics each); ${WARMUP} s warm-up, ${SECONDS} s windows. The baseline is the same daemon, devices and points
without the \`mqtt\` section. Latency: arrival at the subscriber minus the sample's timestamp (the end of the poll read that
produced it, same clock).

| | baseline (no mqtt) | with the edge node | difference |
|---|---|---|---|
| CPU, share of one core | ${m(base, 'cpu').toFixed(1)} % | ${m(withMqtt, 'cpu').toFixed(1)} % | ${(m(withMqtt, 'cpu') - m(base, 'cpu')).toFixed(1)} points (x${(m(withMqtt, 'cpu') / m(base, 'cpu')).toFixed(2)}) |
| resident memory (median) | ${m(base, 'rss').toFixed(0)} MB | ${m(withMqtt, 'rss').toFixed(0)} MB | ${(m(withMqtt, 'rss') - m(base, 'rss')).toFixed(0)} MB |
| samples collected into history from the polls | ${m(base, 'written').toFixed(0)} /s | ${m(withMqtt, 'written').toFixed(0)} /s | |
| live samples published (the daemon's counter, which moves by whole passes: ±${Math.round(LIVE_POINTS / SECONDS)}/s over a window) | – | ${m(withMqtt, 'published').toFixed(0)} /s | |
| live samples received by a subscriber (QoS 0, in the bench process), by their timestamps in the window | – | ${m(withMqtt, 'delivered').toFixed(0)} /s | |
| poll to arrival, median / p99 | – | ${m(withMqtt, 'p50').toFixed(0)} ms / ${m(withMqtt, 'p99').toFixed(0)} ms | |

Backlog: one day of ${BACKLOG_POINTS.toLocaleString('en-US')} points at one-minute samples (${(BACKLOG_POINTS * DAY).toLocaleString('en-US')}), every cursor at its start, drained as
historical DDATA (1,000 metrics per message) from the start of the process to the last sample received, ${BACKLOG_ROUNDS} rounds:
${median(drains.map((x) => x.seconds)).toFixed(1)} s, **${Math.round(median(drains.map((x) => x.rate))).toLocaleString('en-US')} samples/s**; peak resident memory ${median(drains.map((x) => x.rss)).toFixed(0)} MB
(load average at the end of the drains: ${drains.map((x) => x.load.toFixed(1)).join(', ')}).
`;
    console.log(md);
    if (!hasFlag('--no-record')) recordSection('mqtt', md);
  } finally {
    devices.stop();
    await sub.close();
    broker.proc.kill('SIGTERM');
    rmSync(baseDir, { recursive: true, force: true });
    rmSync(mqttDir, { recursive: true, force: true });
    rmSync(backDir, { recursive: true, force: true });
    rmSync(broker.dir, { recursive: true, force: true });
  }
}

await main();
