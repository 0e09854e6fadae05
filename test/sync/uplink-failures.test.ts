/**
 * Issue 9, part 3: the uplink under failure, edge and cloud on loopback with a proxy between
 * them. Afterwards the two histories must be identical, nothing missing and nothing doubled.
 *
 * - Lost acknowledgements: the proxy forwards every request but drops some answers after the
 *   cloud applied them (hisWrite batches, a login, a createRec, and the answer of a token refresh,
 *   whose rotated refresh token is then lost with it).
 * - kill -9: the edge runs as a child process (the CLI, as systemd runs it) and is killed once
 *   with a batch applied upstream and its answer not yet back, and once just after an answer came
 *   back, then started again on its data folder each time.
 */
import t, { type Test } from 'tap';
import { HDateTime, HNumber, HRef, MARKER } from '../../src/haystack/values.js';
import { UTC } from '../../src/haystack/tz.js';
import { ManualClock } from '../../src/lib/clock.js';
import { ADMIN, type Running, startApp } from '../helpers/app.js';
import { multiWrite } from '../helpers/his.js';
import { postGrid } from '../helpers/http.js';
import { LossyProxy } from '../helpers/lossy-proxy.js';
import { tempDir } from '../helpers/tmp.js';
import { type Child, configFile, history, post, seedEdge, serveChild, until, uplinkSection } from '../helpers/uplink.js';

const T0 = Date.UTC(2024, 0, 1);
const MIN = 60_000;
type Side = { base: string; auth: Record<string, string> };

/** Samples from..to-1 of every point in `ids` (Number points), in one multi-point hisWrite per 500 rows. */
async function write(t: Test, edge: Side, ids: readonly string[], from: number, to: number): Promise<void> {
  for (let a = from; a < to; a += 500) {
    const rows = [];
    for (let k = a; k < Math.min(to, a + 500); k++) rows.push([new HDateTime(T0 + k * MIN, UTC), ...ids.map((_, j) => HNumber.of(k * 10 + j))]);
    const r = await postGrid(edge.base, 'hisWrite', multiWrite(ids, rows), { headers: edge.auth });
    if (r.status !== 200) t.fail(`hisWrite: ${r.status} ${r.text.slice(0, 200)}`);
  }
}

/** Every point's history on both sides, compared; returns what differs (empty when identical). */
async function differences(edge: Side, cloud: Side, names: Record<string, string>): Promise<string[]> {
  const out: string[] = [];
  for (const [id, fq] of Object.entries(names)) {
    const a = await history(edge, id);
    let b: Map<number, string>;
    try {
      b = await history(cloud, fq);
    } catch {
      out.push(`${fq}: not upstream`);
      continue;
    }
    let missing = 0;
    let wrong = 0;
    for (const [ts, v] of a) {
      if (!b.has(ts)) missing++;
      else if (b.get(ts) !== v) wrong++;
    }
    const extra = [...b.keys()].filter((ts) => !a.has(ts)).length;
    if (missing + wrong + extra > 0) out.push(`${fq}: ${missing} missing, ${wrong} different, ${extra} extra of ${a.size}`);
  }
  return out;
}

async function count(t: Test, r: Side, filter: string): Promise<number> {
  return (await post(t, r, 'read', { filter })).grid?.size ?? -1;
}

t.test('acknowledgements lost: histories identical, nothing missing, nothing doubled', async (t) => {
  const clock = new ManualClock(T0 + 2 * 24 * 3600_000);
  const cloud = await startApp(t, { clock });
  let refreshes = 0;
  const proxy = await LossyProxy.start({
    target: cloud.base,
    policy: (x) => {
      if (x.op === 'hisWrite') return x.n % 3 === 2 ? 'drop' : 'relay';
      if (x.op === 'createRec' || x.op === 'read') return x.n === 1 ? 'drop' : 'relay';
      if (x.op === 'token' && x.body.includes('"password"')) return x.n === 1 ? 'drop' : 'relay';
      // The first refresh: the cloud rotated the refresh token, the edge never hears of the new one.
      if (x.op === 'token' && x.body.includes('refresh_token') && x.status === 200) return ++refreshes === 1 ? 'drop' : 'relay';
      return 'relay';
    },
  });
  t.teardown(() => proxy.close());
  const edge = await startApp(t, { clock, env: { HAYLOFT_CONFIG: configFile(t, uplinkSection(proxy.base, { batchSamples: 150 })) } });
  await seedEdge(t, edge);
  await post(t, edge, 'createRec', [
    { id: HRef.of('p1'), point: MARKER, his: MARKER, name: 'p1', kind: 'Number', siteRef: HRef.of('hq'), tz: 'UTC' },
    { id: HRef.of('p2'), point: MARKER, his: MARKER, name: 'p2', kind: 'Number', siteRef: HRef.of('hq'), tz: 'UTC' },
  ]);
  const names = { p1: 'hq.p1', p2: 'hq.p2', temp: 'hq.ahu.temp' };
  await write(t, edge, ['p1', 'p2'], 0, 600);
  await until('the cloud holds the edge history', async () => (await differences(edge, cloud, names)).length === 0);

  // The access token expires: the refresh's answer is lost, so the edge still holds the refresh
  // token the cloud has just rotated away. Showing it again makes the cloud end that session; the
  // edge logs in again with its password and carries on.
  clock.advance(7 * 24 * 3600_000 + MIN);
  for (const r of [edge, cloud]) r.auth = { authorization: `Bearer ${(await r.login(ADMIN.username, ADMIN.password)).body.access_token as string}` };
  await write(t, edge, ['p1', 'p2'], 600, 1000);
  await until('caught up after the token trouble', async () => (await differences(edge, cloud, names)).length === 0);

  t.same(await differences(edge, cloud, names), [], 'identical histories');
  const hisDropped = proxy.dropped.filter((x) => x.op === 'hisWrite').length;
  t.ok(hisDropped >= 4, `${hisDropped} hisWrite acknowledgements were lost`);
  t.ok(proxy.dropped.some((x) => x.op === 'createRec'), 'a createRec answer was lost');
  t.ok(refreshes >= 1, 'a refresh answer was lost');
  t.ok(cloud.logs.some((l) => l.includes('reused after rotation')), 'the cloud saw the stale refresh token and ended that session');
  t.equal(await count(t, cloud, 'site'), 2, 'no site created twice');
  t.equal(await count(t, cloud, 'point'), 6, 'no point created twice');
  t.equal((await history(cloud, 'hq.p1')).size, 1000, 'exactly the samples written');
});

t.test('edge killed with kill -9 in the middle of a batch, and just after one, then restarted', async (t) => {
  const cloud: Running = await startApp(t);
  const edgeDir = tempDir(t);
  const state: { edge?: Child; kills: string[] } = { kills: [] };
  const kill = async (when: string): Promise<void> => {
    const e = state.edge as Child;
    e.proc.kill('SIGKILL');
    t.equal(await e.exited, 'SIGKILL', `edge killed ${when}`);
    state.kills.push(when);
  };
  const proxy = await LossyProxy.start({
    target: cloud.base,
    // Batch 5 is applied upstream; the edge dies before its answer arrives.
    beforeAnswer: async (x) => {
      if (x.op === 'hisWrite' && x.n === 5) await kill('with a batch applied upstream and unacknowledged');
    },
    // Batch 15's answer reached the edge, which may or may not have moved its cursors.
    afterAnswer: async (x) => {
      if (x.op === 'hisWrite' && x.n === 15) await kill('just after an acknowledgement');
    },
  });
  t.teardown(() => proxy.close());
  const env = { HAYLOFT_CONFIG: configFile(t, uplinkSection(proxy.base, { batchSamples: 400, batchPoints: 3 })) };
  state.edge = await serveChild(t, edgeDir, env);
  const ids = ['a', 'b', 'c', 'd', 'e'];
  await post(t, state.edge, 'createRec', [
    { id: HRef.of('site'), site: MARKER, name: 'plant', tz: 'UTC' },
    ...ids.map((id) => ({ id: HRef.of(id), point: MARKER, his: MARKER, name: id, kind: 'Number', siteRef: HRef.of('site'), tz: 'UTC' })),
  ]);
  const names = Object.fromEntries(ids.map((id) => [id, `plant.${id}`]));
  // A backlog written at once (the uplink starts on it while it is being written).
  await write(t, state.edge, ids, 0, 2000).catch(() => undefined);
  await until('the first kill', () => state.kills.length === 1, 60_000);
  state.edge = await serveChild(t, edgeDir, env);
  await until('the second kill', () => state.kills.length === 2, 60_000);
  state.edge = await serveChild(t, edgeDir, env);
  // What the first edge did not manage to write before it died is written now.
  const have = (await history(state.edge, 'e')).size;
  if (have < 2000) await write(t, state.edge, ids, 0, 2000);
  await until('the cloud holds the edge history', async () => (await differences(state.edge as Child, cloud, names)).length === 0, 60_000);
  t.same(await differences(state.edge, cloud, names), [], 'identical histories');
  t.equal((await history(cloud, 'plant.a')).size, 2000, 'nothing missing, nothing doubled');
  t.equal(await count(t, cloud, 'point'), 5, 'each point created once');
  const st = await post(t, state.edge, 'read', { id: HRef.of('a') });
  t.equal(st.grid?.first()?.get('syncStatus'), 'ok', 'status ok at the end');
  state.edge.proc.kill('SIGTERM');
  t.equal(await state.edge.exited, 0, 'the edge stops cleanly');
});
