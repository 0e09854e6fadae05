/**
 * The record ops of docs/spec/interface.md: read (by filter with limit, by id or fully qualified name),
 * createRec, updateRec, deleteRec (by id or name, or by filter). They translate grids to model
 * calls; the model validates and commits all-or-nothing.
 */
import { HDict, HGrid, HNumber, HRef } from '../../haystack/values.js';
import { ErrorCodes, HayloftError } from '../../lib/errors.js';
import type { CommitGuard } from '../../model/model.js';
import { type Op, type OpRequest } from '../op.js';

/** Users, roles and policies decide who may do what: changing them needs USER_ADMIN too. */
const SECURITY_MARKERS = ['user', 'role', 'actionPolicy'];

function isSecurityRecord(rec: HDict): boolean {
  return SECURITY_MARKERS.some((m) => rec.has(m));
}

/**
 * Per-record checks for one request, run by the model inside its transaction: permissions. (The
 * drivers' checks of their tags, a `modbusRegMap` parsed whole, the model runs after these for
 * every write: DriverInfo.checkRecord.)
 */
function guardOf(req: OpRequest): CommitGuard {
  const admin = (rec: HDict): void => {
    if (isSecurityRecord(rec)) req.gate.require('USER_ADMIN', `${req.op} of users, roles or action policies`);
  };
  const label = (rec: HDict): string => {
    const id = rec.get('id');
    return id instanceof HRef ? `@${id.id}` : 'a record';
  };
  return {
    visible: req.gate.readable,
    create(rec) {
      req.gate.require('MODEL_CREATE', `creating ${label(rec)}`, rec);
      admin(rec);
    },
    update(old, rec) {
      req.gate.require('MODEL_UPDATE', `updating ${label(old)}`, old);
      req.gate.require('MODEL_UPDATE', `updating ${label(old)} that way`, rec);
      admin(old);
    },
    delete(rec) {
      req.gate.require('MODEL_DELETE', `deleting ${label(rec)}`, rec);
      admin(rec);
    },
  };
}

function badRequest(message: string): HayloftError {
  return new HayloftError(ErrorCodes.BAD_REQUEST, message);
}

/** `limit` absent or 0 means no limit (the WideSky client sends n:0 by default). */
function limitOf(row: HDict): number {
  const l = row.get('limit');
  if (l === undefined) return 0;
  if (!(l instanceof HNumber) || !Number.isInteger(l.val) || l.val < 0) throw badRequest('limit must be a whole Number, 0 or more');
  return l.val;
}

function filterOf(row: HDict): string {
  const f = row.get('filter');
  if (typeof f !== 'string') throw badRequest('filter must be a Str holding a Haystack filter');
  return f;
}

function idsOf(grid: HGrid): string[] {
  return grid.rows.map((row, i) => {
    const ref = row.get('id');
    if (!(ref instanceof HRef)) throw badRequest(`rows[${i}].id must be a Ref (an id or a fully qualified name)`);
    return ref.id;
  });
}

function needRows(req: OpRequest): void {
  if (req.grid.rows.length === 0) throw badRequest(`${req.op} needs at least one row`);
}

function result(rows: readonly HDict[]): HGrid {
  return HGrid.fromRows(rows, HDict.EMPTY, rows.length > 0 ? ['id'] : []);
}

/**
 * The answer to a read of one record, the same grid object for as long as the record is
 * unchanged (the model returns the same immutable view until it changes): encoders can then
 * reuse its whole text, which makes the commonest read (by id) little more than a lookup.
 */
const oneRecordGrids = new WeakMap<HDict, HGrid>();
function oneRecordGrid(rec: HDict): HGrid {
  let g = oneRecordGrids.get(rec);
  if (g === undefined) {
    g = HGrid.fromRows([rec], HDict.EMPTY, ['id']);
    if (rec !== HDict.EMPTY) oneRecordGrids.set(rec, g);
  }
  return g;
}

export const readOp: Op = {
  name: 'read',
  summary: 'Read records by filter, or by id or fully qualified name',
  methods: ['GET', 'POST'],
  permission: 'MODEL_READ',
  run(req) {
    const { grid, ctx } = req;
    const visible = req.gate.readable;
    if (grid.hasCol('filter')) {
      const row = grid.rows[0];
      if (row === undefined) throw badRequest('read by filter needs one row with filter (and optionally limit)');
      return result(req.gate.read(ctx.model, filterOf(row), limitOf(row)));
    }
    if (grid.hasCol('id')) {
      // Haystack convention: an unknown id gives an all-null row, so rows keep request order.
      // A record the caller may not read looks unknown: its existence is not revealed.
      const rows = idsOf(grid).map((id) => {
        const rec = ctx.model.get(id);
        return rec !== undefined && visible(rec) ? rec : HDict.EMPTY;
      });
      if (rows.length === 1) return oneRecordGrid(rows[0] as HDict);
      return HGrid.fromRows(rows, HDict.EMPTY, ['id']);
    }
    throw badRequest('read needs a filter column (with optional limit) or an id column');
  },
};

export const createRecOp: Op = {
  name: 'createRec',
  summary: 'Create records (one per row); returns them with their ids',
  methods: ['POST'],
  permission: 'MODEL_CREATE',
  largeBody: true,
  async run(req) {
    needRows(req);
    return result(await req.ctx.model.create(req.grid.rows, guardOf(req)));
  },
};

export const updateRecOp: Op = {
  name: 'updateRec',
  summary: 'Change, add (value) or remove (-: or x:) tags of records named by id',
  methods: ['POST'],
  permission: 'MODEL_UPDATE',
  largeBody: true,
  async run(req) {
    needRows(req);
    return result(await req.ctx.model.update(req.grid.rows, guardOf(req)));
  },
};

export const deleteRecOp: Op = {
  name: 'deleteRec',
  summary: 'Delete records by id or name, or by filter; refused for referenced records',
  methods: ['GET', 'POST'],
  permission: 'MODEL_DELETE',
  async run(req) {
    const { grid, ctx } = req;
    let ids: string[];
    if (grid.hasCol('filter')) {
      const row = grid.rows[0];
      if (row === undefined) throw badRequest('deleteRec by filter needs one row with filter (and optionally limit)');
      // Only what the caller may read is matched; the guard then checks MODEL_DELETE on each.
      ids = req.gate.read(ctx.model, filterOf(row), limitOf(row)).map((r) => (r.get('id') as HRef).id);
    } else if (grid.hasCol('id')) {
      ids = idsOf(grid);
    } else {
      throw badRequest('deleteRec needs an id column or a filter column');
    }
    if (ids.length === 0) return HGrid.empty();
    return result(await ctx.model.delete(ids, guardOf(req)));
  },
};

export const recordOps: readonly Op[] = [readOp, createRecOp, updateRecOp, deleteRecOp];
