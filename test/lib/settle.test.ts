/**
 * The daemon's collection when it goes quiet after a burst (src/lib/settle.ts): once after
 * start-up, again only after it has grown, never while busy, and not once stopped; in a process
 * started without `--expose-gc` (as the daemon is) and with it. Run in child processes: what V8
 * exposes is process-wide.
 */
import { spawnSync } from 'node:child_process';
import t from 'tap';

const SETTLE = new URL('../../src/lib/settle.ts', import.meta.url).href;
const MSG = 'quiet after a burst: gave back its memory';

function run(flags: string[], body: string): { lines: Record<string, unknown>[]; status: number | null; stderr: string } {
  const script = `
    import pino from 'pino';
    import { settleWhenQuiet } from ${JSON.stringify(SETTLE)};
    const log = pino({ level: 'debug' });
    const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
    const marks = (m) => log.info({ mark: m }, 'mark');
    ${body}
  `;
  const r = spawnSync(process.execPath, [...flags, '--import', 'tsx', '--input-type=module', '-e', script], { encoding: 'utf8', timeout: 60_000 });
  const lines = r.stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
  return { lines, status: r.status, stderr: r.stderr };
}

/** The collections logged between two marks. */
function between(lines: Record<string, unknown>[], from: string, to: string): Record<string, unknown>[] {
  const a = lines.findIndex((l) => l.mark === from);
  const b = lines.findIndex((l) => l.mark === to);
  return lines.slice(a + 1, b).filter((l) => l.msg === MSG);
}

for (const flags of [[], ['--expose-gc']]) t.test(`collects once after start-up, again only after growth, never while busy (${flags.join(' ') || 'no flags'})`, async (t) => {
  const r = run(
    flags,
    `
    const stop = settleWhenQuiet(log, { checkMs: 100, growthBytes: 16 * 1024 * 1024 });
    marks('start');
    await sleep(450);
    marks('quiet');
    // Quiet and not grown: nothing more.
    await sleep(450);
    marks('busy');
    // Busy (the loop runs 90 ms of every 100) and growing: no collection while busy.
    const kept = [];
    const until = Date.now() + 600;
    while (Date.now() < until) {
      const t = Date.now();
      while (Date.now() - t < 90) kept.push('x'.repeat(64) + Math.random());
      await sleep(10);
    }
    marks('grown');
    // Quiet again, and grown well past the threshold: one collection.
    await sleep(450);
    marks('stopped');
    stop();
    await sleep(300);
    marks('end');
    globalThis.keep = kept.length;
    `,
  );
  t.equal(r.status, 0, r.stderr);
  t.equal(between(r.lines, 'start', 'quiet').length, 1, 'one collection once start-up is quiet');
  t.equal(between(r.lines, 'quiet', 'busy').length, 0, 'none while quiet and not grown');
  t.equal(between(r.lines, 'busy', 'grown').length, 0, 'none while busy');
  const after = between(r.lines, 'grown', 'stopped');
  t.equal(after.length, 1, 'one when quiet again after growing');
  const s = after[0] as { rssBefore: number; rssAfter: number; ms: number };
  t.ok(s.rssBefore > 0 && s.rssAfter > 0 && s.ms >= 0, 'logged with the resident size before and after');
  t.equal(between(r.lines, 'stopped', 'end').length, 0, 'none once stopped');
});
