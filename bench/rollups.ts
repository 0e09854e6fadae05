/**
 * bench/rollups: what history retention keeps of a point-year once its raw samples are gone (the
 * 15-minute rollups, src/store/rollups.ts) and how fast it rolls and removes them.
 *
 *   npm run bench -- rollups [--no-record]
 *
 * Per data shape: a point-year of one-minute samples (525,600) written through the history store
 * into a fresh data folder, then one retention run (src/store/retention.ts, timers off, raw
 * retention one day) rolls up and removes all but the last day, a day per step as the daemon does.
 * Bytes: LevelDB's estimate for the `roll` sublevel's key range after a full compaction (table
 * files). Time: the run, compactions included; median of 3 rounds, each on a fresh folder. The
 * baseline, in the same rounds: the same raw samples removed a day at a time with deleteSpans
 * alone (no rollups, one compaction at the end), what retention would cost without rollups.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ManualClock } from '../src/lib/clock.js';
import { createLogger } from '../src/lib/log.js';
import { Store } from '../src/store/db.js';
import type { HisKind, HisValue } from '../src/store/his-codec.js';
import { HistoryStore } from '../src/store/history.js';
import { Retention } from '../src/store/retention.js';
import { RollupStore } from '../src/store/rollups.js';
import { prng } from '../test/helpers/prng.js';
import { hasFlag, machineLine, median, recordSection } from './harness.js';

const N = 525_600;
const T0 = Date.UTC(2024, 0, 1);
const MIN = 60_000;
const DAY = 86_400_000;
const ROUNDS = 3;

function shape(name: string): { kind: HisKind; val: HisValue[] } {
  const rnd = prng(7);
  const val: HisValue[] = new Array<HisValue>(N);
  let drift = 0;
  for (let i = 0; i < N; i++) {
    switch (name) {
      case 'sensor 0.1-quantized': {
        const day = (i % 1440) / 1440;
        drift = 0.98 * drift + (rnd() - 0.5) * 0.08;
        val[i] = Math.round((21 + 4 * Math.sin((2 * Math.PI * i) / N) + 1.5 * Math.sin(2 * Math.PI * (day - 0.3)) + drift) * 10) / 10;
        break;
      }
      case 'setpoint step-like':
        val[i] = i % 1440 < 420 || i % 1440 >= 1080 ? 18 : 21.5;
        break;
      case 'random floats':
        val[i] = rnd() * 1000;
        break;
      default: // a fan's run status, changing a few times a day
        val[i] = i % 1440 >= 360 && i % 1440 < 1200 && rnd() > 0.001;
    }
  }
  return { kind: name === 'Bool run status' ? 'Bool' : 'Number', val };
}

/** The baseline: the year less its last day removed a day per call, then one compaction. */
async function baseline(name: string): Promise<number> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'hayloft-bench-rollups-'));
  try {
    const store = await Store.open(dir);
    const his = new HistoryStore(store);
    await his.start();
    const { kind, val } = shape(name);
    const ts = Array.from({ length: N }, (_, i) => T0 + i * MIN);
    await his.writeMany([{ pointId: 'p', kind, ts, val }]);
    const t0 = performance.now();
    for (let d = T0 + DAY; d <= T0 + N * MIN - DAY; d += DAY) await his.deleteSpans([{ pointId: 'p', start: -Infinity, end: d }]);
    for (const [from, to] of his.keyRanges('p')) await store.db.compactRange(from, to, { keyEncoding: 'view' });
    const ms = performance.now() - t0;
    await his.stop();
    await store.close();
    return ms;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function round(name: string): Promise<{ ms: number; bytes: number; buckets: number }> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'hayloft-bench-rollups-'));
  try {
    const store = await Store.open(dir);
    const his = new HistoryStore(store);
    await his.start();
    const rollups = new RollupStore(store);
    await rollups.start();
    const { kind, val } = shape(name);
    const ts = Array.from({ length: N }, (_, i) => T0 + i * MIN);
    await his.writeMany([{ pointId: 'p', kind, ts, val }]);
    const clock = new ManualClock(T0 + N * MIN);
    const retention = new Retention({
      history: his,
      rollups,
      store,
      clock,
      log: createLogger({ level: 'silent' }),
      policy: () => ({ rawMs: DAY, rollupMs: null, maxSamples: null }),
      maxStoreBytes: 0,
      timers: false,
    });
    const t0 = performance.now();
    const sum = await retention.runOnce();
    const ms = performance.now() - t0;
    await store.db.compactRange(new Uint8Array([0]), new Uint8Array(16).fill(0xff), { keyEncoding: 'view' });
    const bytes = await store.db.approximateSize('!roll!', '!roll"');
    await his.stop();
    await store.close();
    return { ms, bytes, buckets: sum?.bucketsRolled ?? 0 };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const shapes = ['sensor 0.1-quantized', 'setpoint step-like', 'random floats', 'Bool run status'];
const rows: string[] = [];
for (const name of shapes) {
  const runs: { ms: number; bytes: number; buckets: number }[] = [];
  const base: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    runs.push(await round(name));
    base.push(await baseline(name));
  }
  const ms = median(runs.map((r) => r.ms));
  const bms = median(base);
  const last = runs[runs.length - 1] as { bytes: number; buckets: number };
  const rolled = N - 1440;
  rows.push(`| ${name} | ${last.buckets.toLocaleString('en')} | ${(last.bytes / 1024).toFixed(0)} KiB | ${(last.bytes / last.buckets).toFixed(1)} | ${(ms / 1000).toFixed(2)} s | ${((rolled / ms) * 1000 / 1e6).toFixed(2)} M/s | ${(bms / 1000).toFixed(2)} s | ${(ms / bms).toFixed(2)}× |`);
  console.log(rows[rows.length - 1]);
}

const table = [
  `Run: \`npm run bench -- rollups\` on ${machineLine()}; a point-year of one-minute samples (${N.toLocaleString('en')}) per shape through the history store, then one retention run keeping one day raw (rolled up and removed a day per step, compactions included). Bytes: LevelDB's estimate for the \`roll\` sublevel after a full compaction. Time: median of ${ROUNDS} rounds, each on a fresh folder; baseline in the same rounds: the same samples removed a day per deleteSpans call without rollups, one compaction at the end.`,
  '',
  '| shape | 15-min buckets | rollups of the year | B/bucket | retention run | raw samples rolled and removed | baseline: delete only | run / baseline |',
  '|---|---:|---:|---:|---:|---:|---:|---:|',
  ...rows,
].join('\n');
if (!hasFlag('--no-record')) recordSection('rollups', table);
console.log(table);
