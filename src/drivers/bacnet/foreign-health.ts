/**
 * A foreign-device registration (foreign.ts) as /api/health shows it, for both sides (the device's
 * part `bacnet-device`, the client's `bacnet-bbmd`): the BBMD, TTL, state, last success and last
 * error; `degraded` while the last attempt failed, so a refused or unanswered registration turns
 * the gateway's status to `degraded` with the reason (docs/errors.md HL_BBMD_UNREGISTERED).
 * Kept apart from foreign.ts, which loads the BACnet library: app.ts reports the client side's
 * registration without loading it.
 */
import { ErrorCodes } from '../../lib/errors.js';
import type { ForeignStatus } from './foreign.js';

export interface ForeignHealth {
  bbmd: string;
  bbmdTtl: number;
  bbmdState: ForeignStatus['state'];
  /** ISO time of the last successful registration, null before the first. */
  bbmdRegisteredAt: string | null;
  bbmdError: string | null;
  degraded?: string;
}

export function foreignHealth(f: ForeignStatus): ForeignHealth {
  return {
    bbmd: f.bbmd,
    bbmdTtl: f.ttlS,
    bbmdState: f.state,
    bbmdRegisteredAt: f.registeredAt === null ? null : new Date(f.registeredAt).toISOString(),
    bbmdError: f.error,
    ...(f.state === 'failed' ? { degraded: `${ErrorCodes.BBMD_UNREGISTERED}: ${f.error ?? `no registration with the BBMD at ${f.bbmd}`}` } : {}),
  };
}
