/**
 * The one backoff formula (src/lib/backoff.ts): doubling from minMs, capped at maxMs, exact
 * without jitter (poller, write queue), drawn between half and all with it (uplink, edge node).
 */
import t from 'tap';
import { backoffDelay } from '../../src/lib/backoff.js';

t.test('without jitter: minMs doubled per failure, capped', async (t) => {
  const o = { minMs: 1000, maxMs: 60_000 };
  const table: [number, number][] = [
    [1, 1000],
    [2, 2000],
    [3, 4000],
    [6, 32_000],
    [7, 60_000],
    [1000, 60_000],
  ];
  for (const [failures, want] of table) t.equal(backoffDelay(failures, o), want, `failure ${failures}`);
  t.equal(backoffDelay(0, o), 1000, 'no failure yet: the first delay');
  t.equal(backoffDelay(31, { minMs: 1, maxMs: 2 ** 40 }), 2 ** 30, 'the doubling stops at 2^30');
  t.equal(backoffDelay(Number.MAX_SAFE_INTEGER, { minMs: 1, maxMs: 86_400_000 }), 86_400_000, 'finite however many failures');
});

t.test('with jitter: between half and all of the delay, rounded', async (t) => {
  const at = (r: number) => ({ minMs: 1000, maxMs: 300_000, random: () => r });
  t.equal(backoffDelay(1, at(0)), 500, 'random 0: half');
  t.equal(backoffDelay(1, at(0.999999)), 1000, 'random near 1: all');
  t.equal(backoffDelay(3, at(0.5)), 3000, 'three quarters of 4000');
  t.equal(backoffDelay(100, at(0.25)), 187_500, 'of the cap');
  t.equal(backoffDelay(1, { minMs: 3, maxMs: 10, random: () => 0.5 }), 2, 'rounded (2.25)');
  let calls = 0;
  backoffDelay(2, { minMs: 1, maxMs: 10, random: () => (calls++, 0) });
  t.equal(calls, 1, 'one draw per delay');
});
