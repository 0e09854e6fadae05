/**
 * Unit conversion with the Project Haystack unit database (j2inn's haystack-core and
 * haystack-units: every unit of the standard's units.txt with its quantity, scale and offset),
 * rather than a table of our own.
 *
 * Conversion is allowed between units of the same physical quantity only; "dimensionless" units
 * (%, pH, ppm, power factor ...) share a quantity in the database without being interchangeable,
 * so among them only the unit itself converts.
 */
import { createRequire } from 'node:module';
import type { HUnit as HUnitClass } from 'haystack-core';

/**
 * The unit database, loaded on first use: importing it takes some 0.3 s on a loaded machine,
 * which every `hayloft` command and start would pay though few ever convert a unit.
 */
let db: typeof HUnitClass | undefined;
function units(): typeof HUnitClass {
  if (db === undefined) {
    const require = createRequire(import.meta.url);
    const core = require('haystack-core') as { HUnit: typeof HUnitClass };
    require('haystack-units'); // defines every unit in haystack-core's database
    db = core.HUnit;
  }
  return db;
}

/**
 * `val` in `from` expressed in `to`, or a message saying why it cannot be: an unknown unit, or
 * units of different quantities (°C to kPa).
 */
export function convertUnit(val: number, from: string, to: string): number | { err: string } {
  if (from === to) return val;
  const a = units().get(from);
  const b = units().get(to);
  if (a === undefined) return { err: `unit ${from} is not a Haystack unit` };
  if (b === undefined) return { err: `unit ${to} is not a Haystack unit` };
  if (a.equals(b)) return val;
  if (a.quantity === undefined || a.quantity !== b.quantity || a.quantity === 'dimensionless') {
    return { err: `${from} (${a.quantity ?? 'no quantity'}) cannot be converted to ${to} (${b.quantity ?? 'no quantity'})` };
  }
  // 12 significant digits: 71.6 °F is 22 °C, not 22.000000000000057 (binary scale factors).
  return Number(a.convertTo(val, b).toPrecision(12));
}
