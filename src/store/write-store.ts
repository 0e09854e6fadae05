/**
 * Durable point writes: the priority array of each writable point (`write` sublevel, key = point
 * id, value = its set levels as JSON with Haystack JSON values) and the bounded audit log of
 * every write tried (`audit` sublevel, key = zero-padded time and sequence, so key order is time
 * order and trimming the oldest is one range).
 *
 * A level changed and its audit entry land in one synced batch: once pointWrite answers, the
 * level survives a restart and a power cut.
 */
import { decodeVal, encodeVal } from '../haystack/json.js';
import type { HVal } from '../haystack/values.js';
import { ErrorCodes, HayloftError } from '../lib/errors.js';
import type { Store } from './db.js';
import type { BatchOps } from './records.js';

/** One set level of a priority array. */
export interface StoredLevel {
  level: number;
  val: HVal;
  who: string;
  /** Epoch ms when a timed override ends; null for ever. */
  expires: number | null;
}

/** One write tried, whatever came of it. */
export interface AuditEntry {
  ts: number;
  pointId: string;
  /** The user the write acted as. */
  user: string;
  /** The real caller's user when impersonating; null otherwise. */
  impersonatedBy: string | null;
  /** The `who` the write gave (shown in the array). */
  who: string;
  level: number | null;
  /** The value as asked (null: relinquish). */
  val: HVal | null;
  durationMs: number | null;
  /** `ok`, or the error code that refused it. */
  result: string;
  /** Why it was refused; null when ok. */
  err: string | null;
}

export const DEFAULT_AUDIT_MAX = 10_000;

/** A stored entry that does not decode: the data folder is damaged (also alarm/alarm-store.ts). */
export function corrupt(what: string, e: unknown): HayloftError {
  return new HayloftError(ErrorCodes.STORE_UNAVAILABLE, `${what} in the data folder is corrupt: ${(e as Error).message}`, { cause: e });
}

/** A key of a bounded time-ordered log: zero-padded time and sequence, so key order is time order (also the alarm log). */
export function timeKey(ts: number, seq: number): string {
  return `${String(Math.max(0, Math.floor(ts))).padStart(15, '0')}:${String(seq).padStart(9, '0')}`;
}

export class WriteStore {
  private readonly store: Store;
  private readonly auditMax: number;
  private auditCount = 0;
  private seq = 0;

  constructor(store: Store, opts: { auditMax?: number } = {}) {
    this.store = store;
    this.auditMax = Math.max(1, opts.auditMax ?? DEFAULT_AUDIT_MAX);
  }

  /** Every stored array, and the audit log's size. */
  async load(): Promise<Map<string, StoredLevel[]>> {
    const out = new Map<string, StoredLevel[]>();
    for await (const [id, text] of this.store.write.iterator()) {
      try {
        const raw = JSON.parse(text) as { level: number; val: unknown; who: string; expires: number | null }[];
        out.set(
          id,
          raw.map((l) => ({ level: l.level, val: decodeVal(l.val, `write level ${l.level}`), who: l.who, expires: l.expires })),
        );
      } catch (e) {
        throw corrupt(`the priority array of @${id}`, e);
      }
    }
    let n = 0;
    for await (const _ of this.store.audit.keys()) n++;
    this.auditCount = n;
    return out;
  }

  /**
   * Stores a point's set levels (none: deletes its entry) and appends audit entries, in one synced
   * batch, trimming the oldest entries past the bound.
   */
  async save(changes: readonly { pointId: string; levels: readonly StoredLevel[] }[], audit: readonly AuditEntry[]): Promise<void> {
    const batch = this.store.db.batch();
    for (const { pointId, levels } of changes) {
      if (levels.length === 0) batch.del(pointId, { sublevel: this.store.write });
      else {
        const json = levels.map((l) => ({ level: l.level, val: encodeVal(l.val), who: l.who, expires: l.expires }));
        batch.put(pointId, JSON.stringify(json), { sublevel: this.store.write });
      }
    }
    for (const e of audit) batch.put(timeKey(e.ts, this.seq++), encodeAudit(e), { sublevel: this.store.audit });
    const over = this.auditCount + audit.length - this.auditMax;
    if (over > 0) {
      let k = 0;
      for await (const key of this.store.audit.keys({ limit: over })) {
        batch.del(key, { sublevel: this.store.audit });
        k++;
      }
      this.auditCount -= k;
    }
    await batch.write({ sync: true } as object);
    this.auditCount += audit.length;
  }

  /** Adds the deletion of points' arrays to another commit (a deleteRec of writable points). */
  dropInBatch(ops: BatchOps, pointIds: readonly string[]): void {
    for (const id of pointIds) ops.del(this.store.write, id);
  }

  /** The newest audit entries first, optionally of one point, at most `limit`. */
  async readAudit(opts: { pointId?: string; limit: number }): Promise<AuditEntry[]> {
    const out: AuditEntry[] = [];
    for await (const [key, text] of this.store.audit.iterator({ reverse: true })) {
      let e: AuditEntry;
      try {
        e = decodeAudit(text);
      } catch (err) {
        throw corrupt(`audit entry ${key}`, err);
      }
      if (opts.pointId !== undefined && e.pointId !== opts.pointId) continue;
      out.push(e);
      if (out.length >= opts.limit) break;
    }
    return out;
  }

  get auditSize(): number {
    return this.auditCount;
  }
}

function encodeAudit(e: AuditEntry): string {
  return JSON.stringify({ ...e, val: e.val === null ? null : encodeVal(e.val) });
}

function decodeAudit(text: string): AuditEntry {
  const raw = JSON.parse(text) as Omit<AuditEntry, 'val'> & { val: unknown };
  return { ...raw, val: raw.val === null ? null : decodeVal(raw.val, 'audit value') };
}
