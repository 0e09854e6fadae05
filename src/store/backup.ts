/**
 * Online backup and offline restore of the whole store.
 *
 * Consistency: one iterator over the root database reads every sublevel (they are key prefixes
 * of one LevelDB), and a LevelDB iterator reads from the implicit snapshot taken when it was
 * created. So a backup is the store as of one instant: every batch (a hisWrite, a record commit,
 * a user and its password) is in it whole or not at all, while the server keeps writing. A
 * per-sublevel iterator each would not do: each would have its own snapshot.
 *
 * The file (format 1) is gzip-compressed newline-delimited JSON:
 *
 *   {"format":"hayloft-backup","version":1,"storeFormat":2,"createdAt":"...","productVersion":"..."}
 *   ["<key, base64>","<value, base64>"]          one line per LevelDB entry, in key order; keys
 *   ...                                          are raw, sublevel prefix included (`!rec!...`)
 *   {"end":true,"entries":N,"sha256":"<hex>"}    sha256 of every entry line, newline included
 *
 * The trailer makes a truncated or damaged file fail to restore instead of restoring part of a
 * store. The token signing key (a file beside the database, not in it) is left out on purpose:
 * a backup copied around holds nothing that can mint access tokens for the device. A restored
 * device makes a new key at its first start, so access tokens issued before stop working and
 * clients log in again (or use their refresh tokens, which are in the store).
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync, statSync } from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import type * as Readline from 'node:readline';
import { Readable } from 'node:stream';
import type * as Zlib from 'node:zlib';
import { ClassicLevel } from 'classic-level';
import { ErrorCodes, HayloftError } from '../lib/errors.js';
import { FORMAT_VERSION, type Store } from './db.js';

export const BACKUP_FORMAT = 'hayloft-backup';
export const BACKUP_VERSION = 1;

export interface BackupHeader {
  format: typeof BACKUP_FORMAT;
  version: number;
  /** The store's on-disk format version (db.ts FORMAT_VERSION) when the backup was taken. */
  storeFormat: number;
  createdAt: string;
  productVersion: string;
}

export interface BackupSummary {
  header: BackupHeader;
  entries: number;
}

/** Entry lines are gathered into chunks of about this size before being handed on. */
const CHUNK_CHARS = 64 * 1024;

/** The backup as text lines (uncompressed), read from one snapshot of the whole store. */
export async function* backupLines(store: Store, info: { productVersion: string; now: number }): AsyncGenerator<string> {
  const header: BackupHeader = {
    format: BACKUP_FORMAT,
    version: BACKUP_VERSION,
    storeFormat: await store.formatVersion(),
    createdAt: new Date(info.now).toISOString(),
    productVersion: info.productVersion,
  };
  // The iterator is made before the first yield, so the snapshot is taken when the backup
  // starts, not when the reader first asks for data.
  const it = store.db.iterator<Buffer, Buffer>({ keyEncoding: 'buffer', valueEncoding: 'buffer' });
  const hash = createHash('sha256');
  let entries = 0;
  try {
    yield JSON.stringify(header) + '\n';
    let chunk = '';
    for await (const [k, v] of it) {
      const line = `["${k.toString('base64')}","${v.toString('base64')}"]\n`;
      hash.update(line);
      entries++;
      chunk += line;
      if (chunk.length >= CHUNK_CHARS) {
        yield chunk;
        chunk = '';
      }
    }
    if (chunk !== '') yield chunk;
  } finally {
    await it.close();
  }
  yield JSON.stringify({ end: true, entries, sha256: hash.digest('hex') }) + '\n';
}

/** zlib and readline, loaded by the first backup or restore: a start does not need them. */
const lazy = createRequire(import.meta.url);
const zlib = (): typeof Zlib => lazy('node:zlib') as typeof Zlib;
const readline = (): typeof Readline => lazy('node:readline') as typeof Readline;

/** The backup file's bytes (gzip), streamed with backpressure. */
export function backupStream(store: Store, info: { productVersion: string; now: number }): Readable {
  return Readable.from(backupLines(store, info)).pipe(zlib().createGzip());
}

function bad(message: string, cause?: unknown): HayloftError {
  return new HayloftError(ErrorCodes.BAD_BACKUP, message, cause === undefined ? undefined : { cause });
}

/**
 * Reads a backup file's stream (gzip), checking the header, every line and the trailer; calls
 * `onEntry` for each entry in order. Throws HL_BAD_BACKUP for anything that is not a complete,
 * intact backup this version can restore.
 */
export async function readBackup(input: Readable, onEntry?: (key: Buffer, value: Buffer) => void | Promise<void>): Promise<BackupSummary> {
  const gunzip = zlib().createGunzip();
  let streamError: unknown;
  input.on('error', (e) => {
    streamError = e;
    gunzip.destroy(e);
  });
  const lines = readline().createInterface({ input: input.pipe(gunzip), crlfDelay: Infinity });
  let header: BackupHeader | undefined;
  let trailer: { entries: number; sha256: string } | undefined;
  const hash = createHash('sha256');
  let entries = 0;
  let lineNo = 0;
  try {
    for await (const line of lines) {
      lineNo++;
      if (trailer !== undefined) throw bad(`line ${lineNo}: data after the end of the backup`);
      if (header === undefined) {
        header = parseHeader(line);
        continue;
      }
      if (line.startsWith('{')) {
        trailer = parseTrailer(line, lineNo);
        continue;
      }
      let pair: unknown;
      try {
        pair = JSON.parse(line);
      } catch {
        throw bad(`line ${lineNo} is not an entry: the file is damaged`);
      }
      if (!Array.isArray(pair) || pair.length !== 2 || typeof pair[0] !== 'string' || typeof pair[1] !== 'string') {
        throw bad(`line ${lineNo} is not an entry: the file is damaged`);
      }
      hash.update(line + '\n');
      entries++;
      if (onEntry !== undefined) await onEntry(Buffer.from(pair[0], 'base64'), Buffer.from(pair[1], 'base64'));
    }
  } catch (e) {
    if (e instanceof HayloftError) throw e;
    const code = (e as NodeJS.ErrnoException).code;
    if (streamError !== undefined && code !== 'Z_DATA_ERROR' && code !== 'Z_BUF_ERROR') throw e;
    throw bad(code === 'Z_BUF_ERROR' ? 'the backup file ends early: it is truncated' : 'the file is not a Hayloft backup (not gzip data), or it is damaged', e);
  }
  if (header === undefined) throw bad('the file is empty: not a Hayloft backup');
  if (trailer === undefined) throw bad(`the backup ends after ${entries} entries without its end line: it is truncated (was the backup interrupted?)`);
  if (trailer.entries !== entries) throw bad(`the backup says it holds ${trailer.entries} entries but has ${entries}: the file is damaged`);
  if (trailer.sha256 !== hash.digest('hex')) throw bad('the backup checksum does not match its entries: the file is damaged');
  return { header, entries };
}

function parseHeader(line: string): BackupHeader {
  let h: Partial<BackupHeader>;
  try {
    h = JSON.parse(line) as Partial<BackupHeader>;
  } catch {
    throw bad('the file is not a Hayloft backup (no header line)');
  }
  if (h === null || typeof h !== 'object' || h.format !== BACKUP_FORMAT) throw bad('the file is not a Hayloft backup (no header line)');
  if (h.version !== BACKUP_VERSION) throw bad(`the backup is in format ${String(h.version)}; this Hayloft reads format ${BACKUP_VERSION}`);
  if (typeof h.storeFormat !== 'number' || h.storeFormat > FORMAT_VERSION) {
    throw bad(`the backup holds a store of format ${String(h.storeFormat)}, written by a newer Hayloft (this one reads up to ${FORMAT_VERSION}): restore it with that version or newer`);
  }
  return h as BackupHeader;
}

function parseTrailer(line: string, lineNo: number): { entries: number; sha256: string } {
  let t: { end?: unknown; entries?: unknown; sha256?: unknown };
  try {
    t = JSON.parse(line) as typeof t;
  } catch {
    throw bad(`line ${lineNo} is not an entry: the file is damaged`);
  }
  if (t.end !== true || typeof t.entries !== 'number' || typeof t.sha256 !== 'string') throw bad(`line ${lineNo} is not an entry: the file is damaged`);
  return { entries: t.entries, sha256: t.sha256 };
}

/** Entries per LevelDB batch while restoring: bounded memory, few fsyncs. */
const RESTORE_BATCH = 2000;

/**
 * Restores a backup into `dataDir`, which must be empty or not exist. The database is written
 * beside its final place and renamed into it only once the whole file has been read and checked,
 * so a damaged or truncated backup leaves the folder as it was.
 */
export async function restoreBackup(dataDir: string, input: Readable): Promise<BackupSummary> {
  const dir = path.resolve(dataDir);
  if (existsSync(dir)) {
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch (e) {
      throw new HayloftError(ErrorCodes.STORE_UNAVAILABLE, `cannot read the data folder ${dir}: ${(e as Error).message}`, { cause: e });
    }
    if (names.length > 0) {
      throw new HayloftError(
        ErrorCodes.RESTORE_NOT_EMPTY,
        `the data folder ${dir} is not empty (${names.slice(0, 3).join(', ')}${names.length > 3 ? ', ...' : ''}): a restore goes only into an empty or new folder. Stop Hayloft, move that folder aside, and restore again`,
      );
    }
  }
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
  } catch (e) {
    throw new HayloftError(ErrorCodes.STORE_UNAVAILABLE, `cannot create the data folder ${dir}: ${(e as Error).message}`, { cause: e });
  }
  const staging = path.join(dir, 'db.restoring');
  const db = new ClassicLevel<Buffer, Buffer>(staging, { keyEncoding: 'buffer', valueEncoding: 'buffer', createIfMissing: true, errorIfExists: true });
  let ok = false;
  try {
    await db.open();
    let batch = db.batch();
    const summary = await readBackup(input, async (k, v) => {
      batch.put(k, v);
      if (batch.length >= RESTORE_BATCH) {
        await batch.write();
        batch = db.batch();
      }
    });
    if (batch.length > 0) await batch.write({ sync: true } as object);
    else await batch.close();
    await db.close();
    renameSync(staging, path.join(dir, 'db'));
    ok = true;
    return summary;
  } finally {
    if (!ok) {
      if (db.status === 'open') await db.close();
      rmSync(staging, { recursive: true, force: true });
    }
  }
}

/** Bytes the database takes on disk (LevelDB's files), for health and metrics. */
export function storeSizeBytes(store: Store): number {
  const dir = path.join(store.dir, 'db');
  let total = 0;
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return 0;
  }
  for (const n of names) {
    try {
      total += statSync(path.join(dir, n)).size;
    } catch {
      // A file removed by a compaction between readdir and stat: it no longer counts.
    }
  }
  return total;
}
