/**
 * A part of the daemon (docs/design/README.md "Parts and events"): a long-lived piece that starts, stops, may say how it
 * is and registers its own metrics. The app is an ordered list of parts, started in order and
 * stopped in reverse; nothing else starts or stops them.
 */
import type { Metrics } from './metrics.js';

export interface PartHealth {
  /** False makes /api/health answer 503 (and systemd's watchdog stop being fed, where it applies). */
  ok: boolean;
  /**
   * Set when the part works but not fully (history refused on a full disk): `/api/health` answers
   * `degraded` (still 200) and lists this reason, which starts with the error code concerned.
   */
  degraded?: string;
  /**
   * True when restarting the daemon would likely cure what is wrong (a store that keeps failing to
   * reopen although the disk has room): systemd's watchdog is then no longer fed. Unset or false
   * for what a restart does not fix (a full disk), so the watchdog does not restart in a loop.
   */
  restartHelps?: boolean;
  /** What a reader of /api/health sees of this part (no secrets). */
  [detail: string]: unknown;
}

/**
 * A figure a fleet's host sees of this gateway (the MQTT edge node's NBIRTH and NDATA: Sparkplug
 * datatypes), by its metric name (`Folder/Name`).
 */
export interface NodeFigure {
  type: 'String' | 'Int64' | 'Boolean' | 'Double' | 'DateTime';
  value: string | number | boolean;
}

export type NodeFigures = Record<string, NodeFigure>;

export interface Part {
  /** Names the part in logs, in /api/health and on the bus (`EventBus.describe`). */
  readonly name: string;
  start?(): Promise<void> | void;
  /** Clears its timers and leaves the bus; safe to call when start failed half-way. */
  stop?(): Promise<void> | void;
  /** Registers the part's figures; called once, before start. */
  metrics?(metrics: Metrics): void;
  health?(): PartHealth | Promise<PartHealth>;
  /**
   * What a fleet's host should see of this part (App.nodeFigures gathers them for the MQTT edge
   * node's NBIRTH and NDATA): the seam for parts to come (active alarms). Cheap: asked every
   * few seconds while an edge node runs.
   */
  nodeFigures?(): NodeFigures;
}

/** Starts parts in order, stops the started ones in reverse (also when a later start fails). */
export class Parts {
  private readonly started: Part[] = [];

  constructor(private readonly onStopError: (part: Part, err: unknown) => void) {}

  /** Starts `part` (after registering its metrics, when given); on failure, nothing more starts. */
  async start(part: Part, metrics?: Metrics): Promise<void> {
    if (metrics !== undefined) part.metrics?.(metrics);
    this.started.push(part);
    await part.start?.();
  }

  /** The parts started, in start order. */
  list(): readonly Part[] {
    return this.started;
  }

  /** Stops every started part, newest first; a part that fails to stop is reported, not fatal. */
  async stopAll(): Promise<void> {
    while (this.started.length > 0) {
      const part = this.started.pop() as Part;
      try {
        await part.stop?.();
      } catch (err) {
        this.onStopError(part, err);
      }
    }
  }
}

/**
 * Calls `fn` every `ms` until stopped, without keeping the process alive (tests, CLI commands): the
 * housekeeping timer of a part (the alarms, the schedules, the alarm notifier).
 */
export function every(ms: number, fn: () => unknown): { stop(): void } {
  const timer = setInterval(fn, ms);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
