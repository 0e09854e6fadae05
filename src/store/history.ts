/**
 * The history store: each point's samples (epoch ms + one value of the point's kind) in the
 * `his` sublevel, binary keys and values.
 *
 * Keys (the id is UTF-8; Haystack ids never contain NUL, so NUL ends it):
 *
 *   'M' id                  point metadata: kind, size, first and last ts, seal edge, tail count
 *   'C' id 0x00 ts(8)       a sealed chunk (his-codec.ts) keyed by its first timestamp
 *   'T' id 0x00 ts(8)       one sample of the open tail
 *
 * ts(8) is the float64 of the timestamp, big-endian, with the sign bit flipped (all bits for
 * negatives), so byte order is numeric order and ±Infinity bound every range.
 *
 * Invariants: chunks never overlap; every chunk sample is <= `sealedEnd` < every tail sample.
 * New samples past the seal edge go to the tail, one small entry each: a poll cycle appends a few
 * bytes per point instead of rewriting a chunk (flash wear). When the tail would reach
 * `chunkSize`, the tail, the write's samples and a partial last chunk (reopened) are sealed into
 * chunks of `chunkSize`, the last one partial, in the same batch, and the tail is left empty: a
 * large write costs its chunks, not an entry per sample. Samples at or before the seal edge are
 * merged into the chunk whose span they fall in (re-encoded; split in even pieces past twice the
 * chunk size). Deletes may leave the seal edge above the last chunk: it is
 * an upper bound, which is all the invariants need.
 *
 * Every write, delete and seal of one call is one LevelDB batch written with sync: acknowledged
 * means durable, and a crash leaves all of a call or none of it. Writes to one point are
 * serialised by a per-point lock (read-modify-write of chunks, tail counts). Reads need no lock:
 * they read from one explicit snapshot.
 *
 * Metadata of every point is held in memory (loaded by start()), so stats() is synchronous and a
 * poll-cycle append needs no read at all.
 */
import type { AbstractSnapshot } from 'abstract-level';
import { ErrorCodes, HayloftError, isHayloftError } from '../lib/errors.js';
import { EventBus } from '../lib/events.js';
import type { Metrics } from '../lib/metrics.js';
import type { Part } from '../lib/part.js';
import type { HisBatch, StoreEvents } from './events.js';

export type { HisBatch, HisListener, HisPlanHook } from './events.js';
import type { BinarySublevel, Store } from './db.js';
import type { DiskSpace } from './space.js';
import {
  chunkCount,
  chunkFirst,
  chunkLast,
  decodeChunk,
  decodeValue,
  encodeChunk,
  encodeValue,
  newValueColumn,
  type HisKind,
  type HisValue,
} from './his-codec.js';

export type { HisKind, HisValue } from './his-codec.js';

export interface HisSample {
  ts: number;
  val: HisValue;
}

export interface HisWrite {
  pointId: string;
  kind: HisKind;
  samples: readonly HisSample[];
}

/** A HisWrite as two columns (a decoded history grid): no object per sample. */
export interface HisColumnsWrite {
  pointId: string;
  kind: HisKind;
  ts: ArrayLike<number>;
  val: ArrayLike<HisValue>;
}

/** Samples of a range in time order, as columns (one typed array of timestamps, one of values). */
export type HisColumns =
  | { readonly kind: 'Number'; readonly ts: Float64Array; readonly val: Float64Array }
  | { readonly kind: 'Bool'; readonly ts: Float64Array; readonly val: boolean[] }
  | { readonly kind: 'Str'; readonly ts: Float64Array; readonly val: string[] }
  /** The point has no history. */
  | { readonly kind: null; readonly ts: Float64Array; readonly val: never[] };

/** A point's samples in [start, end), epoch ms. */
export interface HisSpan {
  readonly pointId: string;
  readonly start: number;
  readonly end: number;
}

export interface HisStats {
  /** Kind of the stored samples; undefined when there are none. */
  kind: HisKind | undefined;
  size: number;
  /** Timestamp of the first sample (hisStart). */
  start: number | undefined;
  /** Timestamp of the last sample (hisEnd), inclusive. */
  end: number | undefined;
}

export interface HistoryOptions {
  /** The bus it emits 'his.plan' and 'his.written' on (the app's); a store built alone makes its own. */
  events?: EventBus<StoreEvents>;
  /** Samples per sealed chunk (default 1024; see docs/performance.md for the measurements). */
  chunkSize?: number;
  /**
   * The free-space floor (store/space.ts): writes are refused with HL_STORAGE_FULL below it, and
   * told what they wrote. Deletes are never refused: they are small and make room.
   */
  space?: Pick<DiskSpace, 'checkHistory' | 'wrote'>;
}

export const DEFAULT_CHUNK_SIZE = 1024;




/** The columns as one object per sample (convenience for callers and tests; slower). */
export function toSamples(cols: HisColumns): HisSample[] {
  const out = new Array<HisSample>(cols.ts.length);
  for (let i = 0; i < cols.ts.length; i++) out[i] = { ts: cols.ts[i] as number, val: cols.val[i] as HisValue };
  return out;
}

// ---------------------------------------------------------------------------------------------
// Keys and metadata

const T_META = 0x4d; // 'M'
const T_CHUNK = 0x43; // 'C'
const T_TAIL = 0x54; // 'T'

const utf8Enc = new TextEncoder();
const utf8Dec = new TextDecoder();

interface Meta {
  kind: HisKind;
  size: number;
  start: number;
  end: number;
  /** Upper bound of chunk timestamps; tail timestamps are all above it. */
  sealedEnd: number;
  tailCount: number;
}

const KIND_CODE: Record<HisKind, number> = { Number: 1, Bool: 2, Str: 3 };
const CODE_KIND: (HisKind | undefined)[] = [undefined, 'Number', 'Bool', 'Str'];
const META_VERSION = 1;
const META_BYTES = 2 + 5 * 8;

function encodeMeta(m: Meta): Uint8Array {
  const b = new Uint8Array(META_BYTES);
  const dv = new DataView(b.buffer);
  b[0] = META_VERSION;
  b[1] = KIND_CODE[m.kind];
  dv.setFloat64(2, m.size);
  dv.setFloat64(10, m.start);
  dv.setFloat64(18, m.end);
  dv.setFloat64(26, m.sealedEnd);
  dv.setFloat64(34, m.tailCount);
  return b;
}

function decodeMeta(b: Uint8Array, id: string): Meta {
  const kind = CODE_KIND[b[1] ?? 0];
  if (b.length !== META_BYTES || b[0] !== META_VERSION || kind === undefined) {
    throw new HayloftError(ErrorCodes.STORE_UNAVAILABLE, `the history metadata of point ${id} in the data folder is corrupt`);
  }
  const dv = new DataView(b.buffer, b.byteOffset, b.length);
  return { kind, size: dv.getFloat64(2), start: dv.getFloat64(10), end: dv.getFloat64(18), sealedEnd: dv.getFloat64(26), tailCount: dv.getFloat64(34) };
}

function freshMeta(kind: HisKind): Meta {
  return { kind, size: 0, start: Infinity, end: -Infinity, sealedEnd: -Infinity, tailCount: 0 };
}

const tsView = new DataView(new ArrayBuffer(8));

function putTs(b: Uint8Array, at: number, ts: number): void {
  tsView.setFloat64(0, ts === 0 ? 0 : ts); // -0 sorts as 0
  const neg = (tsView.getUint8(0) & 0x80) !== 0;
  for (let i = 0; i < 8; i++) {
    const x = tsView.getUint8(i);
    b[at + i] = neg ? ~x : i === 0 ? x | 0x80 : x;
  }
}

function keyTs(k: Uint8Array): number {
  const at = k.length - 8;
  const neg = ((k[at] as number) & 0x80) === 0;
  for (let i = 0; i < 8; i++) {
    const x = k[at + i] as number;
    tsView.setUint8(i, neg ? ~x : i === 0 ? x & 0x7f : x);
  }
  return tsView.getFloat64(0);
}

/** Key builder for one point. */
class PointKeys {
  readonly id: string;
  private readonly idb: Uint8Array;
  readonly meta: Uint8Array;

  constructor(id: string) {
    this.id = id;
    this.idb = utf8Enc.encode(id);
    this.meta = new Uint8Array(1 + this.idb.length);
    this.meta[0] = T_META;
    this.meta.set(this.idb, 1);
  }

  at(type: number, ts: number): Uint8Array {
    const k = new Uint8Array(this.idb.length + 10);
    k[0] = type;
    k.set(this.idb, 1);
    // k[idb.length + 1] stays 0: the id's end
    putTs(k, this.idb.length + 2, ts);
    return k;
  }

  chunk(ts: number): Uint8Array {
    return this.at(T_CHUNK, ts);
  }

  tail(ts: number): Uint8Array {
    return this.at(T_TAIL, ts);
  }
}

// ---------------------------------------------------------------------------------------------
// Samples in memory

/** Sorted, duplicate-free samples as two columns. */
interface Cols {
  ts: number[];
  val: HisValue[];
}

function checkKind(kind: unknown, what: string): asserts kind is HisKind {
  if (kind !== 'Number' && kind !== 'Bool' && kind !== 'Str') {
    throw new HayloftError(ErrorCodes.BAD_REQUEST, `${what}: history kind must be Number, Bool or Str, not ${JSON.stringify(kind)}`);
  }
}

function checkId(id: unknown): asserts id is string {
  if (typeof id !== 'string' || id === '' || id.includes('\0')) {
    throw new HayloftError(ErrorCodes.BAD_REQUEST, `history point id must be a non-empty string without NUL, not ${JSON.stringify(id)}`);
  }
}

const VAL_TYPE: Record<HisKind, string> = { Number: 'number', Bool: 'boolean', Str: 'string' };

/** Validates, sorts (stable) and drops earlier duplicates: the last sample for a timestamp wins. */
function prepare(id: string, kind: HisKind, tsIn: ArrayLike<unknown>, valIn: ArrayLike<unknown>): Cols {
  const n = tsIn.length;
  const type = VAL_TYPE[kind];
  let sorted = true;
  let prev = -Infinity;
  for (let i = 0; i < n; i++) {
    const t = tsIn[i];
    if (!Number.isSafeInteger(t)) {
      throw new HayloftError(ErrorCodes.BAD_VALUE, `history of ${id}: sample ${i} has timestamp ${String(t)}, not an integer number of epoch milliseconds`);
    }
    if (typeof valIn[i] !== type) {
      throw new HayloftError(ErrorCodes.BAD_VALUE, `history of ${id}: sample ${i} is ${typeof valIn[i]}, the point's kind is ${kind}`);
    }
    if ((t as number) <= prev) sorted = false;
    prev = t as number;
  }
  const ts = new Array<number>(n);
  const val = new Array<HisValue>(n);
  if (sorted) {
    for (let i = 0; i < n; i++) {
      const t = tsIn[i] as number;
      ts[i] = t === 0 ? 0 : t;
      val[i] = valIn[i] as HisValue;
    }
    return { ts, val };
  }
  const idx = Array.from({ length: n }, (_, i) => i);
  idx.sort((a, b) => (tsIn[a] as number) - (tsIn[b] as number) || a - b);
  let m = 0;
  for (let j = 0; j < n; j++) {
    const k = idx[j] as number;
    const t0 = tsIn[k] as number;
    const t = t0 === 0 ? 0 : t0;
    if (m > 0 && ts[m - 1] === t) val[m - 1] = valIn[k] as HisValue;
    else {
      ts[m] = t;
      val[m] = valIn[k] as HisValue;
      m++;
    }
  }
  ts.length = m;
  val.length = m;
  return { ts, val };
}

/** Merges sorted a[0..aN) with sorted b[from..to); b wins on equal timestamps. */
function merge(aTs: ArrayLike<number>, aVal: ArrayLike<HisValue>, aN: number, bTs: number[], bVal: HisValue[], from: number, to: number): Cols {
  // Nothing to merge with (a batch appended past an empty tail): the samples as they are.
  if (aN === 0 && from === 0 && to === bTs.length) return { ts: bTs, val: bVal };
  const ts: number[] = [];
  const val: HisValue[] = [];
  let i = 0;
  let j = from;
  while (i < aN && j < to) {
    const x = aTs[i] as number;
    const y = bTs[j] as number;
    if (x < y) {
      ts.push(x);
      val.push(aVal[i++] as HisValue);
    } else {
      ts.push(y);
      val.push(bVal[j++] as HisValue);
      if (x === y) i++;
    }
  }
  for (; i < aN; i++) {
    ts.push(aTs[i] as number);
    val.push(aVal[i] as HisValue);
  }
  for (; j < to; j++) {
    ts.push(bTs[j] as number);
    val.push(bVal[j] as HisValue);
  }
  return { ts, val };
}

/** First index in ts[from..to) whose value is >= x (or > x when `strict`). */
function lowerBound(ts: ArrayLike<number>, x: number, from: number, to: number, strict = false): number {
  let lo = from;
  let hi = to;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    const v = ts[mid] as number;
    if (v < x || (strict && v === x)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function decodeWhole(kind: HisKind, buf: Uint8Array): { ts: Float64Array; val: Float64Array | boolean[] | string[]; n: number } {
  const n = chunkCount(buf);
  const ts = new Float64Array(n);
  const val = newValueColumn(kind, n);
  decodeChunk(kind, buf, ts, val, 0);
  return { ts, val, n };
}

function wrapStoreError(e: unknown, what: string): unknown {
  if (isHayloftError(e)) return e;
  return new HayloftError(ErrorCodes.STORE_UNAVAILABLE, `${what}: ${(e as Error).message}`, { cause: e });
}

/**
 * Bytes a write will take on disk, roughly: a tail entry per sample (key and value) in LevelDB's
 * log, once more when its memtable is written out. Only counted against the last reading of the
 * free space until the next (store/space.ts), so rough is enough; strings count their length.
 */
function estimateBytes(id: string, cols: Cols): number {
  let n = cols.ts.length * (2 * (id.length + 20));
  for (let i = 0; i < cols.val.length; i++) {
    const v = cols.val[i];
    if (typeof v === 'string') n += 2 * v.length;
  }
  return n;
}

/** A lock per key; run() takes all of its keys at once (FIFO per key, so no deadlock). */
class KeyedLock {
  private readonly tails = new Map<string, Promise<void>>();

  async run<T>(keys: readonly string[], f: () => Promise<T>): Promise<T> {
    let release!: () => void;
    const mine = new Promise<void>((r) => (release = r));
    const waits: Promise<void>[] = [];
    for (const k of keys) {
      const w = this.tails.get(k);
      if (w !== undefined) waits.push(w);
      this.tails.set(k, mine);
    }
    try {
      if (waits.length > 0) await Promise.all(waits);
      return await f();
    } finally {
      release();
      for (const k of keys) if (this.tails.get(k) === mine) this.tails.delete(k);
    }
  }

  async idle(): Promise<void> {
    while (this.tails.size > 0) await Promise.all(this.tails.values());
  }
}

const EMPTY_TS = new Float64Array(0);

// ---------------------------------------------------------------------------------------------

export class HistoryStore implements Part {
  readonly name = 'history';
  private readonly store: Store;
  private readonly chunkSize: number;
  private readonly space: HistoryOptions['space'];
  private readonly metas = new Map<string, Meta>();
  private readonly lock = new KeyedLock();
  /**
   * deleteAll calls not yet committed, by point. From the call on, the point has no history for
   * every caller: stats() shows none, reads wait for the delete, and writes queue behind it on
   * the point's lock. (A deleted point's history is dropped after deleteRec answers; the point
   * may be recreated with the same id before that commit lands.)
   */
  private readonly dropping = new Map<string, Promise<unknown>>();
  private state: 'new' | 'started' | 'stopped' = 'new';
  /** Samples committed since start, for metrics (a sample rewritten counts again). */
  samplesWritten = 0;
  /** Samples refused since start: below the free-space floor, or because the store failed to write. */
  readonly samplesRefused = { floor: 0, error: 0 };
  /** Where writes are told (store/events.ts): 'his.plan' in each write's batch, 'his.written' after. */
  readonly events: EventBus<StoreEvents>;

  constructor(store: Store, options: HistoryOptions = {}) {
    this.store = store;
    this.space = options.space;
    const cs = options.chunkSize ?? DEFAULT_CHUNK_SIZE;
    if (!Number.isInteger(cs) || cs < 2 || cs > 1 << 20) throw new RangeError(`chunkSize must be an integer in 2..${1 << 20}`);
    this.chunkSize = cs;
    this.events = options.events ?? new EventBus<StoreEvents>();
  }

  /**
   * Runs `f` while no write or delete of these points runs (it holds their locks): for a change
   * elsewhere in the data folder that must not interleave with their writes' plan hooks.
   */
  async exclusive<T>(pointIds: readonly string[], f: () => Promise<T>): Promise<T> {
    return this.lock.run([...new Set(pointIds)], f);
  }

  /** The sublevel, read from the store on each use: a reopen (store/recovery.ts) replaces it. */
  private get his(): BinarySublevel {
    return this.store.his;
  }

  metrics(metrics: Metrics): void {
    metrics.counter('hayloft_history_samples_written_total', 'History samples written since start (hisWrite and collection)', () => this.samplesWritten);
    metrics.counter(
      'hayloft_history_refused_samples_total',
      'History samples not stored since start (hisWrite and collection): reason="floor" below the free-space floor (HL_STORAGE_FULL), reason="error" a failed or suspended store',
      () => this.samplesRefused.floor + this.samplesRefused.error,
      ['reason'],
      () => [
        { labels: { reason: 'floor' }, value: this.samplesRefused.floor },
        { labels: { reason: 'error' }, value: this.samplesRefused.error },
      ],
    );
  }

  /** Loads every point's metadata (one short scan of the 'M' keys). */
  async start(): Promise<void> {
    if (this.state === 'started') return;
    await this.loadMetas();
    this.state = 'started';
  }

  /**
   * Reads every point's metadata again, after the store reopened (store/recovery.ts): what a
   * failed write left on disk, not what memory last believed. Runs before writes are let through.
   */
  async reload(): Promise<void> {
    if (this.state === 'started') await this.loadMetas();
  }

  private async loadMetas(): Promise<void> {
    const metas = new Map<string, Meta>();
    try {
      for await (const [k, v] of this.his.iterator({ gte: Uint8Array.of(T_META), lt: Uint8Array.of(T_META + 1) })) {
        const id = utf8Dec.decode(k.subarray(1));
        metas.set(id, decodeMeta(v, id));
      }
    } catch (e) {
      throw wrapStoreError(e, 'cannot load history metadata');
    }
    this.metas.clear();
    for (const [id, m] of metas) this.metas.set(id, m);
  }

  /** Waits for writes in flight, then refuses new ones. Does not close the Store. */
  async stop(): Promise<void> {
    if (this.state !== 'started') {
      this.state = 'stopped';
      return;
    }
    this.state = 'stopped';
    await this.lock.idle();
  }

  private checkStarted(): void {
    if (this.state !== 'started') {
      throw new HayloftError(ErrorCodes.STORE_UNAVAILABLE, this.state === 'new' ? 'the history store is not started' : 'the history store is stopped');
    }
  }

  // -------------------------------------------------------------------------------------------
  // Metadata

  stats(pointId: string): HisStats {
    const m = this.dropping.has(pointId) ? undefined : this.metas.get(pointId);
    if (m === undefined) return { kind: undefined, size: 0, start: undefined, end: undefined };
    return { kind: m.kind, size: m.size, start: m.start, end: m.end };
  }

  /** Ids of every point that has history. */
  points(): string[] {
    return [...this.metas.keys()];
  }

  // -------------------------------------------------------------------------------------------
  // Writes

  /** Writes samples of one point (any order; the last sample of a timestamp wins). */
  async write(pointId: string, kind: HisKind, samples: readonly HisSample[]): Promise<void> {
    await this.writeMany([{ pointId, kind, samples }]);
  }

  /**
   * Writes samples of several points in one synced batch: all of them land or none does. Each
   * write gives its samples as objects (HisWrite) or as two columns (HisColumnsWrite).
   */
  async writeMany(writes: readonly (HisWrite | HisColumnsWrite)[]): Promise<void> {
    this.checkStarted();
    // Validate everything before taking locks or touching the database.
    const byId = new Map<string, { kind: HisKind; parts: (HisWrite | HisColumnsWrite)[] }>();
    for (const w of writes) {
      checkId(w.pointId);
      checkKind(w.kind, `history of ${w.pointId}`);
      const prev = byId.get(w.pointId);
      if (prev === undefined) byId.set(w.pointId, { kind: w.kind, parts: [w] });
      else if (prev.kind !== w.kind) throw new HayloftError(ErrorCodes.BAD_REQUEST, `history of ${w.pointId} is written as ${prev.kind} and as ${w.kind} in one request`);
      else prev.parts.push(w);
    }
    const prepared: { id: string; kind: HisKind; cols: Cols }[] = [];
    for (const [id, w] of byId) {
      const [one] = w.parts;
      let cols: Cols;
      if (w.parts.length === 1 && one !== undefined && !('samples' in one)) cols = prepare(id, w.kind, one.ts, one.val);
      else {
        // Samples as objects (or several parts): as columns first, in their order.
        const ts: unknown[] = [];
        const val: unknown[] = [];
        for (const part of w.parts) {
          if ('samples' in part) {
            for (const x of part.samples) {
              ts.push(x.ts);
              val.push(x.val);
            }
          } else {
            for (let i = 0; i < part.ts.length; i++) {
              ts.push(part.ts[i]);
              val.push(part.val[i]);
            }
          }
        }
        cols = prepare(id, w.kind, ts, val);
      }
      if (cols.ts.length > 0) prepared.push({ id, kind: w.kind, cols });
    }
    if (prepared.length === 0) return;
    let samples = 0;
    let bytes = 0;
    for (const p of prepared) {
      samples += p.cols.ts.length;
      bytes += estimateBytes(p.id, p.cols);
    }
    try {
      this.space?.checkHistory();
    } catch (e) {
      this.samplesRefused.floor += samples;
      throw e;
    }
    await this.lock.run(
      prepared.map((p) => p.id),
      async () => {
        const batch = this.store.db.batch();
        const next = new Map<string, Meta>();
        try {
          for (const p of prepared) next.set(p.id, await this.planWrite(batch, p.id, p.kind, p.cols));
          if (this.events.has('his.plan')) {
            for (const p of prepared) this.events.emit('his.plan', p.id, p.cols.ts[0] as number, p.cols.ts[p.cols.ts.length - 1] as number, this.metas.get(p.id)?.end ?? -Infinity, batch);
          }
        } catch (e) {
          await batch.close();
          throw wrapStoreError(e, 'cannot read history to merge into');
        }
        try {
          await this.commit(batch, 'cannot write history');
        } catch (e) {
          this.samplesRefused.error += samples;
          throw e;
        }
        this.space?.wrote(bytes);
        for (const [id, m] of next) this.metas.set(id, m);
        for (const p of prepared) this.samplesWritten += p.cols.ts.length;
        for (const p of prepared) this.events.emit('his.written', p.id, p.kind, p.cols);
      },
    );
  }

  private async commit(batch: HisBatch, what: string): Promise<void> {
    try {
      // `sync` is a classic-level option missing from abstract-level's types.
      await batch.write({ sync: true } as object);
    } catch (e) {
      throw wrapStoreError(e, what);
    }
  }

  /** Adds the puts and deletes of one point's write to `batch`; returns the point's new metadata. */
  private async planWrite(batch: HisBatch, id: string, kind: HisKind, cols: Cols): Promise<Meta> {
    const old = this.metas.get(id);
    if (old !== undefined && old.kind !== kind) {
      throw new HayloftError(ErrorCodes.HIS_KIND, `point ${id} has ${old.kind} history; cannot write ${kind} samples (delete its history first)`);
    }
    const m: Meta = old === undefined ? freshMeta(kind) : { ...old };
    const keys = new PointKeys(id);
    const n = cols.ts.length;
    const split = lowerBound(cols.ts, m.sealedEnd, 0, n, true);
    let added = 0;
    if (split > 0) added += await this.mergeIntoChunks(batch, keys, kind, cols, 0, split);
    if (split < n) added += await this.mergeIntoTail(batch, keys, m, cols, split, n);
    m.size += added;
    m.start = Math.min(m.start, cols.ts[0] as number);
    m.end = Math.max(m.end, cols.ts[n - 1] as number);
    batch.put(keys.meta, encodeMeta(m), { sublevel: this.his });
    return m;
  }

  /**
   * Puts samples as chunk(s) replacing the chunk at `oldFirst` (if any): one chunk up to twice
   * the chunk size, else even pieces of about the chunk size.
   */
  private putChunks(batch: HisBatch, keys: PointKeys, kind: HisKind, c: Cols, oldFirst: number | undefined): void {
    const n = c.ts.length;
    const pieces = n <= 2 * this.chunkSize ? 1 : Math.ceil(n / this.chunkSize);
    const per = Math.ceil(n / pieces);
    // Delete first: a batch applies in order, and a piece other than the first may start at the
    // old key (a split) and must survive.
    if (oldFirst !== undefined && oldFirst !== c.ts[0]) batch.del(keys.chunk(oldFirst), { sublevel: this.his });
    for (let a = 0; a < n; a += per) {
      batch.put(keys.chunk(c.ts[a] as number), encodeChunk(kind, c.ts, c.val, a, Math.min(a + per, n)), { sublevel: this.his });
    }
  }

  /** Merges samples at or before the seal edge into the chunks whose spans they fall in. */
  private async mergeIntoChunks(batch: HisBatch, keys: PointKeys, kind: HisKind, cols: Cols, from: number, to: number): Promise<number> {
    const lo = cols.ts[from] as number;
    const hi = cols.ts[to - 1] as number;
    const lowKey = keys.chunk(-Infinity);
    const highKey = keys.chunk(Infinity);
    const ks = await this.his.keys({ gte: lowKey, lte: keys.chunk(lo), reverse: true, limit: 1 }).all();
    for (const k of await this.his.keys({ gt: keys.chunk(lo), lte: keys.chunk(hi) }).all()) ks.push(k);
    if (ks.length === 0) for (const k of await this.his.keys({ gt: keys.chunk(hi), lt: highKey, limit: 1 }).all()) ks.push(k);
    if (ks.length === 0) {
      // Every chunk was deleted but the seal edge stayed: these samples start new chunks.
      this.putChunks(batch, keys, kind, { ts: cols.ts.slice(from, to), val: cols.val.slice(from, to) }, undefined);
      return to - from;
    }
    const firsts = ks.map(keyTs);
    // Sample ranges per chunk: chunk j takes [firsts[j], firsts[j+1]); the first also takes
    // everything before it.
    const groups: { j: number; a: number; b: number }[] = [];
    let a = from;
    for (let j = 0; j < firsts.length && a < to; j++) {
      const b = j + 1 < firsts.length ? lowerBound(cols.ts, firsts[j + 1] as number, a, to) : to;
      if (b > a) groups.push({ j, a, b });
      a = b;
    }
    const bufs = await this.his.getMany(groups.map((g) => ks[g.j] as Uint8Array));
    let added = 0;
    for (let g = 0; g < groups.length; g++) {
      const { j, a: ga, b: gb } = groups[g] as { j: number; a: number; b: number };
      const buf = bufs[g];
      if (buf === undefined) throw new HayloftError(ErrorCodes.STORE_UNAVAILABLE, `history chunk of ${keys.id} vanished during a write`);
      const cur = decodeWhole(kind, buf);
      const merged = merge(cur.ts, cur.val, cur.n, cols.ts, cols.val, ga, gb);
      added += merged.ts.length - cur.n;
      this.putChunks(batch, keys, kind, merged, firsts[j]);
    }
    return added;
  }

  /**
   * Appends samples past the seal edge to the tail while it stays under the chunk size; once it
   * would not, seals everything past the last full chunk (a partial last chunk, the tail, these
   * samples) into chunks, the last of them partial, and leaves the tail empty.
   */
  private async mergeIntoTail(batch: HisBatch, keys: PointKeys, m: Meta, cols: Cols, from: number, to: number): Promise<number> {
    const kind = m.kind;
    const n = to - from;
    if (m.tailCount + n < this.chunkSize) {
      // No seal possible. Only samples at or before the newest one can replace a tail entry.
      let replaced = 0;
      const maybe = m.tailCount > 0 ? lowerBound(cols.ts, m.end, from, to, true) : from;
      if (maybe > from) {
        const tks: Uint8Array[] = [];
        for (let i = from; i < maybe; i++) tks.push(keys.tail(cols.ts[i] as number));
        for (const v of await this.his.getMany(tks)) if (v !== undefined) replaced++;
      }
      for (let i = from; i < to; i++) batch.put(keys.tail(cols.ts[i] as number), encodeValue(kind, cols.val[i] as HisValue), { sublevel: this.his });
      m.tailCount += n - replaced;
      return n - replaced;
    }
    // Sealing all of it, not just whole chunks off the tail's old end: a batch of 10,000 samples
    // then writes ten chunks, instead of also a tail entry per sample left over (up to 1,023, each
    // put, then read back and deleted by the next batch: most of what such a write cost, and a
    // tombstone each). Samples arriving one at a time still go to the tail (flash wear).
    // What comes before these samples, in time order: the last chunk's samples when it is partial
    // (reopened so chunks stay full; all at or before the seal edge), then the tail's.
    const oldTs: number[] = [];
    const oldVal: HisValue[] = [];
    // Not when this call also merged samples into chunks (`from` > 0): the last chunk may be one
    // of those, whose new content is in the batch, not yet in the database.
    if (m.sealedEnd > -Infinity && from === 0) {
      const [last] = await this.his.values({ gte: keys.chunk(-Infinity), lt: keys.chunk(Infinity), reverse: true, limit: 1 }).all();
      if (last !== undefined && chunkCount(last) < this.chunkSize) {
        const open = decodeWhole(kind, last);
        for (let i = 0; i < open.n; i++) {
          oldTs.push(open.ts[i] as number);
          oldVal.push(open.val[i] as HisValue);
        }
      }
    }
    const reopened = oldTs.length;
    if (m.tailCount > 0) {
      // From the seal edge: every tail key at or before it was deleted, and a range from the
      // start would walk past the tombstones of all of them (one per sample ever sealed, until
      // LevelDB compacts them away), which made each write slower the more history it had.
      for (const [k, v] of await this.his.iterator({ gte: keys.tail(m.sealedEnd), lt: keys.tail(Infinity) }).all()) {
        oldTs.push(keyTs(k));
        oldVal.push(decodeValue(kind, v));
      }
    }
    const all = merge(oldTs, oldVal, oldTs.length, cols.ts, cols.val, from, to);
    const total = all.ts.length;
    // A reopened chunk keeps its key (its first sample is still the first): the put replaces it.
    for (let a = 0; a < total; a += this.chunkSize) {
      batch.put(keys.chunk(all.ts[a] as number), encodeChunk(kind, all.ts, all.val, a, Math.min(a + this.chunkSize, total)), { sublevel: this.his });
    }
    for (let i = reopened; i < oldTs.length; i++) batch.del(keys.tail(oldTs[i] as number), { sublevel: this.his });
    m.sealedEnd = all.ts[total - 1] as number;
    m.tailCount = 0;
    return total - oldTs.length;
  }

  // -------------------------------------------------------------------------------------------
  // Deletes

  /** Deletes the samples in [start, end); returns how many there were. */
  async delete(pointId: string, start: number, end: number): Promise<number> {
    const [n] = await this.deleteSpans([{ pointId, start, end }]);
    return n as number;
  }

  /**
   * Deletes the samples of each span [start, end) of its point in one commit: all of them or, on
   * an error, none. One span per point. Returns how many samples each span removed.
   */
  async deleteSpans(spans: readonly HisSpan[]): Promise<number[]> {
    this.checkStarted();
    const ids = new Set<string>();
    for (const { pointId, start, end } of spans) {
      checkId(pointId);
      checkRange(start, end);
      if (ids.has(pointId)) throw new HayloftError(ErrorCodes.BAD_REQUEST, `@${pointId} is named twice: one span per point`);
      ids.add(pointId);
    }
    return this.lock.run([...ids], async () => {
      const batch = this.store.db.batch();
      // The points' new metadata (null: no samples left), applied once the batch is written.
      const next = new Map<string, Meta | null>();
      const removed: number[] = [];
      try {
        for (const span of spans) removed.push(await this.planDelete(batch, span, next));
      } catch (e) {
        await batch.close();
        throw wrapStoreError(e, 'cannot read history to delete from');
      }
      if (next.size === 0) {
        await batch.close();
        return removed;
      }
      await this.commit(batch, 'cannot delete history');
      for (const [pointId, m] of next) {
        const kind = (m ?? this.metas.get(pointId))?.kind;
        if (m === null) this.metas.delete(pointId);
        else this.metas.set(pointId, m);
        if (kind !== undefined) this.events.emit('his.written', pointId, kind, null);
      }
      return removed;
    });
  }

  /** Adds the deletes (and rewritten chunk parts) of one span to `batch`; `next` gets the point's new metadata when it removes any. */
  private async planDelete(batch: HisBatch, { pointId, start, end }: HisSpan, next: Map<string, Meta | null>): Promise<number> {
    const m0 = this.metas.get(pointId);
    if (!(start < end) || m0 === undefined || m0.end < start || m0.start >= end) return 0;
    const m = { ...m0 };
    const keys = new PointKeys(pointId);
    let removed = 0;
    const lowKey = keys.chunk(-Infinity);
    const entries = await this.his.iterator({ gte: lowKey, lte: keys.chunk(start), reverse: true, limit: 1 }).all();
    for (const e of await this.his.iterator({ gt: keys.chunk(start), lt: keys.chunk(end) }).all()) entries.push(e);
    // What is left of partly deleted chunks, by their old first timestamp.
    const kept = new Map<number, { first: number; last: number }>();
    for (const [k, v] of entries) {
      const f = chunkFirst(v);
      const l = chunkLast(v);
      if (l < start || f >= end) continue;
      if (f >= start && l < end) {
        batch.del(k, { sublevel: this.his });
        removed += chunkCount(v);
        continue;
      }
      const cur = decodeWhole(m.kind, v);
      const rest: Cols = { ts: [], val: [] };
      for (let i = 0; i < cur.n; i++) {
        const t = cur.ts[i] as number;
        if (t < start || t >= end) {
          rest.ts.push(t);
          rest.val.push(cur.val[i] as HisValue);
        }
      }
      removed += cur.n - rest.ts.length;
      this.putChunks(batch, keys, m.kind, rest, f);
      kept.set(f, { first: rest.ts[0] as number, last: rest.ts[rest.ts.length - 1] as number });
    }
    const tailKeys = m.tailCount > 0 ? await this.his.keys({ gte: keys.tail(Math.max(start, m.sealedEnd)), lt: keys.tail(end) }).all() : [];
    for (const k of tailKeys) batch.del(k, { sublevel: this.his });
    removed += tailKeys.length;
    m.tailCount -= tailKeys.length;
    if (removed === 0) return 0;
    m.size -= removed;
    if (m.size <= 0) {
      batch.del(keys.meta, { sublevel: this.his });
      next.set(pointId, null);
    } else {
      if (m.start >= start) m.start = await this.firstAfter(keys, end, kept, m.sealedEnd);
      if (m.end < end) m.end = await this.lastBefore(keys, start, kept, m.sealedEnd);
      batch.put(keys.meta, encodeMeta(m), { sublevel: this.his });
      next.set(pointId, m);
    }
    return removed;
  }

  /** First timestamp >= `end` once [.., end) is gone: in a kept chunk part, a later chunk, or the tail. */
  private async firstAfter(keys: PointKeys, end: number, kept: Map<number, { first: number }>, sealedEnd: number): Promise<number> {
    let best = Infinity;
    for (const { first } of kept.values()) if (first >= end && first < best) best = first;
    const [c] = await this.his.keys({ gte: keys.chunk(end), lt: keys.chunk(Infinity), limit: 1 }).all();
    if (c !== undefined) best = Math.min(best, keyTs(c));
    if (best === Infinity) {
      const [t] = await this.his.keys({ gte: keys.tail(Math.max(end, sealedEnd)), lt: keys.tail(Infinity), limit: 1 }).all();
      if (t !== undefined) best = keyTs(t);
    }
    return best;
  }

  /** Last timestamp < `start` once [start, ..) is gone: in the tail, a kept chunk part or an earlier chunk. */
  private async lastBefore(keys: PointKeys, start: number, kept: Map<number, { last: number }>, sealedEnd: number): Promise<number> {
    const [t] = await this.his.keys({ gte: keys.tail(sealedEnd), lt: keys.tail(start), reverse: true, limit: 1 }).all();
    if (t !== undefined) return keyTs(t);
    const [c] = await this.his.iterator({ gte: keys.chunk(-Infinity), lt: keys.chunk(start), reverse: true, limit: 1 }).all();
    if (c === undefined) return -Infinity;
    const part = kept.get(keyTs(c[0]));
    return part !== undefined ? part.last : chunkLast(c[1]);
  }

  /** Deletes all history of a point; returns how many samples there were. */
  async deleteAll(pointId: string): Promise<number> {
    this.checkStarted();
    checkId(pointId);
    const done = this.lock.run([pointId], async () => {
      const m = this.metas.get(pointId);
      if (m === undefined) return 0;
      const keys = new PointKeys(pointId);
      const batch = this.store.db.batch();
      try {
        for (const type of [T_CHUNK, T_TAIL]) {
          for (const k of await this.his.keys({ gte: keys.at(type, -Infinity), lt: keys.at(type, Infinity) }).all()) batch.del(k, { sublevel: this.his });
        }
        batch.del(keys.meta, { sublevel: this.his });
      } catch (e) {
        await batch.close();
        throw wrapStoreError(e, 'cannot read history to delete');
      }
      await this.commit(batch, 'cannot delete history');
      this.metas.delete(pointId);
      this.events.emit('his.written', pointId, m.kind, null);
      return m.size;
    });
    const gate = done.then(
      () => undefined,
      () => undefined,
    );
    this.dropping.set(pointId, gate);
    try {
      return await done;
    } finally {
      if (this.dropping.get(pointId) === gate) this.dropping.delete(pointId);
    }
  }

  /** Waits for a deleteAll of the point in flight (see `dropping`). */
  private async dropped(pointId: string): Promise<void> {
    const d = this.dropping.get(pointId);
    if (d !== undefined) await d;
  }

  // -------------------------------------------------------------------------------------------
  // Reads

  private async withSnapshot<T>(f: (snapshot: AbstractSnapshot) => Promise<T>): Promise<T> {
    const snapshot = this.store.db.snapshot();
    try {
      return await f(snapshot);
    } catch (e) {
      throw wrapStoreError(e, 'cannot read history');
    } finally {
      await snapshot.close();
    }
  }

  /** The point's metadata as of the snapshot (its kind, and the seal edge where its tail starts). */
  private async snapshotMeta(keys: PointKeys, snapshot: AbstractSnapshot): Promise<Meta | undefined> {
    const b = await this.his.get(keys.meta, { snapshot });
    return b === undefined ? undefined : decodeMeta(b, keys.id);
  }

  /**
   * Samples with start <= ts < end, in time order, as columns. Both bounds may be infinite.
   */
  async read(pointId: string, start = -Infinity, end = Infinity): Promise<HisColumns> {
    this.checkStarted();
    checkId(pointId);
    checkRange(start, end);
    await this.dropped(pointId);
    const keys = new PointKeys(pointId);
    const got = await this.withSnapshot(async (snapshot) => {
      const meta = await this.snapshotMeta(keys, snapshot);
      const kind = meta?.kind;
      if (meta === undefined || !(start < end)) return { kind, chunks: [] as Uint8Array[], tail: [] as [Uint8Array, Uint8Array][] };
      // The chunk holding `start` begins at or before it; the rest begin inside the range.
      const before = start > -Infinity ? await this.his.values({ gte: keys.chunk(-Infinity), lte: keys.chunk(start), reverse: true, limit: 1, snapshot }).all() : [];
      const inside = await this.his.values({ gt: keys.chunk(start), lt: keys.chunk(end), snapshot }).all();
      const chunks = before.length === 0 ? inside : before.concat(inside);
      const tail = await this.his.iterator({ gte: keys.tail(Math.max(start, meta.sealedEnd)), lt: keys.tail(end), snapshot }).all();
      return { kind, chunks, tail };
    });
    const { kind, chunks, tail } = got;
    if (kind === undefined) return { kind: null, ts: EMPTY_TS, val: [] };
    let total = tail.length;
    for (const c of chunks) total += chunkCount(c);
    const ts = new Float64Array(total);
    const val = newValueColumn(kind, total);
    let n = 0;
    for (const c of chunks) {
      const f = chunkFirst(c);
      const l = chunkLast(c);
      if (l < start || f >= end) continue;
      const cnt = decodeChunk(kind, c, ts, val, n);
      if (f >= start && l < end) {
        n += cnt;
        continue;
      }
      // A chunk across a bound: keep its part inside [start, end).
      const a = lowerBound(ts, start, n, n + cnt);
      const b = lowerBound(ts, end, a, n + cnt);
      if (a > n) {
        ts.copyWithin(n, a, b);
        val.copyWithin(n, a, b);
      }
      n += b - a;
    }
    for (const [k, v] of tail) {
      ts[n] = keyTs(k);
      val[n] = decodeValue(kind, v);
      n++;
    }
    if (kind === 'Number') return { kind, ts: ts.subarray(0, n), val: (val as Float64Array).subarray(0, n) };
    (val as unknown[]).length = n;
    return kind === 'Bool' ? { kind, ts: ts.subarray(0, n), val: val as boolean[] } : { kind, ts: ts.subarray(0, n), val: val as string[] };
  }

  /** The oldest sample, or undefined when the point has no history. */
  async first(pointId: string): Promise<HisSample | undefined> {
    this.checkStarted();
    checkId(pointId);
    await this.dropped(pointId);
    const keys = new PointKeys(pointId);
    return this.withSnapshot(async (snapshot) => {
      const meta = await this.snapshotMeta(keys, snapshot);
      if (meta === undefined) return undefined;
      const kind = meta.kind;
      const [c] = await this.his.values({ gte: keys.chunk(-Infinity), lt: keys.chunk(Infinity), limit: 1, snapshot }).all();
      if (c !== undefined) {
        const d = decodeWhole(kind, c);
        return { ts: d.ts[0] as number, val: d.val[0] as HisValue };
      }
      const [t] = await this.his.iterator({ gte: keys.tail(meta.sealedEnd), lt: keys.tail(Infinity), limit: 1, snapshot }).all();
      return t === undefined ? undefined : { ts: keyTs(t[0]), val: decodeValue(kind, t[1]) };
    });
  }

  /** The newest sample, or undefined when the point has no history. */
  async last(pointId: string): Promise<HisSample | undefined> {
    this.checkStarted();
    checkId(pointId);
    await this.dropped(pointId);
    const keys = new PointKeys(pointId);
    return this.withSnapshot(async (snapshot) => {
      const meta = await this.snapshotMeta(keys, snapshot);
      if (meta === undefined) return undefined;
      const kind = meta.kind;
      const [t] = await this.his.iterator({ gte: keys.tail(meta.sealedEnd), lt: keys.tail(Infinity), reverse: true, limit: 1, snapshot }).all();
      if (t !== undefined) return { ts: keyTs(t[0]), val: decodeValue(kind, t[1]) };
      const [c] = await this.his.values({ gte: keys.chunk(-Infinity), lt: keys.chunk(Infinity), reverse: true, limit: 1, snapshot }).all();
      if (c === undefined) return undefined;
      const d = decodeWhole(kind, c);
      return { ts: d.ts[d.n - 1] as number, val: d.val[d.n - 1] as HisValue };
    });
  }

  /**
   * The root database's key ranges [from, to) that hold the point's samples in [start, end), as
   * raw keys (sublevel prefix included): for LevelDB's compactRange once retention removed them
   * (store/retention.ts), so the space is actually given back.
   */
  keyRanges(pointId: string, start = -Infinity, end = Infinity): [Uint8Array, Uint8Array][] {
    const keys = new PointKeys(pointId);
    const prefix = utf8Enc.encode(this.his.prefix);
    const raw = (k: Uint8Array): Uint8Array => {
      const out = new Uint8Array(prefix.length + k.length);
      out.set(prefix, 0);
      out.set(k, prefix.length);
      return out;
    };
    return [T_CHUNK, T_TAIL].map((t) => [raw(keys.at(t, start)), raw(keys.at(t, end))]);
  }
}


function checkRange(start: number, end: number): void {
  if (typeof start !== 'number' || typeof end !== 'number' || Number.isNaN(start) || Number.isNaN(end)) {
    throw new HayloftError(ErrorCodes.BAD_RANGE, `history range bounds must be numbers of epoch milliseconds, not ${String(start)} and ${String(end)}`);
  }
}
