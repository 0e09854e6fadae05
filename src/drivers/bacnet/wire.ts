/**
 * What BACnet answers look like to Hayloft, shared by polling (bacnet-driver.ts), commissioning
 * (session.ts) and change of value (cov.ts): the library's errors classified, values turned into
 * what a point holds, and requests with a timeout of their own.
 */
import { ApplicationTag, ErrorClass, ErrorCode } from '@bacnet-js/client';
import { float32Decimal } from '../../lib/decimal.js';
import type { HayloftError } from '../../lib/errors.js';
import { type RawValue, refusedError } from '../driver.js';

// The library's enums as plain numbers: values on the wire are numbers, compared as such.
export const TAG_REAL: number = ApplicationTag.REAL;
export const TAG_DOUBLE: number = ApplicationTag.DOUBLE;
export const TAG_UNSIGNED: number = ApplicationTag.UNSIGNED_INTEGER;
export const TAG_SIGNED: number = ApplicationTag.SIGNED_INTEGER;
export const TAG_ENUMERATED: number = ApplicationTag.ENUMERATED;
export const TAG_BOOLEAN: number = ApplicationTag.BOOLEAN;
export const TAG_STRING: number = ApplicationTag.CHARACTER_STRING;
export const TAG_ERROR: number = ApplicationTag.ERROR;
export const CLASS_OBJECT: number = ErrorClass.OBJECT;
export const CLASS_PROPERTY: number = ErrorClass.PROPERTY;
export const CODE_UNRECOGNIZED: number = ErrorCode.REJECT_UNRECOGNIZED_SERVICE;
export const CODE_DENIED: number = ErrorCode.SERVICE_REQUEST_DENIED;
/** Reject reason 9, unrecognized service (the library reports rejects as aborts with the reason). */
export const REJECT_UNRECOGNIZED_SERVICE = 9;

export interface AppValue {
  type: number;
  value: unknown;
}

/** What an error from the library says, parsed from its message (it has no codes of its own). */
export function classify(e: unknown): { kind: 'timeout' } | { kind: 'error'; cls: number; code: number } | { kind: 'abort'; reason: number } | { kind: 'other'; message: string } {
  const m = e instanceof Error ? e.message : String(e);
  if (m === 'ERR_TIMEOUT') return { kind: 'timeout' };
  const err = /BacnetError - Class:(\d+) - Code:(\d+)/.exec(m);
  if (err !== null) return { kind: 'error', cls: Number(err[1]), code: Number(err[2]) };
  const ab = /BacnetAbort - Reason:(\d+)/.exec(m);
  if (ab !== null) return { kind: 'abort', reason: Number(ab[1]) };
  return { kind: 'other', message: m };
}

/**
 * A value as the poller takes it, or an error for types a point cannot hold. A REAL is given as
 * the shortest decimal that is the same float32 (src/lib/decimal.ts).
 */
export function rawOf(v: AppValue | undefined, what: string): RawValue | HayloftError {
  if (v === undefined) return refusedError(`${what}: the device sent no value`);
  switch (v.type) {
    case TAG_REAL:
      // A float32 on the wire: 21.3 arrives as 21.299999237060547; it says 21.3.
      return float32Decimal(Number(v.value));
    case TAG_DOUBLE:
    case TAG_UNSIGNED:
    case TAG_SIGNED:
    case TAG_ENUMERATED:
      return Number(v.value);
    case TAG_BOOLEAN:
      return Boolean(v.value);
    case TAG_STRING:
      return String(v.value);
    case TAG_ERROR: {
      const x = v.value as { errorClass: number; errorCode: number };
      return refusedError(`${what}: the device refused it (${x.errorClass === CLASS_OBJECT ? 'no such object; ' : x.errorClass === CLASS_PROPERTY ? 'no such property; ' : ''}${errorName(x.errorClass, x.errorCode)})`);
    }
    default:
      return refusedError(`${what}: a value of BACnet type ${v.type}, which a point cannot hold`);
  }
}

/** An enum member's name as BACnet documents it: `VALUE_OUT_OF_RANGE` -> `value-out-of-range`. */
function enumName(names: Record<number, string>, n: number): string {
  const name = names[n];
  return typeof name === 'string' ? name.toLowerCase().replace(/_/g, '-') : String(n);
}

/** A BACnet Error's class and code by name: `property: value-out-of-range`. */
export function errorName(cls: number, code: number): string {
  return `${enumName(ErrorClass, cls)}: ${enumName(ErrorCode, code)}`;
}

/**
 * An error from the library as a technician reads it: `property: value-out-of-range` for a
 * BACnet Error (class and code by their names in the standard, from the library's enums),
 * `abort or reject, reason 9` (the library does not say which), `no answer` for a timeout,
 * else the library's message.
 */
export function bacnetErrorText(e: unknown): string {
  const c = classify(e);
  switch (c.kind) {
    case 'error':
      return errorName(c.cls, c.code);
    case 'abort':
      // The library reports Reject and Abort PDUs alike (BacnetAbort - Reason:n), and their reason
      // numbers mean different things, so the number is all that can be said truthfully.
      return `abort or reject, reason ${c.reason}`;
    case 'timeout':
      return 'no answer';
    default:
      return c.message;
  }
}

/** A request that rejects with ERR_TIMEOUT (as the library's own timeout) after `ms`. */
export async function timed<T>(req: Promise<T>, ms: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('ERR_TIMEOUT')), ms);
  });
  try {
    return await Promise.race([req, late]);
  } finally {
    clearTimeout(timer);
    req.catch(() => undefined); // its own timeout may fire after ours
  }
}
