/**
 * The daemon's runtime settings (src/lib/runtime.ts): which are missing from a start, and
 * `hayloft serve` started plainly (`node cli.js serve`, as a container or npx does) running with
 * them, reported in its start-up line.
 */
import { spawn } from 'node:child_process';
import t from 'tap';
import { MALLOC_TUNABLES, NODE_FLAGS, missingSettings } from '../../src/lib/runtime.js';
import { tempDir } from '../helpers/tmp.js';

const CLI = new URL('../../src/cli.ts', import.meta.url).pathname;

t.test('missing settings', async (t) => {
  const none = missingSettings([], {}, 'linux');
  t.same(none.flags, NODE_FLAGS, 'a plain start misses every flag');
  t.equal(none.tunables, MALLOC_TUNABLES.join(':'));
  const all = missingSettings([...NODE_FLAGS], { GLIBC_TUNABLES: MALLOC_TUNABLES.join(':') }, 'linux');
  t.same(all, { flags: [], tunables: undefined }, 'nothing to do when started with them');
  t.same(missingSettings(['--max_semi_space_size=8'], { NODE_OPTIONS: '--heap-growing-percent=50' }, 'darwin'), { flags: [], tunables: undefined }, 'an operator\'s own values win; no glibc tunables off Linux');
  t.equal(missingSettings([], { GLIBC_TUNABLES: 'glibc.malloc.arena_max=2' }, 'linux').tunables, `glibc.malloc.arena_max=2:${MALLOC_TUNABLES.join(':')}`, 'other tunables kept');
  t.equal(missingSettings([], { GLIBC_TUNABLES: 'glibc.malloc.mmap_threshold=4096' }, 'linux').tunables, undefined, 'an operator\'s own threshold wins');
});

t.test('hayloft serve started without flags runs with them', async (t) => {
  const dir = tempDir(t);
  const env: NodeJS.ProcessEnv = { ...process.env, HAYLOFT_DATA_DIR: dir, HAYLOFT_HOST: '127.0.0.1', HAYLOFT_PORT: '0', HAYLOFT_HTTPS_PORT: '0', HAYLOFT_ADMIN_PASSWORD: 'runtime-test-pw' };
  delete env.GLIBC_TUNABLES;
  delete env.NODE_OPTIONS;
  delete env.HAYLOFT_RELAUNCHED;
  const proc = spawn(process.execPath, ['--import', 'tsx', CLI, 'serve'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const line = await new Promise<Record<string, unknown>>((resolve, reject) => {
    proc.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      for (const l of out.split('\n')) if (l.includes('Hayloft is serving')) resolve(JSON.parse(l) as Record<string, unknown>);
    });
    proc.on('exit', () => reject(new Error(`exited before serving: ${out}`)));
  });
  const exited = new Promise((r) => proc.on('exit', (code, signal) => r(signal ?? code)));
  proc.kill('SIGTERM');
  t.equal(await exited, 0, 'SIGTERM stops it cleanly');
  const runtime = line.runtime as { nodeFlags: string[]; mallocTunables: string | null };
  t.same(runtime.nodeFlags, NODE_FLAGS, 'the V8 flags are in effect');
  if (process.platform === 'linux') t.equal(runtime.mallocTunables, MALLOC_TUNABLES.join(':'), 'the malloc tunables are in effect');
});
