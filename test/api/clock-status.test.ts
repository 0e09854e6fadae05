/**
 * clockStatus over the wire (docs/clock.md): /api/health (degraded while the clock cannot be
 * trusted, with the reason), the `about` op's extra column, and /metrics, on the real App.
 */
import t from 'tap';
import { ManualClock } from '../../src/lib/clock.js';
import { ADMIN, startApp } from '../helpers/app.js';

const FLOOR = Date.UTC(2025, 5, 1);

t.test('a clock behind the floor: health degraded, about and metrics say why; once set, ok', async (t) => {
  const clock = new ManualClock(Date.UTC(1970, 0, 2));
  const r = await startApp(t, { clock, clockTrust: { floorMs: FLOOR, timers: false } });
  const health = async (): Promise<{ status: number; body: Record<string, unknown> }> => {
    const res = await fetch(`${r.base}/api/health`);
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };
  const h = await health();
  t.equal(h.status, 200, 'still 200: the daemon works (live values, polling, writes)');
  t.match(h.body, { ok: true, status: 'degraded', clockStatus: 'behind-floor', reasons: [/^clock: clock behind-floor: the clock \(1970-01-02.*history is held/], parts: { clock: { trusted: false } } });

  const about = async (): Promise<Record<string, unknown>> => {
    const res = await fetch(`${r.base}/api/about`, { headers: { ...r.auth, accept: 'application/json' } });
    return ((await res.json()) as { rows: Record<string, unknown>[] }).rows[0] as Record<string, unknown>;
  };
  t.equal((await about()).clockStatus, 's:behind-floor', 'about: an extra Str column');
  const metrics = async (): Promise<string> => (await fetch(`${r.base}/metrics`, { headers: r.auth })).text();
  t.match(await metrics(), /hayloft_clock_status\{status="behind-floor"\} 1/);
  t.match(await metrics(), /hayloft_clock_trusted 0/);

  clock.stepWall(Date.UTC(2026, 0, 10) - clock.now());
  r.app.clockTrust.check();
  // A token issued in 1970 has expired on the set clock: log in again (docs/clock.md).
  const again = await r.login(ADMIN.username, ADMIN.password);
  r.auth = { authorization: `Bearer ${String(again.body.access_token)}` };
  const after = await health();
  t.match(after.body, { ok: true, status: 'ok', clockStatus: 'stepped', parts: { clock: { trusted: true, lastStep: { ms: Number } } } });
  t.notOk('reasons' in after.body);
  t.equal((await about()).clockStatus, 's:stepped');
  t.match(await metrics(), /hayloft_clock_trusted 1/);
  t.ok(r.logs.some((l) => /"stepMs":\d+/.test(l) && /the wall clock stepped forward/.test(l)), 'the step is logged with its size');
});
