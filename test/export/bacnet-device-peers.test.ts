/**
 * Hayloft as a BACnet device against peers of other code: node-bacnet (npm; not the library
 * Hayloft uses, though of its lineage) discovers, reads (the object list by index, RPM), writes at
 * priority, relinquishes and subscribes (it cannot take segmented answers, see below); and the gateway's job end to end: a register of a real
 * Modbus slave (Debian's pymodbus) polled by Hayloft is a BACnet object, and a BACnet
 * WriteProperty reaches the register. Device on 127.0.0.10, clients on 127.0.0.11.
 */
import { ApplicationTag, ObjectType as O, PropertyIdentifier as P } from '@bacnet-js/client';
// node-bacnet has no types of its own: what this test uses of it is declared here.
// eslint-disable-next-line @typescript-eslint/ban-ts-comment
// @ts-ignore
import NodeBacnet from 'node-bacnet';
import t from 'tap';
import { HDict, HNumber, HRef, HUri, MARKER, type HVal } from '../../src/haystack/values.js';
import { ADMIN, startApp, type Running } from '../helpers/app.js';
import { freeUdpPort } from '../helpers/bacnet-device.js';
import { until } from '../helpers/conn-http.js';
import { ModbusSlave, peersMissing } from '../helpers/modbus-slave.js';

const DEVICE_HOST = '127.0.0.10';
const CLIENT_HOST = '127.0.0.11';
const INSTANCE = 260002;

type Cb<T> = (err: Error | null, v: T) => void;
interface Nb {
  on(ev: string, f: (c: { header?: { sender?: { address?: string } }; invokeId?: number; payload: Record<string, unknown> }) => void): void;
  whoIs(receiver: { address: string }, options: { lowLimit: number; highLimit: number }): void;
  readProperty(receiver: { address: string }, o: { type: number; instance: number }, p: number, opts: Record<string, unknown>, next: Cb<{ values: { type: number; value: unknown }[] }>): void;
  readPropertyMultiple(receiver: { address: string }, req: unknown[], opts: Record<string, unknown>, next: Cb<{ values: { objectId: unknown; values: { property?: { id: number }; id?: number; value: { type: number; value: unknown }[] }[] }[] }>): void;
  writeProperty(receiver: { address: string }, o: { type: number; instance: number }, p: number, v: unknown[], opts: Record<string, unknown>, next: Cb<unknown>): void;
  subscribeCov(receiver: { address: string }, o: { type: number; instance: number }, pid: number, cancel: boolean, confirmed: boolean, lifetime: number, opts: Record<string, unknown>, next: Cb<unknown>): void;
  close(): void;
}
const p = <T>(f: (cb: Cb<T>) => void): Promise<T> => new Promise((resolve, reject) => f((err, v) => (err ? reject(err) : resolve(v))));

async function nodeBacnet(t: { teardown(f: () => unknown): void }): Promise<Nb> {
  const Client = NodeBacnet as unknown as new (o: Record<string, unknown>) => Nb;
  const c = new Client({ interface: CLIENT_HOST, port: await freeUdpPort(CLIENT_HOST), apduTimeout: 3000 });
  c.on('error', () => undefined);
  t.teardown(() => c.close());
  return c;
}

async function hayloft(t: { teardown(f: () => unknown): void }, port: number): Promise<Running> {
  return startApp(t, {
    env: {
      HAYLOFT_BACNET_DEVICE_INSTANCE: String(INSTANCE),
      HAYLOFT_BACNET_DEVICE_INTERFACE: DEVICE_HOST,
      HAYLOFT_BACNET_DEVICE_PORT: String(port),
      HAYLOFT_BACNET_DEVICE_WRITE_AS: ADMIN.username,
    },
  });
}

t.test('node-bacnet as the front-end: discover, object list by index, RPM, write at priority, relinquish, COV', async (t) => {
  const port = await freeUdpPort(DEVICE_HOST);
  const to = { address: `${DEVICE_HOST}:${port}` };
  const r = await hayloft(t, port);
  const rows: Record<string, HVal>[] = [
    { id: HRef.of('sp'), point: MARKER, writable: MARKER, kind: 'Number', unit: '%', name: 'valve', bacnetExport: MARKER },
    { id: HRef.of('t'), point: MARKER, cur: MARKER, kind: 'Number', unit: '°F', name: 'oat', bacnetExport: MARKER },
  ];
  for (let i = 0; i < 800; i++) rows.push({ id: HRef.of(`x${i}`), point: MARKER, cur: MARKER, kind: 'Bool', name: `alarm${i}`, bacnetExport: MARKER });
  await r.app.model.create(rows.map((x) => HDict.of(x)));
  await until('exported', async () => (r.app.bacnetDevice?.objects().length === 802 ? true : undefined));
  const c = await nodeBacnet(t);

  const iam = new Promise<Record<string, unknown>>((resolve) => c.on('iAm', (m) => (m.payload.deviceId === INSTANCE ? resolve(m.payload) : undefined)));
  c.whoIs(to, { lowLimit: INSTANCE, highLimit: INSTANCE });
  t.equal((await iam).deviceId, INSTANCE, 'I-Am');

  // node-bacnet 0.2.4 cannot take a segmented answer: it sends its Segment-ACKs to no address
  // (header.address, which it never sets: a broadcast) and feeds the reassembled answer back
  // into its segment handling. It reads the list by index, as clients without segmentation do
  // (the segmented whole list is tested with @bacnet-js/client in bacnet-device.test.ts).
  const dev = { type: O.DEVICE, instance: INSTANCE };
  const len = await p<{ values: { type: number; value: unknown }[] }>((cb) => c.readProperty(to, dev, P.OBJECT_LIST, { arrayIndex: 0 }, cb));
  t.equal(len.values[0]?.value, 803, 'objectList[0]: the length');
  const last = await p<{ values: { type: number; value: unknown }[] }>((cb) => c.readProperty(to, dev, P.OBJECT_LIST, { arrayIndex: 803 }, cb));
  t.same(last.values[0]?.value, { type: O.BINARY_INPUT, instance: 800 }, 'objectList[803]: the last object');
  const rpm = await p<{ values: { values: { property?: { id: number }; id?: number; value: { type: number; value: unknown }[] }[] }[] }>((cb) =>
    c.readPropertyMultiple(to, [{ objectId: dev, properties: [{ id: P.OBJECT_NAME }, { id: P.SEGMENTATION_SUPPORTED }] }, { objectId: { type: O.ANALOG_VALUE, instance: 1 }, properties: [{ id: P.OBJECT_NAME }, { id: P.UNITS }] }], {}, cb),
  );
  t.equal(rpm.values[0]?.values[1]?.value[0]?.value, 0, 'RPM: segmentation-supported both');
  t.equal(rpm.values[1]?.values[0]?.value[0]?.value, 'valve', 'RPM: objectName');
  t.equal(rpm.values[1]?.values[1]?.value[0]?.value, 98, 'RPM: units percent');

  await p((cb) => c.writeProperty(to, { type: O.ANALOG_VALUE, instance: 1 }, P.PRESENT_VALUE, [{ type: ApplicationTag.REAL, value: 40 }], { priority: 5 }, cb));
  t.same(r.app.writer.effective('sp'), { val: new HNumber(40, '%'), level: 5 }, 'written at priority 5');
  const pa = await p<{ values: { type: number; value: unknown }[] }>((cb) => c.readProperty(to, { type: O.ANALOG_VALUE, instance: 1 }, P.PRIORITY_ARRAY, {}, cb));
  t.equal(pa.values[4]?.value, 40, 'priorityArray[5]');
  await p((cb) => c.writeProperty(to, { type: O.ANALOG_VALUE, instance: 1 }, P.PRESENT_VALUE, [{ type: ApplicationTag.NULL, value: null }], { priority: 5 }, cb));
  t.same(r.app.writer.effective('sp'), { val: null, level: 17 }, 'relinquished with NULL');

  const seen: unknown[] = [];
  c.on('covNotifyUnconfirmed', (m) => {
    const vals = m.payload.values as { property: { id: number }; value: { value: unknown }[] }[];
    seen.push(vals.find((v) => v.property.id === (P.PRESENT_VALUE as number))?.value[0]?.value);
  });
  await p((cb) => c.subscribeCov(to, { type: O.ANALOG_INPUT, instance: 1 }, 3, false, false, 120, {}, cb));
  r.app.model.setTransient('t', { curVal: new HNumber(71, '°F'), curStatus: 'ok' });
  await until('71 by notification', async () => (seen.includes(71) ? true : undefined));
  t.pass('COV notifications reach node-bacnet');
});

const missing = peersMissing();
t.test('Modbus to BACnet: a pymodbus register as a BACnet object; a BACnet write reaches the register', { skip: missing ?? false }, async (t) => {
  const slave = await ModbusSlave.tcp({ units: [1], size: 100 });
  t.teardown(() => slave.kill());
  await slave.set('hr', 10, [215]); // supply temperature, tenths of a degree
  const port = await freeUdpPort(DEVICE_HOST);
  const to = { address: `${DEVICE_HOST}:${port}` };
  const r = await hayloft(t, port);
  await r.app.model.create(
    [
      { id: HRef.of('plc'), modbusConn: MARKER, name: 'plc', uri: new HUri(`modbus-tcp://127.0.0.1:${slave.port}`), modbusSlave: HNumber.of(1), pollTime: new HNumber(200, 'ms'), timeout: new HNumber(1, 's') },
      { id: HRef.of('sat'), point: MARKER, cur: MARKER, kind: 'Number', unit: '°C', name: 'sat', modbusConnRef: HRef.of('plc'), modbusCur: 'holding:10', modbusScale: new HNumber(0.1), bacnetExport: MARKER },
      { id: HRef.of('speed'), point: MARKER, cur: MARKER, writable: MARKER, cmd: MARKER, kind: 'Number', unit: '%', name: 'fanSpeed', modbusConnRef: HRef.of('plc'), modbusCur: 'holding:20', modbusWrite: 'holding:20', bacnetExport: MARKER },
    ].map((x) => HDict.of(x as unknown as Record<string, HVal>)),
  );
  const c = await nodeBacnet(t);
  // The export takes up new points as the model tells it (an unknown object until then): asked again.
  const sat = async (): Promise<unknown> =>
    (await p<{ values: { value: unknown }[] }>((cb) => c.readProperty(to, { type: O.ANALOG_INPUT, instance: 1 }, P.PRESENT_VALUE, {}, cb)).catch(() => undefined))?.values[0]?.value;
  await until('AI1 = 21.5 from the register', async () => ((await sat()) === 21.5 ? true : undefined));
  await slave.set('hr', 10, [198]);
  await until('AI1 follows the register', async () => ((await sat()) === Math.fround(19.8) ? true : undefined));
  t.pass('the register is read through BACnet');

  await p((cb) => c.writeProperty(to, { type: O.ANALOG_OUTPUT, instance: 1 }, P.PRESENT_VALUE, [{ type: ApplicationTag.REAL, value: 65 }], { priority: 8 }, cb));
  await until('the register holds 65', async () => ((await slave.readBack('hr', 20, 1))[0] === 65 ? true : undefined));
  t.pass('a BACnet WriteProperty reached the Modbus register');
  await until('AO1 reads 65 back from the device', async () => {
    const v = (await p<{ values: { value: unknown }[] }>((cb) => c.readProperty(to, { type: O.ANALOG_OUTPUT, instance: 1 }, P.PRESENT_VALUE, {}, cb))).values[0]?.value;
    return v === 65 ? true : undefined;
  });
  await p((cb) => c.writeProperty(to, { type: O.ANALOG_OUTPUT, instance: 1 }, P.PRESENT_VALUE, [{ type: ApplicationTag.NULL, value: null }], { priority: 8 }, cb));
  t.same(r.app.writer.effective('speed'), { val: null, level: 17 }, 'relinquished');
});
