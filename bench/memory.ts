/**
 * bench/memory: the resident memory of `hayloft serve` as a user runs it: the daemon is its own
 * process, started by its bin with no Node flags (it applies its own, src/lib/runtime.ts), the
 * client (this process) loads it over REST. Figures, each the median over rounds on a fresh
 * data folder:
 *   - on an empty data folder (first start: the administrator and client were created), 3 s
 *     after start and idle (20 s after);
 *   - after the first login (POST /oauth2/token: one scrypt verification), 1 s and 20 s after;
 *   - after loading 1,011 records (createRec) and 1,000,000 samples (hisWrite, 1,000 per request,
 *     4 in flight), and the peak while loading (VmHWM, reset before loading);
 *   - `serve --demo` (7 points polling a simulated Modbus device);
 *   - and, as the baseline, a bare `node` process idle.
 * RSS is read from /proc/<pid>/status (VmRSS, VmHWM) of the server process itself.
 *
 *   npm run bench -- memory [--rounds N] [--no-record]
 */
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { timeZone } from '../src/haystack/tz.js';
import { MALLOC_TUNABLES, NODE_FLAGS } from '../src/lib/runtime.js';
import { procStatus as status, settledRss } from '../test/helpers/rss.js';
import { hasFlag, loginDaemon as login, machineLine, median, numberArg, postOp as post, recordSection, sleep, startDaemon as startServer, stopDaemon as stopServer } from './harness.js';

const ROUNDS = numberArg('--rounds', 3);
const POINTS = 1000;
const EQUIPS = 10;
const SAMPLES = 1000;
const T0 = Date.UTC(2024, 0, 1);
const MIB = 1024 * 1024;
/** The zone of the daemon and of its points: a named zone with daylight time, as a site has. */
const TZ = 'Sydney';
const zone = timeZone(TZ);

const grid = (rows: object[]): string => JSON.stringify({ meta: { ver: '3.0' }, cols: [], rows }).replace('"cols":[]', `"cols":${JSON.stringify(colsOf(rows))}`);
function colsOf(rows: object[]): { name: string }[] {
  const names = new Set<string>();
  for (const r of rows) for (const k of Object.keys(r)) names.add(k);
  return [...names].map((name) => ({ name }));
}

/** 1 site, 10 equips, 1,000 points (1,011 records), then 1,000 samples per point. */
async function load(base: string, token: string): Promise<void> {
  const recs: object[] = [{ site: 'm:', name: 's', dis: 'Site', tz: TZ }];
  for (let e = 0; e < EQUIPS; e++) recs.push({ equip: 'm:', name: `e${e}`, dis: `Equip ${e}`, siteRef: 'r:s' });
  await post(base, token, 'createRec', grid(recs));
  const ids: string[] = [];
  for (let from = 0; from < POINTS; from += 500) {
    const pts: object[] = [];
    for (let p = from; p < from + 500; p++) {
      pts.push({ point: 'm:', his: 'm:', sensor: 'm:', kind: 'Number', unit: '°C', tz: TZ, name: `p${p}`, dis: `Point ${p}`, siteRef: 'r:s', equipRef: `r:s.e${p % EQUIPS}` });
    }
    const g = await post(base, token, 'createRec', grid(pts));
    for (const r of g.rows) ids.push((r.id as string).slice(2).split(' ')[0] as string);
  }
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < ids.length) {
      const id = ids[next++] as string;
      const rows: string[] = [];
      for (let i = 0; i < SAMPLES; i++) {
        const t = T0 + i * 60_000;
        rows.push(`{"ts":"t:${zone.formatInstant(t, 1)}","val":"n:${(21 + Math.round(30 * Math.sin(i / 90 + next)) / 10).toFixed(1)} °C"}`);
      }
      await post(base, token, 'hisWrite', `{"meta":{"ver":"2.0","id":"r:${id}"},"cols":[{"name":"ts"},{"name":"val"}],"rows":[${rows.join(',')}]}`);
    }
  };
  await Promise.all([worker(), worker(), worker(), worker()]);
}

async function bareNode(): Promise<number> {
  const proc = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
  await sleep(1500);
  const rss = await settledRss(proc.pid as number, 1000);
  proc.kill();
  return rss;
}

/** How long a daemon is left alone before its "idle" figure: V8's memory reducer runs about 8 s
 * after the last burst of allocation (start-up, a load) and gives back the young generation and
 * the start-up's garbage; a gateway spends nearly all its life past that point. */
const IDLE_MS = 20_000;

const figures: Record<string, number[]> = { bare: [], start: [], idle: [], login: [], loginIdle: [], loaded: [], loadedIdle: [], peak: [], demo: [], demoIdle: [], demoPeak: [] };
const at = async (t0: number, ms: number): Promise<void> => sleep(Math.max(0, t0 + ms - Date.now()));
for (let round = 0; round < ROUNDS; round++) {
  figures.bare?.push(await bareNode());
  const s = await startServer([], { HAYLOFT_TZ: TZ });
  let t0 = Date.now();
  await at(t0, 3000);
  figures.start?.push(await settledRss(s.pid));
  await at(t0, IDLE_MS);
  figures.idle?.push(await settledRss(s.pid));
  const token = await login(s.base);
  t0 = Date.now();
  await at(t0, 1000);
  figures.login?.push(await settledRss(s.pid));
  await at(t0, IDLE_MS);
  figures.loginIdle?.push(await settledRss(s.pid));
  writeFileSync(`/proc/${s.pid}/clear_refs`, '5'); // resets VmHWM: the peak of the load alone
  await load(s.base, token);
  figures.peak?.push(status(s.pid, 'VmHWM'));
  t0 = Date.now();
  await at(t0, 3000);
  figures.loaded?.push(await settledRss(s.pid));
  await at(t0, IDLE_MS);
  figures.loadedIdle?.push(await settledRss(s.pid));
  await stopServer(s);
  const d = await startServer(['--demo'], { HAYLOFT_TZ: TZ });
  t0 = Date.now();
  await at(t0, 8000);
  figures.demo?.push(await settledRss(d.pid));
  await at(t0, 30_000);
  figures.demoIdle?.push(await settledRss(d.pid));
  figures.demoPeak?.push(status(d.pid, 'VmHWM'));
  await stopServer(d);
  console.log(`round ${round + 1}: ${Object.entries(figures).map(([k, v]) => `${k} ${((v.at(-1) ?? 0) / MIB).toFixed(1)}`).join(', ')} MiB`);
}
const m = (k: string): string => (median(figures[k] ?? []) / MIB).toFixed(1);
const range = (k: string): string => `${(Math.min(...(figures[k] ?? [])) / MIB).toFixed(1)}-${(Math.max(...(figures[k] ?? [])) / MIB).toFixed(1)}`;
const md = `Run: \`npm run bench -- memory\` on ${machineLine()}; ${ROUNDS} rounds, medians (range in brackets). The daemon is \`node dist-bench/src/cli.js serve\` started with no Node flags (it applies its own: ${'`'}${NODE_FLAGS.join(' ')}${'`'} and GLIBC_TUNABLES=${MALLOC_TUNABLES.join(':')}, by relaunching itself; the figures are the server process's); the daemon's zone and its points' are Sydney (a named zone with daylight time, as a site has; offsets from the system's zone files); the client is this benchmark's process. RSS from /proc/<pid>/status, median of samples every 200 ms over 2 s, taken twice: soon after the event (start, login, load) and after ${IDLE_MS / 1000} s left alone (30 s for the demo), when V8's memory reducer (about 8 s after the last burst of allocation) and the daemon's own collection when it goes quiet after a burst (src/lib/settle.ts) have given back the young generation and start-up's garbage; the goals are read against the second, where a gateway spends its life. Machine shared with other engineers' test runs while measured.

| figure | RSS (MiB) | goal |
|---|---:|---|
| bare \`node\` process, idle (baseline) | ${m('bare')} (${range('bare')}) | |
| empty data folder, first start: 3 s after start | ${m('start')} (${range('start')}) | |
| empty data folder, first start: idle (${IDLE_MS / 1000} s after start) | ${m('idle')} (${range('idle')}) | ≤ 64 |
| after the first login: 1 s after | ${m('login')} (${range('login')}) | |
| after the first login: idle (${IDLE_MS / 1000} s after) | ${m('loginIdle')} (${range('loginIdle')}) | idle + ≤ 4 |
| after loading ${(POINTS + EQUIPS + 1).toLocaleString('en-US')} records and ${(POINTS * SAMPLES).toLocaleString('en-US')} samples over REST: 3 s after | ${m('loaded')} (${range('loaded')}) | ≤ 100 |
| the same, idle (${IDLE_MS / 1000} s after) | ${m('loadedIdle')} (${range('loadedIdle')}) | |
| peak while loading | ${m('peak')} (${range('peak')}) | ≤ 128 |
| \`serve --demo\` (7 points polling), after 8 s | ${m('demo')} (${range('demo')}) | |
| \`serve --demo\`, after 30 s | ${m('demoIdle')} (${range('demoIdle')}) | ≤ 72 |
`;
console.log(md);
if (!hasFlag('--no-record')) recordSection('memory', md);
