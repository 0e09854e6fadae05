/**
 * Whether the wall clock can be trusted to date what is stored (docs/clock.md).
 *
 * A Raspberry Pi has no real-time clock: it boots in 1970, or at the time fake-hwclock saved at
 * the last shutdown, and NTP steps it later. A sample dated then is filed under the wrong date
 * for good, here and upstream. This part says, from three witnesses, whether the clock is right:
 *
 * - **systemd's time synchronisation flag**: `/run/systemd/timesync/synchronized` exists once
 *   systemd-timesyncd has set the clock since boot (a file test, no process per check). With
 *   `clockSync: auto` it is waited for when timesyncd runs on the host (its folder exists);
 *   `systemd` always waits for it; `none` (no NTP at the site) never does. Once the flag is up
 *   the clock is trusted whatever else says (NTP wins over a last good time that was wrong).
 * - **a floor**: the newest modification time of Hayloft's installed program (its package.json
 *   and this module: the build, or the install, whichever is later). No right clock is ever
 *   earlier. Behind it: `behind-floor`.
 * - **the last known good time**, kept in the data folder (`clock-last-good`, a few bytes,
 *   written when trusted at start and then hourly, not per sample: flash wear). A clock behind it
 *   by more than a margin (10 min) went back: `behind-last-good`.
 *
 * Every step of the wall clock against the monotonic one (beyond 2 s) is logged with its size,
 * checked on a 10 s timer and at every `trusted()` call (two clock readings), which the history
 * collector asks before it stores a sample, so a step is seen before the next sample is dated.
 * `stepped` is shown for an hour after a step, with the clock trusted.
 */
import { existsSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Clock } from './clock.js';
import { packageRoot } from './package-dir.js';
import type { Logger } from './log.js';
import type { Metrics } from './metrics.js';
import type { Part, PartHealth } from './part.js';

/** `ok`/`stepped`: trusted; the others say why not. */
export const CLOCK_STATUSES = ['ok', 'stepped', 'unsynchronised', 'behind-floor', 'behind-last-good'] as const;
export type ClockStatus = (typeof CLOCK_STATUSES)[number];
export type ClockSync = 'auto' | 'systemd' | 'none';

export const LAST_GOOD_FILE = 'clock-last-good';

/** What a part that dates what it stores asks (ClockTrust answers; absent: always trusted). */
export interface DatingTrust {
  trusted(): boolean;
}

/**
 * No sample a client writes is dated before 2000: a writer whose clock says so has not set it
 * (1970, or an RTC reset to 2000-01-01). Not the release's floor: a client backfilling last
 * year's history from an older system is right to write it (docs/clock.md).
 */
export const HIS_WRITE_FLOOR_MS = Date.UTC(2000, 0, 1);
export const DEFAULT_TIMESYNC_DIR = '/run/systemd/timesync';

export interface ClockTrustOptions {
  clock: Clock;
  log: Logger;
  /** Where the last known good time is kept (`clock-last-good`); null: nowhere (CLI, tests). */
  dataDir: string | null;
  /** `auto` (default), `systemd` or `none` (the `clockSync` setting). */
  sync?: ClockSync;
  /** Epoch ms no right clock is behind; default buildFloor(). */
  floorMs?: number;
  /** systemd-timesyncd's runtime folder (tests point it elsewhere). */
  timesyncDir?: string;
  checkEveryMs?: number;
  saveEveryMs?: number;
  /** A change of the wall clock against the monotonic one larger than this is a step. */
  stepMs?: number;
  /** How far behind the last good time the clock may be before it is distrusted. */
  marginMs?: number;
  /** Run the check on a timer (default). False: tests call check(). */
  timers?: boolean;
}

export interface ClockState {
  status: ClockStatus;
  trusted: boolean;
  /** Why not trusted (or what happened: the last step), for an operator. */
  reason: string | null;
  floor: number;
  lastGood: number | null;
  /** The last step seen: when (wall clock, after it) and by how much (ms, negative: back). */
  lastStep: { at: number; ms: number } | null;
}

/**
 * The floor: the newest modification time of the installed program (package.json at the
 * package's root, and this module's own file). `cp -R` at install gives the install time, a
 * build the build time: either is a time the clock has certainly passed.
 */
export function buildFloor(): number {
  let floor = 0;
  for (const f of [fileURLToPath(import.meta.url), join(packageRoot(), 'package.json')]) {
    try {
      floor = Math.max(floor, statSync(f).mtimeMs);
    } catch {
      // Not there (an unusual layout): the other witness, or no floor.
    }
  }
  return Math.floor(floor);
}

const HOUR = 3_600_000;

export class ClockTrust implements Part, DatingTrust {
  readonly name = 'clock';
  private readonly o: Required<Omit<ClockTrustOptions, 'dataDir' | 'floorMs'>> & { dataDir: string | null };
  readonly floor: number;
  private lastGood: number | null = null;
  private lastSavedMono = -Infinity;
  /** wall - monotonic at the last look: a change of it is a step. */
  private offset: number;
  private state: { status: ClockStatus; reason: string | null } = { status: 'ok', reason: null };
  private lastStep: { at: number; ms: number; mono: number } | null = null;
  private steps = 0;
  private timer: ReturnType<typeof setInterval> | undefined;

  constructor(opts: ClockTrustOptions) {
    this.o = {
      clock: opts.clock,
      log: opts.log,
      dataDir: opts.dataDir,
      sync: opts.sync ?? 'auto',
      timesyncDir: opts.timesyncDir ?? DEFAULT_TIMESYNC_DIR,
      checkEveryMs: opts.checkEveryMs ?? 10_000,
      saveEveryMs: opts.saveEveryMs ?? HOUR,
      stepMs: opts.stepMs ?? 2000,
      marginMs: opts.marginMs ?? 10 * 60_000,
      timers: opts.timers ?? true,
    };
    this.floor = opts.floorMs ?? buildFloor();
    this.offset = this.o.clock.now() - this.o.clock.monotonic();
    this.lastGood = this.readLastGood();
    this.evaluate();
  }

  start(): void {
    const s = this.status();
    if (s.trusted) this.o.log.info({ clockStatus: s.status, floor: new Date(this.floor).toISOString() }, 'the clock is trusted');
    else this.o.log.warn({ clockStatus: s.status, reason: s.reason }, 'the clock cannot be trusted: history is held until it is set (docs/clock.md)');
    this.save();
    if (this.o.timers && this.timer === undefined) {
      this.timer = setInterval(() => this.check(), this.o.checkEveryMs);
      this.timer.unref();
    }
  }

  stop(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
    // The time of a clean stop is a good last known time (when trusted).
    this.save(true);
  }

  /**
   * Whether samples may be dated on the wall clock now. Cheap (two clock readings); a step
   * since the last look is seen at once and the witnesses are asked again.
   */
  trusted(): boolean {
    const offset = this.o.clock.now() - this.o.clock.monotonic();
    if (Math.abs(offset - this.offset) > this.o.stepMs) this.check();
    return this.state.status === 'ok' || this.state.status === 'stepped';
  }

  /** Looks for a step, asks the witnesses again, keeps the last good time. Run by the timer. */
  check(): void {
    const now = this.o.clock.now();
    const mono = this.o.clock.monotonic();
    const offset = now - mono;
    const step = offset - this.offset;
    this.offset = offset;
    if (Math.abs(step) > this.o.stepMs) {
      this.steps++;
      this.lastStep = { at: now, ms: Math.round(step), mono };
      this.o.log.warn({ stepMs: Math.round(step), now: new Date(now).toISOString() }, `the wall clock stepped ${step > 0 ? 'forward' : 'back'} by ${formatMs(Math.abs(step))}`);
    }
    const before = this.state.status;
    const wasTrusted = this.isTrusted();
    this.evaluate();
    if (this.isTrusted() !== wasTrusted) {
      if (this.isTrusted()) this.o.log.info({ clockStatus: this.state.status }, 'the clock is trusted again: held history is written, re-dated');
      else this.o.log.warn({ clockStatus: this.state.status, reason: this.state.reason }, 'the clock cannot be trusted: history is held until it is set (docs/clock.md)');
    } else if (before !== this.state.status) this.o.log.info({ clockStatus: this.state.status, was: before }, 'clock status changed');
    this.save();
  }

  status(): ClockState {
    return {
      status: this.state.status,
      trusted: this.isTrusted(),
      reason: this.state.reason,
      floor: this.floor,
      lastGood: this.lastGood,
      lastStep: this.lastStep === null ? null : { at: this.lastStep.at, ms: this.lastStep.ms },
    };
  }

  /** Trusted or not, the daemon works (live values, polling, writes): a reason in health, not a failure. */
  health(): PartHealth {
    const s = this.status();
    return {
      ok: true,
      clockStatus: s.status,
      trusted: s.trusted,
      ...(s.reason === null ? {} : { reason: s.reason }),
      ...(s.trusted ? {} : { degraded: `clock ${s.status}: ${s.reason ?? ''}; history is held until the clock is set` }),
      ...(s.lastStep === null ? {} : { lastStep: { at: new Date(s.lastStep.at).toISOString(), ms: s.lastStep.ms } }),
    };
  }

  metrics(m: Metrics): void {
    m.gauge('hayloft_clock_trusted', 'Whether the wall clock is trusted to date what is stored (1) or not (0, history is held)', [], () => (this.isTrusted() ? 1 : 0));
    m.gauge('hayloft_clock_status', 'The clock status (1 for the current one): ok, stepped, unsynchronised, behind-floor, behind-last-good', ['status'], () =>
      CLOCK_STATUSES.map((s) => ({ labels: { status: s }, value: s === this.state.status ? 1 : 0 })),
    );
    m.counter('hayloft_clock_steps_total', 'Steps of the wall clock seen (beyond 2 s against the monotonic clock)', () => this.steps);
  }

  private isTrusted(): boolean {
    return this.state.status === 'ok' || this.state.status === 'stepped';
  }

  private evaluate(): void {
    const now = this.o.clock.now();
    const synced = this.o.sync !== 'none' && existsSync(join(this.o.timesyncDir, 'synchronized'));
    const iso = (t: number): string => new Date(t).toISOString();
    if (now < this.floor) this.state = { status: 'behind-floor', reason: `the clock (${iso(now)}) is before this release was built or installed (${iso(this.floor)})` };
    else if (synced) this.state = this.trustedState();
    else if (this.lastGood !== null && now < this.lastGood - this.o.marginMs)
      this.state = { status: 'behind-last-good', reason: `the clock (${iso(now)}) is behind the last time known good (${iso(this.lastGood)})` };
    else if (this.o.sync === 'systemd' || (this.o.sync === 'auto' && existsSync(this.o.timesyncDir)))
      this.state = { status: 'unsynchronised', reason: 'systemd-timesyncd has not synchronised the clock yet' };
    else this.state = this.trustedState();
  }

  private trustedState(): { status: ClockStatus; reason: string | null } {
    const st = this.lastStep;
    if (st !== null && this.o.clock.monotonic() - st.mono < HOUR) return { status: 'stepped', reason: `the clock stepped ${st.ms > 0 ? 'forward' : 'back'} by ${formatMs(Math.abs(st.ms))} at ${new Date(st.at).toISOString()}` };
    return { status: 'ok', reason: null };
  }

  private readLastGood(): number | null {
    if (this.o.dataDir === null) return null;
    try {
      const n = Number(readFileSync(join(this.o.dataDir, LAST_GOOD_FILE), 'utf8').trim());
      return Number.isFinite(n) && n > 0 ? n : null;
    } catch {
      return null;
    }
  }

  /** Keeps the time while trusted: at start, hourly, at stop (`force`). Written whole, then renamed. */
  private save(force = false): void {
    if (this.o.dataDir === null || !this.isTrusted()) return;
    const mono = this.o.clock.monotonic();
    if (!force && mono - this.lastSavedMono < this.o.saveEveryMs) return;
    const now = this.o.clock.now();
    const file = join(this.o.dataDir, LAST_GOOD_FILE);
    try {
      writeFileSync(`${file}.tmp`, `${now}\n`);
      renameSync(`${file}.tmp`, file);
      this.lastSavedMono = mono;
      this.lastGood = now;
    } catch (err) {
      this.o.log.warn({ err }, 'cannot keep the last known good time');
    }
  }
}

function formatMs(ms: number): string {
  if (ms < 120_000) return `${Math.round(ms / 1000)} s`;
  if (ms < 2 * HOUR) return `${Math.round(ms / 60_000)} min`;
  if (ms < 48 * HOUR) return `${Math.round(ms / HOUR)} h`;
  return `${Math.round(ms / (24 * HOUR))} days`;
}
