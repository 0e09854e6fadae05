/**
 * The free-space floor of the data folder's file system (config historyMinFreeBytes; docs/
 * configuration.md "Disk space"). History is what fills a card: below the floor, history writes
 * (hisWrite and polled samples) are refused with HL_STORAGE_FULL before LevelDB itself runs out
 * of space, and what stays free serves the small writes that must go on (logins, records, point
 * writes, watches) and LevelDB's compactions.
 *
 * The check is a comparison with a figure in memory: `fs.statfs` of the data folder runs on a
 * timer, after every MiB (estimated) history wrote, as soon as the last reading less what was
 * written since falls below the floor, and, while refused, at most once a second when a write asks
 * (so freed space is seen at the next attempt). Only readings decide: LevelDB frees room on its
 * own (a log dropped once its memtable is written out), which no estimate knows.
 * History resumes once the free space is back above the floor by a margin (1/16 of it, 32 MiB at
 * most), so a disk at the edge does not flap on every cycle; each change is logged once.
 */
import { statfs, statfsSync } from 'node:fs';
import { ErrorCodes, HayloftError } from '../lib/errors.js';
import type { Logger } from '../lib/log.js';
import type { Metrics } from '../lib/metrics.js';
import type { Part, PartHealth } from '../lib/part.js';

const MIB = 1024 * 1024;
/** A reading after this many bytes written since the last one. */
const REFRESH_AFTER_BYTES = MIB;
/** While refused, a write may ask for a new reading this often. */
const REFUSED_REFRESH_MS = 1000;

/** Bytes free to an unprivileged process (what the service user may still use) and in all. */
export interface SpaceReading {
  free: number;
  total: number;
}

export type StatFs = (dir: string) => Promise<SpaceReading>;

export const statFs: StatFs = (dir) =>
  new Promise((resolve, reject) => {
    statfs(dir, (err, s) => (err === null ? resolve({ free: s.bavail * s.bsize, total: s.blocks * s.bsize }) : reject(err)));
  });

export interface DiskSpaceOptions {
  /** The data folder. */
  dir: string;
  /** config historyMinFreeBytes; 0 turns the floor off (the free space is still reported). */
  floorBytes: number;
  log: Logger;
  /** How often the free space is read without writes asking (ms); 5 s by default. */
  refreshMs?: number;
  statfs?: StatFs;
  /** Milliseconds of a monotonic clock (tests). */
  now?: () => number;
}

export class DiskSpace implements Part {
  readonly name = 'disk';
  readonly floorBytes: number;
  private readonly dir: string;
  private readonly log: Logger;
  private readonly refreshMs: number;
  private readonly statfs: StatFs;
  private readonly now: () => number;
  private reading: SpaceReading | null = null;
  private readAt = -Infinity;
  /** Estimated bytes written since the last reading. */
  private written = 0;
  private refused = false;
  private pending: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private statWarned = false;

  constructor(o: DiskSpaceOptions) {
    this.dir = o.dir;
    this.floorBytes = o.floorBytes;
    this.log = o.log;
    this.refreshMs = o.refreshMs ?? 5000;
    this.statfs = o.statfs ?? statFs;
    this.now = o.now ?? (() => performance.now());
  }

  start(): void {
    if (this.timer !== undefined) return;
    if (this.statfs === statFs) {
      // The first reading before anything writes, so a start on a full disk refuses at once.
      try {
        const s = statfsSync(this.dir);
        this.take({ free: s.bavail * s.bsize, total: s.blocks * s.bsize });
      } catch (err) {
        this.statFailed(err);
      }
    } else void this.refresh();
    this.timer = setInterval(() => void this.refresh(), this.refreshMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
  }

  metrics(m: Metrics): void {
    m.gauge('hayloft_disk_free_bytes', "Bytes free on the data folder's file system (to the service user), as last read", [], () => this.reading?.free ?? 0);
    m.gauge('hayloft_disk_size_bytes', "Size of the data folder's file system in bytes", [], () => this.reading?.total ?? 0);
    m.gauge('hayloft_disk_floor_bytes', 'Free bytes kept: below them history writes are refused (config historyMinFreeBytes)', [], () => this.floorBytes);
    m.gauge('hayloft_history_refused', '1 while history writes are refused for lack of free space, else 0', [], () => (this.refused ? 1 : 0));
  }

  health(): PartHealth {
    const free = this.freeBytes();
    return {
      ok: true,
      ...(this.refused ? { degraded: `${ErrorCodes.STORAGE_FULL}: history writes are refused, ${mib(free ?? 0)} free on the data folder's disk (the floor is ${mib(this.floorBytes)}, historyMinFreeBytes)` } : {}),
      historyRefused: this.refused,
      ...(free === undefined ? {} : { freeBytes: free }),
      floorBytes: this.floorBytes,
    };
  }

  /** The free bytes as last read; undefined before any reading. */
  freeBytes(): number | undefined {
    return this.reading?.free;
  }

  /** True while history writes are refused. */
  get historyRefused(): boolean {
    return this.refused;
  }

  /** Throws HL_STORAGE_FULL while history writes are refused (a quick check, no I/O). */
  checkHistory(): void {
    if (!this.refused) return;
    if (this.now() - this.readAt >= REFUSED_REFRESH_MS) void this.refresh();
    throw new HayloftError(
      ErrorCodes.STORAGE_FULL,
      `history is not stored: the data folder's disk has ${mib(this.freeBytes() ?? 0)} free, below the ${mib(this.floorBytes)} kept for logins, records and point writes (historyMinFreeBytes); free space (or apply retention) and retry`,
    );
  }

  /** Bytes (estimated) history just wrote: a new reading after a MiB, or when near the floor. */
  wrote(bytes: number): void {
    this.written += bytes;
    const near = this.reading !== null && this.floorBytes > 0 && this.reading.free - this.written < this.floorBytes;
    if (near || this.written >= REFRESH_AFTER_BYTES) void this.refresh();
  }

  /** Reads the free space now (one reading at a time). */
  refresh(): Promise<void> {
    this.pending ??= this.statfs(this.dir)
      .then(
        (r) => this.take(r),
        (err: unknown) => this.statFailed(err),
      )
      .finally(() => {
        this.pending = undefined;
      });
    return this.pending;
  }

  private take(r: SpaceReading): void {
    this.reading = r;
    this.readAt = this.now();
    this.written = 0;
    this.statWarned = false;
    this.judge();
  }

  private statFailed(err: unknown): void {
    // Without a reading the floor cannot be judged: history goes on as it was, said once.
    if (this.statWarned) return;
    this.statWarned = true;
    this.log.warn({ err, dir: this.dir }, "cannot read the free space of the data folder's disk");
  }

  private judge(): void {
    const free = this.freeBytes();
    if (free === undefined || this.floorBytes === 0) {
      this.setRefused(false, free);
      return;
    }
    if (this.refused) {
      if (free >= this.floorBytes + Math.min(Math.floor(this.floorBytes / 16), 32 * MIB)) this.setRefused(false, free);
    } else if (free < this.floorBytes) this.setRefused(true, free);
  }

  private setRefused(refused: boolean, free: number | undefined): void {
    if (refused === this.refused) return;
    this.refused = refused;
    if (refused) {
      this.log.error(
        { freeBytes: free, floorBytes: this.floorBytes, dir: this.dir, code: ErrorCodes.STORAGE_FULL },
        "history writes refused: the data folder's disk is below its free-space floor (historyMinFreeBytes); logins, records and point writes go on; refused samples are counted in hayloft_history_refused_samples_total",
      );
    } else {
      this.log.warn({ freeBytes: free, floorBytes: this.floorBytes, dir: this.dir }, "history writes resumed: the data folder's disk has room again");
    }
  }
}

function mib(bytes: number): string {
  return `${(bytes / MIB).toFixed(2)} MiB`;
}
