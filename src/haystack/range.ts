/**
 * The hisRead range grammar of docs/spec/interface.md, resolved against a zone and a clock:
 *
 *   range    := "first" | "last" | "today" | "yesterday"
 *             | dateTime | dateTime "," [" "] dateTime
 *             | date | date "," [" "] date
 *   date     := YYYY-MM-DD
 *   dateTime := YYYY-MM-DD "T" hh:mm[:ss[.fff]] ("Z" | ±hh:mm) [" " zoneName]
 *
 * Spans are half-open: start inclusive, end exclusive. `{Date}` covers that whole local day,
 * `{Date},{Date}` both dates in full, `{DateTime}` everything from that instant on. Days are
 * computed in the zone given (the point's), never the host's. A range may arrive wrapped in
 * double quotes (a Zinc Str in a GET query); one pair is removed.
 */
import { quoteInput } from '../lib/quote.js';
import { charsOf, limitError } from './limits.js';
import { ErrorCodes, HayloftError } from '../lib/errors.js';
import { parseDate, parseDateTime, startOfDay } from './datetime.js';
import type { TimeZone } from './tz.js';
import type { HDate, HDateTime } from './values.js';

export type HisRange =
  | { kind: 'first' }
  | { kind: 'last' }
  | {
      kind: 'span';
      /** Epoch ms, inclusive. */
      start: number;
      /** Epoch ms, exclusive; Infinity for an open end (`{DateTime}` alone). */
      end: number;
      /** The zone of the range's DateTime when it gave one: results are converted to it. */
      tz: TimeZone | null;
    };

const FORMS = 'use first, last, today, yesterday, a date (YYYY-MM-DD), a DateTime (YYYY-MM-DDThh:mm:ss±hh:mm Zone), or two dates or two DateTimes joined by a comma';

/** Every refusal names the forms that exist, so the message alone tells the caller what to send. */
/**
 * Characters of a range text. The longest form, two DateTimes with fractions and zone names,
 * is under 120; a longer text is refused before it is looked at.
 */
export const MAX_RANGE_CHARS = 256;

function bad(text: string, why: string, cause?: unknown): HayloftError {
  return new HayloftError(ErrorCodes.BAD_RANGE, `range ${quoteInput(text)}: ${why}; ${FORMS}`, cause === undefined ? undefined : { cause });
}

const DATE_ONLY = /^\d{4}-\d{2}-\d{2}$/;

function readPoint(text: string, part: string): { date: HDate } | { dt: HDateTime } {
  try {
    if (DATE_ONLY.test(part)) return { date: parseDate(part) };
    if (/^\d{4}-\d{2}-\d{2}T/.test(part)) return { dt: parseDateTime(part) };
  } catch (e) {
    throw bad(text, e instanceof Error ? e.message : String(e), e);
  }
  throw bad(text, `${quoteInput(part)} is not a date or a DateTime`);
}

/**
 * Parses and resolves a range. `tz` is the zone of the points (for days); `now` the current
 * instant in epoch ms (injected so tests control "today").
 */
export function parseRange(input: string, tz: TimeZone, now: number): HisRange {
  if (input.length > MAX_RANGE_CHARS) throw limitError('range', charsOf(input), MAX_RANGE_CHARS, 'maxRangeChars');
  let text = input.trim();
  if (text.length >= 2 && text.startsWith('"') && text.endsWith('"')) text = text.slice(1, -1).trim();
  if (text === '') throw bad(input, 'is empty');
  switch (text) {
    case 'first':
      return { kind: 'first' };
    case 'last':
      return { kind: 'last' };
    case 'today':
    case 'yesterday': {
      const localDay = Math.floor((now + tz.offsetAt(now) * 1000) / 86_400_000);
      const dayStart = (d: number): number => tz.localToEpoch(d * 86_400_000);
      return text === 'today'
        ? { kind: 'span', start: dayStart(localDay), end: dayStart(localDay + 1), tz: null }
        : { kind: 'span', start: dayStart(localDay - 1), end: dayStart(localDay), tz: null };
    }
  }
  const comma = text.indexOf(',');
  const first = readPoint(input, comma < 0 ? text : text.slice(0, comma).trim());
  if (comma < 0) {
    if ('date' in first) {
      return { kind: 'span', start: startOfDay(first.date, tz), end: startOfDay(first.date.plusDays(1), tz), tz: null };
    }
    return { kind: 'span', start: first.dt.epochMs, end: Infinity, tz: first.dt.tz };
  }
  const second = readPoint(input, text.slice(comma + 1).trim());
  let start: number;
  let end: number;
  let zone: TimeZone | null = null;
  if ('date' in first && 'date' in second) {
    if (second.date.toEpochDay() < first.date.toEpochDay()) throw bad(input, 'the end date is before the start date');
    start = startOfDay(first.date, tz);
    end = startOfDay(second.date.plusDays(1), tz);
  } else if ('dt' in first && 'dt' in second) {
    start = first.dt.epochMs;
    end = second.dt.epochMs;
    zone = first.dt.tz;
  } else {
    throw bad(input, 'both ends must be of one form: two dates or two DateTimes');
  }
  if (end < start) throw bad(input, 'the end is before the start');
  return { kind: 'span', start, end, tz: zone };
}
