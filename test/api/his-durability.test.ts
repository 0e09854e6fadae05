/**
 * Issue 5: an acknowledged hisWrite is durable. A real Hayloft process (the CLI, as systemd runs
 * it) takes a stream of multi-point hisWrite batches from several concurrent writers and is killed
 * with SIGKILL in the middle of it; started again on the same data folder, it must hold every
 * sample of every batch it answered 200 to. A batch in flight at the kill may be there or not,
 * but never in part (one request is one synced LevelDB batch), for either of its points.
 */
import t from 'tap';
import { HDateTime, HNumber, HRef, MARKER } from '../../src/haystack/values.js';
import { UTC } from '../../src/haystack/tz.js';
import { multiWrite, series } from '../helpers/his.js';
import { gridOf, postGrid } from '../helpers/http.js';
import { serveChild } from '../helpers/serve-child.js';
import { tempDir } from '../helpers/tmp.js';

const BATCH = 100;
const T0 = Date.UTC(2024, 0, 1);

/** Batch b holds samples b*BATCH .. b*BATCH+BATCH-1, one a second, values derived from the index. */
function batchGrid(b: number) {
  const rows = Array.from({ length: BATCH }, (_, i) => {
    const k = b * BATCH + i;
    return [new HDateTime(T0 + k * 1000, UTC), HNumber.of(k), HNumber.of(-k)] as const;
  });
  return multiWrite(['a', 'b'], rows);
}

t.test('SIGKILL during a stream of hisWrites loses no acknowledged sample and leaves no batch in part', async (t) => {
  const dir = tempDir(t);
  const first = await serveChild(t, dir);
  let auth = first.auth;
  const made = await postGrid(first.base, 'createRec', gridOf([
    { id: HRef.of('a'), point: MARKER, his: MARKER, kind: 'Number', name: 'a', tz: 'UTC' },
    { id: HRef.of('b'), point: MARKER, his: MARKER, kind: 'Number', name: 'b', tz: 'UTC' },
  ]), { headers: auth });
  t.equal(made.status, 200, 'two points');

  const acked = new Set<number>();
  const sent = new Set<number>();
  let next = 0;
  let killed = false;
  const exited = new Promise<string | null>((resolve) => first.proc.on('exit', (_code, signal) => resolve(signal)));
  const writer = async (): Promise<void> => {
    while (!killed) {
      const b = next++;
      sent.add(b);
      try {
        const a = await postGrid(first.base, 'hisWrite', batchGrid(b), { headers: auth });
        if (a.status === 200) acked.add(b);
        else if (!killed) throw new Error(`batch ${b}: ${a.status} ${a.text}`);
      } catch (e) {
        if (!killed) throw e;
      }
      if (!killed && acked.size >= 60) {
        killed = true;
        first.proc.kill('SIGKILL');
      }
    }
  };
  await Promise.all([writer(), writer(), writer(), writer()]);
  t.equal(await exited, 'SIGKILL', 'the server was killed mid-stream');
  t.ok(acked.size >= 60, `${acked.size} batches acknowledged of ${sent.size} sent`);

  const second = await serveChild(t, dir);
  auth = second.auth;
  const read = async (id: string): Promise<Map<number, number>> => {
    const a = await postGrid(second.base, 'hisRead', gridOf({ id: HRef.of(id), range: '2023-12-31,2024-12-31' }), { headers: auth });
    t.equal(a.status, 200, `hisRead @${id} after the restart`);
    return new Map(series(a.grid).map(([ts, v]) => [(Date.parse(ts.split(' ')[0] as string) - T0) / 1000, parseFloat(v)]));
  };
  const a = await read('a');
  const b = await read('b');
  const lost: number[] = [];
  const partial: number[] = [];
  const wrong: number[] = [];
  let unackedPresent = 0;
  for (const n of sent) {
    let inA = 0;
    let inB = 0;
    for (let i = 0; i < BATCH; i++) {
      const k = n * BATCH + i;
      if (a.has(k)) {
        inA++;
        if (a.get(k) !== k) wrong.push(k);
      }
      if (b.has(k)) {
        inB++;
        if (b.get(k) !== -k) wrong.push(k);
      }
    }
    if (acked.has(n) && (inA !== BATCH || inB !== BATCH)) lost.push(n);
    if (!((inA === 0 && inB === 0) || (inA === BATCH && inB === BATCH))) partial.push(n);
    if (!acked.has(n) && inA === BATCH) unackedPresent++;
  }
  t.same(lost, [], 'every acknowledged batch is there in full, for both points');
  t.same(partial, [], 'no batch is there in part');
  t.same(wrong, [], 'every value is the one written');
  t.equal(a.size, b.size, 'both points hold the same number of samples');
  t.comment(`${sent.size - acked.size} batches unacknowledged at the kill, ${unackedPresent} of them landed anyway`);

  const rec = await postGrid(second.base, 'read', gridOf({ id: HRef.of('a') }), { headers: auth });
  t.same(rec.grid?.first()?.get('hisSize'), HNumber.of(a.size), 'hisSize after the restart counts what is there');
  const more = await postGrid(second.base, 'hisWrite', batchGrid(next), { headers: auth });
  t.equal(more.status, 200, 'the restarted server takes writes');

  const stopped = new Promise<number | null>((resolve) => second.proc.on('exit', (code) => resolve(code)));
  second.proc.kill('SIGTERM');
  t.equal(await stopped, 0, 'and stops cleanly');
});
