/**
 * Watch leases (docs/spec/wire-notes.md §6): a Number with a time unit, default 1 min, clamped to [10 s, 24 h].
 * Clamping rather than refusing an out-of-range lease: a client asking for a week still gets a
 * working watch, and the answer's `lease` tells it what it got.
 */
import { quoteInput } from '../lib/quote.js';
import { HNumber, type HVal, kindOf } from '../haystack/values.js';
import { ErrorCodes, HayloftError } from '../lib/errors.js';

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

/** Milliseconds per accepted unit. Others (`ms`, `week`, `°F` ...) are refused, not guessed. */
const UNIT_MS: Readonly<Record<string, number>> = { s: SECOND, sec: SECOND, min: MINUTE, h: HOUR, hr: HOUR, day: DAY };

export const LEASE_UNITS: readonly string[] = Object.keys(UNIT_MS);
export const LEASE_DEFAULT_MS = MINUTE;
export const LEASE_MIN_MS = 10 * SECOND;
export const LEASE_MAX_MS = DAY;

export interface Lease {
  /** The lease in force, clamped. */
  ms: number;
  /** The same as the answer's `lease`: in the unit asked for when it is a whole number of it, else seconds. */
  num: HNumber;
}

export const DEFAULT_LEASE: Lease = { ms: LEASE_DEFAULT_MS, num: new HNumber(1, 'min') };

function bad(message: string): HayloftError {
  return new HayloftError(ErrorCodes.BAD_LEASE, `${message}; give a Number with a time unit (${LEASE_UNITS.join(', ')}), e.g. n:1 h`);
}

/**
 * The lease of a watchSub's meta `lease`; the default when absent. Throws HL_BAD_LEASE.
 * A Number without a unit, or a Str of digits, is read as milliseconds: the WideSky client
 * documents its `lease` argument as a duration in ms and sends it as given (`60000`), and it must
 * work unchanged. The answer's `lease` then carries a unit.
 */
export function parseLease(v: HVal | undefined): Lease {
  if (v === undefined || v === null) return DEFAULT_LEASE;
  if (typeof v === 'string' && /^\s*\d+(\.\d+)?\s*$/.test(v)) return parseLease(new HNumber(Number(v) / SECOND, 's'));
  if (!(v instanceof HNumber)) throw bad(`lease must be a Number, not a ${kindOf(v)}`);
  if (v.unit === null) return parseLease(new HNumber(v.val / SECOND, 's'));
  const unitMs = UNIT_MS[v.unit];
  if (unitMs === undefined) throw bad(`lease unit ${quoteInput(v.unit)} is not a supported time unit`);
  if (!(v.val > 0)) throw bad(`lease must be more than 0 (got ${v.numText()} ${v.unit})`);
  const asked = v.val * unitMs;
  const ms = Math.round(Math.min(LEASE_MAX_MS, Math.max(LEASE_MIN_MS, asked)));
  if (ms === asked) return { ms, num: v };
  const inUnit = ms / unitMs;
  return { ms, num: Number.isInteger(inUnit) ? new HNumber(inUnit, v.unit) : new HNumber(ms / SECOND, 's') };
}
