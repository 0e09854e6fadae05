/**
 * bench/his-store: the history store (src/store/history.ts) on a point-year of one-minute samples
 * (525,600) of three shapes: a 0.1-quantized sensor curve, a step-like setpoint, random floats;
 * and the sensor curve again with poll jitter on its timestamps.
 * Beside it, in the same run, the baseline: raw classic-level with one entry per sample (key =
 * point + big-endian ts, value = float64), written with chained batches and scanned with nextv.
 *
 *   npm run bench -- his-store [--rounds N] [--no-record] [--quick]
 *
 * Bytes per sample are measured on disk: the folder's table and log files after a full
 * compaction, with the store closed. A second table varies the chunk size.
 */
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ClassicLevel } from 'classic-level';
import { Store } from '../src/store/db.js';
import { HistoryStore, type HisSample } from '../src/store/history.js';
import { fmtRate, hasFlag, machineLine, median, numberArg, recordSection } from './harness.js';
import { prng } from '../test/helpers/prng.js';

const N = 525_600;
const T0 = Date.UTC(2024, 0, 1);
const MIN = 60_000;
const quick = hasFlag('--quick');
const rounds = numberArg('--rounds', quick ? 3 : 7);

// ---------------------------------------------------------------------------------------------
// Data

/**
 * Zone temperature: seasonal and daily swings, a slow drift and white measurement noise
 * (sd about 0.1 °C), read at 0.1 °C resolution. `jitterMs` moves each timestamp by up to that
 * much, as a poller that stamps reads with the clock instead of the poll slot would.
 */
function sensor(jitterMs = 0): HisSample[] {
  const rnd = prng(7);
  const out = new Array<HisSample>(N);
  let drift = 0;
  for (let i = 0; i < N; i++) {
    const day = (i % 1440) / 1440;
    drift = 0.98 * drift + (rnd() - 0.5) * 0.08;
    const white = (rnd() + rnd() + rnd() - 1.5) * 0.2;
    const v = 21 + 4 * Math.sin((2 * Math.PI * i) / N) + 1.5 * Math.sin(2 * Math.PI * (day - 0.3)) + drift + white;
    const jitter = jitterMs === 0 ? 0 : Math.round((rnd() - 0.5) * 2 * jitterMs);
    out[i] = { ts: T0 + i * MIN + jitter, val: Math.round(v * 10) / 10 };
  }
  return out;
}

/** Heating setpoint: occupied 21.5 on weekdays 7:00-18:00, else 17, with rare manual overrides. */
function setpoint(): HisSample[] {
  const rnd = prng(8);
  const out = new Array<HisSample>(N);
  let override = 0;
  for (let i = 0; i < N; i++) {
    const minute = i % 1440;
    const weekday = (Math.floor(i / 1440) + 1) % 7 < 5; // 2024-01-01 is a Monday
    if (override > 0) override--;
    else if (rnd() < 0.0005) override = 60 + Math.floor(rnd() * 240);
    const base = weekday && minute >= 420 && minute < 1080 ? 21.5 : 17;
    out[i] = { ts: T0 + i * MIN, val: override > 0 ? base + 1 : base };
  }
  return out;
}

/** Random doubles with full 53-bit mantissas: the XOR codec's worst case. */
function randomFloats(): HisSample[] {
  const rnd = prng(9);
  const out = new Array<HisSample>(N);
  for (let i = 0; i < N; i++) out[i] = { ts: T0 + i * MIN, val: ((rnd() * 2 ** 21 + rnd()) / 2 ** 21) * 100 };
  return out;
}

const shapes: [string, HisSample[]][] = [
  ['sensor 0.1-quantized', sensor()],
  ['setpoint step-like', setpoint()],
  ['random floats', randomFloats()],
  ['sensor, ts jittered ±50 ms', sensor(50)],
];

// ---------------------------------------------------------------------------------------------
// Plumbing

const tmpRoot = mkdtempSync(path.join(os.tmpdir(), 'hayloft-bench-his-'));
let tmpN = 0;
const tmpDir = (): string => path.join(tmpRoot, String(tmpN++));

/** A case that times itself (its setup, such as a fresh folder, is not part of the figure). */
class Timed {
  constructor(readonly ms: number) {}
}

/**
 * Like harness.measure, for async cases: interleaved rounds, medians of ms. A case returning a
 * Timed reports its own time.
 */
async function measureAsync(cases: Record<string, () => Promise<unknown>>, n: number, warmup = 1): Promise<Record<string, number>> {
  const times: Record<string, number[]> = {};
  for (const name of Object.keys(cases)) times[name] = [];
  for (let r = 0; r < warmup + n; r++) {
    for (const [name, f] of Object.entries(cases)) {
      const t0 = performance.now();
      const out = await f();
      const dt = out instanceof Timed ? out.ms : performance.now() - t0;
      if (out === undefined) throw new Error(`case ${name} returned nothing`);
      if (r >= warmup) (times[name] as number[]).push(dt);
    }
  }
  const med: Record<string, number> = {};
  for (const [name, xs] of Object.entries(times)) med[name] = median(xs);
  return med;
}

/** Bytes of LevelDB's table and log files (not its text LOG) in a closed database folder. */
function dbBytes(dbDir: string): number {
  let total = 0;
  for (const f of readdirSync(dbDir)) if (/\.(ldb|sst|log)$/.test(f)) total += statSync(path.join(dbDir, f)).size;
  return total;
}

async function compactClosed(dbDir: string): Promise<number> {
  const db = new ClassicLevel<Uint8Array, Uint8Array>(dbDir, { keyEncoding: 'view', valueEncoding: 'view' });
  await db.open();
  await db.compactRange(new Uint8Array([0]), new Uint8Array(16).fill(0xff));
  await db.close();
  return dbBytes(dbDir);
}

/** Median ms of `n` sequential runs of one async call. */
async function medianOf(n: number, f: () => Promise<unknown>): Promise<number> {
  const xs: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await f();
    xs.push(performance.now() - t0);
  }
  return median(xs);
}

async function hisStore(dir: string, chunkSize?: number): Promise<{ store: Store; his: HistoryStore }> {
  const store = await Store.open(dir);
  const his = new HistoryStore(store, chunkSize === undefined ? {} : { chunkSize });
  await his.start();
  return { store, his };
}

/** Fresh store, one write of the whole year, closed; returns the write's ms. */
async function hisWriteOnce(samples: HisSample[], chunkSize?: number): Promise<{ ms: number; dir: string }> {
  const dir = tmpDir();
  const x = await hisStore(dir, chunkSize);
  const t0 = performance.now();
  await x.his.write('p', 'Number', samples);
  const ms = performance.now() - t0;
  await x.his.stop();
  await x.store.close();
  return { ms, dir };
}

const enc = new TextEncoder();
const RAW_ID = enc.encode('p');

function rawKey(ts: number): Uint8Array {
  const k = new Uint8Array(RAW_ID.length + 9);
  k.set(RAW_ID, 0);
  new DataView(k.buffer).setFloat64(RAW_ID.length + 1, ts); // ts > 0 here: float order = byte order
  return k;
}

async function rawWrite(dbDir: string, samples: HisSample[]): Promise<number> {
  const db = new ClassicLevel<Uint8Array, Uint8Array>(dbDir, { keyEncoding: 'view', valueEncoding: 'view' });
  await db.open();
  const t0 = performance.now();
  for (let a = 0; a < samples.length; a += 50_000) {
    const batch = db.batch();
    for (let i = a; i < Math.min(a + 50_000, samples.length); i++) {
      const s = samples[i] as HisSample;
      const v = new Uint8Array(8);
      new DataView(v.buffer).setFloat64(0, s.val as number);
      batch.put(rawKey(s.ts), v);
    }
    await batch.write({ sync: true } as object);
  }
  const ms = performance.now() - t0;
  await db.close();
  return ms;
}

async function rawScan(db: ClassicLevel<Uint8Array, Uint8Array>): Promise<{ ts: Float64Array; val: Float64Array }> {
  const ts = new Float64Array(N);
  const val = new Float64Array(N);
  let n = 0;
  const it = db.iterator({ gte: rawKey(-Infinity).subarray(0, RAW_ID.length + 1), lt: rawKey(Infinity) });
  try {
    for (;;) {
      const entries = await it.nextv(1000);
      if (entries.length === 0) break;
      for (const [k, v] of entries) {
        ts[n] = new DataView(k.buffer, k.byteOffset + RAW_ID.length + 1, 8).getFloat64(0);
        val[n] = new DataView(v.buffer, v.byteOffset, 8).getFloat64(0);
        n++;
      }
    }
  } finally {
    await it.close();
  }
  if (n !== N) throw new Error(`raw scan found ${n} samples`);
  return { ts, val };
}

// ---------------------------------------------------------------------------------------------
// Main table: per shape, history store vs raw entries

const lines: string[] = [];
const rows: string[] = [];
for (const [shape, samples] of shapes) {
  process.stdout.write(`${shape} ...\n`);
  // Sizes on disk (once: deterministic data).
  const { dir: hisDir } = await hisWriteOnce(samples);
  const hisBytes = await compactClosed(path.join(hisDir, 'db'));
  const rawDir = tmpDir();
  await rawWrite(rawDir, samples);
  const rawBytes = await compactClosed(rawDir);

  // Reads from the compacted stores, checked once for equality with the input.
  const reader = await hisStore(hisDir);
  const rawDb = new ClassicLevel<Uint8Array, Uint8Array>(rawDir, { keyEncoding: 'view', valueEncoding: 'view' });
  await rawDb.open();
  const check = await reader.his.read('p');
  for (let i = 0; i < N; i++) {
    const s = samples[i] as HisSample;
    if (check.ts[i] !== s.ts || check.val[i] !== s.val) throw new Error(`${shape}: sample ${i} read back wrong`);
  }
  const dayStart = T0 + 200 * 1440 * MIN;

  const med = await measureAsync(
    {
      'his write': async () => {
        const r = await hisWriteOnce(samples);
        rmSync(r.dir, { recursive: true, force: true });
        return new Timed(r.ms);
      },
      'raw write': async () => {
        const d = tmpDir();
        const ms = await rawWrite(d, samples);
        rmSync(d, { recursive: true, force: true });
        return new Timed(ms);
      },
      'his read': () => reader.his.read('p'),
      'raw scan': () => rawScan(rawDb),
    },
    rounds,
  );
  // Short reads in a loop of their own: interleaved after a full scan they mostly time its GC.
  const dayMs = await medianOf(200, () => reader.his.read('p', dayStart, dayStart + 1440 * MIN));
  const lastDay = (samples[N - 1] as HisSample).ts - 1439 * MIN;
  const lastDayMs = await medianOf(200, () => reader.his.read('p', lastDay, Infinity));
  await rawDb.close();
  await reader.his.stop();
  await reader.store.close();

  const hisRead = med['his read'] as number;
  const rawScanMs = med['raw scan'] as number;
  const hisWrite = med['his write'] as number;
  const rawWriteMs = med['raw write'] as number;
  rows.push(
    `| ${shape} | ${fmtRate((N / hisWrite) * 1000)}/s | ${fmtRate((N / rawWriteMs) * 1000)}/s | ${fmtRate((N / hisRead) * 1000)}/s | ${fmtRate((N / rawScanMs) * 1000)}/s | ${dayMs.toFixed(2)} ms | ${lastDayMs.toFixed(2)} ms | ${(hisBytes / N).toFixed(2)} | ${(rawBytes / N).toFixed(2)} |`,
  );
  rmSync(hisDir, { recursive: true, force: true });
  rmSync(rawDir, { recursive: true, force: true });
}

// ---------------------------------------------------------------------------------------------
// Chunk size: bytes/sample, full read, and the cost of rewriting one old sample

const sizeRows: string[] = [];
const sensorSamples = (shapes[0] as [string, HisSample[]])[1];
for (const cs of quick ? [256, 1024, 4096] : [128, 256, 512, 1024, 2048, 4096]) {
  process.stdout.write(`chunk size ${cs} ...\n`);
  const { dir } = await hisWriteOnce(sensorSamples, cs);
  const bytes = await compactClosed(path.join(dir, 'db'));
  const x = await hisStore(dir, cs);
  const med = await measureAsync({ read: () => x.his.read('p') }, rounds * 3);
  let k = 0;
  const rewriteMs = await medianOf(100, () => {
    k++;
    return x.his.write('p', 'Number', [{ ts: T0 + ((k * 7919) % (N - 2000)) * MIN, val: 20 + (k % 10) / 10 }]);
  });
  await x.his.stop();
  await x.store.close();
  rmSync(dir, { recursive: true, force: true });
  sizeRows.push(`| ${cs} | ${(bytes / N).toFixed(3)} | ${fmtRate((N / (med.read as number)) * 1000)}/s | ${rewriteMs.toFixed(2)} ms |`);
}

// Poll-cycle appends: one sample per call, each call synced (the cost is the fsync).
const appendN = quick ? 500 : 2000;
const ap = await hisStore(tmpDir());
const appendT0 = performance.now();
for (let i = 0; i < appendN; i++) await ap.his.write('p', 'Number', [{ ts: T0 + i * MIN, val: 20 + (i % 7) / 10 }]);
const appendMs = (performance.now() - appendT0) / appendN;
// 1,000 points, one sample each, in one writeMany: a poll cycle.
const cycleMs: number[] = [];
for (let c = 0; c < (quick ? 5 : 20); c++) {
  const writes = Array.from({ length: 1000 }, (_, p) => ({ pointId: `pt${p}`, kind: 'Number' as const, samples: [{ ts: T0 + c * MIN, val: p / 10 }] }));
  const t0 = performance.now();
  await ap.his.writeMany(writes);
  cycleMs.push(performance.now() - t0);
}
await ap.his.stop();
await ap.store.close();
rmSync(tmpRoot, { recursive: true, force: true });

lines.push(
  `Run: \`npm run bench -- his-store\` on ${machineLine()}; ${N.toLocaleString('en')} one-minute samples (a point-year) per shape, ${rounds} interleaved rounds after a warm-up, medians. Goals: read 1.5 M samples/s or more; 2 bytes/sample or less on the sensor curve.`,
  '',
  '"his" is the history store (chunks of 1,024, one synced batch per write call; read returns columns: a Float64Array of timestamps and one of values, decoding included). "raw" is the baseline: classic-level with one entry per sample (key = point + big-endian ts, value = float64), chained batches of 50,000, scanned with nextv(1000) into the same two arrays. Bytes/sample: table and log files on disk after a full compaction, store closed.',
  '',
  '| shape | his write | raw write | his read | raw scan | his read a day (1,440) | his read the last day (tail) | his B/sample | raw B/sample |',
  '|---|---:|---:|---:|---:|---:|---:|---:|---:|',
  ...rows,
  '',
  'Chunk size, on the sensor curve (read: the whole year; rewrite: one sample in the middle of sealed history, which re-encodes its chunk, synced; median of 100):',
  '',
  '| samples per chunk | B/sample on disk | read | rewrite 1 old sample |',
  '|---:|---:|---:|---:|',
  ...sizeRows,
  '',
  `Appends: one sample per write call, synced: ${appendMs.toFixed(2)} ms per call (${appendN} calls; the fsync dominates). A poll cycle of 1,000 points with one sample each in one writeMany: ${median(cycleMs).toFixed(1)} ms (median of ${cycleMs.length}).`,
);
const table = lines.join('\n');
console.log(table);
if (!hasFlag('--no-record')) recordSection('his-store', table);
