/**
 * UTC offsets from the system's time-zone files (TZif, RFC 8536: `/usr/share/zoneinfo`, or
 * `$TZDIR`), for the zones of tz.ts.
 *
 * Why not Intl, which tz.ts used alone before: the first `Intl.DateTimeFormat` a process creates
 * pages in about 8 MiB of ICU's locale and calendar data from the `node` binary, resident for the
 * life of the process. That is an eighth of a Raspberry Pi daemon's memory spent to learn a few
 * offsets a year. A zone file is 1-3 KB, and on Debian (and Raspberry Pi OS) the files come from
 * the `tzdata` package, which apt keeps current between Node releases. Where a file is missing or
 * cannot be read (a container without tzdata), tz.ts falls back to Intl.
 *
 * No npm package reads TZif files and POSIX TZ rules without bringing its own copy of the whole
 * database (which is what this avoids), so the format is read here: a version 2+ file's 64-bit
 * data block, and its footer's POSIX TZ string for instants after the last transition.
 */
import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { civilFromDays, daysFromCivil } from './calendar.js';

/** The offset in seconds east of UTC in force at an instant (epoch seconds). */
export interface TzifZone {
  offsetAt(epochSec: number): number;
}

/** Where the zone files are: `$TZDIR` as the C library reads it, else Debian's place. */
export function zoneinfoDir(env: Readonly<Record<string, string | undefined>> = process.env): string {
  return env.TZDIR !== undefined && env.TZDIR !== '' ? env.TZDIR : '/usr/share/zoneinfo';
}

/** The file of an IANA name, or null for a name that is not one (no `..`, no absolute path). */
function zoneFile(iana: string, dir: string): string | null {
  if (!/^[A-Za-z0-9_+-]+(\/[A-Za-z0-9_+-]+)*$/.test(iana)) return null;
  return path.join(dir, iana);
}

/** Whether the zone file of an IANA name exists. */
export function hasZoneFile(iana: string, dir = zoneinfoDir()): boolean {
  const file = zoneFile(iana, dir);
  if (file === null) return false;
  try {
    return statSync(file).isFile();
  } catch {
    return false;
  }
}

/** The zone of an IANA name from its file, or null when there is no readable, well-formed file. */
export function loadTzif(iana: string, dir = zoneinfoDir()): TzifZone | null {
  const file = zoneFile(iana, dir);
  if (file === null) return null;
  try {
    return parseTzif(readFileSync(file));
  } catch {
    return null;
  }
}

interface Header {
  isutcnt: number;
  isstdcnt: number;
  leapcnt: number;
  timecnt: number;
  typecnt: number;
  charcnt: number;
}

function header(b: Buffer, at: number): Header {
  if (b.length < at + 44 || b.toString('latin1', at, at + 4) !== 'TZif') throw new Error('not a TZif file');
  const n = (k: number): number => b.readUInt32BE(at + 20 + 4 * k);
  return { isutcnt: n(0), isstdcnt: n(1), leapcnt: n(2), timecnt: n(3), typecnt: n(4), charcnt: n(5) };
}

function blockLength(h: Header, timeSize: number): number {
  return h.timecnt * timeSize + h.timecnt + h.typecnt * 6 + h.charcnt + h.leapcnt * (timeSize + 4) + h.isstdcnt + h.isutcnt;
}

/** Reads a TZif file (versions 1 to 4). Throws on a malformed one. */
export function parseTzif(b: Buffer): TzifZone {
  let h = header(b, 0);
  let at = 44;
  let timeSize = 4;
  const version = b[4] as number;
  if (version !== 0) {
    // Version 2+: skip the 32-bit block; the 64-bit block and the footer follow.
    at += blockLength(h, 4);
    h = header(b, at);
    at += 44;
    timeSize = 8;
  }
  if (h.typecnt === 0 || b.length < at + blockLength(h, timeSize)) throw new Error('truncated TZif file');
  const times = new Float64Array(h.timecnt);
  for (let i = 0; i < h.timecnt; i++) times[i] = timeSize === 8 ? Number(b.readBigInt64BE(at + 8 * i)) : b.readInt32BE(at + 4 * i);
  at += h.timecnt * timeSize;
  const typeOf = new Uint8Array(h.timecnt);
  for (let i = 0; i < h.timecnt; i++) {
    typeOf[i] = b[at + i] as number;
    if ((typeOf[i] as number) >= h.typecnt) throw new Error('TZif transition names a missing type');
  }
  at += h.timecnt;
  const offsets = new Int32Array(h.typecnt);
  for (let i = 0; i < h.typecnt; i++) offsets[i] = b.readInt32BE(at + 6 * i);
  at += blockLength(h, timeSize) - h.timecnt * timeSize - h.timecnt;
  let footer: PosixTz | null = null;
  if (timeSize === 8 && b[at] === 0x0a) {
    const end = b.indexOf(0x0a, at + 1);
    if (end < 0) throw new Error('TZif footer has no end');
    const text = b.toString('latin1', at + 1, end);
    if (text !== '') footer = parsePosixTz(text);
  }
  const n = h.timecnt;
  const last = n > 0 ? (times[n - 1] as number) : -Infinity;
  return {
    offsetAt(sec: number): number {
      // RFC 8536 3.2: before the first transition, type 0; after the last, the footer (or the
      // last transition's type when there is none).
      if (footer !== null && sec >= last) return footer.offsetAt(sec);
      if (n === 0 || sec < (times[0] as number)) return offsets[0] as number;
      let lo = 0;
      let hi = n - 1;
      while (lo < hi) {
        const mid = (lo + hi + 1) >> 1;
        if ((times[mid] as number) <= sec) lo = mid;
        else hi = mid - 1;
      }
      return offsets[typeOf[lo] as number] as number;
    },
  };
}

/** A day of a POSIX TZ rule: `Jn` (1-365, February 29 never counted), `n` (0-365), `Mm.w.d`. */
type RuleDay = { kind: 'J'; n: number } | { kind: 'n'; n: number } | { kind: 'M'; month: number; week: number; weekday: number };

interface Rule {
  day: RuleDay;
  /** Seconds after local midnight (RFC 8536 allows -167 to 167 hours). */
  time: number;
}

/** A POSIX TZ string's zone (as in a TZif footer): offsets in seconds east of UTC. */
export interface PosixTz extends TzifZone {
  std: number;
  dst: number | null;
}

const isLeap = (y: number): boolean => (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0;

/** Epoch day of a rule's day in a year. */
function ruleDay(r: RuleDay, year: number): number {
  const jan1 = daysFromCivil(year, 1, 1);
  if (r.kind === 'J') return jan1 + r.n - 1 + (isLeap(year) && r.n >= 60 ? 1 : 0);
  if (r.kind === 'n') return jan1 + r.n;
  const first = daysFromCivil(year, r.month, 1);
  // 1970-01-01 was a Thursday (4); Sunday is 0.
  const firstWeekday = (((first + 4) % 7) + 7) % 7;
  let day = first + ((r.weekday - firstWeekday + 7) % 7) + (r.week - 1) * 7;
  if (r.week === 5) {
    const next = r.month === 12 ? daysFromCivil(year + 1, 1, 1) : daysFromCivil(year, r.month + 1, 1);
    while (day >= next) day -= 7;
  }
  return day;
}

/** Parses a POSIX TZ string (`AEST-10AEDT,M10.1.0,M4.1.0/3`, `<+0330>-3:30`). Throws when malformed. */
export function parsePosixTz(text: string): PosixTz {
  let i = 0;
  const fail = (): never => {
    throw new Error(`malformed POSIX TZ string ${JSON.stringify(text)}`);
  };
  const name = (): void => {
    if (text[i] === '<') {
      const end = text.indexOf('>', i);
      if (end < 0 || !/^[A-Za-z0-9+-]{3,}$/.test(text.slice(i + 1, end))) fail();
      i = end + 1;
      return;
    }
    const start = i;
    while (i < text.length && /[A-Za-z]/.test(text[i] as string)) i++;
    if (i - start < 3) fail();
  };
  // [+-]hh[:mm[:ss]] in seconds, hours up to 167 (RFC 8536 3.3.1).
  const hms = (): number => {
    let sign = 1;
    if (text[i] === '+' || text[i] === '-') {
      if (text[i] === '-') sign = -1;
      i++;
    }
    const m = /^(\d{1,3})(?::(\d{2})(?::(\d{2}))?)?/.exec(text.slice(i));
    if (m === null) return fail();
    const hours = Number(m[1]);
    const minutes = m[2] === undefined ? 0 : Number(m[2]);
    const seconds = m[3] === undefined ? 0 : Number(m[3]);
    if (hours > 167 || minutes > 59 || seconds > 59) fail();
    i += m[0].length;
    return sign * (hours * 3600 + minutes * 60 + seconds);
  };
  const rule = (): Rule => {
    let day: RuleDay;
    const rest = text.slice(i);
    let m: RegExpExecArray | null;
    if ((m = /^M(\d{1,2})\.(\d)\.(\d)/.exec(rest)) !== null) {
      day = { kind: 'M', month: Number(m[1]), week: Number(m[2]), weekday: Number(m[3]) };
      if (day.month < 1 || day.month > 12 || day.week < 1 || day.week > 5 || day.weekday > 6) fail();
    } else if ((m = /^J(\d{1,3})/.exec(rest)) !== null) {
      day = { kind: 'J', n: Number(m[1]) };
      if (day.n < 1 || day.n > 365) fail();
    } else if ((m = /^(\d{1,3})/.exec(rest)) !== null) {
      day = { kind: 'n', n: Number(m[1]) };
      if (day.n > 365) fail();
    } else return fail();
    i += m[0].length;
    let time = 7200;
    if (text[i] === '/') {
      i++;
      time = hms();
    }
    return { day, time };
  };

  name();
  // POSIX offsets are west of Greenwich: `AEST-10` is ten hours east.
  const std = -hms();
  if (i === text.length) return { std, dst: null, offsetAt: () => std };
  name();
  let dst = std + 3600;
  if (i < text.length && text[i] !== ',') dst = -hms();
  // A zone with daylight time and no rule: the C library's default rule is its own choice, and
  // zic always writes one, so such a string is not taken.
  if (text[i] !== ',') fail();
  i++;
  const start = rule();
  if (text[i] !== ',') fail();
  i++;
  const end = rule();
  if (i !== text.length) fail();
  return {
    std,
    dst,
    offsetAt(sec: number): number {
      const year = civilFromDays(Math.floor((sec + std) / 86_400))[0];
      // The start is given in standard local time, the end in daylight local time.
      const s = ruleDay(start.day, year) * 86_400 + start.time - std;
      const e = ruleDay(end.day, year) * 86_400 + end.time - dst;
      const inDst = s < e ? sec >= s && sec < e : sec < e || sec >= s;
      return inDst ? dst : std;
    },
  };
}
