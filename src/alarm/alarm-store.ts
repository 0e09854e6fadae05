/**
 * Durable alarms (docs/alarms.md): the alarms not yet closed (`alarm` sublevel, key = condition id
 * `|` source id, value = the alarm as JSON) and the bounded log of every transition (`alarmLog`
 * sublevel, key = zero-padded time and sequence, so key order is time order and trimming the
 * oldest is one range), kept like the write audit (store/write-store.ts).
 *
 * A transition and its log entry land in one synced batch: once an acknowledgement is answered it
 * survives a restart and a power cut. An alarm closes (active no more, and acknowledged) by
 * deleting its key in the same batch as its last log entry.
 */
import { decodeVal, encodeVal } from '../haystack/json.js';
import type { HVal } from '../haystack/values.js';
import type { Store } from '../store/db.js';
import { corrupt, timeKey } from '../store/write-store.js';

/** What a condition found wrong: over the high limit, under the low, a state, a status, a connector down. */
export type AlarmDetail = 'high' | 'low' | 'state' | 'status' | 'connDown';

/** An alarm not yet closed: one per condition and source (a point or a connector). */
export interface Alarm {
  condId: string;
  sourceId: string;
  /** Whether the condition holds now (after its delay). */
  active: boolean;
  detail: AlarmDetail;
  /** The value (or status) that raised it, null when there is none to show. */
  val: HVal | null;
  /** When it became active last; null while undated (the clock could not be trusted, docs/clock.md). */
  activeAt: number | null;
  /** When it returned to normal; null while active or undated. */
  normalAt: number | null;
  acked: boolean;
  ackAt: number | null;
  ackBy: string | null;
  ackNote: string | null;
  /** Epoch ms the shelving ends; null when not shelved. */
  shelvedUntil: number | null;
  shelvedBy: string | null;
  /** The condition's priority when raised (1 highest, 255 lowest). */
  priority: number;
}

export type AlarmEvent = 'active' | 'normal' | 'ack' | 'shelve' | 'unshelve' | 'removed';

/** One transition of an alarm, as the log keeps it. */
export interface AlarmLogEntry {
  ts: number;
  condId: string;
  sourceId: string;
  event: AlarmEvent;
  detail: AlarmDetail;
  val: HVal | null;
  /** The user who acknowledged or shelved; null for what the server did. */
  user: string | null;
  note: string | null;
  /** The end of a shelving. */
  until: number | null;
  priority: number;
}

export const DEFAULT_ALARM_LOG_MAX = 10_000;

export function alarmKey(condId: string, sourceId: string): string {
  // `|` is no Ref character (haystack/values.ts), so the key splits back unambiguously.
  return `${condId}|${sourceId}`;
}

export class AlarmStore {
  private readonly store: Store;
  private readonly logMax: number;
  private logCount = 0;
  private seq = 0;

  constructor(store: Store, opts: { logMax?: number } = {}) {
    this.store = store;
    this.logMax = Math.max(1, opts.logMax ?? DEFAULT_ALARM_LOG_MAX);
  }

  /** Every open alarm, and the log's size. */
  async load(): Promise<Alarm[]> {
    const out: Alarm[] = [];
    for await (const [key, text] of this.store.alarm.iterator()) {
      try {
        const raw = JSON.parse(text) as Omit<Alarm, 'val'> & { val: unknown };
        out.push({ ...raw, val: raw.val === null ? null : decodeVal(raw.val, 'alarm value') });
      } catch (e) {
        throw corrupt(`alarm ${key}`, e);
      }
    }
    let n = 0;
    for await (const _ of this.store.alarmLog.keys()) n++;
    this.logCount = n;
    return out;
  }

  /**
   * Stores alarms as they are now (`closed`: deletes them) and appends log entries, in one synced
   * batch, trimming the oldest entries past the bound.
   */
  async save(changes: readonly { alarm: Alarm; closed: boolean }[], log: readonly AlarmLogEntry[]): Promise<void> {
    const batch = this.store.db.batch();
    for (const { alarm, closed } of changes) {
      const key = alarmKey(alarm.condId, alarm.sourceId);
      if (closed) batch.del(key, { sublevel: this.store.alarm });
      else batch.put(key, JSON.stringify({ ...alarm, val: alarm.val === null ? null : encodeVal(alarm.val) }), { sublevel: this.store.alarm });
    }
    for (const e of log) batch.put(timeKey(e.ts, this.seq++), JSON.stringify({ ...e, val: e.val === null ? null : encodeVal(e.val) }), { sublevel: this.store.alarmLog });
    const over = this.logCount + log.length - this.logMax;
    let trimmed = 0;
    if (over > 0) {
      for await (const key of this.store.alarmLog.keys({ limit: over })) {
        batch.del(key, { sublevel: this.store.alarmLog });
        trimmed++;
      }
    }
    await batch.write({ sync: true } as object);
    this.logCount += log.length - trimmed;
  }

  /** The newest log entries first, those `keep` accepts, at most `limit`. */
  async readLog(keep: (e: AlarmLogEntry) => boolean, limit: number): Promise<AlarmLogEntry[]> {
    const out: AlarmLogEntry[] = [];
    for await (const [key, text] of this.store.alarmLog.iterator({ reverse: true })) {
      let e: AlarmLogEntry;
      try {
        const raw = JSON.parse(text) as Omit<AlarmLogEntry, 'val'> & { val: unknown };
        e = { ...raw, val: raw.val === null ? null : decodeVal(raw.val, 'alarm log value') };
      } catch (err) {
        throw corrupt(`alarm log entry ${key}`, err);
      }
      if (!keep(e)) continue;
      out.push(e);
      if (out.length >= limit) break;
    }
    return out;
  }

  /** Log entries after `afterKey` (null: from the oldest), oldest first, with their keys. */
  async readAfter(afterKey: string | null, limit: number): Promise<{ key: string; entry: AlarmLogEntry }[]> {
    const out: { key: string; entry: AlarmLogEntry }[] = [];
    for await (const [key, text] of this.store.alarmLog.iterator(afterKey === null ? { limit } : { gt: afterKey, limit })) {
      try {
        const raw = JSON.parse(text) as Omit<AlarmLogEntry, 'val'> & { val: unknown };
        out.push({ key, entry: { ...raw, val: raw.val === null ? null : decodeVal(raw.val, 'alarm log value') } });
      } catch (err) {
        throw corrupt(`alarm log entry ${key}`, err);
      }
    }
    return out;
  }

  /** The newest log key, or null when the log is empty: where a new notification route starts. */
  async newestKey(): Promise<string | null> {
    for await (const key of this.store.alarmLog.keys({ reverse: true, limit: 1 })) return key;
    return null;
  }

  /** A notification route's cursor: the key of the last log entry its receiver took. */
  async cursor(routeId: string): Promise<string | null> {
    return (await this.store.alarmCursor.get(routeId)) ?? null;
  }

  async setCursor(routeId: string, key: string): Promise<void> {
    await this.store.alarmCursor.put(routeId, key, { sync: true } as object);
  }

  get logSize(): number {
    return this.logCount;
  }
}
