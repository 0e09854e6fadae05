/**
 * Issue 16: Hayloft as a Sparkplug B edge node, against a real mosquitto (password file; TLS with
 * client certificates), checked by a subscriber that decodes every message with Tahu's schema:
 * NBIRTH/DBIRTH with bdSeq, aliases, datatypes and properties; seq 0-255 without gaps; DDATA
 * values equal to the history written and to curVal; Rebirth on NCMD; DCMD refused and logged;
 * the broker stopped and restarted with the gap filled by historical DDATA and no sample twice in
 * the live stream; a primary host's STATE awaited; a device whose points are all down dies.
 */
import mqtt from 'mqtt';
import t, { type Test } from 'tap';
import { HDateTime, HDict, HNumber, HRef, type HVal, MARKER } from '../../../src/haystack/values.js';
import { UTC } from '../../../src/haystack/tz.js';
import { ManualClock } from '../../../src/lib/clock.js';
import { type UMetric, encode, num } from '../../../src/sync/mqtt/sparkplug.js';
import { ADMIN, type Running, startApp } from '../../helpers/app.js';
import { singleWrite } from '../../helpers/his.js';
import { errOf, gridOf, postGrid } from '../../helpers/http.js';
import { BROKER_USER, type Broker, type Seen, SparkplugSubscriber, brokerMissing, startBroker } from '../../helpers/mosquitto.js';
import { tempDir } from '../../helpers/tmp.js';
import { post, readRec, until } from '../../helpers/uplink.js';
import { writeFileSync } from 'node:fs';
import path from 'node:path';

const missing = brokerMissing();
if (missing !== null) t.plan(0, missing);

const GROUP = 'Plant1';
const NODE = 'edge-1';

function mqttConfig(t: Test, broker: Broker, extra: Record<string, unknown> = {}): string {
  const f = path.join(tempDir(t), 'hayloft.json');
  const tls = broker.tls === null ? {} : { caFile: broker.tls.ca, certFile: broker.tls.clientCert, keyFile: broker.tls.clientKey };
  writeFileSync(f, JSON.stringify({ mqtt: { url: broker.url, ...BROKER_USER, ...tls, groupId: GROUP, edgeNodeId: NODE, publishIntervalMs: 100, retryMinMs: 50, retryMaxMs: 300, keepaliveS: 5, ...extra } }));
  return f;
}

async function seed(t: Test, edge: Running): Promise<void> {
  const pt = (id: string, kind: string, extra: Record<string, HVal> = {}): Record<string, HVal> => ({
    id: HRef.of(id),
    point: MARKER,
    his: MARKER,
    cur: MARKER,
    name: id,
    kind,
    siteRef: HRef.of('hq'),
    equipRef: HRef.of('ahu'),
    tz: 'UTC',
    ...extra,
  });
  await post(t, edge, 'createRec', [
    { id: HRef.of('hq'), site: MARKER, name: 'hq', tz: 'UTC' },
    { id: HRef.of('ahu'), equip: MARKER, name: 'ahu', siteRef: HRef.of('hq') },
    { id: HRef.of('boiler'), equip: MARKER, name: 'boiler', siteRef: HRef.of('hq') },
    pt('temp', 'Number', { unit: '°F', dis: 'Supply temp', sensor: MARKER }),
    pt('fan', 'Bool', { writable: MARKER }),
    pt('mode', 'Str'),
    { id: HRef.of('sp'), point: MARKER, name: 'sp', kind: 'Number', unit: '°F', siteRef: HRef.of('hq'), equipRef: HRef.of('boiler') },
  ]);
  // As a driver reads it (clients do not set curVal).
  edge.app.points.setCur('sp', { curVal: HNumber.of(70, '°F'), curStatus: 'ok' });
}

async function hisWrite(t: Test, edge: Running, id: string, samples: [number, number | boolean | string][]): Promise<void> {
  const rows: [HVal, HVal][] = samples.map(([ts, v]) => [new HDateTime(ts, UTC), typeof v === 'number' ? HNumber.of(v, id === 'temp' ? '°F' : null) : v]);
  const a = await postGrid(edge.base, 'hisWrite', singleWrite(id, rows), { headers: edge.auth });
  if (a.status !== 200) t.fail(`hisWrite ${id}: ${a.status} ${a.text.slice(0, 200)}`);
}

/** Metric values by point alias from DDATA: [timestamp, value, historical]. */
function samplesOf(sub: SparkplugSubscriber, alias: number): { ts: number; value: unknown; historical: boolean }[] {
  const out: { ts: number; value: unknown; historical: boolean }[] = [];
  for (const m of sub.of('DDATA')) {
    for (const x of m.payload.metrics ?? []) {
      // Metrics with properties are quality reports, not samples.
      if (x.alias !== undefined && x.alias !== null && num(x.alias) === alias && x.properties === undefined) out.push({ ts: num(x.timestamp), value: x.value, historical: x.isHistorical === true });
    }
  }
  return out;
}

/** A metric's value and quality as a host holds them: its last DBIRTH, then DDATA after it. */
function hostView(sub: SparkplugSubscriber, device: string, alias: number): { value: unknown; quality: number | undefined } {
  let value: unknown;
  let quality: number | undefined;
  for (const m of sub.seen) {
    if (m.device !== device || (m.type !== 'DBIRTH' && m.type !== 'DDATA')) continue;
    for (const x of m.payload.metrics ?? []) {
      if (num(x.alias) !== alias) continue;
      value = x.value;
      if (x.properties?.Quality !== undefined) quality = num(x.properties.Quality.value);
    }
  }
  return { value, quality };
}

/** Every seq of the node's messages since its last NBIRTH, checked to run 0, 1, 2, ... (mod 256). */
function checkSeq(t: Test, seen: readonly Seen[]): void {
  let expect: number | null = null;
  let bad = 0;
  for (const m of seen) {
    if (!['NBIRTH', 'NDATA', 'DBIRTH', 'DDATA', 'DDEATH'].includes(m.type)) continue;
    const seq = num(m.payload.seq);
    if (m.type === 'NBIRTH') expect = 0;
    if (expect === null || seq !== expect) bad++;
    expect = (seq + 1) % 256;
  }
  t.equal(bad, 0, 'seq runs 0-255 from each NBIRTH without a gap');
}

function birthMetrics(m: Seen): Map<string, UMetric> {
  return new Map((m.payload.metrics ?? []).map((x) => [x.name as string, x]));
}

t.test('births, aliases, properties, DDATA against history and curVal, seq, Rebirth, DCMD refused, NDEATH', async (t) => {
  const broker = await startBroker(t);
  const sub = await SparkplugSubscriber.connect(t, broker);
  const edge = await startApp(t, { env: { HAYLOFT_CONFIG: mqttConfig(t, broker) } });
  await until('NBIRTH', () => sub.of('NBIRTH').length === 1);
  await seed(t, edge);
  // The model changed: born again, with both devices.
  await until('births with the new points', () => sub.of('DBIRTH').some((m) => m.device === 'ahu') && sub.of('DBIRTH').some((m) => m.device === 'boiler'));
  const nbirth = sub.of('NBIRTH').at(-1) as Seen;
  t.equal(nbirth.topic, `spBv1.0/${GROUP}/NBIRTH/${NODE}`);
  const nb = birthMetrics(nbirth);
  t.equal(num(nb.get('bdSeq')?.value), edge.app.edgeNode?.stats().bdSeq, 'NBIRTH carries the bdSeq of the session');
  t.equal(nb.get('Node Control/Rebirth')?.value, false);
  const ahu = birthMetrics(sub.of('DBIRTH').filter((m) => m.device === 'ahu').at(-1) as Seen);
  t.same([...ahu.keys()].sort(), ['fan', 'mode', 'temp'], 'one metric per point of the equip');
  const temp = ahu.get('temp') as UMetric;
  t.equal(temp.type, 'Double');
  t.match(temp.properties, { unit: { value: '°F' }, dis: { value: 'Supply temp' }, id: { value: '@temp' }, Quality: { value: 0 } }, 'unit, dis, Haystack id; BAD quality while it has no value');
  t.equal(ahu.get('fan')?.type, 'Boolean');
  t.match(ahu.get('fan')?.properties, { writable: { value: true } });
  t.equal(ahu.get('mode')?.type, 'String');
  const aliases = [...ahu.values(), ...birthMetrics(sub.of('DBIRTH').filter((m) => m.device === 'boiler').at(-1) as Seen).values()].map((m) => num(m.alias));
  t.equal(new Set(aliases).size, 4, 'aliases unique in the edge node');
  const sp = birthMetrics(sub.of('DBIRTH').filter((m) => m.device === 'boiler').at(-1) as Seen).get('sp') as UMetric;
  // Born with its curVal, or (when the births went out before the driver's first reading) born
  // without a value and BAD, then reported: what a host holds is the driver's reading, GOOD.
  await until('sp as a host sees it', () => {
    const now = hostView(sub, 'boiler', num(sp.alias));
    return now.value === 70 && now.quality === 192;
  });

  // History written now goes out as live DDATA, by alias, with the samples' timestamps.
  const now = Date.now();
  const tempSamples: [number, number][] = [];
  for (let k = 0; k < 30; k++) tempSamples.push([now - 30_000 + k * 1000, 60 + k / 4]);
  await hisWrite(t, edge, 'temp', tempSamples);
  await hisWrite(t, edge, 'fan', [[now - 5000, true], [now - 4000, false]]);
  await hisWrite(t, edge, 'mode', [[now - 3000, 'auto']]);
  const ta = num(temp.alias);
  await until('temp samples', () => samplesOf(sub, ta).length >= 30);
  const got = samplesOf(sub, ta);
  t.same(
    got.map((x) => [x.ts, x.value]),
    tempSamples,
    'every sample once, in order, with its timestamp and value',
  );
  t.notOk(got.some((x) => x.historical), 'live, not historical');
  await until('fan and mode', () => samplesOf(sub, num(ahu.get('fan')?.alias)).length === 2 && samplesOf(sub, num(ahu.get('mode')?.alias)).length === 1);
  t.same(samplesOf(sub, num(ahu.get('fan')?.alias)).map((x) => x.value), [true, false]);
  const rec = await readRec(edge, 'temp');
  t.equal(rec?.curVal, `${tempSamples.at(-1)?.[1]}°F`, 'the last value published is curVal');
  // A point without his: its curVal changes are reported, and counted as live samples.
  const liveBefore = edge.app.edgeNode?.stats().liveSamples ?? NaN;
  edge.app.points.setCur('sp', { curVal: HNumber.of(72.5, '°F') });
  await until('sp change', () => sub.of('DDATA').some((m) => m.device === 'boiler' && (m.payload.metrics ?? []).some((x) => num(x.alias) === num(sp.alias) && x.value === 72.5)));
  t.equal(edge.app.edgeNode?.stats().liveSamples, liveBefore + 1, 'the curVal report counts in hayloft_mqtt_samples_live_total');
  // DDATA timing: the interval gathers changes; a device never gets two DDATA closer than it allows
  // (the bound is a floor, not a deadline: a slow machine only spaces them more).
  const perDevice = new Map<string, number[]>();
  for (const m of sub.of('DDATA')) perDevice.set(m.device as string, [...(perDevice.get(m.device as string) ?? []), num(m.payload.timestamp)]);
  for (const [device, stamps] of perDevice) {
    const close = stamps.slice(1).filter((ts, i) => ts - (stamps[i] as number) < 100 - 5).length;
    t.equal(close, 0, `${device}: DDATA at most once per publish interval`);
  }

  // Rebirth asked by a host: NBIRTH (seq 0, same bdSeq) and every DBIRTH again.
  const births = sub.of('NBIRTH').length;
  const host = await mqtt.connectAsync(broker.url, { ...BROKER_USER });
  t.teardown(() => host.endAsync(true));
  await host.publishAsync(`spBv1.0/${GROUP}/NCMD/${NODE}`, Buffer.from(encode({ timestamp: Date.now(), metrics: [{ name: 'Node Control/Rebirth', type: 'Boolean', value: true }] })));
  await until('rebirth', () => sub.of('NBIRTH').length === births + 1 && sub.seen.at(-1)?.type === 'DBIRTH' && sub.of('DBIRTH').filter((m) => m.device === 'boiler').length >= 2);
  t.equal(num(birthMetrics(sub.of('NBIRTH').at(-1) as Seen).get('bdSeq')?.value), num(nb.get('bdSeq')?.value), 'same bdSeq: same session');

  // DCMD: refused (writable point, but no writes configured), logged with the code; nothing written.
  const before = await readRec(edge, 'fan');
  await host.publishAsync(`spBv1.0/${GROUP}/DCMD/${NODE}/ahu`, Buffer.from(encode({ timestamp: Date.now(), metrics: [{ name: 'fan', type: 'Boolean', value: true }, { name: 'nope', type: 'Double', value: 1 }] })));
  await host.publishAsync(`spBv1.0/${GROUP}/DCMD/${NODE}/ahu`, Buffer.from('not protobuf at all'));
  await until('refusals logged', () => edge.logs.filter((l) => l.includes('HL_MQTT_COMMAND_REFUSED')).length >= 3);
  t.match(edge.logs.join(''), /"metric":"fan".*"why":"DCMD writes are off/);
  t.match(edge.logs.join(''), /"metric":"nope".*"why":"no such metric in the device"/);
  t.same(await readRec(edge, 'fan'), before, 'nothing written');

  checkSeq(t, sub.seen);
  // Stop: an explicit NDEATH with the session's bdSeq.
  const bd = edge.app.edgeNode?.stats().bdSeq;
  await edge.stop();
  await until('NDEATH', () => sub.of('NDEATH').length === 1);
  t.equal(num(birthMetrics(sub.of('NDEATH')[0] as Seen).get('bdSeq')?.value), bd, 'NDEATH bdSeq matches the NBIRTH');
});

t.test('while the clock cannot be trusted, curVal reports wait and go once it is, with the right time (docs/clock.md)', async (t) => {
  const broker = await startBroker(t);
  const sub = await SparkplugSubscriber.connect(t, broker);
  const FLOOR = Date.UTC(2026, 0, 1);
  const clock = new ManualClock(FLOOR - 3_600_000);
  const edge = await startApp(t, { clock, clockTrust: { floorMs: FLOOR, timers: false }, env: { HAYLOFT_CONFIG: mqttConfig(t, broker) } });
  t.notOk(edge.app.clockTrust.trusted(), 'the clock is behind the floor');
  await seed(t, edge);
  await until('births', () => sub.of('DBIRTH').some((m) => m.device === 'boiler') && sub.of('DBIRTH').some((m) => m.device === 'ahu'));
  const sp = num(birthMetrics(sub.of('DBIRTH').filter((m) => m.device === 'boiler').at(-1) as Seen).get('sp')?.alias);
  const tempAlias = num(birthMetrics(sub.of('DBIRTH').filter((m) => m.device === 'ahu').at(-1) as Seen).get('temp')?.alias);
  edge.app.points.setCur('sp', { curVal: HNumber.of(71, '°F') });
  // A client's history (dated by the client) still goes: the pass that sends it began after the change.
  await hisWrite(t, edge, 'temp', [[FLOOR - 60_000, 20]]);
  await until('the history sample published', () => samplesOf(sub, tempAlias).length === 1);
  const spReports = (): { ts: number; value: unknown }[] => samplesOf(sub, sp).filter((x) => x.value === 71);
  t.same(spReports(), [], 'no curVal report dated by an untrusted clock');

  clock.stepWall(2 * 3_600_000);
  edge.app.clockTrust.check();
  t.ok(edge.app.clockTrust.trusted(), 'NTP set the clock');
  await until('the waiting report', () => spReports().length === 1);
  t.ok((spReports()[0]?.ts ?? 0) >= FLOOR, 'sent once the clock is set, with the set time');
});

t.test('TLS with a client certificate; broker stopped and restarted: the gap goes as historical DDATA', async (t) => {
  const broker = await startBroker(t, { tls: true });
  const sub = await SparkplugSubscriber.connect(t, broker);
  const dir = tempDir(t);
  const edge = await startApp(t, { dir, env: { HAYLOFT_CONFIG: mqttConfig(t, broker) } });
  await seed(t, edge);
  await until('births', () => sub.of('DBIRTH').some((m) => m.device === 'ahu'));
  const alias = num(birthMetrics(sub.of('DBIRTH').filter((m) => m.device === 'ahu').at(-1) as Seen).get('temp')?.alias);
  const t0 = Date.now();
  const all: [number, number][] = [];
  const write = async (from: number, to: number): Promise<void> => {
    const s: [number, number][] = [];
    for (let k = from; k < to; k++) s.push([t0 + k * 100, k]);
    all.push(...s);
    await hisWrite(t, edge, 'temp', s);
  };
  await write(0, 20);
  await until('live', () => samplesOf(sub, alias).length === 20);
  const bdBefore = edge.app.edgeNode?.stats().bdSeq as number;
  await broker.stop();
  await until('offline', () => edge.app.edgeNode?.stats().state === 'offline');
  await write(20, 60);
  await until('backlog counted', () => (edge.app.edgeNode?.stats().backlogSamples ?? 0) > 0);
  const m = await fetch(`${edge.base}/metrics`, { headers: edge.auth }).then((r) => r.text());
  // An estimate from the point's density (`hayloft sync status` counts exactly).
  t.match(m, /hayloft_mqtt_backlog_samples\{connector="mqtt"\} (39|40|41)\n/, '/metrics shows the backlog');
  t.match(m, /hayloft_mqtt_connected\{connector="mqtt"\} 0/);
  await broker.start();
  // A new session: a new bdSeq (one per connection attempt).
  await until('reborn', () => sub.of('NBIRTH').some((x) => num(birthMetrics(x).get('bdSeq')?.value) !== bdBefore)).catch(() => t.fail(JSON.stringify(edge.app.edgeNode?.stats()) + edge.logs.filter((l) => l.includes('mqtt')).join('')));
  await write(60, 70);
  await until('gap filled and live again', () => samplesOf(sub, alias).length >= 70, 30_000);
  const got = samplesOf(sub, alias);
  const live = got.filter((x) => !x.historical).map((x) => x.ts);
  const hist = got.filter((x) => x.historical).map((x) => x.ts);
  t.equal(new Set(live).size, live.length, '0 duplicated in the live stream');
  t.same([...new Set(got.map((x) => x.ts))].sort((a, b) => a - b), all.map((x) => x[0]), '0 lost');
  t.same(hist, all.slice(20, 60).map((x) => x[0]), 'the samples taken while the broker was down, historical, oldest first');
  t.same(live, [...all.slice(0, 20), ...all.slice(60)].map((x) => x[0]), 'live before and after');
  t.equal(got.length, 70, 'nothing sent twice');
  // The cursor moves once the broker's acknowledgement is back (the subscriber may be quicker).
  await until('no backlog', () => edge.app.edgeNode?.stats().backlogSamples === 0);
  checkSeq(t, sub.seen);
});

t.test('primaryHostId: nothing is born before the host is online; its going offline brings NDEATH', async (t) => {
  const broker = await startBroker(t);
  const sub = await SparkplugSubscriber.connect(t, broker);
  const host = await mqtt.connectAsync(broker.url, { ...BROKER_USER });
  t.teardown(() => host.endAsync(true));
  const edge = await startApp(t, { env: { HAYLOFT_CONFIG: mqttConfig(t, broker, { primaryHostId: 'scada' }) } });
  await until('waiting', () => edge.app.edgeNode?.stats().state === 'waiting-host');
  t.equal(sub.of('NBIRTH').length, 0, 'no birth while the host is not online');
  await host.publishAsync('spBv1.0/STATE/scada', JSON.stringify({ online: true, timestamp: Date.now() }), { qos: 1, retain: true });
  await until('born', () => sub.of('NBIRTH').length === 1);
  await host.publishAsync('spBv1.0/STATE/scada', JSON.stringify({ online: false, timestamp: Date.now() + 1 }), { qos: 1, retain: true });
  await until('NDEATH', () => sub.of('NDEATH').length === 1, 5000).catch(() => t.fail(edge.logs.join('')));
  await until('waits again', () => edge.app.edgeNode?.stats().state === 'waiting-host');
  t.equal(sub.of('NBIRTH').length, 1, 'not born again while the host is offline');
  await host.publishAsync('spBv1.0/STATE/scada', '', { qos: 1, retain: true });
});

t.test('a device whose points are all down publishes DDEATH, and DBIRTH when one answers', async (t) => {
  const broker = await startBroker(t);
  const sub = await SparkplugSubscriber.connect(t, broker);
  const edge = await startApp(t, { env: { HAYLOFT_CONFIG: mqttConfig(t, broker) } });
  await seed(t, edge);
  await until('boiler born', () => sub.of('DBIRTH').some((m) => m.device === 'boiler'));
  const births = sub.of('DBIRTH').filter((m) => m.device === 'boiler').length;
  edge.app.points.setCur('sp', { curStatus: 'stale' });
  await until('stale quality', () => sub.of('DDATA').some((m) => m.device === 'boiler' && (m.payload.metrics ?? []).some((x) => num(x.properties?.Quality?.value) === 500)));
  edge.app.points.setCur('sp', { curStatus: 'down' });
  await until('DDEATH', () => sub.of('DDEATH').some((m) => m.device === 'boiler'));
  t.notOk(sub.of('DDEATH').some((m) => m.device === 'ahu'), 'the other device lives on');
  edge.app.points.setCur('sp', { curStatus: 'ok' });
  await until('DBIRTH again', () => sub.of('DBIRTH').filter((m) => m.device === 'boiler').length === births + 1);
  checkSeq(t, sub.seen);
});

t.test('a wrong password: refused, logged with HL_MQTT_UNREACHABLE, retried; the server keeps serving', async (t) => {
  const broker = await startBroker(t);
  const edge = await startApp(t, { env: { HAYLOFT_CONFIG: mqttConfig(t, broker, { password: 'wrong' }) } });
  await until('failures', () => (edge.app.edgeNode?.stats().failures ?? 0) >= 2);
  t.match(edge.logs.join(''), /HL_MQTT_UNREACHABLE/);
  t.notMatch(edge.logs.join(''), /"wrong"/, 'the password is not logged');
  const r = await fetch(`${edge.base}/api/about`, { headers: edge.auth });
  t.equal(r.status, 200);
});

t.test('DCMD with writeLevel and writeAs: written through pointWrite at that level, checked and audited', async (t) => {
  const broker = await startBroker(t);
  const sub = await SparkplugSubscriber.connect(t, broker);
  const edge = await startApp(t, { env: { HAYLOFT_CONFIG: mqttConfig(t, broker, { writeLevel: 8, writeAs: ADMIN.username }) } });
  await seed(t, edge);
  await until('DBIRTH of ahu', () => sub.of('DBIRTH').some((m) => m.device === 'ahu'));
  const host = await mqtt.connectAsync(broker.url, { ...BROKER_USER });
  t.teardown(() => host.endAsync(true));
  const dcmd = (metrics: { name: string; type: string; value: unknown }[]): Promise<unknown> =>
    host.publishAsync(`spBv1.0/${GROUP}/DCMD/${NODE}/ahu`, Buffer.from(encode({ timestamp: Date.now(), metrics } as never)));

  await dcmd([{ name: 'fan', type: 'Boolean', value: true }]);
  await until('level 8 written', () => edge.app.writer.effective('fan').level === 8);
  t.equal(edge.app.writer.effective('fan').val, true, 'the effective value is the command');
  const row = edge.app.writer.array('fan').find((r) => r.level === 8);
  t.match(row?.who, /sparkplug host/, 'who names the MQTT host');
  const audit = await edge.app.writer.readAudit({ pointId: 'fan', limit: 10 });
  t.match(audit[0], { user: ADMIN.username, level: 8, result: 'ok' }, 'audited as the writeAs user');
  t.equal((await readRec(edge, 'fan'))?.writeVal, 'T', 'writeVal on the point');

  // Not writable, and a value of the wrong type: refused and logged, nothing written.
  await dcmd([{ name: 'temp', type: 'Double', value: 1 }, { name: 'fan', type: 'Double', value: 3 }]);
  await until('refusals logged', () => edge.logs.filter((l) => l.includes('HL_MQTT_COMMAND_REFUSED')).length >= 2);
  t.equal(edge.app.writer.effective('fan').val, true, 'the refused command changed nothing');
});

t.test('DCMD as a writeAs user is checked by the gate as its pointWrite would be: without MODEL_READ on the point it is refused', async (t) => {
  const broker = await startBroker(t);
  const sub = await SparkplugSubscriber.connect(t, broker);
  const blind = { username: 'blind@example.com', password: 'blind-password-1' };
  const edge = await startApp(t, { env: { HAYLOFT_CONFIG: mqttConfig(t, broker, { writeLevel: 8, writeAs: blind.username }) } });
  await seed(t, edge);
  // POINT_WRITE on every point at levels 8-17, but MODEL_READ on the boiler's points only.
  const [write, read] = await edge.app.model.create([
    HDict.of({ actionPolicy: MARKER, name: 'writeAll', permissions: ['POINT_WRITE'], pointWriteLevel: HNumber.of(8) }),
    HDict.of({ actionPolicy: MARKER, name: 'readBoiler', permissions: ['MODEL_READ'], filter: 'equipRef == @boiler' }),
  ]);
  const [role] = await edge.app.model.create([HDict.of({ role: MARKER, name: 'blindWriter', actionPolicyRefs: [write?.get('id') as HRef, read?.get('id') as HRef] })]);
  await edge.app.auth.addUser(blind.username, blind.password, (role?.get('id') as HRef).id);
  await until('DBIRTH of ahu', () => sub.of('DBIRTH').some((m) => m.device === 'ahu'));
  const host = await mqtt.connectAsync(broker.url, { ...BROKER_USER });
  t.teardown(() => host.endAsync(true));

  await host.publishAsync(`spBv1.0/${GROUP}/DCMD/${NODE}/ahu`, Buffer.from(encode({ timestamp: Date.now(), metrics: [{ name: 'fan', type: 'Boolean', value: true }] } as never)));
  await until('refused', () => edge.logs.some((l) => l.includes('HL_MQTT_COMMAND_REFUSED') && l.includes('"metric":"fan"')));
  t.match(edge.logs.join(''), /"why":"no record @fan"/, 'a point the writeAs user cannot read looks unknown, as to its pointWrite');
  t.equal(edge.app.writer.array('fan').find((r) => r.level === 8)?.val ?? null, null, 'nothing was written');
  const audit = await edge.app.writer.readAudit({ pointId: 'fan', limit: 10 });
  t.match(audit[0], { user: blind.username, level: 8 }, 'the refusal is audited as the writeAs user');
  t.not(audit[0]?.result, 'ok');

  // The same user's REST pointWrite is refused the same way: one gate.
  const login = await edge.login(blind.username, blind.password);
  const rest = await postGrid(edge.base, 'pointWrite', gridOf({ id: HRef.of('fan'), level: HNumber.of(8), val: true }), { headers: { authorization: `Bearer ${String(login.body.access_token)}` } });
  t.equal(errOf(rest)?.code, 'HL_NOT_FOUND', 'REST refuses it with the same code');
});

t.test('late samples (a backfill, a correction of an old value) go as historical DDATA, also after a restart while the broker is away', async (t) => {
  const broker = await startBroker(t);
  const sub = await SparkplugSubscriber.connect(t, broker);
  const edge = await startApp(t, { env: { HAYLOFT_CONFIG: mqttConfig(t, broker) } });
  await seed(t, edge);
  await until('births', () => sub.of('DBIRTH').some((m) => m.device === 'ahu'));
  const alias = num(birthMetrics(sub.of('DBIRTH').filter((m) => m.device === 'ahu').at(-1) as Seen).get('temp')?.alias);
  const t0 = Date.now() - 3_600_000;
  const at = (from: number, to: number): [number, number][] => Array.from({ length: to - from }, (_, i) => [t0 + (from + i) * 1000, from + i]);
  await hisWrite(t, edge, 'temp', at(0, 20));
  await until('live', () => samplesOf(sub, alias).length === 20);
  await until('acknowledged', () => edge.app.edgeNode?.stats().backlogSamples === 0);

  // Ten seconds before them, filled in later, and sample 5 corrected.
  await hisWrite(t, edge, 'temp', at(-10, 0));
  await hisWrite(t, edge, 'temp', [[t0 + 5000, 500]]);
  await until('the late samples are published', () => samplesOf(sub, alias).length >= 31);
  await until('acknowledged again', () => edge.app.edgeNode?.stats().backlogSamples === 0);
  const late = samplesOf(sub, alias).slice(20);
  t.ok(late.every((x) => x.historical), 'as historical');
  t.same(late.map((x) => x.ts).sort((a, b) => a - b), [...at(-10, 0).map((x) => x[0]), t0 + 5000], 'the backfill and the correction, nothing else again');
  t.equal(late.find((x) => x.ts === t0 + 5000)?.value, 500, 'the corrected value');

  // Written while the broker is away; the edge restarts before it comes back (the marks are on disk).
  await broker.stop();
  await until('offline', () => edge.app.edgeNode?.stats().state === 'offline');
  await hisWrite(t, edge, 'temp', at(-20, -10));
  await until('a backlog', () => (edge.app.edgeNode?.stats().backlogSamples ?? 0) > 0);
  await edge.restart();
  await broker.start();
  await until('published after the restart', () => samplesOf(sub, alias).length >= 41, 30_000);
  const after = samplesOf(sub, alias).slice(31);
  t.same(after.map((x) => [x.ts, x.value, x.historical]), at(-20, -10).map(([ts, v]) => [ts, v, true]), 'historical, oldest first');
  await until('caught up', () => edge.app.edgeNode?.stats().backlogSamples === 0);
  t.equal(samplesOf(sub, alias).length, 41, 'nothing twice');
});
