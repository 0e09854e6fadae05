/**
 * Alarm conditions as records (docs/alarms.md): an `alarmCond` record says what is wrong
 * (`alarmOn`), of what (`pointRef`, `connRef` or a `filter`), after how long (`delay`) and how
 * urgent it is (`priority`). They are read, filtered, backed up and synced like every record; this
 * module turns one into a Condition the engine evaluates, or says what is wrong with it (the
 * engine refuses such a record in the commit's batch, so nothing is stored).
 */
import { durationMs } from '../haystack/duration.js';
import { parseFilter } from '../haystack/filter.js';
import { convertUnit } from '../haystack/units.js';
import { type HDict, HNumber, HRef, type HVal } from '../haystack/values.js';
import { ErrorCodes, HayloftError } from '../lib/errors.js';
import type { AlarmDetail } from './alarm-store.js';

export const ALARM_ON = ['limit', 'state', 'status', 'connDown'] as const;
export type AlarmOn = (typeof ALARM_ON)[number];

/** The point statuses a `status` condition may watch (model/point-state.ts CurStatus). */
export const ALARM_STATUSES = ['down', 'fault', 'stale'] as const;

export const DEFAULT_PRIORITY = 100;

export interface Condition {
  id: string;
  dis: string | null;
  on: AlarmOn;
  /** One source (pointRef or connRef), or null when a filter selects them. */
  sourceId: string | null;
  filter: string | null;
  hi: HNumber | null;
  lo: HNumber | null;
  /** In the limits' unit. */
  deadband: number;
  delayMs: number;
  /** The value that means alarm (`state`). */
  alarmVal: HVal | null;
  statuses: readonly string[];
  priority: number;
  disabled: boolean;
}

/** The live tags a condition reads from its sources: the engine re-evaluates when one changes. */
export const WATCHED_TAGS: readonly string[] = ['curVal', 'curStatus', 'connStatus'];

function bad(rec: HDict, message: string): HayloftError {
  const id = rec.get('id');
  return new HayloftError(ErrorCodes.INVALID_RECORD, `alarm condition ${id instanceof HRef ? `@${id.id}` : ''}: ${message}`);
}

/** The condition an `alarmCond` record says, or throws HL_INVALID_RECORD naming what to fix. */
export function parseCondition(rec: HDict): Condition {
  const id = (rec.get('id') as HRef).id;
  const on = rec.get('alarmOn');
  if (typeof on !== 'string' || !(ALARM_ON as readonly string[]).includes(on)) throw bad(rec, `alarmOn must be one of ${ALARM_ON.join(', ')}`);
  const pointRef = rec.get('pointRef');
  const connRef = rec.get('connRef');
  const filter = rec.get('filter');
  const targets = [pointRef, connRef, filter].filter((v) => v !== undefined).length;
  if (targets !== 1) throw bad(rec, 'give exactly one of pointRef (a point), connRef (a connector) or filter (the points or connectors it selects)');
  if (pointRef !== undefined && !(pointRef instanceof HRef)) throw bad(rec, 'pointRef must be a Ref');
  if (connRef !== undefined && !(connRef instanceof HRef)) throw bad(rec, 'connRef must be a Ref');
  if (on === 'connDown' && pointRef !== undefined) throw bad(rec, 'a connDown condition names a connector (connRef) or a filter, not a point');
  if (on !== 'connDown' && connRef !== undefined) throw bad(rec, `a ${on} condition names a point (pointRef) or a filter, not a connector`);
  if (filter !== undefined) {
    if (typeof filter !== 'string' || filter.trim() === '') throw bad(rec, 'filter must be a non-empty Str');
    try {
      parseFilter(filter);
    } catch (e) {
      throw bad(rec, `filter: ${(e as Error).message}`);
    }
  }
  const num = (tag: string): HNumber | null => {
    const v = rec.get(tag);
    if (v === undefined) return null;
    if (!(v instanceof HNumber) || !Number.isFinite(v.val)) throw bad(rec, `${tag} must be a Number`);
    return v;
  };
  const hi = num('hiLimit');
  const lo = num('loLimit');
  const db = num('deadband');
  if (on === 'limit') {
    if (hi === null && lo === null) throw bad(rec, 'a limit condition needs hiLimit, loLimit or both');
    if (hi !== null && lo !== null) {
      const loInHi = hi.unit !== null && lo.unit !== null ? convertUnit(lo.val, lo.unit, hi.unit) : lo.val;
      if (typeof loInHi === 'object') throw bad(rec, `loLimit: ${loInHi.err}`);
      if (!(loInHi < hi.val)) throw bad(rec, 'loLimit must be below hiLimit');
    }
    if (db !== null && db.val < 0) throw bad(rec, 'deadband must be 0 or more');
  } else if (hi !== null || lo !== null || db !== null) {
    throw bad(rec, 'hiLimit, loLimit and deadband belong to a limit condition (alarmOn: "limit")');
  }
  let alarmVal: HVal | null = null;
  if (on === 'state') {
    const v = rec.get('alarmVal');
    if (typeof v !== 'boolean' && typeof v !== 'string' && !(v instanceof HNumber)) throw bad(rec, 'a state condition needs alarmVal: the Bool, Str (enum) or Number that means alarm');
    alarmVal = v;
  }
  let statuses: readonly string[] = ALARM_STATUSES;
  const st = rec.get('statuses');
  if (st !== undefined) {
    if (on !== 'status') throw bad(rec, 'statuses belongs to a status condition (alarmOn: "status")');
    const list = typeof st === 'string' ? st.split(',').map((s) => s.trim()) : [];
    if (list.length === 0 || list.some((s) => !(ALARM_STATUSES as readonly string[]).includes(s))) {
      throw bad(rec, `statuses must be a Str listing some of ${ALARM_STATUSES.join(', ')}, comma-separated`);
    }
    statuses = list;
  }
  let delayMs = 0;
  const dv = rec.get('delay');
  if (dv !== undefined) {
    const d = durationMs(dv);
    if (typeof d === 'string') throw bad(rec, `delay ${d}`);
    delayMs = d;
  }
  let priority = DEFAULT_PRIORITY;
  const pv = rec.get('priority');
  if (pv !== undefined) {
    if (!(pv instanceof HNumber) || !Number.isInteger(pv.val) || pv.val < 1 || pv.val > 255) throw bad(rec, 'priority must be a whole Number from 1 (highest) to 255');
    priority = pv.val;
  }
  const dis = rec.get('dis');
  return {
    id,
    dis: typeof dis === 'string' ? dis : null,
    on: on as AlarmOn,
    sourceId: pointRef instanceof HRef ? pointRef.id : connRef instanceof HRef ? connRef.id : null,
    filter: typeof filter === 'string' ? filter : null,
    hi,
    lo,
    deadband: db?.val ?? 0,
    delayMs,
    alarmVal,
    statuses,
    priority,
    disabled: rec.has('disabled'),
  };
}

/** A source's live tags as the engine reads them (Model.liveTags). */
export type LiveTags = Readonly<Record<string, HVal>> | undefined;

/**
 * Whether the condition finds its source in alarm now, and why: `undefined` when it cannot say
 * (no value yet, a point that is down for a limit condition): the alarm then stays as it is.
 * `active` is whether the alarm is active now, for the deadband: a limit alarm returns to normal
 * only once the value is back inside the limit by the deadband.
 */
export function evaluate(c: Condition, live: LiveTags, unit: string | null, active: boolean): { alarm: boolean; detail: AlarmDetail; val: HVal | null } | undefined {
  switch (c.on) {
    case 'connDown': {
      const s = live?.connStatus;
      if (typeof s !== 'string') return undefined;
      return { alarm: s === 'down', detail: 'connDown', val: s };
    }
    case 'status': {
      const s = live?.curStatus;
      if (typeof s !== 'string') return undefined;
      return { alarm: c.statuses.includes(s), detail: 'status', val: s };
    }
    case 'state': {
      const v = live?.curVal;
      if (v === undefined || !usable(live)) return undefined;
      const same = v instanceof HNumber && c.alarmVal instanceof HNumber ? v.val === c.alarmVal.val : v === c.alarmVal;
      return { alarm: same, detail: 'state', val: v };
    }
    case 'limit': {
      const v = live?.curVal;
      if (!(v instanceof HNumber) || !usable(live)) return undefined;
      const hi = inUnit(c.hi, unit);
      const lo = inUnit(c.lo, unit);
      const db = c.hi !== null ? scale(c.deadband, c.hi.unit, unit) : scale(c.deadband, c.lo?.unit ?? null, unit);
      if (hi !== null && v.val > hi) return { alarm: true, detail: 'high', val: v };
      if (lo !== null && v.val < lo) return { alarm: true, detail: 'low', val: v };
      // Inside the limits: an active alarm holds until the value is inside by the deadband.
      if (active && ((hi !== null && v.val > hi - db) || (lo !== null && v.val < lo + db))) {
        return { alarm: true, detail: hi !== null && v.val > hi - db ? 'high' : 'low', val: v };
      }
      return { alarm: false, detail: 'high', val: v };
    }
  }
}

/** A reading a value condition may judge: ok or stale (a down point's old curVal says nothing). */
function usable(live: LiveTags): boolean {
  const s = live?.curStatus;
  return s === undefined || s === 'ok' || s === 'stale';
}

/** A limit in the point's unit (no unit on either side: as given). */
function inUnit(n: HNumber | null, unit: string | null): number | null {
  if (n === null) return null;
  if (n.unit === null || unit === null || n.unit === unit) return n.val;
  const c = convertUnit(n.val, n.unit, unit);
  return typeof c === 'object' ? n.val : c;
}

/** A deadband (a difference, not a reading) in the point's unit: converts by the ratio of the units' scales. */
function scale(d: number, from: string | null, to: string | null): number {
  if (d === 0 || from === null || to === null || from === to) return d;
  const a = convertUnit(0, from, to);
  const b = convertUnit(d, from, to);
  return typeof a === 'object' || typeof b === 'object' ? d : Math.abs(b - a);
}
