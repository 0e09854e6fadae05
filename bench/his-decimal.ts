/**
 * bench/his-decimal: what scaled and float32 device values cost on disk in history, as binary
 * arithmetic leaves them ("before": raw × 0.1 is 0.7000000000000001, a float32 21.3 is
 * 21.299999237060547) and as the drivers now give them ("after": the decimals they are,
 * src/lib/decimal.ts), with the history store's own codecs choosing per chunk.
 *
 *   npm run bench -- his-decimal [--no-record]
 *
 * Each shape is a point-year of one-minute samples (525,600) written through the history store
 * (src/store/history.ts, chunks of 1,024) into a fresh data folder, compacted and closed; bytes
 * per sample are LevelDB's table and log files on disk. Sizes are deterministic (seeded data),
 * so there are no rounds: one write per shape. Timestamps are on the poll slot, and again 0-30 ms
 * late (stamped when the read came back, as the poller does).
 */
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ClassicLevel } from 'classic-level';
import { DecimalScale, float32Decimal } from '../src/lib/decimal.js';
import { Store } from '../src/store/db.js';
import { chunkCodec } from '../src/store/his-codec.js';
import { HistoryStore } from '../src/store/history.js';
import { prng } from '../test/helpers/prng.js';
import { hasFlag, machineLine, recordSection } from './harness.js';

const N = 525_600;
const T0 = Date.UTC(2024, 0, 1);
const MIN = 60_000;

// ---------------------------------------------------------------------------------------------
// Data: one true signal per quantity, read by a device as an integer register or a float32.

/** Zone temperature as bench/his-store models it (seasons, days, drift, noise), unrounded. */
function temperature(): Float64Array {
  const rnd = prng(7);
  const out = new Float64Array(N);
  let drift = 0;
  for (let i = 0; i < N; i++) {
    const day = (i % 1440) / 1440;
    drift = 0.98 * drift + (rnd() - 0.5) * 0.08;
    const white = (rnd() + rnd() + rnd() - 1.5) * 0.2;
    out[i] = 21 + 4 * Math.sin((2 * Math.PI * i) / N) + 1.5 * Math.sin(2 * Math.PI * (day - 0.3)) + drift + white;
  }
  return out;
}

/** Duct static pressure in kPa: a fan's daily schedule, gusts and noise. */
function pressure(): Float64Array {
  const rnd = prng(8);
  const out = new Float64Array(N);
  let gust = 0;
  for (let i = 0; i < N; i++) {
    const minute = i % 1440;
    const on = minute >= 360 && minute < 1200;
    gust = 0.95 * gust + (rnd() - 0.5) * 0.02;
    out[i] = 101.3 + (on ? 0.45 : 0) + gust + (rnd() - 0.5) * 0.03;
  }
  return out;
}

const temp = temperature();
const press = pressure();
const scale01 = new DecimalScale(0.1, 0);
const scale001 = new DecimalScale(0.01, 0);
const rawTemp = Array.from(temp, (v) => Math.round(v * 10)); // an int16 register at 0.1 °C
const rawPress = Array.from(press, (v) => Math.round(v * 100)); // a uint16 register at 0.01 kPa
const wireF32 = Array.from(temp, (v) => Math.fround(Math.round(v * 100) / 100)); // a float32 at 0.01 °C
/** A sensor that fails now and then: the device sends NaN for a minute, about once every 8 hours. */
const withFaults = (vals: number[]): number[] => vals.map((v, i) => ((i * 2654435761) % 479 === 0 ? NaN : v));

const shapes: [string, number[], number[]][] = [
  ['int16 × 0.1 (temperature)', rawTemp.map((r) => r * 0.1), rawTemp.map((r) => scale01.apply(r))],
  ['uint16 × 0.01 (pressure)', rawPress.map((r) => r * 0.01), rawPress.map((r) => scale001.apply(r))],
  ['float32 at 0.01 (REAL or float32 register)', wireF32, wireF32.map(float32Decimal)],
  ['int16 × 0.1 with NaN faults', withFaults(rawTemp.map((r) => r * 0.1)), withFaults(rawTemp.map((r) => scale01.apply(r)))],
];

function times(jitterMs: number): Float64Array {
  const rnd = prng(11);
  return Float64Array.from({ length: N }, (_, i) => T0 + i * MIN + (jitterMs === 0 ? 0 : Math.floor(rnd() * (jitterMs + 1))));
}

// ---------------------------------------------------------------------------------------------
// Plumbing

const tmpRoot = mkdtempSync(path.join(os.tmpdir(), 'hayloft-bench-his-decimal-'));
let tmpN = 0;

function dbBytes(dbDir: string): number {
  let total = 0;
  for (const f of readdirSync(dbDir)) if (/\.(ldb|sst|log)$/.test(f)) total += statSync(path.join(dbDir, f)).size;
  return total;
}

/** Writes the year into a fresh store; returns bytes on disk after compaction and the chunks' codecs. */
async function onDisk(ts: Float64Array, val: number[]): Promise<{ bytes: number; codecs: string }> {
  const dir = path.join(tmpRoot, String(tmpN++));
  const store = await Store.open(dir);
  const his = new HistoryStore(store);
  await his.start();
  await his.write('p', 'Number', Array.from(ts, (t, i) => ({ ts: t, val: val[i] as number })));
  const count = new Map<number, number>();
  // Sealed chunks are the entries whose key starts with 'C' (history.ts keys).
  for await (const [k, v] of store.his.iterator()) if (k[0] === 0x43) count.set(chunkCodec(v), (count.get(chunkCodec(v)) ?? 0) + 1);
  const back = await his.read('p');
  for (let i = 0; i < N; i++) if (!Object.is(back.val[i], val[i]) || back.ts[i] !== ts[i]) throw new Error(`sample ${i} read back wrong`);
  await his.stop();
  await store.close();
  const db = new ClassicLevel<Uint8Array, Uint8Array>(path.join(dir, 'db'), { keyEncoding: 'view', valueEncoding: 'view' });
  await db.open();
  await db.compactRange(new Uint8Array([0]), new Uint8Array(16).fill(0xff));
  await db.close();
  const bytes = dbBytes(path.join(dir, 'db'));
  rmSync(dir, { recursive: true, force: true });
  const names: Record<number, string> = { 1: 'decimal', 2: 'XOR', 5: 'decimal+exceptions' };
  const codecs = [...count.entries()]
    .sort((a, b) => b[1] - a[1])
    .map(([c, n]) => `${names[c] ?? `codec ${c}`} ${n}`)
    .join(', ');
  return { bytes, codecs };
}

// ---------------------------------------------------------------------------------------------
// Table

const rows: string[] = [];
try {
  for (const [shape, before, after] of shapes) {
    for (const jitter of [0, 30]) {
      process.stdout.write(`${shape}, jitter ${jitter} ms ...\n`);
      const ts = times(jitter);
      const b = await onDisk(ts, before);
      const a = await onDisk(ts, after);
      rows.push(
        `| ${shape} | ${jitter === 0 ? 'on the slot' : '0-30 ms late'} | ${(b.bytes / N).toFixed(2)} (${b.codecs}) | ${(a.bytes / N).toFixed(2)} (${a.codecs}) | ${(b.bytes / a.bytes).toFixed(1)}× |`,
      );
    }
  }
} finally {
  rmSync(tmpRoot, { recursive: true, force: true });
}

const table = [
  `Run: \`npm run bench -- his-decimal\` on ${machineLine()}; ${N.toLocaleString('en')} one-minute samples (a point-year) per shape, written in one call through the history store, bytes of LevelDB's table and log files after a full compaction, store closed (sizes, not times: one run). Before: the values as binary arithmetic leaves them; after: as the drivers now give them. Chunks by codec in parentheses.`,
  '',
  '| shape | timestamps | before B/sample | after B/sample | before/after |',
  '|---|---|---:|---:|---:|',
  ...rows,
].join('\n');
process.stdout.write(`\n${table}\n`);
if (!hasFlag('--no-record')) recordSection('his-decimal', table);
