/**
 * bench/push: 10,000 watched points changing once a second, pushed to 20 socket.io clients:
 * latency from the poll (the device answering the read) to the `pointData` event, and the
 * daemon's CPU and memory with and without the sockets.
 *
 *   npm run bench -- push [--seconds N] [--warmup N] [--points N] [--sockets N] [--no-record]
 *
 * The daemon is its own process, started by its bin (`hayloft serve` on the bundle dist-bench/dist/cli.js, with the
 * package's Node flags). This process is the rest: 10 simulated Modbus TCP devices
 * (bench/modbus-sim) whose registers change every second, and the socket.io clients (current
 * socket.io-client, websocket). Devices and clients share this process's clock, so the latency of
 * an event is its arrival minus the moment the device answered the block read holding that
 * point. Each socket has its own watch over 1/20 of the points (every point watched once).
 * Phase 1 measures the daemon polling with the watches open and no socket (the baseline), phase 2
 * the same with the sockets connected; both in the same run.
 */
import { readFileSync } from 'node:fs';
import { io, type Socket } from 'socket.io-client';
import { hasFlag, loginDaemon, machineLine, median, numberArg, recordSection, sleep, startDaemon, stopDaemon } from './harness.js';
import { changingDevices } from './modbus-sim.js';

const POINTS = numberArg('--points', 10_000);
const SOCKETS = numberArg('--sockets', 20);
const WARMUP = numberArg('--warmup', 15);
const SECONDS = numberArg('--seconds', 60);
const DEVICES = 10;
const PER_DEVICE = Math.ceil(POINTS / DEVICES);

const now = (): number => performance.timeOrigin + performance.now();
/** utime + stime of a process, seconds; its resident memory, MB. */
function procStats(pid: number): { cpu: number; rss: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticks = Number(f[11]) + Number(f[12]);
  const rss = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return { cpu: ticks / 100, rss: Number(rss?.[1] ?? 0) / 1024 };
}

async function api(base: string, token: string, op: string, grid: unknown): Promise<{ meta: Record<string, unknown>; rows: unknown[] }> {
  const res = await fetch(`${base}/api/${op}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json' },
    body: JSON.stringify(grid),
  });
  const j = (await res.json()) as { meta: Record<string, unknown>; rows: unknown[] };
  if (res.status !== 200) throw new Error(`${op}: ${res.status} ${JSON.stringify(j.meta)}`);
  return j;
}

async function main(): Promise<void> {
  // The devices: register values change every second; every answered block is timed.
  // Per register: when the device answered the read holding it, and when it answered the last
  // read of that poll (the driver reads a device's blocks one after another and hands the values
  // over together, so the poll ends at its last block).
  const answered: Float64Array[] = [];
  const pollEnd: Float64Array[] = [];
  const devices = await changingDevices(DEVICES, PER_DEVICE, () => {
    const at = new Float64Array(PER_DEVICE);
    const end = new Float64Array(PER_DEVICE);
    answered.push(at);
    pollEnd.push(end);
    let cycleFrom = 0;
    return (addr, qty) => {
      const t = now();
      for (let i = addr; i < addr + qty; i++) at[i] = t;
      if (addr === 0) cycleFrom = 0;
      if (addr + qty >= PER_DEVICE) {
        for (let i = cycleFrom; i < PER_DEVICE; i++) end[i] = t;
        cycleFrom = PER_DEVICE;
      }
    };
  });
  const { ports } = devices;

  const daemon = await startDaemon();
  const base = daemon.base;
  const sockets: Socket[] = [];
  try {
    const token = await loginDaemon(base);

    // The model: 10 connectors polled every second, the points spread over them.
    const conns = ports.map((p, d) => ({ id: `r:dev${d}`, modbusConn: 'm:', name: `dev${d}`, uri: `u:modbus-tcp://127.0.0.1:${p}`, modbusSlave: 'n:1', pollTime: 'n:1 s' }));
    await api(base, token, 'createRec', { meta: { ver: '3.0' }, cols: Object.keys(conns[0] as object).map((name) => ({ name })), rows: conns });
    const where = new Map<string, [number, number]>();
    const ids: string[] = [];
    for (let d = 0; d < DEVICES; d++) {
      for (let from = 0; from < PER_DEVICE; from += 1000) {
        const rows = [];
        for (let a = from; a < Math.min(from + 1000, PER_DEVICE); a++) {
          const id = `dev${d}-p${a}`;
          where.set(id, [d, a]);
          ids.push(id);
          rows.push({ id: `r:${id}`, point: 'm:', cur: 'm:', kind: 's:Number', modbusConnRef: `r:dev${d}`, modbusCur: `s:input:${a}` });
        }
        await api(base, token, 'createRec', { meta: { ver: '3.0' }, cols: ['id', 'point', 'cur', 'kind', 'modbusConnRef', 'modbusCur'].map((name) => ({ name })), rows });
      }
    }
    // One watch per socket over its share of the points; a lease longer than the run.
    const watchIds: string[] = [];
    const share = Math.ceil(ids.length / SOCKETS);
    for (let s = 0; s < SOCKETS; s++) {
      const mine = ids.slice(s * share, (s + 1) * share);
      const a = await api(base, token, 'watchSub', { meta: { ver: '3.0', watchDis: `bench ${s}`, lease: 'n:1 h' }, cols: [{ name: 'id' }], rows: mine.map((id) => ({ id: `r:${id}` })) });
      watchIds.push(String(a.meta.watchId).replace(/^s:/, ''));
    }
    const server = daemon.pid;
    console.log(`daemon pid ${server}: ${ids.length} points on ${DEVICES} devices, ${SOCKETS} watches; warming up ${WARMUP} s`);
    await sleep(WARMUP * 1000);

    const phase = async (label: string): Promise<{ cpu: number; rss: number }> => {
      const rss: number[] = [];
      const p0 = procStats(server);
      const w0 = performance.now();
      for (let s = 0; s < SECONDS; s++) {
        await sleep(1000);
        rss.push(procStats(server).rss);
      }
      const cpu = ((procStats(server).cpu - p0.cpu) / ((performance.now() - w0) / 1000)) * 100;
      console.log(`${label}: daemon CPU ${cpu.toFixed(1)} % of one core, RSS median ${median(rss).toFixed(0)} MB`);
      return { cpu, rss: median(rss) };
    };
    const base0 = await phase('watches, no sockets');

    const lat: number[] = [];
    const fromRead: number[] = [];
    let events = 0;
    let measuring = false;
    for (const w of watchIds) {
      const sock = io(`${base}/${w}`, { path: '/socket.io', transports: ['websocket'], query: { Authorization: token }, reconnection: false, forceNew: true });
      sock.on('pointData', (d: { id: string }) => {
        const t = now();
        events++;
        if (!measuring) return;
        const at = where.get(d.id.slice(2));
        if (at === undefined) return;
        const ans = (answered[at[0]] as Float64Array)[at[1]] as number;
        const end = (pollEnd[at[0]] as Float64Array)[at[1]] as number;
        if (end > 0) lat.push(t - end);
        if (ans > 0) fromRead.push(t - ans);
      });
      sock.on('disconnect', (why) => {
        if (why !== 'io client disconnect') console.log(`socket ${w} disconnected: ${why}`);
      });
      sockets.push(sock);
    }
    await Promise.all(
      sockets.map((s) => new Promise<void>((resolve, reject) => (s.connected ? resolve() : (s.once('connect', () => resolve()), s.once('connect_error', reject))))),
    );
    await sleep(5000);
    measuring = true;
    const e0 = events;
    const pushed = await phase(`${SOCKETS} sockets`);
    measuring = false;
    const perSec = (events - e0) / SECONDS;
    lat.sort((a, b) => a - b);
    fromRead.sort((a, b) => a - b);
    const pct = (xs: number[], q: number): string => (xs[Math.min(xs.length - 1, Math.floor(q * xs.length))] ?? NaN).toFixed(1);
    const r = { events: perSec.toFixed(0), p50: pct(lat, 0.5), p99: pct(lat, 0.99), max: pct(lat, 1), readP50: pct(fromRead, 0.5), readP99: pct(fromRead, 0.99) };
    console.log(r);

    const md = `
\`npm run bench -- push\` (${machineLine()}); the daemon started by its bin (which applies its own runtime settings), as its own process, CPU and memory read from the server process;
devices and clients in the bench process. ${ids.length} points on ${DEVICES} simulated Modbus TCP devices (registers change every second,
polled every second), ${SOCKETS} watches of ${share} points, one socket.io 4 client (websocket) on each. Latency: arrival of a
\`pointData\` event minus the moment the device answered the last read of the poll that changed the value (same clock;
the Modbus driver reads a device's blocks of 125 registers one after another and hands the values over together). Beside it,
from the read of the point's own block (${r.readP50} ms median, ${r.readP99} ms p99), which adds the device's later block reads.
${SECONDS} s per phase, after ${WARMUP} s of warm-up and 5 s with the sockets connected.

| phase | daemon CPU (% of one core) | daemon RSS (median) | events/s | latency p50 | latency p99 (goal < 50 ms) | max |
|---|---:|---:|---:|---:|---:|---:|
| watches open, no socket (baseline) | ${base0.cpu.toFixed(1)} | ${base0.rss.toFixed(0)} MB | – | – | – | – |
| ${SOCKETS} sockets | ${pushed.cpu.toFixed(1)} (${(pushed.cpu / base0.cpu).toFixed(2)} × baseline) | ${pushed.rss.toFixed(0)} MB | ${r.events} | ${r.p50} ms | ${r.p99} ms | ${r.max} ms |
`;
    console.log(md);
    if (!hasFlag('--no-record')) recordSection('push', md);
  } finally {
    for (const s of sockets) s.close();
    devices.stop();
    await stopDaemon(daemon);
  }
}

await main();
