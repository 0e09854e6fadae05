/**
 * The asset model the history tests share, created over HTTP by the admin:
 *
 *   hq (site, New_York) > ahu (equip) > temp   Number °F, New_York
 *                                     > plain  Number (no unit), New_York
 *                                     > fan    Bool, New_York
 *                                     > mode   Str, New_York
 *                                     > live   Number °F, cur (no driver), New_York
 *                                     > nohis  Number, not his
 *                                     > nokind his without kind
 *                                     > coord  his of kind Coord
 *   syd (site, Sydney)                > power  Number kW, Sydney
 *                                     > meter  Number kWh, Sydney
 *   utc                                 point Number, UTC (no site)
 */
import type { Test } from 'tap';
import { HRef, type HVal, MARKER } from '../../src/haystack/values.js';
import type { Clock } from '../../src/lib/clock.js';
import { type Running, startApp } from './app.js';
import { type HisClient, hisClient, ok } from './his.js';

export interface World {
  r: Running;
  admin: HisClient;
}

export const POINTS = ['temp', 'plain', 'fan', 'mode', 'live', 'power', 'meter', 'utc'] as const;

export async function hisWorld(t: Test, opts: { clock?: Clock; dir?: string } = {}): Promise<World> {
  const r = await startApp(t, opts);
  const admin = hisClient(r);
  const pt = (id: string, kind: string | null, extra: Record<string, HVal> = {}): Record<string, HVal> => ({
    id: HRef.of(id),
    point: MARKER,
    his: MARKER,
    name: id,
    ...(kind === null ? {} : { kind }),
    ...extra,
  });
  const hq = { siteRef: HRef.of('hq'), equipRef: HRef.of('ahu'), tz: 'New_York' };
  const syd = { siteRef: HRef.of('syd'), tz: 'Sydney' };
  ok(
    t,
    await admin.post('createRec', [
      { id: HRef.of('hq'), site: MARKER, name: 'hq', tz: 'New_York' },
      { id: HRef.of('ahu'), equip: MARKER, name: 'ahu', siteRef: HRef.of('hq') },
      pt('temp', 'Number', { unit: '°F', ...hq }),
      pt('plain', 'Number', hq),
      pt('fan', 'Bool', hq),
      pt('mode', 'Str', hq),
      pt('live', 'Number', { unit: '°F', cur: MARKER, ...hq }),
      { id: HRef.of('nohis'), point: MARKER, kind: 'Number', name: 'nohis', ...hq },
      pt('nokind', null, hq),
      pt('coord', 'Coord', hq),
      { id: HRef.of('syd'), site: MARKER, name: 'syd', tz: 'Sydney' },
      pt('power', 'Number', { unit: 'kW', ...syd }),
      pt('meter', 'Number', { unit: 'kWh', ...syd }),
      pt('utc', 'Number', { tz: 'UTC' }),
    ]),
    'seed the model',
  );
  return { r, admin };
}
