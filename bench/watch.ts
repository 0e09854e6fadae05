/**
 * bench/watch: watches under a realistic device load. 10,000 cur points; a simulated driver sets
 * 1,000 values a second (model.setTransient on random points, as the poller will); 10 watches
 * are each polled once a second over HTTP by an authenticated client, staggered. Measured: poll
 * latency (request to last byte, at the client) median and p99, and the CPU share of the server
 * process (process.cpuUsage over the run; the driver simulation runs in it too, as the poller
 * will). The pollers run in a child process so their HTTP client's CPU is not counted.
 *
 * Scenarios: 10 watches x 1,000 distinct points (the goal case: p99 < 10 ms, < 10 % of a core),
 * and 10 watches each holding all 10,000 points (every change marks 10 watches, each poll
 * answers ~950 rows). A baseline phase runs the driver alone, with no watch open.
 *
 * Scenarios run in interleaved rounds (A B C A B C ...), so load from elsewhere on this shared
 * machine hits them alike; latencies are pooled over the rounds, CPU is the median of rounds.
 *
 *   npm run bench -- watch [--rounds N] [--seconds S per round] [--no-record]
 */
import { fork } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { App } from '../src/app.js';
import { loadConfig } from '../src/config/index.js';
import { findTimeZone } from '../src/haystack/tz.js';
import { HDict, HNumber, type HRef, MARKER } from '../src/haystack/values.js';
import { silentLogger } from '../src/lib/log.js';
import { hasFlag, machineLine, median, numberArg, recordSection } from './harness.js';

const ROUNDS = numberArg('--rounds', 3);
/** Per round: ROUNDS x SECONDS (30 s by default) of polling per scenario in all. */
const SECONDS = numberArg('--seconds', 10);
const POINTS = 10_000;
const WATCHES = 10;
const CHANGES_PER_SEC = 1000;
const POLL_EVERY_MS = 1000;

/** What the poller child is told, and what it answers. */
interface PollJob {
  base: string;
  token: string;
  watchIds: string[];
  seconds: number;
  /** Instead of watchPoll, POST `about` on the same schedule: the HTTP baseline. */
  about?: boolean;
}
interface PollResult {
  latencies: number[];
  rows: number[];
  errors: number;
}

// ---- the poller child ------------------------------------------------------------------------

/** One POST over a keep-alive connection (node:http: a lean client, so the latency is mostly the server's). */
function post(agent: http.Agent, url: URL, headers: Record<string, string>, body: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: 'POST', agent, headers: { ...headers, 'content-length': Buffer.byteLength(body) } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

async function pollerMain(job: PollJob): Promise<PollResult> {
  const out: PollResult = { latencies: [], rows: [], errors: 0 };
  const headers = { authorization: `Bearer ${job.token}`, accept: 'application/json', 'content-type': 'application/json' };
  const agent = new http.Agent({ keepAlive: true });
  const url = new URL(`${job.base}/api/${job.about === true ? 'about' : 'watchPoll'}`);
  // A fresh process: its HTTP client (undici) is cold and has no connections yet. Warm it for 2 s
  // before recording, so the figures are of steady polling, not of the JIT and TCP handshakes.
  const warmUntil = performance.now() + 2000;
  const start = performance.now() + 200;
  const end = warmUntil + job.seconds * 1000;
  const one = async (watchId: string, due: number): Promise<void> => {
    while (due < end) {
      const wait = due - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      const body = JSON.stringify({ meta: { ver: '2.0', ...(job.about === true ? {} : { watchId: `s:${watchId}` }) }, cols: [{ name: 'empty' }], rows: [] });
      const t0 = performance.now();
      const res = await post(agent, url, headers, body);
      const text = res.text;
      const dt = performance.now() - t0;
      if (res.status !== 200) out.errors++;
      else if (t0 >= warmUntil) {
        out.latencies.push(dt);
        out.rows.push((JSON.parse(text) as { rows: unknown[] }).rows.length);
      }
      due += POLL_EVERY_MS;
    }
  };
  // Tell the parent when recording starts, so it measures its CPU over the same window.
  setTimeout(() => process.send?.({ type: 'measuring' }), warmUntil - performance.now());
  // Staggered: watch i is polled at i/10 of each second.
  await Promise.all(job.watchIds.map((id, i) => one(id, start + (i * POLL_EVERY_MS) / job.watchIds.length)));
  agent.destroy();
  return out;
}


// ---- the server side -------------------------------------------------------------------------

async function server(): Promise<{ app: App; base: string; token: string; ids: string[]; stop: () => Promise<void> }> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'hayloft-bench-'));
  const config = loadConfig({
    env: { HAYLOFT_DATA_DIR: dir, HAYLOFT_HOST: '127.0.0.1', HAYLOFT_PORT: '0', HAYLOFT_HTTPS_PORT: 'off', HAYLOFT_TZ: 'UTC', HAYLOFT_LOG_LEVEL: 'warn' },
    zones: { host: () => 'UTC', known: (n) => findTimeZone(n) !== undefined },
  });
  const app = await App.start({
    config,
    log: silentLogger(),
    firstRun: { adminUser: 'bench@example.com', adminPassword: 'bench-password', clientId: 'bench', clientSecret: 'bench-secret-0123456789' },
  });
  const [site] = await app.model.create([HDict.of({ site: MARKER, name: 'site', tz: 'Sydney' })]);
  const siteRef = site?.get('id') as HRef;
  const ids: string[] = [];
  for (let e = 0; e < 10; e++) {
    const [equip] = await app.model.create([HDict.of({ equip: MARKER, name: `ahu${e}`, siteRef })]);
    const equipRef = equip?.get('id') as HRef;
    const rows = Array.from({ length: POINTS / 10 }, (_, p) =>
      HDict.of({ point: MARKER, cur: MARKER, his: MARKER, sensor: MARKER, kind: 'Number', unit: '°C', name: `p${p}`, dis: `AHU ${e} point ${p}`, equipRef, siteRef }),
    );
    for (const rec of await app.model.create(rows)) ids.push((rec.get('id') as HRef).id);
  }
  const base = `http://127.0.0.1:${app.port}`;
  const res = await fetch(`${base}/oauth2/token`, {
    method: 'POST',
    headers: { authorization: 'Basic ' + Buffer.from('bench:bench-secret-0123456789').toString('base64'), 'content-type': 'application/json' },
    body: JSON.stringify({ grant_type: 'password', username: 'bench@example.com', password: 'bench-password' }),
  });
  const token = ((await res.json()) as { access_token: string }).access_token;
  return {
    app,
    base,
    token,
    ids,
    stop: async () => {
      await app.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The simulated driver: CHANGES_PER_SEC random setTransient calls a second, paced every 10 ms. */
function driver(app: App, ids: readonly string[]): { count: () => number; stop: () => number } {
  const t0 = performance.now();
  let done = 0;
  const tick = (): void => {
    const due = Math.floor(((performance.now() - t0) * CHANGES_PER_SEC) / 1000);
    for (; done < due; done++) {
      const id = ids[Math.floor(Math.random() * ids.length)] as string;
      app.model.setTransient(id, { curVal: new HNumber(Math.round(Math.random() * 300) / 10, '°C'), curStatus: 'ok' });
    }
  };
  const timer = setInterval(tick, 10);
  return {
    count: () => done,
    stop: () => {
      clearInterval(timer);
      return done;
    },
  };
}

async function subscribe(base: string, token: string, ids: readonly string[]): Promise<string> {
  const res = await fetch(`${base}/api/watchSub`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, accept: 'application/json', 'content-type': 'application/json' },
    body: JSON.stringify({ meta: { ver: '2.0', watchDis: 's:bench', lease: 'n:1 min' }, cols: [{ name: 'id' }], rows: ids.map((id) => ({ id: `r:${id}` })) }),
  });
  const g = (await res.json()) as { meta: { watchId?: string; dis?: string } };
  if (res.status !== 200 || g.meta.watchId === undefined) throw new Error(`watchSub: ${res.status} ${g.meta.dis ?? ''}`);
  return g.meta.watchId.slice(2);
}

/** Polls from a child process; `onMeasuring` is called when it starts recording (after its warm-up). */
function pollInChild(job: PollJob, onMeasuring: () => void): Promise<PollResult> {
  return new Promise((resolve, reject) => {
    const child = fork(fileURLToPath(import.meta.url), ['--poller'], { stdio: 'inherit' });
    child.on('message', (m: { type: 'measuring' } | { type: 'done'; result: PollResult }) => {
      if (m.type === 'measuring') onMeasuring();
      else resolve(m.result);
    });
    child.once('error', reject);
    child.once('exit', (code) => {
      if (code !== 0) reject(new Error(`poller exited with ${code}`));
    });
    child.send(job);
  });
}

function percentile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)] ?? NaN;
}

/** One phase's raw figures. */
interface Raw {
  latencies: number[];
  rows: number[];
  errors: number;
  /** The WatchManager's own poll times (no HTTP, no encoding), ms. */
  opTimes: number[];
  /** Server process CPU, % of one core. */
  cpu: number;
  /** Value changes per second actually made. */
  changes: number;
}

interface Figures {
  polls: number;
  errors: number;
  rows: number;
  med: number;
  p99: number;
  max: number;
  cpu: number;
  changes: number;
  opMed: number;
  opP99: number;
}

function summary(raws: readonly Raw[]): Figures {
  const lat = raws.flatMap((r) => r.latencies);
  const rows = raws.flatMap((r) => r.rows);
  const ops = raws.flatMap((r) => r.opTimes);
  return {
    polls: lat.length,
    errors: raws.reduce((n, r) => n + r.errors, 0),
    rows: rows.length > 0 ? median(rows) : 0,
    med: lat.length > 0 ? median(lat) : NaN,
    p99: percentile(lat, 99),
    max: lat.length > 0 ? Math.max(...lat) : NaN,
    cpu: median(raws.map((r) => r.cpu)),
    changes: median(raws.map((r) => r.changes)),
    opMed: ops.length > 0 ? median(ops) : NaN,
    opP99: percentile(ops, 99),
  };
}

/** Runs the driver for `seconds` while (optionally) a child polls the watches; CPU of this process. */
async function phase(app: App, ids: readonly string[], job: PollJob | null, seconds: number): Promise<Raw> {
  const d = driver(app, ids);
  let cpu0 = process.cpuUsage();
  let wall0 = performance.now();
  let changes0 = 0;
  const opTimes: number[] = [];
  let measuring = false;
  const watches = app.watches;
  const poll = watches.poll.bind(watches);
  watches.poll = (...a: Parameters<typeof poll>) => {
    const t0 = performance.now();
    const out = poll(...a);
    if (measuring) opTimes.push(performance.now() - t0);
    return out;
  };
  let res: PollResult = { latencies: [], rows: [], errors: 0 };
  if (job === null) await new Promise((r) => setTimeout(r, seconds * 1000));
  else {
    res = await pollInChild(job, () => {
      measuring = true;
      cpu0 = process.cpuUsage();
      wall0 = performance.now();
      changes0 = d.count();
    });
  }
  const changes = d.stop() - changes0;
  const cpu = process.cpuUsage(cpu0);
  const wallUs = (performance.now() - wall0) * 1000;
  watches.poll = poll;
  return { ...res, opTimes, cpu: ((cpu.user + cpu.system) / wallUs) * 100, changes: (changes / wallUs) * 1e6 };
}

async function main(): Promise<void> {
  const load0 = os.loadavg()[0] ?? NaN;
  const s = await server();
  const lines: string[] = [
    `Run: \`npm run bench -- watch\` on ${machineLine()}; ${POINTS.toLocaleString('en')} cur points, a simulated driver setting ${CHANGES_PER_SEC.toLocaleString('en')} random values/s (model.setTransient), ${WATCHES} watches each polled every ${POLL_EVERY_MS / 1000} s over HTTP (JSON, bearer token), staggered, ${ROUNDS} interleaved rounds of ${SECONDS} s per scenario (latencies pooled over the rounds, CPU the median of rounds). Latency: at the client (a separate process, node:http keep-alive), request to last byte; WatchManager.poll alone (no HTTP, no encoding). CPU: user + system time of the server process (Hayloft and the simulated driver) over wall time, in % of one core.`,
    '',
    '| scenario | polls | rows per poll (median) | poll median | poll p99 | poll max | WatchManager.poll: median / p99 | server CPU | goal |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---|',
  ];
  const fmtMs = (x: number): string => `${x.toFixed(2)} ms`;
  const row = (name: string, raws: readonly Raw[], goal: string): void => {
    const f = summary(raws);
    if (f.errors > 0) throw new Error(`${name}: ${f.errors} polls failed`);
    const polls = f.polls === 0 ? '–' : String(f.polls);
    const lat = (x: number): string => (f.polls === 0 ? '–' : fmtMs(x));
    const op = Number.isNaN(f.opMed) ? '–' : `${f.opMed.toFixed(2)} / ${f.opP99.toFixed(2)} ms`;
    lines.push(`| ${name} | ${polls} | ${f.polls === 0 ? '–' : f.rows} | ${lat(f.med)} | ${lat(f.p99)} | ${lat(f.max)} | ${op} | ${f.cpu.toFixed(1)} % | ${goal} |`);
    console.log(`${name}: ${JSON.stringify(f)}`);
  };

  // Warm the code paths (JIT) before measuring.
  const warm = await subscribe(s.base, s.token, s.ids.slice(0, 1000));
  await phase(s.app, s.ids, { base: s.base, token: s.token, watchIds: [warm], seconds: 3 }, 3);
  s.app.watches.close(ownerOf(s), warm);

  const owner = ownerOf(s);
  const job = (watchIds: string[], about = false): PollJob => ({ base: s.base, token: s.token, watchIds, seconds: SECONDS, about });
  /** A scenario: opens its watches (points per watch), polls them, closes them. */
  const scenario = async (pointsOf: (w: number) => readonly string[] | null): Promise<Raw> => {
    const ids: string[] = [];
    for (let w = 0; w < WATCHES; w++) {
      const pts = pointsOf(w);
      ids.push(pts === null ? '' : await subscribe(s.base, s.token, pts));
    }
    const raw = await phase(s.app, s.ids, job(ids, pointsOf(0) === null), SECONDS);
    for (const id of ids) if (id !== '') s.app.watches.close(owner, id);
    return raw;
  };
  const cases: [string, string, (w: number) => readonly string[] | null][] = [
    ['HTTP baseline: POST `about` on the same schedule', '', () => null],
    [`${WATCHES} watches × 1,000 distinct points`, 'p99 < 10 ms, CPU < 10 %', (w) => s.ids.slice(w * 1000, (w + 1) * 1000)],
    [`${WATCHES} watches × all 10,000 points (shared)`, '', () => s.ids],
  ];
  const raws: Raw[][] = cases.map(() => []);
  const idle: Raw[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    idle.push(await phase(s.app, s.ids, null, Math.min(SECONDS, 5)));
    for (const [i, c] of cases.entries()) (raws[i] as Raw[]).push(await scenario(c[2]));
  }
  row('driver only, no watch open', idle, '');
  for (const [i, c] of cases.entries()) row(c[0], raws[i] as Raw[], c[1]);

  await s.stop();
  // Latency tails on this shared 2-core machine follow what else runs: say how busy it was.
  lines[0] += ` Load average (1 min) at start / end: ${load0.toFixed(1)} / ${(os.loadavg()[0] ?? NaN).toFixed(1)}; the \`about\` row shows what that load does to any request.`;
  lines.push(
    '',
    'Each value change costs one Map lookup and one Set add per watch holding the point; a poll walks only its watch\'s changed ids and encodes their rows, so its cost follows the rows answered, not the points watched.',
  );
  const table = lines.join('\n');
  console.log(table);
  if (!hasFlag('--no-record')) recordSection('watch', table);
}

/** The bench user's id: the owner of the watches it opened over HTTP. */
function ownerOf(s: { app: App }): string {
  const u = s.app.model.query('user', 1)[0];
  return (u?.get('id') as HRef).id;
}

// ---- entry: the same file is the benchmark and, forked with --poller, its polling client ----

if (process.argv[2] === '--poller') {
  process.once('message', (job: PollJob) => {
    void pollerMain(job).then((result) => {
      process.send?.({ type: 'done', result }, () => process.exit(0));
    });
  });
} else {
  await main();
}
