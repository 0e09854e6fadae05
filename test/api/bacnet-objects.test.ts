/**
 * The `bacnetObjects` op over HTTP (docs/bacnet-device.md "In the console"): Hayloft's BACnet
 * device and its objects with type, instance, name, present value, status flags and the priority
 * in effect, for the points the caller may read; MODEL_READ needed; `enabled` false without a
 * `bacnetDevice` section. The device runs for real on 127.0.0.18 and a BACnet client reads the
 * same present value the op shows.
 */
import bacnet, { ObjectType, PropertyIdentifier } from '@bacnet-js/client';
import t from 'tap';
import { HNumber, HRef, MARKER } from '../../src/haystack/values.js';
import { ErrorCodes } from '../../src/lib/errors.js';
import { ADMIN, startApp } from '../helpers/app.js';
import { freeUdpPort } from '../helpers/bacnet-device.js';
import { failed, hisClient, ok } from '../helpers/his.js';

const DEVICE = '127.0.0.18';
const CLIENT = '127.0.0.19';

t.test('bacnetObjects: the exported objects with their values, flags and priority, as the caller may read them', async (t) => {
  const port = await freeUdpPort(DEVICE);
  const r = await startApp(t, {
    env: {
      HAYLOFT_BACNET_DEVICE_INSTANCE: '260010',
      HAYLOFT_BACNET_DEVICE_NAME: 'Plant gateway',
      HAYLOFT_BACNET_DEVICE_INTERFACE: DEVICE,
      HAYLOFT_BACNET_DEVICE_PORT: String(port),
      HAYLOFT_BACNET_DEVICE_WRITE_AS: ADMIN.username,
    },
  });
  const admin = hisClient(r);
  ok(t, await admin.post('createRec', [
    { id: HRef.of('site'), site: MARKER, name: 'plant' },
    { id: HRef.of('ahu'), equip: MARKER, name: 'ahu1', siteRef: HRef.of('site') },
    { id: HRef.of('temp'), point: MARKER, cur: MARKER, sensor: MARKER, kind: 'Number', unit: '°C', name: 'supplyTemp', equipRef: HRef.of('ahu'), siteRef: HRef.of('site'), bacnetExport: MARKER },
    { id: HRef.of('sp'), point: MARKER, writable: MARKER, kind: 'Number', unit: '°C', name: 'setpoint', equipRef: HRef.of('ahu'), siteRef: HRef.of('site'), bacnetExport: MARKER },
    { id: HRef.of('fan'), point: MARKER, writable: MARKER, cmd: MARKER, kind: 'Bool', name: 'fanCmd', equipRef: HRef.of('ahu'), siteRef: HRef.of('site'), bacnetExport: MARKER },
    { id: HRef.of('mode'), point: MARKER, writable: MARKER, kind: 'Str', enum: 'off,low,high', name: 'mode', equipRef: HRef.of('ahu'), siteRef: HRef.of('site'), bacnetExport: MARKER },
    { id: HRef.of('note'), point: MARKER, kind: 'Str', name: 'note', equipRef: HRef.of('ahu'), siteRef: HRef.of('site'), bacnetExport: MARKER },
    { id: HRef.of('other'), point: MARKER, kind: 'Number', name: 'notExported', equipRef: HRef.of('ahu'), siteRef: HRef.of('site') },
  ]), 'points');
  ok(t, await admin.post('pointWrite', { id: HRef.of('sp'), level: new HNumber(8), val: new HNumber(21.5, '°C'), who: 'test' }), 'setpoint at priority 8');
  ok(t, await admin.post('pointWrite', { id: HRef.of('mode'), level: new HNumber(17), val: 'low', who: 'test' }), 'mode by default');

  const g = ok(t, await admin.get('bacnetObjects', {}), 'bacnetObjects (GET)');
  t.match(Object.fromEntries([...g.meta.entries()]), { enabled: true, deviceInstance: new HNumber(260010), deviceName: 'Plant gateway', interface: DEVICE, port: new HNumber(port), objects: new HNumber(4), skipped: new HNumber(1) }, 'the device, its object count and the point left out');
  const rows = new Map(g.rows.map((x) => [(x.get('id') as HRef).id, x]));
  t.same([...rows.keys()].sort(), ['fan', 'mode', 'sp', 'temp'], 'one row per exported object');
  const cell = (id: string, tag: string): unknown => rows.get(id)?.get(tag);
  t.equal(cell('temp', 'objectType'), 'analog-input');
  t.equal(cell('sp', 'objectType'), 'analog-value');
  t.equal(cell('fan', 'objectType'), 'binary-output');
  t.equal(cell('mode', 'objectType'), 'multi-state-value');
  t.equal(cell('sp', 'objectName'), 'plant.ahu1.setpoint', 'objectName: the name path');
  t.same(cell('sp', 'presentValue'), new HNumber(21.5, '°C'), 'presentValue in the unit');
  t.same([cell('sp', 'overridden'), cell('sp', 'priority'), cell('sp', 'commandable')], [true, new HNumber(8), true], 'overridden at priority 8');
  t.same([cell('mode', 'presentValue'), cell('mode', 'stateText'), cell('mode', 'overridden'), cell('mode', 'priority')], [new HNumber(2), 'low', false, new HNumber(17)], 'a state and its text, the relinquish default');
  t.same([cell('temp', 'presentValue'), cell('temp', 'commandable'), cell('temp', 'priority')], [undefined, false, undefined], 'no value read yet; an input has no priority');
  const sp = rows.get('sp');
  t.ok(sp !== undefined && typeof (sp.get('objectInstance') as HNumber).val === 'number', 'an instance number');

  // What a BACnet client reads of the same object.
  const c = new bacnet.default({ interface: CLIENT, port: await freeUdpPort(CLIENT), apduTimeout: 3000 });
  c.on('error', () => undefined);
  t.teardown(() => c.close());
  await new Promise<void>((resolve) => c.once('listening', () => resolve()));
  const pv = (await c.readProperty({ address: `${DEVICE}:${port}` }, { type: ObjectType.ANALOG_VALUE, instance: (sp?.get('objectInstance') as HNumber).val }, PropertyIdentifier.PRESENT_VALUE)) as unknown as { values: { value: number }[] };
  t.equal(pv.values[0]?.value, 21.5, 'the client reads the presentValue the op shows');

  // A reader of sensors only sees their objects; a user without MODEL_READ none.
  ok(t, await admin.post('createRec', [
    { id: HRef.of('p-sensors'), actionPolicy: MARKER, name: 'p-sensors', permissions: ['MODEL_READ'], filter: 'sensor' },
    { id: HRef.of('r-sensors'), role: MARKER, name: 'sensors', actionPolicyRefs: [HRef.of('p-sensors')] },
    { id: HRef.of('r-nobody'), role: MARKER, name: 'nobody', actionPolicyRefs: [] },
  ]), 'roles');
  const token = async (user: string, role: string): Promise<Record<string, string>> => {
    await r.app.auth.addUser(user, 'a-password-123', role);
    const a = await r.login(user, 'a-password-123');
    return { Authorization: `Bearer ${a.body.access_token as string}` };
  };
  const sensors = hisClient(r, await token('sensors@example.com', 'sensors'));
  const seen = ok(t, await sensors.get('bacnetObjects', {}), 'bacnetObjects as a reader of sensors');
  t.same(seen.rows.map((x) => (x.get('id') as HRef).id), ['temp'], 'only the objects of points it may read');
  const nobody = hisClient(r, await token('nobody@example.com', 'nobody'));
  failed(t, await nobody.get('bacnetObjects', {}), 403, ErrorCodes.FORBIDDEN, /bacnetObjects needs MODEL_READ/, 'no MODEL_READ');
});

t.test('bacnetObjects without a bacnetDevice section: enabled false, no rows', async (t) => {
  const r = await startApp(t);
  const g = ok(t, await hisClient(r).post('bacnetObjects', []), 'bacnetObjects (POST)');
  t.equal(g.meta.get('enabled'), false, 'enabled false');
  t.equal(g.rows.length, 0, 'no rows');
});
