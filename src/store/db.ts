/**
 * src/store: LevelDB (classic-level) under the data folder. Sublevels: `rec` (entities), `his`
 * (history), `roll` (15-minute rollups of history past retention, rollups.ts), `auth` (secrets),
 * `sync` (uplink cursors), `meta` (format version). Opening turns
 * LevelDB's errors into ones an operator can act on (folder locked by another process, folder
 * unreadable) and records the on-disk format version for future migrations.
 *
 * Every write passes the store (`guardWrites`): a write that fails in LevelDB (out of space, an
 * I/O error) puts the store in `failed`, and `reopen` closes and opens LevelDB again once there
 * is room (store/recovery.ts). Parts reach the database and its sublevels through the store's
 * getters on each use, so a reopen leaves no stale handle.
 */
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { ClassicLevel } from 'classic-level';
import { ErrorCodes, HayloftError, isHayloftError } from '../lib/errors.js';

/** The on-disk format this code writes. Bump it with a migration in `migrate()`. */
export const FORMAT_VERSION = 2;

import type { AbstractSublevel } from 'abstract-level';

export type Sublevel = AbstractSublevel<ClassicLevel<string, string>, string | Buffer | Uint8Array, string, string>;
/** A sublevel with binary keys and values (history: big-endian timestamps, compressed chunks). */
export type BinarySublevel = AbstractSublevel<ClassicLevel<string, string>, string | Buffer | Uint8Array, Uint8Array, Uint8Array>;

/** LevelDB's writer methods (abstract-level's implementation interface), which every write reaches. */
interface LevelWriters {
  _put(key: unknown, value: unknown, options: unknown): Promise<void>;
  _del(key: unknown, options: unknown): Promise<void>;
  _batch(ops: unknown, options: unknown): Promise<void>;
  _clear(options: unknown): Promise<void>;
  _chainedBatch(): { _write(options: unknown): Promise<void> };
}

/**
 * Where the store is (docs/configuration.md "Disk space"): `open`; `failed` after a write failed
 * (LevelDB's I/O error is sticky: every later write fails until the database is reopened), writes
 * refused until `reopen` succeeds, reads still served; `reopening` while closed and opened again;
 * `closed` once stopped.
 */
export type StoreState = 'open' | 'failed' | 'reopening' | 'closed';

export interface StoreSizes {
  cacheBytes?: number;
  writeBufferBytes?: number;
  /** LevelDB's max_open_files: at most this many less 10 sorted tables are open (and mapped) at once. */
  openFiles?: number;
  /** LevelDB's max_file_size: the size of the sorted tables compactions write. */
  fileBytes?: number;
}

export class Store {
  readonly dir: string;
  private readonly sizes: StoreSizes;
  private handle!: ClassicLevel<string, string>;
  private subs!: Sublevels;
  private stateNow: StoreState = 'open';
  /** The write error that put the store in `failed`, until a reopen succeeds. */
  private failure: Error | null = null;
  /** Bumped by each successful reopen: what was read from the old handle may be stale. */
  generation = 0;
  /** Writes that failed since start (each puts the store in `failed`), for metrics. */
  writeFailures = 0;
  /** Successful reopens since start, for metrics. */
  reopens = 0;

  private constructor(dir: string, sizes: StoreSizes, db: ClassicLevel<string, string>) {
    this.dir = dir;
    this.sizes = sizes;
    this.attach(db);
  }

  // The handle and its sublevels are read through these getters on every use, never kept by the
  // parts: a reopen swaps them all at once and leaves no stale handle behind.
  get db(): ClassicLevel<string, string> {
    return this.handle;
  }
  get rec(): Sublevel {
    return this.subs.rec;
  }
  get his(): BinarySublevel {
    return this.subs.his;
  }
  /** 15-minute rollups of history whose raw samples retention removed (rollups.ts). */
  get roll(): BinarySublevel {
    return this.subs.roll;
  }
  get auth(): Sublevel {
    return this.subs.auth;
  }
  get sync(): Sublevel {
    return this.subs.sync;
  }
  get meta(): Sublevel {
    return this.subs.meta;
  }
  /** Priority arrays of writable points (write-store.ts). */
  get write(): Sublevel {
    return this.subs.write;
  }
  /** The bounded log of point writes (write-store.ts). */
  get audit(): Sublevel {
    return this.subs.audit;
  }
  /** Alarms not yet closed, by condition and source (alarm/alarm-store.ts). */
  get alarm(): Sublevel {
    return this.subs.alarm;
  }
  /** The bounded log of alarm transitions (alarm/alarm-store.ts). */
  get alarmLog(): Sublevel {
    return this.subs.alarmLog;
  }
  /** Per notification route, the last alarm log entry its receiver took (alarm/notifier.ts). */
  get alarmCursor(): Sublevel {
    return this.subs.alarmCursor;
  }

  get state(): StoreState {
    return this.stateNow;
  }

  /** The write error behind `failed` (null when open). */
  get lastFailure(): Error | null {
    return this.failure;
  }

  private attach(db: ClassicLevel<string, string>): void {
    guardWrites(db, this);
    this.handle = db;
    this.subs = {
      rec: db.sublevel<string, string>('rec', { keyEncoding: 'utf8', valueEncoding: 'utf8' }),
      // Binary: history keys sort by big-endian timestamp bytes, values are compressed chunks.
      his: db.sublevel<Uint8Array, Uint8Array>('his', { keyEncoding: 'view', valueEncoding: 'view' }),
      roll: db.sublevel<Uint8Array, Uint8Array>('roll', { keyEncoding: 'view', valueEncoding: 'view' }),
      auth: db.sublevel<string, string>('auth', { keyEncoding: 'utf8', valueEncoding: 'utf8' }),
      sync: db.sublevel<string, string>('sync', { keyEncoding: 'utf8', valueEncoding: 'utf8' }),
      meta: db.sublevel<string, string>('meta', { keyEncoding: 'utf8', valueEncoding: 'utf8' }),
      write: db.sublevel<string, string>('write', { keyEncoding: 'utf8', valueEncoding: 'utf8' }),
      audit: db.sublevel<string, string>('audit', { keyEncoding: 'utf8', valueEncoding: 'utf8' }),
      alarm: db.sublevel<string, string>('alarm', { keyEncoding: 'utf8', valueEncoding: 'utf8' }),
      alarmLog: db.sublevel<string, string>('alarmLog', { keyEncoding: 'utf8', valueEncoding: 'utf8' }),
      alarmCursor: db.sublevel<string, string>('alarmCursor', { keyEncoding: 'utf8', valueEncoding: 'utf8' }),
    };
  }

  /** Called before each write reaches LevelDB: refused while the store is not open. */
  beforeWrite(): void {
    if (this.stateNow === 'open') return;
    if (this.stateNow === 'closed') throw new HayloftError(ErrorCodes.STORE_UNAVAILABLE, 'the store is closed');
    throw new HayloftError(
      ErrorCodes.STORE_UNAVAILABLE,
      `writes are suspended: the store could not write (${this.failure?.message ?? 'reopening'}); it reopens by itself once the disk has room again`,
    );
  }

  /**
   * A write that reached LevelDB failed (out of space, an I/O error): from here LevelDB may refuse
   * every write (its error is sticky) and its log may end in a torn record, so no write goes to
   * this handle any more; the store waits for `reopen` (store/recovery.ts decides when).
   */
  writeFailed(err: unknown): unknown {
    if (isHayloftError(err)) return err;
    this.writeFailures++;
    if (this.stateNow === 'open') {
      this.stateNow = 'failed';
      this.failure = err as Error;
    }
    return new HayloftError(ErrorCodes.STORE_UNAVAILABLE, `the store could not write: ${(err as Error).message}`, { cause: err });
  }

  /**
   * Closes LevelDB and opens it again on the same folder: LevelDB replays its log, so every write
   * it acknowledged (synced before the answer) is there; a write that failed is not (its torn
   * record is dropped at the end of the log). Throws when the open fails (still no room); the
   * store then stays in `failed` with its handle closed until the next attempt. `reload` runs on
   * the new handle before writes are let through: parts holding what they read from disk in memory
   * read it again (history's point metadata), so memory matches the disk.
   */
  async reopen(reload?: () => Promise<void>): Promise<void> {
    if (this.stateNow === 'closed') throw new HayloftError(ErrorCodes.STORE_UNAVAILABLE, 'the store is closed');
    this.stateNow = 'reopening';
    try {
      if (this.handle.status === 'open' || this.handle.status === 'opening') await this.handle.close();
      const db = openLevel(this.dir, this.sizes);
      await db.open();
      this.attach(db);
      await reload?.();
    } catch (e) {
      if (this.stateNow === 'reopening') this.stateNow = 'failed';
      throw new HayloftError(ErrorCodes.STORE_UNAVAILABLE, `cannot reopen the database in ${this.dir}: ${levelMessage(e)}`, { cause: e });
    }
    this.generation++;
    this.reopens++;
    this.failure = null;
    this.stateNow = 'open';
  }

  /**
   * Opens (creating when new) the store in `dataDir`. `cacheBytes` and `writeBufferBytes` size
   * LevelDB's block cache and memtable (config storeCacheBytes, storeWriteBufferBytes), `openFiles`
   * and `fileBytes` bound its open tables (storeOpenFiles, storeFileBytes); LevelDB's defaults (8
   * and 4 MiB, 1,000 files, 2 MiB) for what is not given.
   */
  static async open(dataDir: string, sizes: StoreSizes = {}): Promise<Store> {
    const dir = path.resolve(dataDir);
    try {
      mkdirSync(dir, { recursive: true, mode: 0o700 });
    } catch (e) {
      throw new HayloftError(ErrorCodes.STORE_UNAVAILABLE, `cannot create the data folder ${dir}: ${(e as Error).message}`, { cause: e });
    }
    const db = openLevel(dir, sizes);
    try {
      await db.open();
    } catch (e) {
      const cause = (e as { cause?: { code?: string; message?: string } }).cause;
      if (cause?.code === 'LEVEL_LOCKED') {
        throw new HayloftError(
          ErrorCodes.STORE_LOCKED,
          `the data folder ${dir} is in use by another process (is Hayloft already running?); stop it or choose another data folder (HAYLOFT_DATA_DIR)`,
          { cause: e },
        );
      }
      throw new HayloftError(ErrorCodes.STORE_UNAVAILABLE, `cannot open the database in ${dir}: ${levelMessage(e)}`, { cause: e });
    }
    const store = new Store(dir, sizes, db);
    try {
      await store.migrate();
    } catch (e) {
      await db.close();
      throw e;
    }
    return store;
  }

  /** Records the format version on a new store; refuses a store from a newer Hayloft. */
  private async migrate(): Promise<void> {
    const raw = await this.meta.get('formatVersion');
    if (raw === undefined) {
      await this.db.batch().put('formatVersion', String(FORMAT_VERSION), { sublevel: this.meta }).write({ sync: true } as object);
      return;
    }
    const v = Number(raw);
    if (!Number.isInteger(v) || v < 1) {
      throw new HayloftError(ErrorCodes.STORE_UNAVAILABLE, `the data folder ${this.dir} has an unreadable format version ${JSON.stringify(raw)}`);
    }
    if (v > FORMAT_VERSION) {
      throw new HayloftError(
        ErrorCodes.STORE_VERSION,
        `the data folder ${this.dir} was written by a newer Hayloft (format ${v}; this version reads up to ${FORMAT_VERSION}); upgrade Hayloft or restore a backup`,
      );
    }
    // Migrations from older formats go here, each in one batch, then the version is bumped.
    // 1 -> 2: history's open tails moved from one entry per sample into journal entries, and
    // Number chunks gained the decimal codec with exceptions. The history store converts format-1
    // tail entries itself when it starts (history.ts convertV1), whatever this number says.
    if (v < FORMAT_VERSION) {
      await this.db.batch().put('formatVersion', String(FORMAT_VERSION), { sublevel: this.meta }).write({ sync: true } as object);
    }
  }

  /**
   * LevelDB's compaction work since the database was (re)opened, from its `leveldb.stats`
   * property (per level: files, size, time, MB read, MB written), summed over the levels.
   */
  compactionStats(): { readBytes: number; writeBytes: number; seconds: number } {
    const out = { readBytes: 0, writeBytes: 0, seconds: 0 };
    if (this.handle.status !== 'open') return out;
    for (const line of this.handle.getProperty('leveldb.stats').split('\n')) {
      const f = line.trim().split(/\s+/).map(Number);
      if (f.length !== 6 || f.some((x) => !Number.isFinite(x))) continue;
      out.seconds += f[3] as number;
      out.readBytes += (f[4] as number) * 1048576;
      out.writeBytes += (f[5] as number) * 1048576;
    }
    return out;
  }

  async formatVersion(): Promise<number> {
    return Number(await this.meta.get('formatVersion'));
  }

  async close(): Promise<void> {
    this.stateNow = 'closed';
    if (this.handle.status === 'open' || this.handle.status === 'opening') await this.handle.close();
  }
}

interface Sublevels {
  rec: Sublevel;
  his: BinarySublevel;
  roll: BinarySublevel;
  auth: Sublevel;
  sync: Sublevel;
  meta: Sublevel;
  write: Sublevel;
  audit: Sublevel;
  alarm: Sublevel;
  alarmLog: Sublevel;
  alarmCursor: Sublevel;
}

function openLevel(dir: string, sizes: StoreSizes): ClassicLevel<string, string> {
  return new ClassicLevel<string, string>(path.join(dir, 'db'), {
    keyEncoding: 'utf8',
    valueEncoding: 'utf8',
    ...(sizes.cacheBytes === undefined ? {} : { cacheSize: sizes.cacheBytes }),
    ...(sizes.writeBufferBytes === undefined ? {} : { writeBufferSize: sizes.writeBufferBytes }),
    ...(sizes.openFiles === undefined ? {} : { maxOpenFiles: sizes.openFiles }),
    ...(sizes.fileBytes === undefined ? {} : { maxFileSize: sizes.fileBytes }),
  });
}

function levelMessage(e: unknown): string {
  return (e as { cause?: { message?: string } }).cause?.message ?? (e as Error).message;
}

/**
 * Puts the store between every write and LevelDB: puts, deletes, batches and chained batches of
 * the database and of all its sublevels end in these four methods of the root (abstract-level's
 * implementation interface), so one place refuses writes while the store is not open and notices
 * a write that failed, whoever wrote.
 */
function guardWrites(db: ClassicLevel<string, string>, store: Store): void {
  const w = db as unknown as LevelWriters;
  const guard =
    <A extends unknown[]>(f: (...args: A) => Promise<void>) =>
    async (...args: A): Promise<void> => {
      store.beforeWrite();
      try {
        await f(...args);
      } catch (e) {
        throw store.writeFailed(e);
      }
    };
  w._put = guard(w._put.bind(w));
  w._del = guard(w._del.bind(w));
  w._batch = guard(w._batch.bind(w));
  w._clear = guard(w._clear.bind(w));
  const chained = w._chainedBatch.bind(w);
  w._chainedBatch = () => {
    const b = chained();
    b._write = guard(b._write.bind(b));
    return b;
  };
}
