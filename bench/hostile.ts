/**
 * bench/hostile: the resident memory of `hayloft serve` under a hostile load (issue 18: "RSS
 * after 5,000 malformed requests within 1.3x of before, peak below 2x"). The daemon is its own
 * process started by its bin (startDaemon: no Node flags from here, it applies its own); the
 * client is this process, sending the seeded mix of test/helpers/malformed.ts (deep nesting,
 * 200 MB Content-Length, long values and a 5 MB Ref, bad and long filters, ReDoS patterns,
 * truncated JSON and Zinc, bad values, long ranges; 4 in flight, keep-alive) to a daemon holding
 * a site and a point, after a warm-up of 200 ordinary requests. Per round, on a fresh data
 * folder: RSS settled before (median of 2 s of samples), the peak during (VmHWM reset before;
 * samples every 50 ms), RSS settled 5 s after the last answer. Medians over rounds; the load
 * average of the machine is printed with them (it is shared).
 *
 *   npm run bench -- hostile [--rounds N] [--requests N] [--no-record] [--timeline]
 */
import os from 'node:os';
import { malformedMix } from '../test/helpers/malformed.js';
import { hostileMemory, procStatus } from '../test/helpers/rss.js';
import { hasFlag, loginDaemon, machineLine, median, numberArg, postOp, recordSection, sleep, startDaemon, stopDaemon } from './harness.js';

const ROUNDS = numberArg('--rounds', 3);
const REQUESTS = numberArg('--requests', 5000);
const MIB = 1024 * 1024;

/** A site and a point with a little history: what the mix's reads and ranges aim at. */
async function world(base: string, token: string): Promise<void> {
  await postOp(base, token, 'createRec', JSON.stringify({ meta: { ver: '3.0' }, cols: [{ name: 'site' }, { name: 'name' }, { name: 'tz' }], rows: [{ site: 'm:', name: 'hq', tz: 'UTC' }] }));
  await postOp(
    base,
    token,
    'createRec',
    JSON.stringify({
      meta: { ver: '3.0' },
      cols: ['point', 'his', 'cur', 'kind', 'unit', 'tz', 'name', 'siteRef'].map((name) => ({ name })),
      rows: [{ point: 'm:', his: 'm:', cur: 'm:', kind: 'Number', unit: '°C', tz: 'UTC', name: 'p1', siteRef: 'r:hq' }],
    }),
  );
  const rows = Array.from({ length: 100 }, (_, i) => ({ ts: `t:${new Date(Date.UTC(2024, 0, 1) + i * 60_000).toISOString().slice(0, 19)}Z UTC`, val: `n:${20 + (i % 7)} °C` }));
  await postOp(base, token, 'hisWrite', JSON.stringify({ meta: { ver: '3.0', id: 'r:hq.p1' }, cols: [{ name: 'ts' }, { name: 'val' }], rows }));
}

/** Ordinary requests of the same ops, so "before" is a daemon that has served, not a cold one. */
async function warmUp(base: string, token: string): Promise<void> {
  for (let i = 0; i < 50; i++) {
    await postOp(base, token, 'read', JSON.stringify({ meta: { ver: '3.0' }, cols: [{ name: 'filter' }], rows: [{ filter: 's:point and his' }] }));
    await postOp(base, token, 'read', JSON.stringify({ meta: { ver: '3.0' }, cols: [{ name: 'id' }], rows: [{ id: 'r:hq.p1' }] }));
    await postOp(base, token, 'hisRead', JSON.stringify({ meta: { ver: '3.0' }, cols: [{ name: 'id' }, { name: 'range' }], rows: [{ id: 'r:hq.p1', range: 's:2024-01-01' }] }));
    const zinc = await fetch(`${base}/api/read`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'text/zinc', accept: 'text/zinc' }, body: 'ver:"3.0"\nfilter\n"site"\n' });
    await zinc.text();
  }
}

const figures = { before: [] as number[], peak: [] as number[], after: [] as number[], ms: [] as number[] };
const loads: string[] = [];
let refusedAll = true;
for (let round = 0; round < ROUNDS; round++) {
  const d = await startDaemon();
  try {
    const token = await loginDaemon(d.base);
    await world(d.base, token);
    await warmUp(d.base, token);
    await sleep(2000);
    const load0 = os.loadavg()[0] as number;
    const m = await hostileMemory(d.pid, d.port, token, malformedMix(REQUESTS, 18 + round));
    loads.push(`${load0.toFixed(1)}-${(os.loadavg()[0] as number).toFixed(1)}`);
    if (m.tally.unexpected.length > 0) {
      refusedAll = false;
      console.error(`round ${round + 1}: answers outside 4xx/503: ${m.tally.unexpected.slice(0, 10).join('; ')}`);
    }
    figures.before.push(m.before);
    figures.peak.push(m.peak);
    figures.after.push(m.after);
    figures.ms.push(m.ms);
    console.log(
      `round ${round + 1}: before ${(m.before / MIB).toFixed(1)} MiB, peak ${(m.peak / MIB).toFixed(1)} (${(m.peak / m.before).toFixed(2)}x), after ${(m.after / MIB).toFixed(1)} (${(m.after / m.before).toFixed(2)}x), ${(m.ms / 1000).toFixed(1)} s; statuses ${[...m.tally.byStatus].map(([s, n]) => `${s}:${n}`).join(' ')}`,
    );
    if (hasFlag('--timeline')) {
      for (let s = 0; s < 30; s++) {
        await sleep(1000);
        console.log(`  +${s + 6} s: ${(procStatus(d.pid, 'VmRSS') / MIB).toFixed(1)} MiB`);
      }
    }
  } finally {
    await stopDaemon(d);
  }
}
const mib = (k: keyof typeof figures): string => (median(figures[k]) / MIB).toFixed(1);
const range = (k: keyof typeof figures): string => `${(Math.min(...figures[k]) / MIB).toFixed(1)}-${(Math.max(...figures[k]) / MIB).toFixed(1)}`;
const ratio = (k: 'peak' | 'after'): string => median(figures[k].map((x, i) => x / (figures.before[i] as number))).toFixed(2);
const md = `Run: \`npm run bench -- hostile\` on ${machineLine()}; ${ROUNDS} rounds, medians (range in brackets). The daemon is \`hayloft serve\` (its bin, on the bundle \`npm run build\` makes) as a user starts it (its own runtime settings; the figures are the server process's, also on Node 20 where it relaunches itself), on a fresh data folder holding a site and a point, after 200 ordinary requests. The client (this process, 4 requests in flight) sends ${REQUESTS.toLocaleString('en-US')} malformed requests from an authenticated user: the seeded mix of \`test/helpers/malformed.ts\` (grids nested 10,000 deep in JSON and Zinc, 200 MB announced by Content-Length, values of 70,000 chars and a 5 MB Ref, bad and 12,000-char filters, ReDoS patterns, truncated JSON and Zinc grids, bad values, 110,000-char ranges). RSS from /proc/<pid>/status: settled before (median of samples every 200 ms over 2 s), peak during (VmHWM reset before the load, and samples every 50 ms), settled 5 s after the last answer. ${refusedAll ? 'Every request was refused with a 4xx or 503 error grid, but the patterns that backtrack in V8 and are plain RE2, answered 200 at once (about 4 %).' : 'Some requests were not refused (see the run log).'} Load average (1 min) during the rounds: ${loads.join(', ')} on 2 cores, shared with other engineers' runs.

| figure | RSS (MiB) | ratio to before | goal (issue 18) |
|---|---:|---:|---|
| before (served 200 ordinary requests) | ${mib('before')} (${range('before')}) | 1 | |
| peak during the ${REQUESTS.toLocaleString('en-US')} requests | ${mib('peak')} (${range('peak')}) | ${ratio('peak')} | < 2 |
| 5 s after | ${mib('after')} (${range('after')}) | ${ratio('after')} | ≤ 1.3 |
| time for the ${REQUESTS.toLocaleString('en-US')} requests | ${(median(figures.ms) / 1000).toFixed(1)} s | | |
`;
console.log(md);
if (!hasFlag('--no-record')) recordSection('hostile', md);
