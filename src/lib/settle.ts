/**
 * A compacting garbage collection when the daemon has gone quiet after a burst of work, to give
 * back the memory the burst took.
 *
 * A burst (start-up; a load of records and history over REST; a BACnet learn) grows V8's young
 * generation to its maximum (2 x 4 MiB) and leaves garbage in the old one. Node 20's V8 gives
 * that back by itself: its memory reducer runs a few seconds after allocation stops. The V8 of
 * Node 22 and 24 did not here: an idle daemon kept start-up's memory for good (85 MiB idle on
 * Node 24 where one collection leaves 75), and after loading 1,000,000 samples it stayed at
 * 122 MiB (docs/performance.md). So the daemon checks every `checkMs` (2 s) whether it has been
 * quiet (the event loop busy less than a tenth of the time) and has grown since the last collection
 * of this kind (or never had one); if so it asks V8 for a "last resort" collection, its most
 * thorough (it compacts and shrinks the young generation). That takes some tens of milliseconds,
 * at a time when nothing waits, and not again until the daemon has grown by `growthBytes` more.
 * The look itself is two clock reads and one of /proc: every 2 s, not 10, so the memory is back
 * 2-4 s after a burst ends. Looking every 10 s, the window holding the burst's end was busy and
 * the next came up to 10 s later: 5-7 s after 5,000 malformed requests a Node 24 daemon still held
 * 1.2-1.4x its RSS before them (test/api/hostile-memory.test.ts's bound is 1.3x), and 1.1-1.2x
 * once the collection had run.
 *
 * V8's `gc` function is taken from a throw-away context (`--expose-gc` set for the moment it is
 * made), not by starting the daemon with `--expose-gc`: started with that flag, the daemon took
 * 10-30 % more CPU per read by id in three interleaved pairs of runs (docs/performance.md; the
 * cause was not found, and the machine is noisy), and without it nothing is lost.
 */
import { performance } from 'node:perf_hooks';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { Logger } from 'pino';

/** V8's gc function, or undefined where it cannot be had. */
function gcFunction(): NodeJS.GCFunction | undefined {
  const exposed = (globalThis as { gc?: NodeJS.GCFunction }).gc;
  if (typeof exposed === 'function') return exposed;
  try {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as unknown;
    return typeof gc === 'function' ? (gc as NodeJS.GCFunction) : undefined;
  } catch {
    return undefined;
  } finally {
    setFlagsFromString('--no-expose-gc');
  }
}

export interface SettleOptions {
  /** How often to look, ms. */
  checkMs?: number;
  /** Growth of the resident size since the last collection that is worth another, bytes. */
  growthBytes?: number;
  /** Event loop utilisation over the last `checkMs` below which the daemon counts as quiet. */
  quietBelow?: number;
}

/** Starts watching; returns a function that stops it (the daemon stopping). */
export function settleWhenQuiet(log: Logger, opts: SettleOptions = {}): () => void {
  const gc = gcFunction();
  if (gc === undefined) return () => undefined;
  const growth = opts.growthBytes ?? 8 * 1024 * 1024;
  const quietBelow = opts.quietBelow ?? 0.1;
  // Start-up is the first burst: measured from nothing, so the first quiet look collects.
  let settledRss = 0;
  let last = performance.eventLoopUtilization();
  const timer = setInterval(() => {
    const now = performance.eventLoopUtilization();
    const busy = performance.eventLoopUtilization(now, last).utilization;
    last = now;
    const before = process.memoryUsage.rss();
    if (busy >= quietBelow || before - settledRss < growth) return;
    const t0 = performance.now();
    gc({ type: 'major', flavor: 'last-resort' });
    settledRss = process.memoryUsage.rss();
    // Its own time is not the next window's work.
    last = performance.eventLoopUtilization();
    log.debug({ rssBefore: before, rssAfter: settledRss, ms: Math.round(performance.now() - t0), busy }, 'quiet after a burst: gave back its memory');
  }, opts.checkMs ?? 2_000);
  // Never what keeps the process alive.
  timer.unref();
  return () => clearInterval(timer);
}
