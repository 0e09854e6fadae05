/**
 * The objects behind WideSky's GraphQL schema (schema.ts). graphql-js's default resolver reads a
 * field from its parent object, calling it with (args, context) when it is a method, so each
 * type is a small class and the schema needs no resolver map.
 *
 * Permissions as REST, asked of the caller's gate (auth/gate.ts): an entity the caller may not read
 * (MODEL_READ) is not found by any search, lookup or traversal; history needs HIS_READ on the point
 * and is refused for a point hisRead refuses (his-points.ts). Limits: entity sets and traversals
 * are bounded by the model's size; history answers by `maxPoints` data points (documented in
 * docs/api-push-graphql.md), counted over the whole answer.
 */
import type { Gate } from '../../auth/gate.js';
import { writeJsonVal } from '../../haystack/json.js';
import { HCoord, HDate, HDateTime, HDict, HNumber, HRef, HTime, HUri, type HVal, MARKER, kindOf } from '../../haystack/values.js';
import type { Clock } from '../../lib/clock.js';
import { ErrorCodes, HayloftError } from '../../lib/errors.js';
import type { Model } from '../../model/model.js';
import { type AggFunction, type Buckets, type Fill, type PointValue, type Series, aggregate, checkKind } from '../../store/his-aggregate.js';
import type { HisKind, HistoryStore } from '../../store/history.js';
import type { RollupStore } from '../../store/rollups.js';
import { historizedKind, readHistory } from '../his-points.js';

export interface GraphqlLimits {
  /** History data points in one answer, over all time series. */
  maxPoints: number;
}

export interface GraphqlContext {
  model: Model;
  history: HistoryStore;
  /** Rollups of history retention removed (store/rollups.ts): aggregates read them before a point's horizon. */
  rollups?: RollupStore;
  clock: Clock;
  /** The caller's permissions (Gate.OPEN on a server without authentication). */
  gate: Gate;
  limits: GraphqlLimits;
  /** History data points answered so far. */
  points: number;
}

const UNIT_MS: Record<string, number> = {
  MILLISECOND: 1,
  SECOND: 1000,
  MINUTE: 60_000,
  HOUR: 3_600_000,
  DAY: 86_400_000,
  WEEK: 7 * 86_400_000,
};

function bad(message: string): HayloftError {
  return new HayloftError(ErrorCodes.BAD_REQUEST, message);
}

function idOf(rec: HDict): string {
  return (rec.get('id') as HRef).id;
}

// ---- tag values -------------------------------------------------------------------------

/** A tag's value as WideSky's `Tag.value`: the text without its JSON kind prefix. */
export function valueText(v: HVal): string | null {
  if (v === null) return null;
  if (v === MARKER) return 'marker';
  if (typeof v === 'boolean') return String(v);
  if (typeof v === 'string') return v;
  if (v instanceof HNumber) return v.unit === null ? v.numText() : `${v.numText()} ${v.unit}`;
  if (v instanceof HRef) return v.id;
  if (v instanceof HDateTime) return v.tz.formatInstant(v.epochMs, 1);
  if (v instanceof HDate || v instanceof HTime) return v.toString();
  if (v instanceof HUri) return v.val;
  if (v instanceof HCoord) return `${v.lat},${v.lng}`;
  if (Array.isArray(v)) return '[' + (v as readonly HVal[]).map((x) => valueText(x) ?? 'null').join(', ') + ']';
  return writeJsonVal(v);
}

const GEOHASH = '0123456789bcdefghjkmnpqrstuvwxyz';

/** The 12-character geohash of a coordinate (https://en.wikipedia.org/wiki/Geohash). */
export function geohash(lat: number, lng: number): string {
  let latLo = -90;
  let latHi = 90;
  let lngLo = -180;
  let lngHi = 180;
  let out = '';
  let bits = 0;
  let n = 0;
  let even = true;
  while (out.length < 12) {
    if (even) {
      const mid = (lngLo + lngHi) / 2;
      n = n * 2 + (lng >= mid ? 1 : 0);
      if (lng >= mid) lngLo = mid;
      else lngHi = mid;
    } else {
      const mid = (latLo + latHi) / 2;
      n = n * 2 + (lat >= mid ? 1 : 0);
      if (lat >= mid) latLo = mid;
      else latHi = mid;
    }
    even = !even;
    if (++bits === 5) {
      out += GEOHASH[n];
      bits = 0;
      n = 0;
    }
  }
  return out;
}

type KindValue = { __typename: string } & Record<string, unknown>;

/** A value as WideSky's `tagKind` union; null for kinds it has no member for (NA, Dict, Grid...). */
export function kindValue(v: HVal): KindValue | null {
  switch (kindOf(v)) {
    case 'Bool':
      return { __typename: 'Bool', bool: v as boolean };
    case 'Str':
      return { __typename: 'Str', str: v as string };
    case 'Marker':
      return { __typename: 'Marker', isMarker: true };
    case 'Number': {
      const n = v as HNumber;
      return { __typename: 'Number', value: n.val, unit: n.unit };
    }
    case 'Ref':
      return { __typename: 'Ref', ref: (v as HRef).id };
    case 'DateTime': {
      const d = v as HDateTime;
      return { __typename: 'DateTime', dateTime: d.tz.formatInstant(d.epochMs, 1), isoDateTime: d.tz.formatInstant(d.epochMs), unixTime: d.epochMs, timeZone: d.tz.name };
    }
    case 'Date':
      return { __typename: 'Date', date: (v as HDate).toString() };
    case 'Time':
      return { __typename: 'Time', time: (v as HTime).toString() };
    case 'Uri':
      return { __typename: 'Uri', uri: (v as HUri).val };
    case 'Coord': {
      const c = v as HCoord;
      return { __typename: 'Coord', coord: `C(${c.lat},${c.lng})`, geohash: geohash(c.lat, c.lng), latitude: c.lat, longitude: c.lng };
    }
    case 'List': {
      const list = v as readonly HVal[];
      return { __typename: 'List', listJSON: JSON.stringify(list.map((x) => valueText(x))), list: list.map(kindValue) };
    }
    default:
      return null;
  }
}

// ---- traversal ----------------------------------------------------------------------------

/** Values at the end of a path (`equipRef->siteRef`) from a record: refs are followed, lists spread. */
function follow(ctx: GraphqlContext, rec: HDict, path: string): HVal[] {
  const names = path.split('->').map((s) => s.trim());
  if (names.some((n) => n === '')) throw bad(`"${path}" is not a tag path (tag or tag->tag...)`);
  let current: HVal[] = [rec];
  for (let i = 0; i < names.length; i++) {
    const name = names[i] as string;
    const next: HVal[] = [];
    for (const c of current) {
      if (!(c instanceof HDict)) continue;
      const v = name === 'id' ? c.get('id') : c.get(name);
      if (v === undefined) continue;
      const vals = Array.isArray(v) ? (v as readonly HVal[]) : [v];
      for (const x of vals) {
        if (i === names.length - 1) next.push(x);
        else if (x instanceof HRef) {
          const r = ctx.model.get(x.id);
          if (r !== undefined && ctx.gate.readable(r)) next.push(r);
        }
      }
    }
    current = next;
  }
  return current;
}

function refTargets(ctx: GraphqlContext, recs: readonly HDict[], path: string): HDict[] {
  const out = new Map<string, HDict>();
  for (const rec of recs) {
    for (const v of follow(ctx, rec, path)) {
      if (!(v instanceof HRef)) continue;
      const r = ctx.model.get(v.id);
      if (r !== undefined && ctx.gate.readable(r)) out.set(idOf(r), r);
    }
  }
  return [...out.values()];
}

function search(ctx: GraphqlContext, filter: string, limit: number | null | undefined): HDict[] {
  if (typeof limit === 'number' && limit < 0) throw bad('limit must be 0 (no limit) or more');
  return ctx.gate.read(ctx.model, filter, limit ?? 0);
}

interface RelatedArgs {
  filter: string;
  whereTag: string;
  matchesTag?: string | null;
  limit?: number | null;
}

/** Entities matching `filter` whose `whereTag` value equals the `matchesTag` value (default id) of one of `recs`. */
function related(ctx: GraphqlContext, recs: readonly HDict[], a: RelatedArgs): Entities {
  const wanted = new Set<string>();
  for (const rec of recs) {
    for (const v of follow(ctx, rec, a.matchesTag ?? 'id')) {
      const t = v instanceof HRef ? v.id : valueText(v);
      if (t !== null) wanted.add(t);
    }
  }
  const out: HDict[] = [];
  for (const cand of search(ctx, a.filter, 0)) {
    const hit = follow(ctx, cand, a.whereTag).some((v) => {
      const t = v instanceof HRef ? v.id : valueText(v);
      return t !== null && wanted.has(t);
    });
    if (hit) out.push(cand);
    if (a.limit !== null && a.limit !== undefined && a.limit > 0 && out.length >= a.limit) break;
  }
  return new Entities(out);
}

// ---- history ------------------------------------------------------------------------------

interface OffsetArg {
  direction: 'FORWARD' | 'BACK';
  offsetUnits: string;
  offsetSize: number;
}

interface RangeArgs {
  rangeAbsolute?: { start?: string | null; end?: string | null } | null;
  rangeRelative?: { size: number; timeUnit: string; offset?: OffsetArg | null } | null;
}

interface GroupByArg {
  groupByUnits: string;
  groupBySize: number;
  fill?: Fill | null;
  offset?: OffsetArg | null;
}

function offsetMs(o: OffsetArg | null | undefined): number {
  if (o === null || o === undefined) return 0;
  if (!Number.isInteger(o.offsetSize) || o.offsetSize < 0) throw bad('offsetSize must be a whole number, 0 or more');
  const ms = o.offsetSize * (UNIT_MS[o.offsetUnits] as number);
  return o.direction === 'BACK' ? -ms : ms;
}

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})$/;

function instant(text: string | null | undefined, what: string): number | undefined {
  if (text === null || text === undefined) return undefined;
  const t = ISO.test(text) ? Date.parse(text) : NaN;
  if (Number.isNaN(t)) throw new HayloftError(ErrorCodes.BAD_RANGE, `${what} "${text}" is not an ISO 8601 date-time with an offset, e.g. 2019-04-29T03:00:00+00:00`);
  return t;
}

function rangeOf(ctx: GraphqlContext, a: RangeArgs): { start: number; end: number } {
  if (a.rangeAbsolute != null && a.rangeRelative != null) throw new HayloftError(ErrorCodes.BAD_RANGE, 'give rangeAbsolute or rangeRelative, not both');
  const now = ctx.clock.now();
  if (a.rangeAbsolute != null) {
    const start = instant(a.rangeAbsolute.start, 'rangeAbsolute.start');
    const end = instant(a.rangeAbsolute.end, 'rangeAbsolute.end') ?? now;
    if (start === undefined) throw new HayloftError(ErrorCodes.BAD_RANGE, 'rangeAbsolute needs start (end defaults to now)');
    if (!(start < end)) throw new HayloftError(ErrorCodes.BAD_RANGE, 'rangeAbsolute: start must be before end');
    return { start, end };
  }
  if (a.rangeRelative != null) {
    const r = a.rangeRelative;
    if (!Number.isInteger(r.size) || r.size <= 0) throw new HayloftError(ErrorCodes.BAD_RANGE, 'rangeRelative.size must be a whole number above 0');
    const end = now + offsetMs(r.offset);
    return { start: end - r.size * (UNIT_MS[r.timeUnit] as number), end };
  }
  throw new HayloftError(ErrorCodes.BAD_RANGE, 'history needs rangeAbsolute or rangeRelative');
}

interface Stage {
  f: AggFunction;
  allEntities: boolean;
  buckets: Buckets | undefined;
}

const REFUSED: Record<string, string> = {
  DISTINCT: 'DISTINCT',
  MEDIAN: 'MEDIAN',
  MODE: 'MODE',
  TOP: 'TOP',
  BOTTOM: 'BOTTOM',
  PERCENTILE: 'PERCENTILE',
};

function stageOf(f: string, allEntities: boolean | null | undefined, g: GroupByArg | null | undefined): Stage {
  if (REFUSED[f] !== undefined) {
    throw new HayloftError(ErrorCodes.BAD_REQUEST, `${f} is not supported by Hayloft: it needs every sample of a bucket, and history is aggregated in one pass (COUNT, MEAN, SUM, SPREAD, STDDEV, MIN, MAX, FIRST, LAST are)`);
  }
  let buckets: Buckets | undefined;
  if (g != null) {
    if (!Number.isInteger(g.groupBySize) || g.groupBySize <= 0) throw bad('groupBySize must be a whole number above 0');
    buckets = { size: g.groupBySize * (UNIT_MS[g.groupByUnits] as number), offset: offsetMs(g.offset), fill: g.fill ?? 'NULLVALUE' };
  }
  return { f: f as AggFunction, allEntities: allEntities === true, buckets };
}

class DataPoint {
  constructor(
    readonly time: number,
    private readonly v: PointValue,
  ) {}

  get value(): string | null {
    return this.v === null ? null : String(this.v);
  }

  get valueKind(): KindValue | null {
    const v = this.v;
    if (v === null) return null;
    if (typeof v === 'number') return { __typename: 'Number', value: v, unit: null };
    if (typeof v === 'boolean') return { __typename: 'Bool', bool: v };
    return { __typename: 'Str', str: v };
  }
}

class TimeSeries {
  constructor(readonly dataPoints: DataPoint[]) {}
}

export class History {
  constructor(
    private readonly points: readonly HDict[],
    private readonly range: { start: number; end: number },
    private readonly stages: readonly Stage[],
  ) {}

  aggregate(a: { function: string; allEntities?: boolean | null; groupBy?: GroupByArg | null }): History {
    return new History(this.points, this.range, [...this.stages, stageOf(a.function, a.allEntities, a.groupBy)]);
  }

  select(a: { function: string; n?: number | null; allEntities?: boolean | null; groupBy?: GroupByArg | null }): History {
    return new History(this.points, this.range, [...this.stages, stageOf(a.function, a.allEntities, a.groupBy)]);
  }

  async timeSeries(_a: unknown, ctx: GraphqlContext): Promise<TimeSeries[]> {
    const { start, end } = this.range;
    // Every point checked before any is read: hisRead's checks (his-points.ts), not a copy of them.
    const kinds = this.points.map((p) => historizedKind(ctx.gate, p, idOf(p), 'HIS_READ', 'history', 'the history'));
    let series: { s: Series; kind: 'Number' | 'Bool' | 'Str' | null }[] = [];
    for (const [i, p] of this.points.entries()) {
      const id = idOf(p);
      // Aggregates read the rollups where retention removed the raw samples (before the point's
      // horizon), and raw samples from there on, so nothing counts twice (store/rollups.ts).
      // Without an aggregate, a time series is the raw samples there are.
      const horizon = this.stages.length > 0 ? (ctx.rollups?.horizon(id) ?? -Infinity) : -Infinity;
      const cols = await readHistory(ctx.history, id, kinds[i] as HisKind, Math.max(start, horizon), end);
      if (horizon > start && ctx.rollups !== undefined) {
        const rolled = await ctx.rollups.read(id, start, Math.min(end, horizon));
        series.push({ s: { ts: cols.ts, val: cols.val, rolled }, kind: cols.kind ?? rolled.kind });
      } else series.push({ s: { ts: cols.ts, val: cols.val }, kind: cols.kind });
    }
    for (const st of this.stages) {
      for (const x of series) checkKind(st.f, x.kind);
      const room = Math.max(ctx.limits.maxPoints - ctx.points, 0);
      if (st.allEntities) {
        series = [{ s: aggregate(series.map((x) => x.s), st.f, start, end, st.buckets, room), kind: series[0]?.kind ?? null }];
      } else {
        series = series.map((x) => ({ s: aggregate([x.s], st.f, start, end, st.buckets, room), kind: x.kind }));
      }
    }
    const out: TimeSeries[] = [];
    for (const { s } of series) {
      ctx.points += s.ts.length;
      if (ctx.points > ctx.limits.maxPoints) {
        throw new HayloftError(
          ErrorCodes.GRAPHQL_LIMIT,
          `the answer would hold more than ${ctx.limits.maxPoints} history data points: aggregate with groupBy, or read a shorter range or fewer points`,
        );
      }
      const dps = new Array<DataPoint>(s.ts.length);
      for (let i = 0; i < s.ts.length; i++) dps[i] = new DataPoint(s.ts[i] as number, s.val[i] as PointValue);
      out.push(new TimeSeries(dps));
    }
    return out;
  }
}

function historyOf(ctx: GraphqlContext, recs: readonly HDict[], a: RangeArgs & { entityLimit?: number | null }): History {
  let points = recs.filter((r) => r.has('point'));
  if (a.entityLimit != null && a.entityLimit > 0) points = points.slice(0, a.entityLimit);
  return new History(points, rangeOf(ctx, a), []);
}

// ---- entities -----------------------------------------------------------------------------

class TagSummary {
  constructor(
    readonly name: string,
    private readonly vals: readonly HVal[],
  ) {}

  get count(): number {
    return this.vals.length;
  }

  get kind(): string | null {
    const kinds = new Set(this.vals.map((v) => kindOf(v)));
    return kinds.size === 1 ? ([...kinds][0] as string) : kinds.size === 0 ? null : 'mixed';
  }

  values(a: { distinct?: boolean | null }): (string | null)[] {
    const texts = this.vals.map(valueText);
    return a.distinct === true ? [...new Set(texts)] : texts;
  }

  kindValues(a: { distinct?: boolean | null; aggregation?: 'SUM' | 'MAX' | 'MIN' | 'MEAN' | null }): KindValue[] {
    if (a.aggregation != null) {
      let nums = this.vals.filter((v): v is HNumber => v instanceof HNumber).map((n) => n.val);
      if (a.distinct === true) nums = [...new Set(nums)];
      if (nums.length === 0) return [];
      const sum = nums.reduce((x, y) => x + y, 0);
      const v = a.aggregation === 'SUM' ? sum : a.aggregation === 'MEAN' ? sum / nums.length : a.aggregation === 'MAX' ? Math.max(...nums) : Math.min(...nums);
      return [{ __typename: 'Number', value: v, unit: null }];
    }
    const out: KindValue[] = [];
    const seen = new Set<string>();
    for (const v of this.vals) {
      const k = kindValue(v);
      if (k === null) continue;
      if (a.distinct === true) {
        const key = writeJsonVal(v);
        if (seen.has(key)) continue;
        seen.add(key);
      }
      out.push(k);
    }
    return out;
  }
}

function unitsOf(recs: readonly HDict[]): string | null {
  const units = new Set<string>();
  for (const r of recs) {
    const u = r.get('unit');
    if (typeof u === 'string') units.add(u);
  }
  if (units.size === 0) return null;
  return units.size === 1 ? ([...units][0] as string) : 'mixed';
}

class Tag {
  constructor(
    readonly name: string,
    private readonly v: HVal,
  ) {}

  get value(): string | null {
    return valueText(this.v);
  }

  get kindValue(): KindValue | null {
    return kindValue(this.v);
  }
}

export class Entity {
  constructor(readonly rec: HDict) {}

  get id(): string {
    return idOf(this.rec);
  }

  get description(): string {
    const dis = this.rec.get('dis');
    return typeof dis === 'string' ? dis : '';
  }

  name(a: { fullyQualified?: boolean | null }, ctx: GraphqlContext): string {
    if (a.fullyQualified === true) return ctx.model.fqname(this.id) ?? this.id;
    const n = this.rec.get('name');
    return typeof n === 'string' ? n : this.id;
  }

  tags(a: { tagFilter?: (string | null)[] | null }): Tag[] {
    const only = a.tagFilter == null ? undefined : new Set(a.tagFilter.filter((x): x is string => x !== null));
    const names = this.rec.names().filter((k) => only === undefined || only.has(k)).sort();
    return names.map((k) => new Tag(k, this.rec.get(k) as HVal));
  }

  refEntity(a: { refTag: string }, ctx: GraphqlContext): Entity | null {
    const v = this.rec.get(a.refTag);
    if (!(v instanceof HRef)) return null;
    const r = ctx.model.get(v.id);
    return r !== undefined && ctx.gate.readable(r) ? new Entity(r) : null;
  }

  ref(a: { path: string }, ctx: GraphqlContext): Entities {
    return new Entities(refTargets(ctx, [this.rec], a.path));
  }

  search(a: RelatedArgs, ctx: GraphqlContext): Entities {
    return related(ctx, [this.rec], a);
  }

  history(a: RangeArgs, ctx: GraphqlContext): History {
    return historyOf(ctx, [this.rec], a);
  }

  get units(): string | null {
    const u = this.rec.get('unit');
    return typeof u === 'string' ? u : null;
  }
}

export class Entities {
  constructor(readonly recs: readonly HDict[]) {}

  get count(): number {
    return this.recs.length;
  }

  get entity(): Entity[] {
    return this.recs.map((r) => new Entity(r));
  }

  search(a: RelatedArgs, ctx: GraphqlContext): Entities {
    return related(ctx, this.recs, a);
  }

  ref(a: { path: string }, ctx: GraphqlContext): Entities {
    return new Entities(refTargets(ctx, this.recs, a.path));
  }

  tagSummary(a: { tagFilter?: (string | null)[] | null }): TagSummary[] {
    const only = a.tagFilter == null ? undefined : new Set(a.tagFilter.filter((x): x is string => x !== null));
    const by = new Map<string, HVal[]>();
    for (const r of this.recs) {
      for (const [k, v] of r) {
        if (only !== undefined && !only.has(k)) continue;
        let list = by.get(k);
        if (list === undefined) by.set(k, (list = []));
        list.push(v);
      }
    }
    return [...by.keys()].sort().map((k) => new TagSummary(k, by.get(k) as HVal[]));
  }

  get units(): string | null {
    return unitsOf(this.recs);
  }

  history(a: RangeArgs & { entityLimit?: number | null }, ctx: GraphqlContext): History {
    return historyOf(ctx, this.recs, a);
  }
}

/** The `haystack` root. */
export class Haystack {
  search(a: { filter: string; limit?: number | null }, ctx: GraphqlContext): Entities {
    return new Entities(search(ctx, a.filter, a.limit));
  }

  entity(a: { id: string }, ctx: GraphqlContext): Entity | null {
    const text = a.id.startsWith('@') ? a.id.slice(1) : a.id;
    const rec = ctx.model.get(text);
    return rec !== undefined && ctx.gate.readable(rec) ? new Entity(rec) : null;
  }
}

export const ROOT = { haystack: new Haystack() };
