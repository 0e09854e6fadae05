/**
 * Point state: the one owner of a point's live tags (live-tags.ts) and of the facts every part
 * reads the same way (its kind, its unit, its zone, whether a driver feeds it).
 *
 * Who calls what (Haxall keeps this in the point's ConnPoint, updateCurOk/updateCurErr; here it
 * is one service built by the composition root):
 * - the poller: `setCur` with a reading, `setConn` with a connector's link, `setPolled` after
 *   each read of a connector, `hisWritten` after collecting history;
 * - the history ops: `hisWritten` after hisWrite (a point without a driver takes its newest
 *   sample as curVal), `refreshFromHistory` after hisDelete and at start;
 * - the uplink: `setSync`;
 * - the point writer (point-writer.ts): `setWrite` with the effective value of the priority
 *   array; the poller: `setWrite` with how writing it to the device went.
 * - change of value and learning: `setCovErr` (why a point fell back to polling), and
 *   `setLearnProgress` on a connector while a learn runs.
 *
 * The tags live in the model's memory (Model.setTransient): read and filters see them, nothing
 * is written to disk per change, watches hear of changes. Clients cannot set them: the model
 * refuses them in createRec/updateRec.
 */
import { REL, type TimeZone, UTC, findTimeZone } from '../haystack/tz.js';
import { HDateTime, HNumber, type HDict, type HVal } from '../haystack/values.js';
import type { HisKind, HistoryStore } from '../store/history.js';
import type { Metrics } from '../lib/metrics.js';
import type { Model } from './model.js';

/** The kinds a point may have (what history, drivers and writes can hold). */
export const POINT_KINDS: readonly HisKind[] = ['Number', 'Bool', 'Str'];
export type PointKind = HisKind;
/** The kinds for messages: `Number, Bool or Str`. */
export const POINT_KINDS_TEXT = `${POINT_KINDS.slice(0, -1).join(', ')} or ${POINT_KINDS[POINT_KINDS.length - 1] ?? ''}`;

/** A point's kind, or undefined when its `kind` tag is missing or not one of POINT_KINDS. */
export function pointKind(rec: HDict): PointKind | undefined {
  const k = rec.get('kind');
  return typeof k === 'string' && (POINT_KINDS as readonly string[]).includes(k) ? (k as PointKind) : undefined;
}

/** Why a point's kind is not usable, for messages: `kind "Ref"`, `no kind tag`. */
export function describeKind(rec: HDict): string {
  const k = rec.get('kind');
  return typeof k === 'string' ? `kind "${k}"` : 'no kind tag';
}

/** A point's `unit`, or null without one. */
export function pointUnit(rec: HDict): string | null {
  const u = rec.get('unit');
  return typeof u === 'string' ? u : null;
}

/** A point's zone: its `tz` tag when it names a known zone, else `fallback` (the server's). */
export function pointZone(rec: HDict, fallback: TimeZone): TimeZone {
  const tz = rec.get('tz');
  return (typeof tz === 'string' ? findTimeZone(tz) : undefined) ?? fallback;
}

/** A value of a point's kind as the model shows it (Numbers carry the point's unit). */
export function pointValue(kind: PointKind, unit: string | null, v: number | boolean | string): HVal {
  return kind === 'Number' ? new HNumber(v as number, unit) : v;
}

export type CurStatus = 'ok' | 'stale' | 'down' | 'fault' | 'disabled' | 'unknown';

/** Changes to a point's reading; a tag left out is unchanged, null removes it. */
export interface CurTags {
  curVal?: HVal | null;
  curStatus?: CurStatus | null;
  curErr?: string | null;
}

/** Changes to a point's uplink status; a tag left out is unchanged, null removes it. */
export interface SyncTags {
  syncStatus?: string | null;
  syncErr?: string | null;
  syncLast?: HDateTime | null;
}

export type WriteStatus = 'ok' | 'down' | 'fault' | 'disabled' | 'pending' | 'unknown';

/** Changes to a point's write state; a tag left out is unchanged, null removes it. */
export interface WriteTags {
  writeVal?: HVal | null;
  writeLevel?: HNumber | null;
  writeStatus?: WriteStatus | null;
  writeErr?: string | null;
}

/** What point state needs to know of a driver: the tags that bind a point to it. */
export interface DriverTags {
  /** The Ref tag naming its connector (`modbusConnRef`). */
  readonly refTag: string;
  /** The tag holding the address it writes to (`modbusWrite`), for drivers that write. */
  readonly writeTag?: string;
}

export interface PointStateOptions {
  model: Model;
  history: HistoryStore;
  /** The registered drivers' tags (from the driver registry). */
  drivers: readonly DriverTags[];
}

export class PointState {
  private readonly model: Model;
  private readonly history: HistoryStore;
  private readonly drivers: readonly DriverTags[];

  constructor(opts: PointStateOptions) {
    this.model = opts.model;
    this.history = opts.history;
    this.drivers = [...opts.drivers];
  }

  /** Whether a driver reads the point (it names a driver's connector): it then owns curVal. */
  fedByDriver(rec: HDict): boolean {
    return this.drivers.some((d) => rec.has(d.refTag));
  }

  /**
   * Whether a driver writes the point (its connector Ref and that driver's write address): the
   * poller then owns writeStatus and writeErr.
   */
  writtenByDriver(rec: HDict): boolean {
    return this.drivers.some((d) => d.writeTag !== undefined && rec.has(d.refTag) && rec.has(d.writeTag));
  }

  /** A cur point without a driver: hisWrite's newest sample is its current value. */
  private takesCurFromHistory(rec: HDict): boolean {
    return rec.has('cur') && !this.fedByDriver(rec);
  }

  /** Sets a point's reading (the poller's hot path: pass only what changed). */
  setCur(id: string, tags: CurTags): void {
    this.model.setTransient(id, tags as Record<string, HVal>);
  }

  /** Sets a connector's link status; null status removes both tags. */
  setConn(id: string, status: string | null, err: string | null): void {
    this.model.setTransient(id, { connStatus: status, connErr: status === null ? null : err });
  }

  /**
   * Records a finished poll of a connector (the poller, after every read): `connLastPoll` when it
   * ended, and `connLastOk` too when the device answered, so a dead device shows when it last did.
   * In the connector's zone (`tz`), else UTC. Kept while the connector is disabled: when it was
   * last polled is still true.
   */
  setPolled(connId: string, at: number, answered: boolean): void {
    const rec = this.model.get(connId);
    if (rec === undefined) return;
    const t = new HDateTime(at, pointZone(rec, UTC));
    this.model.setTransient(connId, answered ? { connLastPoll: t, connLastOk: t } : { connLastPoll: t });
  }

  /** Sets a point's write state (the point writer: writeVal/writeLevel; the poller: writeStatus/writeErr). */
  setWrite(id: string, tags: WriteTags): void {
    this.model.setTransient(id, tags as Record<string, HVal>);
  }

  /** Sets (or clears, null) why a point's change of value fell back to polling (poller/cov.ts). */
  setCovErr(id: string, err: string | null): void {
    this.model.setTransient(id, { covErr: err });
  }

  /** Sets (or clears, null) how far a learn of a connector got, in percent (poller/commission.ts). */
  setLearnProgress(connId: string, percent: number | null): void {
    this.model.setTransient(connId, { learnProgress: percent === null ? null : new HNumber(percent, '%') });
  }

  /** Sets a point's uplink status. */
  setSync(id: string, tags: SyncTags): void {
    this.model.setTransient(id, tags as Record<string, HVal>);
  }

  /**
   * After history was written to a point: its his tags, and for a cur point without a driver
   * `newest` (the newest sample of the write, when it is the newest the point has) as curVal.
   */
  hisWritten(id: string, newest?: { ts: number; val: HVal }): void {
    const s = this.history.stats(id);
    const rec = this.model.stored(id);
    if (rec === undefined) return;
    const tz = pointZone(rec, REL);
    const some = s.size > 0;
    const tags: Record<string, HVal> = {
      hisSize: some ? new HNumber(s.size) : null,
      hisStart: some && s.start !== undefined ? new HDateTime(s.start, tz) : null,
      hisEnd: some && s.end !== undefined ? new HDateTime(s.end, tz) : null,
    };
    if (newest !== undefined && this.takesCurFromHistory(rec)) {
      tags.curVal = newest.val;
      tags.curStatus = 'ok';
      tags.curErr = null;
    }
    this.model.setTransient(id, tags);
  }

  /**
   * Re-reads what a point shows from its history: the his tags, and for a cur point without a
   * driver its newest sample as curVal (or no curVal when it has none). At start, and after
   * hisDelete (which may remove the newest sample).
   */
  async refreshFromHistory(id: string): Promise<void> {
    const rec = this.model.stored(id);
    if (rec === undefined) return;
    if (!this.takesCurFromHistory(rec)) {
      this.hisWritten(id);
      return;
    }
    const last = await this.history.last(id);
    if (last === undefined) {
      this.hisWritten(id);
      this.model.setTransient(id, { curVal: null, curStatus: 'unknown', curErr: null });
      return;
    }
    const kind = pointKind(rec);
    const val = kind === 'Number' && typeof last.val === 'number' ? new HNumber(last.val, pointUnit(rec)) : last.val;
    this.hisWritten(id, { ts: last.ts, val });
  }

  /** Points by curStatus, read at scrape time. */
  metrics(metrics: Metrics): void {
    metrics.gauge('hayloft_points', 'Points by curStatus (none: no current value)', ['curStatus'], () => {
      const by = new Map<string, number>();
      for (const p of this.model.query('point')) {
        const s = p.get('curStatus');
        const k = typeof s === 'string' ? s : 'none';
        by.set(k, (by.get(k) ?? 0) + 1);
      }
      return [...by].map(([curStatus, value]) => ({ labels: { curStatus }, value }));
    });
  }
}
