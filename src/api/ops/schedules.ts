/**
 * The `schedules` op (docs/schedules.md): each schedule's value now and its next transitions,
 * in its zone. Optional `id` (one schedule, by id or fully qualified name) and `count` (how many
 * transitions, default 5, at most 100). The caller sees the schedules it may read.
 */
import type { Scheduler } from '../../schedule/scheduler.js';
import { HDateTime, HDict, HGrid, HNumber, HRef, newRecord } from '../../haystack/values.js';
import { ErrorCodes, HayloftError } from '../../lib/errors.js';
import type { Op, OpRequest } from '../op.js';

const DEFAULT_COUNT = 5;
const MAX_COUNT = 100;

function scheduler(req: OpRequest): Scheduler {
  const s = req.ctx.schedules;
  if (s === undefined) throw new HayloftError(ErrorCodes.UNKNOWN_OP, 'this server runs no schedules');
  return s;
}

export const schedulesOp: Op = {
  name: 'schedules',
  summary: "Each schedule's value now and its next transitions (optional id, count)",
  methods: ['GET', 'POST'],
  permission: 'MODEL_READ',
  run(req) {
    const s = scheduler(req);
    const m = req.ctx.model;
    const row = req.grid.rows[0] ?? HDict.EMPTY;
    const cv = row.get('count');
    if (cv !== undefined && !(cv instanceof HNumber && Number.isInteger(cv.val) && cv.val >= 1)) throw new HayloftError(ErrorCodes.BAD_REQUEST, 'count must be a whole Number, 1 or more');
    const count = Math.min(MAX_COUNT, cv instanceof HNumber ? cv.val : DEFAULT_COUNT);
    let ids = s.ids();
    const idv = row.get('id');
    if (idv !== undefined) {
      const id = idv instanceof HRef ? m.resolveId(idv.id) : undefined;
      const rec = id === undefined ? undefined : m.get(id);
      if (id === undefined || rec === undefined || !rec.has('schedule') || !req.gate.readable(rec)) {
        throw new HayloftError(ErrorCodes.NOT_FOUND, `no schedule ${idv instanceof HRef ? `@${idv.id}` : '(id must be a Ref)'}`);
      }
      ids = [id];
    }
    const rows: HDict[] = [];
    for (const id of ids) {
      const rec = m.get(id);
      const st = s.state(id, count);
      if (rec === undefined || st === undefined || !req.gate.readable(rec)) continue;
      const d = newRecord();
      d.id = new HRef(id, m.displayOf(id));
      const dis = rec.get('dis');
      if (typeof dis === 'string') d.dis = dis;
      d.tz = st.tz.name;
      d.priority = new HNumber(st.level);
      d.pointRefs = Object.freeze(st.points.map((p) => new HRef(p, m.displayOf(p))));
      d.val = st.val;
      const first = st.next[0];
      if (first !== undefined) {
        d.nextTs = new HDateTime(first.ts, st.tz);
        d.nextVal = first.val;
      }
      d.next = Object.freeze(st.next.map((x) => HDict.of({ ts: new HDateTime(x.ts, st.tz), val: x.val })));
      rows.push(HDict.adopt(d));
    }
    return HGrid.fromRows(rows, HDict.EMPTY, ['id', 'dis', 'tz', 'priority', 'pointRefs', 'val', 'nextTs', 'nextVal', 'next']);
  },
};

export const scheduleOps: readonly Op[] = [schedulesOp];
