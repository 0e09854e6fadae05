/**
 * src/store: LevelDB (classic-level) under the data folder. Sublevels: `rec` (entities), `his`
 * (history), `auth` (secrets), `sync` (uplink cursors), `meta` (format version). Opening turns
 * LevelDB's errors into ones an operator can act on (folder locked by another process, folder
 * unreadable) and records the on-disk format version for future migrations.
 */
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { ClassicLevel } from 'classic-level';
import { ErrorCodes, HayloftError } from '../lib/errors.js';

/** The on-disk format this code writes. Bump it with a migration in `migrate()`. */
export const FORMAT_VERSION = 1;

import type { AbstractSublevel } from 'abstract-level';

export type Sublevel = AbstractSublevel<ClassicLevel<string, string>, string | Buffer | Uint8Array, string, string>;
/** A sublevel with binary keys and values (history: big-endian timestamps, compressed chunks). */
export type BinarySublevel = AbstractSublevel<ClassicLevel<string, string>, string | Buffer | Uint8Array, Uint8Array, Uint8Array>;

export class Store {
  readonly dir: string;
  readonly db: ClassicLevel<string, string>;
  readonly rec: Sublevel;
  readonly his: BinarySublevel;
  readonly auth: Sublevel;
  readonly sync: Sublevel;
  readonly meta: Sublevel;
  /** Priority arrays of writable points (write-store.ts). */
  readonly write: Sublevel;
  /** The bounded log of point writes (write-store.ts). */
  readonly audit: Sublevel;

  private constructor(dir: string, db: ClassicLevel<string, string>) {
    this.dir = dir;
    this.db = db;
    this.rec = db.sublevel<string, string>('rec', { keyEncoding: 'utf8', valueEncoding: 'utf8' });
    // Binary: history keys sort by big-endian timestamp bytes, values are compressed chunks.
    this.his = db.sublevel<Uint8Array, Uint8Array>('his', { keyEncoding: 'view', valueEncoding: 'view' });
    this.auth = db.sublevel<string, string>('auth', { keyEncoding: 'utf8', valueEncoding: 'utf8' });
    this.sync = db.sublevel<string, string>('sync', { keyEncoding: 'utf8', valueEncoding: 'utf8' });
    this.meta = db.sublevel<string, string>('meta', { keyEncoding: 'utf8', valueEncoding: 'utf8' });
    this.write = db.sublevel<string, string>('write', { keyEncoding: 'utf8', valueEncoding: 'utf8' });
    this.audit = db.sublevel<string, string>('audit', { keyEncoding: 'utf8', valueEncoding: 'utf8' });
  }

  /**
   * Opens (creating when new) the store in `dataDir`. `cacheBytes` and `writeBufferBytes` size
   * LevelDB's block cache and memtable (config storeCacheBytes, storeWriteBufferBytes); LevelDB's
   * defaults (8 and 4 MiB) when not given.
   */
  static async open(dataDir: string, sizes: { cacheBytes?: number; writeBufferBytes?: number } = {}): Promise<Store> {
    const dir = path.resolve(dataDir);
    try {
      mkdirSync(dir, { recursive: true, mode: 0o700 });
    } catch (e) {
      throw new HayloftError(ErrorCodes.STORE_UNAVAILABLE, `cannot create the data folder ${dir}: ${(e as Error).message}`, { cause: e });
    }
    const db = new ClassicLevel<string, string>(path.join(dir, 'db'), {
      keyEncoding: 'utf8',
      valueEncoding: 'utf8',
      ...(sizes.cacheBytes === undefined ? {} : { cacheSize: sizes.cacheBytes }),
      ...(sizes.writeBufferBytes === undefined ? {} : { writeBufferSize: sizes.writeBufferBytes }),
    });
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
      throw new HayloftError(ErrorCodes.STORE_UNAVAILABLE, `cannot open the database in ${dir}: ${cause?.message ?? (e as Error).message}`, { cause: e });
    }
    const store = new Store(dir, db);
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
  }

  async formatVersion(): Promise<number> {
    return Number(await this.meta.get('formatVersion'));
  }

  async close(): Promise<void> {
    if (this.db.status === 'open' || this.db.status === 'opening') await this.db.close();
  }
}
