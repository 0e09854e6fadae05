/**
 * How long a point's history is kept (docs/history.md): the point's own tags where it has them,
 * else the defaults of the configuration.
 *
 * - `hisRetention` (a duration Number: `90day`, `36h`): raw samples older than this are rolled
 *   up (store/rollups.ts) and removed. Default: `historyRetentionDays`.
 * - `hisRollupRetention` (a duration Number): 15-minute rollups older than this are removed.
 *   Default: `historyRollupRetentionDays`.
 * - `hisMaxSamples` (a Number without unit, a whole number of 1 or more): at most this many raw
 *   samples are kept, the oldest rolled up and removed first. No default (the store's size bound,
 *   `historyMaxBytes`, applies to all points together).
 *
 * The model checks these tags when a record is created or updated (`checkRetentionTags`), so a
 * bad one is refused with HL_INVALID_RECORD and never reaches retention.
 */
import { durationMs } from '../haystack/duration.js';
import { HNumber, type HDict } from '../haystack/values.js';
import { ErrorCodes, HayloftError } from '../lib/errors.js';

const DAY_MS = 86_400_000;

export interface RetentionDefaults {
  /** Raw samples are kept this many days; 0: no age bound. */
  rawDays: number;
  /** Rollups are kept this many days; 0: no age bound. */
  rollupDays: number;
}

export interface RetentionPolicy {
  /** Raw samples older than this (ms) go; null: no age bound. */
  rawMs: number | null;
  /** Rollups older than this (ms) go; null: no age bound. */
  rollupMs: number | null;
  /** At most this many raw samples; null: no bound. */
  maxSamples: number | null;
}

export const RETENTION_TAGS = ['hisRetention', 'hisRollupRetention', 'hisMaxSamples'] as const;

function duration(rec: HDict, tag: string): number | undefined {
  const v = rec.get(tag);
  if (v === undefined) return undefined;
  const ms = durationMs(v);
  if (typeof ms === 'string') throw new HayloftError(ErrorCodes.INVALID_RECORD, `${tag} ${ms} (for example ${tag}: 365day)`);
  return ms;
}

function maxSamples(rec: HDict): number | undefined {
  const v = rec.get('hisMaxSamples');
  if (v === undefined) return undefined;
  if (!(v instanceof HNumber) || v.unit !== null || !Number.isSafeInteger(v.val) || v.val < 1) {
    throw new HayloftError(ErrorCodes.INVALID_RECORD, 'hisMaxSamples must be a whole Number of 1 or more, without unit (the raw samples kept at most)');
  }
  return v.val;
}

/** Refuses a record whose retention tags are malformed (HL_INVALID_RECORD). */
export function checkRetentionTags(rec: HDict): void {
  duration(rec, 'hisRetention');
  duration(rec, 'hisRollupRetention');
  maxSamples(rec);
}

/**
 * The point's policy: its tags, else the defaults. A record whose tags fail the check (stored by
 * an older version) falls back to the defaults rather than stopping retention for every point.
 */
export function retentionPolicy(rec: HDict | undefined, d: RetentionDefaults): RetentionPolicy {
  const fallback: RetentionPolicy = { rawMs: d.rawDays > 0 ? d.rawDays * DAY_MS : null, rollupMs: d.rollupDays > 0 ? d.rollupDays * DAY_MS : null, maxSamples: null };
  if (rec === undefined) return fallback;
  try {
    return {
      rawMs: duration(rec, 'hisRetention') ?? fallback.rawMs,
      rollupMs: duration(rec, 'hisRollupRetention') ?? fallback.rollupMs,
      maxSamples: maxSamples(rec) ?? null,
    };
  } catch {
    return fallback;
  }
}
