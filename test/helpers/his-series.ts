/**
 * Sensor-like series for the history codec's size tests: what devices send, through the same
 * conversions the drivers make (src/lib/decimal.ts). Seeded, so sizes reproduce.
 */
import { DecimalScale, float32Decimal } from '../../src/lib/decimal.js';
import { prng } from './prng.js';

export const T0 = Date.UTC(2026, 0, 1);

/** Timestamps of a point polled every `periodMs`, each read landing 0..`jitterMs` late. */
export function pollTimes(n: number, periodMs = 1000, jitterMs = 30, seed = 1): number[] {
  const rnd = prng(seed);
  return Array.from({ length: n }, (_, i) => T0 + i * periodMs + Math.floor(rnd() * (jitterMs + 1)));
}

/** A random walk of integer raw register values, each step in -maxStep..maxStep, kept in lo..hi. */
export function rawWalk(n: number, start: number, maxStep: number, lo: number, hi: number, seed: number): number[] {
  const rnd = prng(seed);
  const out: number[] = [];
  let x = start;
  for (let i = 0; i < n; i++) {
    out.push(x);
    x = Math.min(hi, Math.max(lo, x + Math.round((rnd() * 2 - 1) * maxStep)));
  }
  return out;
}

/** An int16 temperature register at 0.1 °C (modbusScale 0.1), as the driver gives it. */
export function scaledTemperature(n: number, seed = 2): { raw: number[]; val: number[] } {
  const raw = rawWalk(n, 215, 2, -400, 1200, seed);
  const conv = new DecimalScale(0.1, 0);
  return { raw, val: raw.map((r) => conv.apply(r)) };
}

/** A uint16 pressure register at 0.01 kPa (modbusScale 0.01), as the driver gives it. */
export function scaledPressure(n: number, seed = 3): { raw: number[]; val: number[] } {
  const raw = rawWalk(n, 10132, 6, 9000, 11000, seed);
  const conv = new DecimalScale(0.01, 0);
  return { raw, val: raw.map((r) => conv.apply(r)) };
}

/**
 * A float32 sensor (a float32 Modbus register or a BACnet REAL): a temperature the device
 * measures to 0.01 °C and sends as a float32. `wire` is what arrives (float32 widened to a
 * double), `val` what the drivers make of it.
 */
export function float32Sensor(n: number, seed = 4): { wire: number[]; val: number[] } {
  const rnd = prng(seed);
  const wire: number[] = [];
  let x = 21;
  for (let i = 0; i < n; i++) {
    wire.push(Math.fround(Math.round(x * 100) / 100));
    x += (rnd() - 0.5) * 0.06 + (21 - x) * 0.01;
  }
  return { wire, val: wire.map(float32Decimal) };
}

/** A float32 whose every mantissa bit is noise (a computed value the device never rounded). */
export function float32Noise(n: number, seed = 5): number[] {
  const rnd = prng(seed);
  let x = 21;
  return Array.from({ length: n }, () => {
    x += (rnd() - 0.5) * 0.06 + (21 - x) * 0.01;
    return float32Decimal(Math.fround(x));
  });
}

/** Series of exact values whose chunks must stay byte for byte what they were before codec 5. */
export function goldenSeries(): [string, number[], number[]][] {
  const n = 1024;
  const ts = Array.from({ length: n }, (_, i) => 1.7e12 + i * 60_000);
  const rnd = prng(9);
  return [
    ['sensor 0.1', ts, ts.map((_, i) => Math.round((21 + 3 * Math.sin(i / 240) + ((i * 7919) % 13) / 20) * 10) / 10)],
    ['constant', ts, ts.map(() => 21.5)],
    ['integers', pollTimes(n), rawWalk(n, 1000, 50, -30000, 30000, 6)],
    ['decimals 3', pollTimes(n, 1000, 30, 7), rawWalk(n, 5000, 40, 0, 99999, 8).map((k) => k / 1000)],
    ['random floats', ts, ts.map(() => rnd())],
    ['short', ts.slice(0, 3), [1, -0, 2]],
    ['specials', ts.slice(0, 6), [NaN, Infinity, -Infinity, -0, 0, 5e-324]],
  ];
}
