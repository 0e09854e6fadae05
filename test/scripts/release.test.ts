/**
 * Issue 32, releases: scripts/release.sh builds the artifact (once for this file: it builds and
 * runs `npm ci --omit=dev`, about a minute); unpacked into an empty folder it starts with no npm
 * step and serves the console and the API; install.sh installs from it into a temporary root,
 * dependencies included; its signature checks out with the public key of the signing key and
 * fails for any other bytes.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { createPublicKey, verify } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, readdirSync, readlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import t, { type Test } from 'tap';
import { buildRelease, REPO, VERSION } from '../helpers/release.js';
import { tempDir } from '../helpers/tmp.js';

// Building takes a while on a shared machine.
t.setTimeout(600_000);

const { built, tarball, publicKey } = buildRelease(t);

/** Starts `node <dir>/dist/cli.js serve` on a fresh data folder; resolves with its port once it serves. */
async function serve(t: Test, dir: string): Promise<number> {
  const data = tempDir(t);
  const proc: ChildProcess = spawn(process.execPath, [path.join(dir, 'dist/cli.js'), 'serve'], {
    // Not this checkout's folder: the release must find everything in its own.
    cwd: data,
    env: { PATH: process.env.PATH ?? '', HAYLOFT_DATA_DIR: data, HAYLOFT_HOST: '127.0.0.1', HAYLOFT_PORT: '0', HAYLOFT_HTTPS_PORT: 'off', HAYLOFT_TZ: 'UTC', HAYLOFT_HISTORY_MIN_FREE_BYTES: String(8 * 1024 * 1024), HAYLOFT_CLOCK_SYNC: 'none', HAYLOFT_ADMIN_USER: 'admin@example.com', HAYLOFT_ADMIN_PASSWORD: 'admin-password-1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  t.teardown(() => void proc.kill('SIGKILL'));
  let text = '';
  return new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`did not serve: ${text}`)), 60_000);
    proc.on('exit', (code) => reject(new Error(`exited ${code}: ${text}`)));
    proc.stderr?.on('data', (d: Buffer) => (text += d.toString()));
    proc.stdout?.on('data', (d: Buffer) => {
      text += d.toString();
      const m = /"port":(\d+)[^\n]*"msg":"Hayloft is serving"/.exec(text);
      if (m !== null) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
  });
}

t.test('release.sh builds the artifact, signed', async (t) => {
  t.equal(built.status, 0, built.stdout + built.stderr);
  t.ok(existsSync(tarball), 'the tarball');
  const sig = Buffer.from(readFileSync(`${tarball}.sig`, 'utf8').trim(), 'base64');
  const bytes = readFileSync(tarball);
  t.ok(verify(null, bytes, createPublicKey(publicKey.export({ type: 'spki', format: 'pem' })), sig), 'the signature checks out with the public key');
  const other = Buffer.from(bytes);
  other.writeUInt8((other.readUInt8(other.length >> 1) ^ 1), other.length >> 1);
  t.notOk(verify(null, other, publicKey, sig), 'and not for other bytes');
});

t.test('unpacked into an empty folder: starts with no npm step, serves the console and the API', async (t) => {
  const dir = tempDir(t);
  t.same(readdirSync(dir), [], 'an empty folder');
  const x = spawnSync('tar', ['-xzf', tarball, '-C', dir], { encoding: 'utf8' });
  t.equal(x.status, 0, x.stderr);
  const rel = path.join(dir, `hayloft-${VERSION}`);
  const manifest = JSON.parse(readFileSync(path.join(rel, 'RELEASE.json'), 'utf8')) as { version: string; platforms: string[] };
  t.equal(manifest.version, VERSION);
  t.same(manifest.platforms, ['linux-x64', 'linux-arm64', 'linux-arm'], 'every native module has prebuilt binaries for x64, arm64 and armv7');
  for (const mod of ['classic-level', '@serialport/bindings-cpp']) {
    t.ok(existsSync(path.join(rel, 'node_modules', mod, 'prebuilds/linux-arm64')), `${mod}: arm64 prebuilds inside`);
    t.notOk(existsSync(path.join(rel, 'node_modules', mod, 'build')), `${mod}: nothing was compiled`);
  }
  t.notOk(existsSync(path.join(rel, 'node_modules/tap')), 'no dev dependencies');
  t.notOk(existsSync(path.join(rel, 'node_modules/typescript')), 'no TypeScript');
  t.ok(existsSync(path.join(rel, 'systemd/hayloft.service')), 'the systemd unit');
  const port = await serve(t, rel);
  const page = await fetch(`http://127.0.0.1:${port}/`);
  t.equal(page.status, 200, 'the console');
  t.match(await page.text(), /<html/i);
  const health = (await (await fetch(`http://127.0.0.1:${port}/api/health`)).json()) as { ok: boolean };
  t.equal(health.ok, true, '/api/health');
});

t.test('install.sh --artifact: installs the release with its dependencies, no npm step', async (t) => {
  const root = path.join(tempDir(t), 'root');
  mkdirSync(root);
  // An npm that fails and leaves a mark, first on PATH: the install must not call it.
  const bin = path.join(tempDir(t), 'bin');
  mkdirSync(bin);
  const mark = path.join(bin, 'npm-was-called');
  writeFileSync(path.join(bin, 'npm'), `#!/bin/sh\ntouch ${mark}\nexit 1\n`, { mode: 0o755 });
  const r = spawnSync('bash', [path.join(REPO, 'scripts/install.sh'), '--root', root, '--artifact', tarball, '--node', process.execPath], { encoding: 'utf8', timeout: 120_000, env: { PATH: `${bin}:/usr/bin:/bin` } });
  t.equal(r.status, 0, r.stdout + r.stderr);
  t.notOk(existsSync(mark), 'npm was not called');
  const prefix = path.join(root, 'opt/hayloft');
  t.equal(readlinkSync(path.join(prefix, 'current')), `releases/${VERSION}`);
  t.ok(existsSync(path.join(prefix, `releases/${VERSION}/node_modules/classic-level/prebuilds/linux-arm64`)), 'dependencies installed, prebuilt');
  t.ok(existsSync(path.join(root, 'etc/systemd/system/hayloft.service')), 'the unit');
  const port = await serve(t, path.join(prefix, 'current'));
  t.equal((await fetch(`http://127.0.0.1:${port}/api/health`)).status, 200, 'the installed release serves');
});
