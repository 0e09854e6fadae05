/**
 * The daemon's one collection after start-up (src/lib/settle.ts): runs when `gc` is exposed (the
 * daemon's own runtime settings expose it), gives back what start-up left, does nothing without
 * `gc`, and not at all once cancelled. Run in child processes: `gc` is a process-wide flag.
 */
import { spawnSync } from 'node:child_process';
import t from 'tap';

const SETTLE = new URL('../../src/lib/settle.ts', import.meta.url).href;

function run(flags: string[], cancel: boolean): { lines: Record<string, unknown>[]; status: number | null; stderr: string } {
  const script = `
    import pino from 'pino';
    import { settleAfterStart } from ${JSON.stringify(SETTLE)};
    const log = pino({ level: 'debug' });
    // Garbage as start-up leaves it: allocated, then dropped.
    let junk = [];
    for (let i = 0; i < 200_000; i++) junk.push({ i, s: 'x'.repeat(20) + i });
    junk = null;
    const cancel = settleAfterStart(log, 50);
    ${cancel ? 'cancel();' : ''}
    setTimeout(() => {}, 300);
  `;
  const r = spawnSync(process.execPath, [...flags, '--import', 'tsx', '--input-type=module', '-e', script], { encoding: 'utf8' });
  const lines = r.stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
  return { lines, status: r.status, stderr: r.stderr };
}

t.test('with gc exposed, one collection runs once start-up has settled', async (t) => {
  const r = run(['--expose-gc'], false);
  t.equal(r.status, 0, r.stderr);
  const settled = r.lines.filter((l) => l.msg === 'start-up settled: gave back its memory');
  t.equal(settled.length, 1, 'logged once');
  const s = settled[0] as { rssBefore: number; rssAfter: number; ms: number };
  t.ok(s.rssBefore > 0 && s.rssAfter > 0 && s.ms >= 0, 'with the resident size before and after');
});

t.test('without gc, and once cancelled, nothing runs', async (t) => {
  const plain = run([], false);
  t.equal(plain.status, 0, plain.stderr);
  t.same(plain.lines, [], 'no gc: nothing');
  const cancelled = run(['--expose-gc'], true);
  t.equal(cancelled.status, 0, cancelled.stderr);
  t.same(cancelled.lines, [], 'cancelled (the daemon stopping): nothing');
});
