/**
 * The history store: each point's samples (epoch ms + one value of the point's kind) in the
 * `his` sublevel, binary keys and values.
 *
 * Keys (the id is UTF-8; Haystack ids never contain NUL, so NUL ends it):
 *
 *   'M' id                  point metadata: kind, number (ref), sealed size, first and last ts, seal edge
 *   'C' id 0x00 ts(8)       a sealed chunk (his-codec.ts) keyed by its first timestamp
 *   'J' seq(8)              a journal entry (his-journal.ts): new tail samples of many points
 *   'R'                     the next point number (refs are never reused)
 *   'T' id 0x00 ts(8)       format 1 only: one tail sample per entry (converted at start)
 *
 * ts(8) is the float64 of the timestamp, big-endian, with the sign bit flipped (all bits for
 * negatives), so byte order is numeric order and ±Infinity bound every range; seq(8) is a
 * big-endian integer.
 *
 * Invariants: chunks never overlap; every chunk sample is <= `sealedEnd` < every tail sample. The
 * open tail of each point (samples past its seal edge) lives in memory (his-tail.ts) and is made
 * durable by journal entries: one LevelDB entry per flush carries the new samples of every point,
 * a few bytes each. A tail is sealed into chunks (and the journal entries only it still needed are
 * deleted) when it reaches its threshold (about `chunkSize`, jittered per point so that points
 * started together never seal together), when its oldest journaled sample is `journalAge` old,
 * or, largest first, when all tails together pass `tailBudget` samples (memory stays bounded).
 * Seals are done by the flush, a bounded number per round: there is no seal storm.
 *
 * Two ways in: polled samples (`flush: 'later'`) are applied to the tail at once (reads see them)
 * and written by the next flush, every `flushInterval` ms, one synced batch for everything: that
 * interval is what a power cut can lose of them (docs/configuration.md). hisWrite (`flush:
 * 'now'`, the default) is acknowledged only once its own synced batch is written. Samples at or
 * before the seal edge are merged into the chunks whose spans they fall in (re-encoded; split in
 * even pieces past twice the chunk size); a write that brings a tail to the chunk size seals all
 * of it in its own batch. Deletes may leave the seal edge above the last chunk: it is an upper
 * bound, which is all the invariants need.
 *
 * Every batch is all or nothing. A flush that fails drops what was pending (the tails are cut
 * back to what is durable; counted as refused samples). Writes to one point are serialised by a
 * per-point lock (read-modify-write of chunks, the tail); a flush seals only points no one holds.
 * Reads need no lock: they read chunks from one explicit snapshot, and the tail samples past the
 * seal edge that snapshot records, copied in the same tick.
 *
 * Metadata of every point is held in memory (loaded by start(), with the journal replayed into
 * the tails), so stats() is synchronous and a poll-cycle append needs no read at all.
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
import { decodeJournal, encodeJournal, type JournalPart } from './his-journal.js';
import { Tail } from './his-tail.js';
import {
  chunkCount,
  chunkFirst,
  chunkLast,
  decodeChunk,
  decodeValue,
  encodeChunk,
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

/** Polled samples of one point (HistoryStore.writePolled): plain arrays, kept by nobody after the call but the event's listeners. */
export interface PolledWrite {
  readonly pointId: string;
  readonly kind: HisKind;
  readonly ts: number[];
  readonly val: HisValue[];
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
  /** Ms between flushes of polled samples (`flush: 'later'`); 0 writes each such call at once. Default 5000. */
  flushInterval?: number;
  /** Samples all open tails may hold before the biggest are sealed early (memory). Default 1,000,000. */
  tailBudget?: number;
  /** Ms after which a tail's oldest journaled sample gets it sealed (keeps the journal short). Default 30 min. */
  journalAge?: number;
  /** Monotonic ms (for ages; tests pass their own). */
  monotonic?: () => number;
  /** Told when a background flush fails (what was pending is dropped and counted). */
  onFlushError?: (err: unknown, dropped: number) => void;
}

export interface WriteOptions {
  /**
   * 'now' (default): resolves once the samples are durable (hisWrite). 'later': polled samples,
   * readable at once and made durable by the next flush (`flushInterval`); resolves when applied.
   */
  flush?: 'now' | 'later';
}

export const DEFAULT_CHUNK_SIZE = 1024;
export const DEFAULT_FLUSH_INTERVAL = 5000;
export const DEFAULT_TAIL_BUDGET = 1_000_000;
export const DEFAULT_JOURNAL_AGE = 30 * 60_000;
/** Samples one flush seals at most (the rest wait for the next round): bounds a round's batch and pause. */
const MAX_SEAL_SAMPLES_PER_ROUND = 100_000;
/** The longest a flush round encodes chunks before it lets the event loop run (ms). */
const SLICE_MS = 8;




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
const T_JOURNAL = 0x4a; // 'J'
const T_TAIL_V1 = 0x54; // 'T'
const REF_KEY = Uint8Array.of(0x52); // 'R'

const utf8Enc = new TextEncoder();
const utf8Dec = new TextDecoder();

/** A point's sealed history (what its 'M' entry says); its open tail is a Tail beside it. */
interface Meta {
  kind: HisKind;
  /** The point's number in journal entries. */
  ref: number;
  /** Samples in chunks. */
  size: number;
  /** First and last chunk timestamps (Infinity / -Infinity when no chunk). */
  start: number;
  end: number;
  /** Upper bound of chunk timestamps; tail timestamps are all above it. */
  sealedEnd: number;
  /** False until a batch has written this entry (a point created by a write not yet flushed). */
  persisted: boolean;
  /**
   * In memory only: the last chunk's first timestamp (its key) and sample count, as the last
   * seal wrote them (NaN: not known). A seal that fills a partial last chunk reads it by its key
   * (checked against `end`) instead of searching every level backwards for it, and does not read
   * it at all when it is full enough (each read maps pages of the table holding the chunk).
   */
  lastFirst: number;
  lastCount: number;
}

const KIND_CODE: Record<HisKind, number> = { Number: 1, Bool: 2, Str: 3 };
const CODE_KIND: (HisKind | undefined)[] = [undefined, 'Number', 'Bool', 'Str'];
const META_VERSION = 2;
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
  dv.setFloat64(34, m.ref);
  return b;
}

/** Format 1 metadata: the same fields, with the count of 'T' entries where the ref now is. */
interface MetaV1 {
  v1: true;
  kind: HisKind;
  size: number;
  start: number;
  end: number;
  sealedEnd: number;
  tailCount: number;
}

function decodeMeta(b: Uint8Array, id: string): Meta | MetaV1 {
  const kind = CODE_KIND[b[1] ?? 0];
  if (b.length !== META_BYTES || (b[0] !== META_VERSION && b[0] !== 1) || kind === undefined) {
    throw new HayloftError(ErrorCodes.STORE_UNAVAILABLE, `the history metadata of point ${id} in the data folder is corrupt`);
  }
  const dv = new DataView(b.buffer, b.byteOffset, b.length);
  const common = { kind, size: dv.getFloat64(2), start: dv.getFloat64(10), end: dv.getFloat64(18), sealedEnd: dv.getFloat64(26) };
  if (b[0] === 1) return { v1: true, ...common, tailCount: dv.getFloat64(34) };
  return { ...common, ref: dv.getFloat64(34), persisted: true, lastFirst: Number.NaN, lastCount: 0 };
}

function journalKey(seq: number): Uint8Array {
  const k = new Uint8Array(9);
  k[0] = T_JOURNAL;
  new DataView(k.buffer).setBigUint64(1, BigInt(seq));
  return k;
}

function journalSeq(k: Uint8Array): number {
  return Number(new DataView(k.buffer, k.byteOffset, k.length).getBigUint64(1));
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

  tailV1(ts: number): Uint8Array {
    return this.at(T_TAIL_V1, ts);
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

/**
 * True when polled columns may be appended as they are: timestamps integer epoch ms in strictly
 * ascending order, values of the kind's type. Anything else goes through prepare(), which sorts
 * or refuses it.
 */
function polledCols(w: PolledWrite): boolean {
  const type = VAL_TYPE[w.kind];
  let prev = -Infinity;
  for (let i = 0; i < w.ts.length; i++) {
    const t = w.ts[i] as number;
    if (!(t > prev) || !Number.isSafeInteger(t) || typeof w.val[i] !== type) return false;
    prev = t;
  }
  return true;
}

const NO_WRITES: readonly PolledWrite[] = [];

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

/** Copies samples [0, n) of columns into `ts` and `val` from index `at`. */
function copyInto(ts: Float64Array, val: Float64Array | HisValue[], at: number, fromTs: Float64Array, fromVal: ArrayLike<HisValue>, n: number): void {
  ts.set(fromTs.subarray(0, n), at);
  if (val instanceof Float64Array && fromVal instanceof Float64Array) val.set(fromVal.subarray(0, n), at);
  else for (let i = 0; i < n; i++) val[at + i] = fromVal[i] as HisValue;
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
 * Bytes a write will take on disk, roughly and generously: a journal part or chunk is a few bytes
 * a sample, counted here as a small entry per sample in LevelDB's log and once more when its
 * memtable is written out. Only counted against the last reading of the
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

  /** True while someone holds or waits for the key. */
  busy(key: string): boolean {
    return this.tails.has(key);
  }
}

const EMPTY_TS = new Float64Array(0);

// ---------------------------------------------------------------------------------------------

/** A write's plan for one point, applied to memory once its batch is written. */
interface PointPlan {
  id: string;
  kind: HisKind;
  cols: Cols;
  meta: Meta;
  /** Samples new to the point (not replacing one), for the tail part known only when applied. */
  added: number;
  /** What happens to the tail: nothing, samples merged in, or all of it sealed (`count` samples). */
  tail: { op: 'none' } | { op: 'merge'; from: number; to: number } | { op: 'sealed'; count: number };
}

/**
 * Journal entries a batch stops needing (the tails it seals held them): counted against the
 * journal's counts before the batch is written, applied once it is. An entry two batches in
 * flight each half-release is deleted by the next flush (`orphans`).
 */
class Releases {
  private readonly dec = new Map<number, number>();
  readonly freed = new Set<number>();
  constructor(private readonly journal: Map<number, number>) {}

  add(seqs: Iterable<number>): void {
    for (const s of seqs) {
      const d = (this.dec.get(s) ?? 0) + 1;
      this.dec.set(s, d);
      if ((this.journal.get(s) ?? 0) - d <= 0) this.freed.add(s);
    }
  }

  /** Applies the counts; returns entries no one needs that this batch did not delete. */
  apply(): number[] {
    const orphans: number[] = [];
    for (const [s, d] of this.dec) {
      if (!this.journal.has(s)) continue;
      const left = (this.journal.get(s) ?? 0) - d;
      if (left > 0) this.journal.set(s, left);
      else {
        this.journal.delete(s);
        if (!this.freed.has(s)) orphans.push(s);
      }
    }
    return orphans;
  }
}

/** What a flush round decided, applied when its batch is written. */
interface Round {
  /** Tails journaled: the tail, its epoch and how many samples it had (all durable once written). */
  journaled: Map<string, { t: Tail; epoch: number; n: number }>;
  /** Tails sealed: how many samples went into chunks, and the point's new metadata. */
  sealed: Map<string, { count: number; meta: Meta }>;
  seq: number;
  releases: Releases;
  /** Metadata written for points created since the last flush. */
  created: Set<string>;
}

export class HistoryStore implements Part {
  readonly name = 'history';
  private readonly store: Store;
  private readonly chunkSize: number;
  private readonly space: HistoryOptions['space'];
  private readonly flushInterval: number;
  private readonly tailBudget: number;
  private readonly journalAge: number;
  private readonly monotonic: () => number;
  private readonly onFlushError: HistoryOptions['onFlushError'];
  /** Every point's sealed state (the 'M' entries, and points created by a write not yet flushed). */
  private readonly metas = new Map<string, Meta>();
  /** Every point's open tail (samples past its seal edge), when it has one. */
  private readonly tails = new Map<string, Tail>();
  /** Points whose tail has samples not yet in a journal entry. */
  private readonly dirty = new Set<string>();
  /** Journal entries by seq, with how many tails still need each. */
  private readonly journal = new Map<number, number>();
  /** Journal entries no tail needs that are still on disk (deleted by the next flush). */
  private orphans: number[] = [];
  private nextSeq = 1;
  private nextRef = 1;
  /** The 'R' value on disk. */
  private storedRef = 1;
  /** Samples in all tails together. */
  private tailSamples = 0;
  private readonly lock = new KeyedLock();
  /**
   * deleteAll calls not yet committed, by point. From the call on, the point has no history for
   * every caller: stats() shows none, reads wait for the delete, and writes queue behind it on
   * the point's lock. (A deleted point's history is dropped after deleteRec answers; the point
   * may be recreated with the same id before that commit lands.)
   */
  private readonly dropping = new Map<string, Promise<unknown>>();
  private state: 'new' | 'started' | 'stopped' = 'new';
  private timer: NodeJS.Timeout | undefined;
  /** The flush round running, and the one waiting to start after it (shared by its callers). */
  private running: Promise<void> | null = null;
  private queued: Promise<void> | null = null;
  /** Samples committed since start, for metrics (a sample rewritten counts again). */
  samplesWritten = 0;
  /** Samples refused since start: below the free-space floor, or because the store failed to write. */
  readonly samplesRefused = { floor: 0, error: 0 };
  /** Counters for metrics: synced batches written, flush rounds, tails sealed. */
  readonly counts = { syncs: 0, flushes: 0, flushFailures: 0, seals: 0, lastFlushMs: 0 };
  /** Where writes are told (store/events.ts): 'his.plan' in each write's batch, 'his.written' after. */
  readonly events: EventBus<StoreEvents>;

  constructor(store: Store, options: HistoryOptions = {}) {
    this.store = store;
    this.space = options.space;
    const cs = options.chunkSize ?? DEFAULT_CHUNK_SIZE;
    if (!Number.isInteger(cs) || cs < 2 || cs > 1 << 20) throw new RangeError(`chunkSize must be an integer in 2..${1 << 20}`);
    this.chunkSize = cs;
    this.flushInterval = options.flushInterval ?? DEFAULT_FLUSH_INTERVAL;
    this.tailBudget = options.tailBudget ?? DEFAULT_TAIL_BUDGET;
    this.journalAge = options.journalAge ?? DEFAULT_JOURNAL_AGE;
    this.monotonic = options.monotonic ?? (() => performance.now());
    this.onFlushError = options.onFlushError;
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
    metrics.counter('hayloft_history_samples_written_total', 'History samples made durable since start (hisWrite and collection)', () => this.samplesWritten);
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
    metrics.gauge('hayloft_history_tail_samples', 'Samples in open tails (memory), not yet sealed into chunks', [], () => this.tailSamples);
    metrics.gauge('hayloft_history_pending_points', 'Points with polled samples waiting for the next flush', [], () => this.dirty.size);
    metrics.gauge('hayloft_history_journal_entries', 'Journal entries on disk that open tails still need', [], () => this.journal.size);
    metrics.counter('hayloft_history_syncs_total', 'Synced history batches (one fsync each) since start', () => this.counts.syncs);
    metrics.counter('hayloft_history_flushes_total', 'Flush rounds of polled samples since start', () => this.counts.flushes);
    metrics.counter('hayloft_history_flush_failures_total', 'Flush rounds that failed (their pending samples dropped) since start', () => this.counts.flushFailures);
    metrics.counter('hayloft_history_seals_total', 'Tails sealed into chunks since start', () => this.counts.seals);
    metrics.gauge('hayloft_history_last_flush_seconds', 'How long the last flush round took', [], () => this.counts.lastFlushMs / 1000);
  }

  /** Loads every point's metadata and replays the journal into the tails; starts the flush timer. */
  async start(): Promise<void> {
    if (this.state === 'started') return;
    await this.load();
    this.state = 'started';
    if (this.flushInterval > 0) {
      this.timer = setInterval(() => {
        if (this.dirty.size > 0 || this.sealsDue()) this.flushInBackground();
      }, this.flushInterval);
      this.timer.unref();
    }
  }

  /**
   * Reads every point's metadata and tail again, after the store reopened (store/recovery.ts):
   * what is on disk, not what memory last believed. Runs before writes are let through.
   */
  async reload(): Promise<void> {
    if (this.state === 'started') await this.load();
  }

  private async load(): Promise<void> {
    try {
      await this.convertV1();
      const metas = new Map<string, Meta>();
      const refs = new Map<number, string>();
      let maxRef = 0;
      for await (const [k, v] of this.his.iterator({ gte: Uint8Array.of(T_META), lt: Uint8Array.of(T_META + 1) })) {
        const id = utf8Dec.decode(k.subarray(1));
        const m = decodeMeta(v, id);
        if ('v1' in m) throw new HayloftError(ErrorCodes.STORE_UNAVAILABLE, `the history metadata of point ${id} is still in format 1`);
        metas.set(id, m);
        refs.set(m.ref, id);
        maxRef = Math.max(maxRef, m.ref);
      }
      const r = await this.his.get(REF_KEY);
      const stored = r === undefined || r.length !== 8 ? 1 : new DataView(r.buffer, r.byteOffset, 8).getFloat64(0);
      this.metas.clear();
      for (const [id, m] of metas) this.metas.set(id, m);
      this.nextRef = Math.max(stored, maxRef + 1);
      this.storedRef = stored;
      // The journal, oldest first, into the tails: what a tail holds past its seal edge. Polled
      // samples not yet flushed (a reload after a failed write) are dropped, and counted.
      for (const t of this.tails.values()) this.samplesRefused.error += t.n - t.durable;
      this.tails.clear();
      this.dirty.clear();
      this.journal.clear();
      this.tailSamples = 0;
      let maxSeq = 0;
      const dead: number[] = [];
      const now = this.monotonic();
      for await (const [k, v] of this.his.iterator({ gte: Uint8Array.of(T_JOURNAL), lt: Uint8Array.of(T_JOURNAL + 1) })) {
        const seq = journalSeq(k);
        maxSeq = Math.max(maxSeq, seq);
        let used = 0;
        decodeJournal(v, (ref, kind, ts, val) => {
          const id = refs.get(ref);
          const m = id === undefined ? undefined : metas.get(id);
          if (id === undefined || m === undefined || m.kind !== kind) return;
          const from = lowerBound(ts, m.sealedEnd, 0, ts.length, true);
          if (from >= ts.length) return;
          const t = this.tailOf(id, kind);
          this.tailSamples += t.merge(ts, val, from, ts.length);
          t.durable = t.n;
          if (t.seqs.last !== seq) {
            t.seqs.push(seq);
            used++;
          }
          if (Number.isNaN(t.since)) t.since = now;
        });
        if (used > 0) this.journal.set(seq, used);
        else dead.push(seq);
      }
      this.nextSeq = maxSeq + 1;
      if (dead.length > 0) {
        const batch = this.store.db.batch();
        for (const seq of dead) batch.del(journalKey(seq), { sublevel: this.his });
        await batch.write();
      }
    } catch (e) {
      throw wrapStoreError(e, 'cannot load history metadata');
    }
  }

  /** Format 1 kept each tail sample as its own entry: those become chunks, the metadata format 2. */
  private async convertV1(): Promise<void> {
    const old: [string, MetaV1][] = [];
    for await (const [k, v] of this.his.iterator({ gte: Uint8Array.of(T_META), lt: Uint8Array.of(T_META + 1) })) {
      const id = utf8Dec.decode(k.subarray(1));
      const m = decodeMeta(v, id);
      if ('v1' in m) old.push([id, m]);
    }
    if (old.length === 0) return;
    let ref = 1;
    for await (const [k, v] of this.his.iterator({ gte: Uint8Array.of(T_META), lt: Uint8Array.of(T_META + 1) })) {
      const m = decodeMeta(v, utf8Dec.decode(k.subarray(1)));
      if (!('v1' in m)) ref = Math.max(ref, m.ref + 1);
    }
    for (const [id, v1] of old) {
      const keys = new PointKeys(id);
      const batch = this.store.db.batch();
      const m: Meta = { kind: v1.kind, ref: ref++, size: v1.size, start: v1.start, end: v1.end, sealedEnd: v1.sealedEnd, persisted: true, lastFirst: Number.NaN, lastCount: 0 };
      if (v1.tailCount > 0) {
        const ts: number[] = [];
        const val: HisValue[] = [];
        for await (const [k, v] of this.his.iterator({ gte: keys.tailV1(v1.sealedEnd), lt: keys.tailV1(Infinity) })) {
          ts.push(keyTs(k));
          val.push(decodeValue(v1.kind, v));
          batch.del(k, { sublevel: this.his });
        }
        if (ts.length > 0) {
          for (let a = 0; a < ts.length; a += this.chunkSize) {
            batch.put(keys.chunk(ts[a] as number), encodeChunk(v1.kind, ts, val, a, Math.min(a + this.chunkSize, ts.length)), { sublevel: this.his });
          }
          m.sealedEnd = ts[ts.length - 1] as number;
        }
      }
      batch.put(keys.meta, encodeMeta(m), { sublevel: this.his });
      batch.put(REF_KEY, refBytes(ref), { sublevel: this.his });
      await batch.write({ sync: true } as object);
    }
  }

  /** Writes what is pending, then refuses new writes. Does not close the Store. */
  async stop(): Promise<void> {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
    if (this.state !== 'started') {
      this.state = 'stopped';
      return;
    }
    await this.lock.idle();
    try {
      await this.flush();
    } catch {
      // Counted and told by the round (onFlushError); stopping goes on.
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
    const t = this.tails.get(pointId);
    const size = (m?.size ?? 0) + (t?.n ?? 0);
    if (m === undefined || size === 0) return { kind: undefined, size: 0, start: undefined, end: undefined };
    return { kind: m.kind, size, start: Math.min(m.start, t?.first ?? Infinity), end: Math.max(m.end, t?.last ?? -Infinity) };
  }

  /**
   * The kind of the point's history as writes check it (a point whose samples are all deleted
   * keeps its kind until its history is deleted); undefined when it has none. No allocation: the
   * collector asks it per point per poll cycle.
   */
  kindOf(pointId: string): HisKind | undefined {
    return this.dropping.has(pointId) ? undefined : this.metas.get(pointId)?.kind;
  }

  /** Ids of every point that has history. */
  points(): string[] {
    const out: string[] = [];
    for (const [id, m] of this.metas) if (m.size > 0 || (this.tails.get(id)?.n ?? 0) > 0) out.push(id);
    return out;
  }

  private tailOf(id: string, kind: HisKind): Tail {
    let t = this.tails.get(id);
    if (t === undefined) {
      // Jittered between half and all of the chunk size: points that start together seal apart.
      const threshold = this.chunkSize - Math.floor(Math.random() * (this.chunkSize / 2));
      t = new Tail(kind, threshold);
      this.tails.set(id, t);
    }
    return t;
  }

  /** The point's sealed state, or a new one (not yet on disk) with the next ref. */
  private metaFor(id: string, kind: HisKind): Meta {
    const old = this.metas.get(id);
    if (old !== undefined) {
      if (old.kind !== kind) throw new HayloftError(ErrorCodes.HIS_KIND, `point ${id} has ${old.kind} history; cannot write ${kind} samples (delete its history first)`);
      return old;
    }
    return { kind, ref: this.nextRef++, size: 0, start: Infinity, end: -Infinity, sealedEnd: -Infinity, persisted: false, lastFirst: Number.NaN, lastCount: 0 };
  }

  /** The last timestamp the point holds, sealed or not. */
  private endOf(id: string): number {
    return Math.max(this.metas.get(id)?.end ?? -Infinity, this.tails.get(id)?.last ?? -Infinity);
  }

  // -------------------------------------------------------------------------------------------
  // Writes

  /** Writes samples of one point (any order; the last sample of a timestamp wins). */
  async write(pointId: string, kind: HisKind, samples: readonly HisSample[], options?: WriteOptions): Promise<void> {
    await this.writeMany([{ pointId, kind, samples }], options);
  }

  /**
   * Writes samples of several points: all of them land or none does. Each write gives its
   * samples as objects (HisWrite) or as two columns (HisColumnsWrite). See WriteOptions.
   */
  async writeMany(writes: readonly (HisWrite | HisColumnsWrite)[], options: WriteOptions = {}): Promise<void> {
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
      const stored = this.dropping.has(p.id) ? undefined : this.metas.get(p.id);
      if (stored !== undefined && stored.kind !== p.kind) {
        throw new HayloftError(ErrorCodes.HIS_KIND, `point ${p.id} has ${stored.kind} history; cannot write ${p.kind} samples (delete its history first)`);
      }
    }
    try {
      this.space?.checkHistory();
    } catch (e) {
      this.samplesRefused.floor += samples;
      throw e;
    }
    if (options.flush === 'later') {
      await this.writeLater(prepared);
      if (this.flushInterval === 0 || this.tailSamples > 2 * this.tailBudget) await this.flush();
      return;
    }
    await this.lock.run(
      prepared.map((p) => p.id),
      () => this.writeLocked(prepared, samples, bytes),
    );
  }

  /**
   * Polled samples, from the history collector: each point's columns in ascending time order,
   * values of its kind (what the collector offers); a point may come twice, in time order (its
   * collection changed while a batch gathered, or samples held for the clock). Written as
   * writeMany(..., { flush: 'later' }) writes them, all or nothing; the samples of a point whose
   * stored history is of another kind are not written but returned, for the caller to say so.
   *
   * Why a path of its own: at 10,000 points a second this is the store's hottest call, and
   * nearly every sample simply goes after its point's end. Such a sample is appended to its tail
   * here with one lookup of the point's state and of its tail, without the general path's
   * grouping, copies and checks per point; anything else (unsorted columns, samples at or before
   * the point's end after a clock step, a point someone holds or drops, a value of the wrong
   * type) goes the general way.
   */
  async writePolled(writes: readonly PolledWrite[]): Promise<readonly PolledWrite[]> {
    this.checkStarted();
    // Bad samples refuse the whole call before anything is appended, as in writeMany.
    let unsorted: Set<PolledWrite> | undefined;
    for (const w of writes) {
      if (polledCols(w)) continue;
      prepare(w.pointId, w.kind, w.ts, w.val); // throws when invalid, not only unsorted
      (unsorted ??= new Set()).add(w);
    }
    try {
      this.space?.checkHistory();
    } catch (e) {
      for (const w of writes) {
        const k = this.kindOf(w.pointId);
        if (k === undefined || k === w.kind) this.samplesRefused.floor += w.ts.length;
      }
      throw e;
    }
    let other: PolledWrite[] | undefined;
    let slow: PolledWrite[] | undefined;
    const fast = this.state === 'started' && this.dropping.size === 0;
    for (const w of writes) {
      const n = w.ts.length;
      if (n === 0) continue;
      const id = w.pointId;
      const m = this.metas.get(id);
      if (m !== undefined && m.kind !== w.kind) {
        if (this.dropping.size > 0 && this.dropping.has(id)) (slow ??= []).push(w);
        else (other ??= []).push(w);
        continue;
      }
      const t = this.tails.get(id);
      const first = w.ts[0] as number;
      if (!fast || first <= (t?.last ?? -Infinity) || (m !== undefined && (first <= m.end || first <= m.sealedEnd)) || this.lock.busy(id) || unsorted?.has(w) === true) {
        (slow ??= []).push(w);
        continue;
      }
      this.append(id, w.kind, w, m, t);
    }
    if (slow !== undefined) await this.writeMany(slow, { flush: 'later' });
    else if (this.flushInterval === 0 || this.tailSamples > 2 * this.tailBudget) await this.flush();
    return other ?? NO_WRITES;
  }

  /**
   * Polled samples: appended to their tails now (reads see them), written by the next flush.
   * What cannot simply be appended (a point someone holds, samples at or before its end) is
   * written like hisWrite, behind the point's lock.
   */
  private async writeLater(prepared: readonly { id: string; kind: HisKind; cols: Cols }[]): Promise<void> {
    const slow: Promise<void>[] = [];
    for (const p of prepared) {
      if (!this.lock.busy(p.id) && this.appendable(p.id, p.cols)) this.append(p.id, p.kind, p.cols);
      else {
        slow.push(
          this.lock.run([p.id], async () => {
            if (this.appendable(p.id, p.cols)) this.append(p.id, p.kind, p.cols);
            else await this.writeLocked([p], p.cols.ts.length, estimateBytes(p.id, p.cols));
          }),
        );
      }
    }
    if (slow.length > 0) await Promise.all(slow);
  }

  private appendable(id: string, cols: Cols): boolean {
    // Past the seal edge too: deletes may leave it above the last sample.
    const edge = Math.max(this.endOf(id), this.metas.get(id)?.sealedEnd ?? -Infinity);
    return this.state === 'started' && !this.dropping.has(id) && (cols.ts[0] as number) > edge;
  }

  /**
   * Appends samples past the point's end to its tail (the kind checked by the caller); `m` and
   * `t`, the point's state and tail, when the caller has looked them up already.
   */
  private append(id: string, kind: HisKind, cols: Cols, m = this.metas.get(id), t = this.tails.get(id)): void {
    if (m === undefined) this.metas.set(id, this.metaFor(id, kind));
    // A tail with pending samples is in `dirty` already (every path keeps durable < n => dirty).
    if (t === undefined || t.durable >= t.n) this.dirty.add(id);
    (t ?? this.tailOf(id, kind)).append(cols.ts, cols.val, 0, cols.ts.length);
    this.tailSamples += cols.ts.length;
    this.events.emit('his.written', id, kind, cols, true);
  }

  /** hisWrite's path (and polled samples that cannot be appended): one synced batch; the locks are held. */
  private async writeLocked(prepared: readonly { id: string; kind: HisKind; cols: Cols }[], samples: number, bytes: number): Promise<void> {
    const batch = this.store.db.batch();
    const plans: PointPlan[] = [];
    const parts: JournalPart[] = [];
    const releases = new Releases(this.journal);
    let seq = 0;
    try {
      for (const p of prepared) plans.push(await this.planWrite(batch, p.id, p.kind, p.cols, parts, releases));
      if (parts.length > 0) {
        seq = this.nextSeq++;
        batch.put(journalKey(seq), encodeJournal(parts), { sublevel: this.his });
      }
      for (const s of releases.freed) batch.del(journalKey(s), { sublevel: this.his });
      this.putRef(batch);
      if (this.events.has('his.plan')) {
        for (const p of prepared) this.events.emit('his.plan', p.id, p.cols.ts[0] as number, p.cols.ts[p.cols.ts.length - 1] as number, this.endOf(p.id), batch);
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
    this.orphans.push(...releases.apply());
    for (const plan of plans) {
      plan.meta.persisted = true;
      this.metas.set(plan.id, plan.meta);
      const op = plan.tail;
      if (op.op === 'sealed') {
        const t = this.tails.get(plan.id);
        if (t !== undefined) this.dropTail(plan.id, t, op.count);
      } else if (op.op === 'merge') {
        const t = this.tailOf(plan.id, plan.kind);
        const added = t.merge(plan.cols.ts, plan.cols.val, op.from, op.to);
        plan.added += added;
        this.tailSamples += added;
        // Everything the tail holds is in this entry or an earlier one now.
        t.durable = t.n;
        this.dirty.delete(plan.id);
        t.seqs.push(seq);
        this.journal.set(seq, (this.journal.get(seq) ?? 0) + 1);
        if (Number.isNaN(t.since)) t.since = this.monotonic();
      }
      this.samplesWritten += plan.cols.ts.length;
      this.events.emit('his.written', plan.id, plan.kind, plan.cols, false);
    }
  }

  /** Adds one point's puts to `batch` (and its tail samples to `parts`); returns its plan. */
  private async planWrite(batch: HisBatch, id: string, kind: HisKind, cols: Cols, parts: JournalPart[], releases: Releases): Promise<PointPlan> {
    const m: Meta = { ...this.metaFor(id, kind) };
    const keys = new PointKeys(id);
    const n = cols.ts.length;
    const split = lowerBound(cols.ts, m.sealedEnd, 0, n, true);
    let added = 0;
    let sealedChange = !m.persisted;
    if (split > 0) {
      const a = await this.mergeIntoChunks(batch, keys, kind, cols, 0, split);
      m.lastFirst = Number.NaN;
      added += a;
      m.size += a;
      m.start = Math.min(m.start, cols.ts[0] as number);
      m.end = Math.max(m.end, cols.ts[split - 1] as number);
      sealedChange = true;
    }
    let tail: PointPlan['tail'] = { op: 'none' };
    if (split < n) {
      const t = this.tails.get(id);
      const tn = t?.n ?? 0;
      if (tn + (n - split) >= this.chunkSize) {
        // Sealing all of it, not just whole chunks: a batch of 10,000 samples then writes ten
        // chunks, and nothing of it waits in the tail.
        const sealedNow = await this.sealInto(batch, keys, m, t, cols, split, n, split === 0);
        added += sealedNow.added;
        if (t !== undefined) releases.add(t.seqs);
        tail = { op: 'sealed', count: tn };
        sealedChange = true;
      } else {
        // Into the journal: what the tail has pending first, then these (they win on equal times).
        if (t !== undefined && t.durable < t.n) parts.push({ ref: m.ref, kind, ts: t.ts, val: t.val, from: t.durable, to: t.n });
        parts.push({ ref: m.ref, kind, ts: cols.ts, val: cols.val, from: split, to: n });
        tail = { op: 'merge', from: split, to: n };
      }
    }
    if (sealedChange) batch.put(keys.meta, encodeMeta(m), { sublevel: this.his });
    return { id, kind, cols, meta: m, added, tail };
  }

  /**
   * Puts the tail (all of it) and samples [from, to) of `cols` as chunks of `chunkSize`, the last
   * one partial; reopens a partial last chunk first when `reopen` (so chunks stay full). Updates
   * `m` (size, span, seal edge). Returns how many samples were new to the point.
   */
  private async sealInto(batch: HisBatch, keys: PointKeys, m: Meta, t: Tail | undefined, cols: Cols | null, from: number, to: number, reopen: boolean): Promise<{ added: number }> {
    const kind = m.kind;
    let open: { ts: Float64Array; val: Float64Array | boolean[] | string[]; n: number } | undefined;
    if (reopen && m.size > 0) {
      const tn = (t?.n ?? 0) + (to - from);
      // Only a partial chunk, and one small enough that rewriting it costs little.
      const limit = tn < this.chunkSize / 4 ? this.chunkSize / 2 : this.chunkSize;
      const last = !Number.isNaN(m.lastFirst) && m.lastCount >= limit ? undefined : await this.lastChunk(keys, m);
      if (last !== undefined && chunkCount(last) < limit) open = decodeWhole(kind, last);
    }
    // The reopened chunk, then the tail (all after it), in columns of their size.
    const reopened = open?.n ?? 0;
    const tn = t?.n ?? 0;
    const oldTs = new Float64Array(reopened + tn);
    const oldVal = newValueColumn(kind, reopened + tn);
    if (open !== undefined) copyInto(oldTs, oldVal, 0, open.ts, open.val, reopened);
    if (t !== undefined) copyInto(oldTs, oldVal, reopened, t.ts, t.val, tn);
    const all = cols === null ? { ts: oldTs, val: oldVal } : merge(oldTs, oldVal, oldTs.length, cols.ts, cols.val, from, to);
    const total = all.ts.length;
    // A reopened chunk keeps its key (its first sample is still the first): the put replaces it.
    for (let a = 0; a < total; a += this.chunkSize) {
      batch.put(keys.chunk(all.ts[a] as number), encodeChunk(kind, all.ts, all.val, a, Math.min(a + this.chunkSize, total)), { sublevel: this.his });
    }
    const lastA = Math.floor((total - 1) / this.chunkSize) * this.chunkSize;
    m.lastFirst = all.ts[lastA] as number;
    m.lastCount = total - lastA;
    m.size += total - reopened;
    m.start = Math.min(m.start, all.ts[0] as number);
    m.end = Math.max(m.end, all.ts[total - 1] as number);
    m.sealedEnd = Math.max(m.sealedEnd, all.ts[total - 1] as number);
    return { added: total - oldTs.length };
  }

  /** The point's last chunk: by its key when the metadata knows it (and it still ends at `end`), else the last by a backward search. */
  private async lastChunk(keys: PointKeys, m: Meta): Promise<Uint8Array | undefined> {
    if (!Number.isNaN(m.lastFirst)) {
      const c = await this.his.get(keys.chunk(m.lastFirst));
      if (c !== undefined && chunkLast(c) === m.end) return c;
    }
    const [last] = await this.his.values({ gte: keys.chunk(-Infinity), lt: keys.chunk(Infinity), reverse: true, limit: 1 }).all();
    return last;
  }

  /** Removes the first `count` samples of a sealed tail (its journal entries were released by the caller's batch). */
  private dropTail(id: string, t: Tail, count: number): void {
    t.seqs.clear();
    t.since = Number.NaN;
    // Sealed once: its next seal comes at the full chunk size (the jitter only spreads the first).
    t.threshold = this.chunkSize;
    t.shift(count);
    this.tailSamples -= count;
    if (t.n === 0) {
      this.tails.delete(id);
      this.dirty.delete(id);
    } else if (t.durable < t.n) this.dirty.add(id);
  }

  private putRef(batch: HisBatch): void {
    if (this.nextRef !== this.storedRef) batch.put(REF_KEY, refBytes(this.nextRef), { sublevel: this.his });
  }

  private async commit(batch: HisBatch, what: string): Promise<void> {
    const ref = this.nextRef;
    try {
      // `sync` is a classic-level option missing from abstract-level's types.
      await batch.write({ sync: true } as object);
      this.counts.syncs++;
    } catch (e) {
      throw wrapStoreError(e, what);
    }
    this.storedRef = Math.max(this.storedRef, ref);
  }

  // -------------------------------------------------------------------------------------------
  // Flushing and sealing

  /** Makes every sample written so far durable (polled ones included), sealing what is due. */
  async flush(): Promise<void> {
    if (this.queued !== null) return this.queued;
    const prev = this.running ?? Promise.resolve();
    const self: { p: Promise<void> | null } = { p: null };
    const next = (async () => {
      // Always after a tick, so `self.p` is set before it is read.
      await prev.catch(() => undefined);
      this.queued = null;
      this.running = self.p;
      try {
        await this.round();
      } finally {
        if (this.running === self.p) this.running = null;
      }
    })();
    self.p = next;
    this.queued = next;
    return next;
  }

  private flushInBackground(): void {
    this.flush().catch(() => undefined);
  }

  private sealsDue(): boolean {
    if (this.tailSamples > this.tailBudget) return true;
    const now = this.monotonic();
    for (const t of this.tails.values()) {
      if (t.n >= t.threshold || (t.durable > 0 && now - t.since >= this.journalAge)) return true;
    }
    return false;
  }

  /** Which tails this round seals: full ones, old ones, then the biggest while over the budget. */
  private chooseSeals(): string[] {
    const now = this.monotonic();
    const out: string[] = [];
    let samples = 0;
    const rest: [string, Tail][] = [];
    for (const [id, t] of this.tails) {
      if (t.n === 0 || this.lock.busy(id) || this.dropping.has(id)) continue;
      if (t.n >= t.threshold || (t.durable > 0 && now - t.since >= this.journalAge)) {
        if (samples + t.n > MAX_SEAL_SAMPLES_PER_ROUND && out.length > 0) continue;
        out.push(id);
        samples += t.n;
      } else rest.push([id, t]);
    }
    // Past 90 % of the budget, back to it: each round then seals about what the last one added
    // (a steady trickle of seals, biggest tails first), not a burst every few rounds.
    let over = this.tailSamples - samples - Math.floor(0.9 * this.tailBudget);
    if (over > 0) {
      rest.sort((a, b) => b[1].n - a[1].n);
      for (const [id, t] of rest) {
        if (over <= 0 || samples + t.n > MAX_SEAL_SAMPLES_PER_ROUND) break;
        out.push(id);
        samples += t.n;
        over -= t.n;
      }
    }
    return out;
  }

  /**
   * One flush round: a journal entry with every pending sample of the points not sealed now, the
   * chunks of the tails sealed now, the journal entries freed: one synced batch. On failure,
   * every pending sample is dropped (tails cut back to what is durable) and counted.
   */
  private async round(): Promise<void> {
    if (this.state === 'new') return;
    const started = this.monotonic();
    const sealIds = this.chooseSeals();
    await this.lock.run(sealIds, async () => {
      const sealing = new Set(sealIds);
      let batch: HisBatch;
      try {
        batch = this.store.db.batch();
      } catch (e) {
        this.failRound(e, sealing);
        throw wrapStoreError(e, 'cannot write collected history');
      }
      const round: Round = { journaled: new Map(), sealed: new Map(), seq: 0, releases: new Releases(this.journal), created: new Set() };
      const orphans = this.orphans;
      let pending = 0;
      try {
        const parts: JournalPart[] = [];
        for (const id of this.dirty) {
          const t = this.tails.get(id);
          const m = this.metas.get(id);
          if (t === undefined || m === undefined || sealing.has(id) || this.lock.busy(id) || t.durable >= t.n) continue;
          parts.push({ ref: m.ref, kind: m.kind, ts: t.ts, val: t.val, from: t.durable, to: t.n });
          round.journaled.set(id, { t, epoch: t.epoch, n: t.n });
          pending += t.n - t.durable;
          if (!m.persisted) {
            batch.put(new PointKeys(id).meta, encodeMeta(m), { sublevel: this.his });
            round.created.add(id);
          }
          if (this.events.has('his.plan')) this.events.emit('his.plan', id, t.ts[t.durable] as number, t.last, Math.max(m.end, t.durable > 0 ? (t.ts[t.durable - 1] as number) : -Infinity), batch);
        }
        if (parts.length > 0) {
          round.seq = this.nextSeq++;
          batch.put(journalKey(round.seq), encodeJournal(parts), { sublevel: this.his });
        }
        let slice = performance.now();
        for (const id of sealIds) {
          // Encoding hundreds of chunks takes tens of ms: let requests and polls in between.
          if (performance.now() - slice > SLICE_MS) {
            await new Promise<void>((resolve) => setImmediate(resolve));
            slice = performance.now();
          }
          const t = this.tails.get(id);
          const old = this.metas.get(id);
          if (t === undefined || old === undefined || t.n === 0) continue;
          const m = { ...old };
          const keys = new PointKeys(id);
          // A small tail (a slow point's, sealed for its age) fills the partial last chunk, read
          // back and rewritten. Any other is a chunk of its own: at 10,000 points the budget seals
          // tails of about 180 samples, and reading each point's last chunk back mapped every
          // table holding one into memory (in LevelDB's key order, soon every table).
          await this.sealInto(batch, keys, m, t, null, 0, 0, t.n < this.chunkSize / 16);
          batch.put(keys.meta, encodeMeta(m), { sublevel: this.his });
          round.sealed.set(id, { count: t.n, meta: m });
          pending += t.n - t.durable;
          if (this.events.has('his.plan') && t.durable < t.n) this.events.emit('his.plan', id, t.ts[t.durable] as number, t.last, Math.max(old.end, t.durable > 0 ? (t.ts[t.durable - 1] as number) : -Infinity), batch);
          round.releases.add(t.seqs);
        }
        for (const s of round.releases.freed) batch.del(journalKey(s), { sublevel: this.his });
        for (const s of orphans) batch.del(journalKey(s), { sublevel: this.his });
        this.putRef(batch);
      } catch (e) {
        await batch.close();
        this.failRound(e, sealing);
        throw wrapStoreError(e, 'cannot read history to seal');
      }
      if (round.journaled.size === 0 && round.sealed.size === 0 && orphans.length === 0) {
        await batch.close();
        return;
      }
      try {
        await this.commit(batch, 'cannot write collected history');
      } catch (e) {
        this.failRound(e, sealing);
        throw e;
      }
      this.orphans = this.orphans.filter((s) => !orphans.includes(s));
      this.counts.flushes++;
      this.samplesWritten += pending;
      for (const [id, { t, epoch, n }] of round.journaled) {
        const m = this.metas.get(id);
        if (m !== undefined && round.created.has(id)) m.persisted = true;
        if (this.tails.get(id) !== t) continue;
        // A tail changed under the round (a hisWrite sealed or merged into it) keeps its pending
        // samples pending: the next round journals them again.
        if (t.epoch === epoch) t.durable = Math.min(t.n, Math.max(t.durable, n));
        t.seqs.push(round.seq);
        this.journal.set(round.seq, (this.journal.get(round.seq) ?? 0) + 1);
        if (Number.isNaN(t.since)) t.since = this.monotonic();
        if (t.durable >= t.n) this.dirty.delete(id);
      }
      this.orphans.push(...round.releases.apply());
      for (const [id, { count, meta }] of round.sealed) {
        meta.persisted = true;
        this.metas.set(id, meta);
        const t = this.tails.get(id);
        if (t !== undefined) {
          // Its journal entries were released in the batch; what it counted goes now.
          this.dropTail(id, t, count);
        }
        this.counts.seals++;
      }
      this.counts.lastFlushMs = this.monotonic() - started;
    });
  }

  /** A round failed: every pending sample is dropped (counted), the tails cut back to what is durable. */
  private failRound(err: unknown, mine: ReadonlySet<string>): void {
    this.counts.flushFailures++;
    let dropped = 0;
    for (const id of [...this.dirty]) {
      const t = this.tails.get(id);
      // A point another write holds: that write's own batch carries its pending samples.
      if (t === undefined || (this.lock.busy(id) && !mine.has(id))) continue;
      dropped += t.n - t.durable;
      this.tailSamples -= t.n - t.durable;
      t.truncate(t.durable);
      this.dirty.delete(id);
      const m = this.metas.get(id);
      if (t.n === 0) this.tails.delete(id);
      if (m !== undefined && !m.persisted && t.n === 0) this.metas.delete(id);
      this.events.emit('his.written', id, t.kind, null, false);
    }
    this.samplesRefused.error += dropped;
    this.onFlushError?.(err, dropped);
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
      const next = new Map<string, { meta: Meta | null; tailCount: number }>();
      const releases = new Releases(this.journal);
      const removed: number[] = [];
      try {
        for (const span of spans) removed.push(await this.planDelete(batch, span, next, releases));
        for (const s of releases.freed) batch.del(journalKey(s), { sublevel: this.his });
        this.putRef(batch);
      } catch (e) {
        await batch.close();
        throw wrapStoreError(e, 'cannot read history to delete from');
      }
      if (next.size === 0) {
        await batch.close();
        return removed;
      }
      await this.commit(batch, 'cannot delete history');
      this.orphans.push(...releases.apply());
      for (const [pointId, { meta, tailCount }] of next) {
        const kind = (meta ?? this.metas.get(pointId))?.kind;
        const t = this.tails.get(pointId);
        if (t !== undefined && tailCount > 0) this.dropTail(pointId, t, tailCount);
        if (meta === null) this.metas.delete(pointId);
        else this.metas.set(pointId, meta);
        if (kind !== undefined) this.events.emit('his.written', pointId, kind, null, false);
      }
      return removed;
    });
  }

  /**
   * Adds the deletes (and rewritten chunk parts) of one span to `batch`; `next` gets the point's
   * new metadata when it removes any. A tail with samples in the span is sealed in the same
   * batch without them (so no journal entry can bring them back).
   */
  private async planDelete(batch: HisBatch, { pointId, start, end }: HisSpan, next: Map<string, { meta: Meta | null; tailCount: number }>, releases: Releases): Promise<number> {
    const m0 = this.metas.get(pointId);
    const t = this.tails.get(pointId);
    const st = this.stats(pointId);
    if (!(start < end) || m0 === undefined || st.end === undefined || st.start === undefined || st.end < start || st.start >= end) return 0;
    const m = { ...m0, lastFirst: Number.NaN };
    const keys = new PointKeys(pointId);
    let removed = 0;
    // The chunks.
    const lowKey = keys.chunk(-Infinity);
    const entries = m.size > 0 ? await this.his.iterator({ gte: lowKey, lte: keys.chunk(start), reverse: true, limit: 1 }).all() : [];
    if (m.size > 0) for (const e of await this.his.iterator({ gt: keys.chunk(start), lt: keys.chunk(end) }).all()) entries.push(e);
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
        const ti = cur.ts[i] as number;
        if (ti < start || ti >= end) {
          rest.ts.push(ti);
          rest.val.push(cur.val[i] as HisValue);
        }
      }
      removed += cur.n - rest.ts.length;
      this.putChunks(batch, keys, m.kind, rest, f);
      kept.set(f, { first: rest.ts[0] as number, last: rest.ts[rest.ts.length - 1] as number });
    }
    m.size -= removed;
    if (removed > 0) {
      if (m.start >= start) m.start = await this.firstAfter(keys, end, kept);
      if (m.end < end) m.end = await this.lastBefore(keys, start, kept);
    }
    // The tail: sealed without the span's samples.
    let tailCount = 0;
    if (t !== undefined && t.n > 0) {
      const a = t.lowerBound(start);
      const b = t.lowerBound(end);
      if (b > a) {
        removed += b - a;
        tailCount = t.n;
        const rest: Cols = { ts: [], val: [] };
        for (let i = 0; i < t.n; i++) {
          if (i >= a && i < b) continue;
          rest.ts.push(t.ts[i] as number);
          rest.val.push(t.val[i] as HisValue);
        }
        if (rest.ts.length > 0) {
          for (let x = 0; x < rest.ts.length; x += this.chunkSize) {
            batch.put(keys.chunk(rest.ts[x] as number), encodeChunk(m.kind, rest.ts, rest.val, x, Math.min(x + this.chunkSize, rest.ts.length)), { sublevel: this.his });
          }
          m.size += rest.ts.length;
          m.start = Math.min(m.start, rest.ts[0] as number);
          m.end = Math.max(m.end, rest.ts[rest.ts.length - 1] as number);
        }
        m.sealedEnd = Math.max(m.sealedEnd, t.last);
        releases.add(t.seqs);
      }
    }
    if (removed === 0) return 0;
    if (m.size <= 0 && (t === undefined || tailCount === t.n)) {
      batch.del(keys.meta, { sublevel: this.his });
      next.set(pointId, { meta: null, tailCount });
    } else {
      if (m.size <= 0) {
        m.size = 0;
        m.start = Infinity;
        m.end = -Infinity;
      }
      batch.put(keys.meta, encodeMeta(m), { sublevel: this.his });
      next.set(pointId, { meta: { ...m, persisted: true }, tailCount });
    }
    return removed;
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

  /** First chunk timestamp >= `end` once [.., end) is gone: in a kept chunk part or a later chunk. */
  private async firstAfter(keys: PointKeys, end: number, kept: Map<number, { first: number }>): Promise<number> {
    let best = Infinity;
    for (const { first } of kept.values()) if (first >= end && first < best) best = first;
    const [c] = await this.his.keys({ gte: keys.chunk(end), lt: keys.chunk(Infinity), limit: 1 }).all();
    if (c !== undefined) best = Math.min(best, keyTs(c));
    return best;
  }

  /** Last chunk timestamp < `start` once [start, ..) is gone: in a kept chunk part or an earlier chunk. */
  private async lastBefore(keys: PointKeys, start: number, kept: Map<number, { last: number }>): Promise<number> {
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
      const t = this.tails.get(pointId);
      const size = m.size + (t?.n ?? 0);
      const keys = new PointKeys(pointId);
      const releases = new Releases(this.journal);
      if (t !== undefined) releases.add(t.seqs);
      if (m.persisted) {
        const batch = this.store.db.batch();
        try {
          for (const k of await this.his.keys({ gte: keys.chunk(-Infinity), lt: keys.chunk(Infinity) }).all()) batch.del(k, { sublevel: this.his });
          batch.del(keys.meta, { sublevel: this.his });
          for (const s of releases.freed) batch.del(journalKey(s), { sublevel: this.his });
        } catch (e) {
          await batch.close();
          throw wrapStoreError(e, 'cannot read history to delete');
        }
        await this.commit(batch, 'cannot delete history');
        this.orphans.push(...releases.apply());
      }
      if (t !== undefined) this.dropTail(pointId, t, t.n);
      this.metas.delete(pointId);
      this.events.emit('his.written', pointId, m.kind, null, false);
      return size;
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

  /**
   * A snapshot of the store and, taken in the same tick, a copy of the point's tail in
   * [start, end): a seal that lands between them is seen by both or by neither.
   */
  private view(pointId: string, start: number, end: number): { snapshot: AbstractSnapshot; tail: { ts: Float64Array; val: Float64Array | HisValue[] } | null; kind: HisKind | undefined } {
    const snapshot = this.store.db.snapshot();
    const t = this.tails.get(pointId);
    const kind = this.metas.get(pointId)?.kind;
    if (t === undefined || t.n === 0) return { snapshot, tail: null, kind };
    return { snapshot, tail: t.copy(t.lowerBound(start), t.lowerBound(end)), kind };
  }

  private async withView<T>(pointId: string, start: number, end: number, f: (v: ReturnType<HistoryStore['view']>, sealedEnd: number, kind: HisKind | undefined) => Promise<T>): Promise<T> {
    const v = this.view(pointId, start, end);
    try {
      const b = await this.his.get(new PointKeys(pointId).meta, { snapshot: v.snapshot });
      const meta = b === undefined ? undefined : decodeMeta(b, pointId);
      if (meta !== undefined && 'v1' in meta) throw new HayloftError(ErrorCodes.STORE_UNAVAILABLE, `the history of ${pointId} is in format 1`);
      return await f(v, meta?.sealedEnd ?? -Infinity, meta?.kind ?? v.kind);
    } catch (e) {
      throw wrapStoreError(e, 'cannot read history');
    } finally {
      await v.snapshot.close();
    }
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
    const got = await this.withView(pointId, start, end, async (v, sealedEnd, kind) => {
      let tail = v.tail;
      if (tail !== null) {
        // Only what the snapshot has not sealed: a seal after the copy is not in the snapshot.
        const a = lowerBound(tail.ts, sealedEnd, 0, tail.ts.length, true);
        if (a > 0) tail = { ts: tail.ts.subarray(a), val: tail.val.slice(a) };
      }
      if (kind === undefined || !(start < end)) return { kind, chunks: [] as Uint8Array[], tail };
      // The chunk holding `start` begins at or before it; the rest begin inside the range.
      const snapshot = v.snapshot;
      const before = start > -Infinity ? await this.his.values({ gte: keys.chunk(-Infinity), lte: keys.chunk(start), reverse: true, limit: 1, snapshot }).all() : [];
      const inside = await this.his.values({ gt: keys.chunk(start), lt: keys.chunk(end), snapshot }).all();
      const chunks = before.length === 0 ? inside : before.concat(inside);
      return { kind, chunks, tail };
    });
    const { kind, chunks, tail } = got;
    if (kind === undefined) return { kind: null, ts: EMPTY_TS, val: [] };
    let total = tail?.ts.length ?? 0;
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
    if (tail !== null && start < end) {
      for (let i = 0; i < tail.ts.length; i++, n++) {
        ts[n] = tail.ts[i] as number;
        val[n] = tail.val[i] as never;
      }
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
    return this.withView(pointId, -Infinity, Infinity, async (v, sealedEnd, kind) => {
      if (kind === undefined) return undefined;
      const [c] = await this.his.values({ gte: keys.chunk(-Infinity), lt: keys.chunk(Infinity), limit: 1, snapshot: v.snapshot }).all();
      if (c !== undefined) {
        const d = decodeWhole(kind, c);
        return { ts: d.ts[0] as number, val: d.val[0] as HisValue };
      }
      const t = v.tail;
      if (t === null) return undefined;
      const a = lowerBound(t.ts, sealedEnd, 0, t.ts.length, true);
      return a < t.ts.length ? { ts: t.ts[a] as number, val: t.val[a] as HisValue } : undefined;
    });
  }

  /** The newest sample, or undefined when the point has no history. */
  async last(pointId: string): Promise<HisSample | undefined> {
    this.checkStarted();
    checkId(pointId);
    await this.dropped(pointId);
    const keys = new PointKeys(pointId);
    return this.withView(pointId, -Infinity, Infinity, async (v, sealedEnd, kind) => {
      if (kind === undefined) return undefined;
      const t = v.tail;
      if (t !== null && t.ts.length > 0 && (t.ts[t.ts.length - 1] as number) > sealedEnd) {
        const i = t.ts.length - 1;
        return { ts: t.ts[i] as number, val: t.val[i] as HisValue };
      }
      const [c] = await this.his.values({ gte: keys.chunk(-Infinity), lt: keys.chunk(Infinity), reverse: true, limit: 1, snapshot: v.snapshot }).all();
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
    // Only sealed chunks are kept per point; the open tail lives in the shared journal.
    return [[raw(keys.at(T_CHUNK, start)), raw(keys.at(T_CHUNK, end))]];
  }
}

function refBytes(ref: number): Uint8Array {
  const b = new Uint8Array(8);
  new DataView(b.buffer).setFloat64(0, ref);
  return b;
}

function checkRange(start: number, end: number): void {
  if (typeof start !== 'number' || typeof end !== 'number' || Number.isNaN(start) || Number.isNaN(end)) {
    throw new HayloftError(ErrorCodes.BAD_RANGE, `history range bounds must be numbers of epoch milliseconds, not ${String(start)} and ${String(end)}`);
  }
}
