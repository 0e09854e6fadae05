/**
 * The alarm ops (docs/alarms.md): `alarms` (the open alarms, most urgent first), `alarmAck`,
 * `alarmShelve` and `alarmHistory` (every transition, newest first, bounded like the write audit).
 *
 * An alarm is named by `alarmId` (Str, `<condition id>|<source id>`, as `alarms` answers it) or
 * by `condRef` and `sourceRef`. The caller sees the alarms of the sources (points, connectors) it
 * may read; acknowledging needs ALARM_ACK, shelving ALARM_SHELVE, each on the alarm's source.
 * The engine (alarm/engine.ts) keeps the alarms; these ops only read the request and answer.
 */
import type { Alarm, AlarmLogEntry } from '../../alarm/alarm-store.js';
import type { AlarmEngine } from '../../alarm/engine.js';
import { durationMs } from '../../haystack/duration.js';
import { parseFilter, compileFilter } from '../../haystack/filter.js';
import { HDateTime, HDict, HGrid, HNumber, HRef, type HVal, newRecord } from '../../haystack/values.js';
import { ErrorCodes, HayloftError } from '../../lib/errors.js';
import type { Op, OpRequest } from '../op.js';

const DEFAULT_LIMIT = 100;
const MAX_LIMIT = 10_000;
const STATUSES = ['active', 'unacked', 'acked', 'shelved'];

function bad(message: string): HayloftError {
  return new HayloftError(ErrorCodes.BAD_REQUEST, message);
}

function engine(req: OpRequest): AlarmEngine {
  const e = req.ctx.alarms;
  if (e === undefined) throw new HayloftError(ErrorCodes.UNKNOWN_OP, 'this server keeps no alarms');
  return e;
}

/** Whether the caller may see an alarm: it may read its source (a deleted source: only an unrestricted reader). */
function visible(req: OpRequest, sourceId: string): boolean {
  const rec = req.ctx.model.get(sourceId);
  return rec !== undefined ? req.gate.readable(rec) : req.gate.canAll('MODEL_READ');
}

function ref(req: OpRequest, id: string): HRef {
  return new HRef(id, req.ctx.model.displayOf(id));
}

function time(req: OpRequest, ms: number | null): HDateTime | undefined {
  return ms === null ? undefined : new HDateTime(ms, req.ctx.info.tz);
}

function alarmRow(req: OpRequest, e: AlarmEngine, a: Alarm): HDict {
  const c = e.condition(a.condId);
  const d = newRecord();
  d.alarmId = `${a.condId}|${a.sourceId}`;
  d.condRef = ref(req, a.condId);
  d.sourceRef = ref(req, a.sourceId);
  d.dis = c?.dis ?? req.ctx.model.nameOf(a.condId);
  if (c !== undefined) d.alarmOn = c.on;
  d.detail = a.detail;
  d.priority = new HNumber(a.priority);
  d.status = e.statusOf(a);
  d.active = a.active;
  if (a.val !== null) d.val = a.val;
  const put = (k: string, v: HVal | undefined): void => {
    if (v !== undefined) d[k] = v;
  };
  put('activeAt', time(req, a.activeAt));
  put('normalAt', time(req, a.normalAt));
  d.acked = a.acked;
  if (a.ackBy !== null) d.ackBy = a.ackBy;
  put('ackAt', time(req, a.ackAt));
  if (a.ackNote !== null) d.ackNote = a.ackNote;
  put('shelvedUntil', time(req, a.shelvedUntil));
  if (a.shelvedBy !== null) d.shelvedBy = a.shelvedBy;
  return HDict.adopt(d);
}

const ALARM_COLS = ['alarmId', 'condRef', 'sourceRef', 'dis', 'alarmOn', 'detail', 'priority', 'status', 'active', 'val', 'activeAt', 'normalAt', 'acked', 'ackBy', 'ackAt', 'ackNote', 'shelvedUntil', 'shelvedBy'];

/** An `alarmId` as `alarms` answers it, split into its condition and source ids. */
function splitAlarmId(v: HVal, where: string): { condId: string; sourceId: string } {
  if (typeof v !== 'string' || !v.includes('|')) throw bad(`${where}alarmId must be a Str as alarms answers it (<condition id>|<source id>)`);
  const k = v.indexOf('|');
  return { condId: v.slice(0, k), sourceId: v.slice(k + 1) };
}

/** The alarm a row names (alarmId, or condRef and sourceRef), as ids. */
function named(req: OpRequest, row: HDict, i: number): { condId: string; sourceId: string } {
  const where = `row ${i}: `;
  const idv = row.get('alarmId');
  let condId: string | undefined;
  let sourceId: string | undefined;
  if (idv !== undefined) ({ condId, sourceId } = splitAlarmId(idv, where));
  else {
    const c = row.get('condRef');
    const s = row.get('sourceRef');
    if (!(c instanceof HRef) || !(s instanceof HRef)) throw bad(`${where}name the alarm by alarmId, or by condRef and sourceRef (Refs)`);
    condId = req.ctx.model.resolveId(c.id) ?? c.id;
    sourceId = req.ctx.model.resolveId(s.id) ?? s.id;
  }
  // An alarm of a source the caller cannot read is as unknown as one that does not exist.
  if (!visible(req, sourceId) || engine(req).get(condId, sourceId) === undefined) {
    throw new HayloftError(ErrorCodes.NOT_FOUND, `${where}no open alarm ${condId}|${sourceId} (closed alarms are in alarmHistory)`);
  }
  return { condId, sourceId };
}

function noteOf(row: HDict, i: number): string | null {
  const n = row.get('note');
  if (n === undefined) return null;
  if (typeof n !== 'string') throw bad(`row ${i}: note must be a Str`);
  if (n.length > 1000) throw bad(`row ${i}: note is longer than 1000 characters`);
  return n;
}

function limitOf(row: HDict): number {
  const lv = row.get('limit');
  if (lv === undefined) return DEFAULT_LIMIT;
  if (!(lv instanceof HNumber) || !Number.isInteger(lv.val) || lv.val < 1) throw bad('limit must be a whole Number, 1 or more');
  return Math.min(MAX_LIMIT, lv.val);
}

/** The caller's filter over sources (`filter`), or undefined. */
function sourceFilter(req: OpRequest, row: HDict): ((sourceId: string) => boolean) | undefined {
  const f = row.get('filter');
  if (f === undefined) return undefined;
  if (typeof f !== 'string') throw bad('filter must be a Str (a Haystack filter over the alarms\' points and connectors)');
  const run = compileFilter(parseFilter(f));
  const m = req.ctx.model;
  return (id) => {
    const rec = m.get(id);
    return rec !== undefined && run(rec, (r) => m.get(r.id));
  };
}

export const alarmsOp: Op = {
  name: 'alarms',
  summary: 'The open alarms, most urgent first (optional filter over their points, status: active, unacked, acked or shelved)',
  methods: ['GET', 'POST'],
  permission: 'MODEL_READ',
  run(req) {
    const e = engine(req);
    const row = req.grid.rows[0] ?? HDict.EMPTY;
    const st = row.get('status');
    if (st !== undefined && (typeof st !== 'string' || !STATUSES.includes(st))) throw bad(`status must be one of ${STATUSES.join(', ')}`);
    const keep = sourceFilter(req, row);
    const rows: HDict[] = [];
    for (const a of e.list()) {
      if (!visible(req, a.sourceId)) continue;
      if (st !== undefined && e.statusOf(a) !== st) continue;
      if (keep !== undefined && !keep(a.sourceId)) continue;
      rows.push(alarmRow(req, e, a));
    }
    return HGrid.fromRows(rows, HDict.EMPTY, ALARM_COLS);
  },
};

export const alarmAckOp: Op = {
  name: 'alarmAck',
  summary: 'Acknowledge alarms (rows of alarmId, or condRef and sourceRef; optional note): all or none',
  methods: ['POST'],
  permission: 'ALARM_ACK',
  async run(req) {
    const e = engine(req);
    if (req.grid.rows.length === 0) throw bad('alarmAck takes one row per alarm: alarmId (or condRef and sourceRef), and optionally note');
    const items = req.grid.rows.map((row, i) => {
      const k = named(req, row, i);
      req.gate.require('ALARM_ACK', `acknowledging alarms of ${req.ctx.model.nameOf(k.sourceId)}`, req.ctx.model.get(k.sourceId));
      return { k, note: noteOf(row, i) };
    });
    const user = req.gate.principal.username;
    const out: Alarm[] = [];
    for (const { k, note } of items) out.push(...(await e.ack([k], { user }, note)));
    return HGrid.fromRows(out.map((a) => alarmRow(req, e, a)), HDict.EMPTY, ALARM_COLS);
  },
};

export const alarmShelveOp: Op = {
  name: 'alarmShelve',
  summary: 'Shelve alarms for a duration (rows of alarmId or condRef and sourceRef, duration, optional note), or end it (unshelve marker)',
  methods: ['POST'],
  permission: 'ALARM_SHELVE',
  async run(req) {
    const e = engine(req);
    if (req.grid.rows.length === 0) throw bad('alarmShelve takes one row per alarm: alarmId (or condRef and sourceRef), duration (or the unshelve marker), optionally note');
    const now = req.ctx.clock.now();
    const items = req.grid.rows.map((row, i) => {
      const k = named(req, row, i);
      req.gate.require('ALARM_SHELVE', `shelving alarms of ${req.ctx.model.nameOf(k.sourceId)}`, req.ctx.model.get(k.sourceId));
      let until: number | null = null;
      if (!row.has('unshelve')) {
        const d = durationMs(row.get('duration'));
        if (typeof d === 'string') throw bad(`row ${i}: duration ${d} (or give the unshelve marker to end a shelving)`);
        until = now + d;
      }
      return { k, until, note: noteOf(row, i) };
    });
    const user = req.gate.principal.username;
    const out: Alarm[] = [];
    for (const { k, until, note } of items) out.push(...(await e.shelve([k], until, { user }, note)));
    return HGrid.fromRows(out.map((a) => alarmRow(req, e, a)), HDict.EMPTY, ALARM_COLS);
  },
};

export const alarmHistoryOp: Op = {
  name: 'alarmHistory',
  summary: 'Alarm transitions, newest first (optional alarmId, condRef, sourceRef, filter, limit)',
  methods: ['GET', 'POST'],
  permission: 'MODEL_READ',
  async run(req) {
    const e = engine(req);
    const row = req.grid.rows[0] ?? HDict.EMPTY;
    const limit = limitOf(row);
    const m = req.ctx.model;
    const want = (tag: string): string | undefined => {
      const v = row.get(tag);
      if (v === undefined) return undefined;
      if (!(v instanceof HRef)) throw bad(`${tag} must be a Ref`);
      return m.resolveId(v.id) ?? v.id;
    };
    let condId = want('condRef');
    let sourceId = want('sourceRef');
    const idv = row.get('alarmId');
    if (idv !== undefined) ({ condId, sourceId } = splitAlarmId(idv, ''));
    const keepSource = sourceFilter(req, row);
    const keep = (x: AlarmLogEntry): boolean =>
      (condId === undefined || x.condId === condId) && (sourceId === undefined || x.sourceId === sourceId) && visible(req, x.sourceId) && (keepSource === undefined || keepSource(x.sourceId));
    const entries = await e.readLog(keep, limit);
    const rows = entries.map((x) => {
      const d = newRecord();
      // Held while the clock could not be trusted: no date yet (docs/clock.md).
      if (x.ts > 0) d.ts = new HDateTime(x.ts, req.ctx.info.tz);
      d.alarmId = `${x.condId}|${x.sourceId}`;
      d.condRef = ref(req, x.condId);
      d.sourceRef = ref(req, x.sourceId);
      d.event = x.event;
      d.detail = x.detail;
      d.priority = new HNumber(x.priority);
      if (x.val !== null) d.val = x.val;
      if (x.user !== null) d.user = x.user;
      if (x.note !== null) d.note = x.note;
      if (x.until !== null) d.until = new HDateTime(x.until, req.ctx.info.tz);
      return HDict.adopt(d);
    });
    return HGrid.fromRows(rows, HDict.EMPTY, ['ts', 'alarmId', 'condRef', 'sourceRef', 'event', 'detail', 'priority', 'val', 'user', 'note', 'until']);
  },
};

export const alarmOps: readonly Op[] = [alarmsOp, alarmAckOp, alarmShelveOp, alarmHistoryOp];
