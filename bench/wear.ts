/**
 * bench/wear: what polling costs the flash card. `hayloft serve` as a user runs it (its own
 * process, started by its bin) polls simulated Modbus TCP devices (bench/modbus-sim, another
 * process) of sensor-like registers every second, every point collecting history every second
 * (hisCollectInterval 1 s, modbusScale 0.1). At steady state, over a window of one seal cycle
 * (the history store seals a point's tail every 1,024 samples, so any 1,024 s window holds exactly
 * one seal per point; the chunk size is not configurable in the daemon, so the run is that long):
 *   - bytes written per polled sample: the server's /proc/<pid>/io write_bytes (what it sent to the
 *     block layer), wchar and syscw; and, on a dedicated loop-mounted ext4 image holding the data
 *     folder (as root, when losetup and mkfs.ext4 exist), the loop device's sectors written
 *     (/sys/block/loopN/stat: LevelDB's files plus the ext4 journal and metadata) and its flushes;
 *   - fsync and fdatasync calls per second of every thread of the server, counted by strace
 *     (seccomp-bpf filter, so only those calls stop the process; Debian package `strace`);
 *   - LevelDB's own figures from its LOG in the data folder (memtable flushes to level 0 and
 *     compactions, with the bytes of the tables they wrote), as the daemon exposes none;
 *   - the samples actually stored in the window, read back with hisRead over HTTP.
 * The baseline, in the same run on the same file system: a plain process appending the same
 * number of samples a second as 16-byte records (time and double) to one file, fdatasync once a
 * second: the least a synced, uncompressed sample log costs there.
 *
 *   npm run bench -- wear [--devices 10] [--points 100] [--warmup 60] [--seconds 1024]
 *                         [--baseline-seconds 60] [--no-loop] [--label before] [--no-record]
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { procStatus } from '../test/helpers/rss.js';
import { hasFlag, stringArg, hisReadTimes, inLanes, loginDaemon, machineLine, numberArg, procCpuMs, procIo, recordSection, sleep, startDaemon, stopDaemon } from './harness.js';
import { seedPlant, startSensorDevices } from './modbus-sim.js';

const DEVICES = numberArg('--devices', 10);
const PER = numberArg('--points', 100);
const POINTS = DEVICES * PER;
const WARMUP = numberArg('--warmup', 60);
const SECONDS = numberArg('--seconds', 1024);
const BASE_SECONDS = numberArg('--baseline-seconds', 60);
const record = !hasFlag('--no-record');
/** `--label before` records into the section `wear-before` (docs/performance.md), kept apart from later runs. */
const LABEL = stringArg('--label');

const has = (tool: string): boolean => spawnSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' }).status === 0;

// ---------------------------------------------------------------------------------------------
// The file system: a loop-mounted ext4 image of its own, so its device counts nothing else

interface LoopFs {
  image: string;
  device: string;
  mount: string;
}

function makeLoopFs(): LoopFs | null {
  if (hasFlag('--no-loop')) return null;
  if (process.getuid?.() !== 0 || !has('losetup') || !has('mkfs.ext4') || !has('mount')) {
    console.log('not root or no losetup/mkfs.ext4: no block-device figure (the data folder is in the temp folder)');
    return null;
  }
  const work = mkdtempSync(path.join(os.tmpdir(), 'hayloft-wear-'));
  const image = path.join(work, 'disk.img');
  const mount = path.join(work, 'mnt');
  mkdirSync(mount);
  execFileSync('truncate', ['-s', '2G', image]);
  execFileSync('mkfs.ext4', ['-q', '-F', image]);
  const device = execFileSync('losetup', ['--find', '--show', image], { encoding: 'utf8' }).trim();
  execFileSync('mount', [device, mount]);
  return { image, device, mount };
}

function removeLoopFs(fs: LoopFs): void {
  if (spawnSync('umount', [fs.mount], { stdio: 'inherit' }).status !== 0) {
    console.error(`could not unmount ${fs.mount} (${fs.device}, image ${fs.image}): left for you to remove`);
    return;
  }
  spawnSync('losetup', ['-d', fs.device], { stdio: 'inherit' });
  rmSync(path.dirname(fs.image), { recursive: true, force: true });
}

/** Sectors written (512 bytes) and flush requests completed of a block device. */
function deviceStat(device: string): { sectors: number; writes: number; flushes: number } {
  const f = readFileSync(`/sys/block/${path.basename(device)}/stat`, 'utf8').trim().split(/\s+/).map(Number);
  return { writes: f[4] ?? NaN, sectors: f[6] ?? NaN, flushes: f[15] ?? NaN };
}

// ---------------------------------------------------------------------------------------------
// LevelDB's LOG: flushes and compactions, with the bytes of the tables they generated

function levelDbLog(dbDir: string, from: number, to: number): { flushes: number; flushBytes: number; compactions: number; compactionBytes: number } {
  const out = { flushes: 0, flushBytes: 0, compactions: 0, compactionBytes: 0 };
  const text = readdirSync(dbDir)
    .filter((f) => f === 'LOG' || f === 'LOG.old')
    .map((f) => readFileSync(path.join(dbDir, f), 'utf8'))
    .join('\n');
  for (const line of text.split('\n')) {
    // 2026/11/28-01:50:00.123456 7f12345 Level-0 table #5: 12345 bytes OK (local time)
    const m = /^(\d{4})\/(\d\d)\/(\d\d)-(\d\d):(\d\d):(\d\d)\.(\d+) \S+ (.*)$/.exec(line);
    if (m === null) continue;
    const t = new Date(+m[1]!, +m[2]! - 1, +m[3]!, +m[4]!, +m[5]!, +m[6]!, Math.floor(+m[7]! / 1000)).getTime();
    if (t < from || t >= to) continue;
    const msg = m[8] as string;
    let g: RegExpExecArray | null;
    if ((g = /^Level-0 table #\d+: (\d+) bytes OK/.exec(msg)) !== null) {
      out.flushes++;
      out.flushBytes += Number(g[1]);
    } else if (/^Compacting /.test(msg)) out.compactions++;
    else if ((g = /^Generated table #\d+@\d+: \d+ keys, (\d+) bytes/.exec(msg)) !== null) out.compactionBytes += Number(g[1]);
  }
  return out;
}

function duBytes(dir: string): number {
  let n = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    n += e.isDirectory() ? duBytes(p) : statSync(p).size;
  }
  return n;
}

// ---------------------------------------------------------------------------------------------
// The baseline: a synced append-only log of the same samples

async function baseline(dir: string, device: string | null): Promise<{ writeBytes: number; deviceBytes: number | null; flushes: number | null; samples: number }> {
  const program = `
const fs = require('node:fs');
const fd = fs.openSync(${JSON.stringify(path.join(dir, 'baseline.log'))}, 'a');
const buf = Buffer.alloc(${POINTS} * 16);
setInterval(() => {
  const t = Date.now();
  for (let i = 0; i < ${POINTS}; i++) { buf.writeDoubleLE(t, i * 16); buf.writeDoubleLE(20 + i / 10, i * 16 + 8); }
  fs.writeSync(fd, buf);
  fs.fdatasyncSync(fd);
}, 1000);
process.stdout.write('ready\\n');
`;
  const proc = spawn(process.execPath, ['-e', program], { stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise((r) => proc.stdout.once('data', r));
  await sleep(3000);
  const io0 = procIo(proc.pid as number);
  const dev0 = device === null ? null : deviceStat(device);
  const t0 = performance.now();
  await sleep(BASE_SECONDS * 1000);
  const io1 = procIo(proc.pid as number);
  const dev1 = device === null ? null : deviceStat(device);
  const seconds = (performance.now() - t0) / 1000;
  const exited = new Promise((r) => proc.once('exit', r));
  proc.kill();
  await exited;
  return {
    writeBytes: io1.write_bytes - io0.write_bytes,
    deviceBytes: dev0 === null || dev1 === null ? null : (dev1.sectors - dev0.sectors) * 512,
    flushes: dev0 === null || dev1 === null ? null : dev1.flushes - dev0.flushes,
    samples: Math.round(seconds) * POINTS,
  };
}

// ---------------------------------------------------------------------------------------------

async function main(): Promise<void> {
  const strace = has('strace');
  if (!strace) console.log('no strace (Debian package strace): no fsync count');
  const fs = makeLoopFs();
  const sim = await startSensorDevices(DEVICES, PER);
  const work = fs === null ? mkdtempSync(path.join(os.tmpdir(), 'hayloft-wear-')) : null;
  const dataDir = path.join(fs?.mount ?? (work as string), 'data');
  mkdirSync(dataDir);
  const traceFile = path.join(os.tmpdir(), `hayloft-wear-strace-${process.pid}.txt`);
  const wrap = strace ? ['strace', '-f', '-qq', '--seccomp-bpf', '-e', 'trace=fsync,fdatasync', '-e', 'signal=none', '-ttt', '-o', traceFile] : [];
  try {
    const d = await startDaemon([], {}, { dir: dataDir, wrap });
    let stopped = false;
    try {
      const token = await loginDaemon(d.base);
      const ids = await seedPlant(d.base, token, sim.ports, PER);
      console.log(`${DEVICES} connectors, ${POINTS} points polled and collected every second; warming up ${WARMUP} s, then measuring ${SECONDS} s`);
      await sleep(WARMUP * 1000);
      const probe = await hisReadTimes(d.base, token, ids[ids.length - 1] as string, Date.now() - 10_000, Date.now());
      if (probe.length === 0) throw new Error('the last point has no history after the warm-up: is it polled?');

      const t0 = Date.now();
      const io0 = procIo(d.pid);
      const cpu0 = procCpuMs(d.pid);
      const dev0 = fs === null ? null : deviceStat(fs.device);
      let rssMax = 0;
      for (let s = 0; s < SECONDS; s++) {
        await sleep(1000 - ((Date.now() - t0) % 1000));
        rssMax = Math.max(rssMax, procStatus(d.pid, 'VmRSS'));
        if (s % 60 === 59) console.log(`${s + 1} s: write_bytes ${((procIo(d.pid).write_bytes - io0.write_bytes) / 2 ** 20).toFixed(1)} MiB`);
      }
      const t1 = Date.now();
      const io1 = procIo(d.pid);
      const cpu1 = procCpuMs(d.pid);
      const dev1 = fs === null ? null : deviceStat(fs.device);
      const wall = (t1 - t0) / 1000;

      let samples = 0;
      let short = 0;
      await inLanes(ids, 4, async (id) => {
        const n = (await hisReadTimes(d.base, token, id, t0, t1)).length;
        samples += n;
        if (n < Math.floor(wall) - 2) short++;
      });
      await stopDaemon(d, true);
      stopped = true;

      let fsyncs: number | null = null;
      if (strace) {
        fsyncs = 0;
        for (const line of readFileSync(traceFile, 'utf8').split('\n')) {
          const m = /^\d+ (\d+\.\d+) f(?:data)?sync\(/.exec(line);
          if (m !== null && Number(m[1]) * 1000 >= t0 && Number(m[1]) * 1000 < t1) fsyncs++;
        }
      }
      const ldb = levelDbLog(path.join(dataDir, 'db'), t0, t1);
      const stored = duBytes(path.join(dataDir, 'db'));
      const base = await baseline(fs?.mount ?? (work as string), fs?.device ?? null);

      const per = (x: number): string => (x / samples).toFixed(1);
      const devBytes = dev0 === null || dev1 === null ? null : (dev1.sectors - dev0.sectors) * 512;
      const r = {
        samples,
        expected: POINTS * Math.round(wall),
        short,
        writeBytes: io1.write_bytes - io0.write_bytes,
        wchar: io1.wchar - io0.wchar,
        syscw: io1.syscw - io0.syscw,
        devBytes,
        devFlushes: dev0 === null || dev1 === null ? null : dev1.flushes - dev0.flushes,
        fsyncs,
        cpu: ((cpu1.user + cpu1.system - cpu0.user - cpu0.system) / (wall * 1000)) * 100,
        rssMax: rssMax / 2 ** 20,
        ldb,
        stored,
        base,
      };
      console.log(r);
      const baseDev = base.deviceBytes === null ? null : base.deviceBytes / base.samples;
      const gbDay = (bytesPerSample: number): string => ((bytesPerSample * POINTS * 86_400) / 1e9).toFixed(1);
      const md = `
### Wear: ${POINTS.toLocaleString('en')} points polled and collected every second (${DEVICES} Modbus TCP devices × ${PER})

\`npm run bench -- wear${process.argv.length > 2 ? ' ' + process.argv.slice(2).join(' ') : ''}\` (${machineLine()}). \`hayloft serve\` by its bin
(its own process${strace ? ', run under `strace -f --seccomp-bpf -e trace=fsync,fdatasync`' : ''}) on a data folder ${fs === null ? 'in the temp folder (no block-device figure)' : 'on a dedicated 2 GB ext4 image, loop-mounted (default mount options)'};
${DEVICES} simulated Modbus TCP devices (another process) of ${PER} sensor-like holding registers, one
connector each polled every second, every point \`hisCollectInterval: 1s\`, \`modbusScale: 0.1\`.
Measured over ${wall.toFixed(0)} s (${SECONDS % 1024 === 0 ? `${SECONDS / 1024} seal cycle(s): every point's tail sealed once every 1,024 samples` : 'not a whole number of seal cycles (1,024 s each): the bytes of seals are over- or under-counted'}) after ${WARMUP} s of polling.
Samples: those stored in the window, read back with hisRead (${samples.toLocaleString('en')} of ${r.expected.toLocaleString('en')} expected; ${short} points short).

| figure | window | per polled sample | per second |
|---|---:|---:|---:|
| \`write_bytes\` of the server (/proc/<pid>/io) | ${(r.writeBytes / 2 ** 20).toFixed(1)} MiB | ${per(r.writeBytes)} B | ${(r.writeBytes / wall / 1024).toFixed(1)} KiB |
| block device written (loop, with ext4 journal) | ${devBytes === null ? 'n/a' : (devBytes / 2 ** 20).toFixed(1) + ' MiB'} | ${devBytes === null ? 'n/a' : per(devBytes) + ' B'} | ${devBytes === null ? 'n/a' : (devBytes / wall / 1024).toFixed(1) + ' KiB'} |
| \`wchar\` (bytes passed to write calls) | ${(r.wchar / 2 ** 20).toFixed(1)} MiB | ${per(r.wchar)} B | |
| \`syscw\` (write calls) | ${r.syscw.toLocaleString('en')} | | ${(r.syscw / wall).toFixed(1)} |
| fsync + fdatasync calls (strace) | ${fsyncs === null ? 'n/a' : fsyncs.toLocaleString('en')} | | ${fsyncs === null ? 'n/a' : (fsyncs / wall).toFixed(2)} |
| flushes reaching the block device | ${r.devFlushes === null ? 'n/a' : r.devFlushes.toLocaleString('en')} | | ${r.devFlushes === null ? 'n/a' : (r.devFlushes / wall).toFixed(2)} |
| LevelDB memtable flushes to level 0 (LOG) | ${ldb.flushes}, ${(ldb.flushBytes / 2 ** 20).toFixed(1)} MiB | ${per(ldb.flushBytes)} B | |
| LevelDB compactions (LOG; tables written) | ${ldb.compactions}, ${(ldb.compactionBytes / 2 ** 20).toFixed(1)} MiB | ${per(ldb.compactionBytes)} B | |

At this rate the card receives ${gbDay(devBytes === null ? r.writeBytes / samples : devBytes / samples)} GB a day (${POINTS.toLocaleString('en')} samples a second). The LevelDB
folder held ${(stored / 2 ** 20).toFixed(1)} MiB at the end (the whole run, ${(stored / (POINTS * (wall + WARMUP))).toFixed(1)} B per sample collected so far,
tombstones and unsealed tail included). Server CPU ${r.cpu.toFixed(1)} % of one core, RSS max ${r.rssMax.toFixed(0)} MB.

Baseline, same run and file system: a process appending the same ${POINTS.toLocaleString('en')} samples a second as 16-byte
records to one file with one \`fdatasync\` a second, for ${BASE_SECONDS} s: \`write_bytes\` ${(base.writeBytes / base.samples).toFixed(1)} B per sample${baseDev === null ? '' : `, block device ${baseDev.toFixed(1)} B per sample (flushes ${((base.flushes ?? 0) / BASE_SECONDS).toFixed(2)}/s)`}.
Hayloft / baseline: ${devBytes === null || baseDev === null ? `${(r.writeBytes / samples / (base.writeBytes / base.samples)).toFixed(1)}× (write_bytes)` : `${(devBytes / samples / baseDev).toFixed(1)}× (block device), ${(r.writeBytes / samples / (base.writeBytes / base.samples)).toFixed(1)}× (write_bytes)`}.
`;
      if (record) recordSection(LABEL === undefined ? 'wear' : `wear-${LABEL}`, md);
      else console.log(md);
    } finally {
      if (!stopped) await stopDaemon(d, true);
    }
  } finally {
    sim.stop();
    rmSync(traceFile, { force: true });
    rmSync(dataDir, { recursive: true, force: true });
    if (fs !== null) removeLoopFs(fs);
    if (work !== null) rmSync(work, { recursive: true, force: true });
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
