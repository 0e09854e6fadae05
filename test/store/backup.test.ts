/**
 * Backup and restore of the store: a backup taken while history batches are being committed is
 * one consistent snapshot (each batch whole or absent, across sublevels), and restore refuses
 * anything but a complete, intact backup, and any data folder that is not empty.
 */
import { createReadStream, existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { gunzipSync, gzipSync } from 'node:zlib';
import t from 'tap';
import { ErrorCodes, HayloftError } from '../../src/lib/errors.js';
import { backupLines, backupStream, readBackup, restoreBackup } from '../../src/store/backup.js';
import { FORMAT_VERSION, Store } from '../../src/store/db.js';
import { HistoryStore } from '../../src/store/history.js';
import { tempDir } from '../helpers/tmp.js';

const INFO = { productVersion: '9.9.9', now: Date.UTC(2026, 0, 1) };

async function collect(r: Readable): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const c of r) parts.push(c as Buffer);
  return Buffer.concat(parts);
}

async function codeOf(p: Promise<unknown>): Promise<string | undefined> {
  try {
    await p;
  } catch (e) {
    return e instanceof HayloftError ? e.code : `not a HayloftError: ${String(e)}`;
  }
  return undefined;
}

t.test('a backup while history batches commit holds each batch whole', async (t) => {
  const dir = tempDir(t);
  const store = await Store.open(dir);
  t.teardown(() => store.close());
  const his = new HistoryStore(store, { chunkSize: 64 });
  await his.start();
  await store.db.batch().put('r1', 'record one', { sublevel: store.rec }).put('u1', 'secret hash', { sublevel: store.auth }).write();

  // Each batch writes K samples to each of two points, in one LevelDB batch (writeMany).
  const K = 10;
  let next = 0;
  const writeBatch = async (): Promise<void> => {
    const base = next;
    next += K;
    const samples = Array.from({ length: K }, (_, i) => ({ ts: (base + i) * 1000, val: base + i }));
    await his.writeMany([
      { pointId: 'a', kind: 'Number', samples },
      { pointId: 'b', kind: 'Number', samples },
    ]);
  };
  for (let i = 0; i < 20; i++) await writeBatch();

  // Read the backup slowly, committing batches between chunks: they must not show up in it.
  let stop = false;
  let during = 0;
  const writer = (async () => {
    while (!stop) {
      await writeBatch();
      during++;
    }
  })();
  const lines: string[] = [];
  for await (const chunk of backupLines(store, INFO)) {
    lines.push(chunk);
    await new Promise((r) => setTimeout(r, 5));
  }
  await new Promise((r) => setTimeout(r, 30));
  stop = true;
  await writer;
  t.ok(during > 0, `batches were committed while the backup was read (${during})`);
  const file = path.join(dir, '..', `${path.basename(dir)}.backup.gz`);
  writeFileSync(file, gzipSync(lines.join('')));
  t.teardown(() => rmSync(file, { force: true }));

  const target = path.join(tempDir(t), 'restored');
  const summary = await restoreBackup(target, createReadStream(file));
  t.equal(summary.header.productVersion, '9.9.9');
  t.equal(summary.header.storeFormat, FORMAT_VERSION);
  t.same(readdirSync(target), ['db'], 'only the database: no signing key, no staging folder');

  const back = await Store.open(target);
  t.teardown(() => back.close());
  t.equal(await back.rec.get('r1'), 'record one', 'records');
  t.equal(await back.auth.get('u1'), 'secret hash', 'auth');
  t.equal(await back.formatVersion(), FORMAT_VERSION, 'meta');
  const h = new HistoryStore(back, { chunkSize: 64 });
  await h.start();
  const a = h.stats('a').size;
  const b = h.stats('b').size;
  t.equal(a, b, 'both points of every batch, or neither');
  t.equal(a % K, 0, 'no half batch');
  t.ok(a >= 20 * K, 'every batch before the backup');
  t.ok(a < next, 'not the batches after it started');
  const cols = await h.read('a');
  t.same(Array.from(cols.ts), Array.from({ length: a }, (_, i) => i * 1000), 'the samples themselves, in order');
  await h.stop();
});

t.test('restore refuses what is not a complete, intact backup, and leaves the folder empty', async (t) => {
  const dir = tempDir(t);
  const store = await Store.open(path.join(dir, 'src'));
  for (let i = 0; i < 50; i++) await store.rec.put(`r${i}`, 'x'.repeat(100));
  const good = await collect(backupStream(store, INFO));
  await store.close();
  const text = gunzipSync(good).toString('utf8');
  const lines = text.trimEnd().split('\n');
  t.equal(lines.length, 1 + 51 + 1, 'header, 50 records and the format version, trailer');

  const cases: [string, Buffer, RegExp][] = [
    ['not gzip', Buffer.from('hello'), /not a Hayloft backup \(not gzip data\)/],
    ['gzip of something else', gzipSync('{"hello":1}\n'), /not a Hayloft backup \(no header line\)/],
    ['empty', gzipSync(''), /the file is empty/],
    ['cut off (gzip stream truncated)', good.subarray(0, Math.floor(good.length / 2)), /truncated/],
    ['cut off at a line (no end line)', gzipSync(lines.slice(0, 20).join('\n') + '\n'), /without its end line: it is truncated/],
    ['an entry changed', gzipSync(text.replace(lines[5] as string, `["${Buffer.from('!rec!evil').toString('base64')}","eA=="]`)), /checksum does not match/],
    ['an entry dropped', gzipSync([...lines.slice(0, 5), ...lines.slice(6)].join('\n') + '\n'), /says it holds 51 entries but has 50/],
    ['a damaged line', gzipSync(text.replace(lines[7] as string, '["abc"')), /line 8 is not an entry/],
    ['data after the end', gzipSync(text + lines[3] + '\n'), /data after the end/],
    ['a newer store format', gzipSync(text.replace(`"storeFormat":${FORMAT_VERSION}`, '"storeFormat":99')), /newer Hayloft/],
    ['another backup format', gzipSync(text.replace('"version":1', '"version":2')), /format 2; this Hayloft reads format 1/],
  ];
  for (const [name, bytes, message] of cases) {
    const target = path.join(dir, `t-${name.replace(/\W+/g, '-')}`);
    let err: unknown;
    try {
      await restoreBackup(target, Readable.from([bytes]));
    } catch (e) {
      err = e;
    }
    t.ok(err instanceof HayloftError && err.code === ErrorCodes.BAD_BACKUP, `${name}: HL_BAD_BACKUP (${String(err)})`);
    t.match((err as Error).message, message, name);
    t.same(readdirSync(target), [], `${name}: nothing left behind`);
  }
  t.equal((await readBackup(Readable.from([good]))).entries, 51, 'the good one reads');
});

t.test('restore only into an empty or new data folder', async (t) => {
  const dir = tempDir(t);
  const store = await Store.open(path.join(dir, 'live'));
  await store.rec.put('r', 'v');
  const good = await collect(backupStream(store, INFO));
  t.equal(await codeOf(restoreBackup(path.join(dir, 'live'), Readable.from([good]))), ErrorCodes.RESTORE_NOT_EMPTY, 'the live folder');
  await store.close();
  writeFileSync(path.join(dir, 'stray.txt'), 'x');
  let message = '';
  try {
    await restoreBackup(dir, Readable.from([good]));
  } catch (e) {
    message = (e as Error).message;
  }
  t.match(message, /is not empty \(live, stray\.txt\): a restore goes only into an empty or new folder/);
  t.equal(readFileSync(path.join(dir, 'stray.txt'), 'utf8'), 'x', 'untouched');
  const empty = tempDir(t);
  t.equal((await restoreBackup(empty, Readable.from([good]))).entries, 2, 'an existing empty folder');
  t.ok(existsSync(path.join(empty, 'db')));
});
