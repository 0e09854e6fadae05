/**
 * The runtime settings `hayloft serve` needs from Node and the C library, applied by the program
 * itself however it was started (the installed command, `npx hayloft`, the systemd unit,
 * `node dist/cli.js` in a container), so every start runs the same daemon.
 *
 * Both kinds are read once at process start and cannot be changed later: V8 sizes the young
 * generation when it sets up the heap (`--max-semi-space-size`), and glibc reads its malloc
 * tunables when the process starts. So when one is missing, `serve` starts the process again with
 * them, before loading anything else:
 * - Node 22.15 and later: `process.execve`, which replaces the process (same pid, nothing left
 *   behind; what systemd and a supervisor see does not change);
 * - older Node (20, end of life): a child process with the settings, which this process waits
 *   for. It forwards the stopping signals, and the child ends itself at once (SIGKILL) when this
 *   launcher disappears without one (killed with -9), so the pair behaves as one process.
 *
 * Why these settings (figures in docs/performance.md):
 * - `--max-semi-space-size=4 --heap-growing-percent=30`: a 4 MiB young generation (not 3 x 16)
 *   and an old generation collected at 30 % growth keep the resident size of a polling daemon
 *   near its live data.
 * - `glibc.malloc.mmap_threshold`: glibc raises its mmap threshold after freeing a large block,
 *   so the next 16 MiB scrypt buffer (one per login, in libuv's worker threads) comes from a
 *   thread's arena and stays resident for the life of the process (+16 MiB per pool thread).
 *   A fixed threshold keeps every block of 1 MiB or more in its own mapping, given back on free.
 */
import { spawn } from 'node:child_process';

/** The V8 flags of the daemon. */
export const NODE_FLAGS: readonly string[] = ['--max-semi-space-size=4', '--heap-growing-percent=30'];

/** glibc malloc tunables (GLIBC_TUNABLES); ignored by other C libraries. */
export const MALLOC_TUNABLES: readonly string[] = ['glibc.malloc.mmap_threshold=1048576'];

/** Set in the environment of the restarted process: it never restarts itself again. */
export const RELAUNCHED_ENV = 'HAYLOFT_RELAUNCHED';

export interface Missing {
  /** V8 flags not given on the command line or in NODE_OPTIONS. */
  flags: string[];
  /** GLIBC_TUNABLES to start with, or undefined when it already has every tunable. */
  tunables: string | undefined;
}

const flagName = (arg: string): string => (arg.split('=')[0] as string).replace(/_/g, '-');

/**
 * What of the runtime settings this process started without. A flag given with another value
 * (`--max-semi-space-size=8`) counts as given: an operator's choice wins.
 */
export function missingSettings(execArgv: readonly string[], env: Readonly<Record<string, string | undefined>>, platform = process.platform): Missing {
  const given = new Set([...execArgv, ...(env.NODE_OPTIONS ?? '').split(/\s+/)].filter((a) => a.startsWith('--')).map(flagName));
  const flags = NODE_FLAGS.filter((f) => !given.has(flagName(f)));
  let tunables: string | undefined;
  if (platform === 'linux') {
    const have = (env.GLIBC_TUNABLES ?? '').split(':').filter((s) => s !== '');
    const haveNames = new Set(have.map((s) => s.split('=')[0]));
    const add = MALLOC_TUNABLES.filter((s) => !haveNames.has(s.split('=')[0]));
    if (add.length > 0) tunables = [...have, ...add].join(':');
  }
  return { flags, tunables };
}

/**
 * Starts this process again with the missing runtime settings, when some are missing and it was
 * not restarted already. Returns false when this process is the one to run the program; true
 * when a child runs it (older Node: this process only waits for it and ends with its status).
 */
export function relaunchWithRuntimeSettings(): boolean {
  if (process.env[RELAUNCHED_ENV] !== undefined) return false;
  const missing = missingSettings(process.execArgv, process.env);
  if (missing.flags.length === 0 && missing.tunables === undefined) return false;
  const env: NodeJS.ProcessEnv = { ...process.env, [RELAUNCHED_ENV]: '1' };
  if (missing.tunables !== undefined) env.GLIBC_TUNABLES = missing.tunables;
  const args = [...process.execArgv, ...missing.flags, ...process.argv.slice(1)];
  const execve = (process as { execve?: (file: string, args: string[], env: NodeJS.ProcessEnv) => never }).execve;
  if (typeof execve === 'function') {
    try {
      execve.call(process, process.execPath, [process.execPath, ...args], env);
    } catch (e) {
      // Cannot exec (under qemu-user without binfmt, say): run as started rather than not at all.
      process.stderr.write(`hayloft: cannot restart with the runtime settings (${(e as Error).message}); running without them\n`);
      return false;
    }
  }
  const child = spawn(process.execPath, args, { env, stdio: ['inherit', 'inherit', 'inherit', 'ipc'] });
  const forward = (signal: NodeJS.Signals): void => {
    child.kill(signal);
  };
  for (const s of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.on(s, forward);
  child.on('exit', (code, signal) => {
    for (const s of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.off(s, forward);
    if (signal !== null) process.kill(process.pid, signal);
    else process.exit(code ?? 1);
  });
  // The channel stays open only to tell the child when this launcher is gone: it is not a reason
  // for the launcher to stay alive on its own.
  child.channel?.unref();
  return true;
}

/**
 * In a child started by relaunchWithRuntimeSettings on older Node: when the launcher disappears
 * without forwarding a signal (SIGKILL), end at once too, as the single process would have.
 */
export function followLauncher(): void {
  if (process.env[RELAUNCHED_ENV] === undefined || process.channel === undefined) return;
  process.on('disconnect', () => process.kill(process.pid, 'SIGKILL'));
  process.channel.unref();
}

/**
 * The process a supervisor sees: the launcher when this one is its child (older Node), since
 * systemd started, signals and watches that one; otherwise this process.
 */
export function mainPid(): number {
  return process.env[RELAUNCHED_ENV] !== undefined && process.channel !== undefined ? process.ppid : process.pid;
}

/** The runtime settings in effect, for the start-up log line (the tests read it). */
export function runtimeReport(): { nodeFlags: string[]; mallocTunables: string | null } {
  const ours = new Set(NODE_FLAGS.map(flagName));
  const nodeFlags = [...process.execArgv, ...(process.env.NODE_OPTIONS ?? '').split(/\s+/)].filter((a) => ours.has(flagName(a)));
  return { nodeFlags, mallocTunables: process.platform === 'linux' ? (process.env.GLIBC_TUNABLES ?? null) : null };
}
