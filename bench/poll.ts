/**
 * bench/poll: the daemon polling 100 simulated Modbus TCP devices with 100 points each, every
 * second, with history collected every minute (hisCollectInterval 1 min): the daemon's CPU share
 * and memory (issue 7's goals: under 25 % of one core, under 150 MB resident).
 *
 *   npm run bench -- poll [--seconds N] [--warmup N] [--devices N] [--points N] [--no-record]
 *
 * The daemon is the real App (LevelDB in a temp folder, HTTP on 127.0.0.1, the poller with the
 * Modbus driver) in this process; the devices are a child process (this file with --simulate), so
 * their CPU is not counted. Each device is its own TCP server on 127.0.0.1 whose 100 holding
 * registers change every second, so every poll changes every value (the worst case for curVal
 * updates and watches).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import type net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { App } from '../src/app.js';
import { loadConfig } from '../src/config/index.js';
import { findTimeZone } from '../src/haystack/tz.js';
import { HDict, HNumber, HRef, HUri, MARKER } from '../src/haystack/values.js';
import { silentLogger } from '../src/lib/log.js';
import { hasFlag, machineLine, median, numberArg, recordSection } from './harness.js';
import { serveRegisters } from './modbus-sim.js';

const args = process.argv.slice(2);

// ---------------------------------------------------------------------------------------------
// The devices (child process)

/** Modbus TCP slaves (bench/modbus-sim) answering from registers that change every second. */
function simulate(devices: number, registers: number): void {
  const regs = new Uint16Array(registers);
  let tick = 0;
  const update = (): void => {
    tick++;
    for (let i = 0; i < registers; i++) regs[i] = (tick * 7 + i * 13) % 1000;
  };
  update();
  setInterval(update, 1000);
  const ports: number[] = [];
  let listening = 0;
  for (let d = 0; d < devices; d++) {
    void serveRegisters(regs).then((server) => {
      ports[d] = (server.address() as net.AddressInfo).port;
      if (++listening === devices) process.stdout.write(JSON.stringify(ports) + '\n');
    });
  }
  process.stdin.on('end', () => process.exit(0));
  process.stdin.resume();
}

async function startDevices(devices: number, registers: number): Promise<{ ports: number[]; proc: ChildProcess }> {
  const proc = spawn(process.execPath, [new URL(import.meta.url).pathname, '--simulate', String(devices), String(registers)], { stdio: ['pipe', 'pipe', 'inherit'] });
  const line = await new Promise<string>((resolve, reject) => {
    createInterface({ input: proc.stdout as NodeJS.ReadableStream }).once('line', resolve);
    proc.once('exit', (c) => reject(new Error(`device simulator exited (${c})`)));
  });
  return { ports: JSON.parse(line) as number[], proc };
}

/** Creates the connectors and points in a fresh data folder, then stops (a child process). */
async function seed(dir: string, ports: number[], points: number): Promise<void> {
  const app = await App.start({ config: benchConfig(dir), log: silentLogger(), firstRun: { adminUser: 'admin@example.com', adminPassword: 'bench-password-1' } });
  try {
    const rows: HDict[] = [];
    ports.forEach((port, d) => {
      rows.push(
        HDict.of({
          id: new HRef(`dev${d}`),
          modbusConn: MARKER,
          name: `dev${d}`,
          uri: new HUri(`modbus-tcp://127.0.0.1:${port}`),
          modbusSlave: new HNumber(1),
          pollTime: new HNumber(1, 's'),
        }),
      );
      for (let p = 0; p < points; p++) {
        rows.push(
          HDict.of({
            id: new HRef(`dev${d}-p${p}`),
            point: MARKER,
            cur: MARKER,
            his: MARKER,
            kind: 'Number',
            unit: '°C',
            modbusConnRef: new HRef(`dev${d}`),
            modbusCur: `holding:${p}`,
            modbusScale: new HNumber(0.1),
            hisCollectInterval: new HNumber(1, 'min'),
          }),
        );
      }
    });
    await app.model.create(rows);
  } finally {
    await app.stop();
  }
}

function benchConfig(dir: string): ReturnType<typeof loadConfig> {
  return loadConfig({
    env: { HAYLOFT_DATA_DIR: dir, HAYLOFT_HOST: '127.0.0.1', HAYLOFT_PORT: '0', HAYLOFT_HTTPS_PORT: 'off', HAYLOFT_TZ: 'UTC', HAYLOFT_LOG_LEVEL: 'warn' },
    zones: { host: () => 'UTC', known: (n) => findTimeZone(n) !== undefined },
  });
}

// ---------------------------------------------------------------------------------------------
// The daemon (this process)

async function main(): Promise<void> {
  const DEVICES = numberArg('--devices', 100);
  const POINTS = numberArg('--points', 100);
  const WARMUP = numberArg('--warmup', 20);
  const SECONDS = numberArg('--seconds', 120);
  const record = !hasFlag('--no-record');

  const sim = await startDevices(DEVICES, POINTS);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'hayloft-bench-poll-'));
  const config = benchConfig(dir);
  const mem = (what: string): void => {
    const m = process.memoryUsage();
    if (hasFlag('--mem')) console.log(`${what}: rss ${(m.rss / 2 ** 20).toFixed(0)} MB, heap ${(m.heapUsed / 2 ** 20).toFixed(0)} MB, external ${(m.external / 2 ** 20).toFixed(0)} MB`);
  };
  // The daemon as it runs on a device: started on a data folder that already holds the model,
  // seeded by a child process. (The first start hashes a password and a 10,000-row createRec
  // builds big temporary grids: one-off costs whose freed memory the allocator keeps, which
  // would blur the figure.)
  const t0 = Date.now();
  const seeded = spawn(process.execPath, [new URL(import.meta.url).pathname, '--seed', dir, JSON.stringify(sim.ports), String(POINTS)], { stdio: 'inherit' });
  const code = await new Promise<number | null>((resolve) => seeded.once('exit', resolve));
  if (code !== 0) throw new Error(`seeding failed (${code})`);
  console.log(`seeded ${DEVICES} connectors and ${DEVICES * POINTS} points in ${Date.now() - t0} ms`);
  const app = await App.start({ config, log: silentLogger() });
  try {
    mem('restarted');
    console.log(`daemon restarted on them; warming up ${WARMUP} s`);
    // Changes are counted as a watch manager would see them.
    let changes = 0;
    app.model.events.on('live.changed', {}, () => void changes++);
    await new Promise((r) => setTimeout(r, WARMUP * 1000));
    mem('warm');
    const gc = (globalThis as { gc?: () => void }).gc;
    if (gc !== undefined) {
      gc();
      mem('after gc');
    }
    const poller = app.poller;
    if (poller === null) throw new Error('the poller did not start');
    // (A filter on curStatus finds nothing: transient tags are not in the model's tag index.)
    const okCount = (): number => {
      let n = 0;
      for (let d = 0; d < DEVICES; d++) for (let p = 0; p < POINTS; p++) if (app.model.get(`dev${d}-p${p}`)?.get('curStatus') === 'ok') n++;
      return n;
    };
    const ok0 = okCount();
    console.log(`${ok0} of ${DEVICES * POINTS} points ok after warm-up; measuring ${SECONDS} s`);

    const loop = monitorEventLoopDelay({ resolution: 10 });
    loop.enable();
    const rss: number[] = [];
    const heap: number[] = [];
    const s0 = poller.stats();
    const c0 = changes;
    const his0 = app.history.stats('dev0-p0').size;
    const cpu0 = process.cpuUsage();
    const w0 = performance.now();
    for (let s = 0; s < SECONDS; s++) {
      await new Promise((r) => setTimeout(r, 1000));
      if (hasFlag('--mem') && s % 15 === 14) {
        (globalThis as { gc?: () => void }).gc?.();
        mem(`${s + 1} s, after gc`);
      }
      const m = process.memoryUsage();
      rss.push(m.rss / 2 ** 20);
      heap.push(m.heapUsed / 2 ** 20);
    }
    const wall = performance.now() - w0;
    const cpu = process.cpuUsage(cpu0);
    loop.disable();
    const s1 = poller.stats();
    const his1 = app.history.stats('dev0-p0').size;
    const cpuShare = ((cpu.user + cpu.system) / 1000 / wall) * 100;
    const reads = ((s1.reads - s0.reads) / wall) * 1000;
    const failures = s1.failures - s0.failures;
    const values = ((changes - c0) / wall) * 1000;
    const okEnd = okCount();
    const r = {
      cpu: cpuShare.toFixed(1),
      user: ((cpu.user / 1000 / wall) * 100).toFixed(1),
      system: ((cpu.system / 1000 / wall) * 100).toFixed(1),
      rssMed: median(rss).toFixed(0),
      rssMax: Math.max(...rss).toFixed(0),
      heapMed: median(heap).toFixed(0),
      reads: reads.toFixed(0),
      values: values.toFixed(0),
      loopP99: (loop.percentile(99) / 1e6).toFixed(1),
      loopMax: (loop.max / 1e6).toFixed(1),
      hisPerPoint: his1 - his0,
    };
    console.log(r, { failures, okEnd, hisBacklog: s1.hisBacklog });

    const verdict = (ok: boolean): string => (ok ? 'met' : '**missed**');
    const md = `
### Polling: ${DEVICES} Modbus TCP devices × ${POINTS} points every second, history every minute

\`npm run bench -- poll\` (${machineLine()}). The real daemon (App: LevelDB, HTTP, poller, Modbus
driver) in one process; the devices are simulated in a child process (100 TCP servers on
127.0.0.1, every register changing every second), so only the daemon's CPU is counted. Each
device is one connector polled every second: one block read of its ${POINTS} holding registers, ${POINTS}
scaled Number points with \`hisCollectInterval: 1min\`. The daemon is started on a data folder already
holding the model (seeded by another process), as on a device after a restart; measured over
${SECONDS} s after ${WARMUP} s of warm-up. Node flags: ${process.execArgv.filter((a) => !a.startsWith('--expose')).join(' ') || 'none'}.

| figure | value | goal |
|---|---|---|
| CPU, share of one core (user + system) | ${r.cpu} % (${r.user} + ${r.system}) | < 25 %: ${verdict(cpuShare < 25)} |
| resident memory, median / max | ${r.rssMed} MB / ${r.rssMax} MB | < 150 MB: ${verdict(Math.max(...rss) < 150)} |
| JS heap used, median | ${r.heapMed} MB | |
| driver reads (bucket polls) per second | ${r.reads} | ${DEVICES} |
| point values changed per second (setTransient, what watches see) | ${r.values} | ${DEVICES * POINTS} |
| event-loop delay p99 / max | ${r.loopP99} ms / ${r.loopMax} ms | |
| history samples per point in the window | ${r.hisPerPoint} | one a minute |
| failed polls in the window | ${failures} | 0 |

Every value changes at every poll here, so each poll costs a curVal update per point; a real
building changes far fewer values per second, and unchanged values cost no model or watch work.
`;
    if (record) recordSection('poll', md);
    else console.log(md);
  } finally {
    await app.stop();
    sim.proc.stdin?.end();
    sim.proc.kill();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (args[0] === '--simulate') simulate(Number(args[1]), Number(args[2]));
else if (args[0] === '--seed') {
  seed(args[1] as string, JSON.parse(args[2] as string) as number[], Number(args[3])).catch((e: unknown) => {
    console.error(e);
    process.exit(1);
  });
} else
  main().catch((e: unknown) => {
    console.error(e);
    process.exit(1);
  });
