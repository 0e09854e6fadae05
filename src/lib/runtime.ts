/**
 * The runtime settings `hayloft serve` needs from Node and the C library.
 *
 * Both kinds are read once at process start and cannot be changed later: V8 sizes the young
 * generation when it sets up the heap (`--max-semi-space-size`), and glibc reads its malloc
 * tunables when the process starts. So they are given where every usual start already passes:
 * the `hayloft` command (bin/hayloft, a small shell launcher that execs Node with them: the npm
 * bin, `npm start`, scripts/install.sh's command and so the systemd unit). One process, the pid
 * that was started.
 *
 * A start that bypasses the command (`node dist/cli.js serve` in a container) is caught here:
 * on Node 22.15 and later `serve` replaces itself with a Node that has them (`process.execve`:
 * same pid, nothing left behind, one more Node start-up); on older Node it runs without them and
 * says so, rather than keeping a second Node process alive as a launcher (which cost a Pi more
 * than the settings save: issue 33).
 *
 * Why these settings (figures in docs/performance.md):
 * - `--max-semi-space-size=4 --heap-growing-percent=30`: a 4 MiB young generation (not 3 x 16)
 *   and an old generation collected at 30 % growth keep the resident size of a polling daemon
 *   near its live data.
 * - `glibc.malloc.mmap_threshold`: glibc raises its mmap threshold after freeing a large block,
 *   so the next 16 MiB scrypt buffer (one per login, in libuv's worker threads) comes from a
 *   thread's arena and stays resident for the life of the process (+16 MiB per pool thread).
 *   A fixed threshold keeps every block of 1 MiB or more in its own mapping, given back on free.
 * - `glibc.malloc.arena_max=2`: glibc gives each thread that allocates (libuv's pool, LevelDB's
 *   compaction, V8's compile and GC threads) an arena of its own, up to 8 per core, each keeping
 *   its freed memory; two arenas shared by all: -0.7 to -1.9 MiB idle on Node 24 (the demo the
 *   same within noise), 5-7 MB less while polling 10,000 points, with the same CPU (bench/poll) and requests per CPU-second
 *   (read by id, `read point and his`) within noise (docs/performance.md).
 * - `--no-maglev`: no mid-tier optimising compiler (Node 22 and 24; Node 20's V8 has it off
 *   already, so the flag changes nothing there). Its code in the `node` binary and its compile
 *   threads' memory stay resident once it has run, which every start does: -2.3 MiB idle on
 *   Node 24. Hot code is still optimised by TurboFan: read by id and `read point and his` cost
 *   the same daemon CPU per request with and without it (docs/performance.md).
 * - `--invocation-count-for-turbofan=10000` (Node 22 and 24; Node 20's V8 has no such counter):
 *   TurboFan optimises a function after 10,000 invocations' worth of its code, not 3,000. A start
 *   runs Node's module resolution (its path functions loop over every path) past 3,000, and the
 *   first optimisation pages in TurboFan's own code, about 6 MiB of the `node` binary, resident
 *   from then on in a gateway that only idles: idle 69-70 -> 63-64 MiB on Node 24 (with the
 *   bundle, scripts/build-server.mjs). Code that runs hot (polling, requests) is still optimised,
 *   a little later (docs/performance.md, "One bundle").
 * - `--bytecode-old-age=2`: the bytecode of a function not run for 2 full collections is dropped
 *   (V8's default: 5 on Node 20, 6 on 24), and compiled again if it runs again. Most of a start's
 *   code (configuration, migrations, the first-start setup, the parts' start) runs once: -1.0 to
 *   -1.4 MiB in the demo on Node 24. What runs often never ages.
 */

/** The V8 flags of the daemon. */
export const NODE_FLAGS: readonly string[] = ['--max-semi-space-size=4', '--heap-growing-percent=30', '--no-maglev', '--bytecode-old-age=2'];

/** glibc malloc tunables (GLIBC_TUNABLES); ignored by other C libraries. */
export const MALLOC_TUNABLES: readonly string[] = ['glibc.malloc.mmap_threshold=1048576', 'glibc.malloc.arena_max=2'];

/**
 * V8 flags of the daemon on Node 22 and later only: Node 20's V8 has no such setting and refuses
 * to start with it (bin/hayloft asks `node --version`).
 */
export const LATER_NODE_FLAGS: readonly string[] = ['--invocation-count-for-turbofan=10000'];

/** The V8 flags of the daemon on this Node (`v22.1.0`: NODE_FLAGS and LATER_NODE_FLAGS). */
export function nodeFlags(version = process.version): readonly string[] {
  return Number(/^v(\d+)/.exec(version)?.[1] ?? 0) >= 22 ? [...NODE_FLAGS, ...LATER_NODE_FLAGS] : NODE_FLAGS;
}

/** Set in the environment of the restarted process: it never restarts itself again. */
export const RELAUNCHED_ENV = 'HAYLOFT_RELAUNCHED';

export interface Missing {
  /** V8 flags not given on the command line or in NODE_OPTIONS. */
  flags: string[];
  /** GLIBC_TUNABLES to start with, or undefined when it already has every tunable. */
  tunables: string | undefined;
}

/** A flag's name: `--max_semi_space_size=8` and `--max-semi-space-size` alike; `--maglev` and `--no-maglev` alike. */
const flagName = (arg: string): string => (arg.split('=')[0] as string).replace(/_/g, '-').replace(/^--no-/, '--');

/**
 * What of the runtime settings this process started without. A flag given with another value
 * (`--max-semi-space-size=8`) counts as given: an operator's choice wins.
 */
export function missingSettings(execArgv: readonly string[], env: Readonly<Record<string, string | undefined>>, platform = process.platform, version = process.version): Missing {
  const given = new Set([...execArgv, ...(env.NODE_OPTIONS ?? '').split(/\s+/)].filter((a) => a.startsWith('--')).map(flagName));
  const flags = nodeFlags(version).filter((f) => !given.has(flagName(f)));
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
 * Replaces this process with one that has the missing runtime settings, when some are missing,
 * it was not restarted already and Node can exec (22.15+). Returns when this process is the one
 * to run the program: with the settings, or without them where they cannot be applied
 * (`unappliedSettings` then says which, for the start-up log).
 */
export function relaunchWithRuntimeSettings(): void {
  if (process.env[RELAUNCHED_ENV] !== undefined) return;
  const missing = missingSettings(process.execArgv, process.env);
  if (missing.flags.length === 0 && missing.tunables === undefined) return;
  const execve = (process as { execve?: (file: string, args: string[], env: NodeJS.ProcessEnv) => never }).execve;
  if (typeof execve !== 'function') return;
  const env: NodeJS.ProcessEnv = { ...process.env, [RELAUNCHED_ENV]: '1' };
  if (missing.tunables !== undefined) env.GLIBC_TUNABLES = missing.tunables;
  const args = [...process.execArgv, ...missing.flags, ...process.argv.slice(1)];
  try {
    execve.call(process, process.execPath, [process.execPath, ...args], env);
  } catch (e) {
    // Cannot exec (under qemu-user without binfmt, say): run as started rather than not at all.
    process.stderr.write(`hayloft: cannot restart with the runtime settings (${(e as Error).message}); running without them\n`);
  }
}

/** The runtime settings this process runs without (after relaunchWithRuntimeSettings), or undefined. */
export function unappliedSettings(): Missing | undefined {
  const missing = missingSettings(process.execArgv, process.env);
  return missing.flags.length === 0 && missing.tunables === undefined ? undefined : missing;
}

/** The runtime settings in effect, for the start-up log line (the tests read it). */
export function runtimeReport(): { nodeFlags: string[]; mallocTunables: string | null } {
  const ours = new Set([...NODE_FLAGS, ...LATER_NODE_FLAGS].map(flagName));
  const nodeFlags = [...process.execArgv, ...(process.env.NODE_OPTIONS ?? '').split(/\s+/)].filter((a) => ours.has(flagName(a)));
  return { nodeFlags, mallocTunables: process.platform === 'linux' ? (process.env.GLIBC_TUNABLES ?? null) : null };
}
