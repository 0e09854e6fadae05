/**
 * One compacting garbage collection once start-up has settled, to give back what starting took.
 *
 * Start-up allocates in a burst (modules, the model's indexes, the first-run password hashes),
 * which grows V8's young generation to its maximum (2 x 4 MiB) and leaves garbage in the old one.
 * Node 20's V8 gives that back by itself: a full collection happens during start-up, and its
 * memory reducer then runs again when allocation stops. The V8 of Node 22 and 24 reaches the end
 * of start-up without a full collection, so its memory reducer never starts, and an idle daemon
 * kept about 10 MiB of start-up's memory for good (measured: 85 MiB idle on Node 24, 75 after one
 * collection like this; docs/performance.md). So the daemon asks for one itself, a while after it
 * started serving: a "last resort" collection, V8's most thorough (it compacts and shrinks the
 * young generation), which takes some tens of milliseconds once in the life of the process.
 *
 * `gc` exists because the daemon starts with `--expose-gc` (src/lib/runtime.ts); without it (a
 * process started with the operator's own flags) this does nothing.
 */
import type { Logger } from 'pino';

/** Runs the collection `delayMs` after the call; returns a function that cancels it. */
export function settleAfterStart(log: Logger, delayMs = 10_000): () => void {
  const gc = (globalThis as { gc?: NodeJS.GCFunction }).gc;
  if (typeof gc !== 'function') return () => undefined;
  const timer = setTimeout(() => {
    const before = process.memoryUsage.rss();
    const t0 = performance.now();
    gc({ type: 'major', flavor: 'last-resort' });
    const ms = Math.round(performance.now() - t0);
    log.debug({ rssBefore: before, rssAfter: process.memoryUsage.rss(), ms }, 'start-up settled: gave back its memory');
  }, delayMs);
  // Never what keeps the process alive.
  timer.unref();
  return () => clearTimeout(timer);
}
