/**
 * The hayloft command as an operator runs it: first start, offline user and client
 * administration, clear one-line errors (a locked data folder, a bad config, an unknown command).
 */
import { spawn, spawnSync } from 'node:child_process';
import t from 'tap';
import { tempDir } from './helpers/tmp.js';

const CLI = new URL('../src/cli.ts', import.meta.url).pathname;

function run(args: string[], env: Record<string, string>): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, ['--import', 'tsx', CLI, ...args], { env: { ...process.env, ...env }, encoding: 'utf8', timeout: 60_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

t.test('offline administration of users and clients', async (t) => {
  const dir = tempDir(t);
  const env = { HAYLOFT_DATA_DIR: dir, HAYLOFT_ADMIN_PASSWORD: 'first-admin-pw' };
  const first = run(['user', 'list'], env);
  t.equal(first.status, 0, first.stderr);
  t.match(first.stdout, /First start: an administrator and an OAuth2 client were created/);
  t.match(first.stdout, /admin password: \(from HAYLOFT_ADMIN_PASSWORD\)/, 'a given password is not echoed');
  t.match(first.stdout, /client secret: {2}\S{20,}/, 'a generated secret is printed once');
  t.match(first.stdout, /admin@hayloft\.local\tadmin\t@/);
  const again = run(['user', 'list'], env);
  t.notMatch(again.stdout, /First start/, 'only the first start prints credentials');

  const add = run(['user', 'add', 'tech@example.com', '--role', 'admin'], env);
  t.equal(add.status, 0, add.stderr);
  t.match(add.stdout, /user tech@example.com added; password: \S{12,}/);
  t.equal(run(['user', 'add', 'tech@example.com'], env).status, 1, 'adding twice fails');
  const pw = run(['user', 'passwd', 'tech@example.com', '--password', 'another-password'], env);
  t.match(pw.stdout, /password of tech@example.com set; its sessions were logged out/);
  const weak = run(['user', 'passwd', 'tech@example.com', '--password', 'short'], env);
  t.equal(weak.status, 1);
  t.match(weak.stderr, /^hayloft: the password must have at least 8 characters\n$/, 'one clear line, no stack');
  t.match(run(['user', 'list'], env).stdout, /tech@example.com/);
  t.equal(run(['user', 'remove', 'tech@example.com'], env).status, 0);
  t.notMatch(run(['user', 'list'], env).stdout, /tech@example.com/);

  const c = run(['client', 'add', 'scada', '--secret', 'scada-secret-0123456789'], env);
  t.match(c.stdout, /^client scada added\n$/);
  t.same(run(['client', 'list'], env).stdout.trim().split('\n').sort(), ['hayloft', 'scada']);
  t.equal(run(['client', 'remove', 'scada'], env).status, 0);
  t.equal(run(['client', 'remove', 'scada'], env).status, 1);
});

t.test('errors an operator can act on', async (t) => {
  const dir = tempDir(t);
  const bad = run(['check-config'], { HAYLOFT_DATA_DIR: dir, HAYLOFT_PORT: 'eighty', HAYLOFT_TZ: 'Mars' });
  t.equal(bad.status, 1);
  t.match(bad.stderr, /port \(from HAYLOFT_PORT\)/);
  t.match(bad.stderr, /tz \(from HAYLOFT_TZ\)/, 'every problem at once');
  t.notMatch(bad.stderr, /\n\s+at /, 'no stack trace');
  const badBacnet = run(['check-config'], { HAYLOFT_DATA_DIR: dir, HAYLOFT_BACNET_INTERFACE: 'eth0', HAYLOFT_BACNET_PORT: '0' });
  t.equal(badBacnet.status, 1);
  t.match(badBacnet.stderr, /bacnetInterface \(from HAYLOFT_BACNET_INTERFACE\): expected an IPv4 address of this host/);
  t.match(badBacnet.stderr, /bacnetPort \(from HAYLOFT_BACNET_PORT\): expected an integer from 1 to 65535, got "0"/);
  const good = run(['check-config'], { HAYLOFT_DATA_DIR: dir, HAYLOFT_BACNET_INTERFACE: '192.168.1.20', HAYLOFT_BACNET_PORT: '47809' });
  t.equal(good.status, 0, good.stderr);
  t.match(good.stdout, /"bacnetInterface": "192\.168\.1\.20",\n\s+"bacnetPort": 47809,\n\s+"bacnetTimeoutMs": 3000,/, 'check-config shows the BACnet keys');
  const unknown = run(['frobnicate'], { HAYLOFT_DATA_DIR: dir });
  t.equal(unknown.status, 2);
  t.match(unknown.stderr, /unknown command "frobnicate"/);
  t.match(run(['version'], {}).stdout, /^hayloft \d+\.\d+\.\d+\n$/);

  // A running server holds the data folder: the offline commands say so clearly.
  const server = spawn(process.execPath, ['--import', 'tsx', CLI, 'serve'], {
    env: { ...process.env, HAYLOFT_DATA_DIR: dir, HAYLOFT_PORT: '0', HAYLOFT_HTTPS_PORT: '0', HAYLOFT_HOST: '127.0.0.1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start: ${out}`)), 60_000);
    server.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('Hayloft is serving')) {
        clearTimeout(timer);
        resolve();
      }
    });
  });
  const locked = run(['user', 'list'], { HAYLOFT_DATA_DIR: dir });
  t.equal(locked.status, 1);
  t.match(locked.stderr, /is in use by another process \(is Hayloft already running\?\)/);
  const exited = new Promise<number | null>((resolve) => server.on('exit', (code) => resolve(code)));
  server.kill('SIGTERM');
  t.equal(await exited, 0, 'SIGTERM stops the server cleanly');
  t.match(out, /"msg":"stopped"/);
});
