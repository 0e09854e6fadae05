/**
 * What a BACnet learn leaves behind (issue 19): nothing per request once the learn has answered.
 *
 * @bacnet-js/client records every request (its answer or error, and the datagram) and sweeps
 * the records only when the oldest one's apduTimeout (10 s in Hayloft) is up, so a learn of a
 * large device held thousands of answers for ten seconds and more after it ended: back-to-back
 * learns of 3,000 objects kept 30-45 MB of heap, and the daemon's resident size followed
 * (docs/performance.md, bench/learn). The driver drops answered records as each request settles
 * (BacnetDriver.forgetAnswered).
 *
 * The records are the library's private state (`#requestsByTime` of its request manager): the
 * test counts them through the inspector, which shows private fields, after learns through HTTP
 * of a device read with ReadProperty (hundreds of requests, a quarter of them refused: errors).
 */
import { Session } from 'node:inspector/promises';
import { EngineeringUnits, ObjectType, PropertyIdentifier } from '@bacnet-js/client';
import t from 'tap';
import type { BacnetDriver } from '../../src/drivers/bacnet/bacnet-driver.js';
import type { DriverRegistry } from '../../src/drivers/registry.js';
import { HRef, MARKER } from '../../src/haystack/values.js';
import { BacnetDevice, enumerated, freeUdpPort, real, text as str } from '../helpers/bacnet-device.js';
import { startApp } from '../helpers/app.js';
import { connClient } from '../helpers/conn-http.js';
import { ok } from '../helpers/his.js';

const HAYLOFT_HOST = '127.0.0.3';
const OBJECTS = 150;

/** How many request records the library's client holds (answered or not). */
async function recordsHeld(driver: BacnetDriver): Promise<number> {
  const manager = (driver.client() as unknown as { _requestManager: object })._requestManager;
  const session = new Session();
  session.connect();
  const probe = '__hayloftRequestManager';
  (globalThis as Record<string, unknown>)[probe] = manager;
  try {
    const { result } = await session.post('Runtime.evaluate', { expression: `globalThis.${probe}` });
    // The protocol answers with privateProperties, which Node's types do not list.
    const props = (await session.post('Runtime.getProperties', { objectId: result.objectId as string, ownProperties: true })) as { privateProperties?: { name: string; value?: { objectId?: string } }[] };
    const list = props.privateProperties?.find((p) => p.name === '#requestsByTime')?.value?.objectId;
    if (list === undefined) throw new Error('the library has no #requestsByTime any more: this test needs a new way to count');
    const n = (await session.post('Runtime.callFunctionOn', { objectId: list, functionDeclaration: 'function () { return this.length; }', returnByValue: true })) as unknown as { result: { value: number } };
    return n.result.value;
  } finally {
    delete (globalThis as Record<string, unknown>)[probe];
    session.disconnect();
  }
}

t.test('a learn keeps no record of its requests once it has answered', async (t) => {
  const dev = new BacnetDevice({ address: '127.0.0.5', port: await freeUdpPort('127.0.0.5'), deviceInstance: 3005, rpm: 'reject', maxList: 40 });
  for (let i = 1; i <= OBJECTS; i++) {
    dev.set(ObjectType.ANALOG_VALUE, i, real(i));
    dev.set(ObjectType.ANALOG_VALUE, i, str(`Room ${i}`), PropertyIdentifier.OBJECT_NAME);
    dev.set(ObjectType.ANALOG_VALUE, i, enumerated(EngineeringUnits.DEGREES_CELSIUS), PropertyIdentifier.UNITS);
  }
  dev.describe('Controller');
  await dev.start();
  t.teardown(() => dev.stop());
  const r = await startApp(t, { env: { HAYLOFT_BACNET_INTERFACE: HAYLOFT_HOST, HAYLOFT_BACNET_PORT: String(await freeUdpPort(HAYLOFT_HOST)) } });
  const admin = connClient(r);
  ok(t, await admin.post('createRec', [{ id: HRef.of('c'), bacnetConn: MARKER, name: 'c', uri: `bacnet://127.0.0.5:${dev.opts.port}/3005` }]), 'the connector');
  // Loaded by the first learn (a protocol library is loaded when first needed).
  const driver = (): BacnetDriver => (r.app as unknown as { drivers: DriverRegistry }).drivers.byName('bacnet') as BacnetDriver;

  for (const round of [1, 2, 3]) {
    const before = dev.seen.rp;
    t.same(ok(t, await admin.post('learn', { connId: HRef.of('c') }), `learn ${round}`).rows.map((g) => g.get('learn')), ['AV'], 'the group');
    t.equal(ok(t, await admin.post('learn', { connId: HRef.of('c'), arg: 'AV' }), `learn AV ${round}`).rows.length, OBJECTS, 'a proposal per object');
    const sent = dev.seen.rp - before;
    t.ok(sent > 3 * OBJECTS, `hundreds of requests (${sent})`);
    // Only a request still on its way may be held (none: nothing polls this connector).
    const held = await recordsHeld(driver());
    t.ok(held <= 1, `after learn ${round}, the library holds no record of its ${sent} requests (holds ${held})`);
  }
});
