/**
 * Shared benchmark plumbing: interleaved rounds with medians (this machine is shared and noisy,
 * so a single run means little), and writing a figure section into docs/performance.md between
 * `<!-- bench:NAME:start -->` and `<!-- bench:NAME:end -->` markers.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
}

/**
 * Runs each case `rounds` times, interleaved (A B C A B C ...) so drift in machine load hits all
 * cases alike; returns the median milliseconds per case. `warmup` rounds are run and discarded.
 */
export function measure(cases: Record<string, () => unknown>, rounds: number, warmup = 2): Record<string, number> {
  const times: Record<string, number[]> = {};
  for (const name of Object.keys(cases)) times[name] = [];
  for (let r = 0; r < warmup + rounds; r++) {
    for (const [name, f] of Object.entries(cases)) {
      const t0 = performance.now();
      const out = f();
      const dt = performance.now() - t0;
      if (out === undefined) throw new Error(`case ${name} returned nothing: a benchmark must use its result`);
      if (r >= warmup) (times[name] as number[]).push(dt);
    }
  }
  const med: Record<string, number> = {};
  for (const [name, xs] of Object.entries(times)) med[name] = median(xs);
  return med;
}

export function machineLine(): string {
  const cpus = os.cpus();
  return `${cpus.length} × ${cpus[0]?.model ?? 'unknown CPU'}, Node ${process.version}, ${new Date().toISOString().slice(0, 10)}`;
}

export function fmtRate(perSec: number): string {
  if (perSec >= 1e6) return `${(perSec / 1e6).toFixed(2)} M`;
  if (perSec >= 1e3) return `${(perSec / 1e3).toFixed(1)} k`;
  return perSec.toFixed(0);
}

/** Replaces (or appends) the section of docs/performance.md between this benchmark's markers. */
export function recordSection(name: string, markdown: string, file = 'docs/performance.md'): void {
  const start = `<!-- bench:${name}:start -->`;
  const end = `<!-- bench:${name}:end -->`;
  let doc = readFileSync(file, 'utf8');
  const block = `${start}\n${markdown.trim()}\n${end}`;
  const i = doc.indexOf(start);
  const j = doc.indexOf(end);
  if (i >= 0 && j > i) doc = doc.slice(0, i) + block + doc.slice(j + end.length);
  else doc = doc.trimEnd() + '\n\n' + block + '\n';
  writeFileSync(file, doc);
}

/** The number after `--name` on the command line, or `def` when the option is absent. */
export function numberArg(name: string, def: number): number {
  const args = process.argv.slice(2);
  const i = args.indexOf(name);
  if (i < 0) return def;
  const n = Number(args[i + 1]);
  if (!Number.isFinite(n)) throw new Error(`${name} needs a number`);
  return n;
}

/** The word after `--name` on the command line, or undefined when the option is absent. */
export function stringArg(name: string): string | undefined {
  const args = process.argv.slice(2);
  const i = args.indexOf(name);
  if (i < 0) return undefined;
  const v = args[i + 1];
  if (v === undefined || v.startsWith('--')) throw new Error(`${name} needs a value`);
  return v;
}

/** Whether `--name` is on the command line. */
export function hasFlag(name: string): boolean {
  return process.argv.slice(2).includes(name);
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** The administrator and client a benchmark's daemon is started with. */
export const BENCH_ADMIN = { username: 'bench@example.com', password: 'bench-password-1' };
export const BENCH_CLIENT = { id: 'bench', secret: 'bench-client-secret-0123456789' };

export interface Daemon {
  proc: ChildProcess;
  /** The server process's own pid (from its "Hayloft is serving" line: the pid started, which exec'd node). */
  pid: number;
  port: number;
  base: string;
  dir: string;
  /** Started under a wrapper (strace...): stopped by signalling the server itself. */
  wrapped: boolean;
}

export interface DaemonOptions {
  /** The data folder to use (kept by stopDaemon unless asked): default a fresh temp folder. */
  dir?: string;
  /** A command the daemon runs under, e.g. ['strace', '-f', ...]: it gets node and its args. */
  wrap?: string[];
  /**
   * In a process group of its own (as systemd starts a service, or a shell a job), so that
   * everything the start leaves running can be measured together: its leader is `proc.pid`.
   */
  ownGroup?: boolean;
}

/**
 * `hayloft serve` as a user starts it: the `hayloft` command (bin/hayloft, which execs node with
 * the daemon's runtime settings: one process) on the compiled code, a fresh data folder, no Node
 * flags and no GLIBC_TUNABLES from this process, HTTP and HTTPS on ephemeral ports of 127.0.0.1.
 */
export async function startDaemon(args: string[] = [], extraEnv: Record<string, string> = {}, opts: DaemonOptions = {}): Promise<Daemon> {
  // The command as installed (bin/hayloft, copied by scripts/bench.mjs): it execs this Node on
  // dist-bench/dist/cli.js (the bundle of src/, as `npm run build` makes it) with the daemon's runtime settings.
  const bin = new URL('../bin/hayloft', import.meta.url).pathname;
  const dir = opts.dir ?? mkdtempSync(path.join(os.tmpdir(), 'hayloft-bench-'));
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    HAYLOFT_DATA_DIR: dir,
    HAYLOFT_HOST: '127.0.0.1',
    HAYLOFT_PORT: '0',
    HAYLOFT_HTTPS_PORT: '0',
    HAYLOFT_TZ: 'UTC',
    HAYLOFT_LOG_LEVEL: 'info',
    HAYLOFT_ADMIN_USER: BENCH_ADMIN.username,
    HAYLOFT_ADMIN_PASSWORD: BENCH_ADMIN.password,
    HAYLOFT_CLIENT_ID: BENCH_CLIENT.id,
    HAYLOFT_CLIENT_SECRET: BENCH_CLIENT.secret,
    ...extraEnv,
  };
  // As a user starts it: the runtime settings come from the program, not from this process.
  delete env.NODE_OPTIONS;
  delete env.GLIBC_TUNABLES;
  delete env.HAYLOFT_RELAUNCHED;
  // To look inside a run, BENCH_DAEMON_NODE names a script the bin runs instead of node (e.g.
  // `exec node --cpu-prof --cpu-prof-dir=/tmp/prof "$@"`); never set for recorded figures.
  env.HAYLOFT_NODE = process.env.BENCH_DAEMON_NODE ?? process.execPath;
  const command = [bin, 'serve', ...args];
  const wrap = opts.wrap ?? [];
  const argv = [...wrap, ...command];
  const proc = spawn(argv[0] as string, argv.slice(1), { env, stdio: ['ignore', 'pipe', 'inherit'], detached: opts.ownGroup === true });
  const { port, pid } = await new Promise<{ port: number; pid: number }>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`the server did not start: ${out}`)), 60_000);
    proc.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
      for (const line of out.split('\n')) {
        if (!line.includes('Hayloft is serving')) continue;
        const j = JSON.parse(line) as { port: number; pid: number };
        clearTimeout(timer);
        resolve(j);
      }
      // The log goes on (uplink passes, polls): keep only the unfinished line.
      out = out.slice(out.lastIndexOf('\n') + 1);
    });
  });
  return { proc, pid, port, base: `http://127.0.0.1:${port}`, dir, wrapped: wrap.length > 0 };
}

/** Stops the daemon (SIGTERM, as systemd does) and removes its data folder unless `keep`. */
export async function stopDaemon(d: Daemon, keep = false): Promise<void> {
  const exited = d.proc.exitCode !== null || d.proc.signalCode !== null ? Promise.resolve() : new Promise((r) => d.proc.on('exit', r));
  // A wrapper (strace) would not pass the signal on: the server gets it.
  if (d.wrapped) process.kill(d.pid, 'SIGTERM');
  else d.proc.kill('SIGTERM');
  await exited;
  if (!keep) rmSync(d.dir, { recursive: true, force: true });
}

/** Counters of /proc/<pid>/io (bytes and calls; write_bytes is what reached the block layer). */
export function procIo(pid: number): Record<'rchar' | 'wchar' | 'syscr' | 'syscw' | 'read_bytes' | 'write_bytes' | 'cancelled_write_bytes', number> {
  const out: Record<string, number> = {};
  for (const line of readFileSync(`/proc/${pid}/io`, 'utf8').split('\n')) {
    const [k, v] = line.split(':');
    if (k !== undefined && v !== undefined) out[k.trim()] = Number(v.trim());
  }
  return out;
}

/** CPU time of the process, user and system, in milliseconds (/proc/<pid>/stat, all threads). */
export function procCpuMs(pid: number): { user: number; system: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may hold spaces), counted from field 3 (state).
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const tick = 1000 / CLOCK_TICKS;
  return { user: Number(f[11]) * tick, system: Number(f[12]) * tick };
}

/** USER_HZ: 100 on every Linux this runs on (getconf CLK_TCK). */
const CLOCK_TICKS = 100;

/** An access token for the bench administrator. */
export async function loginDaemon(base: string): Promise<string> {
  const res = await fetch(`${base}/oauth2/token`, {
    method: 'POST',
    headers: { authorization: 'Basic ' + Buffer.from(`${BENCH_CLIENT.id}:${BENCH_CLIENT.secret}`).toString('base64'), 'content-type': 'application/json' },
    body: JSON.stringify({ grant_type: 'password', ...BENCH_ADMIN }),
  });
  if (!res.ok) throw new Error(`login: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { access_token: string }).access_token;
}

/** POSTs a JSON grid to an op; throws on an error answer. */
export async function postOp(base: string, token: string, op: string, body: string): Promise<{ rows: Record<string, string>[] }> {
  const res = await fetch(`${base}/api/${op}`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json' }, body });
  const text = await res.text();
  if (!res.ok || text.includes('"err"')) throw new Error(`${op}: ${res.status} ${text.slice(0, 300)}`);
  return JSON.parse(text) as { rows: Record<string, string>[] };
}

/** A JSON v3 grid of plain JSON-encoded rows (`"m:"`, `"r:id"`...), its columns the union of the rows' keys. */
export function jsonGrid(rows: object[], meta: Record<string, string> = {}): string {
  const names = new Set<string>();
  for (const r of rows) for (const k of Object.keys(r)) names.add(k);
  return JSON.stringify({ meta: { ver: '3.0', ...meta }, cols: [...names].map((name) => ({ name })), rows });
}

/**
 * The timestamps (ms) of a point's samples in [start, end), read back with hisRead over HTTP
 * (JSON), as a client sees what was stored.
 */
export async function hisReadTimes(base: string, token: string, id: string, start: number, end: number): Promise<number[]> {
  const iso = (t: number): string => `${new Date(t).toISOString().slice(0, 19)}Z UTC`;
  // Whole seconds around the span, then filtered here: the range's ends are the server's business.
  const range = encodeURIComponent(`${iso(Math.floor(start / 1000) * 1000 - 1000)},${iso(Math.ceil(end / 1000) * 1000 + 1000)}`);
  const res = await fetch(`${base}/api/hisRead?id=@${id}&range=${range}`, { headers: { authorization: `Bearer ${token}`, accept: 'application/json' } });
  const text = await res.text();
  if (!res.ok) throw new Error(`hisRead ${id}: ${res.status} ${text.slice(0, 300)}`);
  const out: number[] = [];
  for (const row of (JSON.parse(text) as { rows: { ts: string }[] }).rows) {
    const t = Date.parse(row.ts.slice(2).split(' ')[0] as string);
    if (t >= start && t < end) out.push(t);
  }
  return out;
}

/** Runs `work` over `items` with `lanes` in flight, in order of items. */
export async function inLanes<T>(items: T[], lanes: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < items.length) await work(items[next++] as T);
  };
  await Promise.all(Array.from({ length: lanes }, lane));
}

export interface Bare {
  pid: number;
  base: string;
  stop(): Promise<void>;
}

/**
 * The baseline server, its own process: node:http answering every request (GET or POST, whose
 * body it reads) with a fixed 100-byte JSON body, or with `/bytes/<n>` bytes of a buffer made
 * once, which a history read of the same size is compared with.
 */
export async function startBare(): Promise<Bare> {
  const program = `
const http = require('node:http');
const body = Buffer.from(JSON.stringify({ meta: { ver: '3.0' }, cols: [{ name: 'empty' }], rows: [] }).padEnd(100, ' '));
const big = Buffer.alloc(64 * 1024 * 1024, 0x61);
const server = http.createServer((req, res) => {
  req.on('data', () => {});
  req.on('end', () => {
    const m = /^\\/bytes\\/(\\d+)$/.exec(req.url);
    const out = m === null ? body : big.subarray(0, Math.min(Number(m[1]), big.length));
    res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': out.length });
    res.end(out);
  });
});
server.listen(0, '127.0.0.1', () => process.stdout.write(String(server.address().port) + '\\n'));
`;
  const proc = spawn(process.execPath, ['-e', program], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<number>((resolve, reject) => {
    proc.stdout?.once('data', (d: Buffer) => resolve(Number(d.toString().trim())));
    proc.once('exit', (code) => reject(new Error(`the bare server ended (${code})`)));
  });
  return {
    pid: proc.pid as number,
    base: `http://127.0.0.1:${port}`,
    async stop() {
      const exited = new Promise((r) => proc.once('exit', r));
      proc.kill('SIGTERM');
      await exited;
    },
  };
}
