/**
 * The shared driver test suite (as abstract-level's suite is for its implementations): every
 * driver runs it against its own peer device. It checks the contract of src/drivers/driver.ts:
 * values in order, a refused point costs only itself, configuration errors need no I/O, a silent
 * device is `down` within its timeout and comes back by itself, reads on one connection never
 * overlap, and close ends it all. Drivers that write (`writeTag`) also show: values written land
 * in the device (read back by another way than the driver), relinquish, a refused write address
 * faults, a wrong one is a configuration error, a silent or missing device is `down`.
 */
import type { Test } from 'tap';
import type { ConnSpec, Driver, PointRead, PointSpec, RawValue } from '../../src/drivers/driver.js';
import { ErrorCodes, isHayloftError } from '../../src/lib/errors.js';

export interface DriverUnderTest {
  /** A fresh driver (the suite closes it). */
  driver(): Driver;
  /** A connector to the peer device, with a short timeout (`timeoutMs`). */
  conn: ConnSpec;
  timeoutMs: number;
  /** Points the device has, with their values. */
  points: readonly { spec: PointSpec; val: RawValue }[];
  /** A point whose address is well formed but which the device does not have. */
  refused: PointSpec;
  /** Points whose address tags are wrong. */
  badPoints: readonly PointSpec[];
  /** Connectors whose tags are wrong. */
  badConns: readonly ConnSpec[];
  /** A connector to a device that is not there. */
  deadConn: ConnSpec;
  /** Makes the device stop answering, and answer again. */
  silence(): Promise<void>;
  speak(): Promise<void>;
  /** For drivers that write. */
  writes?: WritesUnderTest;
}

export interface WritesUnderTest {
  /** Points with a write address, each with a value to write. */
  points: readonly { spec: PointSpec; val: RawValue }[];
  /** What the device holds at writes.points[i], read without the driver under test. */
  readBack(i: number): Promise<RawValue | null>;
  /** What the device holds at points[i] after a relinquish (null), or undefined to skip that check. */
  relinquished?: (i: number) => RawValue | null;
  /** A well-formed write address the device refuses. */
  refused: PointSpec;
  /** Points whose write tags are wrong. */
  badPoints: readonly PointSpec[];
}

function values(t: Test, got: PointRead[], want: readonly RawValue[], what: string): void {
  t.equal(got.length, want.length, `${what}: one outcome per point`);
  got.forEach((r, i) => {
    const w = want[i] as RawValue;
    if ('err' in r) t.fail(`${what}: point ${i} failed: ${r.err.message}`);
    else if (typeof w === 'number' && typeof r.val === 'number' && !Number.isInteger(w)) t.ok(Math.abs(r.val - w) < 1e-6 * Math.max(1, Math.abs(w)), `${what}: point ${i} ${r.val} ≈ ${w}`);
    else t.equal(r.val, w, `${what}: point ${i}`);
  });
}

/** A value read back equals the one written (floats within their precision). */
function held(t: Test, got: RawValue | null, want: RawValue | null, what: string): void {
  if (typeof want === 'number' && typeof got === 'number' && !Number.isInteger(want)) t.ok(Math.abs(got - want) < 1e-5 * Math.max(1, Math.abs(want)), `${what}: ${got} ≈ ${want}`);
  else t.equal(got, want, `${what}: the device holds ${String(want)}`);
}

async function rejectsWith(t: Test, p: Promise<unknown>, code: string, what: string): Promise<unknown> {
  try {
    await p;
    t.fail(`${what}: expected ${code}`);
    return undefined;
  } catch (e) {
    t.ok(isHayloftError(e), `${what}: a HayloftError`);
    t.equal((e as { code?: string }).code, code, what);
    return e;
  }
}

async function eventually(f: () => Promise<boolean>, ms: number): Promise<boolean> {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    if (await f()) return true;
    await new Promise((r) => setTimeout(r, 100));
  }
  return false;
}

export function driverSuite(t: Test, d: DriverUnderTest): void {
  t.test('reads values, in the order asked', async (t) => {
    const driver = d.driver();
    t.teardown(() => driver.close());
    const conn = driver.open(d.conn);
    const prepared = d.points.map((p) => conn.prepare(p.spec));
    values(t, await conn.read(prepared), d.points.map((p) => p.val), 'first read');
    // The same array again (a driver may cache its plan by it), and reversed (a new plan).
    values(t, await conn.read(prepared), d.points.map((p) => p.val), 'second read');
    values(t, await conn.read([...prepared].reverse()), d.points.map((p) => p.val).reverse(), 'reversed');
    await conn.close();
  });

  t.test('a refused point faults alone', async (t) => {
    const driver = d.driver();
    t.teardown(() => driver.close());
    const conn = driver.open(d.conn);
    const good = d.points.map((p) => conn.prepare(p.spec));
    const all = [...good.slice(0, 1), conn.prepare(d.refused), ...good.slice(1)];
    for (const round of [1, 2]) {
      const got = await conn.read(all);
      const bad = got[1];
      t.ok(bad !== undefined && 'err' in bad && bad.err.code === ErrorCodes.DRIVER_REFUSED, `round ${round}: the refused point is HL_DRIVER_REFUSED`);
      values(t, [got[0] as PointRead, ...got.slice(2)], d.points.map((p) => p.val), `round ${round}: the others`);
    }
  });

  t.test('configuration errors are thrown without I/O', async (t) => {
    const driver = d.driver();
    t.teardown(() => driver.close());
    for (const c of d.badConns) {
      t.throws(() => driver.open(c), { code: ErrorCodes.DRIVER_CONFIG }, `connector ${c.tags.toString()}`);
    }
    const conn = driver.open(d.deadConn);
    for (const p of d.badPoints) {
      try {
        conn.prepare(p);
        t.fail(`point ${p.id} should not prepare`);
      } catch (e) {
        t.equal((e as { code?: string }).code, ErrorCodes.DRIVER_CONFIG, `point ${p.id}: ${(e as Error).message}`);
      }
    }
    await conn.close();
  });

  t.test('a device that is not there is down within the timeout', async (t) => {
    const driver = d.driver();
    t.teardown(() => driver.close());
    const conn = driver.open(d.deadConn);
    const p = conn.prepare(d.points[0]?.spec as PointSpec);
    const t0 = Date.now();
    await rejectsWith(t, conn.read([p]), ErrorCodes.DRIVER_DOWN, 'dead device');
    t.ok(Date.now() - t0 < d.timeoutMs * 3 + 1000, `settled in ${Date.now() - t0} ms`);
    await conn.close();
  });

  t.test('a device that stops answering is down, then ok again by itself', async (t) => {
    const driver = d.driver();
    t.teardown(() => driver.close());
    const conn = driver.open(d.conn);
    const prepared = d.points.map((p) => conn.prepare(p.spec));
    values(t, await conn.read(prepared), d.points.map((p) => p.val), 'before');
    await d.silence();
    try {
      const t0 = Date.now();
      const e = await rejectsWith(t, conn.read(prepared), ErrorCodes.DRIVER_DOWN, 'silent device');
      t.ok(Date.now() - t0 < d.timeoutMs * 3 + 1000, `settled in ${Date.now() - t0} ms: ${(e as Error | undefined)?.message}`);
    } finally {
      await d.speak();
    }
    const back = await eventually(async () => {
      try {
        const got = await conn.read(prepared);
        return got.every((r) => 'val' in r);
      } catch {
        return false;
      }
    }, 10_000);
    t.ok(back, 'answers again');
    values(t, await conn.read(prepared), d.points.map((p) => p.val), 'after');
  });

  t.test('reads at once on one connection are served one after the other', async (t) => {
    const driver = d.driver();
    t.teardown(() => driver.close());
    const conn = driver.open(d.conn);
    const prepared = d.points.map((p) => conn.prepare(p.spec));
    const all = await Promise.all([conn.read(prepared), conn.read([...prepared]), conn.read(prepared.slice(0, 1))]);
    values(t, all[0], d.points.map((p) => p.val), 'first');
    values(t, all[1], d.points.map((p) => p.val), 'second');
    values(t, all[2], [d.points[0]?.val as RawValue], 'third');
  });

  const w = d.writes;
  if (w !== undefined) {
    t.test('writes: values land in the device; relinquish; a refused address faults alone', async (t) => {
      const driver = d.driver();
      t.teardown(() => driver.close());
      t.type(driver.writeTag, 'string', 'the driver names its write tag');
      const conn = driver.open(d.conn);
      if (conn.prepareWrite === undefined || conn.write === undefined) {
        t.fail('a driver with a writeTag implements prepareWrite and write');
        return;
      }
      const prepared = w.points.map((p) => (conn.prepareWrite as NonNullable<typeof conn.prepareWrite>)(p.spec));
      for (const [i, p] of w.points.entries()) {
        await conn.write(prepared[i] as NonNullable<(typeof prepared)[number]>, p.val);
        held(t, await w.readBack(i), p.val, `point ${i}`);
      }
      if (w.relinquished !== undefined) {
        for (const [i] of w.points.entries()) {
          await conn.write(prepared[i] as NonNullable<(typeof prepared)[number]>, null);
          held(t, await w.readBack(i), w.relinquished(i), `point ${i} relinquished`);
        }
      }
      await rejectsWith(t, conn.write(conn.prepareWrite(w.refused), w.points[0]?.val as RawValue), ErrorCodes.DRIVER_REFUSED, 'a refused write address');
      // Reads go on as before on the same connection.
      values(t, await conn.read(d.points.map((p) => conn.prepare(p.spec))), d.points.map((p) => p.val), 'reads after writes');
      for (const p of w.badPoints) {
        try {
          conn.prepareWrite(p);
          t.fail(`write point ${p.id} should not prepare`);
        } catch (e) {
          t.equal((e as { code?: string }).code, ErrorCodes.DRIVER_CONFIG, `write point ${p.id}: ${(e as Error).message}`);
        }
      }
      await conn.close();
      await rejectsWith(t, conn.write(prepared[0] as NonNullable<(typeof prepared)[number]>, w.points[0]?.val as RawValue), ErrorCodes.DRIVER_DOWN, 'write after close');
    });

    t.test('writes to a silent or missing device are down within the timeout', async (t) => {
      const driver = d.driver();
      t.teardown(() => driver.close());
      const dead = driver.open(d.deadConn);
      const first = w.points[0] as { spec: PointSpec; val: RawValue };
      const t0 = Date.now();
      await rejectsWith(t, (dead.write as NonNullable<typeof dead.write>)((dead.prepareWrite as NonNullable<typeof dead.prepareWrite>)(first.spec), first.val), ErrorCodes.DRIVER_DOWN, 'missing device');
      t.ok(Date.now() - t0 < d.timeoutMs * 3 + 1000, `settled in ${Date.now() - t0} ms`);
      const conn = driver.open(d.conn);
      const p = (conn.prepareWrite as NonNullable<typeof conn.prepareWrite>)(first.spec);
      await d.silence();
      try {
        await rejectsWith(t, (conn.write as NonNullable<typeof conn.write>)(p, first.val), ErrorCodes.DRIVER_DOWN, 'silent device');
      } finally {
        await d.speak();
      }
      const back = await eventually(async () => {
        try {
          await (conn.write as NonNullable<typeof conn.write>)(p, first.val);
          return true;
        } catch {
          return false;
        }
      }, 10_000);
      t.ok(back, 'writes again once the device answers');
    });
  }

  t.test('close ends reads; closing twice is harmless', async (t) => {
    const driver = d.driver();
    const conn = driver.open(d.conn);
    const prepared = d.points.map((p) => conn.prepare(p.spec));
    await conn.read(prepared);
    await conn.close();
    await conn.close();
    await rejectsWith(t, conn.read(prepared), ErrorCodes.DRIVER_DOWN, 'read after close');
    await driver.close();
    await driver.close();
  });
}
