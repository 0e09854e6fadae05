/**
 * Helpers for the uplink tests (test/sync/): an edge's config file pointing at a cloud, the edge
 * model the tests share, and histories read back over HTTP as `ts -> value` maps so two Hayloft
 * instances can be compared sample for sample.
 *
 * The shared edge model (created by `seedEdge`):
 *
 *   hq (site, UTC) > ahu (equip) > temp   Number °F, his
 *                                > fan    Bool, his
 *                                > mode   Str, his
 *                                > nohis  Number, no his (not synced)
 *   syd (site, Sydney)           > power  Number kW, his, Sydney
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Test } from 'tap';
import { HNumber, HRef, type HVal, MARKER } from '../../src/haystack/values.js';
import { zincVal } from '../../src/haystack/zinc.js';
import { ADMIN, CLIENT, type Running } from './app.js';
import { type Answer, gridOf, postGrid } from './http.js';
import { tempDir } from './tmp.js';

export function uplinkSection(cloudBase: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    url: cloudBase,
    clientId: CLIENT.id,
    clientSecret: CLIENT.secret,
    username: ADMIN.username,
    password: ADMIN.password,
    scanIntervalMs: 50,
    retryMinMs: 20,
    retryMaxMs: 200,
    timeoutMs: 5000,
    ...extra,
  };
}

/** Writes a config file with the uplink section; returns its path (for HAYLOFT_CONFIG). */
export function configFile(t: Test, section: Record<string, unknown>, dir = tempDir(t)): string {
  const f = path.join(dir, 'hayloft.json');
  writeFileSync(f, JSON.stringify({ uplink: section }));
  return f;
}

export async function post(t: Test, r: { base: string; auth: Record<string, string> }, op: string, rows: Record<string, HVal> | Record<string, HVal>[], meta: Record<string, HVal> = {}): Promise<Answer> {
  const a = await postGrid(r.base, op, gridOf(rows, meta), { headers: r.auth });
  if (a.status !== 200) t.fail(`${op}: ${a.status} ${a.text.slice(0, 300)}`);
  return a;
}

export async function seedEdge(t: Test, edge: Running): Promise<void> {
  const pt = (id: string, kind: string, extra: Record<string, HVal> = {}): Record<string, HVal> => ({
    id: HRef.of(id),
    point: MARKER,
    his: MARKER,
    name: id,
    kind,
    siteRef: HRef.of('hq'),
    equipRef: HRef.of('ahu'),
    tz: 'UTC',
    ...extra,
  });
  await post(t, edge, 'createRec', [
    { id: HRef.of('hq'), site: MARKER, name: 'hq', dis: 'Headquarters', tz: 'UTC', area: HNumber.of(1200, 'ft²') },
    { id: HRef.of('ahu'), equip: MARKER, name: 'ahu', siteRef: HRef.of('hq') },
    pt('temp', 'Number', { unit: '°F', sensor: MARKER }),
    pt('fan', 'Bool'),
    pt('mode', 'Str'),
    { id: HRef.of('nohis'), point: MARKER, name: 'nohis', kind: 'Number', siteRef: HRef.of('hq'), equipRef: HRef.of('ahu') },
    { id: HRef.of('syd'), site: MARKER, name: 'syd', tz: 'Sydney' },
    { id: HRef.of('power'), point: MARKER, his: MARKER, name: 'power', kind: 'Number', unit: 'kW', siteRef: HRef.of('syd'), tz: 'Sydney' },
  ]);
}

/** A record read by id or fully qualified name; undefined when unknown. */
export async function readRec(r: { base: string; auth: Record<string, string> }, id: string): Promise<Record<string, string> | undefined> {
  const a = await postGrid(r.base, 'read', gridOf({ id: HRef.of(id) }), { headers: r.auth });
  const row = a.grid?.first();
  if (row === undefined || !row.has('id')) return undefined;
  const out: Record<string, string> = {};
  for (const [k, v] of row) out[k] = zincVal(v);
  return out;
}

/** A point's whole history as epoch ms -> value (Zinc text, unit included). */
export async function history(r: { base: string; auth: Record<string, string> }, id: string): Promise<Map<number, string>> {
  const a = await postGrid(r.base, 'hisRead', gridOf({ id: HRef.of(id), range: '1970-01-02,2100-01-01' }), { headers: r.auth });
  if (a.status !== 200) throw new Error(`hisRead @${id}: ${a.status} ${a.text.slice(0, 200)}`);
  const out = new Map<number, string>();
  for (const row of a.grid?.rows ?? []) {
    const ts = row.get('ts') as { epochMs: number };
    out.set(ts.epochMs, zincVal(row.get('val') ?? null));
  }
  return out;
}

/** Polls `f` until it returns true (or throws after `ms`). */
export async function until(what: string, f: () => Promise<boolean> | boolean, ms = 20_000, every = 25): Promise<void> {
  const end = Date.now() + ms;
  for (;;) {
    if (await f()) return;
    if (Date.now() > end) throw new Error(`timed out waiting for: ${what}`);
    await new Promise((r) => setTimeout(r, every));
  }
}

export { type Child, serveChild } from './serve-child.js';
