/**
 * Durations as Haystack Numbers with a time unit (`pollTime: 10s`, `hisCollectInterval: 15min`),
 * for the tags of connectors, points and history collection. Units outside this table (`week`,
 * `°F`, none at all) are refused rather than guessed: a poll time read as milliseconds when
 * seconds were meant would hammer a field bus.
 */
import { HNumber, type HVal } from './values.js';

const SECOND = 1000;

/** Milliseconds per accepted unit. */
export const DURATION_UNITS: Readonly<Record<string, number>> = {
  ms: 1,
  s: SECOND,
  sec: SECOND,
  min: 60 * SECOND,
  h: 3600 * SECOND,
  hr: 3600 * SECOND,
  day: 86400 * SECOND,
};

/**
 * The milliseconds of a duration tag, or a string saying what is wrong with it (the caller words
 * the error: it knows the tag and the record).
 */
export function durationMs(v: HVal | undefined): number | string {
  if (!(v instanceof HNumber)) return 'must be a Number with a time unit (ms, s, min, h, day)';
  if (v.unit === null) return `${v.numText()} has no unit; give a time unit (ms, s, min, h, day)`;
  const per = DURATION_UNITS[v.unit];
  if (per === undefined) return `unit "${v.unit}" is not a time unit (ms, s, min, h, day)`;
  if (!(v.val > 0) || !Number.isFinite(v.val)) return `must be more than 0 (got ${v.numText()} ${v.unit})`;
  return v.val * per;
}
