/**
 * `mqtt.deviceBy` other than the default (equip): points grouped into one Sparkplug device per
 * site (`site`), or all in one device named after the edge node (`none`), against Debian's
 * mosquitto. Checked as a host sees it: the DBIRTH topics and metric names, names made unique in a
 * device when two points share one, aliases unique in the node, and live DDATA on the device topic
 * the birth announced.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import t, { type Test } from 'tap';
import { HDateTime, HNumber, HRef, type HVal, MARKER } from '../../../src/haystack/values.js';
import { UTC } from '../../../src/haystack/tz.js';
import { type UMetric, num } from '../../../src/sync/mqtt/sparkplug.js';
import { type Running, startApp } from '../../helpers/app.js';
import { singleWrite } from '../../helpers/his.js';
import { postGrid } from '../../helpers/http.js';
import { BROKER_USER, type Broker, SparkplugSubscriber, brokerMissing, startBroker } from '../../helpers/mosquitto.js';
import { tempDir } from '../../helpers/tmp.js';
import { post, until } from '../../helpers/uplink.js';

const missing = brokerMissing();
if (missing !== null) t.plan(0, missing);

const GROUP = 'Plant2';
const NODE = 'edge-7';

function mqttConfig(t: Test, broker: Broker, deviceBy: string): string {
  const f = path.join(tempDir(t), 'hayloft.json');
  writeFileSync(f, JSON.stringify({ mqtt: { url: broker.url, ...BROKER_USER, groupId: GROUP, edgeNodeId: NODE, deviceBy, publishIntervalMs: 100, retryMinMs: 50, retryMaxMs: 300 } }));
  return f;
}

/**
 * Two sites; the HQ has two equips whose points share names (`temp`), the annex one equip; one
 * point has no site (and no equip) at all.
 */
async function seed(t: Test, edge: Running): Promise<void> {
  const pt = (id: string, name: string, site: string | null, equip: string | null): Record<string, HVal> => {
    const r: Record<string, HVal> = { id: HRef.of(id), point: MARKER, his: MARKER, name, kind: 'Number', unit: '°C', tz: 'UTC' };
    if (site !== null) r.siteRef = HRef.of(site);
    if (equip !== null) r.equipRef = HRef.of(equip);
    return r;
  };
  await post(t, edge, 'createRec', [
    { id: HRef.of('hq'), site: MARKER, dis: 'Head Office', tz: 'UTC' },
    { id: HRef.of('annex'), site: MARKER, name: 'annex', tz: 'UTC' },
    { id: HRef.of('ahu1'), equip: MARKER, name: 'ahu1', siteRef: HRef.of('hq') },
    { id: HRef.of('ahu2'), equip: MARKER, name: 'ahu2', siteRef: HRef.of('hq') },
    { id: HRef.of('ahu3'), equip: MARKER, name: 'ahu3', siteRef: HRef.of('annex') },
    pt('t1', 'temp', 'hq', 'ahu1'),
    pt('t2', 'temp', 'hq', 'ahu2'),
    pt('h2', 'humidity', 'hq', 'ahu2'),
    pt('t3', 'temp', 'annex', 'ahu3'),
    pt('lone', 'outside', null, null),
  ]);
}

/** The last DBIRTH of each device: device -> metric name -> metric. */
function births(sub: SparkplugSubscriber): Map<string, Map<string, UMetric>> {
  const out = new Map<string, Map<string, UMetric>>();
  for (const m of sub.of('DBIRTH')) out.set(m.device as string, new Map((m.payload.metrics ?? []).map((x) => [x.name as string, x])));
  return out;
}

/** The Haystack id a birth metric names (its `id` property, `@id`). */
function idOf(m: UMetric | undefined): string | undefined {
  const v = m?.properties?.id?.value;
  return typeof v === 'string' ? v.slice(1) : undefined;
}

async function hisWrite(t: Test, edge: Running, id: string, ts: number, v: number): Promise<void> {
  const a = await postGrid(edge.base, 'hisWrite', singleWrite(id, [[new HDateTime(ts, UTC), HNumber.of(v, '°C')]]), { headers: edge.auth });
  if (a.status !== 200) t.fail(`hisWrite ${id}: ${a.status} ${a.text.slice(0, 200)}`);
}

/** DDATA samples of an alias: the device topic each came on, and its value. */
function ddataOf(sub: SparkplugSubscriber, alias: number): { device: string | undefined; value: unknown }[] {
  const out: { device: string | undefined; value: unknown }[] = [];
  for (const m of sub.of('DDATA')) for (const x of m.payload.metrics ?? []) if (num(x.alias) === alias && x.properties === undefined) out.push({ device: m.device, value: x.value });
  return out;
}

t.test('deviceBy site: one device per site, named after it; points of a site from several equips; no site: "ungrouped"', async (t) => {
  const broker = await startBroker(t);
  const sub = await SparkplugSubscriber.connect(t, broker);
  const edge = await startApp(t, { env: { HAYLOFT_CONFIG: mqttConfig(t, broker, 'site') } });
  await until('NBIRTH', () => sub.of('NBIRTH').length >= 1);
  await seed(t, edge);
  await until('births of the sites', () => ['Head_Office', 'annex', 'ungrouped'].every((d) => births(sub).has(d)));
  const b = births(sub);
  t.same([...b.keys()].sort(), ['Head_Office', 'annex', 'ungrouped'], 'one device per site (named after it, here its dis with spaces made _), and one for points without a site');
  t.equal(sub.of('DBIRTH').find((m) => m.device === 'Head_Office')?.topic, `spBv1.0/${GROUP}/DBIRTH/edge-7/Head_Office`);
  const hq = b.get('Head_Office') as Map<string, UMetric>;
  t.same([...hq.keys()].sort(), ['humidity', 'temp', 'temp~t2'], 'the HQ device holds the points of both its equips; a name already taken gets ~id');
  t.equal(idOf(hq.get('temp')), 't1');
  t.equal(idOf(hq.get('temp~t2')), 't2');
  t.same([...(b.get('annex') as Map<string, UMetric>).keys()], ['temp'], 'a name is unique per device, not per node');
  t.equal(idOf(b.get('annex')?.get('temp')), 't3');
  t.same([...(b.get('ungrouped') as Map<string, UMetric>).keys()], ['outside']);
  const aliases = [...b.values()].flatMap((d) => [...d.values()].map((m) => num(m.alias)));
  t.equal(new Set(aliases).size, 5, 'aliases unique in the edge node');

  // Live data goes on the topic of the device the point was born in.
  const now = Date.now();
  await hisWrite(t, edge, 't2', now - 2000, 21.5);
  await hisWrite(t, edge, 't3', now - 1000, 18.25);
  const a2 = num(hq.get('temp~t2')?.alias);
  const a3 = num(b.get('annex')?.get('temp')?.alias);
  await until('DDATA of t2 and t3', () => ddataOf(sub, a2).length === 1 && ddataOf(sub, a3).length === 1);
  t.same(ddataOf(sub, a2), [{ device: 'Head_Office', value: 21.5 }]);
  t.same(ddataOf(sub, a3), [{ device: 'annex', value: 18.25 }]);
});

t.test('deviceBy none: every point in one device named after the edge node', async (t) => {
  const broker = await startBroker(t);
  const sub = await SparkplugSubscriber.connect(t, broker);
  const edge = await startApp(t, { env: { HAYLOFT_CONFIG: mqttConfig(t, broker, 'none') } });
  await until('NBIRTH', () => sub.of('NBIRTH').length >= 1);
  await seed(t, edge);
  await until('the birth with every point', () => (births(sub).get('edge-7')?.size ?? 0) === 5);
  const b = births(sub);
  t.same([...b.keys()], ['edge-7'], 'a single device, named after the edge node; no per-equip or per-site device');
  const d = b.get('edge-7') as Map<string, UMetric>;
  t.same([...d.keys()].sort(), ['humidity', 'outside', 'temp', 'temp~t2', 'temp~t3'], 'every point; names made unique with the point id');
  t.same(
    [...d.entries()].map(([name, m]) => [name, idOf(m)]).sort(),
    [
      ['humidity', 'h2'],
      ['outside', 'lone'],
      ['temp', 't1'],
      ['temp~t2', 't2'],
      ['temp~t3', 't3'],
    ],
    'each metric names its point',
  );
  const now = Date.now();
  await hisWrite(t, edge, 'lone', now - 1000, -3.5);
  const al = num(d.get('outside')?.alias);
  await until('DDATA of the point without a site', () => ddataOf(sub, al).length === 1);
  t.same(ddataOf(sub, al), [{ device: 'edge-7', value: -3.5 }]);
  t.notOk(sub.of('DBIRTH').some((m) => m.device !== 'edge-7'), 'no other device was ever born');
});
