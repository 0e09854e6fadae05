/**
 * Issue 32, report by exception, against a real mosquitto and a real Modbus TCP slave (Debian's
 * python3-pymodbus): a polled point with `his` collected every 15 minutes publishes each change of
 * its curVal as live DDATA (beyond the deadband), not once per collection; the samples history
 * collected while the broker was away go as `is_historical`, each once; samples collected while
 * the device is born are not sent again (their values went live).
 *
 * The wall clock is the system's plus an offset the test moves by 15 minutes at a time (a
 * forward step, which the clock's trust accepts), so the collector starts a new interval without
 * the test waiting for it; intervals and timers run on the real monotonic clock.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import t, { type Test } from 'tap';
import { encodeRegisters, parseModbusCur } from '../../../src/drivers/modbus/address.js';
import { HNumber, HUri, MARKER } from '../../../src/haystack/values.js';
import type { Clock } from '../../../src/lib/clock.js';
import { toSamples } from '../../../src/store/history.js';
import { num } from '../../../src/sync/mqtt/sparkplug.js';
import { type Running, startApp } from '../../helpers/app.js';
import { recordMaker } from '../../helpers/conn-http.js';
import { BROKER_USER, type Broker, type Seen, SparkplugSubscriber, brokerMissing, startBroker } from '../../helpers/mosquitto.js';
import { ModbusSlave, peersMissing } from '../../helpers/modbus-slave.js';
import { tempDir } from '../../helpers/tmp.js';
import { post, until } from '../../helpers/uplink.js';

const missing = brokerMissing() ?? peersMissing();
if (missing !== null) t.plan(0, missing);

const f32 = (v: number): number[] => encodeRegisters(parseModbusCur('holding:0:float32'), v);
const QUARTER = 15 * 60_000;

/** The system clock, its wall reading moved forward by hand. */
class SteppedClock implements Clock {
  offset = 0;
  now(): number {
    return Date.now() + this.offset;
  }
  monotonic(): number {
    return performance.now();
  }
}

function config(t: Test, broker: Broker): string {
  const f = path.join(tempDir(t), 'hayloft.json');
  writeFileSync(f, JSON.stringify({ mqtt: { url: broker.url, ...BROKER_USER, groupId: 'G', edgeNodeId: 'N', publishIntervalMs: 100, deadband: 0.5, retryMinMs: 50, retryMaxMs: 300, keepaliveS: 5 } }));
  return f;
}

interface Sample {
  ts: number;
  value: unknown;
  historical: boolean;
}

/** A metric's values in DDATA (a quality report carries the value too). */
function samples(sub: SparkplugSubscriber, alias: number): Sample[] {
  const out: Sample[] = [];
  for (const m of sub.of('DDATA')) for (const x of m.payload.metrics ?? []) if (num(x.alias) === alias && x.isNull !== true) out.push({ ts: num(x.timestamp), value: x.value, historical: x.isHistorical === true });
  return out;
}

function curVal(edge: Running, id: string): number | undefined {
  const v = edge.app.model.get(id)?.get('curVal');
  return v instanceof HNumber ? v.val : undefined;
}

t.test('a his point collected every 15 minutes reports its live changes; an outage replays what history stored, as historical, each once', async (t) => {
  const slave = await ModbusSlave.tcp({ units: [1], size: 10, hr: { 0: f32(20) } });
  t.teardown(() => slave.kill());
  const broker = await startBroker(t);
  const sub = await SparkplugSubscriber.connect(t, broker);
  const clock = new SteppedClock();
  const edge = await startApp(t, { clock, env: { HAYLOFT_CONFIG: config(t, broker) } });
  const recs = recordMaker('modbus', 'ahu', 'plc');
  await post(t, edge, 'createRec', [
    ...recs.equipAndConn({ uri: new HUri(`modbus-tcp://127.0.0.1:${slave.port}`), modbusSlave: new HNumber(1), pollTime: new HNumber(100, 'ms'), timeout: new HNumber(500, 'ms') }),
    recs.point('temp', 'holding:0:float32', { unit: '°C', his: MARKER, hisCollectInterval: new HNumber(15, 'min'), tz: 'UTC' }),
  ]);
  const bornTemp = (): Seen | undefined => sub.of('DBIRTH').find((m) => m.device === 'ahu' && (m.payload.metrics ?? []).some((x) => x.name === 'temp'));
  await until('temp born', () => bornTemp() !== undefined);
  const born = bornTemp() as Seen;
  const alias = num((born.payload.metrics ?? []).find((x) => x.name === 'temp')?.alias);
  const value = async (v: number): Promise<void> => {
    await slave.set('hr', 0, f32(v));
    await until(`curVal ${v}`, () => curVal(edge, 'temp') === v);
  };
  const liveValues = (): unknown[] => samples(sub, alias).filter((x) => !x.historical).map((x) => x.value);
  await until('first reading', () => curVal(edge, 'temp') === 20);
  await until('history has its first sample', () => edge.app.history.stats('temp').size === 1);

  // Live: every change beyond the deadband, though history collects once per 15 minutes.
  await value(21);
  await until('21 live', () => liveValues().includes(21));
  await value(21.25); // within the deadband of 0.5: not reported
  await value(22);
  await until('22 live', () => liveValues().includes(22));
  await value(23);
  await until('23 live', () => liveValues().includes(23));
  t.equal(edge.app.history.stats('temp').size, 1, 'history still holds one sample (collected every 15 minutes)');
  t.same(
    liveValues().filter((v) => v !== 20),
    [21, 22, 23],
    'each change published live once, the one within the deadband not',
  );

  // The broker goes away; history collects two samples meanwhile (two 15-minute intervals).
  await broker.stop();
  await until('offline', () => edge.app.edgeNode?.stats().state === 'offline');
  clock.offset += QUARTER;
  await until('a sample of the outage', () => edge.app.history.stats('temp').size === 2);
  await value(24);
  clock.offset += QUARTER;
  await until('a second sample of the outage', () => edge.app.history.stats('temp').size === 3);
  const stored = await edge.app.history.read('temp');
  const outage = toSamples(stored).slice(1).map((x) => ({ ts: x.ts, value: x.val }));
  t.same(
    outage.map((x) => x.value),
    [23, 24],
    'the outage samples are in history',
  );
  const liveBefore = liveValues().length;
  await broker.start();
  await until('the outage, historical', () => samples(sub, alias).filter((x) => x.historical).length >= 2, 30_000);
  // A change after the reconnect goes live; a collection while born is covered by it.
  await value(25);
  await until('25 live', () => liveValues().includes(25));
  clock.offset += QUARTER;
  await until('covered', () => (edge.app.edgeNode?.stats().coveredSamples ?? 0) >= 1);
  await value(26);
  await until('26 live', () => liveValues().includes(26));

  // The first sample may be stored before the device's first birth (the poll and the birth
  // race): it is then backlog at that birth and goes as historical, once (edge-node.ts).
  const first = toSamples(stored)[0]?.ts;
  const hist = samples(sub, alias).filter((x) => x.historical);
  t.ok(hist.filter((x) => x.ts === first).length <= 1, 'the first sample at most once, as historical');
  t.same(
    hist.filter((x) => x.ts !== first).map((x) => [x.ts, x.value]),
    outage.map((x) => [x.ts, x.value]),
    'each sample stored during the outage once, as historical, with its own timestamp',
  );
  const rebirth = sub.of('DBIRTH').filter((m) => m.device === 'ahu').at(-1);
  t.equal((rebirth?.payload.metrics ?? []).find((x) => x.name === 'temp')?.value, 24, 'born again with the current value');
  const live = liveValues().slice(liveBefore);
  t.same(live, [25, 26], 'after the reconnect: the live changes, once each; no stored sample goes live');
  t.equal(edge.app.history.stats('temp').size, 4, 'the sample collected while born is stored');
});
