/**
 * bench/memory: the resident memory of `hayloft serve` as a user runs it: started by its command
 * (bin/hayloft, which execs node with the daemon's runtime settings) in a process group of its
 * own, measured as the whole group with file-backed pages counted once (issue 33); the client
 * (this process) loads it over REST. Run it under each Node line: `npm run bench -- memory`, and
 * `<node 24> scripts/bench.mjs memory` (the binary as scripts/test-node.sh gets it). Figures, each the median over rounds on a fresh
 * data folder:
 *   - on an empty data folder (first start: the administrator and client were created), 3 s
 *     after start and idle (20 s after);
 *   - after the first login (POST /oauth2/token: one scrypt verification), 1 s and 20 s after;
 *   - after loading 1,011 records (createRec) and 1,000,000 samples (hisWrite, 1,000 per request,
 *     4 in flight), and the peak while loading (VmHWM, reset before loading);
 *   - `serve --demo` (7 points polling a simulated Modbus device);
 *   - and, as the baseline, a bare `node` process idle.
 * Memory from /proc/<pid>/smaps_rollup of every process in the group (test/helpers/rss.ts
 * groupMemory); peaks from the server's VmHWM; start-up from spawn to the serving line.
 *
 *   npm run bench -- memory [--rounds N] [--no-record]
 */
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { timeZone } from '../src/haystack/tz.js';
import { MALLOC_TUNABLES, nodeFlags } from '../src/lib/runtime.js';
import { type GroupMemory, procStatus as status, settledGroup, settledRss } from '../test/helpers/rss.js';
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

/** Milliseconds from spawning the command to its "Hayloft is serving" line: first start, restart, demo. */
const startMs: Record<'first' | 'restart' | 'demo', number[]> = { first: [], restart: [], demo: [] };
const timed = async <T>(into: number[], f: () => Promise<T>): Promise<T> => {
  const t = performance.now();
  const r = await f();
  into.push(performance.now() - t);
  return r;
};
const figures: Record<string, number[]> = { bare: [], start: [], idle: [], idlePss: [], login: [], loginIdle: [], loaded: [], loadedIdle: [], peak: [], demo: [], demoIdle: [], demoPss: [], demoPeak: [], processes: [] };
const at = async (t0: number, ms: number): Promise<void> => sleep(Math.max(0, t0 + ms - Date.now()));
/** The whole service started by the bin: its process group (the daemon is started as the leader of one). */
const group = async (pgid: number): Promise<GroupMemory> => {
  const g = await settledGroup(pgid);
  figures.processes?.push(g.processes);
  return g;
};
for (let round = 0; round < ROUNDS; round++) {
  figures.bare?.push(await bareNode());
  const s = await timed(startMs.first, () => startServer([], { HAYLOFT_TZ: TZ }, { ownGroup: true }));
  const pgid = s.proc.pid as number;
  let t0 = Date.now();
  await at(t0, 3000);
  figures.start?.push((await group(pgid)).rss);
  await at(t0, IDLE_MS);
  const idle = await group(pgid);
  figures.idle?.push(idle.rss);
  figures.idlePss?.push(idle.pss);
  const token = await login(s.base);
  t0 = Date.now();
  await at(t0, 1000);
  figures.login?.push((await group(pgid)).rss);
  await at(t0, IDLE_MS);
  figures.loginIdle?.push((await group(pgid)).rss);
  writeFileSync(`/proc/${s.pid}/clear_refs`, '5'); // resets VmHWM: the peak of the load alone
  await load(s.base, token);
  figures.peak?.push(status(s.pid, 'VmHWM'));
  t0 = Date.now();
  await at(t0, 3000);
  figures.loaded?.push((await group(pgid)).rss);
  await at(t0, IDLE_MS);
  figures.loadedIdle?.push((await group(pgid)).rss);
  await stopServer(s, true);
  await stopServer(await timed(startMs.restart, () => startServer([], { HAYLOFT_TZ: TZ }, { ownGroup: true, dir: s.dir })));
  const d = await timed(startMs.demo, () => startServer(['--demo'], { HAYLOFT_TZ: TZ }, { ownGroup: true }));
  t0 = Date.now();
  await at(t0, 8000);
  figures.demo?.push((await group(d.proc.pid as number)).rss);
  await at(t0, 30_000);
  const demo = await group(d.proc.pid as number);
  figures.demoIdle?.push(demo.rss);
  figures.demoPss?.push(demo.pss);
  figures.demoPeak?.push(status(d.pid, 'VmHWM'));
  await stopServer(d);
  console.log(`round ${round + 1}: start-up ms first ${startMs.first.at(-1)?.toFixed(0)}, restart ${startMs.restart.at(-1)?.toFixed(0)}, demo ${startMs.demo.at(-1)?.toFixed(0)}`);
  console.log(`round ${round + 1}: ${Object.entries(figures).filter(([k]) => k !== 'processes').map(([k, v]) => `${k} ${((v.at(-1) ?? 0) / MIB).toFixed(1)}`).join(', ')} MiB; processes ${Math.max(...(figures.processes ?? []))}`);
}
const m = (k: string): string => (median(figures[k] ?? []) / MIB).toFixed(1);
const range = (k: string): string => `${(Math.min(...(figures[k] ?? [])) / MIB).toFixed(1)}-${(Math.max(...(figures[k] ?? [])) / MIB).toFixed(1)}`;
const ms = (k: keyof typeof startMs): string => `${median(startMs[k]).toFixed(0)} (${Math.min(...startMs[k]).toFixed(0)}-${Math.max(...startMs[k]).toFixed(0)})`;
const md = `Run: \`npm run bench -- memory\` on ${machineLine()}; ${ROUNDS} rounds, medians (range in brackets). The daemon is started as a user starts it: the \`hayloft\` command (bin/hayloft, which execs node with the daemon's runtime settings: ${'`'}${nodeFlags().join(' ')}${'`'} and GLIBC_TUNABLES=${MALLOC_TUNABLES.join(':')}), \`hayloft serve\`, in a process group of its own (as systemd or a shell starts it); at most ${Math.max(...(figures.processes ?? [0]))} process(es) were in the group. Memory is the whole group's, file-backed pages counted once: Σ Anonymous + the largest file-backed RSS of its processes, from /proc/<pid>/smaps_rollup (for one process: its RSS); Σ Pss beside it for reference (lower: Pss splits the \`node\` binary's pages with other Node processes of this shared machine). Median of samples every 200 ms over 2 s, taken soon after the event (start, login, load) and after ${IDLE_MS / 1000} s left alone (30 s for the demo), when V8's memory reducer and the daemon's own collection when it goes quiet (src/lib/settle.ts) have run; the goals are read against the second, where a gateway spends its life. Peaks are the server process's VmHWM. The daemon's zone and its points' are Sydney. Start-up: from spawning the command to its "Hayloft is serving" line. Machine shared with other engineers' test runs while measured.

| figure | MiB | goal |
|---|---:|---|
| bare \`node\` process, idle (baseline) | ${m('bare')} (${range('bare')}) | |
| empty data folder, first start: 3 s after start | ${m('start')} (${range('start')}) | |
| empty data folder, first start: idle (${IDLE_MS / 1000} s after start) | ${m('idle')} (${range('idle')}); Σ Pss ${m('idlePss')} | ≤ 64 |
| after the first login: 1 s after | ${m('login')} (${range('login')}) | |
| after the first login: idle (${IDLE_MS / 1000} s after) | ${m('loginIdle')} (${range('loginIdle')}) | idle + ≤ 4 |
| after loading ${(POINTS + EQUIPS + 1).toLocaleString('en-US')} records and ${(POINTS * SAMPLES).toLocaleString('en-US')} samples over REST: 3 s after | ${m('loaded')} (${range('loaded')}) | ≤ 100 |
| the same, idle (${IDLE_MS / 1000} s after) | ${m('loadedIdle')} (${range('loadedIdle')}) | |
| peak while loading (server process) | ${m('peak')} (${range('peak')}) | ≤ 128 |
| \`serve --demo\` (7 points polling), after 8 s | ${m('demo')} (${range('demo')}) | |
| \`serve --demo\`, after 30 s | ${m('demoIdle')} (${range('demoIdle')}); Σ Pss ${m('demoPss')} | ≤ 72 |

| start-up, ms | median (range) |
|---|---:|
| first start (empty data folder: administrator, client, certificate made) | ${ms('first')} |
| restart on that data folder | ${ms('restart')} |
| \`serve --demo\`, first start | ${ms('demo')} |
`;
console.log(md);
if (!hasFlag('--no-record')) recordSection('memory', md);
