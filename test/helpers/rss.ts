/**
 * The resident memory of another process (the daemon under test or bench), read from
 * /proc/<pid>/status: VmRSS now, VmHWM (the peak since start or since `resetPeak`). And the
 * hostile-load measurement shared by test/api/hostile-memory.test.ts and bench/hostile.ts: RSS
 * settled before, the peak during, and RSS settled after a mix of malformed requests.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { type Malformed, sendMalformed, type Tally } from './malformed.js';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Bytes of VmRSS or VmHWM of the process. */
export function procStatus(pid: number, key: 'VmRSS' | 'VmHWM'): number {
  const m = new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m?.[1] ?? NaN) * 1024;
}

/** Resets VmHWM to the current RSS (clear_refs 5); false where the kernel does not allow it. */
export function resetPeak(pid: number): boolean {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
    return true;
  } catch {
    return false;
  }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
}

/** The median of RSS read every 200 ms for `ms`. */
export async function settledRss(pid: number, ms = 2000): Promise<number> {
  const xs: number[] = [];
  for (let t = 0; t < ms; t += 200) {
    xs.push(procStatus(pid, 'VmRSS'));
    await sleep(200);
  }
  return median(xs);
}

export interface HostileMemory {
  /** RSS settled before the load, bytes. */
  before: number;
  /** The highest RSS during the load (VmHWM, reset before it; and samples every 50 ms). */
  peak: number;
  /** RSS settled `settleMs` after the load. */
  after: number;
  /** Milliseconds the load took. */
  ms: number;
  tally: Tally;
}

/**
 * Measures the daemon `pid` (serving on `port`) under the mix: RSS settled before, the peak
 * while `concurrency` requests are in flight, RSS settled `settleMs` after the last answer.
 */
export async function hostileMemory(pid: number, port: number, token: string, mix: readonly Malformed[], opts: { concurrency?: number; settleMs?: number } = {}): Promise<HostileMemory> {
  const before = await settledRss(pid);
  const reset = resetPeak(pid);
  let sampled = 0;
  const sampler = setInterval(() => {
    sampled = Math.max(sampled, procStatus(pid, 'VmRSS'));
  }, 50);
  const t0 = performance.now();
  let tally: Tally;
  try {
    tally = await sendMalformed(port, token, mix, opts.concurrency ?? 4);
  } finally {
    clearInterval(sampler);
  }
  const ms = performance.now() - t0;
  // VmHWM only when it was reset: else it holds the peak of the start.
  const peak = Math.max(sampled, reset ? procStatus(pid, 'VmHWM') : 0);
  await sleep(opts.settleMs ?? 5000);
  const after = await settledRss(pid);
  return { before, peak, after, ms, tally };
}
