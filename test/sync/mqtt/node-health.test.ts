/**
 * Issue 32, node health in the fleet's eyes, against a real mosquitto: NBIRTH carries the
 * gateway's figures (version, config checksum, uptime, clock status, free disk, store size,
 * history samples, backlog, points down); NDATA carries them as they change; Node Control/Reboot
 * is refused without commands, refused to a writeAs user who may not administer, and from the
 * service (`hayloft serve`, a child process) ends in a clean NDEATH and the restart exit status.
 */
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import mqtt from 'mqtt';
import t, { type Test } from 'tap';
import { productVersion } from '../../../src/lib/package-dir.js';
import { HDateTime, HDict, HNumber, HRef, type HVal, MARKER } from '../../../src/haystack/values.js';
import { UTC } from '../../../src/haystack/tz.js';
import { type UMetric, encode, num } from '../../../src/sync/mqtt/sparkplug.js';
import { ADMIN, startApp } from '../../helpers/app.js';
import { singleWrite } from '../../helpers/his.js';
import { postGrid } from '../../helpers/http.js';
import { BROKER_USER, type Broker, type Seen, SparkplugSubscriber, brokerMissing, startBroker } from '../../helpers/mosquitto.js';
import { serveChild } from '../../helpers/serve-child.js';
import { tempDir } from '../../helpers/tmp.js';
import { post, until } from '../../helpers/uplink.js';

const missing = brokerMissing();
if (missing !== null) t.plan(0, missing);

function config(t: Test, broker: Broker, extra: Record<string, unknown> = {}): string {
  const f = path.join(tempDir(t), 'hayloft.json');
  writeFileSync(f, JSON.stringify({ mqtt: { url: broker.url, ...BROKER_USER, groupId: 'G', edgeNodeId: 'N', publishIntervalMs: 100, retryMinMs: 50, retryMaxMs: 300, keepaliveS: 5, ...extra } }));
  return f;
}

function metrics(m: Seen | undefined): Map<string, UMetric> {
  return new Map((m?.payload.metrics ?? []).map((x) => [x.name as string, x]));
}

/** A node figure as a host holds it: its last NBIRTH, then NDATA after it. */
function figure(sub: SparkplugSubscriber, name: string): unknown {
  let v: unknown;
  for (const m of sub.seen) {
    if (m.type !== 'NBIRTH' && m.type !== 'NDATA') continue;
    const x = (m.payload.metrics ?? []).find((y) => y.name === name);
    if (x !== undefined) v = typeof x.value === 'object' && x.value !== null ? num(x.value) : x.value;
  }
  return v;
}

function ncmd(metric: string): Buffer {
  return Buffer.from(encode({ timestamp: Date.now(), metrics: [{ name: metric, type: 'Boolean', value: true }] }));
}

t.test('NBIRTH carries the figures of the gateway, NDATA their changes', async (t) => {
  const broker = await startBroker(t);
  const sub = await SparkplugSubscriber.connect(t, broker);
  // No point is published (a new metric would mean a new NBIRTH, which carries the figures too).
  const file = config(t, broker, { filter: 'point and published' });
  const edge = await startApp(t, { env: { HAYLOFT_CONFIG: file } });
  await until('NBIRTH', () => sub.of('NBIRTH').length > 0);
  const nb = metrics(sub.of('NBIRTH').at(-1));
  t.equal(nb.get('Properties/Version')?.value, productVersion(), 'the product version');
  t.equal(nb.get('Properties/Config Checksum')?.value, createHash('sha256').update(readFileSync(file)).digest('hex').slice(0, 16), 'the checksum of the config file');
  t.equal(nb.get('Status/Clock')?.value, 'ok', 'the clock status');
  t.equal(nb.get('Status/Health')?.value, 'ok');
  t.equal(nb.get('Status/Uptime')?.type, 'Int64');
  t.ok(num(nb.get('Storage/Free Bytes')?.value) > 0, 'free disk');
  t.ok(num(nb.get('Storage/Store Bytes')?.value) >= 0, 'the store size');
  t.equal(num(nb.get('Storage/History Samples')?.value), 0, 'no history yet');
  t.equal(num(nb.get('Points/Down')?.value), 0, 'no point down');
  t.equal(num(nb.get('MQTT/Backlog Samples')?.value), 0, 'no backlog');
  t.equal(nb.get('Node Control/Reboot')?.value, false, 'Node Control/Reboot is offered');

  await post(t, edge, 'createRec', [
    { id: HRef.of('a'), point: MARKER, his: MARKER, name: 'a', kind: 'Number', tz: 'UTC' },
    { id: HRef.of('b'), point: MARKER, cur: MARKER, name: 'b', kind: 'Number' },
  ]);
  const rows: [HVal, HVal][] = Array.from({ length: 5 }, (_, i) => [new HDateTime(Date.now() - 10_000 + i * 1000, UTC), HNumber.of(i)]);
  const w = await postGrid(edge.base, 'hisWrite', singleWrite('a', rows), { headers: edge.auth });
  t.equal(w.status, 200, 'hisWrite');
  edge.app.points.setCur('b', { curVal: null, curStatus: 'down', curErr: 'no answer' });
  await until('NDATA: history samples and a point down', () => figure(sub, 'Storage/History Samples') === 5 && figure(sub, 'Points/Down') === 1, 30_000);
  t.ok(sub.of('NDATA').length > 0, 'as NDATA, after the birth');
  const ndata = sub.of('NDATA').flatMap((m) => (m.payload.metrics ?? []).map((x) => x.name));
  t.notOk(ndata.includes('Properties/Version'), 'NDATA carries only what changed');
});

t.test('Node Control/Reboot: refused without commands, refused to a user who may not administer, refused outside the service', async (t) => {
  const broker = await startBroker(t);
  const sub = await SparkplugSubscriber.connect(t, broker);
  const host = await mqtt.connectAsync(broker.url, { ...BROKER_USER });
  t.teardown(() => host.endAsync(true));
  const reader = { username: 'reader@example.com', password: 'reader-password-1' };
  for (const [writeAs, why] of [
    [undefined, /commands are off/],
    [reader.username, /permission denied: a restart needs USER_ADMIN/],
    [ADMIN.username, /cannot restart itself/],
  ] as const) {
    const births = sub.of('NBIRTH').length;
    const edge = await startApp(t, { env: { HAYLOFT_CONFIG: config(t, broker, writeAs === undefined ? {} : { writeAs, writeLevel: 8 }) } });
    const [policy] = await edge.app.model.create([HDict.of({ actionPolicy: MARKER, name: 'readAll', permissions: ['MODEL_READ', 'POINT_WRITE'] })]);
    const [role] = await edge.app.model.create([HDict.of({ role: MARKER, name: 'reader', actionPolicyRefs: [policy?.get('id') as HRef] })]);
    await edge.app.auth.addUser(reader.username, reader.password, (role?.get('id') as HRef).id);
    await until('NBIRTH', () => sub.of('NBIRTH').length > births);
    await host.publishAsync('spBv1.0/G/NCMD/N', ncmd('Node Control/Reboot'));
    await until(`refused (${writeAs ?? 'none'})`, () => edge.logs.some((l) => l.includes('HL_MQTT_COMMAND_REFUSED') && l.includes('Node Control/Reboot')));
    const line = edge.logs.find((l) => l.includes('HL_MQTT_COMMAND_REFUSED') && l.includes('Node Control/Reboot')) as string;
    t.match((JSON.parse(line) as { why: string }).why, why, `writeAs ${writeAs ?? '(none)'}: refused, logged`);
    t.equal(edge.app.edgeNode?.stats().state, 'online', 'still serving');
    await edge.stop();
  }
});

t.test('Node Control/Reboot from the service: a clean NDEATH and the restart exit status', async (t) => {
  const broker = await startBroker(t);
  const sub = await SparkplugSubscriber.connect(t, broker);
  const host = await mqtt.connectAsync(broker.url, { ...BROKER_USER });
  t.teardown(() => host.endAsync(true));
  const child = await serveChild(t, tempDir(t), { HAYLOFT_CONFIG: config(t, broker, { writeAs: ADMIN.username, writeLevel: 8 }) });
  await until('NBIRTH', () => sub.of('NBIRTH').length > 0);
  const bdSeq = num(metrics(sub.of('NBIRTH').at(-1)).get('bdSeq')?.value);
  await host.publishAsync('spBv1.0/G/NCMD/N', ncmd('Node Control/Reboot'));
  const how = await Promise.race([child.exited, new Promise((r) => setTimeout(() => r('still running after 30 s'), 30_000))]);
  t.equal(how, 75, 'exit status 75: systemd starts the service again (SuccessExitStatus, RestartForceExitStatus)');
  await until('NDEATH', () => sub.of('NDEATH').length > 0);
  t.equal(num(metrics(sub.of('NDEATH')[0]).get('bdSeq')?.value), bdSeq, 'the NDEATH of the session');
  const unit = readFileSync(new URL('../../../systemd/hayloft.service', import.meta.url), 'utf8');
  t.match(unit, /^RestartForceExitStatus=75$/m, 'the unit restarts on it');
  t.match(unit, /^SuccessExitStatus=75$/m, 'and does not count it as a failure');
});
