/**
 * Exponential backoff, the one formula of every retry in the daemon: a connector that does not
 * answer (poller), a point write that failed (write queue), an upstream that cannot be reached
 * (the uplink's outbox) and a broker that went away (the MQTT edge node).
 *
 * The delay before retry n (n = 1, 2, ...) is minMs doubled n - 1 times, capped at maxMs. With
 * `random` (jitter, for the links to a shared upstream or broker), the delay is drawn between half
 * and all of that, rounded to a millisecond, so a fleet of devices that lost the same server does
 * not come back in step; without it (local devices: nothing to spread) it is exact.
 */

export interface BackoffOptions {
  /** The first delay, in ms. */
  readonly minMs: number;
  /** The longest delay, in ms. */
  readonly maxMs: number;
  /** Random numbers in [0, 1) for the jitter; none: no jitter. */
  readonly random?: () => number;
}

/**
 * The doubling stops at 2^30: every configured ratio of maxMs to minMs is below it (both are at
 * most a day and at least 1 ms, src/config/uplink.ts and mqtt.ts), and it keeps minMs * 2^n finite.
 */
const MAX_DOUBLINGS = 30;

/** The delay before retry `failures` (the count of failures in a row, from 1). */
export function backoffDelay(failures: number, o: BackoffOptions): number {
  const cap = Math.min(o.maxMs, o.minMs * 2 ** Math.min(MAX_DOUBLINGS, Math.max(0, failures - 1)));
  if (o.random === undefined) return cap;
  return Math.round(cap / 2 + (o.random() * cap) / 2);
}
