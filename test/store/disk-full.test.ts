/**
 * A full disk, end to end (issue 28 "Disk"; docs/configuration.md "Disk space"): the real App on a
 * small tmpfs of its own, filled with hisWrite over HTTP.
 *
 * - Below the free-space floor history is refused with HL_STORAGE_FULL (507) before LevelDB fails;
 *   logins and createRec still work; /api/health says `degraded` with the reason; once a filler
 *   file is deleted, history is taken again without a restart; every acknowledged sample is there
 *   after a restart.
 * - With the floor off, LevelDB itself runs out of space (its error is sticky): writes answer
 *   HL_STORE_UNAVAILABLE and health `unavailable`; once space is freed the store reopens by itself
 *   and every write works again, with every acknowledged sample kept.
 */
import { rmSync } from 'node:fs';
import path from 'node:path';
import t, { type Test as Tap } from 'tap';
import { HDateTime, HNumber, HRef, MARKER } from '../../src/haystack/values.js';
import { timeZone } from '../../src/haystack/tz.js';
import { type Running, startApp } from '../helpers/app.js';
import { until } from '../helpers/api-fixture.js';
import { errOf } from '../helpers/http.js';
import { type HisClient, hisClient, ok } from '../helpers/his.js';
import { mountTmpfs, tmpfsMissing } from '../helpers/tmpfs.js';

const skip = tmpfsMissing();
const MIB = 1024 * 1024;
const utc = timeZone('UTC');
const PER_WRITE = 5000;
const T0 = Date.UTC(2025, 0, 1);

interface Filling {
  /** ts -> value of every sample a hisWrite answered 200 for. */
  acked: Map<number, number>;
  next: number;
}

/** One hisWrite of PER_WRITE random samples after the last; acknowledged ones are remembered. */
async function writeOnce(admin: HisClient, f: Filling): Promise<{ status: number; code: string | undefined; text: string }> {
  const samples: [number, number][] = [];
  for (let i = 0; i < PER_WRITE; i++) samples.push([T0 + (f.next + i) * 1000, Math.round(Math.random() * 1e9) / 1e3]);
  const a = await admin.write(
    'p',
    samples.map(([ts, v]) => [new HDateTime(ts, utc), HNumber.of(v)] as const),
  );
  if (a.status === 200) {
    for (const [ts, v] of samples) f.acked.set(ts, v);
    f.next += PER_WRITE;
  }
  return { status: a.status, code: errOf(a)?.code, text: a.text };
}

/** Writes until a write is refused; returns the refusal. */
async function fillUntilRefused(t: Tap, admin: HisClient, f: Filling): Promise<{ status: number; code: string | undefined; text: string }> {
  for (let i = 0; i < 400; i++) {
    const a = await writeOnce(admin, f);
    if (a.status !== 200) return a;
  }
  t.fail('the disk never filled');
  return { status: 0, code: undefined, text: '' };
}


async function everyAckedSampleIsThere(t: Tap, admin: HisClient, f: Filling, what: string): Promise<void> {
  const a = await admin.read('p', '2024-12-31,2026-01-01');
  const g = ok(t, a, `hisRead ${what}`);
  const got = new Map<number, number>();
  for (const r of g.rows) got.set((r.get('ts') as HDateTime).epochMs, (r.get('val') as HNumber).val);
  let missing = 0;
  for (const [ts, v] of f.acked) if (got.get(ts) !== v) missing++;
  t.equal(missing, 0, `${what}: every one of the ${f.acked.size} acknowledged samples is there`);
}

async function health(r: Running): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${r.base}/api/health`);
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

async function point(t: Tap, admin: HisClient): Promise<void> {
  ok(t, await admin.post('createRec', { id: HRef.of('p'), point: MARKER, his: MARKER, kind: 'Number', tz: 'UTC', name: 'p' }), 'createRec of the point');
}

t.test('below the floor history is refused, the rest goes on, and resumes once space is freed', { skip }, async (t) => {
  const fs = mountTmpfs(t, 48);
  const floor = 8 * MIB;
  const r = await startApp(t, {
    dir: path.join(fs.dir, 'data'),
    env: { HAYLOFT_HISTORY_MIN_FREE_BYTES: String(floor), HAYLOFT_STORE_WRITE_BUFFER_BYTES: String(256 * 1024) },
  });
  const admin = hisClient(r);
  await point(t, admin);
  const filler = fs.fill('filler', floor + 3 * MIB);
  const f: Filling = { acked: new Map(), next: 0 };

  const refused = await fillUntilRefused(t, admin, f);
  t.equal(refused.status, 507, `507 Insufficient Storage (${refused.text.slice(0, 200)})`);
  t.equal(refused.code, 'HL_STORAGE_FULL', 'the clear code');
  t.match(refused.text, /historyMinFreeBytes/, 'the message names the setting');
  t.ok(f.acked.size > 0, 'some history was taken first');
  t.equal(r.app.store.state, 'open', 'refused before LevelDB failed');
  // Below the floor for good (LevelDB may free some room by itself, a log it no longer needs).
  const filler2 = fs.fill('filler2', floor - 2 * MIB);
  t.ok(fs.free() > MIB, 'the disk is not full');

  const again = await writeOnce(admin, f);
  t.equal(again.code, 'HL_STORAGE_FULL', 'refused again while below the floor');

  // The small writes go on: a login, a record, a point write.
  const login = await r.login('admin@example.com', 'admin-password-1');
  t.equal(login.status, 200, 'a login works while history is refused');
  ok(t, await admin.post('createRec', { id: HRef.of('more'), point: MARKER, kind: 'Number', name: 'more', writable: MARKER }), 'createRec works');
  ok(t, await admin.post('pointWrite', { id: HRef.of('more'), level: HNumber.of(8), val: HNumber.of(42) }), 'pointWrite works');

  const h = await health(r);
  t.equal(h.status, 200, 'degraded still answers 200');
  t.match(h.body, { ok: true, status: 'degraded', storage: { status: 'open' }, parts: { disk: { historyRefused: true, floorBytes: floor } } });
  t.match((h.body.reasons as string[]).join('\n'), /^disk: HL_STORAGE_FULL: history writes are refused/m, 'the reason, with its code');
  t.equal(await r.app.watchdogOk(), true, 'the watchdog is still fed: a restart would not make room');

  const m = await fetch(`${r.base}/metrics`, { headers: r.auth });
  const text = await m.text();
  const counted = Number(/hayloft_history_refused_samples_total\{reason="floor"\} (\d+)/.exec(text)?.[1]);
  t.ok(counted >= 2 * PER_WRITE, `refused samples counted (${counted})`);
  t.equal(r.logs.filter((l) => l.includes('history writes refused')).length, 1, `one log line for the change, not one per refusal: ${r.logs.filter((l) => l.includes('history writes re')).join('')}`);

  rmSync(filler);
  rmSync(filler2);
  let resumed = false;
  for (let i = 0; i < 200 && !resumed; i++) {
    resumed = (await writeOnce(admin, f)).status === 200;
    if (!resumed) await new Promise((res) => setTimeout(res, 100));
  }
  t.ok(resumed, 'history is taken again once space is freed, without a restart');
  t.match((await health(r)).body, { ok: true, status: 'ok' }, 'health is ok again');
  t.equal(r.logs.filter((l) => l.includes('history writes resumed')).length, 1, 'the resumption logged once');

  await everyAckedSampleIsThere(t, admin, f, 'before a restart');
  await r.restart();
  await everyAckedSampleIsThere(t, hisClient(r), f, 'after a restart');
  await r.stop();
});

t.test('LevelDB out of space: writes fail, then the store reopens by itself once space is freed', { skip }, async (t) => {
  const fs = mountTmpfs(t, 32);
  const r = await startApp(t, {
    dir: path.join(fs.dir, 'data'),
    // The floor off: LevelDB itself meets the full disk.
    env: { HAYLOFT_HISTORY_MIN_FREE_BYTES: '0', HAYLOFT_STORE_WRITE_BUFFER_BYTES: String(256 * 1024) },
  });
  const admin = hisClient(r);
  await point(t, admin);
  const filler = fs.fill('filler', 2 * MIB);
  const f: Filling = { acked: new Map(), next: 0 };

  const failed = await fillUntilRefused(t, admin, f);
  t.equal(failed.status, 500, `LevelDB's failure answers 500 (${failed.text.slice(0, 200)})`);
  t.equal(failed.code, 'HL_STORE_UNAVAILABLE');
  t.ok(await until(() => r.app.store.state === 'failed', 2000), 'the store knows it failed');
  const later = await admin.post('createRec', { id: HRef.of('later'), point: MARKER, kind: 'Number', name: 'later' });
  t.equal(later.status, 500, 'writes are suspended while the disk is full');
  t.equal(errOf(later)?.code, 'HL_STORE_UNAVAILABLE', 'with the store\'s code');
  t.ok(r.logs.some((l) => l.includes('reopens by itself once the disk has room')), 'the log says why');

  const h = await health(r);
  t.equal(h.status, 503, 'health: 503');
  t.match(h.body, { ok: false, status: 'unavailable', storage: { status: 'failed' } });
  t.match((h.body.reasons as string[]).join('\n'), /^store: writes suspended/m);
  t.equal(await r.app.watchdogOk(), true, 'the watchdog is still fed while the disk is full');

  rmSync(filler);
  t.ok(await until(() => r.app.store.state === 'open', 20_000), 'the store reopened by itself');
  t.match((await health(r)).body, { ok: true, status: 'ok', storage: { status: 'open' } }, 'health is ok again');
  t.equal((await writeOnce(admin, f)).status, 200, 'hisWrite works again without a restart');
  ok(t, await admin.post('createRec', { id: HRef.of('later'), point: MARKER, kind: 'Number', name: 'later' }), 'createRec works again');
  t.equal((await r.login('admin@example.com', 'admin-password-1')).status, 200, 'a login works again');
  t.equal(r.logs.filter((l) => l.includes('store reopened after a failed write')).length, 1, 'the reopen logged');

  await everyAckedSampleIsThere(t, admin, f, 'after the reopen');
  await r.restart();
  await everyAckedSampleIsThere(t, hisClient(r), f, 'after a restart');
  t.equal((await hisClient(r).rec('later')).has('point'), true, 'the record made after the reopen is kept');
  await r.stop();
});
