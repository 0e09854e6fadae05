/**
 * Keeps the shape (V8 hidden class) of Node's `process.nextTick` objects alive for the life of the
 * process, so the tick objects built on every request stay on V8's fast path.
 *
 * Node builds each tick as an object literal whose first keys are computed (async id symbols).
 * V8 keeps only the literal's empty start as a template and adds those keys one by one, caching
 * at each step the object's hidden class of the moment. Those classes are held weakly: when a full
 * garbage collection runs while no tick is queued (a quiet daemon after a burst, its own
 * quiet-time collection, or V8's memory reducer), they die, the next tick builds new ones, the
 * cache sees a second class and gives up for good ("megamorphic"), and optimized code defines
 * those keys through the runtime from then on: about 1 us more for every tick. A request takes
 * several ticks (stream ends, write callbacks, the response's close).
 *
 * Measured (docs/performance.md): a bare node:http server, 100-byte answers under wrk, went from
 * 16 to 21-23 us of CPU per request after three idle full collections on Node 20 and from 16 to
 * 20 on Node 24, for good; holding one tick object kept it at 16-17 on both. Hayloft's read by id
 * after creating 10,000 points (which takes full collections) cost 30-50 us against 23-27 with
 * 1,000 points, and was the one goal of issue 19 it kept missing.
 *
 * One tick object held is enough: its hidden class holds its parents, and so the whole chain the
 * cache was built on. It is taken from inside a tick's callback, where Node exposes it as the
 * current async resource (no async hook is installed).
 */
import { executionAsyncResource } from 'node:async_hooks';

let kept: object | undefined;

/**
 * Holds a tick object from the next tick on. Call once at start, before the first full garbage
 * collection; the tick scheduled here is alive until it runs, so its shape cannot die meanwhile.
 */
export function keepTickObjectShape(): void {
  if (kept !== undefined) return;
  process.nextTick(() => {
    kept = executionAsyncResource();
  });
}

/** The tick object held (tests). */
export function keptTickObject(): object | undefined {
  return kept;
}
