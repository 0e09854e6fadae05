/**
 * Issue 9, part 4: `hayloft sync status` prints the backlog per connector from the data folder
 * (exact counts, late samples included; per point with --points; JSON with --json), says what to look at instead while
 * the server holds the folder, and `check-config` never prints the uplink's secrets.
 */
import { spawn } from 'node:child_process';
import t, { type Test } from 'tap';
import { HDateTime, HNumber, type HVal } from '../../src/haystack/values.js';
import { UTC } from '../../src/haystack/tz.js';
import { ADMIN, CLIENT, type Running, startApp } from '../helpers/app.js';
import { singleWrite } from '../helpers/his.js';
import { postGrid } from '../helpers/http.js';
import { tempDir } from '../helpers/tmp.js';
import { configFile, readRec, seedEdge, until, uplinkSection } from '../helpers/uplink.js';

const CLI = new URL('../../src/cli.ts', import.meta.url).pathname;
const T0 = Date.UTC(2024, 0, 1);
const MIN = 60_000;

function run(args: string[], env: Record<string, string>): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, ['--import', 'tsx', CLI, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    p.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    p.on('exit', (status) => resolve({ status, stdout, stderr }));
  });
}

async function write(t: Test, edge: Running, id: string, from: number, to: number): Promise<void> {
  const samples: [HVal, HVal][] = [];
  for (let k = from; k < to; k++) samples.push([new HDateTime(T0 + k * MIN, UTC), id === 'fan' ? k % 2 === 0 : id === 'mode' ? 'auto' : HNumber.of(k, id === 'temp' ? '°F' : 'kW')]);
  const a = await postGrid(edge.base, 'hisWrite', singleWrite(id, samples), { headers: edge.auth });
  if (a.status !== 200) t.fail(`hisWrite ${id}: ${a.status} ${a.text.slice(0, 200)}`);
}

t.test('sync status: the backlog per connector', async (t) => {
  const cloud = await startApp(t);
  const dir = tempDir(t);
  const config = configFile(t, uplinkSection(cloud.base));
  const env = { HAYLOFT_DATA_DIR: dir, HAYLOFT_CONFIG: config, HAYLOFT_TZ: 'UTC' };
  const edge = await startApp(t, { dir, env: { HAYLOFT_CONFIG: config } });
  await seedEdge(t, edge);
  for (const id of ['temp', 'fan', 'mode', 'power']) await write(t, edge, id, 0, 100);
  await until('synced', () => edge.app.uplink?.stats().backlogPoints === 0 && edge.app.uplink.stats().mapped === 4);
  await cloud.stop();
  await write(t, edge, 'temp', 100, 150);
  await write(t, edge, 'fan', 100, 130);
  // Late: ten samples of mode written again, long before its cursor (they are sent again).
  await write(t, edge, 'mode', 20, 30);
  await until('down', async () => (await readRec(edge, 'temp'))?.syncStatus === '"down"');

  const locked = await run(['sync', 'status'], env);
  t.equal(locked.status, 1, 'refused while the server holds the folder');
  t.match(locked.stderr, /in use by another process.*syncStatus, syncErr and syncLast.*\/metrics/s, 'and says where to look meanwhile');

  await edge.stop();
  const r = await run(['sync', 'status'], env);
  t.equal(r.status, 0, r.stderr);
  t.match(r.stdout, new RegExp(`^connector upstream -> ${cloud.base.replace(/\./g, '\\.')}\n`));
  t.match(r.stdout, /points: +4 selected, 4 found upstream, 3 behind/);
  t.match(r.stdout, /backlog: +90 samples; oldest not yet acknowledged 2024-01-01T00:20:00Z/);
  t.match(r.stdout, /last acknowledged batch: 20\d\d-/);
  t.match(r.stdout, /last error: .*(no answer|ECONNREFUSED)/);

  const p = await run(['sync', 'status', '--points'], env);
  t.match(p.stdout, /hq\.ahu\.temp\t50 samples from 2024-01-01T01:40:00Z; acknowledged up to 2024-01-01T01:39:00Z/);
  t.match(p.stdout, /hq\.ahu\.fan\t30 samples/);
  t.match(p.stdout, /hq\.ahu\.mode\t10 samples from 2024-01-01T00:20:00Z; acknowledged up to 2024-01-01T01:39:00Z/, 'late samples counted');
  t.notMatch(p.stdout, /syd\.power/, 'points caught up are not listed');

  const j = await run(['sync', 'status', '--json'], env);
  const report = JSON.parse(j.stdout) as { name: string; samples: number; behind: number; perPoint: unknown[] }[];
  t.match(report, [{ name: 'upstream', samples: 90, behind: 3 }]);

  const c = await run(['check-config'], env);
  t.equal(c.status, 0, c.stderr);
  t.notMatch(c.stdout, new RegExp(`${CLIENT.secret}|${ADMIN.password}`), 'no secret printed');
  t.match(c.stdout, /"clientSecret": "\(hidden\)"/);
  const bad = await run(['sync', 'nope'], env);
  t.equal(bad.status, 1);
  t.match(bad.stderr, /unknown sync command "nope": use status/);

  const none = await run(['sync', 'status'], { HAYLOFT_DATA_DIR: tempDir(t) });
  t.match(none.stdout, /no uplink is configured/);
});
