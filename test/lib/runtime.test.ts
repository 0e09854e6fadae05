/**
 * The daemon's runtime settings (src/lib/runtime.ts): which are missing from a start; the
 * `hayloft` command (bin/hayloft) giving them and leaving one process; `hayloft serve` started
 * plainly (`node cli.js serve`, as a container does): replaced by a node with them where Node can
 * exec, else running as started and saying so. Reported in the start-up line.
 */
import { execFileSync, spawn } from 'node:child_process';
import { readFileSync, statSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import t, { type Test as Tap } from 'tap';
import { LATER_NODE_FLAGS, MALLOC_TUNABLES, NODE_FLAGS, missingSettings, nodeFlags } from '../../src/lib/runtime.js';
import { groupPids } from '../helpers/rss.js';
import { tempDir } from '../helpers/tmp.js';

const CLI = new URL('../../src/cli.ts', import.meta.url).pathname;

t.test('missing settings', async (t) => {
  const none = missingSettings([], {}, 'linux', 'v20.20.2');
  t.same(none.flags, NODE_FLAGS, 'a plain start misses every flag');
  t.same(missingSettings([], {}, 'linux', 'v24.21.0').flags, [...NODE_FLAGS, ...LATER_NODE_FLAGS], 'Node 22 and later: the later flags too');
  t.same(missingSettings([...NODE_FLAGS, '--invocation_count_for_turbofan=500'], {}, 'linux', 'v22.12.0').flags, [], "an operator's own TurboFan threshold wins");
  t.equal(none.tunables, MALLOC_TUNABLES.join(':'));
  const all = missingSettings([...nodeFlags()], { GLIBC_TUNABLES: MALLOC_TUNABLES.join(':') }, 'linux');
  t.same(all, { flags: [], tunables: undefined }, 'nothing to do when started with them');
  t.same(missingSettings(['--max_semi_space_size=8', '--maglev', '--bytecode_old_age=3'], { NODE_OPTIONS: '--heap-growing-percent=50' }, 'darwin', 'v20.20.2'), { flags: [], tunables: undefined }, 'an operator\'s own values win; no glibc tunables off Linux');
  t.equal(missingSettings([], { GLIBC_TUNABLES: 'glibc.malloc.tcache_count=0' }, 'linux').tunables, `glibc.malloc.tcache_count=0:${MALLOC_TUNABLES.join(':')}`, 'other tunables kept');
  t.equal(missingSettings([], { GLIBC_TUNABLES: 'glibc.malloc.mmap_threshold=4096:glibc.malloc.arena_max=8' }, 'linux').tunables, undefined, 'an operator\'s own values win');
  t.equal(missingSettings([], { GLIBC_TUNABLES: 'glibc.malloc.arena_max=8' }, 'linux').tunables, 'glibc.malloc.arena_max=8:glibc.malloc.mmap_threshold=1048576', 'only the missing one is added');
});

interface Started {
  /** The pid that was started (the shell launcher's, which execs node). */
  pid: number;
  line: Record<string, unknown>;
  out: string;
  /** Processes in the started process's group once it serves. */
  group: { pid: number; comm: string }[];
}

/** Starts a command in a process group of its own until it says it serves; then SIGTERM. */
async function serveUntilServing(t: Tap, cmd: string[], extraEnv: Record<string, string> = {}): Promise<Started> {
  const env: NodeJS.ProcessEnv = { ...process.env, HAYLOFT_DATA_DIR: tempDir(t), HAYLOFT_HOST: '127.0.0.1', HAYLOFT_PORT: '0', HAYLOFT_HTTPS_PORT: '0', HAYLOFT_ADMIN_PASSWORD: 'runtime-test-pw', HAYLOFT_LOG_FORMAT: 'json' };
  delete env.GLIBC_TUNABLES;
  delete env.HAYLOFT_RELAUNCHED;
  // As a user starts it: nothing of this test runner's. tap sets NODE_OPTIONS (its loaders) on
  // every process it spawns, whatever env it is given; env(1) unsets it and sets the test's own,
  // then execs the command (same pid).
  const argv = ['env', '-u', 'NODE_OPTIONS', ...Object.entries(extraEnv).map(([k, v]) => `${k}=${v}`), ...cmd];
  const proc = spawn(argv[0] as string, argv.slice(1), { env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  t.teardown(() => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
  });
  let out = '';
  proc.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const line = await new Promise<Record<string, unknown>>((resolve, reject) => {
    proc.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      for (const l of out.split('\n')) if (l.includes('Hayloft is serving')) resolve(JSON.parse(l) as Record<string, unknown>);
    });
    proc.on('exit', () => reject(new Error(`exited before serving: ${out}`)));
  });
  const group = groupPids(proc.pid as number).map((pid) => ({ pid, comm: readFileSync(`/proc/${pid}/comm`, 'utf8').trim() }));
  const exited = new Promise((r) => proc.on('exit', (code, signal) => r(signal ?? code)));
  proc.kill('SIGTERM');
  t.equal(await exited, 0, 'SIGTERM stops it cleanly');
  return { pid: proc.pid as number, line, out, group };
}

const BIN = new URL('../../bin/hayloft', import.meta.url).pathname;
const ROOT = new URL('../../', import.meta.url).pathname;

t.test('the hayloft command gives the settings src/lib/runtime.ts names', async (t) => {
  const text = readFileSync(BIN, 'utf8');
  const flags = /^for f in (.*); do$/m.exec(text)?.[1]?.split(' ');
  t.same(flags, [...NODE_FLAGS, '$later'], 'the V8 flags');
  t.same(/^ {2}\*\) later="(.*)" ;;$/m.exec(text)?.[1]?.split(' '), LATER_NODE_FLAGS, 'the V8 flags of Node 22 and later');
  const tunables = /^for t in (.*); do$/m.exec(text)?.[1]?.split(' ');
  t.same(tunables, MALLOC_TUNABLES, 'the malloc tunables');
  t.equal(statSync(BIN).mode & 0o111, 0o111, 'executable');
});

t.test('hayloft serve by its command: one process with the settings, also through a link as npm makes', async (t) => {
  // The command runs the build (dist/cli.js), as an installed release does.
  execFileSync(process.execPath, ['scripts/build-if-needed.mjs'], { cwd: ROOT, stdio: 'inherit' });
  const link = path.join(tempDir(t), 'hayloft');
  symlinkSync(BIN, link);
  const s = await serveUntilServing(t, [link, 'serve'], { HAYLOFT_NODE: process.execPath });
  t.equal(s.line.pid, s.pid, 'the process started is the one serving (the launcher exec\'d node)');
  t.same(s.group.map((p) => p.pid), [s.pid], 'and the only one: no launcher left waiting');
  const runtime = s.line.runtime as { nodeFlags: string[]; mallocTunables: string | null };
  t.same(runtime.nodeFlags, nodeFlags(), 'the V8 flags are in effect (on Node 22 and later, the later ones too)');
  if (process.platform === 'linux') t.equal(runtime.mallocTunables, MALLOC_TUNABLES.join(':'), 'the malloc tunables are in effect');
  t.notMatch(s.out, /without the runtime settings/, 'no warning');

  const own = await serveUntilServing(t, [BIN, 'serve'], { HAYLOFT_NODE: process.execPath, NODE_OPTIONS: '--max-semi-space-size=8', GLIBC_TUNABLES: 'glibc.malloc.tcache_count=0:glibc.malloc.arena_max=4' });
  t.same((own.line.runtime as { nodeFlags: string[] }).nodeFlags.sort(), ['--heap-growing-percent=30', '--max-semi-space-size=8', '--no-maglev', '--bytecode-old-age=2', ...nodeFlags().slice(NODE_FLAGS.length)].sort(), "an operator's own value in NODE_OPTIONS wins");
  t.equal((own.line.runtime as { mallocTunables: string }).mallocTunables, 'glibc.malloc.tcache_count=0:glibc.malloc.arena_max=4:glibc.malloc.mmap_threshold=1048576', "other tunables and an operator's own value are kept");
});

t.test('hayloft serve started some other way (node cli.js serve)', async (t) => {
  const s = await serveUntilServing(t, [process.execPath, '--import', 'tsx', CLI, 'serve']);
  t.equal(s.line.pid, s.pid, 'one process: the pid that was started');
  // tsx (this test runs the TypeScript) keeps esbuild as a helper process: not Hayloft's.
  t.same(s.group.filter((p) => p.comm !== 'esbuild').map((p) => p.pid), [s.pid], 'no other Node in its group');
  const runtime = s.line.runtime as { nodeFlags: string[]; mallocTunables: string | null };
  if (typeof (process as { execve?: unknown }).execve === 'function') {
    t.same(runtime.nodeFlags, nodeFlags(), 'Node 22.15+: it replaced itself with a node that has the flags');
    if (process.platform === 'linux') t.equal(runtime.mallocTunables, MALLOC_TUNABLES.join(':'), 'and the tunables');
  } else {
    t.same(runtime.nodeFlags, [], 'older Node: it runs as started');
    t.match(s.out, /"missingNodeFlags":\["--max-semi-space-size=4","--heap-growing-percent=30","--no-maglev","--bytecode-old-age=2"\].*started without the runtime settings/, 'and says what is missing and how to start it');
  }
});
