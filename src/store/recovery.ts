/**
 * The store as a part (docs/configuration.md "Disk space"): it closes LevelDB last, reports the
 * store's health and size, and recovers from a failed write by itself. LevelDB's I/O error is
 * sticky (every write fails after one failed, until the database is reopened), so after a write
 * failed (store/db.ts `writeFailed`) this part reopens the database as soon as the disk has room
 * for it: no restart, nothing acknowledged lost (acknowledged writes were synced, LevelDB replays
 * its log). While the disk stays full, health says so and systemd's watchdog is still fed (a
 * restart would not make room); only when reopening keeps failing with room on the disk does
 * health say a restart would help.
 */
import type { Logger } from '../lib/log.js';
import { readFileSync } from 'node:fs';
import type { Metrics } from '../lib/metrics.js';
import type { Part, PartHealth } from '../lib/part.js';
import { storeSizeBytes } from './backup.js';
import type { Store } from './db.js';
import type { DiskSpace } from './space.js';

const MIB = 1024 * 1024;
/** Reopen attempts that failed with room on the disk before a restart is thought to help. */
const ATTEMPTS_BEFORE_RESTART = 3;

export interface StoreKeeperOptions {
  store: Store;
  space: DiskSpace;
  log: Logger;
  /** LevelDB's write buffer (config storeWriteBufferBytes): a reopen may write a memtable out. */
  writeBufferBytes: number;
  /** Reads again, on the reopened store, what parts keep in memory of the disk (history metadata). */
  reload: () => Promise<void>;
  /** How often a failed store is looked at (ms); 2 s by default. */
  retryMs?: number;
}

/** /proc/self/io's write_bytes: what reached the block layer (0 where Linux's I/O accounting is missing). */
function procWriteBytes(): number {
  try {
    const m = /^write_bytes:\s*(\d+)$/m.exec(readFileSync('/proc/self/io', 'utf8'));
    return m === null ? 0 : Number(m[1]);
  } catch {
    return 0;
  }
}

export class StoreKeeper implements Part {
  readonly name = 'store';
  private readonly o: StoreKeeperOptions;
  private timer: NodeJS.Timeout | undefined;
  private busy = false;
  /** Reopens that failed although the disk had room, since the store last worked. */
  private failedWithRoom = 0;
  private lastLogged = '';

  constructor(o: StoreKeeperOptions) {
    this.o = o;
  }

  start(): void {
    if (this.timer !== undefined) return;
    this.timer = setInterval(() => void this.check(), this.o.retryMs ?? 2000);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
    await this.o.store.close();
  }

  metrics(m: Metrics): void {
    const { store } = this.o;
    m.gauge('hayloft_store_size_bytes', 'Bytes the LevelDB store takes on disk', [], () => storeSizeBytes(store));
    m.gauge('hayloft_store_open', '1 while the store takes writes, 0 while a failed write has suspended them until it reopens', [], () => (store.state === 'open' ? 1 : 0));
    m.counter('hayloft_store_write_failures_total', 'Writes LevelDB failed (out of space, I/O errors) since start', () => store.writeFailures);
    m.counter('hayloft_store_reopens_total', 'Times the store reopened LevelDB after a failed write, since start', () => store.reopens);
    // Flash wear: what reaches the card, and how much of it LevelDB's compactions rewrite.
    m.counter('hayloft_store_compaction_write_bytes_total', 'Bytes LevelDB compactions wrote since the store was opened', () => store.compactionStats().writeBytes);
    m.counter('hayloft_store_compaction_read_bytes_total', 'Bytes LevelDB compactions read since the store was opened', () => store.compactionStats().readBytes);
    m.counter('hayloft_process_disk_write_bytes_total', 'Bytes this process sent to the block device since start (/proc/self/io write_bytes; 0 where not available)', () => procWriteBytes());
  }

  /** Room a reopen needs: LevelDB writes its memtable out, a new log and a new manifest. */
  private get room(): number {
    return 2 * this.o.writeBufferBytes + MIB;
  }

  async health(): Promise<PartHealth> {
    const { store } = this.o;
    const h: PartHealth = { ok: false, status: store.state };
    if (store.state === 'open') {
      try {
        h.formatVersion = await store.formatVersion();
        h.sizeBytes = storeSizeBytes(store);
        h.ok = true;
      } catch {
        // The details go to the log of whatever failed; an unauthenticated answer says only this.
        h.status = 'unreadable';
      }
    } else if (store.state === 'failed' || store.state === 'reopening') {
      h.error = `writes suspended after a failed write (${store.lastFailure?.message ?? 'reopening'}); the store reopens by itself once the disk has room`;
      h.restartHelps = this.failedWithRoom >= ATTEMPTS_BEFORE_RESTART;
    }
    return h;
  }

  /** After a failed write: reopens the store when the disk has room for it. */
  async check(): Promise<void> {
    const { store, space, log } = this.o;
    if (store.state !== 'failed' || this.busy) return;
    this.busy = true;
    try {
      await space.refresh();
      const free = space.freeBytes();
      if (free !== undefined && free < this.room) {
        this.say('warn', { freeBytes: free, neededBytes: this.room }, 'store writes suspended after a failed write: waiting for room on the disk to reopen it');
        return;
      }
      try {
        await store.reopen(this.o.reload);
      } catch (err) {
        this.failedWithRoom++;
        this.say('error', { err, attempts: this.failedWithRoom }, 'cannot reopen the store; retrying');
        return;
      }
      this.failedWithRoom = 0;
      this.lastLogged = '';
      log.warn({ reopens: store.reopens }, 'store reopened after a failed write: writes go on');
    } finally {
      this.busy = false;
    }
  }

  /** One line per state of the recovery, not one per attempt. */
  private say(level: 'warn' | 'error', fields: Record<string, unknown>, msg: string): void {
    if (this.lastLogged === msg) return;
    this.lastLogged = msg;
    this.o.log[level]({ ...fields, cause: this.o.store.lastFailure?.message }, msg);
  }
}
