/**
 * The commissioning services on the wire, refereed by tshark where it is installed and can
 * capture on lo (every BACnet library on npm shares one lineage, so the simulator agreeing with
 * the driver proves little on its own): a directed Who-Is and the I-Am, the object list read
 * element by element from a device that cannot send it whole, SubscribeCOV and the unconfirmed
 * COV notification that answers it. Driver level (no HTTP): the end-to-end paths are in
 * test/poller/commission-bacnet.test.ts and cov-bacnet.test.ts.
 */
import { spawn, spawnSync } from 'node:child_process';
import { ObjectType, PropertyIdentifier } from '@bacnet-js/client';
import t from 'tap';
import { BacnetDriver } from '../../src/drivers/bacnet/bacnet-driver.js';
import { discover } from '../../src/drivers/bacnet/discovery.js';
import { readObjectList } from '../../src/drivers/bacnet/learn.js';
import { DeviceSession } from '../../src/drivers/bacnet/session.js';
import { HDict, HUri, MARKER } from '../../src/haystack/values.js';
import { BacnetDevice, freeUdpPort, real, text } from '../helpers/bacnet-device.js';

const DEVICE = '127.0.0.6';
const CLIENT = '127.0.0.7';
const tshark = spawnSync('tshark', ['-v']).status === 0;

t.test('Who-Is, I-Am, object list by element, SubscribeCOV and its notification on the wire', { skip: tshark ? false : 'tshark is not installed' }, async (t) => {
  const devPort = await freeUdpPort(DEVICE);
  const myPort = await freeUdpPort(CLIENT);
  const dev = new BacnetDevice({ address: DEVICE, port: devPort, deviceInstance: 77, maxList: 5 });
  for (let i = 1; i <= 12; i++) {
    dev.set(ObjectType.ANALOG_VALUE, i, real(i));
    dev.set(ObjectType.ANALOG_VALUE, i, text(`av ${i}`), PropertyIdentifier.OBJECT_NAME);
  }
  dev.describe('wire device');
  await dev.start();
  t.teardown(() => dev.stop());

  // Decode both ephemeral ports as BACnet/IP; fields: source, destination, unconfirmed and confirmed service.
  const cap = spawn(
    'tshark',
    ['-l', '-i', 'lo', '-f', `udp and host ${DEVICE}`, '-d', `udp.port==${devPort},bvlc`, '-d', `udp.port==${myPort},bvlc`, '-Y', 'bacapp', '-T', 'fields', '-e', 'ip.src', '-e', 'bacapp.unconfirmed_service', '-e', 'bacapp.confirmed_service', '-e', 'bacapp.type'],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  let err = '';
  cap.stdout.on('data', (b: Buffer) => (out += b.toString()));
  cap.stderr.on('data', (b: Buffer) => (err += b.toString()));
  const t0 = Date.now();
  while (!/Capturing on/.test(err) && Date.now() - t0 < 10_000 && cap.exitCode === null) await new Promise((r) => setTimeout(r, 50));
  await new Promise((r) => setTimeout(r, 1000));
  if (cap.exitCode !== null || !/Capturing on/.test(err)) {
    t.comment(`SKIP tshark cannot capture on lo: ${err.trim().split('\n').pop() ?? ''}`);
    t.pass('nothing to referee with');
    cap.kill('SIGINT');
    return;
  }

  const driver = new BacnetDriver({ interface: CLIENT, port: myPort, timeoutMs: 2000 });
  t.teardown(() => driver.close());
  const found = await discover(driver, { address: `${DEVICE}:${devPort}`, timeoutMs: 400 });
  t.same(found.map((d) => [d.deviceInstance, d.objectName, d.segmentation]), [[77, 'wire device', 'none']], 'the device found');
  const s = new DeviceSession(driver, `${DEVICE}:${devPort}`, 2000);
  const objects = await readObjectList(s, 77);
  s.close();
  t.equal(objects.length, 13, 'the object list (12 values and the device), element by element');

  const conn = driver.open({ id: 'c', tags: HDict.of({ bacnetConn: MARKER, uri: new HUri(`bacnet://${DEVICE}:${devPort}/77`) }) });
  t.teardown(() => conn.close());
  const p = conn.prepare({ id: 'p', tags: HDict.of({ bacnetCur: 'AV3' }) });
  const heard: unknown[] = [];
  const cov = conn.cov;
  if (cov === undefined) throw new Error('the BACnet connection has no cov');
  cov.onValue = (_pp, read) => heard.push('val' in read ? read.val : read.err.message);
  await cov.subscribe(p, 60_000);
  const t1 = Date.now();
  while (heard.length < 1 && Date.now() - t1 < 10_000) await new Promise((r) => setTimeout(r, 50));
  dev.set(ObjectType.ANALOG_VALUE, 3, real(33));
  while (heard.length < 2 && Date.now() - t1 < 10_000) await new Promise((r) => setTimeout(r, 50));
  t.same(heard, [3, 33], 'the initial notification, then the change');
  await cov.cancel(p);
  t.equal(dev.subscriptions.size, 0, 'cancelled on the device');

  await new Promise((r) => setTimeout(r, 1000));
  cap.kill('SIGINT');
  await new Promise((r) => cap.once('exit', r));
  const lines = out.trim().split('\n').filter((l) => l !== '').map((l) => l.split('\t'));
  const saw = (src: string, unconfirmed: string, confirmed: string): boolean => lines.some(([s1, u, c]) => s1 === src && (unconfirmed === '' || u === unconfirmed) && (confirmed === '' || c === confirmed));
  const shown = lines.slice(0, 12).map((l) => l.join(',')).join(' | ');
  // Unconfirmed services: 8 who-is, 0 i-am, 2 unconfirmed COV notification; confirmed: 12 readProperty, 5 subscribeCOV.
  t.ok(saw(CLIENT, '8', ''), `a Who-Is from Hayloft: ${shown}`);
  t.ok(saw(DEVICE, '0', ''), 'an I-Am from the device');
  t.ok(saw(CLIENT, '', '12'), 'ReadProperty (the object list length, index 0)');
  t.ok(saw(CLIENT, '', '5'), 'SubscribeCOV');
  t.ok(saw(DEVICE, '2', ''), 'an unconfirmed COV notification');
});
