/**
 * Numbers as the decimals they are. A device says 7 × 0.1 or 21.3 as a float32; binary floating
 * point makes those 0.7000000000000001 and 21.299999237060547, which history then stores (and
 * clients show) as 17-digit noise, and which the decimal chunk codec cannot take
 * (src/store/his-codec.ts). These helpers give back the short decimal a value really is, cheaply
 * enough for the poll path: a few multiplications per sample, no strings.
 *
 * A "decimal with d fractional digits" here is the double nearest to k / 10^d for an integer k:
 * what `Number("0.7")` gives, and what the decimal codec stores exactly.
 */

/** Powers of ten that are exact doubles (10^22 is the last). */
const POW10: readonly number[] = Array.from({ length: 23 }, (_, i) => 10 ** i);
const MAX_DIGITS = 22;
const SAFE = Number.MAX_SAFE_INTEGER;

/** The exact double 10^d, 0 <= d <= 22. */
export function pow10(d: number): number {
  return POW10[d] as number;
}

/**
 * The fewest fractional digits (0..max, max <= 22) that write `x` exactly (the test the decimal
 * codec makes: `Math.round(x × 10^d) / 10^d === x`), or -1 when none do (long binary fractions
 * such as 0.7000000000000001, NaN, ±Infinity).
 */
export function fractionDigits(x: number, max = 15): number {
  if (!Number.isFinite(x)) return -1;
  for (let d = 0; d <= max; d++) {
    const p = POW10[d] as number;
    const k = Math.round(x * p);
    if (Math.abs(k) > SAFE) return -1;
    if (k / p === x) return d;
  }
  return -1;
}

/**
 * `x` rounded to `d` fractional digits (0..22): the double nearest to the decimal. NaN, ±Infinity
 * and values too large to scale stay as they are; a result that rounds to zero is +0.
 */
export function roundDecimal(x: number, d: number): number {
  const p = POW10[d] as number;
  const k = Math.round(x * p);
  if (!(Math.abs(k) <= SAFE)) return x;
  return k === 0 ? 0 : k / p;
}

/**
 * The shortest decimal that is the same float32 as `x`: what a float32 register or a BACnet REAL
 * really says. 21.3 sent as a float32 arrives as 21.299999237060547 and is 21.3 again here;
 * 21.5 (exact in binary) stays 21.5, integers, NaN, ±Infinity and -0 stay as they are. A value
 * that is not a float32 at all (`Math.fround(x) !== x`) is returned unchanged, as is one whose
 * shortest decimal would need more than 22 fractional digits (|x| below about 1e-13).
 *
 * Cost: one multiply, round, divide and fround per fractional digit tried, smallest first: one
 * try for a 0.1-resolution value, at most 9 significant digits for any float32.
 */
export function float32Decimal(x: number): number {
  if (Number.isInteger(x) || !Number.isFinite(x) || Math.fround(x) !== x) return x;
  for (let d = 1; d <= MAX_DIGITS; d++) {
    const p = POW10[d] as number;
    const k = Math.round(x * p);
    if (Math.abs(k) > SAFE) return x;
    const y = k / p;
    if (Math.fround(y) === x) return y;
  }
  return x;
}

/**
 * A linear conversion `raw × scale + offset` (a Modbus point's `modbusScale` and `modbusOffset`)
 * whose results are the decimals they are: 7 × 0.1 is 0.7, not 0.7000000000000001.
 *
 * The digits kept, for a raw value with `rawDigits` fractional digits (0 for an integer register):
 * - When scale and offset are short decimals (at most 15 digits) the exact result has
 *   `rawDigits + digits(scale)` or `digits(offset)` digits, whichever is more: rounding there
 *   only removes the binary noise, nothing the device said.
 * - When either is not (a scale of 1/3), two digits finer than one raw step
 *   (|scale| × 10^-rawDigits): 7 × (1/3) is 2.333. That is within half of 1 % of a step, so
 *   distinct raw values stay distinct.
 * - More than 15 digits (tiny scales such as 1e-20, or a raw value that is no short decimal):
 *   the result as computed.
 * Per sample this costs one multiply, round and divide more than the bare conversion.
 */
export class DecimalScale {
  readonly identity: boolean;
  private readonly fs: number;
  private readonly fo: number;
  private readonly bound: number;
  /** Digits for an integer raw value (precomputed: the common case). */
  private readonly intDigits: number;

  constructor(
    readonly scale: number,
    readonly offset: number,
  ) {
    this.identity = scale === 1 && offset === 0;
    this.fs = fractionDigits(scale);
    this.fo = fractionDigits(offset);
    const step = Math.abs(scale);
    this.bound = step > 0 && Number.isFinite(step) ? Math.max(0, Math.ceil(-Math.log10(step))) + 2 : -1;
    this.intDigits = this.digits(0);
  }

  /** Fractional digits kept for a raw value with `rawDigits` of its own, or -1 (no rounding). */
  digits(rawDigits: number): number {
    if (rawDigits < 0) return -1;
    let d: number;
    if (this.fs >= 0 && this.fo >= 0) d = Math.max(rawDigits + this.fs, this.fo);
    else if (this.bound < 0) return -1;
    else d = rawDigits + Math.max(this.fs >= 0 ? this.fs : 0, this.bound);
    return d <= 15 ? d : -1;
  }

  /**
   * `raw × scale + offset` as a decimal. `rawDigits`: the raw value's own fractional digits, 0
   * for integer registers (the default), -1 when unknown or not a short decimal.
   */
  apply(raw: number, rawDigits = 0): number {
    if (this.identity) return raw;
    const v = raw * this.scale + this.offset;
    const d = rawDigits === 0 ? this.intDigits : this.digits(rawDigits);
    return d < 0 ? v : roundDecimal(v, d);
  }
}
