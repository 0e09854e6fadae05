/**
 * Alarm notifications by MQTT (src/alarm/mqtt-notify.ts, docs/alarms.md "MQTT"), on the real App
 * whose edge node is connected to mosquitto on 127.0.0.1: each transition is published QoS 1 as
 * JSON on the default topic (or the route's); a broker that is away for a while and comes back
 * gets what happened meanwhile, once, in order; mqtt routes are refused without an mqtt section.
 * Skipped when mosquitto is not installed (scripts/test-deps.sh).
 */
import mqtt from 'mqtt';
import t from 'tap';
import { HNumber, HRef, type HVal, MARKER } from '../../src/haystack/values.js';
import { ErrorCodes } from '../../src/lib/errors.js';
import { type Running, startApp } from '../helpers/app.js';
import { expectError, expectOk, gridOf, postGrid } from '../helpers/http.js';
import { BROKER_USER, brokerMissing, startBroker } from '../helpers/mosquitto.js';
import { until } from '../helpers/uplink.js';

interface Got {
  topic: string;
  body: { id: string; event: string; alarmId: string; priority: number; source: { name: string | null }; val: unknown };
}

function post(r: Running, op: string, rows: Readonly<Record<string, HVal>> | readonly Readonly<Record<string, HVal>>[]) {
  return postGrid(r.base, op, gridOf(rows), { headers: { authorization: `Bearer ${r.token}` } });
}

const missing = brokerMissing();

t.test('published QoS 1 as JSON; a broker away for a while: what happened meanwhile, once, in order', { skip: missing ?? false }, async (t) => {
  const broker = await startBroker(t);
  // A persistent session (clean: false) kept by the broker across its restart: the subscriber misses nothing either.
  const sub = mqtt.connect(broker.url, { ...BROKER_USER, clientId: 'alarm-watcher', clean: false, reconnectPeriod: 100 });
  t.teardown(() => sub.endAsync(true));
  const got: Got[] = [];
  sub.on('message', (topic, payload) => got.push({ topic, body: JSON.parse(payload.toString()) as Got['body'] }));
  await new Promise<void>((ok) => sub.once('connect', () => ok()));
  await sub.subscribeAsync(['hayloft/#', 'site/#'], { qos: 1 });

  const r = await startApp(t, {
    env: { HAYLOFT_MQTT_URL: broker.url, HAYLOFT_MQTT_USERNAME: BROKER_USER.username, HAYLOFT_MQTT_PASSWORD: BROKER_USER.password, HAYLOFT_MQTT_GROUP_ID: 'plant', HAYLOFT_MQTT_EDGE_NODE_ID: 'gw1' },
  });
  await until('connected', () => r.app.edgeNode?.stats().state === 'online');
  expectOk(
    t,
    await post(r, 'createRec', [
      { id: HRef.of('p1'), point: MARKER, cur: MARKER, kind: 'Number', name: 'p1' },
      { id: HRef.of('hi'), alarmCond: MARKER, name: 'hi', alarmOn: 'limit', pointRef: HRef.of('p1'), hiLimit: HNumber.of(10), priority: HNumber.of(5) },
      { id: HRef.of('route'), notifyRoute: MARKER, name: 'bus', mqtt: MARKER },
      { id: HRef.of('route2'), notifyRoute: MARKER, name: 'scada', mqtt: 'site/hq/alarms' },
    ]),
    'a point, a condition, two MQTT routes',
  );
  expectError(t, await post(r, 'createRec', { notifyRoute: MARKER, name: 'bad', mqtt: 'a/+/b' }), 400, ErrorCodes.INVALID_RECORD, /topic/, 'a wildcard topic');
  const set = async (v: number): Promise<void> => {
    r.app.points.setCur('p1', { curVal: HNumber.of(v), curStatus: 'ok' });
    await r.app.alarms.settled();
  };
  const on = (topic: string): string[] => got.filter((g) => g.topic === topic).map((g) => `${g.body.event} ${g.body.alarmId}`);

  await set(11);
  await until('published', async () => {
    await r.app.notifier.tick();
    return on('hayloft/plant/gw1/alarm').length === 1 && on('site/hq/alarms').length === 1;
  });
  const first = got[0] as Got;
  t.same({ event: first.body.event, alarmId: first.body.alarmId, priority: first.body.priority, name: first.body.source.name, val: first.body.val }, { event: 'active', alarmId: 'hi|p1', priority: 5, name: 'p1', val: 'n:11' }, 'the webhook\'s JSON');

  await broker.stop();
  await until('offline', () => r.app.edgeNode?.stats().state !== 'online');
  await set(5);
  expectOk(t, await post(r, 'alarmAck', { alarmId: 'hi|p1' }), 'ack');
  await r.app.notifier.tick();
  t.match(JSON.stringify(await r.app.health()), /mqtt \(default topic\)/, 'health says the route is waiting');
  await broker.start();
  await until('delivered after the broker is back', async () => {
    await r.app.notifier.tick();
    return on('hayloft/plant/gw1/alarm').length >= 3 && on('site/hq/alarms').length >= 3;
  }, 30_000);
  t.same(on('hayloft/plant/gw1/alarm'), ['active hi|p1', 'normal hi|p1', 'ack hi|p1'], 'in order, once, on the default topic');
  t.same(on('site/hq/alarms'), ['active hi|p1', 'normal hi|p1', 'ack hi|p1'], 'and on the route\'s topic');
  t.equal(new Set(got.map((g) => g.body.id)).size, got.length, 'an id each');
});

t.test('mqtt routes need an mqtt section', async (t) => {
  const r = await startApp(t);
  expectError(t, await post(r, 'createRec', { notifyRoute: MARKER, name: 'bus', mqtt: MARKER }), 400, ErrorCodes.INVALID_RECORD, /mqtt section/, 'refused, saying what is missing');
});
