/**
 * `hayloft update <artifact>` and `hayloft update --recover` through the command, on an install
 * laid out as scripts/install.sh makes it (<prefix>/releases/<version>, `current`) in a temporary
 * folder. The releases are small signed artifacts made here (the update logic does not need the
 * real daemon inside; test/scripts/release.test.ts builds the real one): their dist/cli.js serves
 * /api/health with their version (or 503, the release that fails its health check) and "migrates"
 * the data folder as it starts. The service is started and stopped by the commands the update is
 * given (HAYLOFT_UPDATE_START/STOP), as systemctl would under systemd.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { generateKeyPairSync, type KeyObject, sign } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, readlinkSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import path from 'node:path';
import t from 'tap';
import { startApp } from './helpers/app.js';
import { tempDir } from './helpers/tmp.js';

const CLI = new URL('../src/cli.ts', import.meta.url).pathname;

/** A port nothing listens on (just released). */
function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

/** The release's program: `serve` writes its version into the data folder (a migration), then answers /api/health. */
const FAKE_CLI = (version: string, healthy: boolean): string => `
import http from 'node:http';
import fs from 'node:fs';
const data = process.env.HAYLOFT_DATA_DIR;
const started = performance.now();
fs.mkdirSync(data, { recursive: true });
fs.writeFileSync(data + '/schema', ${JSON.stringify(version)});
http.createServer((req, res) => {
  res.writeHead(${healthy ? 200 : 503}, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ ok: ${healthy}, status: ${JSON.stringify(healthy ? 'ok' : 'unavailable')}, uptimeSeconds: Math.round((performance.now() - started) / 1000), version: ${JSON.stringify(version)} }));
}).listen(Number(process.env.FAKE_PORT), '127.0.0.1');
`;

function writeRelease(dir: string, version: string, healthy: boolean): void {
  mkdirSync(path.join(dir, 'bin'), { recursive: true });
  mkdirSync(path.join(dir, 'dist'), { recursive: true });
  writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: 'hayloft', version, type: 'module' }));
  writeFileSync(path.join(dir, 'RELEASE.json'), JSON.stringify({ name: 'hayloft', version }));
  writeFileSync(path.join(dir, 'dist/cli.js'), FAKE_CLI(version, healthy));
  writeFileSync(path.join(dir, 'bin/hayloft'), `#!/bin/sh\nroot=$(dirname "$(dirname "$(readlink -f "$0")")")\nexec "${process.execPath}" "$root/dist/cli.js" "$@"\n`);
  chmodSync(path.join(dir, 'bin/hayloft'), 0o755);
}

interface World {
  dir: string;
  prefix: string;
  data: string;
  port: number;
  key: KeyObject;
  env: Record<string, string>;
  /** A signed artifact of `version` (signed by `key`, default the configured one). */
  artifact(version: string, healthy: boolean, key?: KeyObject): string;
  update(args: string[], env?: Record<string, string>): Promise<{ status: number | null; out: string }>;
  updater(args: string[], env?: Record<string, string>): ChildProcess;
  health(): Promise<{ status: number; version?: string } | null>;
  current(): string;
  startService(): void;
}

async function world(t: { teardown(f: () => void): void }): Promise<World> {
  const dir = tempDir(t, 'hayloft-update-');
  const prefix = path.join(dir, 'opt');
  const data = path.join(dir, 'data');
  const port = await freePort();
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  const pub = path.join(dir, 'update-key.pub.pem');
  writeFileSync(pub, publicKey.export({ type: 'spki', format: 'pem' }));
  // The installed 0.1.0 and its data.
  writeRelease(path.join(prefix, 'releases/0.1.0'), '0.1.0', true);
  symlinkSync('releases/0.1.0', path.join(prefix, 'current'));
  mkdirSync(data);
  writeFileSync(path.join(data, 'history.ldb'), 'samples nobody may lose\n');
  const pidFile = path.join(dir, 'service.pid');
  const start = `"${prefix}/current/bin/hayloft" serve >>"${dir}/service.log" 2>&1 & echo $! >"${pidFile}"`;
  const stop = `if [ -f "${pidFile}" ]; then p=$(cat "${pidFile}"); kill $p 2>/dev/null; while kill -0 $p 2>/dev/null; do sleep 0.05; done; rm -f "${pidFile}"; fi`;
  const env = { HAYLOFT_DATA_DIR: data, HAYLOFT_UPDATE_PUBLIC_KEY: pub, FAKE_PORT: String(port), HAYLOFT_UPDATE_START: start, HAYLOFT_UPDATE_STOP: stop, HAYLOFT_PORT: String(port) };
  t.teardown(() => {
    spawnSync('sh', ['-c', stop]);
  });
  const base = ['--prefix', prefix, '--url', `http://127.0.0.1:${port}`];
  let made = 0;
  const w: World = {
    dir,
    prefix,
    data,
    port,
    key: privateKey,
    env,
    artifact(version, healthy, key = privateKey) {
      const n = ++made;
      const stage = path.join(dir, `stage-${n}`);
      writeRelease(path.join(stage, `hayloft-${version}`), version, healthy);
      mkdirSync(path.join(dir, `artifact-${n}`));
      const file = path.join(dir, `artifact-${n}`, `hayloft-${version}-linux.tar.gz`);
      spawnSync('tar', ['-czf', file, '-C', stage, `hayloft-${version}`]);
      writeFileSync(`${file}.sig`, sign(null, readFileSync(file), key).toString('base64') + '\n');
      return file;
    },
    updater(args, more = {}) {
      return spawn(process.execPath, ['--import', 'tsx', CLI, 'update', ...args, ...base], { env: { ...process.env, ...env, ...more }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    },
    update(args, more = {}) {
      return new Promise((resolve) => {
        const p = w.updater(args, more);
        let out = '';
        p.stdout!.on('data', (d: Buffer) => (out += d.toString()));
        p.stderr!.on('data', (d: Buffer) => (out += d.toString()));
        p.on('close', (status) => resolve({ status, out }));
      });
    },
    async health() {
      try {
        const res = await fetch(`http://127.0.0.1:${port}/api/health`);
        return { status: res.status, ...((await res.json()) as { version?: string }) };
      } catch {
        return null;
      }
    },
    current: () => readlinkSync(path.join(prefix, 'current')),
    startService() {
      spawnSync('sh', ['-c', start], { env: { ...process.env, ...env } });
    },
  };
  w.startService();
  await until(async () => (await w.health())?.version === '0.1.0');
  return w;
}

async function until(f: () => Promise<boolean> | boolean): Promise<void> {
  for (let i = 0; i < 600; i++) {
    if (await f()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('condition not met in 30 s');
}

/** Every file under `dir` with its content (links as their target): what "nothing changed" compares. */
function snapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string): void => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      const rel = path.relative(dir, p);
      if (e.isSymbolicLink()) out[rel] = `-> ${readlinkSync(p)}`;
      else if (e.isDirectory()) walk(p);
      else out[rel] = `${statSync(p).mode} ${readFileSync(p, 'utf8')}`;
    }
  };
  walk(dir);
  return out;
}

const state = (w: World): { result: string; from: string; to: string; running: string; message: string } =>
  JSON.parse(readFileSync(path.join(w.prefix, 'update-state.json'), 'utf8')) as { result: string; from: string; to: string; running: string; message: string };

t.test('a good artifact: switched, the new version healthy, the result kept', async (t) => {
  const w = await world(t);
  const r = await w.update([w.artifact('0.2.0', true)]);
  t.equal(r.status, 0, 'exit 0');
  t.match(r.out, /updated from 0\.1\.0 to 0\.2\.0: healthy/);
  t.equal(w.current(), 'releases/0.2.0', 'current switched');
  t.equal((await w.health())?.version, '0.2.0', 'the new version serves');
  t.ok(existsSync(path.join(w.prefix, 'releases/0.1.0/dist/cli.js')), 'the previous release stays beside it');
  t.equal(readFileSync(path.join(w.data, 'history.ldb'), 'utf8'), 'samples nobody may lose\n', 'data kept');
  t.equal(readFileSync(path.join(w.data, 'schema'), 'utf8'), '0.2.0', 'the new version migrated the data folder');
  t.notOk(existsSync(path.join(w.prefix, 'update-journal.json')), 'no journal left');
  t.notOk(existsSync(`${w.data}.before-update`), 'the backup is removed once healthy');
  t.match(state(w), { result: 'ok', from: '0.1.0', to: '0.2.0', running: '0.2.0' });
  t.equal(readdirSync(path.join(w.prefix, 'releases')).sort().join(' '), '0.1.0 0.2.0', 'nothing half-unpacked left');
});

t.test('an artifact that fails its health check: rolled back by itself, code and data', async (t) => {
  const w = await world(t);
  const r = await w.update([w.artifact('0.2.0', false), '--health-timeout', '3']);
  t.equal(r.status, 1, 'fails');
  t.match(r.out, /rolled back: answers 503 unavailable; 0\.1\.0 and its data are back and healthy/);
  t.equal(w.current(), 'releases/0.1.0', 'current links back');
  t.equal((await w.health())?.version, '0.1.0', 'the old version serves again');
  t.equal(readFileSync(path.join(w.data, 'history.ldb'), 'utf8'), 'samples nobody may lose\n', 'data intact');
  t.equal(readFileSync(path.join(w.data, 'schema'), 'utf8'), '0.1.0', 'the failed version\'s migration is undone');
  t.equal(readFileSync(path.join(`${w.data}.failed-update`, 'schema'), 'utf8'), '0.2.0', 'what the failed version wrote is kept aside');
  t.notOk(existsSync(path.join(w.prefix, 'update-journal.json')), 'no journal left');
  t.match(state(w), { result: 'rolled-back', from: '0.1.0', to: '0.2.0', running: '0.1.0' });
});

t.test('refused before anything changes: bad signature, tampered, unsigned, no key, not a release', async (t) => {
  const w = await world(t);
  const before = { install: snapshot(w.prefix), data: snapshot(w.data) };
  const other = generateKeyPairSync('ed25519').privateKey;
  const byOther = w.artifact('0.2.0', true, other);
  const cases: [string, string[], Record<string, string>, RegExp][] = [
    ['signed by another key', [byOther], {}, /bad signature: .* is not a signature of .* by the configured key; nothing was changed/],
    ['no signature', [w.artifact('0.3.0', true), '--signature', path.join(w.dir, 'none.sig')], {}, /the artifact is not signed: .*none\.sig does not exist/],
    ['no key configured', [w.artifact('0.2.0', true)], { HAYLOFT_UPDATE_PUBLIC_KEY: '' }, /no public key to check the artifact's signature: set updatePublicKey/],
  ];
  const tampered = w.artifact('0.4.0', true);
  writeFileSync(tampered, Buffer.concat([readFileSync(tampered), Buffer.from('x')]));
  cases.push(['tampered after signing', [tampered], {}, /bad signature/]);
  const junk = path.join(w.dir, 'junk.tar.gz');
  writeFileSync(junk, 'not a tarball');
  writeFileSync(`${junk}.sig`, sign(null, readFileSync(junk), w.key).toString('base64'));
  cases.push(['signed but not a release', [junk], {}, /is signed but is not a release artifact/]);
  const rsa = path.join(w.dir, 'rsa.pub.pem');
  writeFileSync(rsa, generateKeyPairSync('rsa', { modulusLength: 1024 }).publicKey.export({ type: 'spki', format: 'pem' }));
  cases.push(['an RSA key', [w.artifact('0.2.0', true), '--public-key', rsa], {}, /the public key is rsa, not Ed25519/]);
  // The refusal is kept as the last result (update-state.json), beside an install otherwise unchanged.
  const unchanged = (): { install: Record<string, string>; data: Record<string, string> } => {
    const install = snapshot(w.prefix);
    delete install['update-state.json'];
    return { install, data: snapshot(w.data) };
  };
  for (const [what, args, env, message] of cases) {
    const r = await w.update(args, env);
    t.equal(r.status, 1, `${what}: refused`);
    t.match(r.out, message, `${what}: said clearly`);
    t.same(unchanged(), before, `${what}: nothing changed`);
    t.match(state(w), { result: 'refused', from: '0.1.0', running: '0.1.0', message: new RegExp(`^update refused: .*${message.source}`) }, `${what}: kept as the last result`);
    t.equal((await w.health())?.version, '0.1.0', `${what}: the running version still serves`);
  }
  // The artifacts stay in w.dir (outside the install), which is why they do not appear above.
  t.ok(existsSync(byOther));
});

t.test('kill -9 after the switch, before health: --recover rolls back code and data, and the install works', async (t) => {
  const w = await world(t);
  // A start that "migrates" like the new version and then hangs: the update is killed meanwhile.
  const started = path.join(w.dir, 'started');
  const p = w.updater([w.artifact('0.2.0', true)], { HAYLOFT_UPDATE_START: `echo 0.2.0 >"${w.data}/schema"; touch "${started}"; sleep 60` });
  await until(() => existsSync(started));
  t.match(JSON.parse(readFileSync(path.join(w.prefix, 'update-journal.json'), 'utf8')), { phase: 'switched', from: '0.1.0', to: '0.2.0' }, 'killed after the switch');
  // The unit's ExecStartPre during the update's own start: the updater is alive, nothing is touched.
  const during = spawnSync(process.execPath, ['--import', 'tsx', CLI, 'update', '--recover', '--prefix', w.prefix], { encoding: 'utf8' });
  t.equal(during.status, 0, '--recover while the update runs');
  t.equal(w.current(), 'releases/0.2.0', '--recover left the running update alone');
  t.ok(existsSync(path.join(w.prefix, 'update-journal.json')), 'and its journal');
  const exited = new Promise((r) => p.on('close', r));
  process.kill(-p.pid!, 'SIGKILL');
  await exited;
  t.equal(w.current(), 'releases/0.2.0', 'left switched, with a journal');

  const r = spawnSync(process.execPath, ['--import', 'tsx', CLI, 'update', '--recover', '--prefix', w.prefix], { encoding: 'utf8', env: { ...process.env, ...w.env } });
  t.equal(r.status, 0, r.stderr);
  t.match(r.stdout, /interrupted after the switch, before its health was confirmed: rolled back/);
  t.equal(w.current(), 'releases/0.1.0', 'current links back');
  t.equal(readFileSync(path.join(w.data, 'schema'), 'utf8'), '0.1.0', 'the data folder as it was');
  t.equal(readFileSync(path.join(w.data, 'history.ldb'), 'utf8'), 'samples nobody may lose\n', 'data intact');
  t.notOk(existsSync(path.join(w.prefix, 'update-journal.json')), 'journal gone');
  t.match(state(w), { result: 'recovered', running: '0.1.0' });
  w.startService();
  await until(async () => (await w.health())?.version === '0.1.0');
  t.pass('the old version starts and serves');
  const again = spawnSync(process.execPath, ['--import', 'tsx', CLI, 'update', '--recover', '--prefix', w.prefix], { encoding: 'utf8' });
  t.equal(again.status, 0, 'a second --recover (every start) has nothing to do');
  t.equal(again.stdout, '');
  // And the next update goes through.
  const next = await w.update([w.artifact('0.2.0', true)]);
  t.equal(next.status, 0, 'the next update: exit 0');
  t.equal((await w.health())?.version, '0.2.0');
});

t.test('kill -9 while backing the data up: --recover removes the new release, changes nothing else', async (t) => {
  const w = await world(t);
  const before = snapshot(w.data);
  const stopping = path.join(w.dir, 'stopping');
  const p = w.updater([w.artifact('0.2.0', true)], { HAYLOFT_UPDATE_STOP: `touch "${stopping}"; sleep 60` });
  await until(() => existsSync(stopping));
  const exited = new Promise((r) => p.on('close', r));
  process.kill(-p.pid!, 'SIGKILL');
  await exited;
  t.ok(existsSync(path.join(w.prefix, 'releases/0.2.0')), 'killed with the new release unpacked');
  // An update while the journal is there is refused: the journal says what to do.
  const refused = await w.update([w.artifact('0.3.0', true)]);
  t.equal(refused.status, 1);
  t.match(refused.out, /an update is already in progress or was interrupted .* run hayloft update --recover first/);
  t.notOk(existsSync(path.join(w.prefix, 'update-state.json')), 'the refusal of a second update leaves the interrupted one\'s result to come');

  const r = spawnSync(process.execPath, ['--import', 'tsx', CLI, 'update', '--recover', '--prefix', w.prefix], { encoding: 'utf8' });
  t.equal(r.status, 0, r.stderr);
  t.match(r.stdout, /interrupted before the switch \(backing-up\): undone/);
  t.equal(w.current(), 'releases/0.1.0');
  t.same(readdirSync(path.join(w.prefix, 'releases')), ['0.1.0'], 'the new release is removed');
  t.same(snapshot(w.data), before, 'data unchanged');
  t.notOk(existsSync(`${w.data}.before-update`), 'no backup left');
  t.equal((await w.health())?.version, '0.1.0', 'the running version was never stopped by the killed update\'s fake stop');
});

t.test('the daemon shows the last update: /api/health (parts.update) and the NBIRTH figures', async (t) => {
  const dir = tempDir(t);
  const file = path.join(dir, 'update-state.json');
  const last = { result: 'rolled-back', from: '0.1.0', to: '0.2.0', running: '0.1.0', at: '2026-11-28T05:00:00.000Z', message: 'update to 0.2.0 rolled back: answers 503 unavailable; 0.1.0 and its data are back and healthy' };
  writeFileSync(file, JSON.stringify(last));
  const r = await startApp(t, { updateState: file });
  const h = (await (await fetch(`${r.base}/api/health`)).json()) as { ok: boolean; parts: { update: { lastUpdate: unknown } } };
  t.equal(h.ok, true, 'a rolled-back update leaves a healthy gateway');
  t.same(h.parts.update.lastUpdate, { result: 'rolled-back', at: last.at }, 'the result and when, no versions (health answers anyone)');
  t.notMatch(JSON.stringify(h), /0\.2\.0/, 'no version in /api/health');
  const about = (await (await fetch(`${r.base}/api/about`, { headers: { ...r.auth, accept: 'application/json' } })).json()) as { rows: Record<string, string>[] };
  t.match(about.rows[0], { updateResult: 'rolled-back', updateFrom: '0.1.0', updateTo: '0.2.0', updateAt: /^t:2026-11-28T05:00:00(\.000)?Z UTC$/, updateMessage: last.message }, 'about (logged in) says the versions and why: the console shows them');
  t.equal((await fetch(`${r.base}/api/about`, { headers: { accept: 'application/json' } })).status, 401, 'about answers no one who is not logged in');
  const f = await r.app.nodeFigures();
  t.same(f['Update/Result'], { type: 'String', value: 'rolled-back' });
  t.same(f['Update/To'], { type: 'String', value: '0.2.0' });
  t.same(f['Update/At'], { type: 'DateTime', value: Date.parse(last.at) });
  t.match(f['Update/Message']?.value, /rolled back/);
});

t.test('no update yet: no figures, lastUpdate null; the result written while the daemon runs is shown at once', async (t) => {
  const file = path.join(tempDir(t), 'update-state.json');
  const r = await startApp(t, { updateState: file });
  const h = (await (await fetch(`${r.base}/api/health`)).json()) as { parts: { update: { lastUpdate: unknown } } };
  t.equal(h.parts.update.lastUpdate, null);
  const about = (await (await fetch(`${r.base}/api/about`, { headers: { ...r.auth, accept: 'application/json' } })).json()) as { rows: Record<string, string>[] };
  t.equal(about.rows[0]?.updateResult, undefined, 'no update columns in about');
  t.equal((await r.app.nodeFigures())['Update/Result'], undefined);
  // hayloft update writes the result after the new version answered healthy: it is running already.
  writeFileSync(file, JSON.stringify({ result: 'ok', from: '0.1.0', to: '0.2.0', running: '0.2.0', at: '2026-11-28T06:00:00.000Z', message: 'updated from 0.1.0 to 0.2.0: healthy' }));
  const after = (await (await fetch(`${r.base}/api/health`)).json()) as { parts: { update: { lastUpdate: unknown } } };
  t.same(after.parts.update.lastUpdate, { result: 'ok', at: '2026-11-28T06:00:00.000Z' }, 'health shows it without a restart');
  t.same((await r.app.nodeFigures())['Update/To'], { type: 'String', value: '0.2.0' }, 'and the figures (the edge node rebirths with them)');
});

t.test('the unit runs --recover before every start, as root (the + prefix)', async (t) => {
  const unit = readFileSync(new URL('../systemd/hayloft.service', import.meta.url), 'utf8');
  t.match(unit, /^ExecStartPre=\+\/opt\/hayloft\/bin\/hayloft update --recover$/m);
});
