/**
 * Scaled and float32 Modbus registers, polled from a real slave (Debian's python3-pymodbus) and
 * collected into history: curVal is the decimal the device means (0.7, not 0.7000000000000001),
 * and the chunks history seals use the compact decimal codec, not the XOR fallback.
 *
 * The poller runs on a hand-moved clock (a read every second of it, no waiting); the slave's
 * registers follow a random walk between polls.
 */
import t from 'tap';
import { encodeRegisters, parseModbusCur } from '../../src/drivers/modbus/address.js';
import { ModbusDriver } from '../../src/drivers/modbus/modbus-driver.js';
import { DriverRegistry } from '../../src/drivers/registry.js';
import { HDict, HNumber, HRef, HUri, type HVal, MARKER } from '../../src/haystack/values.js';
import { ManualClock } from '../../src/lib/clock.js';
import { silentLogger } from '../../src/lib/log.js';
import { Model } from '../../src/model/model.js';
import { PointState } from '../../src/model/point-state.js';
import { Poller } from '../../src/poller/poller.js';
import { Store } from '../../src/store/db.js';
import { CODEC_DECIMAL, CODEC_XOR, chunkCount, decodeChunk, encodeChunk, encodeDecimal } from '../../src/store/his-codec.js';

/** A Number chunk's samples as the arguments of encodeDecimal. */
function columnsOf(c: Uint8Array): [Float64Array, Float64Array, number, number] {
  const n = chunkCount(c);
  const ts = new Float64Array(n);
  const val = new Float64Array(n);
  decodeChunk('Number', c, ts, val, 0);
  return [ts, val, 0, n];
}
import { HistoryStore } from '../../src/store/history.js';
import { RecordStore } from '../../src/store/records.js';
import { ModbusSlave, peersMissing } from '../helpers/modbus-slave.js';
import { prng } from '../helpers/prng.js';
import { tempDir } from '../helpers/tmp.js';

const T0 = Date.UTC(2026, 0, 1);
const CHUNK = 64;
const SAMPLES = 3 * CHUNK + 5;

const skip = peersMissing();
if (skip !== null) {
  t.comment(`SKIP Modbus history codec test: ${skip}`);
  t.pass('skipped: ' + skip);
} else {
  t.test('polled scaled and float32 registers: exact decimals in curVal, hisRead and the sealed chunks', async (t) => {
    const temp = parseModbusCur('holding:0:int16');
    const press = parseModbusCur('holding:1:uint16');
    const f32 = parseModbusCur('holding:2:float32');
    let rawTemp = 7;
    let rawPress = 10132;
    let f32Val = 21.3;
    const slave = await ModbusSlave.tcp({ units: [1], size: 100, hr: { 0: encodeRegisters(temp, rawTemp), 1: encodeRegisters(press, rawPress), 2: encodeRegisters(f32, f32Val) } });
    t.teardown(() => slave.kill());

    const dir = tempDir(t);
    const store = await Store.open(dir);
    const clock = new ManualClock(T0);
    const model = await Model.load({ records: new RecordStore(store), clock });
    const history = new HistoryStore(store, { chunkSize: CHUNK });
    await history.start();
    const modbus = new ModbusDriver();
    const poller = new Poller({
      model,
      points: new PointState({ model, history, drivers: [modbus] }),
      history,
      drivers: new DriverRegistry([modbus]),
      clock,
      log: silentLogger(),
      timers: false,
    });
    t.teardown(async () => {
      await poller.stop();
      await modbus.close();
      await history.stop();
      await store.close();
    });
    const pt = (id: string, cur: string, extra: Record<string, HVal>): HDict =>
      HDict.of({ id: HRef.of(id), point: MARKER, cur: MARKER, his: MARKER, kind: 'Number', modbusConnRef: HRef.of('plc'), modbusCur: cur, hisCollectInterval: new HNumber(1, 's'), ...extra });
    await model.create([
      HDict.of({ id: HRef.of('plc'), conn: MARKER, modbusConn: MARKER, uri: new HUri(`modbus-tcp://127.0.0.1:${slave.port}`), modbusSlave: new HNumber(1), pollTime: new HNumber(1, 's'), timeout: new HNumber(2, 's') }),
      pt('temp', 'holding:0:int16', { unit: '°C', modbusScale: new HNumber(0.1) }),
      pt('press', 'holding:1:uint16', { unit: 'kPa', modbusScale: new HNumber(0.01) }),
      pt('f32', 'holding:2:float32', { unit: '°C' }),
    ]);
    poller.start();

    const rnd = prng(28);
    const expected: Record<string, number[]> = { temp: [], press: [], f32: [] };
    for (let i = 0; i < SAMPLES; i++) {
      // A read 50 ms into each second (the poller's phase), here at the 100 ms tick.
      for (const ms of [100, 900]) {
        clock.advance(ms);
        await poller.tick();
      }
      expected.temp?.push(Number(`${rawTemp}e-1`));
      expected.press?.push(Number(`${rawPress}e-2`));
      expected.f32?.push(f32Val);
      if (i === 0) {
        const cur = (id: string): HVal | undefined => model.get(id)?.get('curVal');
        t.same(cur('temp'), new HNumber(0.7, '°C'), 'curVal of raw 7 × 0.1 is 0.7');
        t.equal((cur('temp') as HNumber).val, 0.7, 'exactly');
        t.equal((cur('f32') as HNumber).val, 21.3, 'a float32 21.3 is 21.3');
        t.equal(model.get('temp')?.get('curStatus'), 'ok');
      }
      // The devices move between polls: a 0.1 °C random walk, a 0.01 kPa one, a float32 at 0.01.
      rawTemp += Math.round((rnd() - 0.5) * 4);
      rawPress += Math.round((rnd() - 0.5) * 10);
      f32Val = Math.round((f32Val + (rnd() - 0.5) * 0.1) * 100) / 100;
      await slave.set('hr', 0, [...encodeRegisters(temp, rawTemp), ...encodeRegisters(press, rawPress), ...encodeRegisters(f32, f32Val)]);
      // The flush the daemon runs every historyFlushMs (5 s): it writes and seals collected samples.
      if (i % 5 === 4) await history.flush();
    }
    await history.flush();

    for (const id of ['temp', 'press', 'f32']) {
      const his = await history.read(id);
      const want = expected[id] ?? [];
      t.equal(his.ts.length, SAMPLES, `${id}: every poll collected`);
      t.same([...(his.val as Float64Array)], want, `${id}: hisRead gives the exact decimals`);
      // The sealed chunks, as history stored them in LevelDB.
      const idb = new TextEncoder().encode(id);
      const prefix = new Uint8Array([0x43, ...idb, 0]); // T_CHUNK, the id, its end (history.ts keys)
      const end = new Uint8Array([0x43, ...idb, 1]);
      const chunks = await store.his.values({ gte: prefix, lt: end }).all();
      const sealed = chunks.reduce((n, c) => n + chunkCount(c), 0);
      t.ok(chunks.length >= 3, `${id}: ${chunks.length} sealed chunks (${sealed} samples)`);
      // Every chunk could take the decimal codec (a chunk goes XOR only where that is smaller:
      // a short chunk of a step-like series, the first seal of a point being jittered).
      t.same(
        chunks.map((c) => c[0] === CODEC_DECIMAL || encodeDecimal(...columnsOf(c)) !== null),
        chunks.map(() => true),
        `${id}: every sealed chunk holds exact decimals`,
      );
      const bytes = chunks.reduce((n, c) => n + c.length, 0);
      t.ok(bytes / sealed <= 2, `${id}: ${(bytes / sealed).toFixed(2)} bytes per sample in sealed chunks`);
    }
    // What the same readings cost before: raw × 0.1 in binary floating point goes to XOR.
    const ts = Array.from({ length: CHUNK }, (_, i) => T0 + i * 1000);
    const unrounded = (expected.temp ?? []).slice(0, CHUNK).map((v) => Math.round(v * 10) * 0.1);
    t.equal(encodeChunk('Number', ts, unrounded, 0, CHUNK)[0], CODEC_XOR, 'unrounded, the same chunk would have been XOR');
  });
}
