/**
 * The Modbus driver over TCP against a real third-party slave (Debian's python3-pymodbus), with a
 * proxy in between that records the requests on the wire: the shared driver suite, then every
 * table and type, word orders, scaling, block reads, a refused block, a lost link.
 */
import t from 'tap';
import type { ConnSpec, PointSpec, RawValue } from '../../src/drivers/driver.js';
import { decodeRegisters, encodeRegisters, parseModbusCur } from '../../src/drivers/modbus/address.js';
import { ModbusDriver } from '../../src/drivers/modbus/modbus-driver.js';
import { HDict, HNumber, HUri, MARKER } from '../../src/haystack/values.js';
import { ErrorCodes } from '../../src/lib/errors.js';
import { ModbusSlave, freePort, peersMissing } from '../helpers/modbus-slave.js';
import { ModbusTcpProxy } from '../helpers/tcp-proxy.js';
import { driverSuite } from './driver-suite.js';

const skip = peersMissing();
if (skip !== null) {
  t.comment(`SKIP Modbus TCP tests: ${skip}`);
  t.pass('skipped: ' + skip);
} else {
  /** Points with their modbusCur, scale and expected value; the slave's data is built from them. */
  const CASES: { cur: string; val: RawValue; raw?: number; scale?: number; offset?: number }[] = [
    { cur: 'holding:0', val: 1234 },
    { cur: 'holding:1:int16', val: -2 },
    { cur: 'holding:2:int32', val: -100000 },
    { cur: 'holding:4:uint32:le', val: 3_000_000_000 },
    { cur: 'holding:6:float32', val: 21.5 },
    { cur: 'holding:8:float32:le', val: -3.25 },
    { cur: 'holding:10:float64:be', val: 1234.5678 },
    { cur: 'holding:14:float64:le', val: -0.001 },
    { cur: 'holding:18:bool', val: true, raw: 7 },
    { cur: 'holding:19:uint16', val: 16.5, raw: 215, scale: 0.1, offset: -5 },
    { cur: 'holding:20:int32:le', val: 123456789 },
    { cur: 'holding:22:uint16', val: 65535 },
    { cur: 'input:0', val: 42 },
    { cur: 'input:1:float32', val: 99.5 },
    { cur: 'input:3:int16', val: -7 },
    { cur: 'input:4:uint32', val: 70001, scale: 2, offset: 1, raw: 35000 },
    { cur: 'coil:0', val: true },
    { cur: 'coil:1', val: false },
    { cur: 'coil:2:bool', val: true },
    { cur: 'discrete:0', val: false },
    { cur: 'discrete:1', val: true },
  ];

  const data = { units: [1], size: 1000, hr: {} as Record<number, number[]>, ir: {} as Record<number, number[]>, co: {} as Record<number, number[]>, di: {} as Record<number, number[]> };
  for (const c of CASES) {
    const a = parseModbusCur(c.cur);
    const raw = c.raw ?? c.val;
    const words = a.table === 'coil' || a.table === 'discrete' ? [raw ? 1 : 0] : encodeRegisters(a, raw as number);
    const table = { holding: data.hr, input: data.ir, coil: data.co, discrete: data.di }[a.table];
    table[a.address] = words;
  }
  // A run of 150 registers (for block limits) and the last addresses before the end (for refusals).
  data.hr[300] = Array.from({ length: 150 }, (_, i) => i);
  data.hr[997] = [997, 998, 999];

  let n = 0;
  const point = (cur: string, extra: Record<string, number> = {}): PointSpec => {
    const tags: Record<string, unknown> = { point: MARKER, modbusCur: cur };
    for (const [k, v] of Object.entries(extra)) tags[k] = new HNumber(v);
    return { id: `p${++n}`, tags: HDict.of(tags as Record<string, never>) };
  };
  const conn = (uri: string, extra: Record<string, unknown> = {}): ConnSpec => ({
    id: `c${++n}`,
    tags: HDict.of({ modbusConn: MARKER, uri: new HUri(uri), modbusSlave: new HNumber(1), timeout: new HNumber(300, 'ms'), ...extra }),
  });
  const writePoint = (w: string, extra: Record<string, number> = {}): PointSpec => {
    const tags: Record<string, unknown> = { point: MARKER, writable: MARKER, modbusWrite: w };
    for (const [k, v] of Object.entries(extra)) tags[k] = new HNumber(v);
    return { id: `w${++n}`, tags: HDict.of(tags as Record<string, never>) };
  };
  /** Write addresses (away from the read cases), values, and scaling. */
  const WRITES: { w: string; val: RawValue; scale?: number; offset?: number }[] = [
    { w: 'holding:40:float32', val: 23.5 },
    { w: 'holding:42:int32:le', val: -70000 },
    { w: 'holding:44:uint16', val: 21.7, scale: 0.1, offset: 0 },
    { w: 'holding:45:int16', val: -12, scale: 2, offset: 4 },
    { w: 'holding:46:float64', val: 1234.5678 },
    { w: 'coil:20', val: true },
  ];
  const writeSpecs = WRITES.map((x) => writePoint(x.w, { ...(x.scale !== undefined ? { modbusScale: x.scale } : {}), ...(x.offset !== undefined ? { modbusOffset: x.offset } : {}) }));
  /** What the slave holds at a write address, read by pymodbus' own client and decoded here. */
  const heldAt = async (i: number): Promise<RawValue> => {
    const x = WRITES[i] as (typeof WRITES)[number];
    const a = parseModbusCur(x.w);
    if (a.table === 'coil') return (await slave.readBack('co', a.address, 1))[0] === 1;
    const words = await slave.readBack('hr', a.address, a.size);
    const bytes = new Uint8Array(words.flatMap((v) => [v >> 8, v & 0xff]));
    const raw = decodeRegisters(bytes, a.address, a) as number;
    return raw * (x.scale ?? 1) + (x.offset ?? 0);
  };
  const casePoint = (c: (typeof CASES)[number]): PointSpec =>
    point(c.cur, { ...(c.scale !== undefined ? { modbusScale: c.scale } : {}), ...(c.offset !== undefined ? { modbusOffset: c.offset } : {}) });

  const slave = await ModbusSlave.tcp(data);
  t.teardown(() => slave.kill());
  const proxy = await ModbusTcpProxy.start(slave.port);
  t.teardown(() => proxy.close());
  const deadPort = await freePort();
  const uri = `modbus-tcp://127.0.0.1:${proxy.port}`;

  t.test('the shared driver suite', async (t) => {
    driverSuite(t, {
      driver: () => new ModbusDriver(),
      conn: conn(uri),
      timeoutMs: 300,
      points: [CASES[0], CASES[4], CASES[9], CASES[12], CASES[16], CASES[20]].map((c) => ({ spec: casePoint(c as (typeof CASES)[number]), val: (c as (typeof CASES)[number]).val })),
      refused: point('holding:5000'),
      badPoints: [
        point('holding'),
        point('register:1'),
        point('holding:-1'),
        point('holding:65536'),
        point('holding:65535:float32'),
        point('coil:1:uint16'),
        point('holding:1:int8'),
        point('holding:1:int32:middle'),
        point('holding:1:2:3:4:5'),
        { id: 'nocur', tags: HDict.of({ point: MARKER }) },
        { id: 'numcur', tags: HDict.of({ point: MARKER, modbusCur: new HNumber(3) }) },
        point('coil:1', { modbusScale: 2 }),
      ],
      badConns: [
        { id: 'x1', tags: HDict.of({ modbusConn: MARKER, modbusSlave: new HNumber(1) }) },
        conn('http://127.0.0.1:502'),
        conn('modbus-tcp://:502'),
        conn('modbus-tcp://127.0.0.1:70000'),
        conn('modbus-rtu:/dev/ttyS0?baud=12345'),
        conn('modbus-rtu:/dev/ttyS0?parity=mark'),
        conn('modbus-rtu:/dev/ttyS0?speed=9600'),
        conn(uri, { modbusSlave: new HNumber(300) }),
        conn(uri, { modbusSlave: 'one' }),
        conn(uri, { timeout: new HNumber(5) }),
        conn(uri, { timeout: new HNumber(5, '°F') }),
        { id: 'x2', tags: HDict.of({ modbusConn: MARKER, uri: new HUri(uri) }) },
      ],
      deadConn: conn(`modbus-tcp://127.0.0.1:${deadPort}`),
      silence: () => slave.mute(1),
      speak: () => slave.unmute(1),
      writes: {
        points: WRITES.map((x, i) => ({ spec: writeSpecs[i] as PointSpec, val: x.val })),
        readBack: (i) => heldAt(i),
        // Modbus has no priorities: a relinquish leaves the last value.
        relinquished: (i) => (WRITES[i] as (typeof WRITES)[number]).val,
        refused: writePoint('holding:5000'),
        badPoints: [
          writePoint('input:1'),
          writePoint('discrete:1'),
          writePoint('holding:x'),
          writePoint('coil:1', { modbusScale: 2 }),
          writePoint('holding:1', { modbusScale: 0 }),
          { id: 'nowrite', tags: HDict.of({ point: MARKER, writable: MARKER }) },
        ],
      },
    });
  });

  t.test('writes: one request per value (function 16 for several registers), values that do not fit', async (t) => {
    const driver = new ModbusDriver();
    t.teardown(() => driver.close());
    const c = driver.open(conn(`modbus-tcp://127.0.0.1:${slave.port}`));
    const write = c.write?.bind(c) as NonNullable<typeof c.write>;
    const prep = c.prepareWrite?.bind(c) as NonNullable<typeof c.prepareWrite>;
    await write(prep(writePoint('holding:60:float32')), 1.5);
    t.same(await slave.readBack('hr', 60, 2), [0x3fc0, 0x0000], 'float32 1.5, both words (big-endian word order)');
    await write(prep(writePoint('holding:62:uint32:le')), 0x12345678);
    t.same(await slave.readBack('hr', 62, 2), [0x5678, 0x1234], 'uint32, word-swapped');
    await write(prep(writePoint('coil:30')), false);
    t.same(await slave.readBack('co', 30, 1), [0]);
    await write(prep(writePoint('coil:30')), true);
    t.same(await slave.readBack('co', 30, 1), [1], 'a coil (function 5)');
    await write(prep(writePoint('holding:64:bool')), true);
    t.same(await slave.readBack('hr', 64, 1), [1], 'a Bool to a register is 1');
    for (const [w, v, why] of [
      ['holding:65:uint16', 70000, /outside the range of a uint16/],
      ['holding:65:int16', -40000, /outside the range of a int16/],
      ['holding:65:uint16', -1, /outside the range/],
      ['coil:31', 'on', /Str cannot be written/],
    ] as const) {
      await t.rejects(write(prep(writePoint(w)), v), { code: ErrorCodes.DRIVER_CONFIG, message: why }, `${w} ${String(v)}`);
    }
    t.same(await slave.readBack('hr', 65, 1), [0], 'nothing was written');
    await write(prep(writePoint('holding:66:uint16')), null);
    t.same(await slave.readBack('hr', 66, 1), [0], 'a relinquish writes nothing');
  });

  t.test('every table, type and word order; scaling', async (t) => {
    const driver = new ModbusDriver();
    t.teardown(() => driver.close());
    const c = driver.open(conn(uri));
    const got = await c.read(CASES.map((x) => c.prepare(casePoint(x))));
    CASES.forEach((x, i) => {
      const r = got[i];
      if (r === undefined || 'err' in r) return t.fail(`${x.cur}: ${r === undefined ? 'missing' : r.err.message}`);
      if (typeof x.val === 'number' && !Number.isInteger(x.val)) t.ok(Math.abs((r.val as number) - x.val) < 1e-6, `${x.cur} = ${String(r.val)}`);
      else t.equal(r.val, x.val, x.cur);
    });
  });

  t.test('scaled and float32 registers read as the decimals the device means', async (t) => {
    const driver = new ModbusDriver();
    t.teardown(() => driver.close());
    const c = driver.open(conn(uri));
    const third = 1 / 3;
    const REGS: { cur: string; raw: number; val: number; scale?: number; offset?: number; why: string }[] = [
      { cur: 'holding:70:int16', raw: 7, scale: 0.1, val: 0.7, why: 'raw 7 × 0.1 is 0.7, not 0.7000000000000001' },
      { cur: 'holding:71:int16', raw: -2731, scale: 0.1, offset: 273.15, val: 0.05, why: 'an offset with more digits than the scale' },
      { cur: 'holding:72:uint16', raw: 10133, scale: 0.01, val: 101.33, why: '0.01' },
      { cur: 'holding:73:uint16', raw: 7, scale: third, val: 2.333, why: 'a scale of 1/3: two digits finer than a raw step' },
      { cur: 'holding:74:float32', raw: 21.3, val: 21.3, why: 'a float32 21.3 is 21.3, not 21.299999237060547' },
      { cur: 'holding:76:float32:le', raw: 2.13, scale: 10, val: 21.3, why: 'a float32 scaled: its digits and the scale\'s' },
      { cur: 'holding:78:float32', raw: NaN, val: NaN, why: 'NaN (a broken sensor) passes' },
      { cur: 'holding:80:float32', raw: -Infinity, val: -Infinity, why: '-Infinity passes' },
      { cur: 'holding:82:float32', raw: -0, val: -0, why: '-0 passes' },
      { cur: 'holding:84:float64', raw: 0.7000000000000001, val: 0.7000000000000001, why: 'a float64 register is what it says' },
      { cur: 'holding:88:int16', raw: -215, val: -215, why: 'unscaled integers untouched' },
    ];
    for (const r of REGS) await slave.set('hr', parseModbusCur(r.cur).address, encodeRegisters(parseModbusCur(r.cur), r.raw));
    const pts = REGS.map((r) => c.prepare(point(r.cur, { ...(r.scale !== undefined ? { modbusScale: r.scale } : {}), ...(r.offset !== undefined ? { modbusOffset: r.offset } : {}) })));
    const got = await c.read(pts);
    REGS.forEach((r, i) => {
      const g = got[i];
      t.ok(g !== undefined && 'val' in g && Object.is(g.val, r.val), `${r.cur}: ${r.why} (got ${g !== undefined && 'val' in g ? String(g.val) : 'an error'})`);
    });

    // A run of int16 readings at 0.1 and 0.01 over the wire: each is exactly its decimal.
    const raws = [-32768, -1001, -3, -1, 0, 1, 3, 7, 29, 215, 999, 1001, 4097, 32767];
    for (const [i, raw] of raws.entries()) await slave.set('hr', 100 + i, encodeRegisters(parseModbusCur('holding:0:int16'), raw));
    for (const scale of [0.1, 0.01, 0.001]) {
      const run = await c.read(raws.map((_, i) => c.prepare(point(`holding:${100 + i}:int16`, { modbusScale: scale }))));
      const digits = String(scale).length - 2;
      t.same(
        run.map((x) => ('val' in x ? x.val : x.err.message)),
        raws.map((raw) => Number(`${raw}e-${digits}`)),
        `int16 × ${scale}: the decimals, as Number("${raws[7] ?? 0}e-${digits}") writes them`,
      );
    }
  });

  t.test('contiguous registers are read as blocks of at most 100', async (t) => {
    const driver = new ModbusDriver();
    t.teardown(() => driver.close());
    const c = driver.open(conn(uri));
    const pts = [
      ...Array.from({ length: 150 }, (_, i) => c.prepare(point(`holding:${300 + i}`))),
      c.prepare(point('holding:0')),
      c.prepare(point('holding:1:int16')),
      c.prepare(point('holding:2:int32')),
      c.prepare(point('holding:6:float32')),
      c.prepare(point('input:0')),
      c.prepare(point('coil:0')),
      c.prepare(point('coil:2')),
    ];
    proxy.requests.length = 0;
    const got = await c.read(pts);
    t.same(got.slice(0, 150).map((r) => ('val' in r ? r.val : r.err.message)), Array.from({ length: 150 }, (_, i) => i), 'the run');
    const seen = proxy.requests.map((r) => `${r.fc}:${r.addr}+${r.qty}`).sort();
    // holding 0..3 contiguous (0, 1, 2-3) form one block; 6-7 stands apart (gap at 4-5);
    // coils 0 and 2 are not contiguous either.
    t.same(seen, ['1:0+1', '1:2+1', '3:0+4', '3:300+100', '3:400+50', '3:6+2', '4:0+1'].sort(), 'requests on the wire');
    t.ok(proxy.requests.every((r) => r.qty <= 100), 'no request over 100 registers');
  });

  t.test('a refused block is read point by point, from then on', async (t) => {
    const driver = new ModbusDriver();
    t.teardown(() => driver.close());
    const c = driver.open(conn(uri));
    // 997..999 exist, 1000 does not (size 1000): the block 997..1000 is refused as a whole.
    const pts = [997, 998, 999, 1000].map((a) => c.prepare(point(`holding:${a}`)));
    proxy.requests.length = 0;
    const got = await c.read(pts);
    t.same(got.slice(0, 3).map((r) => ('val' in r ? r.val : null)), [997, 998, 999], 'the good points');
    const bad = got[3];
    t.ok(bad !== undefined && 'err' in bad && bad.err.code === ErrorCodes.DRIVER_REFUSED, 'the missing register is refused');
    t.match(bad !== undefined && 'err' in bad ? bad.err.message : '', /refused to read holding 1000/);
    t.equal(proxy.requests.length, 5, 'one block, then four single reads');
    proxy.requests.length = 0;
    await c.read(pts);
    t.equal(proxy.requests.length, 4, 'next time, single reads only');
    const wide = await c.read([c.prepare(point('holding:999:float32'))]);
    t.ok(wide[0] !== undefined && 'err' in wide[0] && wide[0].err.code === ErrorCodes.DRIVER_REFUSED, 'a float32 running past the end is refused');
    t.match(wide[0] !== undefined && 'err' in wide[0] ? wide[0].err.message : '', /holding 999\.\.1000/);
  });

  t.test('a lost link is down, and comes back when the device does', async (t) => {
    const driver = new ModbusDriver();
    t.teardown(() => driver.close());
    const c = driver.open(conn(uri));
    const pts = [c.prepare(point('holding:0'))];
    t.same(await c.read(pts), [{ val: 1234 }], 'up');
    await proxy.cut();
    await t.rejects(c.read(pts), { code: ErrorCodes.DRIVER_DOWN }, 'connection dropped');
    await t.rejects(c.read(pts), { code: ErrorCodes.DRIVER_DOWN, message: /ECONNREFUSED/ }, 'connection refused');
    await proxy.restore();
    t.same(await c.read(pts), [{ val: 1234 }], 'up again');
  });

  t.test('a unit that does not exist behind a live link is down', async (t) => {
    const driver = new ModbusDriver();
    t.teardown(() => driver.close());
    const c = driver.open(conn(uri, { modbusSlave: new HNumber(9) }));
    await t.rejects(c.read([c.prepare(point('holding:0'))]), { code: ErrorCodes.DRIVER_DOWN, message: /no answer from unit 9/ });
  });

  t.test('connectors of one link share it, one request at a time', async (t) => {
    const driver = new ModbusDriver();
    t.teardown(() => driver.close());
    const a = driver.open(conn(uri));
    const b = driver.open(conn(uri));
    const pa = [a.prepare(point('holding:0'))];
    const pb = [b.prepare(point('input:0'))];
    const got = await Promise.all([a.read(pa), b.read(pb), a.read(pa), b.read(pb)]);
    t.same(got, [[{ val: 1234 }], [{ val: 42 }], [{ val: 1234 }], [{ val: 42 }]]);
    await a.close();
    t.same(await b.read(pb), [{ val: 42 }], 'the link stays open for the other connector');
    await b.close();
  });
}
