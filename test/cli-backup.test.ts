/**
 * `hayloft backup` and `hayloft restore` as an operator runs them: a backup of the running
 * server over HTTP while a client keeps writing history, permission checks on GET /api/backup,
 * a restore refused over a non-empty folder, then a restore into a new folder and a start on it
 * that finds everything (users included) with every history batch whole.
 */
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { type AddressInfo, createServer } from 'node:net';
import path from 'node:path';
import t from 'tap';
import { HDateTime, HNumber, HRef, MARKER } from '../src/haystack/values.js';
import { timeZone } from '../src/haystack/tz.js';
import { ErrorCodes } from '../src/lib/errors.js';
import { ADMIN, CLIENT, startApp } from './helpers/app.js';
import { failed, ok } from './helpers/his.js';
import { hisWorld } from './helpers/his-world.js';
import { errOf, gridOf, postGrid } from './helpers/http.js';
import { tempDir } from './helpers/tmp.js';

const CLI = new URL('../src/cli.ts', import.meta.url).pathname;

function run(args: string[], env: Record<string, string>): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, ['--import', 'tsx', CLI, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    p.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    p.on('close', (status) => resolve({ status, stdout, stderr }));
  });
}

/** A port nothing listens on (just released). */
function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

const NY = timeZone('New_York');
const T0 = Date.UTC(2024, 0, 1);
/** Samples per point per hisWrite; each request writes two points in one batch. */
const K = 25;

t.test('backup while writing, restore, start: everything there, no half batch', async (t) => {
  const { r, admin } = await hisWorld(t);
  const dir = tempDir(t);
  const creds = { HAYLOFT_USER: ADMIN.username, HAYLOFT_PASSWORD: ADMIN.password, HAYLOFT_CLIENT_ID: CLIENT.id, HAYLOFT_CLIENT_SECRET: CLIENT.secret };

  // GET /api/backup needs a token with USER_ADMIN.
  t.equal((await fetch(`${r.base}/api/backup`)).status, 401, 'no token');
  ok(t, await admin.post('createRec', [{ id: HRef.of('viewer-role'), role: MARKER, name: 'viewer', actionPolicyRefs: [] }]), 'a role without permissions');
  await r.app.auth.addUser('viewer@example.com', 'viewer-password-1', 'viewer');
  const viewer = await r.login('viewer@example.com', 'viewer-password-1');
  const refused = await fetch(`${r.base}/api/backup`, { headers: { authorization: `Bearer ${viewer.body.access_token as string}` } });
  t.equal(refused.status, 403, 'a user without USER_ADMIN');
  t.match(await refused.text(), /a backup needs USER_ADMIN/);

  // A client writing history to two points, one batch per request, all along.
  let stop = false;
  let batches = 0;
  const writer = (async () => {
    while (!stop) {
      const base = batches * K;
      const rows = Array.from({ length: K }, (_, i) => [new HDateTime(T0 + (base + i) * 1000, NY), HNumber.of(base + i), HNumber.of(base + i)] as const);
      const a = await admin.writeMulti(['temp', 'plain'], rows);
      if (a.status !== 200) throw new Error(`hisWrite: ${a.status} ${a.text}`);
      batches++;
    }
  })();
  while (batches < 5) await new Promise((res) => setTimeout(res, 10));

  const file = path.join(dir, 'site.backup.gz');
  const b = await run(['backup', file, '--url', r.base], creds);
  const atEnd = batches;
  await new Promise((res) => setTimeout(res, 50));
  stop = true;
  await writer;
  t.equal(b.status, 0, b.stderr);
  t.match(b.stdout, new RegExp(`^backup of \\d+ entries \\(Hayloft \\d+\\.\\d+\\.\\d+, [0-9T:.Z-]+\\) written to ${file.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')} \\(\\d+\\.\\d MB\\)\\n$`));
  t.equal(statSync(file).mode & 0o777, 0o600, 'the backup file is readable by its owner only');
  t.notOk(existsSync(`${file}.partial`));
  t.ok(batches > atEnd, 'writes went on after the backup too');
  const audit = r.logs.filter((l) => l.includes('"msg":"backup requested"'));
  t.equal(audit.length, 1, 'who took a backup is logged');
  t.match(audit[0], `"user":"${ADMIN.username}"`);
  t.ok(r.logs.some((l) => l.includes('"msg":"backup sent"')));
  t.notOk(r.logs.some((l) => l.includes(ADMIN.password) || l.includes(CLIENT.secret)), 'no password or secret in the log');
  const again = await run(['backup', file, '--url', r.base], creds);
  t.equal(again.status, 1);
  t.match(again.stderr, /already exists: choose another name, or add --force/);
  const wrong = await run(['backup', path.join(dir, 'x.gz'), '--url', r.base], { ...creds, HAYLOFT_PASSWORD: 'wrong-password' });
  t.equal(wrong.status, 1);
  t.match(wrong.stderr, /^hayloft: login refused \(400\): /);
  const closed = await freePort();
  const nobody = await run(['backup', path.join(dir, 'y.gz'), '--url', `http://127.0.0.1:${closed}`], creds);
  t.match(nobody.stderr, `cannot reach Hayloft at http://127.0.0.1:${closed}: ECONNREFUSED (is it running?`);

  // Restore over the live data folder: refused, clearly, nothing touched.
  const over = await run(['restore', file], { HAYLOFT_DATA_DIR: r.dir });
  t.equal(over.status, 1);
  t.match(over.stderr, /is not empty .*: a restore goes only into an empty or new folder/);
  const garbage = await run(['restore', CLI], { HAYLOFT_DATA_DIR: path.join(dir, 'g') });
  t.equal(garbage.status, 1);
  t.match(garbage.stderr, /^hayloft: the file is not a Hayloft backup/);

  const restoredDir = path.join(dir, 'restored');
  const rs = await run(['restore', file], { HAYLOFT_DATA_DIR: restoredDir });
  t.equal(rs.status, 0, rs.stderr);
  t.match(rs.stdout, /^restored \d+ entries \(backup of .*\) into .*restored\nThe token signing key is not part of a backup/);
  t.same(readdirSync(restoredDir), ['db']);
  await r.stop();

  // Start on the restored folder: the admin logs in with the old password (startApp does).
  const r2 = await startApp(t, { dir: restoredDir });
  const read = await postGrid(r2.base, 'read', gridOf({ filter: 'point' }), { headers: r2.auth });
  t.equal(read.grid?.size, 11, 'every point');
  t.ok(r2.app.auth.userIdByName('viewer@example.com') !== undefined, 'users');
  const stats = (id: string): number => r2.app.history.stats(id).size;
  const n = stats('temp');
  t.equal(n, stats('plain'), 'both points of every batch');
  t.equal(n % K, 0, 'no half batch');
  t.ok(n >= 5 * K, `the batches before the backup (${n / K} of ${batches})`);
  t.ok(n < batches * K, 'not the ones after it');
  const before = await fetch(`${r2.base}/api/about`, { headers: r.auth });
  t.equal(before.status, 401, 'a token from before the restore no longer works (a new signing key)');
  failed(t, await postGrid(r2.base, 'about', gridOf({}), { headers: r.auth }), 401, ErrorCodes.UNAUTHORIZED);
  t.equal(errOf(await postGrid(r2.base, 'about', gridOf({}), { headers: r2.auth })), undefined, 'a new login does');
});
