/**
 * bench/soak: a long run at 10,000 points. `hayloft serve` as a user runs it (its own process,
 * started by its bin) polls 100 simulated Modbus TCP devices (bench/modbus-sim, another process)
 * of 100 sensor-like registers every second, every point collecting history every second
 * (hisCollectInterval 1 s, modbusScale 0.1). The model is created over REST, then the daemon is
 * restarted on that data folder (as on a device after a reboot) and left polling. Measured:
 *   - gaps in history: after the run, every point is read back with hisRead over HTTP; each
 *     second of the window in which a point has no sample is a missing second;
 *   - event-loop delay: the daemon's /metrics (prom-client's process metrics:
 *     nodejs_eventloop_lag_p99_seconds and _max_seconds, a histogram reset at every scrape), read
 *     every `--scrape` seconds: the worst and the median scrape window's p99, and the worst max;
 *   - resident memory of the server (/proc/<pid>/status VmRSS, every second): max and final, and
 *     its anonymous part (RssAnon: the heaps) at its largest; the rest is file pages (the node
 *     binary, LevelDB's table files it maps to read them), page cache the kernel can take back;
 *     LevelDB's mapped tables are read from /proc/<pid>/smaps once a minute;
 *   - CPU of the server (utime + stime of /proc/<pid>/stat) as a share of one core, whole window
 *     and the worst minute;
 *   - the longest /metrics scrape, and the history backlog (hayloft_history_backlog_samples) at
 *     its largest.
 * A history seal falls every 1,024 samples of a point (about 17 min at 1 s): a run shorter than
 * that misses it.
 *
 *   npm run bench -- soak [--minutes 60] [--devices 100] [--points 100] [--warmup 30]
 *                         [--scrape 10] [--label before] [--no-record]
 */
import { readFileSync } from 'node:fs';
import { procStatus } from '../test/helpers/rss.js';
import { hasFlag, hisReadTimes, inLanes, loginDaemon, machineLine, median, numberArg, procCpuMs, recordSection, sleep, startDaemon, stopDaemon, stringArg } from './harness.js';
import { seedPlant, startSensorDevices } from './modbus-sim.js';

const MINUTES = numberArg('--minutes', 60);
const DEVICES = numberArg('--devices', 100);
const PER = numberArg('--points', 100);
const POINTS = DEVICES * PER;
const WARMUP = numberArg('--warmup', 30);
const SCRAPE = numberArg('--scrape', 10);
const record = !hasFlag('--no-record');
/** `--label before` records into the section `soak-before` (docs/performance.md). */
const LABEL = stringArg('--label');

/** The value of an unlabelled sample of a Prometheus text exposition, or NaN. */
function metric(text: string, name: string): number {
  const m = new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(text);
  return m === null ? NaN : Number(m[1]);
}

/**
 * Resident MB of LevelDB's tables mapped into `pid` (64-bit LevelDB maps the tables it holds
 * open; config storeOpenFiles bounds them): the .ldb mappings of /proc/<pid>/smaps.
 */
function mappedTablesMb(pid: number): number {
  let kb = 0;
  let table = false;
  for (const line of readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    if (/^[0-9a-f]+-[0-9a-f]+ /.test(line)) table = line.endsWith('.ldb');
    else if (table && line.startsWith('Rss:')) kb += Number(line.split(/\s+/)[1]);
  }
  return kb / 1024;
}

interface Minute {
  minute: number;
  rss: number;
  anon: number;
  tables: number;
  cpu: number;
  loopP99: number;
  loopMax: number;
  scrape: number;
  backlog: number;
}

async function main(): Promise<void> {
  const sim = await startSensorDevices(DEVICES, PER);
  const env = { HAYLOFT_METRICS_OPEN: 'true' };
  try {
    // The model, created over REST; then the daemon restarted on it, as after a reboot.
    const first = await startDaemon([], env);
    const dir = first.dir;
    let ids: string[] = [];
    try {
      const token = await loginDaemon(first.base);
      ids = await seedPlant(first.base, token, sim.ports, PER);
    } finally {
      await stopDaemon(first, true);
    }
    const d = await startDaemon([], env, { dir });
    try {
      let token = await loginDaemon(d.base);
      if (ids.length !== POINTS) throw new Error(`${ids.length} points read back, ${POINTS} created`);
      console.log(`${DEVICES} connectors, ${POINTS} points polled and collected every second; warming up ${WARMUP} s, then ${MINUTES} min`);
      await sleep(WARMUP * 1000);

      const scrapeOnce = async (): Promise<{ ms: number; text: string }> => {
        const s0 = performance.now();
        const res = await fetch(`${d.base}/metrics`);
        const text = await res.text();
        if (!res.ok) throw new Error(`/metrics: ${res.status} ${text.slice(0, 200)}`);
        return { ms: performance.now() - s0, text };
      };
      const poll0 = metric((await scrapeOnce()).text, 'hayloft_poll_failures_total');
      // The window: whole seconds, so each second of it should hold one sample of every point.
      await sleep(1000 - (Date.now() % 1000) + 5);
      const t0 = Math.floor(Date.now() / 1000) * 1000;
      const end = t0 + MINUTES * 60_000;
      const c0 = procCpuMs(d.pid);

      const scrapes: { at: number; ms: number; p99: number; max: number; backlog: number }[] = [];
      let running = true;
      const scraper = (async () => {
        while (running) {
          const at = Date.now();
          const s = await scrapeOnce();
          scrapes.push({ at, ms: s.ms, p99: metric(s.text, 'nodejs_eventloop_lag_p99_seconds') * 1000, max: metric(s.text, 'nodejs_eventloop_lag_max_seconds') * 1000, backlog: metric(s.text, 'hayloft_history_backlog_samples') });
          await sleep(Math.max(0, SCRAPE * 1000 - (Date.now() - at)));
        }
      })();
      const rss: number[] = [];
      const anon: number[] = [];
      let anonMax = 0;
      let tablesMax = 0;
      const minutes: Minute[] = [];
      let cpuMark = c0;
      let scrapeMark = 0;
      while (Date.now() < end) {
        await sleep(1000 - ((Date.now() - t0) % 1000));
        rss.push(procStatus(d.pid, 'VmRSS') / 2 ** 20);
        anon.push(procStatus(d.pid, 'RssAnon') / 2 ** 20);
        anonMax = Math.max(anonMax, anon[anon.length - 1] as number);
        const s = Math.round((Date.now() - t0) / 1000);
        if (s % 60 === 0 && s > 0) {
          const c = procCpuMs(d.pid);
          const tables = mappedTablesMb(d.pid);
          tablesMax = Math.max(tablesMax, tables);
          const w = scrapes.slice(scrapeMark);
          scrapeMark = scrapes.length;
          const m: Minute = {
            minute: s / 60,
            rss: Math.max(...rss.slice(-60)),
            anon: Math.max(...anon.slice(-60)),
            tables,
            cpu: (c.user + c.system - cpuMark.user - cpuMark.system) / 600,
            loopP99: Math.max(...w.map((x) => x.p99), 0),
            loopMax: Math.max(...w.map((x) => x.max), 0),
            scrape: Math.max(...w.map((x) => x.ms), 0),
            backlog: Math.max(...w.map((x) => x.backlog), 0),
          };
          cpuMark = c;
          minutes.push(m);
          console.log(`${m.minute} min: RSS max ${m.rss.toFixed(0)} MB (anonymous ${m.anon.toFixed(0)}, LevelDB tables ${m.tables.toFixed(0)}), CPU ${m.cpu.toFixed(1)} %, loop p99 ${m.loopP99.toFixed(0)} ms (max ${m.loopMax.toFixed(0)}), scrape ${m.scrape.toFixed(0)} ms, backlog ${m.backlog}`);
        }
      }
      const t1 = Math.floor(Date.now() / 1000) * 1000;
      const c1 = procCpuMs(d.pid);
      running = false;
      await scraper;
      const rssFinal = procStatus(d.pid, 'VmRSS') / 2 ** 20;
      const poll1 = metric((await scrapeOnce()).text, 'hayloft_poll_failures_total');
      const cpu = ((c1.user + c1.system - c0.user - c0.system) / (t1 - t0)) * 100;

      // Gaps: what was stored, once what waited in memory had time to be written.
      // (Up to 10 min: a seal storm near the end of the window leaves a large backlog.) What
      // still waits after that counts as missing, and the table says how much it was.
      let backlogAtRead = metric((await scrapeOnce()).text, 'hayloft_history_backlog_samples');
      for (let i = 0; i < 600 && backlogAtRead > 0; i++) {
        await sleep(1000);
        backlogAtRead = metric((await scrapeOnce()).text, 'hayloft_history_backlog_samples');
      }
      token = await loginDaemon(d.base);
      const seconds = (t1 - t0) / 1000;
      const missingAt = new Uint32Array(seconds);
      let missing = 0;
      let pointsWithGaps = 0;
      let longest = 0;
      let extra = 0;
      await inLanes(ids, 4, async (id) => {
        const have = new Uint8Array(seconds);
        for (const t of await hisReadTimes(d.base, token, id, t0, t1)) {
          const s = Math.floor((t - t0) / 1000);
          if (have[s] === 1) extra++;
          have[s] = 1;
        }
        let run = 0;
        let gaps = 0;
        for (let s = 0; s < seconds; s++) {
          if (have[s] === 1) run = 0;
          else {
            gaps++;
            missingAt[s] = (missingAt[s] as number) + 1;
            longest = Math.max(longest, ++run);
          }
        }
        missing += gaps;
        if (gaps > 0) pointsWithGaps++;
      });
      let secondsAny = 0;
      let secondsMost = 0;
      for (const n of missingAt) {
        if (n > 0) secondsAny++;
        if (n > POINTS / 2) secondsMost++;
      }

      const p99s = scrapes.map((x) => x.p99);
      const r = {
        seconds,
        missing,
        pointsWithGaps,
        longest,
        secondsAny,
        secondsMost,
        extra,
        loopP99Worst: Math.max(...p99s),
        loopP99Median: median(p99s),
        loopMax: Math.max(...scrapes.map((x) => x.max)),
        rssMax: Math.max(...rss),
        rssFirst: rss[0] as number,
        rssFinal,
        anonMax,
        tablesMax,
        cpu,
        cpuWorstMinute: Math.max(...minutes.map((m) => m.cpu)),
        scrapeMax: Math.max(...scrapes.map((x) => x.ms)),
        scrapeMedian: median(scrapes.map((x) => x.ms)),
        backlogMax: Math.max(...scrapes.map((x) => x.backlog)),
        pollFailures: poll1 - poll0,
        backlogAtRead,
      };
      console.log(r);
      const verdict = (ok: boolean): string => (ok ? 'met' : '**missed**');
      const md = `
### Soak: ${POINTS.toLocaleString('en')} points polled and collected every second for ${MINUTES} min (${DEVICES} Modbus TCP devices × ${PER})

\`npm run bench -- soak${process.argv.length > 2 ? ' ' + process.argv.slice(2).join(' ') : ''}\` (${machineLine()}). \`hayloft serve\` by its bin
(its own process, \`HAYLOFT_METRICS_OPEN=true\`), restarted on a data folder holding the model created
over REST; ${DEVICES} simulated Modbus TCP devices (another process) of ${PER} sensor-like holding registers,
one connector each polled every second, every point \`hisCollectInterval: 1s\`, \`modbusScale: 0.1\`.
Measured over ${seconds} s after ${WARMUP} s of polling${seconds < 1024 ? ' (shorter than a seal cycle of 1,024 s: no seal in the window)' : ` (the seal of every point's first 1,024 samples falls at about ${Math.round((1024 - WARMUP) / 60)} min)`};
/metrics scraped every ${SCRAPE} s; history read back with hisRead once the backlog was written.

| figure | value | goal (issue 28) |
|---|---|---|
| missing point-seconds in history | ${missing.toLocaleString('en')} of ${(seconds * POINTS).toLocaleString('en')} (${((missing / (seconds * POINTS)) * 100).toFixed(3)} %) | 0: ${verdict(missing === 0)} |
| points with a gap; longest gap | ${pointsWithGaps.toLocaleString('en')}; ${longest} s | |
| seconds in which some point / most points have no sample | ${secondsAny} / ${secondsMost} | |
| event-loop delay p99, worst / median ${SCRAPE} s window | ${r.loopP99Worst.toFixed(0)} ms / ${r.loopP99Median.toFixed(0)} ms | < 100 ms: ${verdict(r.loopP99Worst < 100)} |
| event-loop delay, max | ${r.loopMax.toFixed(0)} ms | |
| RSS of the server, first / max / final | ${r.rssFirst.toFixed(0)} / ${r.rssMax.toFixed(0)} / ${r.rssFinal.toFixed(0)} MB | < 200 MB: ${verdict(r.rssMax < 200)} |
| of it anonymous (heaps), max; LevelDB's tables mapped, max (at the minutes); the rest the node binary | ${r.anonMax.toFixed(0)} MB; ${r.tablesMax.toFixed(0)} MB | |
| CPU of the server, share of one core: window / worst minute | ${cpu.toFixed(1)} % / ${r.cpuWorstMinute.toFixed(1)} % | < 25 %: ${verdict(cpu < 25)} |
| /metrics scrape, longest / median | ${(r.scrapeMax / 1000).toFixed(2)} s / ${r.scrapeMedian.toFixed(0)} ms | |
| history backlog (samples waiting in memory), max; when read back | ${r.backlogMax.toLocaleString('en')}; ${backlogAtRead.toLocaleString('en')} | |
| failed polls in the window | ${r.pollFailures} | 0 |

By minute (RSS max, its anonymous part max, LevelDB's tables mapped at the minute, CPU, worst loop p99 and max, longest scrape, largest backlog):

| min | RSS MB | anon MB | tables MB | CPU % | loop p99 ms | loop max ms | scrape ms | backlog |
|---:|---:|---:|---:|---:|---:|---:|---:|---:|
${minutes.map((m) => `| ${m.minute} | ${m.rss.toFixed(0)} | ${m.anon.toFixed(0)} | ${m.tables.toFixed(0)} | ${m.cpu.toFixed(1)} | ${m.loopP99.toFixed(0)} | ${m.loopMax.toFixed(0)} | ${m.scrape.toFixed(0)} | ${m.backlog.toLocaleString('en')} |`).join('\n')}
`;
      if (record) recordSection(LABEL === undefined ? 'soak' : `soak-${LABEL}`, md);
      else console.log(md);
    } finally {
      await stopDaemon(d);
    }
  } finally {
    sim.stop();
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
