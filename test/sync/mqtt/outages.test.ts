/**
 * Issue 16, store and forward through outages, against a real mosquitto:
 * - a network cut (a TCP proxy between Hayloft and the broker drops every connection): the broker
 *   delivers the will (NDEATH with the session's bdSeq), samples taken meanwhile go as historical
 *   DDATA after the new NBIRTH, 0 lost, 0 twice;
 * - `hayloft serve` killed with kill -9 in the middle of draining a backlog: after a restart the
 *   rest of the backlog goes, from the cursors kept in LevelDB; 0 lost, 0 twice in the live stream
 *   (what was sent but not acknowledged before the kill may go again, as historical).
 */
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { promisify } from 'node:util';
import path from 'node:path';
import t, { type Test } from 'tap';
import { HDateTime, HNumber, HRef, type HVal, MARKER } from '../../../src/haystack/values.js';
import { UTC } from '../../../src/haystack/tz.js';
import { num } from '../../../src/sync/mqtt/sparkplug.js';
import { startApp } from '../../helpers/app.js';
import { singleWrite } from '../../helpers/his.js';
import { postGrid } from '../../helpers/http.js';
import { BROKER_USER, type Seen, SparkplugSubscriber, brokerMissing, startBroker } from '../../helpers/mosquitto.js';
import { serveChild } from '../../helpers/serve-child.js';
import { TcpProxy } from '../../helpers/tcp-proxy.js';
import { tempDir } from '../../helpers/tmp.js';
import { post, until } from '../../helpers/uplink.js';

const execFileP = promisify(execFile);
const CLI = new URL('../../../src/cli.ts', import.meta.url).pathname;
const missing = brokerMissing();
if (missing !== null) t.plan(0, missing);

function config(t: Test, url: string, extra: Record<string, unknown> = {}): string {
  const f = path.join(tempDir(t), 'hayloft.json');
  writeFileSync(f, JSON.stringify({ mqtt: { url, ...BROKER_USER, groupId: 'G', edgeNodeId: 'N', publishIntervalMs: 100, retryMinMs: 50, retryMaxMs: 300, keepaliveS: 5, ...extra } }));
  return f;
}

async function seed(t: Test, r: { base: string; auth: Record<string, string> }): Promise<void> {
  await post(t, r, 'createRec', [
    { id: HRef.of('ahu'), equip: MARKER, name: 'ahu' },
    { id: HRef.of('temp'), point: MARKER, his: MARKER, name: 'temp', kind: 'Number', unit: '°F', equipRef: HRef.of('ahu'), tz: 'UTC' },
  ]);
}

async function hisWrite(t: Test, r: { base: string; auth: Record<string, string> }, samples: [number, number][]): Promise<void> {
  const rows: [HVal, HVal][] = samples.map(([ts, v]) => [new HDateTime(ts, UTC), HNumber.of(v, '°F')]);
  const a = await postGrid(r.base, 'hisWrite', singleWrite('temp', rows), { headers: r.auth });
  if (a.status !== 200) t.fail(`hisWrite: ${a.status} ${a.text.slice(0, 200)}`);
}

interface Delivered {
  ts: number;
  value: unknown;
  historical: boolean;
}

function delivered(sub: SparkplugSubscriber): Delivered[] {
  const out: Delivered[] = [];
  for (const m of sub.of('DDATA')) for (const x of m.payload.metrics ?? []) if (x.properties === undefined) out.push({ ts: num(x.timestamp), value: x.value, historical: x.isHistorical === true });
  return out;
}

function bdSeqOf(m: Seen): number {
  return num((m.payload.metrics ?? []).find((x) => x.name === 'bdSeq')?.value);
}

/** The node's lifecycle as the broker carried it: NBIRTH:<bdSeq> and NDEATH:<bdSeq>. */
function lifecycle(sub: SparkplugSubscriber): string[] {
  return sub.seen.filter((m) => m.type === 'NBIRTH' || m.type === 'NDEATH').map((m) => `${m.type}:${bdSeqOf(m)}`);
}

/**
 * The lifecycle a host must see: NBIRTH and NDEATH alternating (an NBIRTH repeated within its
 * session, as a rebirth, is one), each NDEATH with the bdSeq of the NBIRTH before it, each new
 * session with a new bdSeq, ending born.
 */
function checkLifecycle(t: Test, sub: SparkplugSubscriber, sessions: number): void {
  const l = lifecycle(sub).filter((x, i, a) => x !== a[i - 1]);
  t.equal(l.length, sessions * 2 - 1, l.join(' '));
  l.forEach((x, i) => {
    const [type, bd] = x.split(':');
    if (type !== (i % 2 === 0 ? 'NBIRTH' : 'NDEATH')) t.fail(`${x} at ${i}: ${l.join(' ')}`);
    if (i % 2 === 1 && bd !== l[i - 1]?.split(':')[1]) t.fail(`${x} does not match ${l[i - 1]}`);
    if (i % 2 === 0 && i > 0 && bd === l[i - 2]?.split(':')[1]) t.fail(`${x}: a new session with the old bdSeq`);
  });
}

function checkStream(t: Test, got: readonly Delivered[], written: readonly [number, number][], liveDupesAllowed = false): void {
  const live = got.filter((x) => !x.historical).map((x) => x.ts);
  if (!liveDupesAllowed) t.equal(new Set(live).size, live.length, '0 duplicated in the live stream');
  const wanted = new Map(written.map(([ts, v]) => [ts, v]));
  const seen = new Map<number, unknown>();
  for (const x of got) seen.set(x.ts, x.value);
  const lost = [...wanted.keys()].filter((ts) => !seen.has(ts));
  t.equal(lost.length, 0, '0 samples lost');
  t.equal([...seen].filter(([ts, v]) => wanted.get(ts) !== v).length, 0, 'every value as written');
}

t.test('network cut: the will is delivered, the gap goes as historical DDATA after the new NBIRTH', async (t) => {
  const broker = await startBroker(t);
  const proxy = await TcpProxy.start(broker.port);
  t.teardown(() => proxy.close());
  const sub = await SparkplugSubscriber.connect(t, broker);
  const edge = await startApp(t, { env: { HAYLOFT_CONFIG: config(t, `mqtt://127.0.0.1:${proxy.port}`) } });
  await seed(t, edge);
  await until('born', () => sub.of('DBIRTH').length > 0);
  const t0 = Date.now();
  const written: [number, number][] = [];
  const write = async (from: number, to: number): Promise<void> => {
    const s: [number, number][] = [];
    for (let k = from; k < to; k++) s.push([t0 + k * 10, k / 8]);
    written.push(...s);
    await hisWrite(t, edge, s);
  };
  await write(0, 100);
  await until('live', () => delivered(sub).length === 100);
  const b0 = bdSeqOf(sub.of('NBIRTH').at(-1) as Seen);
  await proxy.cut();
  await until('the will', () => sub.of('NDEATH').length === 1);
  t.equal(bdSeqOf(sub.of('NDEATH')[0] as Seen), b0, 'the will is the NDEATH of the session cut (same bdSeq)');
  await until('offline', () => edge.app.edgeNode?.stats().state === 'offline');
  await write(100, 400);
  await proxy.restore();
  await until('reborn', () => sub.of('NBIRTH').some((m) => bdSeqOf(m) !== b0));
  await write(400, 450);
  await until('all', () => new Set(delivered(sub).map((x) => x.ts)).size === 450, 30_000);
  const got = delivered(sub);
  checkStream(t, got, written);
  t.equal(got.length, 450, 'nothing sent twice');
  t.same(
    got.filter((x) => x.historical).map((x) => x.ts),
    written.slice(100, 400).map((x) => x[0]),
    'the samples of the cut, historical, oldest first',
  );
  // The first NBIRTH was repeated when the points were created (new metrics: born again).
  checkLifecycle(t, sub, 2);
  // Births come before any data of their session.
  const i = sub.seen.findIndex((m) => m.type === 'NBIRTH' && bdSeqOf(m) !== b0);
  t.ok(sub.seen.slice(i).findIndex((m) => m.type === 'DBIRTH') < sub.seen.slice(i).findIndex((m) => m.type === 'DDATA'), 'DBIRTH before DDATA');
});

t.test('kill -9 while draining a backlog: the rest goes after a restart, from the kept cursors', async (t) => {
  const broker = await startBroker(t);
  const sub = await SparkplugSubscriber.connect(t, broker);
  const dir = tempDir(t);
  const env = { HAYLOFT_CONFIG: config(t, broker.url, { batchSamples: 100 }) };
  let child = await serveChild(t, dir, env);
  await seed(t, child);
  await until('born', () => sub.of('DBIRTH').length > 0);
  const t0 = Date.now() - 3_600_000;
  const written: [number, number][] = [];
  const write = async (from: number, to: number): Promise<void> => {
    for (let a = from; a < to; a += 20_000) {
      const s: [number, number][] = [];
      for (let k = a; k < Math.min(to, a + 20_000); k++) s.push([t0 + k * 50, k]);
      written.push(...s);
      await hisWrite(t, child, s);
    }
  };
  await write(0, 10);
  await until('live', () => delivered(sub).length === 10);
  await broker.stop();
  await write(10, 60_010);
  await broker.start();
  // Part of the backlog has gone, not all of it.
  await until('draining', () => delivered(sub).filter((x) => x.historical).length >= 3000, 30_000);
  child.proc.kill('SIGKILL');
  await child.exited;
  const atKill = delivered(sub).length;
  t.ok(atKill < 60_010, `killed mid-backlog (${atKill} of 60,010 delivered)`);
  await until('the will', () => sub.of('NDEATH').length >= 1);
  // The backlog, counted exactly from the data folder while the server is down.
  const status = await execFileP(process.execPath, ['--import', 'tsx', CLI, 'sync', 'status', '--json'], { env: { ...process.env, ...env, HAYLOFT_DATA_DIR: dir, HAYLOFT_TZ: 'UTC' } });
  const report = (JSON.parse(status.stdout) as { name: string; kind: string; samples: number; behind: number }[]).find((c) => c.name === 'mqtt');
  t.match(report, { kind: 'mqtt', behind: 1 }, 'sync status shows the edge node behind');
  t.ok(report !== undefined && report.samples > 0 && report.samples <= 60_010 - 3000 + 1600, `its backlog: ${report?.samples} samples`);
  child = await serveChild(t, dir, env);
  await write(60_010, 60_020);
  await until('all', () => new Set(delivered(sub).map((x) => x.ts)).size === 60_020, 60_000);
  const got = delivered(sub);
  checkStream(t, got, written);
  const resent = got.length - 60_020;
  // At most what was in flight at the kill (one pass: 16 batches of 100) goes twice, as historical.
  t.ok(resent <= 1600, `${resent} historical samples sent again (unacknowledged at the kill)`);
  // Three sessions: cut by the broker's stop (mosquitto delivers the wills of its clients as it
  // goes down), by the kill (the will again), and the new process's.
  checkLifecycle(t, sub, 3);
  await fetch(`${child.base}/api/about`, { headers: child.auth });
  child.proc.kill('SIGTERM');
  await child.exited;
});
