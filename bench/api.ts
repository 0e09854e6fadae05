/**
 * bench/api: read throughput of the REST API as users run it: `hayloft serve` as its own process
 * (started by its bin, startDaemon in bench/harness.ts), wrk as the client (one thread, 4 connections), every
 * request with a bearer token, answers in JSON. Requests are shaped as clients send them: GET
 * with the query in the URL, and POST with a JSON grid body (and a Zinc one for read by id), as
 * the interface describes. The baseline of the same run is a bare node:http server (its own
 * process too) answering a 100-byte body to GET and to POST with the same wrk settings. Each read
 * by id is measured right after the bare server with the same method, and compared with it: the
 * median of those pairs' ratios is the figure, so the machine's drift over a round is not in it.
 *
 * Data: 1 site, 10 equips, N points (1,000 and 10,000) with typical tags, created over REST.
 * Cases: read by id; read `point and his` (every point); read `his and equipRef==@<equip>` (one
 * equip's points).
 *
 *   npm run bench -- api [--rounds N] [--seconds S] [--no-record]
 *
 * Needs wrk (Debian package `wrk`); installed with apt-get when missing and running as root.
 */
import { execFile, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { type Bare, type Daemon, fmtRate, hasFlag, jsonGrid, loginDaemon, machineLine, median, numberArg, postOp, recordSection, startBare, startDaemon, stopDaemon } from './harness.js';

const ROUNDS = numberArg('--rounds', 5);
const SECONDS = numberArg('--seconds', 3);
const CONNECTIONS = 4;
const scripts = mkdtempSync(path.join(os.tmpdir(), 'hayloft-bench-wrk-'));

function ensureWrk(): void {
  if (spawnSync('wrk', ['--version']).error === undefined) return;
  if (process.getuid?.() === 0) {
    console.error('bench/api: installing wrk (apt-get install -y wrk)...');
    spawnSync('sh', ['-c', 'apt-get install -y wrk >/dev/null 2>&1 || (apt-get update >/dev/null && apt-get install -y wrk >/dev/null)'], { stdio: 'inherit' });
    if (spawnSync('wrk', ['--version']).error === undefined) return;
  }
  throw new Error('bench/api needs wrk: apt-get install -y wrk');
}

interface Shot {
  url: string;
  headers: Record<string, string>;
  /** A POST body; GET without. */
  body?: string;
  /** POST bodies sent in turn, one per request (a client asking for other points each time). */
  bodies?: readonly string[];
}

let scriptNo = 0;
/** A wrk Lua script that POSTs `body` (wrk's own way of sending a body). */
function postScript(body: string): string {
  const file = path.join(scripts, `post${scriptNo++}.lua`);
  writeFileSync(file, `wrk.method = "POST"\nwrk.body = ${JSON.stringify(body)}\n`);
  return file;
}

/**
 * A wrk Lua script that POSTs the bodies in turn. The requests are formatted once, in init, so
 * wrk spends no more per request than with one body.
 */
function bodiesScript(bodies: readonly string[]): string {
  const file = path.join(scripts, `post${scriptNo++}.lua`);
  const list = bodies.map((b) => JSON.stringify(b)).join(',\n');
  writeFileSync(
    file,
    `local bodies = {\n${list}\n}\nlocal reqs = {}\nlocal i = 0\n` +
      `init = function(args)\n  for k, b in ipairs(bodies) do reqs[k] = wrk.format("POST", nil, nil, b) end\nend\n` +
      `request = function()\n  i = i % #reqs + 1\n  return reqs[i]\nend\n`,
  );
  return file;
}

/** Requests per second reported by wrk for one request shape. */
async function wrk(shot: Shot, seconds = SECONDS): Promise<number> {
  const h = Object.entries(shot.headers).flatMap(([k, v]) => ['-H', `${k}: ${v}`]);
  const s = shot.bodies !== undefined ? ['-s', bodiesScript(shot.bodies)] : shot.body === undefined ? [] : ['-s', postScript(shot.body)];
  const { stdout: out } = await promisify(execFile)('wrk', ['-t1', `-c${CONNECTIONS}`, `-d${seconds}s`, ...s, ...h, shot.url], { encoding: 'utf8' });
  const m = /Requests\/sec:\s+([\d.]+)/.exec(out);
  const errors = /Non-2xx or 3xx responses: (\d+)/.exec(out);
  if (errors !== null) throw new Error(`wrk saw ${errors[1]} error answers from ${shot.url}:\n${out}`);
  if (m === null) throw new Error(`cannot read wrk's output:\n${out}`);
  return Number(m[1]);
}

/** One answer of a shot, checked: a case that answers an error grid measures nothing. */
async function check(shot: Shot, rows: number): Promise<void> {
  const res = await fetch(shot.url, { method: shot.body === undefined ? 'GET' : 'POST', headers: shot.headers, ...(shot.body === undefined ? {} : { body: shot.body }) });
  const text = await res.text();
  if (!res.ok || text.includes('"err"')) throw new Error(`${shot.url}: ${res.status} ${text.slice(0, 300)}`);
  const got = (JSON.parse(text) as { rows: unknown[] }).rows.length;
  if (got !== rows) throw new Error(`${shot.url} answered ${got} rows, not ${rows}`);
}

/** 1 site, 10 equips, `points` points over REST; the ids of the first 1,000 points and of the fourth equip. */
async function seed(d: Daemon, token: string, points: number): Promise<{ pointId: string; pointIds: string[]; equipId: string }> {
  await postOp(d.base, token, 'createRec', jsonGrid([{ site: 'm:', name: 'site', dis: 'Bench Site', tz: 'Sydney', area: 'n:5000 m²' }]));
  await postOp(d.base, token, 'createRec', jsonGrid(Array.from({ length: 10 }, (_, e) => ({ equip: 'm:', ahu: 'm:', name: `ahu${e}`, dis: `AHU ${e}`, siteRef: 'r:site' }))));
  const pointIds: string[] = [];
  for (let from = 0; from < points; from += 1000) {
    const rows = Array.from({ length: 1000 }, (_, i) => {
      const p = from + i;
      const e = p % 10;
      return {
        point: 'm:', his: 'm:', cur: 'm:', sensor: 'm:', temp: 'm:', kind: 's:Number', unit: 's:°C', tz: 's:Sydney',
        name: `p${p}`, dis: `AHU ${e} point ${p}`, equipRef: `r:site.ahu${e}`, siteRef: 'r:site',
      };
    });
    const g = await postOp(d.base, token, 'createRec', jsonGrid(rows));
    if (from === 0) for (const r of g.rows) pointIds.push(String(r.id).slice(2).split(' ')[0] as string);
  }
  const equip = await postOp(d.base, token, 'read', jsonGrid([{ filter: 's:equip and name=="ahu3"' }]));
  return { pointId: pointIds[0] as string, pointIds, equipId: String(equip.rows[0]?.id).slice(2).split(' ')[0] as string };
}

ensureWrk();
const bare: Bare = await startBare();
const lines: string[] = [
  `Run: \`npm run bench -- api\` on ${machineLine()}; the daemon is \`hayloft serve\` as its own process, started by its bin (its own runtime settings), the bare server another process; wrk 1 thread, ${CONNECTIONS} connections, ${SECONDS} s per measure, ${ROUNDS} rounds (each starting at another case, 1 s before each measure), medians; wrk and the servers share the machine's 2 cores. Every read by id is measured right after the bare server with the same method, and its ratio is the median of those pairs' ratios: the machine's speed drifts over seconds, and a baseline taken a minute away measures the drift. Every Hayloft request carries a bearer token (verified, cached, session checked) and answers JSON; a POST sends its request as a grid in the body (JSON v3, or Zinc where it says so).`,
  '',
  '| points | case | req/s (median) | vs bare, same method (median of pairs) | goal |',
  '|---:|---|---:|---:|---|',
];

/** A case: its shot, the rows its answer has (checked first), and the bare shot it is paired with. */
interface Case {
  name: string;
  shot: Shot;
  rows: number;
  pairedWith?: 'GET' | 'POST';
}

for (const points of [1000, 10_000]) {
  const d = await startDaemon();
  const token = await loginDaemon(d.base);
  const { pointId, pointIds, equipId } = await seed(d, token, points);
  const auth = { Authorization: `Bearer ${token}`, Accept: 'application/json' };
  const json = { ...auth, 'Content-Type': 'application/json' };
  const zinc = { ...auth, 'Content-Type': 'text/zinc; charset=utf-8' };
  const read = `${d.base}/api/read`;
  const all = 'point and his';
  const equip = `his and equipRef==@${equipId}`;
  const bareShots: Record<'GET' | 'POST', Shot> = {
    GET: { url: `${bare.base}/`, headers: auth },
    POST: { url: `${bare.base}/`, headers: json, body: jsonGrid([{ id: `r:${pointId}` }]) },
  };
  const cases: Case[] = [
    { name: 'read by id, GET', shot: { url: `${read}?id=@${pointId}`, headers: auth }, rows: 1, pairedWith: 'GET' },
    { name: 'read by id, POST (JSON grid)', shot: { url: read, headers: json, body: jsonGrid([{ id: `r:${pointId}` }]) }, rows: 1, pairedWith: 'POST' },
    // A client that asks for another point each time: no body is seen twice in a row, and more
    // bodies than the server keeps decoded (grid-cache.ts), so every one is decoded.
    {
      name: `read by id, POST (JSON grid), another of ${pointIds.length} points each request`,
      shot: { url: read, headers: json, body: jsonGrid([{ id: `r:${pointId}` }]), bodies: pointIds.map((id) => jsonGrid([{ id: `r:${id}` }])) },
      rows: 1,
      pairedWith: 'POST',
    },
    { name: 'read by id, POST (Zinc grid)', shot: { url: read, headers: zinc, body: `ver:"3.0"\nid\n@${pointId}\n` }, rows: 1, pairedWith: 'POST' },
    { name: `read \`${all}\` (${points} rows), GET`, shot: { url: `${read}?filter=${encodeURIComponent(all)}`, headers: auth }, rows: points },
    { name: `read \`${all}\` (${points} rows), POST`, shot: { url: read, headers: json, body: jsonGrid([{ filter: `s:${all}` }]) }, rows: points },
    { name: `read \`his and equipRef==@equip\` (${points / 10} rows), GET`, shot: { url: `${read}?filter=${encodeURIComponent(equip)}`, headers: auth }, rows: points / 10 },
    { name: `read \`his and equipRef==@equip\` (${points / 10} rows), POST`, shot: { url: read, headers: json, body: jsonGrid([{ filter: `s:${equip}` }]) }, rows: points / 10 },
  ];
  for (const c of cases) await check(c.shot, c.rows);
  // One short pass first, discarded: JIT warm-up and first-use caches (views, row texts, tokens).
  for (const s of [bareShots.GET, bareShots.POST, ...cases.map((c) => c.shot)]) await wrk(s, 1);
  // Each round starts at another case (every case follows every other equally often) and each
  // measure starts after a pause: a case must not pay for the garbage its predecessor left.
  const rates = new Map<string, number[]>();
  const ratios = new Map<string, number[]>();
  const bareRates: Record<'GET' | 'POST', number[]> = { GET: [], POST: [] };
  const measure = async (shot: Shot): Promise<number> => {
    await new Promise((resolve) => setTimeout(resolve, 1000));
    return wrk(shot);
  };
  for (let r = 0; r < ROUNDS; r++) {
    for (let i = 0; i < cases.length; i++) {
      const c = cases[(r + i) % cases.length] as Case;
      const base = c.pairedWith === undefined ? undefined : await measure(bareShots[c.pairedWith]);
      const rate = await measure(c.shot);
      rates.set(c.name, [...(rates.get(c.name) ?? []), rate]);
      if (base !== undefined && c.pairedWith !== undefined) {
        bareRates[c.pairedWith].push(base);
        ratios.set(c.name, [...(ratios.get(c.name) ?? []), rate / base]);
      }
      const pair = base === undefined ? '' : ` (bare ${c.pairedWith} just before: ${fmtRate(base)}, ratio ${(rate / base).toFixed(2)})`;
      console.log(`${points} points, round ${r + 1}: ${c.name}: ${fmtRate(rate)} req/s${pair}`);
    }
  }
  for (const m of ['GET', 'POST'] as const) {
    lines.push(`| ${points.toLocaleString('en')} | bare node:http, ${m} (baseline; ${bareRates[m].length} measures, one before each case paired with it) | ${fmtRate(median(bareRates[m]))} | | |`);
  }
  for (const c of cases) {
    const goal = c.name.includes('another of')
      ? '(every body decoded)'
      : c.name.startsWith('read by id')
        ? '≥ 0.70 of bare'
        : c.name.includes('point and his') && points === 1000
          ? '≥ 276/s (3 × 92)'
          : c.name.includes('equipRef') && points === 1000
            ? '≥ 2,973/s (3 × 991)'
            : '';
    const rs = ratios.get(c.name);
    const ratio = rs === undefined ? '' : `${median(rs).toFixed(2)} (${Math.min(...rs).toFixed(2)}-${Math.max(...rs).toFixed(2)})`;
    lines.push(`| ${points.toLocaleString('en')} | ${c.name} | ${fmtRate(median(rates.get(c.name) ?? []))} | ${ratio} | ${goal} |`);
  }
  await stopDaemon(d);
}
await bare.stop();
rmSync(scripts, { recursive: true, force: true });
lines.push('', 'The reference figures (92 and 991 reads/s, 23,600 req/s by id) are the Haystack reference Java server on this machine class, from issue 2.');
const table = lines.join('\n');
console.log(table);
if (!hasFlag('--no-record')) recordSection('api', table);
