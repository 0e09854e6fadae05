/**
 * BACnet engineering units (the `units` property, an enumeration) as Haystack unit names (the
 * first symbol of each quantity in Project Haystack's units database). Units a building rarely
 * shows are left out: a point learned with one of them simply gets no `unit`, which the
 * technician adds, rather than a guess.
 */
import { EngineeringUnits as U } from '@bacnet-js/client';

const UNITS = new Map<number, string>([
  [U.SQUARE_METERS, 'm²'],
  [U.SQUARE_FEET, 'ft²'],
  [U.MILLIAMPERES, 'mA'],
  [U.AMPERES, 'A'],
  [U.OHMS, 'Ω'],
  [U.KILOHMS, 'kΩ'],
  [U.VOLTS, 'V'],
  [U.MILLIVOLTS, 'mV'],
  [U.KILOVOLTS, 'kV'],
  [U.VOLT_AMPERES, 'VA'],
  [U.KILOVOLT_AMPERES, 'kVA'],
  [U.VOLT_AMPERES_REACTIVE, 'VAR'],
  [U.KILOVOLT_AMPERES_REACTIVE, 'kVAR'],
  [U.POWER_FACTOR, 'pf'],
  [U.DEGREES_PHASE, 'deg'],
  [U.JOULES, 'J'],
  [U.KILOJOULES, 'kJ'],
  [U.MEGAJOULES, 'MJ'],
  [U.WATT_HOURS, 'Wh'],
  [U.KILOWATT_HOURS, 'kWh'],
  [U.MEGAWATT_HOURS, 'MWh'],
  [U.BTUS, 'BTU'],
  [U.KILO_BTUS, 'kBTU'],
  [U.MEGA_BTUS, 'MBTU'],
  [U.THERMS, 'thm'],
  [U.TON_HOURS, 'tonrefh'],
  [U.HERTZ, 'Hz'],
  [U.KILOHERTZ, 'kHz'],
  [U.PER_HOUR, '1/h'],
  [U.PER_MINUTE, '1/min'],
  [U.PER_SECOND, '1/s'],
  [U.PERCENT_RELATIVE_HUMIDITY, '%RH'],
  [U.MILLIMETERS, 'mm'],
  [U.CENTIMETERS, 'cm'],
  [U.METERS, 'm'],
  [U.KILOMETERS, 'km'],
  [U.INCHES, 'in'],
  [U.FEET, 'ft'],
  [U.LUMENS, 'lm'],
  [U.LUXES, 'lx'],
  [U.FOOT_CANDLES, 'fc'],
  [U.WATTS_PER_SQUARE_METER, 'W/m²'],
  [U.WATTS_PER_SQUARE_FOOT, 'W/ft²'],
  [U.GRAMS, 'g'],
  [U.KILOGRAMS, 'kg'],
  [U.POUNDS_MASS, 'lb'],
  [U.KILOGRAMS_PER_SECOND, 'kg/s'],
  [U.KILOGRAMS_PER_HOUR, 'kg/h'],
  [U.POUNDS_MASS_PER_HOUR, 'lb/h'],
  [U.MILLIWATTS, 'mW'],
  [U.WATTS, 'W'],
  [U.KILOWATTS, 'kW'],
  [U.MEGAWATTS, 'MW'],
  [U.BTUS_PER_HOUR, 'BTU/h'],
  [U.KILO_BTUS_PER_HOUR, 'kBTU/h'],
  [U.HORSEPOWER, 'hp'],
  [U.TONS_REFRIGERATION, 'tonref'],
  [U.PASCALS, 'Pa'],
  [U.HECTOPASCALS, 'hPa'],
  [U.KILOPASCALS, 'kPa'],
  [U.MILLIBARS, 'mbar'],
  [U.BARS, 'bar'],
  [U.POUNDS_FORCE_PER_SQUARE_INCH, 'psi'],
  [U.INCHES_OF_WATER, 'inH₂O'],
  [U.MILLIMETERS_OF_WATER, 'mmH₂O'],
  [U.CENTIMETERS_OF_WATER, 'cmH₂O'],
  [U.INCHES_OF_MERCURY, 'inHg'],
  [U.MILLIMETERS_OF_MERCURY, 'mmHg'],
  [U.DEGREES_CELSIUS, '°C'],
  [U.DEGREES_KELVIN, 'K'],
  [U.DEGREES_FAHRENHEIT, '°F'],
  [U.DELTA_DEGREES_FAHRENHEIT, 'Δ°F'],
  [U.DELTA_DEGREES_KELVIN, 'Δ°C'],
  [U.YEARS, 'yr'],
  [U.MONTHS, 'mo'],
  [U.WEEKS, 'wk'],
  [U.DAYS, 'day'],
  [U.HOURS, 'h'],
  [U.MINUTES, 'min'],
  [U.SECONDS, 's'],
  [U.MILLISECONDS, 'ms'],
  [U.METERS_PER_SECOND, 'm/s'],
  [U.KILOMETERS_PER_HOUR, 'km/h'],
  [U.FEET_PER_SECOND, 'ft/s'],
  [U.FEET_PER_MINUTE, 'ft/min'],
  [U.MILES_PER_HOUR, 'mph'],
  [U.CUBIC_FEET, 'ft³'],
  [U.CUBIC_METERS, 'm³'],
  [U.LITERS, 'L'],
  [U.US_GALLONS, 'gal'],
  [U.CUBIC_FEET_PER_MINUTE, 'cfm'],
  [U.CUBIC_METERS_PER_SECOND, 'm³/s'],
  [U.CUBIC_METERS_PER_HOUR, 'm³/h'],
  [U.LITERS_PER_SECOND, 'L/s'],
  [U.LITERS_PER_MINUTE, 'L/min'],
  [U.LITERS_PER_HOUR, 'L/h'],
  [U.US_GALLONS_PER_MINUTE, 'gal/min'],
  [U.DEGREES_ANGULAR, '°'],
  [U.PARTS_PER_MILLION, 'ppm'],
  [U.PARTS_PER_BILLION, 'ppb'],
  [U.PERCENT, '%'],
  [U.REVOLUTIONS_PER_MINUTE, 'rpm'],
  [U.KILOGRAMS_PER_CUBIC_METER, 'kg/m³'],
  [U.MICROGRAMS_PER_CUBIC_METER, 'µg/m³'],
  [U.DECIBELS, 'dB'],
]);

/** The Haystack unit of a BACnet engineering unit; undefined for `no-units` and units not mapped. */
export function haystackUnit(units: number): string | undefined {
  return UNITS.get(units);
}

/** Haystack unit name -> BACnet engineering unit: the table above read backwards (first wins). */
let BACK: Map<string, number> | undefined;

/** The BACnet engineering unit of a Haystack unit; undefined for units not mapped (the device side then says no-units). */
export function bacnetUnits(unit: string): number | undefined {
  if (BACK === undefined) {
    BACK = new Map();
    for (const [u, name] of UNITS) if (!BACK.has(name)) BACK.set(name, u);
  }
  return BACK.get(unit);
}
