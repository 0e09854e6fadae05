/**
 * Issue 9, part 2: the uplink end to end between two real Hayloft instances on loopback, edge and
 * cloud: history written on the edge appears on the cloud in batches (points of one zone per
 * batch, oldest first), status tags on the edge's points, a restarted edge resumes where it
 * stopped, a stopped cloud is waited for (status down, backoff) and caught up with once back, a
 * point the cloud refuses is a fault while the others carry on, and a point deleted upstream is
 * created again with all its history.
 */
import net from 'node:net';
import t, { type Test } from 'tap';
import { HDateTime, HNumber, HRef, type HVal } from '../../src/haystack/values.js';
import { UTC } from '../../src/haystack/tz.js';
import { type Running, startApp } from '../helpers/app.js';
import { singleWrite } from '../helpers/his.js';
import { postGrid } from '../helpers/http.js';
import { tempDir } from '../helpers/tmp.js';
import { configFile, history, post, readRec, seedEdge, until, uplinkSection } from '../helpers/uplink.js';

const T0 = Date.UTC(2024, 0, 1);
const MIN = 60_000;

/** The edge points and their names upstream. */
const POINTS: Record<string, string> = { temp: 'hq.ahu.temp', fan: 'hq.ahu.fan', mode: 'hq.ahu.mode', power: 'syd.power' };

function value(id: string, k: number): HVal {
  switch (id) {
    case 'temp':
      return HNumber.of(60 + (k % 50) / 4, '°F');
    case 'fan':
      return k % 3 === 0;
    case 'mode':
      return ['heat', 'cool', 'off'][k % 3] as string;
    default:
      return HNumber.of(k * 0.5, 'kW');
  }
}

/** Writes samples from..to-1 (one a minute) of the given points on the edge. */
async function write(t: Test, edge: Running, ids: readonly string[], from: number, to: number): Promise<void> {
  for (const id of ids) {
    const samples: [HVal, HVal][] = [];
    for (let k = from; k < to; k++) samples.push([new HDateTime(T0 + k * MIN, UTC), value(id, k)]);
    const a = await postGrid(edge.base, 'hisWrite', singleWrite(id, samples), { headers: edge.auth });
    if (a.status !== 200) t.fail(`hisWrite ${id}: ${a.status} ${a.text.slice(0, 200)}`);
  }
}

async function same(edge: Running, cloud: Running, ids: readonly string[] = Object.keys(POINTS)): Promise<boolean> {
  for (const id of ids) {
    const a = await history(edge, id);
    const up = await readRec(cloud, POINTS[id] as string);
    if (up === undefined) return false;
    const b = await history(cloud, POINTS[id] as string);
    if (a.size !== b.size) return false;
    for (const [ts, v] of a) if (b.get(ts) !== v) return false;
  }
  return true;
}

async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

t.test('edge history appears on the cloud in batches; status tags; a restarted edge resumes', async (t) => {
  const cloud = await startApp(t);
  const dir = tempDir(t);
  const edge = await startApp(t, { dir, env: { HAYLOFT_CONFIG: configFile(t, uplinkSection(cloud.base, { batchSamples: 100, batchPoints: 2 })) } });
  await seedEdge(t, edge);
  await write(t, edge, Object.keys(POINTS), 0, 300);
  await until('the cloud holds the edge history', () => same(edge, cloud));
  t.pass('every sample of every point is upstream, identical');
  const up = edge.app.uplink;
  if (up === null) throw new Error('no uplink');
  await until('caught up', () => up.stats().backlogPoints === 0);
  const s = up.stats();
  t.match(s, { name: 'upstream', points: 4, mapped: 4, faulted: 0, backlogPoints: 0, backlogSamples: 0, sentSamples: 1200, failures: 0 });
  t.ok(s.sentBatches >= 12, `batches of at most 100 samples (${s.sentBatches})`);
  t.equal(s.lastError, null);
  t.same(s.byStatus, { ok: 4, pending: 0, down: 0, fault: 0 });
  const metrics = await (await fetch(`${edge.base}/metrics`, { headers: edge.auth })).text();
  t.match(metrics, /hayloft_uplink_points\{connector="upstream",syncStatus="ok"\} 4\n/, '/metrics: points by syncStatus');
  t.match(metrics, /hayloft_uplink_samples_sent_total 1200\n/, '/metrics: samples sent');
  t.match(metrics, /hayloft_uplink_backlog_samples\{connector="upstream"\} 0\n/, '/metrics: backlog');

  const temp = await readRec(edge, 'temp');
  t.match(temp, { syncStatus: '"ok"', syncLast: '2024-01-01T04:59:00Z UTC' }, 'status tags on the point');
  t.notOk(temp?.syncErr, 'no syncErr');
  t.match(await readRec(edge, 'power'), { syncStatus: '"ok"', syncLast: /^2024-01-01T15:59:00\+11:00 Sydney/ }, 'syncLast in the point zone');
  t.notOk((await readRec(edge, 'nohis'))?.syncStatus, 'a point without his is not synced');
  t.notOk((await readRec(cloud, 'hq.ahu.nohis')), 'and not created upstream');

  // Restart the edge: cursors are on disk, so only new samples are sent.
  await edge.restart();
  await write(t, edge, ['temp'], 300, 310);
  await until('the new samples are upstream', () => same(edge, cloud, ['temp']));
  const after = edge.app.uplink?.stats();
  t.equal(after?.sentSamples, 10, 'after a restart only what is new is sent');
});

t.test('the cloud stopped for a while and restarted', async (t) => {
  const port = await freePort();
  const cloudDir = tempDir(t);
  let cloud = await startApp(t, { dir: cloudDir, env: { HAYLOFT_PORT: String(port) } });
  const edge = await startApp(t, { env: { HAYLOFT_CONFIG: configFile(t, uplinkSection(cloud.base)) } });
  await seedEdge(t, edge);
  await write(t, edge, Object.keys(POINTS), 0, 100);
  await until('first samples upstream', () => same(edge, cloud));

  await cloud.stop();
  await write(t, edge, Object.keys(POINTS), 100, 200);
  await until('points show the upstream is down', async () => (await readRec(edge, 'temp'))?.syncStatus === '"down"');
  t.match((await readRec(edge, 'temp'))?.syncErr, /HL_UPLINK_UNREACHABLE|no answer|ECONNREFUSED/i, 'syncErr says why');
  await write(t, edge, Object.keys(POINTS), 200, 250);
  await until('a few retries', () => (edge.app.uplink?.stats().failures ?? 0) >= 3);
  const down = edge.app.uplink?.stats();
  t.match(down, { state: 'retrying', backlogPoints: 4 });
  t.ok((down?.retryAt ?? 0) > 0, 'the next attempt is scheduled');

  cloud = await startApp(t, { dir: cloudDir, env: { HAYLOFT_PORT: String(port) } });
  await until('caught up after the cloud came back', () => same(edge, cloud));
  await until('status ok again', async () => (await readRec(edge, 'temp'))?.syncStatus === '"ok"');
  t.equal(edge.app.uplink?.stats().failures, 0, 'no failure since');
  t.equal((await history(cloud, 'hq.ahu.temp')).size, 250, 'nothing missing, nothing doubled');
});

t.test('a point the cloud refuses is a fault; the others carry on; a point deleted upstream comes back whole', async (t) => {
  const cloud = await startApp(t);
  const edge = await startApp(t, { env: { HAYLOFT_CONFIG: configFile(t, uplinkSection(cloud.base, { retryMaxMs: 60_000 })) } });
  await seedEdge(t, edge);
  await write(t, edge, Object.keys(POINTS), 0, 10);
  await until('first samples upstream', () => same(edge, cloud));
  // Someone changes the unit upstream: our °F samples no longer fit.
  await post(t, cloud, 'updateRec', { id: HRef.of('hq.ahu.temp'), unit: '°C' });
  await write(t, edge, Object.keys(POINTS), 10, 20);
  await until('temp is a fault', async () => (await readRec(edge, 'temp'))?.syncStatus === '"fault"');
  t.match((await readRec(edge, 'temp'))?.syncErr, /unit/, 'syncErr carries the upstream reason');
  await until('the others are synced', () => same(edge, cloud, ['fan', 'mode', 'power']));
  t.equal(edge.app.uplink?.stats().faulted, 1);

  // A point deleted upstream: created again, and all of its history sent to the new one.
  await post(t, cloud, 'deleteRec', { id: HRef.of('hq.ahu.fan') });
  await write(t, edge, ['fan'], 20, 25);
  await until('fan is back upstream with all its history', () => same(edge, cloud, ['fan']));
  t.equal((await history(cloud, 'hq.ahu.fan')).size, 25);
});

t.test('samples written before what was sent (a backfill, a correction) reach the cloud, even across an edge restart while the cloud is away', async (t) => {
  const port = await freePort();
  const cloudDir = tempDir(t);
  let cloud = await startApp(t, { dir: cloudDir, env: { HAYLOFT_PORT: String(port) } });
  const edge = await startApp(t, { env: { HAYLOFT_CONFIG: configFile(t, uplinkSection(cloud.base, { batchSamples: 100 })) } });
  const uplink = (): NonNullable<Running['app']['uplink']> => {
    if (edge.app.uplink === null) throw new Error('no uplink');
    return edge.app.uplink;
  };
  await seedEdge(t, edge);
  await write(t, edge, Object.keys(POINTS), 100, 200);
  await until('first samples upstream', () => same(edge, cloud));
  await until('caught up', () => uplink().stats().backlogPoints === 0);
  const sent = uplink().stats().sentSamples;

  // The hour before, filled in later (a logger's memory read out), and one old value corrected.
  await write(t, edge, Object.keys(POINTS), 40, 100);
  const fix = await postGrid(edge.base, 'hisWrite', singleWrite('temp', [[new HDateTime(T0 + 150 * MIN, UTC), HNumber.of(99, '°F')]]), { headers: edge.auth });
  t.equal(fix.status, 200);
  await until('the backfill and the correction are upstream', () => same(edge, cloud));
  t.equal((await history(cloud, 'hq.ahu.temp')).get(T0 + 150 * MIN), '99°F', 'the corrected value upstream');
  await until('caught up again', () => uplink().stats().backlogPoints === 0);
  t.equal(uplink().stats().sentSamples - sent, 4 * 60 + 1, 'only the late samples were sent: 60 per point and the correction');
  t.match(await readRec(edge, 'temp'), { syncStatus: '"ok"' }, 'status ok once they are');

  // Written while the cloud is away; the edge restarts before it comes back.
  await cloud.stop();
  await write(t, edge, ['power', 'mode'], 0, 40);
  await until('the edge sees the cloud is away', () => uplink().stats().failures >= 1);
  t.match(uplink().stats(), { backlogPoints: 2 }, 'the late samples are a backlog');
  t.match(await readRec(edge, 'power'), { syncStatus: '"down"' });
  await edge.restart();
  t.match(uplink().stats(), { backlogPoints: 2 }, 'and still one after the restart (their marks are on disk)');
  cloud = await startApp(t, { dir: cloudDir, env: { HAYLOFT_PORT: String(port) } });
  await until('the samples written while the cloud was away are upstream', () => same(edge, cloud));
  t.equal((await history(cloud, 'syd.power')).size, 200, 'nothing missing, nothing doubled');
});
