/**
 * Rollups of history: what is kept of a point's samples once retention (store/retention.ts)
 * removes them, one summary per 15 minutes (docs/history.md). A year view still works after the
 * raw samples are gone: GraphQL aggregates (api/graphql/resolvers.ts) and the console's trend
 * read these summaries where raw samples are gone.
 *
 * Per bucket of 15 minutes (aligned to the UNIX epoch, UTC), by the point's kind:
 * - Number: count, min, max, sum (the mean is sum / count), first and last value;
 * - Bool: count, how many were true (so MEAN is the share of samples that were true, and MIN,
 *   MAX and SUM follow), first and last value;
 * - Str: count, first and last value.
 * STDDEV is not kept (it would need a sum of squares per bucket, 8 more bytes each): a STDDEV
 * over a range whose raw samples are gone is refused, as are the functions needing every sample.
 *
 * Stored in the `roll` sublevel (binary keys and values, db.ts):
 *
 *   'D' id 0x00 day(8)   the buckets of one UTC day of one point (up to 96), key by day start
 *   'H' id               the point's horizon: raw samples before it were rolled up and removed,
 *                        the start of its oldest rolled day, its kind
 *   'P' id               a roll whose raw samples may not be removed yet (crash recovery)
 *
 * day(8) is the day's start in epoch ms as a big-endian int64 with its sign bit flipped, so key
 * order is time order. A day's buckets are its columns (bucket starts; counts; figures), each
 * encoded as a history chunk (his-codec.ts: the decimal codec makes regular bucket times and
 * sensor-like figures cost a byte or two), so rollups compress as history does.
 *
 * The invariant readers rely on: outside a roll in progress, every raw sample of a point before
 * its horizon is not in the rollups (a late write, a backfill older than retention): the next
 * retention step of the point rolls it in and removes it. Readers take rollups before the horizon
 * and raw samples from it on, so nothing is counted twice.
 */
import { ErrorCodes, HayloftError, isHayloftError } from '../lib/errors.js';
import type { Part } from '../lib/part.js';
import type { BinarySublevel, Store } from './db.js';
import { decodeChunk, encodeChunk, newValueColumn, chunkCount, type HisKind, type HisValue } from './his-codec.js';
import type { HisColumns } from './history.js';

/** The length of a rollup bucket: 15 minutes. */
export const ROLLUP_MS = 15 * 60_000;
export const DAY_MS = 86_400_000;

const T_DAY = 0x44; // 'D'
const T_HORIZON = 0x48; // 'H'
const T_PENDING = 0x50; // 'P'
const FORMAT = 1;
const KIND_CODE: Record<HisKind, number> = { Number: 1, Bool: 2, Str: 3 };
const CODE_KIND: (HisKind | undefined)[] = [undefined, 'Number', 'Bool', 'Str'];

const utf8Enc = new TextEncoder();
const utf8Dec = new TextDecoder();

/** Rollup buckets in time order, as columns. */
export interface RollupColumns {
  readonly kind: HisKind | null;
  /** Bucket starts, epoch ms. */
  readonly ts: Float64Array;
  readonly count: Float64Array;
  /** Numeric figures (Bool: true is 1); NaN for Str. */
  readonly min: Float64Array;
  readonly max: Float64Array;
  readonly sum: Float64Array;
  readonly first: HisValue[];
  readonly last: HisValue[];
}

/** Where a point's rollups stand (kept in memory for every point with rollups). */
export interface RollupState {
  kind: HisKind;
  /** Raw samples before this were rolled up and removed (-Infinity: none yet). */
  horizon: number;
  /** Start of the oldest day holding rollups (Infinity: none). */
  oldestDay: number;
}

export function bucketOf(ts: number): number {
  return Math.floor(ts / ROLLUP_MS) * ROLLUP_MS;
}

export function dayOf(ts: number): number {
  return Math.floor(ts / DAY_MS) * DAY_MS;
}

/** Mutable buckets of one day (or of a roll), by bucket start. */
interface Bucket {
  count: number;
  min: number;
  max: number;
  sum: number;
  first: HisValue;
  last: HisValue;
}

function numeric(v: HisValue): number {
  return typeof v === 'number' ? v : v === true ? 1 : v === false ? 0 : NaN;
}

/**
 * Buckets of samples in time order (the same arithmetic as his-aggregate.ts's running figures, so
 * a mean from rollups is the mean from the samples).
 */
export function rollUp(cols: HisColumns): Map<number, Bucket> {
  const out = new Map<number, Bucket>();
  if (cols.kind === null) return out;
  const isStr = cols.kind === 'Str';
  let cur: Bucket | undefined;
  let curStart = NaN;
  for (let i = 0; i < cols.ts.length; i++) {
    const t = cols.ts[i] as number;
    const v = cols.val[i] as HisValue;
    const b0 = bucketOf(t);
    if (b0 !== curStart) {
      curStart = b0;
      cur = { count: 0, min: isStr ? NaN : Infinity, max: isStr ? NaN : -Infinity, sum: isStr ? NaN : 0, first: v, last: v };
      out.set(b0, cur);
    }
    const b = cur as Bucket;
    b.count++;
    b.last = v;
    if (isStr) continue;
    const x = numeric(v);
    b.sum += x;
    if (x < b.min) b.min = x;
    if (x > b.max) b.max = x;
  }
  return out;
}

/**
 * Adds `add` (samples rolled now) into `into` (what a day already held): counts and sums add up,
 * extremes widen. The bucket's first and last stay those already kept: samples merged into a
 * kept bucket are late ones (docs/history.md), whose place in the bucket is not known.
 */
function mergeInto(into: Map<number, Bucket>, add: Map<number, Bucket>): void {
  for (const [t, b] of add) {
    const old = into.get(t);
    if (old === undefined) {
      into.set(t, b);
      continue;
    }
    old.count += b.count;
    old.sum += b.sum;
    if (b.min < old.min) old.min = b.min;
    if (b.max > old.max) old.max = b.max;
  }
}

// ---------------------------------------------------------------------------------------------
// Keys and values

function idKey(type: number, id: string): Uint8Array {
  const idb = utf8Enc.encode(id);
  const k = new Uint8Array(1 + idb.length);
  k[0] = type;
  k.set(idb, 1);
  return k;
}

function dayKey(id: string, day: number): Uint8Array {
  const idb = utf8Enc.encode(id);
  const k = new Uint8Array(idb.length + 10);
  k[0] = T_DAY;
  k.set(idb, 1);
  // k[idb.length + 1] stays 0: the id's end (Haystack ids never hold NUL).
  const dv = new DataView(k.buffer);
  const at = idb.length + 2;
  if (day === Infinity) dv.setBigUint64(at, 0xffffffffffffffffn);
  else if (day === -Infinity) dv.setBigUint64(at, 0n);
  else dv.setBigUint64(at, BigInt(day) + 0x8000000000000000n);
  return k;
}

function keyDay(k: Uint8Array): number {
  return Number(new DataView(k.buffer, k.byteOffset + k.length - 8, 8).getBigUint64(0) - 0x8000000000000000n);
}

function corrupt(id: string, what: string): HayloftError {
  return new HayloftError(ErrorCodes.STORE_UNAVAILABLE, `the history rollups of point ${id} in the data folder are corrupt (${what})`);
}

function encodeState(s: RollupState): Uint8Array {
  const b = new Uint8Array(18);
  const dv = new DataView(b.buffer);
  b[0] = FORMAT;
  b[1] = KIND_CODE[s.kind];
  dv.setFloat64(2, s.horizon);
  dv.setFloat64(10, s.oldestDay);
  return b;
}

function decodeState(b: Uint8Array, id: string): RollupState {
  const kind = CODE_KIND[b[1] ?? 0];
  if (b.length !== 18 || b[0] !== FORMAT || kind === undefined) throw corrupt(id, 'its state');
  const dv = new DataView(b.buffer, b.byteOffset, b.length);
  return { kind, horizon: dv.getFloat64(2), oldestDay: dv.getFloat64(10) };
}

/** The columns of a day's buckets: which figures each kind keeps (see the file's comment). */
function columnsOf(kind: HisKind): { name: keyof Bucket; kind: HisKind }[] {
  const numbers: { name: keyof Bucket; kind: HisKind }[] =
    kind === 'Number'
      ? [
          { name: 'count', kind: 'Number' },
          { name: 'min', kind: 'Number' },
          { name: 'max', kind: 'Number' },
          { name: 'sum', kind: 'Number' },
        ]
      : kind === 'Bool'
        ? [
            { name: 'count', kind: 'Number' },
            { name: 'sum', kind: 'Number' },
          ]
        : [{ name: 'count', kind: 'Number' }];
  return [...numbers, { name: 'first', kind }, { name: 'last', kind }];
}

/** u8 format | u8 kind | per column: u32 length | a history chunk (bucket starts, the figure). */
function encodeDay(kind: HisKind, buckets: Map<number, Bucket>): Uint8Array {
  const ts = [...buckets.keys()].sort((a, b) => a - b);
  const parts: Uint8Array[] = [];
  for (const c of columnsOf(kind)) {
    // Sums to 12 significant digits: a sum of short decimals (0.1 + 0.2) leaves binary noise in
    // the last digits that makes it no short decimal, which costs 8 bytes a bucket instead of 1-2
    // (bench/rollups); a mean from it is off by less than 1e-12 of its value.
    const val = ts.map((t) => {
      const v = (buckets.get(t) as Bucket)[c.name];
      return c.name === 'sum' && Number.isFinite(v) ? Number((v as number).toPrecision(12)) : v;
    });
    parts.push(encodeChunk(c.kind, ts, val, 0, ts.length));
  }
  let n = 2;
  for (const p of parts) n += 4 + p.length;
  const out = new Uint8Array(n);
  const dv = new DataView(out.buffer);
  out[0] = FORMAT;
  out[1] = KIND_CODE[kind];
  let at = 2;
  for (const p of parts) {
    dv.setUint32(at, p.length);
    out.set(p, at + 4);
    at += 4 + p.length;
  }
  return out;
}

function decodeDay(b: Uint8Array, id: string): { kind: HisKind; buckets: Map<number, Bucket> } {
  const kind = CODE_KIND[b[1] ?? 0];
  if (b[0] !== FORMAT || kind === undefined) throw corrupt(id, 'a day of buckets');
  const dv = new DataView(b.buffer, b.byteOffset, b.length);
  const cols = columnsOf(kind);
  let at = 2;
  let ts: Float64Array | undefined;
  const vals: (Float64Array | boolean[] | string[])[] = [];
  try {
    for (const c of cols) {
      const len = dv.getUint32(at);
      const chunk = b.subarray(at + 4, at + 4 + len);
      at += 4 + len;
      const n = chunkCount(chunk);
      const t = new Float64Array(n);
      const v = newValueColumn(c.kind, n);
      decodeChunk(c.kind, chunk, t, v, 0);
      ts ??= t;
      vals.push(v);
    }
  } catch (e) {
    if (isHayloftError(e)) throw e;
    throw corrupt(id, (e as Error).message);
  }
  const buckets = new Map<number, Bucket>();
  const times = ts as Float64Array;
  for (let i = 0; i < times.length; i++) {
    const b0: Bucket = { count: 0, min: NaN, max: NaN, sum: NaN, first: false, last: false };
    cols.forEach((c, j) => {
      (b0 as unknown as Record<string, HisValue>)[c.name] = (vals[j] as ArrayLike<HisValue>)[i] as HisValue;
    });
    if (kind === 'Bool') {
      // Only the count of trues is kept: the extremes follow from it.
      b0.min = b0.sum === b0.count ? 1 : 0;
      b0.max = b0.sum > 0 ? 1 : 0;
    }
    buckets.set(times[i] as number, b0);
  }
  return { kind, buckets };
}

// ---------------------------------------------------------------------------------------------

export class RollupStore implements Part {
  readonly name = 'rollups';
  private readonly store: Store;
  private readonly states = new Map<string, RollupState>();
  /** One change of a point's rollups at a time (a roll, a drop), by point. */
  private readonly running = new Map<string, Promise<unknown>>();

  constructor(store: Store) {
    this.store = store;
  }

  /** The sublevel, read from the store on each use: a reopen (store/recovery.ts) replaces it. */
  private get level(): BinarySublevel {
    return this.store.roll;
  }

  /** Loads every point's state (one short scan of the 'H' keys). */
  async start(): Promise<void> {
    await this.reload();
  }

  /** Reads the states again (after the store reopened, store/recovery.ts). */
  async reload(): Promise<void> {
    const states = new Map<string, RollupState>();
    try {
      for await (const [k, v] of this.level.iterator({ gte: Uint8Array.of(T_HORIZON), lt: Uint8Array.of(T_HORIZON + 1) })) {
        const id = utf8Dec.decode(k.subarray(1));
        states.set(id, decodeState(v, id));
      }
    } catch (e) {
      throw wrap(e, 'cannot load history rollups');
    }
    this.states.clear();
    for (const [id, s] of states) this.states.set(id, s);
  }

  /** The point's state, or undefined when it has no rollups. */
  state(id: string): RollupState | undefined {
    const s = this.states.get(id);
    return s === undefined ? undefined : { ...s };
  }

  /** Raw samples of the point before this were rolled up (-Infinity when none were). */
  horizon(id: string): number {
    return this.states.get(id)?.horizon ?? -Infinity;
  }

  /** Ids of every point with rollups. */
  ids(): string[] {
    return [...this.states.keys()];
  }

  /** Rolls a crash interrupted: the points and the cut whose raw samples before it may remain. */
  async pending(): Promise<{ id: string; cut: number }[]> {
    const out: { id: string; cut: number }[] = [];
    for (const [k, v] of await this.level.iterator({ gte: Uint8Array.of(T_PENDING), lt: Uint8Array.of(T_PENDING + 1) }).all()) {
      out.push({ id: utf8Dec.decode(k.subarray(1)), cut: new DataView(v.buffer, v.byteOffset, 8).getFloat64(0) });
    }
    return out;
  }

  private async serial<T>(id: string, f: () => Promise<T>): Promise<T> {
    const before = this.running.get(id);
    const mine = (async () => {
      if (before !== undefined) await before.catch(() => undefined);
      return f();
    })();
    this.running.set(id, mine);
    try {
      return await mine;
    } finally {
      if (this.running.get(id) === mine) this.running.delete(id);
    }
  }

  /**
   * Rolls `cols` (the point's raw samples before `cut`, all of them not yet rolled) into its
   * buckets, sets its horizon to `cut` (never back) and marks the roll pending, in one synced
   * batch. The caller then removes those raw samples and calls `done`. Returns the buckets written.
   */
  async roll(id: string, cols: HisColumns, cut: number): Promise<number> {
    return this.serial(id, async () => {
      const old = this.states.get(id);
      const kind = cols.kind ?? old?.kind;
      if (kind === undefined) return 0;
      if (old !== undefined && old.kind !== kind) {
        throw new HayloftError(ErrorCodes.HIS_KIND, `point ${id} has ${old.kind} rollups; its history is now ${kind}: delete the point's history first`);
      }
      const add = rollUp(cols);
      const byDay = new Map<number, Map<number, Bucket>>();
      for (const [t, b] of add) {
        const d = dayOf(t);
        let m = byDay.get(d);
        if (m === undefined) byDay.set(d, (m = new Map<number, Bucket>()));
        m.set(t, b);
      }
      const days = [...byDay.keys()];
      const keys = days.map((d) => dayKey(id, d));
      const batch = this.store.db.batch();
      let written = 0;
      try {
        const kept = keys.length > 0 ? await this.level.getMany(keys) : [];
        days.forEach((d, i) => {
          const prev = kept[i];
          const buckets = prev === undefined ? new Map<number, Bucket>() : decodeDay(prev, id).buckets;
          mergeInto(buckets, byDay.get(d) as Map<number, Bucket>);
          written += (byDay.get(d) as Map<number, Bucket>).size;
          batch.put(keys[i] as Uint8Array, encodeDay(kind, buckets), { sublevel: this.level });
        });
      } catch (e) {
        await batch.close();
        throw wrap(e, 'cannot read history rollups to merge into');
      }
      const next: RollupState = {
        kind,
        horizon: Math.max(old?.horizon ?? -Infinity, cut),
        oldestDay: Math.min(old?.oldestDay ?? Infinity, ...days),
      };
      batch.put(idKey(T_HORIZON, id), encodeState(next), { sublevel: this.level });
      const p = new Uint8Array(8);
      new DataView(p.buffer).setFloat64(0, cut);
      batch.put(idKey(T_PENDING, id), p, { sublevel: this.level });
      await commit(batch, 'cannot write history rollups');
      this.states.set(id, next);
      return written;
    });
  }

  /** The raw samples of a roll are removed: the roll is no longer pending. */
  async done(ids: readonly string[]): Promise<void> {
    if (ids.length === 0) return;
    const batch = this.store.db.batch();
    for (const id of ids) batch.del(idKey(T_PENDING, id), { sublevel: this.level });
    await commit(batch, 'cannot write history rollups');
  }

  /** Buckets starting in [start, end), in time order. */
  async read(id: string, start: number, end: number): Promise<RollupColumns> {
    const s = this.states.get(id);
    if (s === undefined || !(start < end)) return emptyColumns(s?.kind ?? null);
    let entries: Uint8Array[];
    try {
      entries = await this.level.values({ gte: dayKey(id, dayOf(start)), lt: dayKey(id, end === Infinity ? Infinity : dayOf(end) + DAY_MS) }).all();
    } catch (e) {
      throw wrap(e, 'cannot read history rollups');
    }
    const ts: number[] = [];
    const rows: Bucket[] = [];
    for (const e of entries) {
      const { buckets } = decodeDay(e, id);
      for (const t of [...buckets.keys()].sort((a, b) => a - b)) {
        if (t < start || t >= end) continue;
        ts.push(t);
        rows.push(buckets.get(t) as Bucket);
      }
    }
    const n = ts.length;
    const out = {
      kind: s.kind,
      ts: Float64Array.from(ts),
      count: new Float64Array(n),
      min: new Float64Array(n),
      max: new Float64Array(n),
      sum: new Float64Array(n),
      first: new Array<HisValue>(n),
      last: new Array<HisValue>(n),
    };
    rows.forEach((r, i) => {
      out.count[i] = r.count;
      out.min[i] = r.min;
      out.max[i] = r.max;
      out.sum[i] = r.sum;
      out.first[i] = r.first;
      out.last[i] = r.last;
    });
    return out;
  }

  /**
   * Removes the point's rollup days that end at or before `before`; returns how many buckets they
   * held. The root-database key range they took, for compaction, is `dayRange`.
   */
  async dropBefore(id: string, before: number): Promise<number> {
    return this.serial(id, async () => {
      const s = this.states.get(id);
      const lastDay = dayOf(before) - DAY_MS; // days starting at or before this end by `before`
      if (s === undefined || s.oldestDay > lastDay) return 0;
      const batch = this.store.db.batch();
      let dropped = 0;
      let next: number;
      try {
        for (const [k, v] of await this.level.iterator({ gte: dayKey(id, -Infinity), lte: dayKey(id, lastDay) }).all()) {
          batch.del(k, { sublevel: this.level });
          dropped += decodeDay(v, id).buckets.size;
        }
        const [k] = await this.level.keys({ gt: dayKey(id, lastDay), lt: dayKey(id, Infinity), limit: 1 }).all();
        next = k === undefined ? Infinity : keyDay(k);
      } catch (e) {
        await batch.close();
        throw wrap(e, 'cannot read history rollups to remove');
      }
      const state: RollupState = { ...s, oldestDay: next };
      batch.put(idKey(T_HORIZON, id), encodeState(state), { sublevel: this.level });
      await commit(batch, 'cannot remove history rollups');
      this.states.set(id, state);
      return dropped;
    });
  }

  /**
   * Removes the point's buckets that overlap [start, end) (a hisDelete of that range): a bucket
   * summarises samples that may be among the deleted ones, and cannot be split. Returns how many.
   */
  async deleteRange(id: string, start: number, end: number): Promise<number> {
    return this.serial(id, async () => {
      const s = this.states.get(id);
      if (s === undefined || !(start < end)) return 0;
      const batch = this.store.db.batch();
      let removed = 0;
      let oldest = s.oldestDay;
      /** Days this delete empties (their keys go in the batch). */
      const gone = new Set<number>();
      try {
        const from = start === -Infinity ? -Infinity : dayOf(start - ROLLUP_MS);
        const to = end === Infinity ? Infinity : dayOf(end) + DAY_MS;
        for (const [k, v] of await this.level.iterator({ gte: dayKey(id, from), lt: dayKey(id, to) }).all()) {
          const { kind, buckets } = decodeDay(v, id);
          const before = buckets.size;
          for (const b0 of [...buckets.keys()]) if (b0 < end && b0 + ROLLUP_MS > start) buckets.delete(b0);
          if (buckets.size === before) continue;
          removed += before - buckets.size;
          if (buckets.size > 0) batch.put(k, encodeDay(kind, buckets), { sublevel: this.level });
          else {
            batch.del(k, { sublevel: this.level });
            gone.add(keyDay(k));
          }
        }
        if (removed > 0) {
          // The oldest day may have gone: the first day key not emptied by this delete.
          oldest = Infinity;
          for (const k of await this.level.keys({ gte: dayKey(id, -Infinity), lt: dayKey(id, Infinity) }).all()) {
            const d = keyDay(k);
            if (!gone.has(d)) {
              oldest = d;
              break;
            }
          }
        }
      } catch (e) {
        await batch.close();
        throw wrap(e, 'cannot read history rollups to delete from');
      }
      if (removed === 0) {
        await batch.close();
        return 0;
      }
      const state: RollupState = { ...s, oldestDay: oldest };
      batch.put(idKey(T_HORIZON, id), encodeState(state), { sublevel: this.level });
      await commit(batch, 'cannot delete history rollups');
      this.states.set(id, state);
      return removed;
    });
  }

  /** Every rollup of a point (its record was deleted): its days, state and any pending mark. */
  async dropPoint(id: string): Promise<void> {
    await this.serial(id, async () => {
      const batch = this.store.db.batch();
      try {
        for (const k of await this.level.keys({ gte: dayKey(id, -Infinity), lte: dayKey(id, Infinity) }).all()) batch.del(k, { sublevel: this.level });
      } catch (e) {
        await batch.close();
        throw wrap(e, 'cannot read history rollups to remove');
      }
      batch.del(idKey(T_HORIZON, id), { sublevel: this.level });
      batch.del(idKey(T_PENDING, id), { sublevel: this.level });
      await commit(batch, 'cannot remove history rollups');
      this.states.delete(id);
    });
  }

  /** The root-database keys of the point's rollup days before `before` (for LevelDB's compactRange). */
  dayRange(id: string, before: number): [Uint8Array, Uint8Array] {
    const prefix = utf8Enc.encode(this.level.prefix);
    return [concat(prefix, dayKey(id, -Infinity)), concat(prefix, dayKey(id, before === Infinity ? Infinity : dayOf(before)))];
  }
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
}

function emptyColumns(kind: HisKind | null): RollupColumns {
  return { kind, ts: new Float64Array(0), count: new Float64Array(0), min: new Float64Array(0), max: new Float64Array(0), sum: new Float64Array(0), first: [], last: [] };
}

function wrap(e: unknown, what: string): unknown {
  if (isHayloftError(e)) return e;
  return new HayloftError(ErrorCodes.STORE_UNAVAILABLE, `${what}: ${(e as Error).message}`, { cause: e });
}

async function commit(batch: ReturnType<Store['db']['batch']>, what: string): Promise<void> {
  try {
    // `sync` is a classic-level option missing from abstract-level's types.
    await batch.write({ sync: true } as object);
  } catch (e) {
    throw wrap(e, what);
  }
}
