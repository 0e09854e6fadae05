/**
 * Point writes end to end: pointWrite over HTTP, the poller's write queue, the drivers, and real
 * peers checked independently: Debian's pymodbus slave (its registers read back with pymodbus'
 * own client) and the BACnet simulator's priority array. Override, timed override ending by
 * itself, relinquish, a device down during a write (retried until it answers), a refused and a
 * read-only address (fault), and a restart with writeOnStart.
 */
import { ObjectType } from '@bacnet-js/client';
import t from 'tap';
import { decodeRegisters, parseModbusCur } from '../../src/drivers/modbus/address.js';
import { type HDict, HNumber, HRef, HUri, type HVal, MARKER } from '../../src/haystack/values.js';
import { BacnetDevice, freeUdpPort, real } from '../helpers/bacnet-device.js';
import { startApp, type Running } from '../helpers/app.js';
import { connClient, text, until } from '../helpers/conn-http.js';
import { ok } from '../helpers/his.js';
import { gridOf, postGrid } from '../helpers/http.js';
import { ModbusSlave, peersMissing } from '../helpers/modbus-slave.js';

function pointWrite(r: Running, id: string, level: number, val: HVal | null, extra: Record<string, HVal> = {}): ReturnType<typeof postGrid> {
  return postGrid(r.base, 'pointWrite', gridOf({ id: HRef.of(id), level: HNumber.of(level), ...(val === null ? {} : { val }), ...extra }), { headers: r.auth });
}

/** The record once `f` says yes (polled over HTTP). */
function recUntil(r: Running, what: string, id: string, f: (rec: HDict) => boolean): Promise<HDict> {
  const admin = connClient(r);
  return until(what, async () => {
    const x = await admin.rec(id);
    return f(x) ? x : undefined;
  });
}

const skip = peersMissing();
if (skip !== null) {
  t.comment(`SKIP Modbus write tests: ${skip}`);
  t.pass('skipped: ' + skip);
} else {
  t.test('Modbus: pointWrite moves the device; timed override; device down; faults; writeOnStart', async (t) => {
    const slave = await ModbusSlave.tcp({ units: [1], size: 100 });
    t.teardown(() => slave.kill());
    const held = async (cur: string): Promise<number> => {
      const a = parseModbusCur(cur);
      const words = await slave.readBack('hr', a.address, a.size);
      return decodeRegisters(new Uint8Array(words.flatMap((v) => [v >> 8, v & 0xff])), a.address, a) as number;
    };
    const r = await startApp(t);
    const admin = connClient(r);
    ok(
      t,
      await admin.post('createRec', [
        { id: HRef.of('plc'), modbusConn: MARKER, name: 'plc', uri: new HUri(`modbus-tcp://127.0.0.1:${slave.port}`), modbusSlave: HNumber.of(1), pollTime: HNumber.of(250, 'ms'), timeout: HNumber.of(1, 's') },
        {
          id: HRef.of('sp'), point: MARKER, cur: MARKER, writable: MARKER, name: 'sp', kind: 'Number', unit: '°C',
          modbusConnRef: HRef.of('plc'), modbusCur: 'holding:10:float32', modbusWrite: 'holding:10:float32', writeOnStart: MARKER,
        },
        { id: HRef.of('ro'), point: MARKER, writable: MARKER, name: 'ro', kind: 'Number', modbusConnRef: HRef.of('plc'), modbusWrite: 'input:3' },
        { id: HRef.of('far'), point: MARKER, writable: MARKER, name: 'far', kind: 'Number', modbusConnRef: HRef.of('plc'), modbusWrite: 'holding:5000' },
      ]),
      'a connector and writable points',
    );
    const sp = await recUntil(r, 'sp polled', 'sp', (x) => x.get('curStatus') === 'ok');
    t.equal(sp.get('writeStatus'), 'unknown', 'nothing to write yet: unknown');
    t.same(sp.get('writeLevel'), HNumber.of(17));

    ok(t, await pointWrite(r, 'sp', 17, HNumber.of(20, '°C')), 'level 17');
    await recUntil(r, 'written', 'sp', (x) => x.get('writeStatus') === 'ok' && text(x.get('writeVal')) === '20°C');
    t.equal(await held('holding:10:float32'), 20, 'the slave holds 20 (read by pymodbus)');
    await recUntil(r, 'read back', 'sp', (x) => text(x.get('curVal')) === '20°C');
    t.pass('curVal reads the written value back from the device');

    // A timed override (real time: one second) moves the device and ends by itself.
    ok(t, await pointWrite(r, 'sp', 8, HNumber.of(71.6, '°F'), { duration: HNumber.of(1, 's') }), 'timed override in °F');
    await until('override on the device', async () => ((await held('holding:10:float32')) === 22 ? true : undefined));
    t.pass('the slave holds 22 (71.6°F as °C)');
    await until('override ended on the device', async () => ((await held('holding:10:float32')) === 20 ? true : undefined));
    const after = await recUntil(r, 'level 17 again', 'sp', (x) => x.get('writeLevel') instanceof HNumber && (x.get('writeLevel') as HNumber).val === 17 && x.get('writeStatus') === 'ok');
    t.same(after.get('writeVal'), HNumber.of(20, '°C'), 'the default level again, on the device too');

    // The device stops answering during a write: down with writeErr, retried, ok once it is back.
    await slave.mute(1);
    ok(t, await pointWrite(r, 'sp', 16, HNumber.of(21)), 'write while the device is gone (acknowledged: the array is stored)');
    const down = await recUntil(r, 'write down', 'sp', (x) => x.get('writeStatus') === 'down');
    t.match(down.get('writeErr'), /no answer from unit 1/, `writeErr says why: ${String(down.get('writeErr'))}`);
    t.same(down.get('writeVal'), HNumber.of(21, '°C'), 'writeVal is what is to be written');
    const faults = await recUntil(r, 'faults', 'ro', (x) => x.get('writeStatus') === 'fault');
    t.match(faults.get('writeErr'), /read-only/, 'a read-only address is a fault at once');
    await slave.unmute(1);
    await recUntil(r, 'retried', 'sp', (x) => x.get('writeStatus') === 'ok' && x.get('writeErr') === undefined);
    t.equal(await held('holding:10:float32'), 21, 'the retry landed');

    ok(t, await pointWrite(r, 'far', 17, HNumber.of(1)), 'write to an address the device does not have');
    const far = await recUntil(r, 'refused', 'far', (x) => x.get('writeStatus') === 'fault');
    t.match(far.get('writeErr'), /refused the write of holding 5000/, String(far.get('writeErr')));

    // Someone changes the register; a restart writes the point's value again (writeOnStart).
    await slave.set('hr', 10, [0, 0]);
    await recUntil(r, 'the change read', 'sp', (x) => text(x.get('curVal')) === '0°C');
    t.equal(await held('holding:10:float32'), 0, 'the device lost the value, and nothing rewrites it while the array is unchanged');
    await r.restart();
    await until('rewritten at start', async () => ((await held('holding:10:float32')) === 21 ? true : undefined));
    t.pass('writeOnStart wrote the stored value again');
  });
}

t.test('BACnet: pointWrite writes at bacnetWriteLevel; relinquish writes NULL; the device array agrees', async (t) => {
  const DEVICE_HOST = '127.0.0.2';
  const HAYLOFT_HOST = '127.0.0.3';
  const { ANALOG_VALUE: AV } = ObjectType;
  const device = new BacnetDevice({ address: DEVICE_HOST, port: await freeUdpPort(DEVICE_HOST), deviceInstance: 4321 });
  device.commandable(AV, 7, real(5));
  await device.start();
  t.teardown(() => device.stop());
  const r = await startApp(t, { env: { HAYLOFT_BACNET_INTERFACE: HAYLOFT_HOST, HAYLOFT_BACNET_PORT: String(await freeUdpPort(HAYLOFT_HOST)) } });
  const admin = connClient(r);
  ok(
    t,
    await admin.post('createRec', [
      { id: HRef.of('dev'), bacnetConn: MARKER, name: 'dev', uri: new HUri(`bacnet://${DEVICE_HOST}:${device.opts.port}/4321`), pollTime: HNumber.of(250, 'ms'), timeout: HNumber.of(2, 's') },
      {
        id: HRef.of('bsp'), point: MARKER, cur: MARKER, writable: MARKER, name: 'bsp', kind: 'Number',
        bacnetConnRef: HRef.of('dev'), bacnetCur: 'AV7', bacnetWrite: 'AV7', bacnetWriteLevel: HNumber.of(10),
      },
    ]),
    'a BACnet connector and a writable point',
  );
  await recUntil(r, 'relinquish default read', 'bsp', (x) => text(x.get('curVal')) === '5');
  ok(t, await pointWrite(r, 'bsp', 17, HNumber.of(19.5)), 'pointWrite level 17');
  await recUntil(r, 'written', 'bsp', (x) => x.get('writeStatus') === 'ok');
  const slots = device.priorityArray(AV, 7).map((v) => (v === null ? null : v.value));
  const want: (number | null)[] = Array.from({ length: 16 }, (_, i) => (i === 9 ? 19.5 : null));
  t.same(slots, want, 'the device holds it at priority 10 only');
  await recUntil(r, 'read back', 'bsp', (x) => text(x.get('curVal')) === '19.5');
  ok(t, await pointWrite(r, 'bsp', 17, null), 'relinquish');
  await recUntil(r, 'relinquished', 'bsp', (x) => x.get('writeStatus') === 'ok' && x.get('writeVal') === undefined);
  t.same(device.priorityArray(AV, 7)[9], null, 'NULL written at priority 10');
  await recUntil(r, 'relinquish default again', 'bsp', (x) => text(x.get('curVal')) === '5');
  t.pass('presentValue is the relinquish default again');
});
