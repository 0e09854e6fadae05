import t from 'tap';
import {
  chunkCount,
  chunkFirst,
  chunkLast,
  CODEC_DECIMAL,
  CODEC_DECIMAL_EXC,
  CODEC_XOR,
  decodeChunk,
  decodeValue,
  encodeChunk,
  encodeDecimal,
  encodeValue,
  encodeXor,
  HEADER_BYTES,
  newValueColumn,
  type HisKind,
  type HisValue,
} from '../../src/store/his-codec.js';
import { createHash } from 'node:crypto';
import { float32Noise, float32Sensor, goldenSeries, pollTimes, scaledPressure, scaledTemperature } from '../helpers/his-series.js';
import { prng } from '../helpers/prng.js';

function roundTrip(kind: HisKind, ts: number[], val: HisValue[]): { ok: boolean; bytes: Uint8Array; why?: string } {
  const bytes = encodeChunk(kind, ts, val, 0, ts.length);
  const ots = new Float64Array(ts.length + 2);
  const ov = newValueColumn(kind, ts.length + 2);
  const n = decodeChunk(kind, bytes, ots, ov, 2); // at an offset, as reads do
  if (n !== ts.length) return { ok: false, bytes, why: `count ${n}` };
  for (let i = 0; i < n; i++) {
    if (ots[i + 2] !== ts[i]) return { ok: false, bytes, why: `ts ${i}: ${ots[i + 2]} vs ${ts[i]}` };
    if (!Object.is(ov[i + 2], val[i])) return { ok: false, bytes, why: `val ${i}: ${String(ov[i + 2])} vs ${String(val[i])}` };
  }
  return { ok: true, bytes };
}

t.test('randomized round trips of every codec', async (t) => {
  const rnd = prng(5);
  let failures = 0;
  for (let k = 0; k < 400 && failures < 3; k++) {
    const n = 1 + Math.floor(rnd() * 300);
    const ts: number[] = [];
    let tm = k % 3 === 0 ? Math.floor((rnd() - 0.5) * 2 * Number.MAX_SAFE_INTEGER) : Math.floor(rnd() * 4e12) - 1e12;
    for (let i = 0; i < n && Number.isSafeInteger(tm); i++) {
      ts.push(tm);
      const mode = rnd();
      // regular steps, jitter, and gaps up to 2^60 ms (raw timestamp blocks)
      tm += mode < 0.5 ? 60_000 : mode < 0.8 ? 1 + Math.floor(rnd() * 1000) : 1 + Math.floor(rnd() * 2 ** (rnd() * 60));
    }
    const nums = ts.map(() => {
      const m = rnd();
      if (m < 0.3) return Math.round(rnd() * 1000) / 10;
      if (m < 0.5) return rnd() * 2 ** (rnd() * 2000 - 1000) * (rnd() < 0.5 ? -1 : 1);
      if (m < 0.6) return [NaN, Infinity, -Infinity, -0, 0, 5e-324][Math.floor(rnd() * 6)] as number;
      if (m < 0.8) return Math.round((rnd() - 0.5) * 1e15);
      return 42;
    });
    const decs = ts.map(() => Math.round((rnd() - 0.5) * 10 ** (1 + (k % 12))) / 10 ** (k % 8));
    const bools = ts.map(() => rnd() < 0.3);
    const strs = ts.map(() => ['', 'a', 'héllo 🌍', 'x'.repeat(Math.floor(rnd() * 300))][Math.floor(rnd() * 4)] as string);
    for (const [kind, val] of [
      ['Number', nums],
      ['Number', decs],
      ['Bool', bools],
      ['Str', strs],
    ] as [HisKind, HisValue[]][]) {
      const r = roundTrip(kind, ts, val);
      if (!r.ok) {
        failures++;
        t.fail(`case ${k} ${kind}: ${r.why ?? ''}`);
      }
      if (chunkCount(r.bytes) !== ts.length || chunkFirst(r.bytes) !== ts[0] || chunkLast(r.bytes) !== ts[ts.length - 1]) {
        failures++;
        t.fail(`case ${k} ${kind}: header`);
      }
    }
  }
  t.equal(failures, 0, '400 random chunks of each kind round-trip exactly');
});

t.test('codec choice and sizes', async (t) => {
  const n = 1024;
  const ts = Array.from({ length: n }, (_, i) => 1.7e12 + i * 60_000);
  const sensor = ts.map((_, i) => Math.round((21 + 3 * Math.sin(i / 240) + ((i * 7919) % 13) / 20) * 10) / 10);
  const dec = encodeDecimal(ts, sensor, 0, n);
  const xor = encodeXor(ts, sensor, 0, n);
  t.ok(dec !== null && dec.length < xor.length, 'decimal beats XOR on a 0.1-quantized sensor');
  t.ok((dec?.length ?? Infinity) / n < 1, `under a byte per sample (${((dec?.length ?? 0) / n).toFixed(2)})`);
  t.equal(encodeChunk('Number', ts, sensor, 0, n)[0], CODEC_DECIMAL);
  const rnd = prng(3);
  const floats = ts.map(() => rnd());
  t.equal(encodeDecimal(ts, floats, 0, n), null, 'random floats are no short decimals');
  t.equal(encodeChunk('Number', ts, floats, 0, n)[0], CODEC_XOR);
  t.equal(encodeDecimal(ts, [1, -0, 2], 0, 3), null, '-0 needs XOR');
  t.equal(encodeDecimal(ts, [1, 2 ** 40, 2], 0, 3), null, 'deltas past 32 bits need XOR');
  const flat = encodeChunk('Number', ts, ts.map(() => 21.5), 0, n);
  t.ok(flat.length < 120, `a constant chunk of 1,024 is tiny (${flat.length} bytes)`);
  const onoff = encodeChunk('Bool', ts, ts.map((_, i) => i % 200 < 50), 0, n);
  t.ok(onoff.length < 80, `Bool runs are cheap (${onoff.length} bytes)`);
  const modes = encodeChunk('Str', ts, ts.map((_, i) => (i % 300 < 100 ? 'occupied' : 'unoccupied')), 0, n);
  t.ok(modes.length < 100, `enum-like strings are cheap (${modes.length} bytes)`);
});

t.test('corrupt chunks are refused, not decoded as garbage', async (t) => {
  const ts = Array.from({ length: 100 }, (_, i) => i * 1000);
  const cases: [HisKind, HisValue[]][] = [
    ['Number', ts.map((i) => i / 10)],
    ['Number', ts.map((i) => Math.sin(i))],
    ['Number', ts.map((i) => (i === 5000 ? NaN : i / 10))],
    ['Bool', ts.map((i) => i % 3000 === 0)],
    ['Str', ts.map((i) => `v${i % 7}`)],
  ];
  for (const [kind, val] of cases) {
    const good = encodeChunk(kind, ts, val, 0, ts.length);
    const out = new Float64Array(ts.length);
    const decode = (b: Uint8Array, k: HisKind = kind): number => decodeChunk(k, b, out, newValueColumn(k, ts.length), 0);
    t.throws(() => decode(good.subarray(0, good.length - 1)), { code: 'HL_STORE_UNAVAILABLE' }, `${kind} codec ${good[0]}: truncated`);
    t.throws(() => decode(good.subarray(0, 10)), { code: 'HL_STORE_UNAVAILABLE' }, `${kind}: shorter than a header`);
    const badCodec = good.slice();
    badCodec[0] = 77;
    t.throws(() => decode(badCodec), { code: 'HL_STORE_UNAVAILABLE' }, `${kind}: unknown codec`);
    t.throws(() => decode(good, kind === 'Str' ? 'Bool' : 'Str'), { code: 'HL_STORE_UNAVAILABLE' }, `${kind}: wrong kind`);
  }
  t.throws(() => decodeValue('Number', new Uint8Array(3)), { code: 'HL_STORE_UNAVAILABLE' });
  t.throws(() => decodeValue('Str', new Uint8Array([0xff])), { code: 'HL_STORE_UNAVAILABLE' });
  for (const [kind, v] of [
    ['Number', NaN],
    ['Number', -0],
    ['Bool', true],
    ['Str', ''],
    ['Str', '日本'],
  ] as [HisKind, HisValue][]) {
    t.ok(Object.is(decodeValue(kind, encodeValue(kind, v)), v), `tail value ${kind} ${String(v)}`);
  }
});

t.test('sealed chunk size of sensor-like data: at most 2 bytes per sample whatever the scale', async (t) => {
  // 1,024 samples (a sealed chunk) polled every second, each read landing 0-30 ms late.
  const n = 1024;
  const ts = pollTimes(n);
  const size = (val: number[], codec: number, what: string): number => {
    const r = roundTrip('Number', ts, val);
    t.ok(r.ok, `${what}: round-trips${r.why === undefined ? '' : `: ${r.why}`}`);
    t.equal(r.bytes[0], codec, `${what}: codec ${codec}`);
    return r.bytes.length / n;
  };
  const temp = scaledTemperature(n);
  const perTemp = size(temp.val, CODEC_DECIMAL, 'int16 at modbusScale 0.1, as the driver rounds it');
  t.ok(perTemp <= 2, `0.1-scaled temperature: ${perTemp.toFixed(2)} bytes/sample`);
  const pressure = scaledPressure(n);
  const perPressure = size(pressure.val, CODEC_DECIMAL, 'uint16 at modbusScale 0.01, as the driver rounds it');
  t.ok(perPressure <= 2, `0.01-scaled pressure: ${perPressure.toFixed(2)} bytes/sample`);
  const f32 = float32Sensor(n);
  const perF32 = size(f32.val, CODEC_DECIMAL, 'a float32 sensor as the drivers give it (shortest decimal)');
  t.ok(perF32 <= 2, `float32 sensor: ${perF32.toFixed(2)} bytes/sample`);

  // What the drivers' rounding saves: the same readings as the binary arithmetic leaves them.
  const perTempRaw = size(temp.raw.map((r) => r * 0.1), CODEC_XOR, 'the same temperature as raw × 0.1');
  t.ok(perTempRaw > 4 * perTemp, `raw × 0.1 costs ${perTempRaw.toFixed(2)} bytes/sample (XOR)`);
  const perF32Wire = size(f32.wire, CODEC_XOR, 'the same float32 sensor widened to doubles');
  t.ok(perF32Wire > 2, `float32 widened: ${perF32Wire.toFixed(2)} bytes/sample (XOR)`);
  // A float32 with noise in every mantissa bit carries ~16 bits of news a sample: the codec
  // cannot go below that, but the decimal codec still beats XOR of the same values.
  const noise = float32Noise(n);
  const noiseDec = encodeChunk('Number', ts, noise, 0, n);
  t.equal(noiseDec[0], CODEC_DECIMAL, 'full-noise float32: decimal');
  t.ok(noiseDec.length < encodeXor(ts, noise, 0, n).length);
  t.comment(`bytes/sample: temp ${perTemp.toFixed(2)}, pressure ${perPressure.toFixed(2)}, float32 ${perF32.toFixed(2)}, noise ${(noiseDec.length / n).toFixed(2)}; unrounded temp ${perTempRaw.toFixed(2)}, widened float32 ${perF32Wire.toFixed(2)}`);
});

t.test('exceptions: a few values that are no decimals do not cost the chunk its codec', async (t) => {
  const n = 1024;
  const ts = pollTimes(n);
  const base = scaledTemperature(n).val;
  const clean = encodeChunk('Number', ts, base, 0, n).length;
  const cases: [string, number[]][] = [
    ['NaN from a broken sensor', [100, 101, 102]],
    ['a leading NaN', [0]],
    ['NaN first and last', [0, n - 1]],
    ['±Infinity and -0', [10, 20, 30]],
    ['a stray long float', [7]],
    ['16 exceptions (one in 64)', Array.from({ length: 16 }, (_, i) => i * 60 + 3)],
  ];
  for (const [what, at] of cases) {
    const val = base.slice();
    at.forEach((i, j) => {
      val[i] = what.startsWith('±') ? ([Infinity, -Infinity, -0][j] as number) : what.startsWith('a stray') ? 0.1 + 0.2 : NaN;
    });
    const r = roundTrip('Number', ts, val);
    t.ok(r.ok, `${what}: round-trips bit for bit${r.why === undefined ? '' : `: ${r.why}`}`);
    t.equal(r.bytes[0], CODEC_DECIMAL_EXC, `${what}: codec 5`);
    t.ok(r.bytes.length <= clean + at.length * 10 + 2, `${what}: ${r.bytes.length} bytes, ${clean} without`);
  }
  const many = base.map((v, i) => (i % 50 === 0 ? NaN : v));
  t.equal(encodeDecimal(ts, many, 0, n), null, 'more than one in 64: no decimal encoding');
  t.ok(roundTrip('Number', ts, many).ok, 'and XOR takes it');
  // A value with more digits than the rest is an exception, not a wider scale for everyone.
  const wide = base.slice();
  wide[200] = 21.123456;
  const w = encodeDecimal(ts, wide, 0, n);
  t.equal(w?.[0], CODEC_DECIMAL_EXC);
  t.equal(w?.[HEADER_BYTES], 1, 'the scale stays 1 digit');
  t.ok(roundTrip('Number', ts, wide).ok);

  // Randomized: decimal series with sparse specials and long floats, at random offsets.
  const rnd = prng(21);
  let bad = 0;
  for (let k = 0; k < 300 && bad < 3; k++) {
    const m = 1 + Math.floor(rnd() * 700);
    const tt = pollTimes(m, 1000, 30, k);
    const scale = Math.floor(rnd() * 6);
    const val = tt.map(() => Math.round((rnd() - 0.5) * 10 ** (2 + scale)) / 10 ** scale);
    const specials = [NaN, Infinity, -Infinity, -0, 0.1 + 0.2, 1 / 3, 5e-324, 1e300];
    for (let j = Math.floor(rnd() * (m / 64 + 2)); j > 0; j--) val[Math.floor(rnd() * m)] = specials[Math.floor(rnd() * specials.length)] as number;
    const r = roundTrip('Number', tt, val);
    if (!r.ok) {
      bad++;
      t.fail(`case ${k}: ${r.why ?? ''}`);
    }
  }
  t.equal(bad, 0, '300 random chunks with sparse exceptions round-trip');
});

t.test('exact values: chunks byte for byte as before codec 5', async (t) => {
  // sha256 of each chunk as encoded by the codec before exceptions existed (main at 46e20a8).
  const before: Record<string, string> = {
    'sensor 0.1': 'd00e831a6862c9f311561acd71bc8fab50f367271d1712f6cf23a86d8c8452d0',
    constant: 'f58014ae48713ef0a458a42f9f2f55f2e50d16a7689aa7249b1b0171cd790b73',
    integers: 'c714d8ee836d9525ae463504e601d5b3fe3fa385f9d024ee7ba88a12cf232177',
    'decimals 3': '4e7f5a22b26f80ad9c0b567b1af25f95d12de623f0036266a8063e7e65d23b04',
    'random floats': 'f73cabb7ce8cab849f3f9530d75d58d89deba3220c9021cfa54e6a74853d3166',
    short: 'd6f61e8f16ba7daab8b9289279c4858786d5d1dadd43b1299d65616c7e683240',
    specials: '4b7b7643be3be1243415618981169e94ba2b855c9397db5dd20fa55a1d3a6fd9',
  };
  for (const [name, ts, val] of goldenSeries()) {
    const hash = createHash('sha256').update(encodeChunk('Number', ts, val, 0, ts.length)).digest('hex');
    t.equal(hash, before[name], name);
    t.ok(roundTrip('Number', ts, val).ok, `${name}: round-trips`);
  }
});
