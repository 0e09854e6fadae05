/**
 * The systemd notify protocol: the notifier's logic with a recording sender, then the real thing
 * end to end: `hayloft serve` under a fake NOTIFY_SOCKET (a unix datagram listener in a small
 * python3 helper, since node:dgram has no unix sockets) must say READY=1, keep the watchdog fed
 * and say STOPPING=1 on SIGTERM. The end-to-end part is skipped where systemd-notify or python3
 * is missing.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import path from 'node:path';
import t from 'tap';
import { silentLogger } from '../../src/lib/log.js';
import { SystemdNotifier, watchdogPeriod } from '../../src/lib/systemd.js';
import { tempDir } from '../helpers/tmp.js';

const CLI = new URL('../../src/cli.ts', import.meta.url).pathname;

t.test('watchdog period: half of WATCHDOG_USEC, for this process only', async (t) => {
  const cases: [Record<string, string>, number | null][] = [
    [{}, null],
    [{ WATCHDOG_USEC: '30000000' }, 15_000],
    [{ WATCHDOG_USEC: '30000000', WATCHDOG_PID: '42' }, 15_000],
    [{ WATCHDOG_USEC: '30000000', WATCHDOG_PID: '43' }, null],
    [{ WATCHDOG_USEC: '0' }, null],
    [{ WATCHDOG_USEC: 'soon' }, null],
    [{ WATCHDOG_USEC: '1000' }, 1],
  ];
  for (const [env, want] of cases) t.equal(watchdogPeriod(env, 42), want, JSON.stringify(env));
});

t.test('notifier: messages in order, keep-alives while healthy, nothing outside systemd', async (t) => {
  const sent: string[][] = [];
  const sender = async (a: readonly string[]): Promise<void> => void sent.push([...a]);
  const off = new SystemdNotifier({ log: silentLogger(), env: { WATCHDOG_USEC: '1000' }, sender });
  t.equal(off.enabled, false);
  await off.ready();
  await off.stopping();
  t.same(sent, [], 'no NOTIFY_SOCKET: nothing sent');

  let healthy = true;
  const n = new SystemdNotifier({ log: silentLogger(), env: { NOTIFY_SOCKET: '/run/x', WATCHDOG_USEC: '40000' }, pid: 7, sender, healthy: () => healthy });
  t.equal(n.watchdogMs, 20);
  await n.ready('serving on 127.0.0.1:8080');
  t.same(sent[0], ['--pid=7', 'READY=1', 'STATUS=serving on 127.0.0.1:8080']);
  await new Promise((r) => setTimeout(r, 110));
  const alive = sent.filter((m) => m[0] === 'WATCHDOG=1').length;
  t.ok(alive >= 2, `keep-alives sent (${alive})`);
  healthy = false;
  const before = sent.length;
  await new Promise((r) => setTimeout(r, 70));
  t.equal(sent.length, before, 'withheld while unhealthy');
  healthy = true;
  await n.stopping();
  t.same(sent.at(-1), ['STOPPING=1', 'STATUS=stopping']);
  const after = sent.length;
  await new Promise((r) => setTimeout(r, 70));
  t.equal(sent.length, after, 'no keep-alives after STOPPING');
});

t.test('notifier: an asynchronous health answer (App.watchdogOk) decides each keep-alive', async (t) => {
  const sent: string[][] = [];
  const sender = async (a: readonly string[]): Promise<void> => void sent.push([...a]);
  let healthy: boolean | 'throws' = true;
  const n = new SystemdNotifier({
    log: silentLogger(),
    env: { NOTIFY_SOCKET: '/run/x', WATCHDOG_USEC: '40000' },
    pid: 7,
    sender,
    healthy: async () => {
      await new Promise((r) => setImmediate(r));
      if (healthy === 'throws') throw new Error('health failed');
      return healthy;
    },
  });
  await n.ready();
  await new Promise((r) => setTimeout(r, 110));
  t.ok(sent.filter((m) => m[0] === 'WATCHDOG=1').length >= 2, 'sent while it answers true');
  healthy = false;
  await new Promise((r) => setTimeout(r, 30));
  let before = sent.length;
  await new Promise((r) => setTimeout(r, 70));
  t.equal(sent.length, before, 'withheld while it answers false');
  healthy = 'throws';
  before = sent.length;
  await new Promise((r) => setTimeout(r, 70));
  t.equal(sent.length, before, 'withheld when asking fails');
  n.stop();
});

t.test('notifier: a failing helper is reported once and never throws', async (t) => {
  const lines: string[] = [];
  const { createLogger } = await import('../../src/lib/log.js');
  const log = createLogger({ level: 'error', destination: { write: (s: string): void => void lines.push(s) } });
  const missing = Object.assign(new Error('spawn systemd-notify ENOENT'), { code: 'ENOENT' });
  const n = new SystemdNotifier({ log, env: { NOTIFY_SOCKET: '/run/x' }, sender: () => Promise.reject(missing) });
  await n.ready();
  await n.stopping();
  t.equal(lines.length, 1, 'one line');
  t.match(lines[0], /systemd-notify is not installed/);
});

function available(cmd: string, args: string[]): boolean {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  return r.status === 0;
}

const skipE2E = !available('systemd-notify', ['--version'])
  ? 'systemd-notify is not installed'
  : !available('python3', ['-c', 'import socket; socket.AF_UNIX'])
    ? 'python3 is not installed'
    : false;

/** A unix datagram listener printing each received line. */
const LISTENER = `
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
print("listening", flush=True)
while True:
    for line in s.recv(65536).decode().split("\\n"):
        if line:
            print(line, flush=True)
`;

function collect(p: ChildProcess, into: string[]): void {
  let buf = '';
  p.stdout?.on('data', (d: Buffer) => {
    buf += d.toString();
    const lines = buf.split('\n');
    buf = lines.pop() ?? '';
    into.push(...lines);
  });
}

async function until(what: string, f: () => boolean, ms = 30_000): Promise<void> {
  const end = Date.now() + ms;
  while (!f()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

t.test('hayloft serve speaks the notify protocol to a fake NOTIFY_SOCKET', { skip: skipE2E }, async (t) => {
  const dir = tempDir(t);
  const sock = path.join(dir, 'notify.sock');
  const heard: string[] = [];
  const listener = spawn('python3', ['-c', LISTENER, sock], { stdio: ['ignore', 'pipe', 'inherit'] });
  t.teardown(() => void listener.kill('SIGKILL'));
  collect(listener, heard);
  await until('the listener', () => heard.includes('listening'), 10_000);

  const server = spawn(process.execPath, ['--import', 'tsx', CLI, 'serve'], {
    env: {
      ...process.env,
      HAYLOFT_DATA_DIR: path.join(dir, 'data'),
      HAYLOFT_HOST: '127.0.0.1',
      HAYLOFT_PORT: '0',
      HAYLOFT_HTTPS_PORT: '0',
      HAYLOFT_LOG_LEVEL: 'warn',
      NOTIFY_SOCKET: sock,
      // 400 ms: a keep-alive every 200 ms.
      WATCHDOG_USEC: '400000',
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  t.teardown(() => void server.kill('SIGKILL'));
  const exited = new Promise<number | null>((resolve) => server.on('exit', (code) => resolve(code)));

  await until('READY=1', () => heard.includes('READY=1'), 60_000);
  t.ok(heard.includes(`MAINPID=${server.pid}`), 'READY names the main process');
  t.ok(heard.some((l) => /^STATUS=serving on 127\.0\.0\.1:\d+$/.test(l)), 'a STATUS line with the address');
  await until('three keep-alives', () => heard.filter((l) => l === 'WATCHDOG=1').length >= 3, 10_000);
  t.ok(heard.indexOf('WATCHDOG=1') > heard.indexOf('READY=1'), 'keep-alives only after READY');

  server.kill('SIGTERM');
  t.equal(await exited, 0, 'a clean exit');
  const stopAt = heard.indexOf('STOPPING=1');
  t.ok(stopAt > heard.indexOf('READY=1'), 'STOPPING=1 after READY=1');
  t.equal(heard.slice(stopAt).filter((l) => l === 'WATCHDOG=1').length, 0, 'no keep-alive after STOPPING');
});
