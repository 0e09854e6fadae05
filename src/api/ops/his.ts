/**
 * History ops (docs/spec/interface.md hisRead / hisWrite, docs/spec/wire-notes.md §5): hisRead (single point, `id0..idN`
 * multi-point, and the Haystack 4 batch form: rows of `id` with `range` in the meta; POST and
 * GET), hisWrite (single point with meta `id`; multi-point with `vK` columns whose meta carries
 * `id`), and hisDelete (as the WideSky client sends it).
 *
 * Zones: samples are stored as UTC instants. Answers are in the zone of the range's DateTime when
 * it has one, else in the points' zone (`tz` tag, else the server's) when they share one, else in
 * `Rel`. `today`/`yesterday` and Date ranges are days of the (first) point's zone.
 *
 * Each point also shows `hisSize`, `hisStart`, `hisEnd`, and a `cur` point without a driver takes a
 * written sample as its current value when it is newer than what it had: point state
 * (model/point-state.ts) sets those: it hears every history write and delete from the store.
 */
import type { HisColumnsWrite, HisKind, HisSample, HisSpan, HisWrite, HistoryStore } from '../../store/history.js';
import { HisGrid } from '../../haystack/his-grid.js';
import { type HisRange, parseRange } from '../../haystack/range.js';
import { REL, type TimeZone } from '../../haystack/tz.js';
import { HDate, HDateTime, HDict, HGrid, HNumber, HRef, type HVal, NA, newRecord } from '../../haystack/values.js';
import { zincVal } from '../../haystack/zinc.js';
import { ErrorCodes, HayloftError } from '../../lib/errors.js';
import { HIS_WRITE_FLOOR_MS } from '../../lib/clock-trust.js';
import { pointUnit, pointValue, pointZone } from '../../model/point-state.js';
import { historizedKind, readHistory } from '../his-points.js';
import { type Op, type OpRequest } from '../op.js';


interface Point {
  id: string;
  rec: HDict;
  ref: HRef;
  kind: HisKind;
  unit: string | null;
  tz: TimeZone;
}

function bad(message: string): HayloftError {
  return new HayloftError(ErrorCodes.BAD_REQUEST, message);
}

function historyOf(req: OpRequest): HistoryStore {
  return req.ctx.history;
}

/** Resolves and checks a point named in a request (`where` says where, for messages). */
function pointOf(req: OpRequest, v: HVal | undefined, where: string, perm: 'HIS_READ' | 'HIS_WRITE'): Point {
  if (!(v instanceof HRef)) throw bad(`${where} must be a Ref naming a point (id or fully qualified name)`);
  const { model, info } = req.ctx;
  const id = model.resolveId(v.id);
  const rec = id === undefined ? undefined : model.get(id);
  // Throws unless the record was found (so the id resolved) and passes every check.
  const kind = historizedKind(req.gate, rec, v.id, perm, where, req.op);
  const [pid, found] = [id as string, rec as HDict];
  return { id: pid, rec: found, ref: new HRef(pid, model.displayOf(pid)), kind, unit: pointUnit(found), tz: pointZone(found, info.tz) };
}

/** Checks one value against a point's kind and unit; returns what is stored. */
function sampleValue(p: Point, v: HVal, where: string): number | boolean | string {
  switch (p.kind) {
    case 'Number':
      if (!(v instanceof HNumber)) throw new HayloftError(ErrorCodes.BAD_VALUE, `${where}: @${p.id} holds Numbers, not ${describe(v)}`);
      if (v.unit !== null && v.unit !== p.unit) {
        throw new HayloftError(
          ErrorCodes.BAD_VALUE,
          p.unit === null
            ? `${where}: @${p.id} has no unit; send plain numbers, not ${v.unit}`
            : `${where}: unit ${v.unit} does not match the unit of @${p.id}, ${p.unit}`,
        );
      }
      return v.val;
    case 'Bool':
      if (typeof v !== 'boolean') throw new HayloftError(ErrorCodes.BAD_VALUE, `${where}: @${p.id} holds Bools, not ${describe(v)}`);
      return v;
    case 'Str':
      if (typeof v !== 'string') throw new HayloftError(ErrorCodes.BAD_VALUE, `${where}: @${p.id} holds Strs, not ${describe(v)}`);
      return v;
  }
}

function describe(v: HVal): string {
  if (v === NA) return 'NA';
  return `${typeof v === 'string' ? 'a Str' : typeof v === 'boolean' ? 'a Bool' : v instanceof HNumber ? 'a Number' : 'that value'} (${zincVal(v)})`;
}

/** Text of a range cell: a Str, or a Date/DateTime that a GET query decoded as Zinc. */
function rangeText(v: HVal | undefined, where: string): string {
  if (typeof v === 'string') return v;
  if (v instanceof HDateTime || v instanceof HDate) return zincVal(v);
  throw bad(`${where} must be a Str holding a range: today, yesterday, first, last, a date, a DateTime, or two joined by a comma`);
}

/** The points and range of a hisRead/hisDelete request, in its three shapes. */
function readRequest(req: OpRequest, perm: 'HIS_READ' | 'HIS_WRITE'): { points: Point[]; range: string } {
  const g = req.grid;
  const metaRange = g.meta.get('range');
  if (metaRange !== undefined) {
    // Haystack 4 batch: rows of id, the range in the meta.
    if (!g.hasCol('id') || g.rows.length === 0) throw bad('a batch request lists the points as rows of id');
    return { points: g.rows.map((r, i) => pointOf(req, r.get('id'), `rows[${i}].id`, perm)), range: rangeText(metaRange, 'meta.range') };
  }
  const row = g.rows[0];
  if (row === undefined) throw bad(`${req.op} needs one row with id (or id0, id1, ...) and range`);
  if (g.rows.length > 1) throw bad(`${req.op} takes one row; name several points with id0, id1, ... in that row`);
  const range = rangeText(row.get('range'), 'range');
  if (row.has('id')) return { points: [pointOf(req, row.get('id'), 'id', perm)], range };
  const points: Point[] = [];
  for (let i = 0; row.has(`id${i}`); i++) points.push(pointOf(req, row.get(`id${i}`), `id${i}`, perm));
  if (points.length === 0) throw bad(`${req.op} needs id (or id0, id1, ...) naming the points`);
  const extra = row.names().find((n) => /^id\d+$/.test(n) && Number(n.slice(2)) >= points.length);
  if (extra !== undefined) throw bad(`${extra} is given but id${points.length} is missing: number the points id0, id1, ... without gaps`);
  return { points, range };
}

function parse(req: OpRequest, points: Point[], text: string): HisRange {
  return parseRange(text, (points[0] as Point).tz, req.ctx.clock.now());
}

/** The zone of an answer: the range's own, the points' shared one, or Rel. */
function answerZone(points: Point[], range: HisRange): TimeZone {
  if (range.kind === 'span' && range.tz !== null) return range.tz;
  const first = (points[0] as Point).tz;
  return points.every((p) => p.tz === first) ? first : REL;
}

interface Series {
  ts: Float64Array | readonly number[];
  val: ArrayLike<number | boolean | string>;
}

async function readSeries(history: HistoryStore, p: Point, range: HisRange): Promise<Series> {
  if (range.kind === 'first' || range.kind === 'last') {
    const s = range.kind === 'first' ? await history.first(p.id) : await history.last(p.id);
    return s === undefined ? { ts: [], val: [] } : { ts: [s.ts], val: [s.val] };
  }
  const cols = await readHistory(history, p.id, p.kind, range.start, range.end);
  return { ts: cols.ts, val: cols.val };
}

function bounds(req: OpRequest, range: HisRange, series: Series[]): [number, number] {
  if (range.kind === 'span') {
    if (range.end !== Infinity) return [range.start, range.end];
    let last = req.ctx.clock.now();
    for (const s of series) if (s.ts.length > 0) last = Math.max(last, (s.ts[s.ts.length - 1] as number) + 1);
    return [range.start, last];
  }
  // first/last: the span of what was found (empty: now).
  let lo = Infinity;
  let hi = -Infinity;
  for (const s of series) {
    for (let i = 0; i < s.ts.length; i++) {
      lo = Math.min(lo, s.ts[i] as number);
      hi = Math.max(hi, (s.ts[i] as number) + 1);
    }
  }
  const now = req.ctx.clock.now();
  return lo === Infinity ? [now, now] : [lo, hi];
}

function toHVal(p: Point, v: number | boolean | string): HVal {
  return pointValue(p.kind, p.unit, v);
}

export const hisReadOp: Op = {
  name: 'hisRead',
  summary: 'Read the history of one or more points over a range',
  methods: ['GET', 'POST'],
  permission: 'HIS_READ',
  async run(req) {
    const { points, range: text } = readRequest(req, 'HIS_READ');
    const range = parse(req, points, text);
    const tz = answerZone(points, range);
    const history = historyOf(req);
    const series = await Promise.all(points.map((p) => readSeries(history, p, range)));
    const [start, end] = bounds(req, range, series);
    const span = { hisStart: new HDateTime(start, tz), hisEnd: new HDateTime(end, tz) };
    const batch = req.grid.meta.has('range');
    if (points.length === 1 && !batch) {
      const p = points[0] as Point;
      const s = series[0] as Series;
      const meta = HDict.of({ id: p.ref, ...span });
      if (p.kind === 'Number') return new HisGrid(meta, s.ts, tz, { kind: 'Number', val: s.val as Float64Array, unit: p.unit });
      if (p.kind === 'Bool') return new HisGrid(meta, s.ts, tz, { kind: 'Bool', val: s.val as boolean[] });
      return new HisGrid(meta, s.ts, tz, { kind: 'Str', val: s.val as string[] });
    }
    // Several points: one row per distinct timestamp, merged in time order.
    const pos = series.map(() => 0);
    const rows: HDict[] = [];
    while (true) {
      let t = Infinity;
      series.forEach((s, k) => {
        const i = pos[k] as number;
        if (i < s.ts.length) t = Math.min(t, s.ts[i] as number);
      });
      if (t === Infinity) break;
      const rec = newRecord();
      rec.ts = new HDateTime(t, tz);
      series.forEach((s, k) => {
        const i = pos[k] as number;
        if (i < s.ts.length && s.ts[i] === t) {
          rec[`v${k}`] = toHVal(points[k] as Point, s.val[i] as number | boolean | string);
          pos[k] = i + 1;
        }
      });
      rows.push(HDict.adopt(rec));
    }
    const cols = [{ name: 'ts', meta: HDict.EMPTY }, ...points.map((p, k) => ({ name: `v${k}`, meta: HDict.of({ id: p.ref }) }))];
    return new HGrid(HDict.of(span), cols, rows);
  },
};

/** Reads and checks a hisWrite request into store writes; throws before anything is written. */
function writeRequest(req: OpRequest): { points: Point[]; writes: (HisWrite | HisColumnsWrite)[] } {
  const g = req.grid;
  const cols: { name: string; point: Point }[] = [];
  const metaId = g.meta.get('id');
  if (metaId !== undefined) {
    if (!g.hasCol('ts') || !g.hasCol('val')) throw bad('hisWrite of one point (meta id) needs columns ts and val');
    cols.push({ name: 'val', point: pointOf(req, metaId, 'meta.id', 'HIS_WRITE') });
  } else {
    if (g.cols.length === 1 && g.cols[0]?.name === 'empty') throw bad('hisWrite needs samples: meta id with columns ts and val, or columns ts and v0, v1, ... whose meta id names the points');
    for (const c of g.cols) {
      if (c.name === 'ts') continue;
      if (!/^v\d+$/.test(c.name)) throw bad(`hisWrite: column ${c.name} is neither ts nor vN (each vN column's meta names its point with id)`);
      cols.push({ name: c.name, point: pointOf(req, c.meta.get('id'), `cols ${c.name} meta id`, 'HIS_WRITE') });
    }
    if (cols.length === 0 || !g.hasCol('ts')) throw bad('hisWrite needs meta id with columns ts and val, or columns ts and v0, v1, ... whose meta id names the points');
  }
  const byPoint = new Map<string, { point: Point; samples: HisSample[] }>();
  for (const { point } of cols) if (!byPoint.has(point.id)) byPoint.set(point.id, { point, samples: [] });
  const only = cols[0]?.point;
  let columns: HisColumnsWrite | undefined;
  if (g instanceof HisGrid && g.values.kind === 'Number' && only?.kind === 'Number') {
    // Decoded as columns (one zone, one unit): check the unit once, hand the columns on as they are.
    if (g.size > 0) sampleValue(only, g.valueAt(0), 'rows[0].val');
    columns = { pointId: only.id, kind: only.kind, ts: g.ts, val: g.values.val };
  } else g.rows.forEach((row, i) => {
    const ts = row.get('ts');
    if (!(ts instanceof HDateTime)) throw new HayloftError(ErrorCodes.BAD_VALUE, `rows[${i}].ts must be a DateTime`);
    for (const { name, point } of cols) {
      const v = row.get(name);
      if (v === undefined) continue;
      (byPoint.get(point.id) as { samples: HisSample[] }).samples.push({ ts: ts.epochMs, val: sampleValue(point, v, `rows[${i}].${name}`) });
    }
  });
  const writes: (HisWrite | HisColumnsWrite)[] = [];
  for (const { point, samples } of byPoint.values()) {
    const had = req.ctx.history.stats(point.id).kind;
    if (had !== undefined && had !== point.kind) {
      throw new HayloftError(ErrorCodes.HIS_KIND, `@${point.id} is of kind ${point.kind} but its history holds ${had} samples: delete its history first (hisDelete) to change its kind`);
    }
    if (columns !== undefined) {
      if (columns.ts.length > 0) writes.push(columns);
    } else if (samples.length > 0) writes.push({ pointId: point.id, kind: point.kind, samples });
  }
  for (const w of writes) beforeFloor(req, w, HIS_WRITE_FLOOR_MS);
  return { points: [...byPoint.values()].map((x) => x.point), writes };
}

/**
 * Samples dated before 2000 come from a writer whose clock is not set (1970 on a device without
 * RTC): filed under that date they would stay wrong for good, here and upstream. The whole
 * request is refused (docs/clock.md).
 */
function beforeFloor(req: OpRequest, w: HisWrite | HisColumnsWrite, floor: number): void {
  let min = Infinity;
  if ('samples' in w) for (const s of w.samples) min = Math.min(min, s.ts);
  else for (let i = 0; i < w.ts.length; i++) min = Math.min(min, w.ts[i] as number);
  if (min >= floor) return;
  const iso = (t: number): string => new Date(t).toISOString();
  throw new HayloftError(
    ErrorCodes.HIS_BEFORE_FLOOR,
    `${req.ctx.model.nameOf(w.pointId)}: a sample is dated ${iso(min)}, before ${iso(floor)}: the writer's clock is not set; nothing was written`,
  );
}

export const hisWriteOp: Op = {
  name: 'hisWrite',
  summary: 'Write history samples of one or more points (all or nothing)',
  methods: ['POST'],
  permission: 'HIS_WRITE',
  largeBody: true,
  async run(req) {
    const { writes } = writeRequest(req);
    const history = historyOf(req);
    // Point state hears the write and shows it (his tags, curVal of a cur point without a driver).
    await history.writeMany(writes);
    return HGrid.empty();
  },
};

export const hisDeleteOp: Op = {
  name: 'hisDelete',
  summary: 'Delete the history samples of points over a range',
  methods: ['POST'],
  permission: 'HIS_WRITE',
  async run(req) {
    const { points, range: text } = readRequest(req, 'HIS_WRITE');
    const range = parse(req, points, text);
    const history = historyOf(req);
    // Every point's span in one commit: all deleted, or on an error none (a point named twice once).
    const spans = new Map<string, HisSpan>();
    for (const p of points) {
      if (spans.has(p.id)) continue;
      if (range.kind === 'span') spans.set(p.id, { pointId: p.id, start: range.start, end: range.end });
      else {
        const s = range.kind === 'first' ? await history.first(p.id) : await history.last(p.id);
        if (s !== undefined) spans.set(p.id, { pointId: p.id, start: s.ts, end: s.ts + 1 });
      }
    }
    await history.deleteSpans([...spans.values()]);
    // A range also takes the rollups retention kept of it (docs/history.md): the buckets it overlaps.
    if (range.kind === 'span' && req.ctx.rollups !== undefined) for (const sp of spans.values()) await req.ctx.rollups.deleteRange(sp.pointId, sp.start, sp.end);
    // Point state hears the delete and reads back the newest sample left: answer once it shows.
    await req.ctx.points.settled();
    return HGrid.empty();
  },
};

export const hisOps: readonly Op[] = [hisReadOp, hisWriteOp, hisDeleteOp];
