/**
 * pointWrite (Haystack 3/4) and pointWriteAudit.
 *
 * pointWrite takes one row:
 * - `id` only: answers the point's priority array;
 * - `id`, `level` (1-17), `val` (absent or null: relinquish), `who` (Str, optional: the user's
 *   name), `duration` (Number with a time unit, level 8 only): sets the level, then answers the
 *   array.
 * The array is 17 rows: `level`, `levelDis`, `val`, `who`, and `expires` (DateTime) where a
 * level is timed. Reading it needs MODEL_READ of the point; writing needs POINT_WRITE for the
 * point at that level (an action policy's `pointWriteLevel` bounds it). The point writer
 * (model/point-writer.ts) checks and stores the value, and audits every write, refused or not.
 *
 * pointWriteAudit answers the newest audit entries first (optional `id`, `limit`, default 100),
 * of the points the caller may read; it needs POINT_WRITE.
 */
import { HDateTime, HDict, HGrid, HNumber, HRef, type HVal, newRecord } from '../../haystack/values.js';
import { ErrorCodes, HayloftError } from '../../lib/errors.js';
import type { LevelRow } from '../../model/point-writer.js';
import { pointZone } from '../../model/point-state.js';
import { type Op, type OpRequest } from '../op.js';

const AUDIT_DEFAULT_LIMIT = 100;
const AUDIT_MAX_LIMIT = 10_000;

function bad(message: string): HayloftError {
  return new HayloftError(ErrorCodes.BAD_REQUEST, message);
}

/** The point named by the row's id, as the caller may see it (unknown otherwise). */
function visiblePoint(req: OpRequest, v: HVal | undefined): { id: string; rec: HDict } {
  if (!(v instanceof HRef)) throw bad('pointWrite needs id: a Ref naming a writable point (id or fully qualified name)');
  const id = req.ctx.model.resolveId(v.id);
  const rec = id === undefined ? undefined : req.ctx.model.get(id);
  if (id === undefined || rec === undefined || !req.gate.readable(rec)) throw new HayloftError(ErrorCodes.NOT_FOUND, `no record @${v.id}`);
  return { id, rec };
}

function arrayGrid(req: OpRequest, rec: HDict, rows: readonly LevelRow[]): HGrid {
  const tz = pointZone(rec, req.ctx.info.tz);
  const out = rows.map((r) => {
    const d = newRecord();
    d.level = new HNumber(r.level);
    d.levelDis = r.levelDis;
    if (r.val !== null) d.val = r.val;
    if (r.who !== null) d.who = r.who;
    if (r.expires !== null) d.expires = new HDateTime(r.expires, tz);
    return HDict.adopt(d);
  });
  return HGrid.fromRows(out, HDict.EMPTY, ['level', 'levelDis', 'val', 'who', 'expires']);
}

function usernameOf(req: OpRequest, userId: string | undefined): string | null {
  if (userId === undefined) return null;
  const n = req.ctx.model.stored(userId)?.get('username');
  return typeof n === 'string' ? n : userId;
}

export const pointWriteOp: Op = {
  name: 'pointWrite',
  summary: "Read a writable point's priority array, or write one level of it (val null: relinquish)",
  methods: ['GET', 'POST'],
  async run(req) {
    const writer = req.ctx.writer;
    if (req.grid.rows.length !== 1) throw bad('pointWrite takes one row: id, and to write level, val, who, duration');
    const row = req.grid.rows[0] as HDict;
    const level = row.get('level');
    if (level === undefined) {
      await writer.expireDue();
      const { id, rec } = visiblePoint(req, row.get('id'));
      return arrayGrid(req, rec, writer.array(id));
    }
    if (req.method === 'GET') throw new HayloftError(ErrorCodes.METHOD_NOT_ALLOWED, 'pointWrite writes with POST only (GET reads the array: id alone)');
    const ref = row.get('id');
    if (!(ref instanceof HRef)) throw bad('pointWrite needs id: a Ref naming a writable point (id or fully qualified name)');
    const who = row.get('who');
    if (who !== undefined && typeof who !== 'string') throw bad('who must be a Str');
    const p = req.gate.principal;
    // The writer resolves the point and audits whatever comes of it, refusals included.
    await writer.write({
      id: ref.id,
      level: level instanceof HNumber ? level.val : NaN,
      val: row.get('val') ?? null,
      who: who ?? null,
      duration: row.get('duration') ?? null,
      actor: { user: p.username, impersonatedBy: usernameOf(req, p.impersonatedBy) },
      // The gate: MODEL_READ (else the point looks unknown), POINT_WRITE and the highest level.
      authorize: req.gate.authorizeWrite,
    });
    const { id, rec } = visiblePoint(req, ref);
    return arrayGrid(req, rec, writer.array(id));
  },
};

export const pointWriteAuditOp: Op = {
  name: 'pointWriteAudit',
  summary: 'The newest point writes first (who, impersonated by, level, value, duration, result, time)',
  methods: ['GET', 'POST'],
  permission: 'POINT_WRITE',
  async run(req) {
    const row = req.grid.rows[0] ?? HDict.EMPTY;
    let pointId: string | undefined;
    const idv = row.get('id');
    if (idv !== undefined) pointId = visiblePoint(req, idv).id;
    const lv = row.get('limit');
    let limit = AUDIT_DEFAULT_LIMIT;
    if (lv !== undefined) {
      if (!(lv instanceof HNumber) || !Number.isInteger(lv.val) || lv.val < 1) throw bad('limit must be a whole Number, 1 or more');
      limit = Math.min(AUDIT_MAX_LIMIT, lv.val);
    }
    const { model, info } = req.ctx;
    const entries = await req.ctx.writer.readAudit({ ...(pointId === undefined ? {} : { pointId }), limit: limit * 4 });
    const rows: HDict[] = [];
    for (const e of entries) {
      const rec = model.get(e.pointId);
      // Entries of points the caller cannot read (or that are gone) are left out unless unrestricted.
      if (rec !== undefined ? !req.gate.readable(rec) : !req.gate.canAll('MODEL_READ')) continue;
      const d = newRecord();
      d.ts = new HDateTime(e.ts, info.tz);
      d.id = new HRef(e.pointId, model.displayOf(e.pointId));
      d.user = e.user;
      if (e.impersonatedBy !== null) d.impersonatedBy = e.impersonatedBy;
      d.who = e.who;
      if (e.level !== null) d.level = new HNumber(e.level);
      if (e.val !== null) d.val = e.val;
      if (e.durationMs !== null) d.duration = new HNumber(e.durationMs / 1000, 's');
      d.result = e.result;
      if (e.err !== null) d.err = e.err;
      rows.push(HDict.adopt(d));
      if (rows.length >= limit) break;
    }
    return HGrid.fromRows(rows, HDict.EMPTY, ['ts', 'id', 'user', 'impersonatedBy', 'who', 'level', 'val', 'duration', 'result', 'err']);
  },
};

export const pointWriteOps: readonly Op[] = [pointWriteOp, pointWriteAuditOp];
