/**
 * Helpers for the history tests (test/api/his-*.test.ts): hisWrite / hisRead / hisDelete calls
 * over real HTTP, request grids built the way clients build them (meta `id` single-point writes,
 * `vK` columns whose meta carries `id`), and answers flattened to text (`[ts, val]` in Zinc form)
 * so that t.same shows zones, offsets and units exactly as they went over the wire.
 */
import type { Test } from 'tap';
import { parseDateTime } from '../../src/haystack/datetime.js';
import { type HDateTime, HDict, HGrid, HRef, type HVal } from '../../src/haystack/values.js';
import { zincVal } from '../../src/haystack/zinc.js';
import { ADMIN, type Running } from './app.js';
import { type Answer, type CallOptions, errOf, getGrid, gridOf, postGrid } from './http.js';

type Tap = Test;
export type Meta = Readonly<Record<string, HVal>>;
export type Rows = Readonly<Record<string, HVal>> | readonly Readonly<Record<string, HVal>>[];

/** A DateTime from its Zinc text: `dt('2024-03-10T01:30:00-05:00 New_York')`. */
export function dt(text: string): HDateTime {
  return parseDateTime(text);
}

/** Asserts a 200 answer with a grid and returns the grid. */
export function ok(t: Tap, a: Answer, what: string): HGrid {
  t.equal(a.status, 200, `${what}: 200${a.status === 200 ? '' : ` (got ${a.status}: ${a.text.slice(0, 300)})`}`);
  return a.grid ?? HGrid.empty();
}

/** Asserts an error answer: status, error grid (meta err + dis), errCode, and a message matching `dis`. */
export function failed(t: Tap, a: Answer, status: number, code: string, dis?: RegExp, what = ''): void {
  const p = what === '' ? '' : `${what}: `;
  t.equal(a.status, status, `${p}status ${status}${a.status === status ? '' : ` (got ${a.status}: ${a.text.slice(0, 300)})`}`);
  const e = errOf(a);
  t.ok(e, `${p}an error grid (meta err)`);
  t.equal(e?.code, code, `${p}errCode ${code}`);
  t.ok((e?.dis.length ?? 0) > 10, `${p}a message a person can read`);
  if (dis !== undefined) t.match(e?.dis, dis, `${p}the message says what is wrong (${e?.dis ?? ''})`);
}

/** A single-point hisWrite grid: meta id, columns ts and val. */
export function singleWrite(id: string, samples: readonly (readonly [HVal, HVal])[], meta: Meta = {}): HGrid {
  return new HGrid(
    HDict.of({ id: HRef.of(id), ...meta }),
    [
      { name: 'ts', meta: HDict.EMPTY },
      { name: 'val', meta: HDict.EMPTY },
    ],
    samples.map(([ts, val]) => HDict.of({ ts, val })),
  );
}

/**
 * A multi-point hisWrite grid: columns ts, v0..vN (meta id = ids[k]); each row is [ts, v0, v1,
 * ...] with undefined for an absent cell.
 */
export function multiWrite(ids: readonly string[], rows: readonly (readonly (HVal | undefined)[])[]): HGrid {
  const cols = [{ name: 'ts', meta: HDict.EMPTY }, ...ids.map((id, k) => ({ name: `v${k}`, meta: HDict.of({ id: HRef.of(id) }) }))];
  return new HGrid(
    HDict.EMPTY,
    cols,
    rows.map((r) => {
      const cells: Record<string, HVal | undefined> = { ts: r[0] };
      ids.forEach((_, k) => (cells[`v${k}`] = r[k + 1]));
      return HDict.of(cells);
    }),
  );
}

/** Rows of a single-point answer as [ts, val] Zinc text. */
export function series(g: HGrid | undefined): [string, string][] {
  return (g?.rows ?? []).map((r) => [String(r.get('ts')), zincVal(r.get('val') ?? null)]);
}

/** Rows of a multi-point answer as [ts, v0, v1, ...] Zinc text ('' for an absent cell). */
export function table(g: HGrid | undefined): string[][] {
  if (g === undefined) return [];
  const names = g.colNames().filter((n) => n !== 'ts');
  return g.rows.map((r) => [String(r.get('ts')), ...names.map((n) => (r.has(n) ? zincVal(r.get(n) as HVal) : ''))]);
}

/** hisStart and hisEnd of an answer as text. */
export function span(g: HGrid | undefined): [string, string] {
  return [String(g?.meta.get('hisStart')), String(g?.meta.get('hisEnd'))];
}

/** History calls as one bearer token (the admin's by default). */
export function hisClient(r: Running, headers?: Record<string, string>) {
  const o = (x: CallOptions = {}): CallOptions => ({ ...x, headers: { ...(headers ?? r.auth), ...(x.headers ?? {}) } });
  return {
    post: (op: string, rows: Rows, meta: Meta = {}, x: CallOptions = {}) => postGrid(r.base, op, gridOf(rows, meta), o(x)),
    postGrid: (op: string, g: HGrid, x: CallOptions = {}) => postGrid(r.base, op, g, o(x)),
    get: (op: string, params: Readonly<Record<string, HVal>>, x: CallOptions = {}) => getGrid(r.base, op, params, o(x)),
    write: (id: string, samples: readonly (readonly [HVal, HVal])[], x: CallOptions = {}) => postGrid(r.base, 'hisWrite', singleWrite(id, samples), o(x)),
    writeMulti: (ids: readonly string[], rows: readonly (readonly (HVal | undefined)[])[], x: CallOptions = {}) =>
      postGrid(r.base, 'hisWrite', multiWrite(ids, rows), o(x)),
    /** POST hisRead of one point. */
    read: (id: string, range: string, x: CallOptions = {}) => postGrid(r.base, 'hisRead', gridOf({ id: HRef.of(id), range }), o(x)),
    /** POST hisRead of several points (id0..idN). */
    readMulti: (ids: readonly string[], range: string, x: CallOptions = {}) => {
      const row: Record<string, HVal> = { range };
      ids.forEach((id, k) => (row[`id${k}`] = HRef.of(id)));
      return postGrid(r.base, 'hisRead', gridOf(row), o(x));
    },
    /** POST hisRead in the Haystack 4 batch form: rows of id, range in the meta. */
    readBatch: (ids: readonly string[], range: string, x: CallOptions = {}) =>
      postGrid(r.base, 'hisRead', gridOf(ids.map((id) => ({ id: HRef.of(id) })), { range }), o(x)),
    del: (id: string, range: string) => postGrid(r.base, 'hisDelete', gridOf({ range, id: HRef.of(id) }), o()),
    /** A record as read returns it (transient tags included). */
    async rec(id: string): Promise<HDict> {
      const a = await postGrid(r.base, 'read', gridOf({ id: HRef.of(id) }), o());
      if (a.status !== 200 || a.grid === undefined) throw new Error(`read @${id}: ${a.status} ${a.text}`);
      return a.grid.first() ?? HDict.EMPTY;
    },
    /** Everything a point holds, as [ts, val] text in the point's zone. */
    async all(id: string): Promise<[string, string][]> {
      const a = await postGrid(r.base, 'hisRead', gridOf({ id: HRef.of(id), range: '1970-01-01,2100-01-01' }), o());
      if (a.status !== 200) throw new Error(`hisRead @${id}: ${a.status} ${a.text}`);
      return series(a.grid);
    },
  };
}

export type HisClient = ReturnType<typeof hisClient>;

/** hisSize, hisStart, hisEnd of a record as text (undefined when absent). */
export function hisStats(rec: HDict): { size: string | undefined; start: string | undefined; end: string | undefined } {
  const s = (n: string): string | undefined => (rec.has(n) ? zincVal(rec.get(n) as HVal) : undefined);
  return { size: s('hisSize'), start: s('hisStart'), end: s('hisEnd') };
}

/** Logs the admin in again (after a manual clock moved past the token's lifetime); r.auth follows. */
export async function relogin(r: Running): Promise<void> {
  const a = await r.login(ADMIN.username, ADMIN.password);
  if (a.status !== 200) throw new Error(`admin login failed: ${a.status}`);
  r.token = a.body.access_token as string;
  r.auth = { authorization: `Bearer ${r.token}` };
}
