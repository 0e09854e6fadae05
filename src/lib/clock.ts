/**
 * Injectable time: everything that asks "what time is it" takes a Clock, so tests control it.
 *
 * Two readings, for two questions (docs/clock.md):
 * - `now()`, the wall clock (epoch ms): what a sample, an audit entry, a token or a persisted
 *   override is dated with. It can step either way (NTP setting a Pi's clock after boot, an
 *   operator's `date -s`).
 * - `monotonic()`, ms since an arbitrary origin, that never steps: what every interval and
 *   timeout is measured on (poll buckets, stale detection, write timers, watch leases, backoff,
 *   lockout windows, the senders' passes). A wall-clock step then never stops or floods them.
 * Never compare a reading of one with a reading of the other.
 */
export interface Clock {
  /** Wall clock, epoch milliseconds. */
  now(): number;
  /** Milliseconds on a clock that only moves forward at the rate of time (not epoch based). */
  monotonic(): number;
}

export const systemClock: Clock = { now: () => Date.now(), monotonic: () => performance.now() };

/**
 * A clock tests move by hand. `advance` lets time pass (both readings move); `stepWall` steps the
 * wall clock alone (what NTP or `date -s` does); `advanceMonotonic` moves the monotonic reading
 * alone (time passing while the wall clock is held, e.g. to show a schedule ignores it).
 */
export class ManualClock implements Clock {
  private t: number;
  private mono: number;
  constructor(start: number, monotonicStart = 1_000_000) {
    this.t = start;
    this.mono = monotonicStart;
  }
  now(): number {
    return this.t;
  }
  monotonic(): number {
    return this.mono;
  }
  /** Time passes up to wall time `t`: the monotonic reading moves by as much when `t` is later. */
  set(t: number): void {
    if (t > this.t) this.mono += t - this.t;
    this.t = t;
  }
  /** `ms` of time pass: both readings move. */
  advance(ms: number): void {
    this.t += ms;
    this.mono += ms;
  }
  /** The wall clock steps by `ms` (negative: back); no time passes. */
  stepWall(ms: number): void {
    this.t += ms;
  }
  /** `ms` pass on the monotonic clock only. */
  advanceMonotonic(ms: number): void {
    this.mono += ms;
  }
}
