/**
 * Unit conversion with the Project Haystack unit database (j2inn's haystack-core and
 * haystack-units: every unit of the standard's units.txt with its quantity, scale and offset),
 * rather than a table of our own.
 *
 * Conversion is allowed between units of the same physical quantity only; "dimensionless" units
 * (%, pH, ppm, power factor ...) share a quantity in the database without being interchangeable,
 * so among them only the unit itself converts.
 */
import { HUnit } from 'haystack-core';
import 'haystack-units';

/** Whether the text is a unit of the Haystack database. */
export function isKnownUnit(unit: string): boolean {
  return HUnit.get(unit) !== undefined;
}

/**
 * `val` in `from` expressed in `to`, or a message saying why it cannot be: an unknown unit, or
 * units of different quantities (°C to kPa).
 */
export function convertUnit(val: number, from: string, to: string): number | { err: string } {
  if (from === to) return val;
  const a = HUnit.get(from);
  const b = HUnit.get(to);
  if (a === undefined) return { err: `unit ${from} is not a Haystack unit` };
  if (b === undefined) return { err: `unit ${to} is not a Haystack unit` };
  if (a.equals(b)) return val;
  if (a.quantity === undefined || a.quantity !== b.quantity || a.quantity === 'dimensionless') {
    return { err: `${from} (${a.quantity ?? 'no quantity'}) cannot be converted to ${to} (${b.quantity ?? 'no quantity'})` };
  }
  // 12 significant digits: 71.6 °F is 22 °C, not 22.000000000000057 (binary scale factors).
  return Number(a.convertTo(val, b).toPrecision(12));
}
