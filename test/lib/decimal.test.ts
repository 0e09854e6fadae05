import t from 'tap';
import { DecimalScale, float32Decimal, fractionDigits, roundDecimal } from '../../src/lib/decimal.js';
import { prng } from '../helpers/prng.js';

/** Significant digits of a finite number as JS writes it ("21.3" → 3). */
function sigDigits(x: number): number {
  const m = /^-?(\d+)(?:\.(\d+))?(?:e[-+]\d+)?$/.exec(String(x));
  if (m === null) throw new Error(`no digits in ${x}`);
  return `${m[1] ?? ''}${m[2] ?? ''}`.replace(/^0+/, '').replace(/0+$/, '').length || 1;
}

/** The shortest decimal that is the same float32, found the slow way (strings). */
function shortestBySearch(x: number): number {
  for (let p = 1; p <= 9; p++) {
    const y = Number(x.toPrecision(p));
    if (Math.fround(y) === x) return y;
  }
  return x;
}

t.test('float32Decimal: what a float32 says', async (t) => {
  t.equal(float32Decimal(Math.fround(21.3)), 21.3, 'the issue\'s example: 21.299999237060547 is 21.3');
  t.equal(Math.fround(21.3), 21.299999237060547);
  t.equal(float32Decimal(Math.fround(0.1)), 0.1);
  t.equal(float32Decimal(Math.fround(-3.7)), -3.7);
  t.equal(float32Decimal(Math.fround(1013.25)), 1013.25, 'exact in binary: unchanged');
  t.equal(float32Decimal(21.5), 21.5);
  t.equal(float32Decimal(16777216), 16777216, 'integers unchanged');
  t.equal(float32Decimal(Math.fround(3.4e38)), Math.fround(3.4e38), 'huge float32 integers unchanged');
  t.equal(float32Decimal(Math.fround(1.5e-7)), 1.5e-7, 'small values');
  for (const v of [NaN, Infinity, -Infinity, -0, 0]) t.ok(Object.is(float32Decimal(v), v), `${Object.is(v, -0) ? '-0' : String(v)} unchanged`);
  t.equal(float32Decimal(0.7000000000000001), 0.7000000000000001, 'a double that is no float32 is left alone');
  t.equal(float32Decimal(1e-45 * 1.4), 1e-45 * 1.4, 'a subnormal float32 too small for 22 digits is left alone');

  const rnd = prng(11);
  let bad = 0;
  for (let i = 0; i < 20000 && bad < 5; i++) {
    const x = Math.fround((rnd() - 0.5) * 10 ** Math.floor(rnd() * 16 - 6));
    const y = float32Decimal(x);
    const ref = Number.isInteger(x) ? x : shortestBySearch(x); // integers are kept as sent
    if (Math.fround(y) !== x || sigDigits(y) > sigDigits(ref)) {
      bad++;
      t.fail(`${x}: got ${y}, the shortest is ${ref}`);
    }
  }
  t.equal(bad, 0, '20,000 random float32s: the same float32, never longer than the shortest found by search (integers kept as sent)');
});

t.test('fractionDigits and roundDecimal', async (t) => {
  t.equal(fractionDigits(0.7), 1);
  t.equal(fractionDigits(7), 0);
  t.equal(fractionDigits(0.7000000000000001), -1);
  t.equal(fractionDigits(1 / 3), -1);
  t.equal(fractionDigits(0.001, 2), -1, 'at most max digits');
  t.equal(fractionDigits(NaN), -1);
  t.equal(fractionDigits(Infinity), -1);
  t.equal(roundDecimal(0.7000000000000001, 1), 0.7);
  t.equal(roundDecimal(-0.30000000000000004, 1), -0.3);
  t.ok(Object.is(roundDecimal(-0.0000001, 2), 0), 'rounding to zero gives +0');
  t.ok(Number.isNaN(roundDecimal(NaN, 1)));
  t.equal(roundDecimal(Infinity, 1), Infinity);
  t.equal(roundDecimal(1e300, 3), 1e300, 'too large to scale: unchanged');
});

t.test('DecimalScale: the digits a scale and offset imply', async (t) => {
  const s = (scale: number, offset = 0): DecimalScale => new DecimalScale(scale, offset);
  t.equal(7 * 0.1, 0.7000000000000001, 'the bug: raw 7 × 0.1');
  t.equal(s(0.1).apply(7), 0.7, 'is 0.7');
  t.equal(s(0.01).apply(101325), 1013.25);
  t.equal(s(0.5).apply(3), 1.5);
  t.equal(s(0.25).apply(3), 0.75, '0.25 keeps two digits');
  t.equal(s(0.03125).apply(3), 0.09375, 'a scale of more digits than its magnitude keeps them all');
  t.equal(s(0.1, -5).apply(215), 16.5, 'with an offset');
  t.equal(s(0.1, 273.15).apply(-2731), 0.05, 'an offset with more digits than the scale');
  t.equal(s(0.1, 0.3).apply(-3), 0, '-0.3 + 0.3 is +0, not -0 nor 5e-17');
  t.ok(Object.is(s(0.1, 0.3).apply(-3), 0));
  t.equal(s(2, 1).apply(35000), 70001);
  t.equal(s(1 / 3).apply(7), 2.333, 'a scale that is no short decimal: two digits finer than a raw step');
  t.equal(s(1 / 3).digits(0), 3);
  t.equal(s(1 / 7, 0.5).apply(10), 1.929, '10/7 + 0.5');
  t.equal(s(0.1).apply(213.5, 1), 21.35, 'a float raw value adds its own digits');
  t.equal(s(0.1).apply(Math.PI, -1), Math.PI * 0.1, 'a raw value that is no short decimal: as computed');
  t.equal(s(1e-20).apply(5), 5e-20, 'a tiny scale: as computed (no rounding to 15 digits)');
  t.ok(Number.isNaN(s(0.1).apply(NaN, -1)), 'NaN passes');
  t.equal(s(0.1).apply(Infinity, -1), Infinity);
  t.equal(s(1).apply(0.7000000000000001), 0.7000000000000001, 'scale 1, offset 0: the raw value untouched');
  t.equal(s(1).identity, true);

  // Every int16 raw value through common scales and offsets gives exactly the decimal the
  // arithmetic means, computed here with integers.
  const cases: [string, string][] = [
    ['0.1', '0'],
    ['0.01', '0'],
    ['0.5', '0'],
    ['0.001', '-40'],
    ['0.1', '-273.15'],
    ['0.05', '0.25'],
    ['10', '0.5'],
  ];
  for (const [sc, of] of cases) {
    const conv = s(Number(sc), Number(of));
    const ds = (sc.split('.')[1] ?? '').length;
    const dof = (of.split('.')[1] ?? '').length;
    const d = Math.max(ds, dof);
    const si = BigInt(sc.replace('.', '')) * 10n ** BigInt(d - ds);
    const oi = BigInt(of.replace('.', '')) * 10n ** BigInt(d - dof);
    let bad = 0;
    for (let raw = -32768; raw <= 32767 && bad < 3; raw++) {
      const exact = Number(`${BigInt(raw) * si + oi}e-${d}`);
      const got = conv.apply(raw);
      if (!Object.is(got, exact + 0)) {
        bad++;
        t.fail(`${raw} × ${sc} + ${of}: ${got}, not ${exact}`);
      }
    }
    t.equal(bad, 0, `every int16 × ${sc} + ${of} is its exact decimal`);
  }
});
