/**
 * End-to-end tests of connectors (test/poller/*-http.test.ts) over real HTTP: records built the
 * same way for every driver, waiting for a record's status, and a watch polled until a point
 * shows what a test waits for. No fixed sleeps: waits ask again every 100 ms until a generous
 * deadline (the tests share a loaded 2-core machine; a deadline bounds a hang, it is not a
 * performance assertion), and throw on it instead of asserting, so a test's assertion count does
 * not depend on how fast the machine is.
 */
import { type HDict, type HGrid, HNumber, HRef, type HVal, MARKER } from '../../src/haystack/values.js';
import type { Running } from './app.js';
import { type Meta, type Rows, hisClient } from './his.js';

/** Calls `f` until it returns something other than undefined, and returns that; throws after `ms`. */
export async function until<T>(what: string, f: () => Promise<T | undefined>, ms = 30_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A value as short text for comparisons: Numbers with their unit (`21.5°C`), others by String. */
export function text(v: HVal | undefined): string | undefined {
  return v === undefined ? undefined : v instanceof HNumber ? `${v.val}${v.unit ?? ''}` : String(v);
}

/**
 * Records of one equip on one connector of a driver: `equipAndConn(connector tags)` gives the equip
 * and the connector, `point(name, address, extra tags)` a `cur` Number point of both.
 */
export function recordMaker(driver: 'modbus' | 'bacnet', equip: string, conn: string) {
  return {
    equipAndConn: (tags: Record<string, HVal>): Record<string, HVal>[] => [
      { id: HRef.of(equip), equip: MARKER, name: equip },
      { id: HRef.of(conn), [`${driver}Conn`]: MARKER, name: conn, ...tags },
    ],
    point: (name: string, cur: string, extra: Record<string, HVal> = {}): Record<string, HVal> => ({
      id: HRef.of(name),
      point: MARKER,
      cur: MARKER,
      name,
      kind: 'Number',
      equipRef: HRef.of(equip),
      [`${driver}ConnRef`]: HRef.of(conn),
      [`${driver}Cur`]: cur,
      ...extra,
    }),
  };
}

/** [id, curVal as text, curStatus] of each row: how a test compares watch rows. */
export function curRows(rows: readonly HDict[]): [string, string | undefined, HVal | undefined][] {
  return rows.map((x) => [(x.get('id') as HRef).id, text(x.get('curVal')), x.get('curStatus')]);
}

/** True when no two samples of a series (`[ts, val]` Zinc text) fall in the same second. */
export function atMostOnePerSecond(series: readonly (readonly [string, string])[]): boolean {
  const seconds = series.map(([ts]) => Math.floor(Date.parse(ts.split(' ')[0] as string) / 1000));
  return seconds.every((s, i) => i === 0 || s > (seconds[i - 1] as number));
}

export interface OpenWatch {
  readonly watchId: string;
  /** What watchSub answered. */
  readonly rows: readonly HDict[];
  /** One watchPoll: the changed rows by id. */
  poll(): Promise<Map<string, HDict>>;
  /** Polls until the row of `id` satisfies `ok`, and returns it. */
  until(what: string, id: string, ok: (row: HDict) => boolean): Promise<HDict>;
  /** Polls until `done` holds of every row seen changed so far (by id), and returns them. */
  collect(what: string, done: (seen: Map<string, HDict>) => boolean): Promise<Map<string, HDict>>;
}

/** hisClient's calls plus waits on records and watches, as the admin. */
export function connClient(r: Running) {
  const admin = hisClient(r);
  const must = async (op: string, rows: Rows, meta: Meta): Promise<HGrid> => {
    const a = await admin.post(op, rows, meta);
    if (a.status !== 200 || a.grid === undefined) throw new Error(`${op}: ${a.status} ${a.text.slice(0, 300)}`);
    return a.grid;
  };
  return {
    ...admin,
    /** The record once its `tag` (curStatus, connStatus) is `want`. */
    when: (id: string, tag: string, want: string): Promise<HDict> =>
      until(`${tag} ${want} on @${id}`, async () => {
        const x = await admin.rec(id);
        return x.get(tag) === want ? x : undefined;
      }),
    /** Opens a watch on `ids` (a one-minute lease). */
    async watch(ids: readonly string[], dis: string): Promise<OpenWatch> {
      const sub = await must('watchSub', ids.map((id) => ({ id: HRef.of(id) })), { watchDis: dis, lease: new HNumber(1, 'min') });
      const watchId = sub.meta.get('watchId') as string;
      const poll = async (): Promise<Map<string, HDict>> => new Map((await must('watchPoll', [], { watchId })).rows.map((x) => [(x.get('id') as HRef).id, x]));
      return {
        watchId,
        rows: sub.rows,
        poll,
        until: (what, id, ok) =>
          until(what, async () => {
            const row = (await poll()).get(id);
            return row !== undefined && ok(row) ? row : undefined;
          }),
        async collect(what, done) {
          const seen = new Map<string, HDict>();
          return until(what, async () => {
            for (const [k, v] of await poll()) seen.set(k, v);
            return done(seen) ? seen : undefined;
          });
        },
      };
    },
  };
}
