/**
 * Change of value for the poller: which points are pushed by their device instead of polled,
 * and what happens when pushing fails.
 *
 * A point whose record or connector carries its driver's COV marker (`bacnetCov`) is subscribed
 * for its lifetime (`bacnetCovLifetime`, default 10 min) and renewed at three quarters of it; a
 * device answers every (re)subscription with the current value, so a healthy subscription hears
 * from the device at least once per lifetime. While subscribed, the point is left out of
 * polling and its values come from notifications (curVal, and history for hisCollectCov).
 *
 * Fallback: a refused or unanswered subscription, or no notification for longer than the
 * lifetime (the device restarted and forgot it, or stopped sending), puts the point back into
 * polling, with the reason in `covErr` (curStatus follows the polls: ok while they succeed). COV
 * is tried again after `retryMs` (the lifetime, at least 5 s, at most 5 min), at once when the
 * device announces itself (I-Am at start) or its connector answers again after being down.
 */
import type { CovSupport, PointRead, PreparedPoint } from '../drivers/driver.js';
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/log.js';

export const DEFAULT_COV_LIFETIME_MS = 10 * 60_000;

export interface CovManagerOptions {
  clock: Clock;
  log: Logger;
  /** A notification's value for a point (the poller publishes it as a poll result). */
  value: (id: string, read: PointRead) => void;
  /** A point moved between pushed and polled: its connector's buckets are rebuilt. */
  moved: (connId: string) => void;
  /** Sets or clears (null) the point's covErr. */
  covErr: (id: string, err: string | null) => void;
}

interface CovPoint {
  readonly id: string;
  readonly connId: string;
  readonly prepared: PreparedPoint;
  readonly cov: CovSupport;
  readonly lifetimeMs: number;
  state: 'subscribing' | 'pushed' | 'polled' | 'removed';
  /** Last notification (or subscription), on the monotonic clock. */
  lastHeard: number;
  timer: ReturnType<typeof setTimeout> | undefined;
}

function message(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

export class CovManager {
  private readonly points = new Map<string, CovPoint>();
  private readonly byPrepared = new Map<PreparedPoint, CovPoint>();
  /** Connections whose notifications this manager listens to. */
  private readonly hooked = new Set<CovSupport>();

  constructor(private readonly opts: CovManagerOptions) {}

  /** True while the point's values come from notifications (the poller leaves it out). */
  pushed(id: string): boolean {
    return this.points.get(id)?.state === 'pushed';
  }

  /** Starts change of value for a point (replacing what it had). */
  add(id: string, connId: string, prepared: PreparedPoint, cov: CovSupport, lifetimeMs: number): void {
    // The old subscription (another address, connection or lifetime) is cancelled, not left to lapse.
    this.remove(id);
    const p: CovPoint = { id, connId, prepared, cov, lifetimeMs, state: 'subscribing', lastHeard: 0, timer: undefined };
    this.points.set(id, p);
    this.byPrepared.set(prepared, p);
    if (!this.hooked.has(cov)) {
      this.hooked.add(cov);
      cov.onValue = (pp, read) => this.notified(pp, read);
      cov.onRestart = () => this.restarted(cov);
    }
    void this.subscribe(p);
  }

  /** Ends change of value for a point; `cancel` asks the device to drop the subscription. */
  remove(id: string, cancel = true): void {
    const p = this.points.get(id);
    if (p === undefined) return;
    const wasPushed = p.state === 'pushed';
    p.state = 'removed';
    clearTimeout(p.timer);
    this.points.delete(id);
    this.byPrepared.delete(p.prepared);
    this.opts.covErr(id, null);
    if (cancel) void p.cov.cancel(p.prepared);
    if (wasPushed) this.opts.moved(p.connId);
  }

  /**
   * The connector answers again after being down: its polled points try COV again now, and its
   * pushed ones renew now (a device that restarted while it was away has forgotten them; the
   * poller reads them once meanwhile, so they do not wait for a change to be `ok` again).
   */
  connectorBack(connId: string): void {
    for (const p of this.points.values()) {
      if (p.connId !== connId) continue;
      if (p.state === 'polled' || p.state === 'pushed') this.retryNow(p);
    }
  }

  stop(): void {
    for (const p of this.points.values()) {
      p.state = 'removed';
      clearTimeout(p.timer);
    }
    this.points.clear();
    this.byPrepared.clear();
    for (const c of this.hooked) {
      c.onValue = undefined;
      c.onRestart = undefined;
    }
    this.hooked.clear();
  }

  private retryNow(p: CovPoint): void {
    clearTimeout(p.timer);
    p.timer = undefined;
    void this.subscribe(p);
  }

  private async subscribe(p: CovPoint): Promise<void> {
    const renewal = p.state === 'pushed';
    if (!renewal) p.state = 'subscribing';
    const at = this.opts.clock.monotonic();
    try {
      await p.cov.subscribe(p.prepared, p.lifetimeMs);
    } catch (e) {
      if (p.state !== 'removed') this.fallBack(p, `${renewal ? 'renewing' : 'subscribing'} failed: ${message(e)}`);
      return;
    }
    if (p.state === 'removed') return;
    if (!renewal) {
      // Heard from, for the lapse check, as of the subscription: its first notification follows.
      p.lastHeard = Math.max(p.lastHeard, at);
      p.state = 'pushed';
      this.opts.covErr(p.id, null);
      this.opts.log.debug({ pointId: p.id, lifetimeMs: p.lifetimeMs }, 'COV subscribed');
      this.opts.moved(p.connId);
    }
    this.schedule(p, Math.floor(p.lifetimeMs * 0.75));
  }

  private schedule(p: CovPoint, delayMs: number): void {
    clearTimeout(p.timer);
    p.timer = setTimeout(() => this.due(p), delayMs);
    p.timer.unref();
  }

  /** A renewal is due: unless the device fell silent for longer than the lifetime. */
  private due(p: CovPoint): void {
    p.timer = undefined;
    if (p.state === 'removed') return;
    if (p.state === 'polled') {
      void this.subscribe(p);
      return;
    }
    const silent = this.opts.clock.monotonic() - p.lastHeard;
    if (silent > p.lifetimeMs) {
      this.fallBack(p, `no notification for ${Math.round(silent / 1000)} s, longer than the subscription lifetime (${Math.round(p.lifetimeMs / 1000)} s)`);
      return;
    }
    void this.subscribe(p);
  }

  private fallBack(p: CovPoint, why: string): void {
    const wasPushed = p.state === 'pushed';
    p.state = 'polled';
    const retryMs = Math.min(5 * 60_000, Math.max(5_000, p.lifetimeMs));
    this.opts.covErr(p.id, `${why}; polling until COV works again (next try in ${Math.round(retryMs / 1000)} s)`);
    this.opts.log.warn({ pointId: p.id, why }, 'COV failed; polling instead');
    if (wasPushed) this.opts.moved(p.connId);
    this.schedule(p, retryMs);
  }

  private notified(prepared: PreparedPoint, read: PointRead): void {
    const p = this.byPrepared.get(prepared);
    if (p === undefined || p.state === 'removed') return;
    p.lastHeard = this.opts.clock.monotonic();
    // While polled, the polls are what the point shows.
    if (p.state !== 'polled') this.opts.value(p.id, read);
  }

  private restarted(cov: CovSupport): void {
    for (const p of this.points.values()) {
      if (p.cov !== cov || p.state === 'subscribing') continue;
      this.opts.log.info({ pointId: p.id }, 'device announced itself: subscribing again');
      if (p.state === 'pushed') {
        clearTimeout(p.timer);
        p.timer = undefined;
        void this.subscribe(p);
      } else this.retryNow(p);
    }
  }
}
