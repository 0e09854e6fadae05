/**
 * The free-space floor (store/space.ts) with a statfs of the test's own: refused below the floor,
 * taken again only above it by the margin (no flapping), one log line per change, a new reading
 * after large writes and (while refused) when a write asks, health `degraded` with the reason.
 */
import type { Writable } from 'node:stream';
import t from 'tap';
import { isHayloftError } from '../../src/lib/errors.js';
import { createLogger } from '../../src/lib/log.js';
import { DiskSpace, type SpaceReading } from '../../src/store/space.js';

const MIB = 1024 * 1024;

function world(floor: number) {
  let free = 100 * MIB;
  let reads = 0;
  let now = 0;
  const logs: string[] = [];
  const log = createLogger({ level: 'info', destination: { write: (s: string) => void logs.push(s) } as unknown as Writable });
  const space = new DiskSpace({
    dir: '/data',
    floorBytes: floor,
    log,
    refreshMs: 3_600_000,
    now: () => now,
    statfs: async (): Promise<SpaceReading> => {
      reads++;
      return { free, total: 1000 * MIB };
    },
  });
  return {
    space,
    logs,
    set: (bytes: number) => void (free = bytes),
    reads: () => reads,
    advance: (ms: number) => void (now += ms),
  };
}

function refusedCode(space: DiskSpace): string | undefined {
  try {
    space.checkHistory();
    return undefined;
  } catch (e) {
    return isHayloftError(e) ? e.code : 'other';
  }
}

t.test('refused below the floor, taken again above it by the margin, each change logged once', async (t) => {
  const w = world(64 * MIB);
  w.space.start();
  t.teardown(() => w.space.stop());
  await w.space.refresh();
  t.equal(refusedCode(w.space), undefined, 'room: taken');
  t.same(w.space.health(), { ok: true, historyRefused: false, freeBytes: 100 * MIB, floorBytes: 64 * MIB });

  w.set(63 * MIB);
  await w.space.refresh();
  t.equal(refusedCode(w.space), 'HL_STORAGE_FULL', 'below the floor: refused');
  t.equal(refusedCode(w.space), 'HL_STORAGE_FULL', 'and again');
  const h = w.space.health();
  t.match(h, { ok: true, historyRefused: true, degraded: /^HL_STORAGE_FULL: history writes are refused, 63\.00 MiB free/ });

  w.set(65 * MIB);
  await w.space.refresh();
  t.equal(refusedCode(w.space), 'HL_STORAGE_FULL', 'just above the floor: still refused (the margin is 4 MiB here)');
  w.set(68 * MIB);
  await w.space.refresh();
  t.equal(refusedCode(w.space), undefined, 'above floor + margin: taken again');
  w.set(66 * MIB);
  await w.space.refresh();
  t.equal(refusedCode(w.space), undefined, 'between floor and margin: still taken (no flapping)');

  t.equal(w.logs.filter((l) => l.includes('history writes refused')).length, 1, 'one line when refusing');
  t.equal(w.logs.filter((l) => l.includes('history writes resumed')).length, 1, 'one line when resuming');
});

t.test('a new reading after a MiB written, or when the writes near the floor, and while refused when a write asks', async (t) => {
  const w = world(64 * MIB);
  w.space.start();
  t.teardown(() => w.space.stop());
  await w.space.refresh();
  const base = w.reads();
  w.space.wrote(100 * 1024);
  t.equal(w.reads(), base, 'a small write: no reading');
  w.space.wrote(MIB);
  await w.space.refresh();
  t.equal(w.reads(), base + 1, 'after a MiB: one reading (shared with the one asked for)');

  w.set(65 * MIB);
  await w.space.refresh();
  const before = w.reads();
  w.space.wrote(2 * MIB - 1);
  await Promise.resolve();
  t.ok(w.reads() > before, 'the last reading less what was written is below the floor: read again');
  await w.space.refresh();

  w.set(10 * MIB);
  await w.space.refresh();
  t.equal(refusedCode(w.space), 'HL_STORAGE_FULL');
  w.set(200 * MIB);
  const r0 = w.reads();
  refusedCode(w.space);
  t.equal(w.reads(), r0, 'not more than once a second');
  w.advance(1000);
  refusedCode(w.space);
  await w.space.refresh();
  t.equal(refusedCode(w.space), undefined, 'the freed space is seen at the next attempt');
});

t.test('floor 0: never refused, the free space still reported', async (t) => {
  const w = world(0);
  w.set(0);
  await w.space.refresh();
  t.equal(refusedCode(w.space), undefined);
  t.match(w.space.health(), { ok: true, historyRefused: false, freeBytes: 0, floorBytes: 0 });
});
