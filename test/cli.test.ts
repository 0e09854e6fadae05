/**
 * The hayloft command as an operator runs it: first start, offline user and client
 * administration, clear one-line errors (a locked data folder, a bad config, an unknown command).
 */
import { spawn, spawnSync } from 'node:child_process';
import { stripVTControlCharacters } from 'node:util';
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
  t.match(first.stdout, /first start: an administrator and an OAuth2 client for programs were created/);
  t.match(first.stdout, /password: +\(from HAYLOFT_ADMIN_PASSWORD\)/, 'a given password is not echoed');
  t.match(first.stdout, /client secret: {2}\S{20,}/, 'a generated secret is printed once');
  t.match(first.stdout, /admin@hayloft\.local\tadmin\t@/);
  const again = run(['user', 'list'], env);
  t.notMatch(again.stdout, /first start/i, 'only the first start prints credentials');

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

/** `hayloft serve` until it says it serves; then SIGTERM. `tty`: run under a pseudo-terminal (script(1)). */
async function serveOutput(env: Record<string, string>, tty = false): Promise<string> {
  const cmd = [process.execPath, '--import', 'tsx', CLI, 'serve'];
  const quoted = cmd.map((a) => `'${a.replace(/'/g, "'\\''")}'`).join(' ');
  const proc = tty
    ? spawn('script', ['-qefc', quoted, '/dev/null'], { env: { ...process.env, ...env }, stdio: ['pipe', 'pipe', 'pipe'] })
    : spawn(cmd[0] as string, cmd.slice(1), { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  proc.stdout.on('data', (d: Buffer) => (out += d.toString()));
  proc.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<void>((resolve) => proc.on('exit', () => resolve()));
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`server did not start: ${out}`)), 60_000);
      const check = (): void => {
        if (/Hayloft is serving/.test(out)) {
          clearTimeout(timer);
          resolve();
        }
      };
      proc.stdout.on('data', check);
      void exited.then(() => reject(new Error(`server exited: ${out}`)));
    });
  } finally {
    // script(1) passes the signal on to the server it runs.
    proc.kill('SIGTERM');
    await exited;
  }
  return out;
}

const noScript = spawnSync('script', ['--version']).status === 0 ? false : 'no script(1) (util-linux) to run a pseudo-terminal';
t.test('the first start says where the console is and what to type there; logs fit who reads them', { skip: noScript }, async (t) => {
  const base = { HAYLOFT_HOST: '127.0.0.1', HAYLOFT_PORT: '0', HAYLOFT_HTTPS_PORT: '0', HAYLOFT_TZ: 'UTC', HAYLOFT_HISTORY_MIN_FREE_BYTES: String(8 * 1024 * 1024), HAYLOFT_ADMIN_PASSWORD: 'first-admin-pw' };

  // A pipe (as journald or a program reads it): JSON lines, and the message between them.
  const piped = await serveOutput({ ...base, HAYLOFT_DATA_DIR: tempDir(t) });
  const lines = piped.split('\n');
  const serving = lines.filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>).find((j) => j.msg === 'Hayloft is serving');
  t.ok(serving, 'JSON log lines on a pipe');
  const port = serving?.port as number;
  const httpsPort = serving?.httpsPort as number;
  const tls = lines.filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>).find((j) => typeof j.fingerprint256 === 'string');
  const message = piped.slice(piped.indexOf('==='), piped.lastIndexOf('===') + 3);
  t.match(message, `http://127.0.0.1:${port}/`, 'the console over HTTP');
  t.match(message, `https://127.0.0.1:${httpsPort}/`, 'over HTTPS');
  t.match(message, String(tls?.fingerprint256), 'with the certificate fingerprint');
  t.match(message, /user: +admin@hayloft\.local\n +password: +\(from HAYLOFT_ADMIN_PASSWORD\)/, 'the user and password to type');
  t.ok(message.indexOf('https://') < message.indexOf('client secret'), "programs' credentials come after the console's");
  t.match(message, /client id: +hayloft\n +client secret: +\S{20,}/, "the programs' client");

  // A terminal: one readable line per entry, chosen by itself; and the setting overrides.
  const dir = tempDir(t);
  const coloured = await serveOutput({ ...base, HAYLOFT_DATA_DIR: dir }, true);
  t.not(stripVTControlCharacters(coloured), coloured, 'in colour on a terminal');
  const tty = stripVTControlCharacters(coloured);
  t.match(tty, /^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] INFO: Hayloft is serving/m, 'time, level and message on a terminal');
  t.notMatch(tty, /^\{"level"/m, 'no JSON on a terminal');
  t.notMatch(tty, /"runtime"|"hostname"/, 'without the fields that only programs need');
  const forcedJson = await serveOutput({ ...base, HAYLOFT_DATA_DIR: dir, HAYLOFT_LOG_FORMAT: 'json' }, true);
  t.match(forcedJson, /^\{"level":30.*"msg":"Hayloft is serving"/m, 'logFormat: json on a terminal');
  const forcedPretty = await serveOutput({ ...base, HAYLOFT_DATA_DIR: dir, HAYLOFT_LOG_FORMAT: 'pretty' });
  t.match(forcedPretty, /^\[[^\]]+\] INFO: Hayloft is serving \{"dataDir"/m, 'logFormat: pretty on a pipe (no colours there)');
  t.notMatch(forcedPretty, /First start|first start/, 'the message is shown once');
  const bad = run(['check-config'], { ...base, HAYLOFT_DATA_DIR: dir, HAYLOFT_LOG_FORMAT: 'fancy' });
  t.match(bad.stderr, /logFormat \(from HAYLOFT_LOG_FORMAT\): expected auto, pretty or json/, 'a bad setting is named');
});
