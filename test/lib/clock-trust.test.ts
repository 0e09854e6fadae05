/**
 * ClockTrust (src/lib/clock-trust.ts): the floor, the last known good time kept in the data
 * folder, systemd's synchronisation flag by `clockSync`, steps logged with their size, and what
 * health and metrics say. A ManualClock, a temp data folder and a temp "timesync" folder.
 */
import { existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Writable } from 'node:stream';
import t, { type Test } from 'tap';
import { ManualClock } from '../../src/lib/clock.js';
import { ClockTrust, type ClockTrustOptions, LAST_GOOD_FILE, buildFloor } from '../../src/lib/clock-trust.js';
import { createLogger } from '../../src/lib/log.js';
import { Metrics } from '../../src/lib/metrics.js';
import { tempDir } from '../helpers/tmp.js';

const FLOOR = Date.UTC(2025, 5, 1);
const NOW = Date.UTC(2026, 0, 10, 12);
const HOUR = 3_600_000;

function setup(t: Test, start = NOW): { clock: ManualClock; dir: string; sync: string; logs: Record<string, unknown>[]; make(o?: Partial<ClockTrustOptions>): ClockTrust } {
  const clock = new ManualClock(start);
  const dir = tempDir(t);
  const sync = join(tempDir(t), 'timesync');
  const logs: Record<string, unknown>[] = [];
  const log = createLogger({ level: 'debug', destination: { write: (s: string) => void logs.push(JSON.parse(s) as Record<string, unknown>) } as unknown as Writable });
  const made: ClockTrust[] = [];
  t.teardown(() => made.forEach((c) => c.stop()));
  return {
    clock,
    dir,
    sync,
    logs,
    make: (o = {}) => {
      const c = new ClockTrust({ clock, log, dataDir: dir, floorMs: FLOOR, timesyncDir: sync, sync: 'none', timers: false, ...o });
      made.push(c);
      return c;
    },
  };
}

t.test('the floor: a clock before the release is not trusted; the step that sets it is logged with its size', async (t) => {
  const s = setup(t, Date.UTC(1970, 0, 1, 0, 0, 30));
  const c = s.make();
  c.start();
  t.equal(c.status().status, 'behind-floor');
  t.notOk(c.trusted());
  t.match(c.status().reason, /before this release was built or installed/);
  t.notOk(existsSync(join(s.dir, LAST_GOOD_FILE)), 'an untrusted time is never kept as good');
  t.ok(s.logs.some((l) => l.level === 40 && /cannot be trusted/.test(String(l.msg))), 'said at start');

  s.clock.stepWall(NOW - s.clock.now());
  t.ok(c.trusted(), 'trusted at the first look after NTP set the clock (no timer needed)');
  t.equal(c.status().status, 'stepped', 'shown as stepped for an hour');
  const step = s.logs.find((l) => l.stepMs !== undefined);
  t.equal(step?.stepMs, NOW - Date.UTC(1970, 0, 1, 0, 0, 30), 'the step logged with its size');
  t.match(String(step?.msg), /stepped forward by \d+ days/);
  t.ok(existsSync(join(s.dir, LAST_GOOD_FILE)), 'the good time is kept once trusted');
  s.clock.advance(HOUR + 1000);
  c.check();
  t.equal(c.status().status, 'ok', 'ok an hour after the step');
});

t.test('the last known good time: written at start and hourly, not at each look; a clock behind it is not trusted', async (t) => {
  const s = setup(t);
  const c = s.make();
  c.start();
  const file = join(s.dir, LAST_GOOD_FILE);
  t.equal(Number(readFileSync(file, 'utf8')), NOW, 'written at start');
  for (let i = 0; i < 30; i++) {
    s.clock.advance(60_000);
    c.check();
  }
  t.equal(Number(readFileSync(file, 'utf8')), NOW, 'not rewritten within the hour (flash wear)');
  s.clock.advance(31 * 60_000);
  c.check();
  t.equal(Number(readFileSync(file, 'utf8')), NOW + 61 * 60_000, 'rewritten after an hour');
  c.stop();
  t.equal(Number(readFileSync(file, 'utf8')), NOW + 61 * 60_000, 'and at a clean stop');

  // A reboot with the clock an hour behind what was known good (fake-hwclock, no NTP yet).
  s.clock.stepWall(-2 * HOUR);
  const again = s.make();
  again.start();
  t.equal(again.status().status, 'behind-last-good');
  t.notOk(again.trusted());
  t.equal(Number(readFileSync(file, 'utf8')), NOW + 61 * 60_000, 'the file keeps the good time');
  // Within the margin (10 min) is trusted.
  s.clock.stepWall(2 * HOUR - 5 * 60_000);
  t.ok(again.trusted(), 'a clock 5 min behind the last good time is trusted');
});

t.test('clockSync: systemd-timesyncd\'s flag is waited for when asked, and wins over the last good time', async (t) => {
  const s = setup(t);
  t.ok(s.make({ sync: 'auto' }).trusted(), 'auto on a host without timesyncd: trusted');
  t.equal(s.make({ sync: 'systemd' }).status().status, 'unsynchronised', 'systemd: waits for the flag even without the folder');
  mkdirSync(s.sync, { recursive: true });
  const auto = s.make({ sync: 'auto' });
  t.equal(auto.status().status, 'unsynchronised', 'auto with timesyncd running: waits for its flag');
  t.match(auto.status().reason, /systemd-timesyncd has not synchronised/);
  t.ok(s.make({ sync: 'none' }).trusted(), 'none: no NTP at the site, the clock is trusted');
  writeFileSync(join(s.sync, 'synchronized'), '');
  auto.check();
  t.ok(auto.trusted(), 'trusted once the flag is up (found by the timer\'s check)');

  writeFileSync(join(s.dir, LAST_GOOD_FILE), `${NOW + 5 * HOUR}\n`);
  t.ok(s.make({ sync: 'auto' }).trusted(), 'NTP synchronised wins over a last good time that was wrong (ahead)');
  t.equal(s.make({ sync: 'none' }).status().status, 'behind-last-good', 'without NTP the last good time stands');
  rmSync(join(s.sync, 'synchronized'));
});

t.test('health and metrics', async (t) => {
  const s = setup(t, FLOOR - 1000);
  const c = s.make();
  const m = new Metrics({ productVersion: 'test' });
  c.metrics(m);
  c.start();
  const h = c.health();
  t.equal(h.ok, true, 'an untrusted clock is not a failure: the daemon works');
  t.equal(h.clockStatus, 'behind-floor');
  t.match(h.degraded, /history is held/);
  let text = await m.text();
  t.match(text, /hayloft_clock_trusted 0/);
  t.match(text, /hayloft_clock_status\{status="behind-floor"\} 1/);
  s.clock.stepWall(HOUR);
  c.check();
  text = await m.text();
  t.match(text, /hayloft_clock_trusted 1/);
  t.match(text, /hayloft_clock_status\{status="stepped"\} 1/);
  t.match(text, /hayloft_clock_steps_total 1/);
  t.same(c.health().lastStep, { at: new Date(FLOOR - 1000 + HOUR).toISOString(), ms: HOUR });
});

t.test('the build floor is the newest modification time of the installed program', async (t) => {
  const f = buildFloor();
  t.ok(f >= statSync(new URL('../../package.json', import.meta.url)).mtimeMs - 1, 'not before package.json');
  t.ok(f <= Date.now(), 'not in the future');
});
