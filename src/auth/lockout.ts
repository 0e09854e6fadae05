/**
 * Slows down password guessing: after a number of consecutive failures for a key, further
 * attempts are refused for a time that doubles with each failure (capped). Each key may have its
 * own threshold, by the kind before its first `:` (see AuthService.lockKeys: a user at an address
 * locks first, a user from anywhere later, an address for every user last). A success clears its
 * keys. Kept in memory: a restart forgives, which is acceptable for a LAN device, and keeps
 * failed logins from writing to flash. Windows are on the monotonic clock (lib/clock.ts): a wall-clock
 * step neither lifts a lock nor stretches it.
 */
import type { Clock } from '../lib/clock.js';

interface Entry {
  failures: number;
  lockedUntil: number;
  last: number;
}

export interface LockoutOptions {
  /** Failures before a key is locked, unless `thresholds` names its kind. */
  threshold?: number;
  /** By key kind (`ip` for `ip:10.0.0.7`): failures before such a key is locked. */
  thresholds?: Record<string, number>;
  baseMs?: number;
  maxMs?: number;
  /** Entries kept at most (oldest forgotten first), so a flood of addresses cannot grow memory. */
  maxEntries?: number;
}

export class Lockout {
  private readonly entries = new Map<string, Entry>();
  private readonly threshold: number;
  private readonly thresholds: ReadonlyMap<string, number>;
  private readonly baseMs: number;
  private readonly maxMs: number;
  private readonly maxEntries: number;

  constructor(
    private readonly clock: Clock,
    opts: LockoutOptions = {},
  ) {
    this.threshold = opts.threshold ?? 5;
    this.thresholds = new Map(Object.entries(opts.thresholds ?? {}));
    this.baseMs = opts.baseMs ?? 1000;
    this.maxMs = opts.maxMs ?? 15 * 60_000;
    this.maxEntries = opts.maxEntries ?? 10_000;
  }

  /** Milliseconds until any of these keys may try again; 0 when none is locked. */
  waitMs(keys: readonly string[]): number {
    const now = this.clock.monotonic();
    let wait = 0;
    for (const k of keys) {
      const e = this.entries.get(k);
      if (e !== undefined && e.lockedUntil > now) wait = Math.max(wait, e.lockedUntil - now);
    }
    return wait;
  }

  failure(keys: readonly string[]): void {
    const now = this.clock.monotonic();
    for (const k of keys) {
      const e = this.entries.get(k) ?? { failures: 0, lockedUntil: 0, last: now };
      e.failures++;
      e.last = now;
      const threshold = this.thresholds.get(k.slice(0, k.indexOf(':'))) ?? this.threshold;
      if (e.failures >= threshold) {
        e.lockedUntil = now + Math.min(this.maxMs, this.baseMs * 2 ** (e.failures - threshold));
      }
      this.entries.delete(k);
      this.entries.set(k, e);
    }
    while (this.entries.size > this.maxEntries) {
      const oldest = this.entries.keys().next().value as string;
      this.entries.delete(oldest);
    }
  }

  success(keys: readonly string[]): void {
    for (const k of keys) this.entries.delete(k);
  }
}
