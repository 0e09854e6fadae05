/**
 * Text forms of Date, Time and DateTime shared by the JSON and Zinc codecs and the range parser.
 *
 * Parsing is fixed-position on char codes (no regex, no Date parsing, no luxon) because hisWrite
 * decodes one DateTime per sample. A DateTime's offset must be the one in force in its zone at
 * that instant: `2024-03-10T03:00:00-05:00 New_York` is rejected (New York is at -04:00 then).
 */
import { ErrorCodes, HayloftError } from '../lib/errors.js';
import { HDate, HDateTime, HTime, daysInMonth } from './values.js';
import { type TimeZone, UTC, daysFromCivil, findTimeZone } from './tz.js';

function bad(text: string, why: string): HayloftError {
  return new HayloftError(ErrorCodes.BAD_VALUE, `"${text}" is not a DateTime: ${why}`);
}

/** Digit value at i, or -1. */
function dig(s: string, i: number): number {
  const c = s.charCodeAt(i) - 48;
  return c >= 0 && c <= 9 ? c : -1;
}

function num2(s: string, i: number): number {
  const a = dig(s, i);
  const b = dig(s, i + 1);
  return a < 0 || b < 0 ? -1 : a * 10 + b;
}

function num4(s: string, i: number): number {
  const a = num2(s, i);
  const b = num2(s, i + 2);
  return a < 0 || b < 0 ? -1 : a * 100 + b;
}

export interface ParsedDate {
  year: number;
  month: number;
  day: number;
}

/** `YYYY-MM-DD` at position i, validated; null when the text there is not a date. */
function readDate(s: string, i: number): ParsedDate | null {
  const year = num4(s, i);
  const month = num2(s, i + 5);
  const day = num2(s, i + 8);
  if (year < 0 || month < 0 || day < 0 || s.charCodeAt(i + 4) !== 45 || s.charCodeAt(i + 7) !== 45) return null;
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)) return null;
  return { year, month, day };
}

export function parseDate(s: string): HDate {
  if (s.length !== 10) throw new HayloftError(ErrorCodes.BAD_VALUE, `"${s}" is not a Date (YYYY-MM-DD)`);
  const d = readDate(s, 0);
  if (d === null) throw new HayloftError(ErrorCodes.BAD_VALUE, `"${s}" is not a Date (YYYY-MM-DD)`);
  return new HDate(d.year, d.month, d.day);
}

interface ParsedTime {
  /** Milliseconds since midnight. */
  ms: number;
  /** Index just after the time. */
  end: number;
}

/** `hh:mm[:ss[.fraction]]` at i; null when malformed. Fractions beyond ms are truncated. */
function readTime(s: string, i: number): ParsedTime | null {
  const h = num2(s, i);
  const m = num2(s, i + 3);
  if (h < 0 || m < 0 || s.charCodeAt(i + 2) !== 58 || h > 23 || m > 59) return null;
  let end = i + 5;
  let sec = 0;
  let ms = 0;
  if (s.charCodeAt(end) === 58) {
    sec = num2(s, end + 1);
    if (sec < 0 || sec > 59) return null;
    end += 3;
    if (s.charCodeAt(end) === 46) {
      end++;
      let digits = 0;
      let scale = 100;
      while (true) {
        const d = dig(s, end);
        if (d < 0) break;
        if (digits < 3) ms += d * scale;
        scale /= 10;
        digits++;
        end++;
      }
      if (digits === 0) return null;
    }
  }
  return { ms: ((h * 60 + m) * 60 + sec) * 1000 + ms, end };
}

export function parseTime(s: string): HTime {
  const t = readTime(s, 0);
  if (t === null || t.end !== s.length) throw new HayloftError(ErrorCodes.BAD_VALUE, `"${s}" is not a Time (hh:mm:ss)`);
  const totalSec = Math.floor(t.ms / 1000);
  return new HTime(Math.floor(totalSec / 3600), Math.floor(totalSec / 60) % 60, totalSec % 60, t.ms % 1000);
}

// The zone named by the previous DateTime parsed: history grids name one zone on every row.
let lastZone: TimeZone = UTC;

/**
 * Parses `YYYY-MM-DDThh:mm[:ss[.f]](Z|±hh:mm)[ Zone]` in `s[start, end)` (so callers need not
 * slice: JSON's `t:` prefix, a DateTime inside a Zinc row). Without a zone name, `Z` means UTC
 * and a whole-hour offset means the matching `GMT±n` zone. Errors quote the parsed text.
 */
export function parseDateTime(s: string, start = 0, end = s.length): HDateTime {
  const epochMs = parseInstant(s, start, end);
  return new HDateTime(epochMs, lastZone);
}

/**
 * parseDateTime without the HDateTime: the instant in epoch ms, its zone left in `parsedZone()`.
 * For decoders that keep history as columns (no object per sample).
 */
export function parseInstant(s: string, start = 0, end = s.length): number {
  const b = start;
  const date = readDate(s, b);
  if (date === null) throw bad(s.slice(b, end), 'expected YYYY-MM-DD at the start');
  if (s.charCodeAt(b + 10) !== 84) throw bad(s.slice(b, end), 'expected "T" after the date');
  const time = readTime(s, b + 11);
  if (time === null) throw bad(s.slice(b, end), 'expected hh:mm[:ss] after "T"');
  let i = time.end;
  const c = s.charCodeAt(i);
  let offset: number;
  if (c === 90) {
    offset = 0;
    i++;
  } else if (c === 43 || c === 45) {
    const oh = num2(s, i + 1);
    const om = num2(s, i + 4);
    if (oh < 0 || om < 0 || s.charCodeAt(i + 3) !== 58 || oh > 18 || om > 59) throw bad(s.slice(b, end), 'bad UTC offset');
    offset = (c === 45 ? -1 : 1) * (oh * 3600 + om * 60);
    i += 6;
  } else {
    throw bad(s.slice(b, end), 'expected a UTC offset (Z or ±hh:mm) after the time');
  }
  let tz: TimeZone;
  if (i === end) {
    if (offset === 0) tz = UTC;
    else if (offset % 3600 === 0) {
      const h = -offset / 3600;
      tz = findTimeZone(h > 0 ? `GMT+${h}` : `GMT-${-h}`) ?? UTC;
    } else throw bad(s.slice(b, end), 'a time-zone name is required after the offset');
    lastZone = tz;
  } else {
    if (s.charCodeAt(i) !== 32 || i + 1 === end) throw bad(s.slice(b, end), 'expected " <zone name>" after the offset');
    const last = lastZone.name;
    if (end - i - 1 === last.length && s.startsWith(last, i + 1)) tz = lastZone;
    else {
      const name = s.slice(i + 1, end);
      const found = findTimeZone(name);
      if (found === undefined) throw bad(s.slice(b, end), `"${name}" is not a known time zone`);
      tz = lastZone = found;
    }
  }
  const epochMs = daysFromCivil(date.year, date.month, date.day) * 86_400_000 + time.ms - offset * 1000;
  const actual = tz.offsetAt(epochMs);
  if (actual !== offset) {
    const sign = actual < 0 ? '-' : '+';
    const a = Math.abs(actual);
    throw new HayloftError(
      ErrorCodes.BAD_OFFSET,
      `"${s.slice(b, end)}" is not a DateTime: ${tz.name} is at ${sign}${String(Math.floor(a / 3600)).padStart(2, '0')}:${String(Math.floor((a % 3600) / 60)).padStart(2, '0')} at that instant`,
    );
  }
  return epochMs;
}

/** The zone of the DateTime parseInstant (or parseDateTime) read last. */
export function parsedZone(): TimeZone {
  return lastZone;
}

/** Midnight at the start of a local date in a zone (the first instant of that day). */
export function startOfDay(date: HDate, tz: TimeZone): number {
  return tz.localToEpoch(daysFromCivil(date.year, date.month, date.day) * 86_400_000);
}

/** A DateTime from local fields in a zone; the earlier instant in a repeated hour unless `later`. */
export function dateTimeOf(
  tz: TimeZone,
  year: number,
  month: number,
  day: number,
  hour = 0,
  min = 0,
  sec = 0,
  ms = 0,
  later = false,
): HDateTime {
  const local = daysFromCivil(year, month, day) * 86_400_000 + ((hour * 60 + min) * 60 + sec) * 1000 + ms;
  return new HDateTime(tz.localToEpoch(local, later), tz);
}
