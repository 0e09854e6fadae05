/**
 * Commissioning BACnet devices end to end over HTTP (issue 14): a real Hayloft whose BACnet
 * socket is bound to 127.0.0.3, and simulated devices on 127.0.0.2, 127.0.0.4 and 127.0.0.5
 * (the library drops requests from exactly 127.0.0.1), each on a port of its own, found with a
 * directed Who-Is (broadcast does not reach sockets bound to one loopback address).
 *
 * discover -> createRec of the connector from the answered uri -> learn (groups, then drill in)
 * -> createRec of the proposals -> curVal arrives. Then the hard devices: 650 objects on a device
 * that cannot send its object list whole (read element by element, with progress on the
 * connector), and a device that rejects ReadPropertyMultiple (read with ReadProperty). And the
 * object list kept for drill-ins: used for 10 minutes, read again after.
 */
import { EngineeringUnits, ObjectType, PropertyIdentifier } from '@bacnet-js/client';
import t from 'tap';
import { type HDict, HNumber, HRef, HUri, MARKER, type HVal } from '../../src/haystack/values.js';
import { BacnetDevice, enumerated, freeUdpPort, real, text as str, unsigned } from '../helpers/bacnet-device.js';
import { ManualClock } from '../../src/lib/clock.js';
import { startApp } from '../helpers/app.js';
import { connClient, text, until } from '../helpers/conn-http.js';
import { failed, ok } from '../helpers/his.js';

const HAYLOFT_HOST = '127.0.0.3';
const { ANALOG_INPUT: AI, ANALOG_VALUE: AV, BINARY_VALUE: BV, BINARY_OUTPUT: BO, MULTI_STATE_VALUE: MSV } = ObjectType;
const P = PropertyIdentifier;

t.test('discover, connector from uri, learn, points from proposals, curVal', async (t) => {
  const a = new BacnetDevice({ address: '127.0.0.2', port: await freeUdpPort('127.0.0.2'), deviceInstance: 1001 });
  a.set(AI, 1, real(21.5));
  a.set(AI, 1, str('Zone Temp'), P.OBJECT_NAME);
  a.set(AI, 1, enumerated(EngineeringUnits.DEGREES_CELSIUS), P.UNITS);
  a.set(AV, 2, real(22));
  a.set(AV, 2, str('Zone Setpoint'), P.OBJECT_NAME);
  a.set(AV, 2, enumerated(EngineeringUnits.DEGREES_CELSIUS), P.UNITS);
  a.setList(AV, 2, P.PRIORITY_ARRAY, Array.from({ length: 16 }, () => ({ type: 0, value: null })));
  a.set(AV, 3, real(40));
  a.set(AV, 3, str('Zone Temp'), P.OBJECT_NAME); // a name used twice: the proposal's name is made unique
  a.set(AV, 3, enumerated(EngineeringUnits.PERCENT_RELATIVE_HUMIDITY), P.UNITS);
  a.set(BV, 4, enumerated(1));
  a.set(BV, 4, str('Occupied'), P.OBJECT_NAME);
  a.set(BO, 5, enumerated(0));
  a.set(BO, 5, str('FAN CMD'), P.OBJECT_NAME); // upper case: fanCmd, not fANCMD
  a.set(MSV, 6, unsigned(2));
  a.set(MSV, 6, str('2nd Mode'), P.OBJECT_NAME);
  a.describe('AHU-1 controller', 'Acme Controls', 'AC-100');
  await a.start();
  t.teardown(() => a.stop());

  const bacnetPort = await freeUdpPort(HAYLOFT_HOST);
  const r = await startApp(t, { env: { HAYLOFT_BACNET_INTERFACE: HAYLOFT_HOST, HAYLOFT_BACNET_PORT: String(bacnetPort), HAYLOFT_BACNET_TIMEOUT_MS: '2000' } });
  const admin = connClient(r);

  // Bad requests change nothing and say what is wrong.
  failed(t, await admin.post('discover', { proto: 'modbus' }), 400, 'HL_BAD_REQUEST', /proto must be the Str "bacnet"/, 'another protocol');
  failed(t, await admin.post('discover', { proto: 'bacnet', timeout: new HNumber(2) }), 400, 'HL_BAD_REQUEST', /timeout .*no unit/, 'a timeout without unit');
  failed(t, await admin.post('discover', { proto: 'bacnet', low: new HNumber(10), high: new HNumber(5) }), 400, 'HL_BAD_REQUEST', /low \(10\) is above high \(5\)/, 'low above high');
  failed(t, await admin.post('discover', { proto: 'bacnet', address: 'not an address' }), 400, 'HL_BAD_REQUEST', /address must be a Str host\[:port\]/, 'a bad address');

  const found = ok(t, await admin.post('discover', { proto: 'bacnet', address: `127.0.0.2:${a.opts.port}`, timeout: new HNumber(500, 'ms') }), 'discover');
  t.same(found.cols.map((c) => c.name), ['dis', 'uri', 'bacnetDevice', 'vendorName', 'modelName', 'segmentation', 'maxApdu', 'connRef'], 'the columns of a discover answer');
  t.equal(found.rows.length, 1, 'one device answered');
  const dev = found.rows[0] as HDict;
  t.equal(dev.get('dis'), 'AHU-1 controller', 'dis: the device object name');
  t.same(dev.get('uri'), new HUri(`bacnet://127.0.0.2:${a.opts.port}/1001`), 'uri ready for a bacnetConn');
  t.same(dev.get('bacnetDevice'), new HNumber(1001), 'bacnetDevice');
  t.equal(dev.get('vendorName'), 'Acme Controls', 'vendorName');
  t.equal(dev.get('modelName'), 'AC-100', 'modelName');
  t.equal(dev.get('segmentation'), 'both', 'segmentation from the I-Am');
  t.ok(dev.get('maxApdu') instanceof HNumber, 'maxApdu');
  t.equal(dev.get('connRef'), undefined, 'no connector yet');
  const outside = ok(t, await admin.post('discover', { proto: 'bacnet', address: `127.0.0.2:${a.opts.port}`, low: new HNumber(2000), high: new HNumber(3000), timeout: new HNumber(300, 'ms') }), 'discover in a range');
  t.equal(outside.rows.length, 0, 'a device outside low..high is not listed');

  // The connector from the uri; discover now names it.
  ok(
    t,
    await admin.post('createRec', [
      { id: HRef.of('site'), site: MARKER, name: 'site', dis: 'Site' },
      { id: HRef.of('ahu'), equip: MARKER, name: 'ahu', siteRef: HRef.of('site') },
      { id: HRef.of('ahuConn'), bacnetConn: MARKER, name: 'ahuConn', dis: dev.get('dis') as string, uri: dev.get('uri') as HVal, pollTime: new HNumber(300, 'ms'), timeout: new HNumber(2, 's') },
    ]),
    'createRec of the connector from the discovered uri',
  );
  const again = ok(t, await admin.post('discover', { proto: 'bacnet', address: `127.0.0.2:${a.opts.port}`, timeout: new HNumber(500, 'ms') }), 'discover again');
  t.equal((again.rows[0]?.get('connRef') as HRef | undefined)?.id, 'ahuConn', 'connRef names the connector made for it');

  failed(t, await admin.post('learn', { connId: HRef.of('ahu') }), 400, 'HL_CANNOT_LEARN', /not a connector that can be learned/, 'learn of an equip');
  failed(t, await admin.post('learn', { connId: HRef.of('nothing') }), 400, 'HL_NOT_FOUND', /no such record/, 'learn of an unknown id');
  failed(t, await admin.post('learn', { connId: HRef.of('ahuConn'), arg: 'XX' }), 400, 'HL_BAD_REQUEST', /learn arg "XX"/, 'learn of an unknown group');

  const groups = ok(t, await admin.post('learn', { connId: HRef.of('ahuConn') }), 'learn: groups');
  t.same(
    groups.rows.map((g) => [g.get('dis'), g.get('learn')]),
    [
      ['Analog inputs (1)', 'AI'],
      ['Analog values (2)', 'AV'],
      ['Binary outputs (1)', 'BO'],
      ['Binary values (1)', 'BV'],
      ['Multi-state values (1)', 'MSV'],
    ],
    'one group per object type (the device object is not one)',
  );
  const proposals: HDict[] = [];
  for (const g of groups.rows) proposals.push(...ok(t, await admin.post('learn', { connId: HRef.of('ahuConn'), arg: g.get('learn') as string }), `learn ${String(g.get('learn'))}`).rows);
  const plain = (d: HDict): Record<string, string | undefined> => Object.fromEntries([...d].map(([k, v]) => [k, v === MARKER ? '✓' : v instanceof HRef ? `@${v.id}` : text(v)]));
  t.same(
    proposals.map(plain),
    [
      { dis: 'Zone Temp', name: 'zoneTemp', point: '✓', cur: '✓', kind: 'Number', unit: '°C', his: '✓', bacnetConnRef: '@ahuConn', bacnetCur: 'AI1' },
      { dis: 'Zone Setpoint', name: 'zoneSetpoint', point: '✓', cur: '✓', kind: 'Number', unit: '°C', his: '✓', bacnetConnRef: '@ahuConn', bacnetCur: 'AV2', writable: '✓', bacnetWrite: 'AV2' },
      { dis: 'Zone Temp', name: 'zoneTemp_av3', point: '✓', cur: '✓', kind: 'Number', unit: '%RH', his: '✓', bacnetConnRef: '@ahuConn', bacnetCur: 'AV3' },
      { dis: 'FAN CMD', name: 'fanCmd', point: '✓', cur: '✓', kind: 'Bool', his: '✓', bacnetConnRef: '@ahuConn', bacnetCur: 'BO5', writable: '✓', bacnetWrite: 'BO5' },
      { dis: 'Occupied', name: 'occupied', point: '✓', cur: '✓', kind: 'Bool', his: '✓', bacnetConnRef: '@ahuConn', bacnetCur: 'BV4' },
      { dis: '2nd Mode', name: 'msv2ndMode', point: '✓', cur: '✓', kind: 'Number', bacnetConnRef: '@ahuConn', bacnetCur: 'MSV6' },
    ],
    'proposals: name, kind, unit from the engineering units, writable for commandable objects, his for analog and binary',
  );

  // The proposals as they are, with the equip added: points that poll.
  ok(t, await admin.post('createRec', proposals.map((p) => Object.fromEntries(p.with({ equipRef: HRef.of('ahu'), siteRef: HRef.of('site') })))), 'createRec of the proposals');
  const temp = await admin.when('site.ahu.zoneTemp', 'curStatus', 'ok');
  t.equal(text(temp.get('curVal')), '21.5°C', 'curVal of a learned point');
  t.equal((await admin.when('site.ahu.occupied', 'curStatus', 'ok')).get('curVal'), true, 'a learned Bool point');
  const bound = ok(t, await admin.post('learn', { connId: HRef.of('ahuConn'), arg: 'AI' }), 'learn after createRec');
  t.equal((bound.rows[0]?.get('id') as HRef | undefined)?.id, (temp.get('id') as HRef).id, 'an object bound to a point carries its id');
  t.equal((await admin.rec('ahuConn')).get('learnProgress'), undefined, 'no learnProgress once a learn ended');
});

t.test('a device of 650 objects that cannot send its object list whole, and one without ReadPropertyMultiple', async (t) => {
  const big = new BacnetDevice({ address: '127.0.0.4', port: await freeUdpPort('127.0.0.4'), deviceInstance: 2002, maxList: 40, rpm: 24, delayMs: 5 });
  for (let i = 1; i <= 650; i++) {
    big.set(AV, i, real(i / 2));
    big.set(AV, i, str(`Room ${i} temp`), P.OBJECT_NAME);
    big.set(AV, i, enumerated(EngineeringUnits.DEGREES_FAHRENHEIT), P.UNITS);
  }
  big.describe('Big controller');
  await big.start();
  t.teardown(() => big.stop());
  const old = new BacnetDevice({ address: '127.0.0.5', port: await freeUdpPort('127.0.0.5'), deviceInstance: 3003, rpm: 'reject' });
  old.set(AI, 7, real(3.5));
  old.set(AI, 7, str('Outside air'), P.OBJECT_NAME);
  old.set(AI, 7, enumerated(EngineeringUnits.DEGREES_CELSIUS), P.UNITS);
  old.describe('Old controller');
  await old.start();
  t.teardown(() => old.stop());

  const bacnetPort = await freeUdpPort(HAYLOFT_HOST);
  const r = await startApp(t, { env: { HAYLOFT_BACNET_INTERFACE: HAYLOFT_HOST, HAYLOFT_BACNET_PORT: String(bacnetPort) } });
  const admin = connClient(r);

  const bigRow = ok(t, await admin.post('discover', { proto: 'bacnet', address: `127.0.0.4:${big.opts.port}`, timeout: new HNumber(500, 'ms') }), 'discover the big device').rows[0];
  t.equal(bigRow?.get('segmentation'), 'none', 'it says it cannot segment');
  const oldRow = ok(t, await admin.post('discover', { proto: 'bacnet', address: `127.0.0.5:${old.opts.port}`, timeout: new HNumber(500, 'ms') }), 'discover the old device').rows[0];
  t.equal(oldRow?.get('dis'), 'Old controller', 'names read with ReadProperty from a device without ReadPropertyMultiple');
  ok(
    t,
    await admin.post('createRec', [
      { id: HRef.of('big'), bacnetConn: MARKER, name: 'big', uri: bigRow?.get('uri') as HVal, timeout: new HNumber(3, 's') },
      { id: HRef.of('old'), bacnetConn: MARKER, name: 'old', uri: oldRow?.get('uri') as HVal, pollTime: new HNumber(300, 'ms') },
    ]),
    'connectors from the uris',
  );

  // Progress on the connector while the object list is read element by element.
  const learning = admin.post('learn', { connId: HRef.of('big') });
  const seen = await until('learnProgress on the connector', async () => {
    const p = (await admin.rec('big')).get('learnProgress');
    return p instanceof HNumber ? p : undefined;
  });
  t.equal(seen.unit, '%', 'learnProgress is a percentage');
  const groups = ok(t, await learning, 'learn of the big device');
  t.same(groups.rows.map((g) => [g.get('dis'), g.get('learn')]), [['Analog values (650)', 'AV']], 'all 650 objects found');
  t.ok(big.seen.listWhole >= 1, 'the object list was asked for whole first');
  const props = ok(t, await admin.post('learn', { connId: HRef.of('big'), arg: 'AV' }), 'drill into 650 analog values');
  t.equal(props.rows.length, 650, 'a proposal per object');
  t.same([props.rows[0]?.get('name'), props.rows[0]?.get('unit'), props.rows[649]?.get('bacnetCur')], ['room1Temp', '°F', 'AV650'], 'names, units and addresses');
  t.ok(big.seen.rpm > 0 && big.seen.rpmProps / big.seen.rpm <= 24, 'ReadPropertyMultiple batches kept within what the device takes');
  t.equal((await admin.rec('big')).get('learnProgress'), undefined, 'learnProgress gone once done');

  const oldGroups = ok(t, await admin.post('learn', { connId: HRef.of('old') }), 'learn of the old device');
  t.same(oldGroups.rows.map((g) => g.get('learn')), ['AI'], 'its groups');
  const oldProps = ok(t, await admin.post('learn', { connId: HRef.of('old'), arg: 'AI' }), 'drill in');
  t.same([oldProps.rows[0]?.get('name'), oldProps.rows[0]?.get('unit')], ['outsideAir', '°C'], 'the proposal, read with ReadProperty');
  t.ok(old.seen.rp > 3, 'ReadProperty did the work');
  const made = ok(t, await admin.post('createRec', oldProps.rows.map((p) => Object.fromEntries(p))), 'createRec of the proposal');
  t.equal(text((await admin.when((made.rows[0]?.get('id') as HRef).id, 'curStatus', 'ok')).get('curVal')), '3.5°C', 'curVal arrives');

  // A device that has gone: learn says so, as an error grid.
  big.stop();
  failed(t, await admin.post('learn', { connId: HRef.of('big') }), 504, 'HL_DRIVER_DOWN', /no answer from the device/, 'learn of a silent device');
});

t.test('a drill-in uses the object list read by the learn before it for 10 minutes, then reads it again', async (t) => {
  const dev = new BacnetDevice({ address: '127.0.0.2', port: await freeUdpPort('127.0.0.2'), deviceInstance: 4004 });
  dev.set(AI, 1, real(20));
  dev.set(AI, 1, str('Zone Temp'), P.OBJECT_NAME);
  dev.set(AI, 1, enumerated(EngineeringUnits.DEGREES_CELSIUS), P.UNITS);
  dev.describe('VAV-4');
  await dev.start();
  t.teardown(() => dev.stop());
  const clock = new ManualClock(Date.now());
  const bacnetPort = await freeUdpPort(HAYLOFT_HOST);
  const r = await startApp(t, { clock, env: { HAYLOFT_BACNET_INTERFACE: HAYLOFT_HOST, HAYLOFT_BACNET_PORT: String(bacnetPort), HAYLOFT_BACNET_TIMEOUT_MS: '2000' } });
  const admin = connClient(r);
  ok(t, await admin.post('createRec', [{ id: HRef.of('vav'), bacnetConn: MARKER, name: 'vav', uri: new HUri(`bacnet://127.0.0.2:${dev.opts.port}/4004`) }]), 'the connector');
  const names = async (): Promise<unknown[]> => ok(t, await admin.post('learn', { connId: HRef.of('vav'), arg: 'AI' }), 'drill into AI').rows.map((p) => p.get('name'));

  t.same(ok(t, await admin.post('learn', { connId: HRef.of('vav') }), 'learn: groups').rows.map((g) => g.get('learn')), ['AI'], 'one group');
  t.equal(dev.seen.listWhole, 1, 'the object list read once');
  // An object added on the device after that learn.
  dev.set(AI, 2, real(18));
  dev.set(AI, 2, str('Discharge Temp'), P.OBJECT_NAME);
  dev.set(AI, 2, enumerated(EngineeringUnits.DEGREES_CELSIUS), P.UNITS);
  dev.describe('VAV-4');

  t.same(await names(), ['zoneTemp'], 'a drill-in right after: the kept list, without the new object');
  clock.advance(10 * 60_000 - 1000);
  t.same(await names(), ['zoneTemp'], 'one just under 10 minutes later: still the kept list');
  t.equal(dev.seen.listWhole, 1, 'the object list not read again meanwhile');
  clock.advance(2000);
  t.same(await names(), ['zoneTemp', 'dischargeTemp'], 'past 10 minutes: the list read again, the new object proposed, the old one under the same name');
  t.equal(dev.seen.listWhole, 2, 'the object list read a second time');
  t.same(await names(), ['zoneTemp', 'dischargeTemp'], 'and kept again for the drill-ins after');
  t.equal(dev.seen.listWhole, 2, 'not read a third time');
});
