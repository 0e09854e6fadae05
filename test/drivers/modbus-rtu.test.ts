/**
 * The Modbus driver over RTU: Debian's python3-pymodbus as a serial slave at the far end of a
 * socat virtual serial cable (no RTU timing: ptys ignore the baud rate). The shared driver suite,
 * then several units on one bus sharing the port, one of them silent.
 */
import t from 'tap';
import type { ConnSpec, PointSpec, RawValue } from '../../src/drivers/driver.js';
import { encodeRegisters, parseModbusCur } from '../../src/drivers/modbus/address.js';
import { ModbusDriver } from '../../src/drivers/modbus/modbus-driver.js';
import { HDict, HNumber, HUri, MARKER } from '../../src/haystack/values.js';
import { ErrorCodes } from '../../src/lib/errors.js';
import { ModbusSlave, SerialCable, peersMissing } from '../helpers/modbus-slave.js';
import { tempDir } from '../helpers/tmp.js';
import { driverSuite } from './driver-suite.js';

const skip = peersMissing();
if (skip !== null) {
  t.comment(`SKIP Modbus RTU tests: ${skip}`);
  t.pass('skipped: ' + skip);
} else {
  const CASES: { cur: string; val: RawValue }[] = [
    { cur: 'holding:0', val: 4321 },
    { cur: 'holding:1:float32:le', val: 18.25 },
    { cur: 'holding:3:int32', val: -5 },
    { cur: 'input:0:float64', val: 1e10 + 0.5 },
    { cur: 'coil:5', val: true },
    { cur: 'discrete:6', val: true },
  ];
  const data = { units: [1, 2], size: 100, hr: {} as Record<number, number[]>, ir: {} as Record<number, number[]>, co: {} as Record<number, number[]>, di: {} as Record<number, number[]> };
  for (const c of CASES) {
    const a = parseModbusCur(c.cur);
    const table = { holding: data.hr, input: data.ir, coil: data.co, discrete: data.di }[a.table];
    table[a.address] = a.table === 'coil' || a.table === 'discrete' ? [c.val ? 1 : 0] : encodeRegisters(a, c.val as number);
  }

  const dir = tempDir(t, 'hayloft-rtu-');
  const cable = await SerialCable.open(dir);
  t.teardown(() => cable.close());
  const slave = await ModbusSlave.rtu(cable.b, data);
  t.teardown(() => slave.kill());

  let n = 0;
  const point = (cur: string): PointSpec => ({ id: `p${++n}`, tags: HDict.of({ point: MARKER, modbusCur: cur }) });
  const conn = (uri: string, unit = 1): ConnSpec => ({
    id: `c${++n}`,
    tags: HDict.of({ modbusConn: MARKER, uri: new HUri(uri), modbusSlave: new HNumber(unit), timeout: new HNumber(400, 'ms') }),
  });
  const uri = `modbus-rtu:${cable.a}?baud=9600&parity=none&dataBits=8&stopBits=1`;

  t.test('the shared driver suite', async (t) => {
    driverSuite(t, {
      driver: () => new ModbusDriver(),
      conn: conn(uri),
      timeoutMs: 400,
      points: CASES.map((c) => ({ spec: point(c.cur), val: c.val })),
      refused: point('holding:99:float32'),
      badPoints: [point('holding:1:float16'), point('discrete:1:int16')],
      badConns: [conn('modbus-rtu:?baud=9600'), conn(`modbus-rtu:${cable.a}?stopBits=3`), conn(`modbus-rtu:${cable.a}?dataBits=9`)],
      deadConn: conn(`modbus-rtu:${dir}/no-such-tty`),
      silence: () => slave.mute(1),
      speak: () => slave.unmute(1),
    });
  });

  t.test('units on one bus share the port; a silent one does not stop the others', async (t) => {
    const driver = new ModbusDriver();
    t.teardown(() => driver.close());
    const one = driver.open(conn(uri, 1));
    const two = driver.open(conn(uri, 2));
    const p1 = [one.prepare(point('holding:0'))];
    const p2 = [two.prepare(point('holding:0'))];
    t.same(await Promise.all([one.read(p1), two.read(p2)]), [[{ val: 4321 }], [{ val: 4321 }]], 'both answer, one request at a time');
    await slave.mute(2);
    try {
      const [a, b] = await Promise.allSettled([two.read(p2), one.read(p1)]);
      t.equal(a.status, 'rejected', 'unit 2 is down');
      t.equal(a.status === 'rejected' ? (a.reason as { code?: string }).code : undefined, ErrorCodes.DRIVER_DOWN);
      t.same(b.status === 'fulfilled' ? b.value : b.reason, [{ val: 4321 }], 'unit 1 answers right after');
    } finally {
      await slave.unmute(2);
    }
    // pymodbus' RTU framer may drop the first frame after a unit comes back: retry, as the poller does.
    let back: unknown;
    for (let i = 0; i < 10 && back === undefined; i++) back = await two.read(p2).catch(() => undefined);
    t.same(back, [{ val: 4321 }], 'unit 2 is back');
  });

  t.test('connectors on one port must agree on its settings', async (t) => {
    const driver = new ModbusDriver();
    t.teardown(() => driver.close());
    driver.open(conn(uri));
    t.throws(() => driver.open(conn(`modbus-rtu:${cable.a}?baud=19200`)), { code: ErrorCodes.DRIVER_CONFIG, message: /other settings/ });
  });
}
