/**
 * The resident memory of another process (the daemon under test or bench), read from
 * /proc/<pid>/status: VmRSS now, VmHWM (the peak since start or since `resetPeak`). And the
 * hostile-load measurement shared by test/api/hostile-memory.test.ts and bench/hostile.ts: RSS
 * settled before, the peak during, and RSS settled after a mix of malformed requests.
 */
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { type Malformed, sendMalformed, type Tally } from './malformed.js';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Bytes of VmRSS or VmHWM of the process. */
export function procStatus(pid: number, key: 'VmRSS' | 'VmHWM' | 'RssAnon' | 'RssFile'): number {
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

/** The processes of a process group (/proc/<pid>/stat's pgrp), the group's leader first. */
export function groupPids(pgid: number): number[] {
  const out: number[] = [];
  for (const e of readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const stat = readFileSync(`/proc/${e}/stat`, 'utf8');
      // Fields after the command name (which may hold spaces): state, ppid, pgrp.
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(f[2]) === pgid) out.push(Number(e));
    } catch {
      // gone meanwhile
    }
  }
  return out.sort((a, b) => (a === pgid ? -1 : b === pgid ? 1 : a - b));
}

export interface GroupMemory {
  /**
   * Resident bytes of the whole group with file-backed pages counted once: every process's
   * anonymous pages, plus the file-backed pages of the process that has the most (the processes
   * of a group run the same `node` binary and libraries, so the others' file pages are nearly all
   * the same pages). For one process it is its RSS.
   */
  rss: number;
  /** Σ Pss of the group (/proc/<pid>/smaps_rollup): shared pages split with every process that maps them, in the group or not. */
  pss: number;
  processes: number;
}

function rollup(pid: number): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8').split('\n')) {
    const m = /^(\w+):\s+(\d+) kB/.exec(line);
    if (m !== null) out[m[1] as string] = Number(m[2]) * 1024;
  }
  return out;
}

/**
 * The memory of a process group as a device owner pays for it (issue 33): what the whole service
 * holds, not one process of it. Why not Σ Pss alone: Pss splits the `node` binary's pages with
 * every other Node process on the machine, so on a shared build machine it shrinks with what
 * else runs; on a gateway Hayloft is the only Node. Both are returned.
 */
export function groupMemory(pgid: number): GroupMemory {
  let anon = 0;
  let file = 0;
  let pss = 0;
  let processes = 0;
  for (const pid of groupPids(pgid)) {
    let r: Record<string, number>;
    try {
      r = rollup(pid);
    } catch {
      continue;
    }
    processes++;
    anon += r.Anonymous ?? 0;
    file = Math.max(file, (r.Rss ?? 0) - (r.Anonymous ?? 0));
    pss += r.Pss ?? 0;
  }
  return { rss: anon + file, pss, processes };
}

/** groupMemory read every 200 ms for `ms`: the medians. */
export async function settledGroup(pgid: number, ms = 2000): Promise<GroupMemory> {
  const xs: GroupMemory[] = [];
  for (let t = 0; t < ms; t += 200) {
    xs.push(groupMemory(pgid));
    await sleep(200);
  }
  return { rss: median(xs.map((x) => x.rss)), pss: median(xs.map((x) => x.pss)), processes: Math.max(...xs.map((x) => x.processes)) };
}
