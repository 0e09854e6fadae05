/**
 * Hayloft as a BACnet/IP device (src/export/, drivers/bacnet/device.ts), end to end: the app with
 * a `bacnetDevice` section on 127.0.0.8, and @bacnet-js/client as the front-end on 127.0.0.9
 * (the library drops requests from exactly 127.0.0.1). Who-Is, Who-Has, the Device object's
 * required properties, an object list long enough to need segmentation, ReadPropertyMultiple with
 * ALL, objects by kind with units and state texts, status flags from curStatus, WriteProperty at
 * priority through the point writer (audited, checked against the writeAs user), relinquish, the
 * BACnet errors of bad writes, SubscribeCOV (unconfirmed and confirmed, cancel), and instance
 * numbers that survive a restart and a rename.
 */
import bacnet, { ApplicationTag, EngineeringUnits, MaxSegmentsAccepted, ObjectType as O, PropertyIdentifier as P } from '@bacnet-js/client';
import { createRequire } from 'node:module';
import t from 'tap';
import { HDict, HNumber, HRef, MARKER, type HVal } from '../../src/haystack/values.js';
import { ADMIN, startApp, type Running } from '../helpers/app.js';
import { freeUdpPort } from '../helpers/bacnet-device.js';
import { until } from '../helpers/conn-http.js';

const DEVICE_HOST = '127.0.0.8';
const CLIENT_HOST = '127.0.0.9';
const INSTANCE = 260001;
const MANY = 1500;

type Client = InstanceType<typeof bacnet.default>;
interface Val {
  type: number;
  value: unknown;
}

// The library sends no Who-Has of its own: one made with its encoders (CommonJS modules of its package).
const requireLib = createRequire(import.meta.url);
const lib = (m: string): Record<string, (...a: unknown[]) => unknown> => requireLib(`@bacnet-js/client/dist/lib/${m}.js`) as never;
function whoHas(c: Client, to: string, name: string): void {
  const buf = { buffer: Buffer.alloc(1482), offset: 4 };
  (lib('npdu').encode as (...a: unknown[]) => void)(buf, 0, { address: to });
  (lib('apdu').encodeUnconfirmedServiceRequest as (...a: unknown[]) => void)(buf, 0x10, 7 /* who-has */);
  (lib('services/index') as unknown as { WhoHas: { encode: (...a: unknown[]) => void } }).WhoHas.encode(buf, -1, -1, undefined, name);
  c.sendBvlc({ address: to }, buf);
}

async function client(t: { teardown(f: () => unknown): void }): Promise<Client> {
  const c = new bacnet.default({ interface: CLIENT_HOST, port: await freeUdpPort(CLIENT_HOST), apduTimeout: 3000 });
  c.on('error', () => undefined);
  await new Promise<void>((resolve) => c.once('listening', () => resolve()));
  t.teardown(() => c.close());
  return c;
}

async function hayloft(t: { teardown(f: () => unknown): void }, port: number, extra: Record<string, string> = {}): Promise<Running> {
  return startApp(t, {
    env: {
      HAYLOFT_BACNET_DEVICE_INSTANCE: String(INSTANCE),
      HAYLOFT_BACNET_DEVICE_NAME: 'Hayloft plant room',
      HAYLOFT_BACNET_DEVICE_INTERFACE: DEVICE_HOST,
      HAYLOFT_BACNET_DEVICE_PORT: String(port),
      HAYLOFT_BACNET_DEVICE_WRITE_AS: ADMIN.username,
      ...extra,
    },
  });
}

async function seed(r: Running, many = 0): Promise<void> {
  const rows: Record<string, HVal>[] = [
    { id: HRef.of('site'), site: MARKER, name: 'plant', dis: 'Plant' },
    { id: HRef.of('ahu'), equip: MARKER, name: 'ahu1', siteRef: HRef.of('site') },
    { id: HRef.of('temp'), point: MARKER, cur: MARKER, sensor: MARKER, kind: 'Number', unit: '°C', name: 'supplyTemp', dis: 'Supply temperature', equipRef: HRef.of('ahu'), siteRef: HRef.of('site'), bacnetExport: MARKER },
    { id: HRef.of('sp'), point: MARKER, writable: MARKER, kind: 'Number', unit: '°C', minVal: new HNumber(10, '°C'), maxVal: new HNumber(30, '°C'), name: 'setpoint', equipRef: HRef.of('ahu'), siteRef: HRef.of('site'), bacnetExport: MARKER },
    { id: HRef.of('fan'), point: MARKER, writable: MARKER, cmd: MARKER, kind: 'Bool', name: 'fanCmd', equipRef: HRef.of('ahu'), siteRef: HRef.of('site'), bacnetExport: MARKER },
    { id: HRef.of('mode'), point: MARKER, writable: MARKER, kind: 'Str', enum: 'off,low,high', name: 'mode', equipRef: HRef.of('ahu'), siteRef: HRef.of('site'), bacnetExport: MARKER },
    { id: HRef.of('occ'), point: MARKER, cur: MARKER, kind: 'Bool', name: 'occupied', equipRef: HRef.of('ahu'), siteRef: HRef.of('site'), bacnetExport: MARKER },
    { id: HRef.of('note'), point: MARKER, kind: 'Str', name: 'note', equipRef: HRef.of('ahu'), siteRef: HRef.of('site'), bacnetExport: MARKER },
    { id: HRef.of('hidden'), point: MARKER, kind: 'Number', name: 'notExported', equipRef: HRef.of('ahu'), siteRef: HRef.of('site') },
  ];
  for (let i = 1; i <= many; i++) rows.push({ id: HRef.of(`m${i}`), point: MARKER, cur: MARKER, kind: 'Number', unit: 'kW', name: `meter${i}`, equipRef: HRef.of('ahu'), siteRef: HRef.of('site'), bacnetExport: MARKER });
  await r.app.model.create(rows.map((x) => HDict.of(x)));
}

const read = async (c: Client, to: string, type: number, instance: number, prop: number, index?: number): Promise<Val[]> =>
  ((await c.readProperty({ address: to }, { type, instance }, prop, index === undefined ? {} : { arrayIndex: index })) as unknown as { values: Val[] }).values;
const one = async (c: Client, to: string, type: number, instance: number, prop: number): Promise<unknown> => (await read(c, to, type, instance, prop))[0]?.value;
/** The four status flags (in-alarm, fault, overridden, out-of-service) as booleans. */
function flags(v: unknown): boolean[] {
  const b = v as { value: number[] };
  return [0, 1, 2, 3].map((i) => ((b.value[0] ?? 0) & (1 << i)) !== 0);
}

t.test('a device on the network: discovery, properties, objects by kind, segmentation, writes, COV, stable numbers', async (t) => {
  const port = await freeUdpPort(DEVICE_HOST);
  const to = `${DEVICE_HOST}:${port}`;
  const r = await hayloft(t, port);
  await seed(r, MANY);
  const c = await client(t);
  const exp = r.app.bacnetDevice;
  if (exp === null) throw new Error('no BACnet device');
  await until('objects exported', async () => (exp.objects().length === MANY + 5 ? true : undefined));

  // Who-Is (directed, as to a device on another network) -> I-Am.
  const iam = new Promise<{ deviceId: number; segmentation: number }>((resolve) => c.on('iAm', (m) => (m.payload as { deviceId: number }).deviceId === INSTANCE && resolve(m.payload as never)));
  c.whoIs({ address: to }, { lowLimit: INSTANCE, highLimit: INSTANCE });
  t.equal((await iam).deviceId, INSTANCE, 'I-Am with the device instance');

  // Who-Has by name -> I-Have.
  const ihave = new Promise<{ objectId: { type: number; instance: number }; objectName: string }>((resolve) => c.on('iHave', (m) => resolve(m.payload as never)));
  whoHas(c, to, 'plant.ahu1.setpoint');
  t.match(await ihave, { objectName: 'plant.ahu1.setpoint', objectId: { type: O.ANALOG_VALUE, instance: 1 } }, 'I-Have names the object');

  // The Device object's required properties.
  const dev = O.DEVICE;
  t.equal(await one(c, to, dev, INSTANCE, P.OBJECT_NAME), 'Hayloft plant room', 'objectName');
  t.equal(await one(c, to, dev, 4194303, P.OBJECT_NAME), 'Hayloft plant room', 'the wildcard instance is this device');
  t.equal(await one(c, to, dev, INSTANCE, P.VENDOR_NAME), 'Hayloft', 'vendorName');
  for (const p of [P.SYSTEM_STATUS, P.VENDOR_IDENTIFIER, P.MODEL_NAME, P.FIRMWARE_REVISION, P.APPLICATION_SOFTWARE_VERSION, P.PROTOCOL_VERSION, P.PROTOCOL_REVISION, P.PROTOCOL_SERVICES_SUPPORTED, P.PROTOCOL_OBJECT_TYPES_SUPPORTED, P.MAX_APDU_LENGTH_ACCEPTED, P.SEGMENTATION_SUPPORTED, P.APDU_TIMEOUT, P.NUMBER_OF_APDU_RETRIES, P.DATABASE_REVISION, P.OBJECT_TYPE]) {
    t.ok((await read(c, to, dev, INSTANCE, p)).length === 1, `device property ${P[p]}`);
  }
  t.same(await read(c, to, dev, INSTANCE, P.DEVICE_ADDRESS_BINDING), [], 'deviceAddressBinding (empty)');

  // The object list, whole: segmented (about 7.5 kB against 1476 octets a segment).
  const list = await read(c, to, dev, INSTANCE, P.OBJECT_LIST);
  t.equal(list.length, MANY + 6, 'the whole object list, in segments');
  t.ok(exp.device.stats.segmented > 0, 'the answer was segmented');
  t.same((await read(c, to, dev, INSTANCE, P.OBJECT_LIST, 0))[0]?.value, MANY + 6, 'objectList[0]: its length');
  await t.rejects(c.readProperty({ address: to }, { type: dev, instance: INSTANCE }, P.OBJECT_LIST, { maxSegments: MaxSegmentsAccepted.SEGMENTS_2 }), { message: /BacnetAbort - Reason:1$/ }, 'a client taking 2 segments at most: Abort, buffer-overflow');
  const ids = list.map((v) => v.value as { type: number; instance: number });
  const of = (type: number): number[] => ids.filter((x) => x.type === type).map((x) => x.instance);
  t.same([of(O.ANALOG_VALUE), of(O.BINARY_OUTPUT), of(O.MULTI_STATE_VALUE), of(O.BINARY_INPUT)], [[1], [1], [1], [1]], 'writable Number -> AV, writable cmd Bool -> BO, enum Str -> MSV, read Bool -> BI');
  t.equal(of(O.ANALOG_INPUT).length, MANY + 1, 'read Numbers -> AI');
  t.notOk(exp.objects().some((o) => o.pointId === 'note' || o.pointId === 'hidden'), 'a Str without enum and an unmarked point are not exported');
  t.equal(exp.skippedPoints().get('note'), 'a Str point without an enum', 'skipped, with why');

  const temp = exp.objects().find((o) => o.pointId === 'temp');
  if (temp === undefined) throw new Error('temp not exported');
  t.equal(temp.type, O.ANALOG_INPUT);
  t.equal(await one(c, to, O.ANALOG_INPUT, temp.instance, P.OBJECT_NAME), 'plant.ahu1.supplyTemp', 'objectName: the name path');
  t.equal(await one(c, to, O.ANALOG_INPUT, temp.instance, P.DESCRIPTION), 'Supply temperature', 'description: dis');
  t.equal(await one(c, to, O.ANALOG_INPUT, temp.instance, P.UNITS), EngineeringUnits.DEGREES_CELSIUS, 'units mapped back');
  t.equal((await read(c, to, O.ANALOG_INPUT, temp.instance, P.PRESENT_VALUE))[0]?.type, ApplicationTag.NULL, 'no value yet: NULL');
  r.app.model.setTransient('temp', { curVal: new HNumber(18.5, '°C'), curStatus: 'ok' });
  t.equal(await one(c, to, O.ANALOG_INPUT, temp.instance, P.PRESENT_VALUE), 18.5, 'presentValue from curVal');
  t.same(flags(await one(c, to, O.ANALOG_INPUT, temp.instance, P.STATUS_FLAGS)), [false, false, false, false], 'status flags: normal');
  r.app.model.setTransient('temp', { curStatus: 'down', curVal: null });
  t.same(flags(await one(c, to, O.ANALOG_INPUT, temp.instance, P.STATUS_FLAGS)), [false, true, false, false], 'down: fault');
  r.app.model.setTransient('temp', { curStatus: 'disabled' });
  t.same(flags(await one(c, to, O.ANALOG_INPUT, temp.instance, P.STATUS_FLAGS)), [false, false, false, true], 'disabled: out of service');
  r.app.model.setTransient('temp', { curVal: new HNumber(18.5, '°C'), curStatus: 'ok' });
  t.same((await read(c, to, O.MULTI_STATE_VALUE, 1, P.STATE_TEXT)).map((v) => v.value), ['off', 'low', 'high'], 'state texts from the enum');
  t.equal(await one(c, to, O.MULTI_STATE_VALUE, 1, P.NUMBER_OF_STATES), 3, 'numberOfStates');

  // ReadPropertyMultiple: ALL of one object, and single properties of others; an unknown object inside.
  const rpm = (await c.readPropertyMultiple({ address: to }, [
    { objectId: { type: O.ANALOG_INPUT, instance: temp.instance }, properties: [{ id: P.ALL, index: 0xffffffff }] },
    { objectId: { type: O.ANALOG_VALUE, instance: 1 }, properties: [{ id: P.OBJECT_NAME, index: 0xffffffff }, { id: P.PRIORITY_ARRAY, index: 0xffffffff }] },
    { objectId: { type: O.ANALOG_VALUE, instance: 999 }, properties: [{ id: P.PRESENT_VALUE, index: 0xffffffff }] },
  ] as never)) as unknown as { values: { objectId: { instance: number }; values: { id: number; value: Val[] }[] }[] };
  const all = new Map(rpm.values[0]?.values.map((v) => [v.id, v.value[0]?.value]));
  t.equal(all.get(P.PRESENT_VALUE), 18.5, 'RPM ALL: presentValue');
  t.equal(all.get(P.UNITS), EngineeringUnits.DEGREES_CELSIUS, 'RPM ALL: units');
  t.ok(all.has(P.STATUS_FLAGS) && all.has(P.EVENT_STATE) && all.has(P.OUT_OF_SERVICE), 'RPM ALL: the required properties');
  t.equal(rpm.values[1]?.values[0]?.value[0]?.value, 'plant.ahu1.setpoint', 'RPM: a property of another object');
  t.equal(rpm.values[1]?.values[1]?.value.length, 16, 'RPM: the priority array, 16 slots');
  t.match(rpm.values[2]?.values[0]?.value[0], { type: ApplicationTag.ERROR, value: { errorClass: 1, errorCode: 31 } }, 'RPM: an unknown object answers object: unknown-object in its place');

  // WriteProperty at priority 8: pointWrite level 8 through the point writer, audited with who.
  await c.writeProperty({ address: to }, { type: O.ANALOG_VALUE, instance: 1 }, P.PRESENT_VALUE, [{ type: ApplicationTag.REAL, value: 22.5 }], { priority: 8 });
  t.same(r.app.writer.effective('sp'), { val: new HNumber(22.5, '°C'), level: 8 }, 'level 8 holds 22.5°C');
  const row = r.app.writer.array('sp').find((x) => x.level === 8);
  t.match(row?.who, /^bacnet 127\.0\.0\.9/, 'who names the BACnet client');
  const audit = await r.app.writer.readAudit({ pointId: 'sp', limit: 5 });
  t.match(audit[0], { user: ADMIN.username, level: 8, result: 'ok' }, 'audited as the writeAs user');
  const pa = await read(c, to, O.ANALOG_VALUE, 1, P.PRIORITY_ARRAY);
  t.equal(pa[7]?.value, 22.5, 'priorityArray[8] holds it');
  t.equal(pa[15]?.type, ApplicationTag.NULL, 'other slots NULL');
  t.equal(await one(c, to, O.ANALOG_VALUE, 1, P.PRESENT_VALUE), 22.5, 'presentValue: the effective value');
  t.same(flags(await one(c, to, O.ANALOG_VALUE, 1, P.STATUS_FLAGS)), [false, false, true, false], 'overridden while a priority below 17 holds it');
  await c.writeProperty({ address: to }, { type: O.BINARY_OUTPUT, instance: 1 }, P.PRESENT_VALUE, [{ type: ApplicationTag.ENUMERATED, value: 1 }], { priority: 16 });
  t.same(r.app.writer.effective('fan'), { val: true, level: 16 }, 'BO written: true at 16');
  await c.writeProperty({ address: to }, { type: O.MULTI_STATE_VALUE, instance: 1 }, P.PRESENT_VALUE, [{ type: ApplicationTag.UNSIGNED_INTEGER, value: 3 }], { priority: 10 });
  t.same(r.app.writer.effective('mode'), { val: 'high', level: 10 }, 'MSV state 3 is the enum name "high"');

  // Bad writes: the BACnet errors a client expects, nothing changed.
  const refused = async (what: string, type: number, instance: number, prop: number, v: Val, want: RegExp): Promise<void> => {
    await t.rejects(c.writeProperty({ address: to }, { type, instance }, prop, [v as never], { priority: 8 }), { message: want }, what);
  };
  await refused('above maxVal', O.ANALOG_VALUE, 1, P.PRESENT_VALUE, { type: ApplicationTag.REAL, value: 35 }, /Class:2 - Code:37$/); // property, value-out-of-range
  await refused('a Str to an analog value', O.ANALOG_VALUE, 1, P.PRESENT_VALUE, { type: ApplicationTag.CHARACTER_STRING, value: 'x' }, /Class:2 - Code:9$/); // property, invalid-data-type
  await refused('state 4 of 3', O.MULTI_STATE_VALUE, 1, P.PRESENT_VALUE, { type: ApplicationTag.UNSIGNED_INTEGER, value: 4 }, /Class:2 - Code:37$/);
  await refused('an input', O.ANALOG_INPUT, temp.instance, P.PRESENT_VALUE, { type: ApplicationTag.REAL, value: 1 }, /Class:2 - Code:40$/); // property, write-access-denied
  await refused('a read-only property', O.ANALOG_VALUE, 1, P.OBJECT_NAME, { type: ApplicationTag.CHARACTER_STRING, value: 'x' }, /Class:2 - Code:40$/);
  await refused('an unknown object', O.ANALOG_VALUE, 77, P.PRESENT_VALUE, { type: ApplicationTag.REAL, value: 1 }, /Class:1 - Code:31$/);
  t.same(r.app.writer.effective('sp'), { val: new HNumber(22.5, '°C'), level: 8 }, 'nothing changed');
  await t.rejects(read(c, to, O.ANALOG_VALUE, 1, P.RECORD_COUNT), { message: /Class:2 - Code:32$/ }, 'an unknown property: property, unknown-property');

  // Relinquish with NULL.
  await c.writeProperty({ address: to }, { type: O.ANALOG_VALUE, instance: 1 }, P.PRESENT_VALUE, [{ type: ApplicationTag.NULL, value: null }], { priority: 8 });
  t.same(r.app.writer.effective('sp'), { val: null, level: 17 }, 'relinquished');
  t.same(flags(await one(c, to, O.ANALOG_VALUE, 1, P.STATUS_FLAGS)), [false, false, false, false], 'no longer overridden');

  // COV: unconfirmed on the AI, confirmed on the AV; values by notification; cancel.
  const notes: { pid: number; instance: number; type: number; pv: unknown; confirmed: boolean }[] = [];
  const take = (confirmed: boolean) => (m: { header?: { sender?: { address?: string } }; invokeId?: number; payload: { subscriberProcessId: number; monitoredObjectId: { type: number; instance: number }; values: { property: { id: number }; value: Val[] }[] } }): void => {
    if (confirmed) c.simpleAckResponse({ address: m.header?.sender?.address ?? '' }, 1, m.invokeId ?? 0);
    notes.push({ pid: m.payload.subscriberProcessId, type: m.payload.monitoredObjectId.type, instance: m.payload.monitoredObjectId.instance, pv: m.payload.values.find((v) => v.property.id === (P.PRESENT_VALUE as number))?.value[0]?.value, confirmed });
  };
  c.on('covNotifyUnconfirmed', take(false));
  c.on('covNotify', take(true));
  await c.subscribeCov({ address: to }, { type: O.ANALOG_INPUT, instance: temp.instance }, 7, false, false, 60);
  await until('the initial notification', async () => (notes.some((n) => n.pid === 7 && n.pv === 18.5) ? true : undefined));
  r.app.model.setTransient('temp', { curVal: new HNumber(19.25, '°C') });
  await until('19.25 by notification', async () => (notes.some((n) => n.pid === 7 && n.pv === 19.25) ? true : undefined));
  await c.subscribeCov({ address: to }, { type: O.ANALOG_VALUE, instance: 1 }, 8, false, true, 0);
  await c.writeProperty({ address: to }, { type: O.ANALOG_VALUE, instance: 1 }, P.PRESENT_VALUE, [{ type: ApplicationTag.REAL, value: 12 }], { priority: 12 });
  await until('a confirmed notification of the write', async () => (notes.some((n) => n.pid === 8 && n.confirmed && n.pv === 12) ? true : undefined));
  t.equal(exp.device.subscriptions().length, 2, 'two subscriptions held');
  t.same(exp.device.subscriptions().find((s) => s.pid === 8)?.remainingS, null, 'lifetime 0: until cancelled');
  await c.subscribeCov({ address: to }, { type: O.ANALOG_INPUT, instance: temp.instance }, 7, true, false, 0);
  t.equal(exp.device.subscriptions().length, 1, 'cancelled');
  await t.rejects(c.subscribeCov({ address: to }, { type: O.ANALOG_INPUT, instance: 99999 }, 9, false, false, 60), { message: /Class:1 - Code:31$/ }, 'SubscribeCOV of an unknown object');

  // Instance numbers: a rename keeps the number (the name follows); a restart keeps every one.
  const before = new Map(exp.objects().map((o) => [o.pointId, `${o.type}:${o.instance}`]));
  await r.app.model.update([HDict.of({ id: HRef.of('temp'), name: 'dischargeTemp' })]);
  await until('renamed', async () => ((await one(c, to, O.ANALOG_INPUT, temp.instance, P.OBJECT_NAME)) === 'plant.ahu1.dischargeTemp' ? true : undefined));
  await r.app.model.delete(['m1']);
  await r.app.model.create([HDict.of({ id: HRef.of('newer'), point: MARKER, cur: MARKER, kind: 'Number', name: 'newer', equipRef: HRef.of('ahu'), siteRef: HRef.of('site'), bacnetExport: MARKER })]);
  await r.restart();
  const after = r.app.bacnetDevice;
  if (after === null) throw new Error('no BACnet device after the restart');
  await until('objects after the restart', async () => (after.objects().length === MANY + 5 ? true : undefined));
  const now = new Map(after.objects().map((o) => [o.pointId, `${o.type}:${o.instance}`]));
  before.delete('m1');
  t.same([...before].filter(([id, k]) => now.get(id) !== k), [], 'every object kept its number across the edit and the restart');
  t.equal(now.get('newer'), `${O.ANALOG_INPUT}:${MANY + 2}`, 'a new point gets a new number, not the deleted one');
});

t.test('writes as a user without POINT_WRITE, and without writeAs: write-access-denied, audited', async (t) => {
  const port = await freeUdpPort(DEVICE_HOST);
  const to = `${DEVICE_HOST}:${port}`;
  const r = await hayloft(t, port, { HAYLOFT_BACNET_DEVICE_WRITE_AS: 'reader@example.com' });
  await seed(r);
  const [pol] = await r.app.model.create([HDict.of({ actionPolicy: MARKER, name: 'readAll', permissions: ['MODEL_READ'] })]);
  const [role] = await r.app.model.create([HDict.of({ role: MARKER, name: 'reader', actionPolicyRefs: [pol?.get('id') as HRef] })]);
  await r.app.auth.addUser('reader@example.com', 'reader-password-1', (role?.get('id') as HRef).id);
  const c = await client(t);
  await until('exported', async () => ((r.app.bacnetDevice?.objects().length ?? 0) > 0 ? true : undefined));
  await t.rejects(c.writeProperty({ address: to }, { type: O.ANALOG_VALUE, instance: 1 }, P.PRESENT_VALUE, [{ type: ApplicationTag.REAL, value: 20 }], { priority: 8 }), { message: /Class:2 - Code:40$/ }, 'write-access-denied');
  t.same(r.app.writer.effective('sp'), { val: null, level: 17 }, 'nothing written');
  const audit = await r.app.writer.readAudit({ pointId: 'sp', limit: 5 });
  t.match(audit[0], { user: 'reader@example.com', level: 8 }, 'the refusal is audited as the writeAs user');
  t.not(audit[0]?.result, 'ok');
});
