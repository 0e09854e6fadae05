/**
 * `hayloft serve` as a child process (the CLI, as systemd runs it) for tests that stop or kill the
 * server: on a data folder, with HAYLOFT_* variables and the test administrator and client on
 * first start; resolves once it serves, logged in as the admin.
 */
import { type ChildProcessByStdio, spawn } from 'node:child_process';
import { MALLOC_TUNABLES, nodeFlags } from '../../src/lib/runtime.js';
import type { Readable } from 'node:stream';
import type { Test } from 'tap';
import { ADMIN, CLIENT, tokenRequest } from './app.js';

const CLI = new URL('../../src/cli.ts', import.meta.url).pathname;
const BIN = new URL('../../bin/hayloft', import.meta.url).pathname;

export interface Child {
  proc: ChildProcessByStdio<null, Readable, Readable>;
  base: string;
  port: number;
  /** The HTTPS address (self-signed certificate) when HTTPS serves. */
  httpsBase: string | undefined;
  /** The server's own pid (its "Hayloft is serving" line): the pid of `proc` (one process, started with tsx here). */
  pid: number;
  auth: Record<string, string>;
  /** Resolves with the signal (or exit code) once the process has ended. */
  exited: Promise<string | number | null>;
}

/**
 * Starts `hayloft serve` (the CLI, as systemd runs it) on a data folder with HAYLOFT_* variables,
 * the test administrator and client on first start; resolves once it serves, logged in as admin.
 * `args` follow `serve` (`--demo`); `nodeArgs` go to Node before the CLI (`--import` a hook).
 * `built`: the build (`npm run build`'s bundle in dist/) by its command, bin/hayloft, as an
 * installed release runs; else src/ through tsx.
 */
export async function serveChild(t: Test, dir: string, env: Record<string, string> = {}, args: string[] = [], nodeArgs: string[] = [], built = false): Promise<Child> {
  // With the daemon's runtime settings, as bin/hayloft (and so systemd) starts it: memory as deployed.
  // tap gives every child its NODE_OPTIONS (tsx's loader): env(1) unsets it for the build.
  const argv = built ? ['env', '-u', 'NODE_OPTIONS', BIN, 'serve', ...args] : [process.execPath, ...nodeFlags(), '--import', 'tsx', ...nodeArgs, CLI, 'serve', ...args];
  const proc = spawn(argv[0] as string, argv.slice(1), {
    env: {
      ...process.env,
      HAYLOFT_NODE: process.execPath,
      GLIBC_TUNABLES: [process.env.GLIBC_TUNABLES, ...MALLOC_TUNABLES].filter((x) => x !== undefined && x !== '').join(':'),
      HAYLOFT_DATA_DIR: dir,
      HAYLOFT_HOST: '127.0.0.1',
      HAYLOFT_PORT: '0',
      HAYLOFT_HTTPS_PORT: '0',
      HAYLOFT_TZ: 'UTC',
      HAYLOFT_LOG_LEVEL: 'info',
      HAYLOFT_ADMIN_USER: ADMIN.username,
      HAYLOFT_ADMIN_PASSWORD: ADMIN.password,
      HAYLOFT_CLIENT_ID: CLIENT.id,
      HAYLOFT_CLIENT_SECRET: CLIENT.secret,
      // A test machine's free disk is not a gateway's: the default floor (512 MiB) would refuse
      // history on a nearly full CI disk. The floor itself is tested on its own tmpfs
      // (test/store/disk-full.test.ts).
      HAYLOFT_HISTORY_MIN_FREE_BYTES: String(8 * 1024 * 1024),
      // Nor is its clock a gateway's: tests write history dated years back, which the default
      // retention (730 days, the store bounded at 4 GiB) would remove mid-test. Retention is
      // tested where it is asked for (test/store/retention.test.ts, test/api/retention.test.ts).
      HAYLOFT_HISTORY_RETENTION_DAYS: '0',
      HAYLOFT_HISTORY_MAX_BYTES: '0',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise<string | number | null>((resolve) => proc.on('exit', (code, signal) => resolve(signal ?? code)));
  t.teardown(() => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
  });
  let out = '';
  let err = '';
  proc.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const { port, pid, httpsPort } = await new Promise<{ port: number; pid: number; httpsPort: number | undefined }>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`hayloft did not start: ${out}${err}`)), 60_000);
    void exited.then((how) => reject(new Error(`hayloft exited (${String(how)}) before serving: ${out}${err}`)));
    proc.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      for (const line of out.split('\n')) {
        if (!line.startsWith('{')) continue;
        try {
          const j = JSON.parse(line) as { msg?: string; port?: number; pid?: number; httpsPort?: number };
          if (j.msg === 'Hayloft is serving' && typeof j.port === 'number') {
            clearTimeout(timer);
            resolve({ port: j.port, pid: j.pid ?? (proc.pid as number), httpsPort: typeof j.httpsPort === 'number' && j.httpsPort > 0 ? j.httpsPort : undefined });
          }
        } catch {
          // a partial line: wait for the rest
        }
      }
      // Keep only the last partial line: the log grows with every uplink pass.
      if (out.length > 100_000) out = out.slice(-10_000);
    });
  });
  const base = `http://127.0.0.1:${port}`;
  const a = await tokenRequest(base, { grant_type: 'password', username: ADMIN.username, password: ADMIN.password });
  if (a.status !== 200) throw new Error(`login: ${a.status} ${JSON.stringify(a.body)}`);
  return { proc, base, port, pid, httpsBase: httpsPort === undefined ? undefined : `https://127.0.0.1:${httpsPort}`, auth: { authorization: `Bearer ${a.body.access_token as string}` }, exited };
}
