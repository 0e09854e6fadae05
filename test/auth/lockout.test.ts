/** Lockout windows (src/auth/lockout.ts) run on the monotonic clock: wall-clock steps do not lift or stretch a lock. */
import t from 'tap';
import { Lockout } from '../../src/auth/lockout.js';
import { ManualClock } from '../../src/lib/clock.js';

t.test('a lock doubles per failure and is judged on the monotonic clock', async (t) => {
  const clock = new ManualClock(Date.UTC(2024, 0, 1));
  const l = new Lockout(clock, { threshold: 3, baseMs: 1000, maxMs: 60_000 });
  const keys = ['user:a'];
  for (let i = 0; i < 3; i++) l.failure(keys);
  t.equal(l.waitMs(keys), 1000, 'locked for 1 s at the threshold');
  l.failure(keys);
  t.equal(l.waitMs(keys), 2000, 'then 2 s');
  clock.stepWall(3_600_000);
  t.equal(l.waitMs(keys), 2000, 'a wall-clock step forward does not lift it');
  clock.stepWall(-7_200_000);
  clock.advanceMonotonic(2000);
  t.equal(l.waitMs(keys), 0, 'a step back does not stretch it: over after 2 s');
  l.success(keys);
  t.equal(l.waitMs(keys), 0);
});
