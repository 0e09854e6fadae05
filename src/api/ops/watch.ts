/**
 * The watch ops of docs/spec/interface.md: watchSub (open, or append to, a watch), watchPoll (changes since
 * the last poll, or all with `refresh`) and watchUnsub (remove points, or `close`). They read the
 * grid, decide who the caller is and what it may see, and leave the rest to the WatchManager.
 *
 * Permissions: WATCH for the ops (checked by the server), and MODEL_READ and WATCH on each point;
 * a point the caller may not read is answered as unknown, like one that does not exist.
 */
import { HDict, HGrid, HRef, type HVal } from '../../haystack/values.js';
import { ErrorCodes, HayloftError } from '../../lib/errors.js';
import { type Visible, WATCH_COLS, type WatchAnswer } from '../../watch/index.js';
import { type Op, type OpRequest } from '../op.js';

function badRequest(message: string): HayloftError {
  return new HayloftError(ErrorCodes.BAD_REQUEST, message);
}

/** Watches belong to the user the request acts as (the impersonated one under X-IMPERSONATE). */
function ownerOf(req: OpRequest): string {
  return req.gate.principal.userId;
}

/** What the caller may see of a watch: the gate's answer, as push asks it too. */
function visibleOf(req: OpRequest): Visible {
  return req.gate.watchVisible();
}

function watchIdOf(req: OpRequest, required: true): string;
function watchIdOf(req: OpRequest, required: false): string | undefined;
function watchIdOf(req: OpRequest, required: boolean): string | undefined {
  const v = req.grid.meta.get('watchId');
  if (v === undefined) {
    if (required) throw badRequest(`${req.op} needs the meta watchId (a Str, as watchSub returned it)`);
    return undefined;
  }
  if (typeof v !== 'string' || v === '') throw badRequest('watchId must be a non-empty Str, as watchSub returned it');
  return v;
}

/** A marker flag in meta (`refresh`, `close`): present and not false. */
function flag(meta: HDict, name: string): boolean {
  const v = meta.get(name);
  return v !== undefined && v !== false;
}

function idsOf(req: OpRequest): string[] {
  return req.grid.rows.map((row, i) => {
    const ref = row.get('id');
    if (!(ref instanceof HRef)) throw badRequest(`rows[${i}].id must be a Ref (a point id or fully qualified name)`);
    return ref.id;
  });
}

function answer(a: WatchAnswer): HGrid {
  return HGrid.fromRows(a.rows, HDict.of({ watchId: a.watchId, lease: a.lease }), WATCH_COLS);
}

export const watchSubOp: Op = {
  name: 'watchSub',
  summary: 'Open a watch on points (or append points to one); answers their current values',
  methods: ['POST'],
  permission: 'WATCH',
  run(req) {
    const meta = req.grid.meta;
    const watchId = watchIdOf(req, false);
    const dis = meta.get('watchDis');
    if (dis !== undefined && typeof dis !== 'string') throw badRequest('watchDis must be a Str');
    const lease: HVal | undefined = meta.get('lease');
    return answer(
      req.ctx.watches.subscribe(ownerOf(req), {
        ...(watchId === undefined ? {} : { watchId }),
        ...(dis === undefined ? {} : { dis }),
        ...(lease === undefined ? {} : { lease }),
        ids: idsOf(req),
        visible: visibleOf(req),
      }),
    );
  },
};

export const watchPollOp: Op = {
  name: 'watchPoll',
  summary: 'Values of the points of a watch that changed since the last poll (all with refresh)',
  methods: ['POST'],
  permission: 'WATCH',
  run(req) {
    const a = req.ctx.watches.poll(ownerOf(req), watchIdOf(req, true), { refresh: flag(req.grid.meta, 'refresh'), visible: visibleOf(req) });
    return answer(a);
  },
};

export const watchUnsubOp: Op = {
  name: 'watchUnsub',
  summary: 'Remove points from a watch, or close it (close marker)',
  methods: ['POST'],
  permission: 'WATCH',
  run(req) {
    const watchId = watchIdOf(req, true);
    // With `close` the body is ignored whatever it holds: the WideSky client sends rows of
    // `r:undefined` when it is given no points, and closing must not fail on them.
    if (flag(req.grid.meta, 'close')) req.ctx.watches.close(ownerOf(req), watchId);
    else req.ctx.watches.unsubscribe(ownerOf(req), watchId, idsOf(req));
    return HGrid.empty();
  },
};

export const watchOps: readonly Op[] = [watchSubOp, watchPollOp, watchUnsubOp];
