import t from 'tap';
import {
  chunkCount,
  chunkFirst,
  chunkLast,
  CODEC_DECIMAL,
  CODEC_XOR,
  decodeChunk,
  decodeValue,
  encodeChunk,
  encodeDecimal,
  encodeValue,
  encodeXor,
  newValueColumn,
  type HisKind,
  type HisValue,
} from '../../src/store/his-codec.js';
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
