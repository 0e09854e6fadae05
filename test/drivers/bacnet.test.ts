/**
 * The BACnet/IP driver against device simulators on loopback (test/helpers/bacnet-device.ts),
 * bound away from 127.0.0.1: the shared driver suite, ReadPropertyMultiple batching, a device that
 * rejects ReadPropertyMultiple, one that cannot answer big ones, and a device that disappears and
 * comes back. Where tshark is installed it referees the traffic: it decodes the requests on the
 * wire independently of the library both sides use.
 */
import { spawn, spawnSync } from 'node:child_process';
import { ErrorClass, ErrorCode, ObjectType, PropertyIdentifier } from '@bacnet-js/client';
import t from 'tap';
import { BacnetDriver } from '../../src/drivers/bacnet/bacnet-driver.js';
import { parseBacnetCur } from '../../src/drivers/bacnet/address.js';
import { tagName } from '../../src/drivers/bacnet/learn.js';
import type { ConnSpec, PointSpec, RawValue } from '../../src/drivers/driver.js';
import { HDict, HNumber, HUri, MARKER } from '../../src/haystack/values.js';
import { ErrorCodes } from '../../src/lib/errors.js';
import { BacnetDevice, bool, enumerated, real, text, unsigned } from '../helpers/bacnet-device.js';
import { driverSuite } from './driver-suite.js';

const CLIENT = '127.0.0.3';
const { ANALOG_INPUT: AI, ANALOG_VALUE: AV, BINARY_VALUE: BV, MULTI_STATE_VALUE: MSV } = ObjectType;

function fill(d: BacnetDevice): void {
  d.set(AI, 1, real(21.5));
  d.set(AI, 1, text('zone temp'), PropertyIdentifier.OBJECT_NAME);
  d.set(AV, 3, real(-4.25));
  d.set(AV, 3, bool(false), PropertyIdentifier.OUT_OF_SERVICE);
  d.set(BV, 2, enumerated(1));
  d.set(MSV, 4, unsigned(3));
  for (let i = 10; i < 40; i++) d.set(AV, i, real(i));
  // Commandable objects, for writes.
  d.commandable(AV, 50, real(0));
  d.commandable(BV, 51, enumerated(0));
  d.commandable(MSV, 52, unsigned(1));
  d.commandable(AV, 53, real(-1));
}

/** Write points: address, priority (bacnetWriteLevel), value. */
const WRITES: { w: string; level?: number; val: RawValue }[] = [
  { w: 'AV50', val: 22.5 },
  { w: 'BV51', val: 1 },
  { w: 'MSV52', val: 3 },
  { w: 'AV53', level: 8, val: 7.25 },
];
const writePoint = (w: string, extra: Record<string, unknown> = {}): PointSpec => ({ id: `w${++n}`, tags: HDict.of({ point: MARKER, writable: MARKER, bacnetWrite: w, ...extra }) });
/** What a slot of the simulator's priority array holds, as the driver would read it. */
function slot(d: BacnetDevice, w: string, level: number): RawValue | null {
  const a = parseBacnetCur(w);
  const v = d.priorityArray(a.type, a.instance)[level - 1];
  return v === null || v === undefined ? null : (v.value as RawValue);
}

const POINTS: { cur: string; val: RawValue }[] = [
  { cur: 'AI1', val: 21.5 },
  { cur: 'AV3', val: -4.25 },
  { cur: 'BV2', val: 1 },
  { cur: 'MSV4', val: 3 },
  { cur: 'AI1.objectName', val: 'zone temp' },
  { cur: 'AV3.outOfService', val: false },
  { cur: 'AI1.presentValue', val: 21.5 },
];

let n = 0;
const point = (cur: string): PointSpec => ({ id: `p${++n}`, tags: HDict.of({ point: MARKER, bacnetCur: cur }) });
const conn = (uri: string, extra: Record<string, unknown> = {}): ConnSpec => ({
  id: `c${++n}`,
  tags: HDict.of({ bacnetConn: MARKER, uri: new HUri(uri), timeout: new HNumber(300, 'ms'), ...extra }),
});
const driver = (): BacnetDriver => new BacnetDriver({ interface: CLIENT });

t.test('learned names from object names', async (t) => {
  t.equal(tagName('ANALOG INPUT 1', 'ai1'), 'analogInput1', 'upper case words');
  t.equal(tagName('AHU1 SAT', 'ai1'), 'ahu1Sat', 'acronyms with digits');
  t.equal(tagName('Zone Temp 1', 'ai1'), 'zoneTemp1');
  t.equal(tagName('SupplyAirTemp', 'ai1'), 'supplyAirTemp', 'camelCase keeps its capitals');
  t.equal(tagName('CO2 level', 'ai1'), 'co2Level');
  t.equal(tagName('2ND MODE', 'msv6'), 'msv2ndMode', 'a leading digit takes the type');
  t.equal(tagName('---', 'ai7'), 'ai7', 'nothing left');
});

t.test('bacnetCur addresses', async (t) => {
  t.same(parseBacnetCur('AI1'), { type: AI, instance: 1, property: PropertyIdentifier.PRESENT_VALUE, text: 'AI1' });
  t.same(parseBacnetCur('msv4.presentValue').type, MSV);
  t.equal(parseBacnetCur('AV3.statusFlags').property, PropertyIdentifier.STATUS_FLAGS);
  t.equal(parseBacnetCur('AV3.85').property, 85);
});

const main = new BacnetDevice({ address: '127.0.0.2', deviceInstance: 1001 });
fill(main);
await main.start();
t.teardown(() => main.stop());

t.test('the shared driver suite', async (t) => {
  driverSuite(t, {
    driver,
    conn: conn('bacnet://127.0.0.2/1001'),
    timeoutMs: 300,
    points: POINTS.map((p) => ({ spec: point(p.cur), val: p.val })),
    refused: point('AI99'),
    badPoints: [point('XX1'), point('AI'), point('AI1.noSuchProperty'), point('AI99999999'), point('1AI'), { id: 'nocur', tags: HDict.of({ point: MARKER }) }],
    badConns: [
      { id: 'nouri', tags: HDict.of({ bacnetConn: MARKER }) },
      conn('http://127.0.0.2/1001'),
      conn('bacnet://127.0.0.2/abc'),
      conn('bacnet://127.0.0.2/'),
      conn('bacnet://127.0.0.2/1001', { timeout: new HNumber(3) }),
    ],
    deadConn: conn('bacnet://127.0.0.9/7'),
    silence: async () => void (main.silent = true),
    speak: async () => void (main.silent = false),
    writes: {
      points: WRITES.map((x) => ({ spec: writePoint(x.w, x.level === undefined ? {} : { bacnetWriteLevel: new HNumber(x.level) }), val: x.val })),
      readBack: async (i) => {
        const x = WRITES[i] as (typeof WRITES)[number];
        const v = slot(main, x.w, x.level ?? 16);
        return typeof v === 'number' ? Math.round(v * 1e6) / 1e6 : v;
      },
      relinquished: () => null,
      refused: writePoint('AV999'),
      badPoints: [
        writePoint('XX1'),
        writePoint('AV'),
        writePoint('AV50', { bacnetWriteLevel: new HNumber(17) }),
        writePoint('AV50', { bacnetWriteLevel: new HNumber(0) }),
        writePoint('AV50', { bacnetWriteLevel: 'high' }),
        { id: 'nowrite', tags: HDict.of({ point: MARKER, writable: MARKER }) },
      ],
    },
  });
});

t.test('writes keep to their priority; the priority array decides; NULL relinquishes', async (t) => {
  const d = driver();
  t.teardown(() => d.close());
  const c = d.open(conn('bacnet://127.0.0.2/1001'));
  const write = c.write?.bind(c) as NonNullable<typeof c.write>;
  const prep = c.prepareWrite?.bind(c) as NonNullable<typeof c.prepareWrite>;
  const at16 = prep(writePoint('AV53'));
  const at8 = prep(writePoint('AV53', { bacnetWriteLevel: new HNumber(8) }));
  const read = async (): Promise<unknown> => (await c.read([c.prepare(point('AV53'))]))[0];
  const before = main.writePriorities.length;
  await write(at16, 20);
  t.same(await read(), { val: 20 }, 'priority 16 holds 20');
  await write(at8, 30);
  t.same(await read(), { val: 30 }, 'priority 8 wins over 16');
  t.same([slot(main, 'AV53', 8), slot(main, 'AV53', 16)], [30, 20], 'both slots held by the device');
  await write(at8, null);
  t.same(await read(), { val: 20 }, 'NULL at 8: back to 16');
  await write(at16, null);
  t.same(await read(), { val: -1 }, 'NULL at 16: the relinquish default');
  t.same(main.writePriorities.slice(before), [16, 8, 8, 16], 'every WriteProperty carried its priority');
  // A Bool to a binary object goes as ENUMERATED 1/0.
  await write(prep(writePoint('BV51')), true);
  t.equal(slot(main, 'BV51', 16), 1, 'true is active (1)');
  await write(prep(writePoint('BV51')), null);
  await t.rejects(write(prep(writePoint('MSV52')), 2.5), { code: ErrorCodes.DRIVER_CONFIG, message: /whole number/ }, 'a multi-state value takes whole numbers');
  await t.rejects(write(prep(writePoint('AV50')), 'warm'), { code: ErrorCodes.DRIVER_CONFIG, message: /Str/ }, 'an analog value takes numbers');
});

t.test('a device that refuses writes, or acknowledges and keeps nothing, is a fault', async (t) => {
  const dev = new BacnetDevice({ address: '127.0.0.6', deviceInstance: 3003 });
  fill(dev);
  await dev.start();
  t.teardown(() => dev.stop());
  const d = driver();
  t.teardown(() => d.close());
  const c = d.open(conn('bacnet://127.0.0.6/3003'));
  const write = c.write?.bind(c) as NonNullable<typeof c.write>;
  const p = (c.prepareWrite as NonNullable<typeof c.prepareWrite>)(writePoint('AV50'));
  dev.refuseWrites = true;
  await t.rejects(write(p, 5), { code: ErrorCodes.DRIVER_REFUSED, message: /refused the write at priority 16 \(property: write-access-denied\)/ });
  dev.refuseWrites = { cls: ErrorClass.PROPERTY, code: ErrorCode.VALUE_OUT_OF_RANGE };
  await t.rejects(write(p, 5), { code: ErrorCodes.DRIVER_REFUSED, message: /refused the write at priority 16 \(property: value-out-of-range\)$/ }, 'class and code by their names');
  dev.refuseWrites = false;
  dev.ackButIgnore = true;
  await t.rejects(write(p, 5), { code: ErrorCodes.DRIVER_REFUSED, message: /acknowledged the write but its priority array holds nothing \(NULL\) at priority 16, not 5/ });
  dev.ackButIgnore = false;
  await write(p, 5);
  t.equal(slot(dev, 'AV50', 16), 5, 'a device that behaves again takes it');
  // A property without a priority array (not presentValue of a commandable object): no check.
  await write((c.prepareWrite as NonNullable<typeof c.prepareWrite>)(writePoint('AV3.outOfService')), true);
  t.same((await c.read([c.prepare(point('AV3.outOfService'))]))[0], { val: true }, 'outOfService written');
});

t.test('points are read with ReadPropertyMultiple, in batches', async (t) => {
  const d = driver();
  t.teardown(() => d.close());
  const c = d.open(conn('bacnet://127.0.0.2/1001'));
  const pts = Array.from({ length: 30 }, (_, i) => c.prepare(point(`AV${10 + i}`)));
  const before = { ...main.seen };
  const got = await c.read(pts);
  t.same(got, Array.from({ length: 30 }, (_, i) => ({ val: 10 + i })));
  t.equal(main.seen.rpm - before.rpm, 2, 'two ReadPropertyMultiple requests (20 + 10)');
  t.equal(main.seen.rp - before.rp, 0, 'no ReadProperty');
  // An unknown object among known ones faults alone, inside the same request.
  const mixed = await c.read([c.prepare(point('AI1')), c.prepare(point('AI77')), c.prepare(point('AV3.statusFlags'))]);
  t.same(mixed[0], { val: 21.5 });
  t.ok(mixed[1] !== undefined && 'err' in mixed[1] && mixed[1].err.code === ErrorCodes.DRIVER_REFUSED && /no such object/.test(mixed[1].err.message), 'unknown object');
  t.ok(mixed[2] !== undefined && 'err' in mixed[2] && /no such property/.test(mixed[2].err.message), 'unknown property');
});

t.test('REAL values read as the decimals the device means (the shortest that is the same float32)', async (t) => {
  const dev = new BacnetDevice({ address: '127.0.0.7', deviceInstance: 4004, rpm: 'reject' });
  const vals = [21.3, 0.1, -3.7, 1013.25, 21.5, 12345.6, 1.5e-7, NaN, -Infinity, -0];
  vals.forEach((v, i) => dev.set(AV, 70 + i, real(v)));
  dev.commandable(AV, 90, real(0));
  await dev.start();
  t.teardown(() => dev.stop());
  const d = driver();
  t.teardown(() => d.close());
  for (const [how, c] of [
    ['ReadPropertyMultiple', d.open(conn('bacnet://127.0.0.2/1001'))],
    ['ReadProperty', d.open(conn('bacnet://127.0.0.7/4004'))],
  ] as const) {
    if (how === 'ReadPropertyMultiple') vals.forEach((v, i) => main.set(AV, 70 + i, real(v)));
    const got = await c.read(vals.map((_, i) => c.prepare(point(`AV${70 + i}`))));
    vals.forEach((v, i) => {
      const g = got[i];
      t.ok(g !== undefined && 'val' in g && Object.is(g.val, v), `${how}: REAL ${String(v)} reads as ${g !== undefined && 'val' in g ? String(g.val) : 'an error'}`);
    });
  }
  // A write of 21.3 is checked against the priority array's float32: the same value.
  const c = d.open(conn('bacnet://127.0.0.7/4004'));
  await (c.write as NonNullable<typeof c.write>)((c.prepareWrite as NonNullable<typeof c.prepareWrite>)(writePoint('AV90')), 21.3);
  t.same((await c.read([c.prepare(point('AV90'))]))[0], { val: 21.3 }, 'written 21.3, read back 21.3');
});

t.test('a device that rejects ReadPropertyMultiple is read with ReadProperty', async (t) => {
  const dev = new BacnetDevice({ address: '127.0.0.4', deviceInstance: 2002, rpm: 'reject' });
  fill(dev);
  await dev.start();
  t.teardown(() => dev.stop());
  const d = driver();
  t.teardown(() => d.close());
  const c = d.open(conn('bacnet://127.0.0.4/2002'));
  const pts = POINTS.map((p) => c.prepare(point(p.cur)));
  t.same(await c.read(pts), POINTS.map((p) => ({ val: p.val })), 'every value');
  t.equal(dev.seen.rpm, 1, 'one refused ReadPropertyMultiple');
  t.equal(dev.seen.rp, POINTS.length, 'then ReadProperty per point');
  t.same(await c.read(pts), POINTS.map((p) => ({ val: p.val })), 'again');
  t.equal(dev.seen.rpm, 1, 'never ReadPropertyMultiple again');
  t.equal((c as unknown as { batchSize: number }).batchSize, 0);
});

t.test('a device that cannot answer big requests gets smaller ones', async (t) => {
  const dev = new BacnetDevice({ address: '127.0.0.5', deviceInstance: 3003, rpm: 4 });
  fill(dev);
  await dev.start();
  t.teardown(() => dev.stop());
  const d = driver();
  t.teardown(() => d.close());
  const c = d.open(conn('bacnet://127.0.0.5/3003'));
  const pts = Array.from({ length: 30 }, (_, i) => c.prepare(point(`AV${10 + i}`)));
  t.same(await c.read(pts), Array.from({ length: 30 }, (_, i) => ({ val: 10 + i })));
  const size = (c as unknown as { batchSize: number }).batchSize;
  t.ok(size >= 1 && size <= 4, `batches of ${size}`);
  const before = dev.seen.rpm;
  await c.read(pts);
  t.equal(dev.seen.rpm - before, Math.ceil(30 / size), 'no refused request the second time');
  t.equal(dev.seen.rp, 0, 'still ReadPropertyMultiple');
});

t.test('a device that disappears is down, and ok again when it comes back', async (t) => {
  const dev = new BacnetDevice({ address: '127.0.0.6', deviceInstance: 4004 });
  fill(dev);
  await dev.start();
  const d = driver();
  t.teardown(() => d.close());
  const c = d.open(conn('bacnet://127.0.0.6/4004'));
  const pts = [c.prepare(point('AI1'))];
  t.same(await c.read(pts), [{ val: 21.5 }]);
  dev.stop();
  await t.rejects(c.read(pts), { code: ErrorCodes.DRIVER_DOWN, message: /no answer from device 4004/ });
  dev.set(AI, 1, real(22));
  await dev.start();
  t.teardown(() => dev.stop());
  t.same(await c.read(pts), [{ val: 22 }], 'back');
});

const tshark = spawnSync('tshark', ['-v']).status === 0;
t.test('tshark sees ReadPropertyMultiple on the wire', { skip: tshark ? false : 'tshark is not installed' }, async (t) => {
  const cap = spawn('tshark', ['-l', '-i', 'lo', '-f', 'udp port 47808', '-Y', 'bacapp', '-T', 'fields', '-e', 'ip.src', '-e', 'ip.dst', '-e', 'bacapp.confirmed_service'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  cap.stdout.on('data', (b: Buffer) => (out += b.toString()));
  cap.stderr.on('data', (b: Buffer) => (err += b.toString()));
  // tshark says "Capturing on" on stderr as it opens the interface; packets count a little later.
  const t0 = Date.now();
  while (!/Capturing on/.test(err) && Date.now() - t0 < 10_000 && cap.exitCode === null) await new Promise((r) => setTimeout(r, 50));
  await new Promise((r) => setTimeout(r, 1000));
  if (cap.exitCode !== null || !/Capturing on/.test(err)) {
    // Installed but unable to capture here (no permission on lo): nothing to referee with.
    t.comment(`SKIP tshark cannot capture on lo: ${err.trim().split('\n').pop() ?? ''}`);
    t.pass('nothing to referee with');
    cap.kill('SIGINT');
    return;
  }
  const d = driver();
  t.teardown(() => d.close());
  const c = d.open(conn('bacnet://127.0.0.2/1001'));
  await c.read(POINTS.map((p) => c.prepare(point(p.cur))));
  await new Promise((r) => setTimeout(r, 1000));
  cap.kill('SIGINT');
  await new Promise((r) => cap.once('exit', r));
  const lines = out.trim().split('\n').filter((l) => l !== '');
  // Confirmed service 14 is ReadPropertyMultiple.
  t.ok(lines.some((l) => l.startsWith(`${CLIENT}\t127.0.0.2\t14`)), `a ReadPropertyMultiple from ${CLIENT} to the device: ${lines.slice(0, 4).join(' | ')}`);
});
