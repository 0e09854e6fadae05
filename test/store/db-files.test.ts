/**
 * The store's bound on LevelDB's open tables (config storeOpenFiles, storeFileBytes; db.ts). On a
 * 64-bit system LevelDB maps each table it holds open into the process, and what reads touch stays
 * in its resident memory: a store larger than its open tables keeps at most openFiles - 10 of them
 * mapped however much is read. Opened with LevelDB's defaults, the same folder maps every table
 * read (what the bound changes).
 */
import { randomBytes } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { Store } from '../../src/store/db.js';
import { tempDir } from '../helpers/tmp.js';

/** Tables (.ldb files) of `dir` mapped into this process. */
function mappedTables(dir: string): number {
  const files = new Set<string>();
  for (const line of readFileSync('/proc/self/maps', 'utf8').split('\n')) {
    const file = line.slice(line.indexOf('/'));
    if (file.startsWith(dir) && file.endsWith('.ldb')) files.add(file);
  }
  return files.size;
}

async function readAll(store: Store): Promise<number> {
  let n = 0;
  for await (const v of store.db.values({ gte: 'k', lt: 'l' })) n += v.length > 0 ? 1 : 0;
  return n;
}

t.test('at most openFiles - 10 tables mapped however many the store has and reads', async (t) => {
  const dir = tempDir(t);
  const db = path.join(dir, 'db');
  let store = await Store.open(dir, { openFiles: 74, fileBytes: 1024 * 1024 });
  // 80 MB that does not compress, keys spread over the whole range in every batch (so compactions
  // merge and rewrite them): about 80 tables of 1 MiB.
  const batches = 80;
  for (let b = 0; b < batches; b++) {
    const batch = store.db.batch();
    for (let i = 0; i < 64; i++) batch.put(`k${randomBytes(8).toString('hex')}`, randomBytes(12 * 1024).toString('base64'));
    await batch.write();
  }
  await store.db.compactRange('k', 'l');
  const tables = readdirSync(db).filter((f) => f.endsWith('.ldb')).length;
  t.ok(tables > 64, `the store has more tables than may be open (${tables})`);
  for (let round = 0; round < 2; round++) t.equal(await readAll(store), batches * 64, 'every value read');
  const bounded = mappedTables(db);
  t.ok(bounded > 0 && bounded <= 64, `tables mapped after reading all of them twice: ${bounded} (at most 64)`);
  await store.close();
  t.equal(mappedTables(db), 0, 'none once closed');

  store = await Store.open(dir);
  t.equal(await readAll(store), batches * 64);
  const unbounded = mappedTables(db);
  t.ok(unbounded > 64, `with LevelDB's defaults every table read stays mapped: ${unbounded}`);
  await store.close();
});
