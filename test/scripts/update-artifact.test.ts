/**
 * Issue 32: `hayloft update` with REAL release artifacts (test/cli-update.test.ts covers every step
 * and interruption with small synthetic releases; this is the same path end to end with the
 * daemon itself). scripts/release.sh builds the artifact once for this file; the newer versions
 * are that artifact with the version bumped in its package.json and RELEASE.json (the same code,
 * repacked and signed like release.sh signs), so no second build is needed:
 *
 * - install.sh --artifact installs the built release into a temporary root; it runs (the daemon as
 *   its own process, started and stopped by the commands the update is given, as systemctl
 *   would), a point with history is written to it, then the installed release's own command
 *   updates it to the newer artifact: health checked, switched, the new version serves the same
 *   data, and `about` and /api/health show the update;
 * - a newer artifact that cannot start here (its store's native module has no prebuilt binary for
 *   this machine's platform: what release.sh's platform check guards against) is rolled back by
 *   itself: the previous release serves again, with its data intact, and says the update was
 *   rolled back.
 */
import { spawnSync } from 'node:child_process';
import { sign } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, readlinkSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import path from 'node:path';
import t, { type Test } from 'tap';
import { ADMIN, CLIENT, tokenRequest } from '../helpers/app.js';
import { jsonApi, jsonGrid } from '../helpers/browser.js';
import { buildRelease, REPO, VERSION } from '../helpers/release.js';
import { tempDir } from '../helpers/tmp.js';

// Building takes a while on a shared machine; each update waits for a real daemon to start.
t.setTimeout(600_000);

const { work, built, tarball, privateKey, publicKeyFile: pubFile } = buildRelease(t);

/**
 * The built artifact as version `version`: unpacked, its package.json and RELEASE.json given the
 * version (`broken`: and its classic-level without the prebuilt binary for this platform), packed
 * and signed again. Returns the tarball (its .sig beside it).
 */
function bumped(version: string, broken = false): string {
  const stage = path.join(work, `stage-${version}`);
  mkdirSync(stage);
  const x = spawnSync('tar', ['-xzf', tarball, '-C', stage], { encoding: 'utf8' });
  if (x.status !== 0) throw new Error(x.stderr);
  const dir = path.join(stage, `hayloft-${version}`);
  renameSync(path.join(stage, `hayloft-${VERSION}`), dir);
  for (const f of ['package.json', 'RELEASE.json']) {
    const j = JSON.parse(readFileSync(path.join(dir, f), 'utf8')) as { version: string };
    j.version = version;
    writeFileSync(path.join(dir, f), JSON.stringify(j, null, 2) + '\n');
  }
  if (broken) {
    const prebuilds = path.join(dir, 'node_modules/classic-level/prebuilds', `linux-${process.arch}`);
    if (!existsSync(prebuilds)) throw new Error(`${prebuilds} is not in the artifact`);
    rmSync(prebuilds, { recursive: true });
  }
  const file = path.join(work, 'out', `hayloft-${version}-linux.tar.gz`);
  const c = spawnSync('tar', ['-czf', file, '-C', stage, `hayloft-${version}`], { encoding: 'utf8' });
  if (c.status !== 0) throw new Error(c.stderr);
  writeFileSync(`${file}.sig`, sign(null, readFileSync(file), privateKey).toString('base64') + '\n');
  rmSync(stage, { recursive: true });
  return file;
}

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

async function until(what: string, f: () => Promise<boolean>, seconds = 90): Promise<void> {
  for (let i = 0; i < seconds * 4; i++) {
    if (await f()) return;
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`${what}: not within ${seconds} s`);
}

interface Gateway {
  prefix: string;
  data: string;
  base: string;
  /** The service's output. */
  logFile: string;
  env: Record<string, string>;
  current(): string;
  /** The installed release's own `hayloft update`, as an operator runs it. */
  update(args: string[]): { status: number | null; out: string };
  api(op: string, body: unknown): Promise<{ rows: Record<string, unknown>[] }>;
  /** The `about` row, logged in. */
  about(): Promise<Record<string, unknown>>;
  health(): Promise<{ ok: boolean; status: string; uptimeSeconds: number; parts: { update: { lastUpdate: { result: string; at: string } | null } } } | null>;
  login(): Promise<void>;
}

/** install.sh --artifact into a temporary root, then the service started as systemd would. */
async function gateway(t: Test): Promise<Gateway> {
  const root = path.join(tempDir(t), 'root');
  mkdirSync(root);
  const r = spawnSync('bash', [path.join(REPO, 'scripts/install.sh'), '--root', root, '--artifact', tarball, '--node', process.execPath], { encoding: 'utf8', timeout: 120_000 });
  t.equal(r.status, 0, `install.sh --artifact: ${r.stdout}${r.stderr}`);
  const prefix = path.join(root, 'opt/hayloft');
  const data = path.join(root, 'var/lib/hayloft');
  const port = await freePort();
  const pidFile = path.join(root, 'service.pid');
  const logFile = path.join(root, 'service.log');
  // What the unit does: the release `current` links to, run by its own bin/hayloft.
  const start = `"${prefix}/current/bin/hayloft" serve >>"${logFile}" 2>&1 & echo $! >"${pidFile}"`;
  const stop = `if [ -f "${pidFile}" ]; then p=$(cat "${pidFile}"); kill $p 2>/dev/null; while kill -0 $p 2>/dev/null; do sleep 0.1; done; rm -f "${pidFile}"; fi`;
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HAYLOFT_NODE: process.execPath,
    HAYLOFT_DATA_DIR: data,
    HAYLOFT_HOST: '127.0.0.1',
    HAYLOFT_PORT: String(port),
    HAYLOFT_HTTPS_PORT: 'off',
    HAYLOFT_TZ: 'UTC',
    HAYLOFT_CLOCK_SYNC: 'none',
    HAYLOFT_HISTORY_MIN_FREE_BYTES: String(8 * 1024 * 1024),
    HAYLOFT_ADMIN_USER: ADMIN.username,
    HAYLOFT_ADMIN_PASSWORD: ADMIN.password,
    HAYLOFT_CLIENT_ID: CLIENT.id,
    HAYLOFT_CLIENT_SECRET: CLIENT.secret,
    HAYLOFT_UPDATE_PUBLIC_KEY: pubFile,
    HAYLOFT_UPDATE_START: start,
    HAYLOFT_UPDATE_STOP: stop,
  };
  t.teardown(() => {
    spawnSync('sh', ['-c', stop]);
  });
  const base = `http://127.0.0.1:${port}`;
  let auth: Record<string, string> = {};
  const aboutRow = async (): Promise<Record<string, unknown>> =>
    ((await (await fetch(`${base}/api/about`, { headers: { ...auth, accept: 'application/json' } })).json()) as { rows: Record<string, unknown>[] }).rows[0] ?? {};
  const g: Gateway = {
    prefix,
    data,
    base,
    logFile,
    env,
    current: () => readlinkSync(path.join(prefix, 'current')),
    update(args) {
      const u = spawnSync(path.join(prefix, 'current/bin/hayloft'), ['update', ...args], { encoding: 'utf8', env, timeout: 300_000 });
      return { status: u.status, out: u.stdout + u.stderr };
    },
    api: (op, body) => jsonApi({ base, auth })(op, body),
    about: aboutRow,
    async health() {
      try {
        return (await (await fetch(`${base}/api/health`)).json()) as Awaited<ReturnType<Gateway['health']>>;
      } catch {
        return null;
      }
    },
    async login() {
      // The daemon was restarted: a kept-alive connection to the previous one is dead, and
      // health() (which swallows the error) clears it from the pool.
      await until('the service answers', async () => (await g.health())?.ok === true);
      const a = await tokenRequest(base, { grant_type: 'password', username: ADMIN.username, password: ADMIN.password });
      if (a.status !== 200) throw new Error(`login: ${a.status}`);
      auth = { authorization: `Bearer ${a.body.access_token as string}` };
    },
  };
  spawnSync('sh', ['-c', start], { env });
  await until('the installed release serves', async () => (await g.health())?.ok === true);
  await g.login();
  return g;
}

const HOUR = 3_600_000;
/** A point with an hour of history: what an update must keep. */
async function someData(g: Gateway): Promise<{ id: string; samples: number }> {
  const [site] = (await g.api('createRec', jsonGrid([{ site: 'm:', name: 'hq', dis: 'HQ', tz: 's:UTC' }]))).rows;
  const [p] = (await g.api('createRec', jsonGrid([{ point: 'm:', his: 'm:', name: 'flow', dis: 'Flow temperature', kind: 's:Number', unit: 's:°C', tz: 's:UTC', siteRef: site?.id }]))).rows;
  const id = String(p?.id).split(' ')[0]!;
  const end = Math.floor(Date.now() / 60_000) * 60_000 - 10 * 60_000;
  const rows = Array.from({ length: 60 }, (_, i) => ({ ts: `t:${new Date(end - HOUR + i * 60_000).toISOString().slice(0, 19)}Z UTC`, val: `n:${(40 + i / 10).toFixed(1)} °C` }));
  await g.api('hisWrite', jsonGrid(rows, { id }));
  return { id, samples: rows.length };
}

/** A Str cell as text (JSON v3 gives some as `s:...`). */
const text = (v: unknown): string => (typeof v === 'string' && v[1] === ':' ? v.slice(2) : String(v));

async function history(g: Gateway, id: string): Promise<string[]> {
  const r = await g.api('hisRead', jsonGrid([{ id, range: 's:2000-01-01,2100-01-01' }]));
  return r.rows.map((row) => `${String(row.ts)} ${String(row.val)}`);
}

t.test('release.sh built the artifact', async (t) => {
  t.equal(built.status, 0, built.stdout + built.stderr);
  t.ok(existsSync(`${tarball}.sig`), 'signed');
});

t.test('an install from the artifact updates to a newer real artifact: health checked, switched, data kept', { skip: built.status !== 0 && 'no artifact' }, async (t) => {
  const newer = bumped('99.0.0-good');
  const g = await gateway(t);
  t.equal(g.current(), `releases/${VERSION}`);
  t.equal(text((await g.about()).productVersion), VERSION, 'the installed version runs');
  const { id, samples } = await someData(g);
  const before = await history(g, id);
  t.equal(before.length, samples, 'history written');

  const u = g.update([newer]);
  t.equal(u.status, 0, u.out);
  t.match(u.out, new RegExp(`updated from ${VERSION} to 99\\.0\\.0-good: healthy`));
  t.equal(g.current(), 'releases/99.0.0-good', 'current switched');
  t.ok(existsSync(path.join(g.prefix, `releases/${VERSION}/dist/cli.js`)), 'the previous release stays beside it');
  t.notOk(existsSync(`${g.data}.before-update`), 'the data backup is removed once healthy');
  t.notOk(existsSync(path.join(g.prefix, 'update-journal.json')), 'no journal left');

  await g.login();
  const a = await g.about();
  t.equal(text(a.productVersion), '99.0.0-good', 'the new version serves');
  t.same([a.updateResult, a.updateFrom, a.updateTo].map(text), ['ok', VERSION, '99.0.0-good'], 'about says the update (the console shows it)');
  t.same(await history(g, id), before, 'the same history, read through the new version');
  t.match((await g.health())?.parts.update.lastUpdate, { result: 'ok' }, '/api/health: the last update ok');
});

t.test('a newer real artifact that cannot start here: rolled back by itself, data intact', { skip: built.status !== 0 && 'no artifact' }, async (t) => {
  const broken = bumped('99.0.0-broken', true);
  const g = await gateway(t);
  const { id } = await someData(g);
  const before = await history(g, id);
  const u = g.update([broken, '--health-timeout', '20']);
  t.equal(u.status, 1, 'the update fails');
  t.match(u.out, new RegExp(`update to 99\\.0\\.0-broken rolled back: .*; ${VERSION} and its data are back and healthy`), u.out);
  t.match(u.out, /rolled back: no answer from .*\/api\/health \(ECONNREFUSED\): the daemon is not running or not listening/, 'why, in words');
  t.equal(g.current(), `releases/${VERSION}`, 'current links back');
  t.notOk(existsSync(`${g.data}.before-update`), 'the backup is used up');
  t.notOk(existsSync(path.join(g.prefix, 'update-journal.json')), 'no journal left');
  const log = readFileSync(g.logFile, 'utf8');
  t.match(log, /No native build was found|Cannot find module|classic-level/, 'the new version did not start: its store cannot load');

  await g.login();
  const a = await g.about();
  t.equal(text(a.productVersion), VERSION, 'the previous version serves again');
  t.same(await history(g, id), before, 'its history intact');
  t.same([a.updateResult, a.updateFrom, a.updateTo].map(text), ['rolled-back', VERSION, '99.0.0-broken'], 'about says it was rolled back');
  t.match(text(a.updateMessage), /rolled back: no answer/);
  t.match((await g.health())?.parts.update.lastUpdate, { result: 'rolled-back' }, '/api/health too');
});
