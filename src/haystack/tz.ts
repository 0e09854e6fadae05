/**
 * Time zones: Haystack zone names (the last part of an IANA name: `New_York`, `Sydney`, plus
 * `UTC`, `Rel`, `GMT`, `GMT+n`, `GMT-n`) to zones that give the UTC offset at any instant.
 *
 * Offsets come from the system's zone files (tzif.ts, which says why), or from Node's Intl (the
 * ICU tz database) where a zone has no readable file. They are learned per zone as periods of
 * constant offset with their exact transitions (see learnPeriod), so per-sample paths (formatting
 * history, validating parsed offsets) cost a range check, or a binary search, not a lookup in the
 * zone's data. Hand-written rather than luxon because luxon parses at ~61k/s here while this path
 * must run at millions of samples per second (and luxon, too, asks Intl).
 */
import { readFileSync, readlinkSync } from 'node:fs';
import path from 'node:path';
import { ErrorCodes, HayloftError } from '../lib/errors.js';
import { civilFromDays } from './calendar.js';
import { type TzifZone, hasZoneFile, loadTzif } from './tzif.js';

export { civilFromDays, daysFromCivil } from './calendar.js';

/** How far apart offset probes are: no zone changes offset twice within six hours. */
const PROBE_MS = 6 * 3600_000;
/** How far a period is explored each way from the first instant asked about. */
const LEARN_SPAN_MS = 40 * 86_400_000;
const MAX_PERIODS = 10_000;

interface Period {
  /** Epoch ms, inclusive. */
  start: number;
  /** Epoch ms, exclusive. */
  end: number;
  /** Offset in seconds. */
  off: number;
}

/** `GMT+5` is the POSIX-style Etc zone: five hours *behind* UTC. */
const GMT_NAME = /^GMT([+-])(\d{1,2})$/;

const PAD2: string[] = Array.from({ length: 100 }, (_, i) => (i < 10 ? '0' + i : String(i)));
/** `hh:mm:` for every minute of a day, so formatting a time is two lookups. */
const MINUTE_TEXT: string[] = Array.from({ length: 1440 }, (_, i) => `${PAD2[Math.floor(i / 60)]}:${PAD2[i % 60]}:`);

function formatOffset(sec: number, utcZ: boolean, rel: boolean): string {
  if (sec === 0) return utcZ ? 'Z' : rel ? '-00:00' : '+00:00';
  const sign = sec < 0 ? '-' : '+';
  const abs = Math.abs(sec);
  const h = Math.floor(abs / 3600);
  const m = Math.round((abs % 3600) / 60);
  return sign + PAD2[h] + ':' + PAD2[m];
}

export class TimeZone {
  /** Haystack name, e.g. `New_York`. */
  readonly name: string;
  /** IANA name, e.g. `America/New_York`; `UTC` for UTC and Rel. */
  readonly iana: string;
  /** The offset in seconds when the zone never changes it, else null. */
  readonly fixedOffset: number | null;

  /** Where exact offsets come from, set on first need: the zone's file, else Intl (tzif.ts says why). */
  private source: TzifZone | Intl.DateTimeFormat | undefined;
  private readonly offsetTails = new Map<number, [string, string, string]>();
  private lastTailsOff = NaN;
  private lastTails: [string, string, string] = ['', '', ''];
  private readonly utcZ: boolean;
  private readonly rel: boolean;
  // Last formatted local day, so sorted history formats its date prefix once per day.
  private lastDay = NaN;
  private lastDayText = '';
  // Spans of constant offset learned so far, sorted and disjoint; and the last one used, since
  // consecutive samples nearly always fall in it.
  private periods: Period[] = [];
  private lastPeriod: Period | undefined;

  constructor(name: string, iana: string, fixedOffset: number | null) {
    this.name = name;
    this.iana = iana;
    this.fixedOffset = fixedOffset;
    this.utcZ = name === 'UTC';
    this.rel = name === 'Rel';
  }

  /** UTC offset in seconds in force at the instant. */
  offsetAt(epochMs: number): number {
    if (this.fixedOffset !== null) return this.fixedOffset;
    const last = this.lastPeriod;
    if (last !== undefined && epochMs >= last.start && epochMs < last.end) return last.off;
    const p = this.findPeriod(epochMs) ?? this.learnPeriod(epochMs);
    this.lastPeriod = p;
    return p.off;
  }

  private findPeriod(t: number): Period | undefined {
    const ps = this.periods;
    let lo = 0;
    let hi = ps.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      const p = ps[mid] as Period;
      if (t < p.start) hi = mid - 1;
      else if (t >= p.end) lo = mid + 1;
      else return p;
    }
    return undefined;
  }

  /**
   * Finds the span of constant offset around `t`: probes every PROBE_MS out to
   * LEARN_SPAN_MS each way, and where a probe differs, bisects to the second of the transition.
   * Offsets never change twice within PROBE_MS, so no transition is stepped over. A year of
   * history then costs a few hundred lookups in all, not one per sample or per bucket.
   */
  private learnPeriod(t: number): Period {
    const off = this.exactOffset(t);
    const edge = (dir: 1 | -1): number => {
      let same = t;
      for (let travelled = 0; travelled < LEARN_SPAN_MS; travelled += PROBE_MS) {
        const probe = same + dir * PROBE_MS;
        if (this.exactOffset(probe) === off) {
          same = probe;
          continue;
        }
        // Bisect (in whole seconds: offsets change on second boundaries) between same and probe.
        let a = Math.floor(same / 1000);
        let b = Math.floor(probe / 1000);
        while (Math.abs(b - a) > 1) {
          const m = Math.floor((a + b) / 2);
          if (this.exactOffset(m * 1000) === off) a = m;
          else b = m;
        }
        // dir 1: the offset changes at second b (exclusive end); dir -1: it holds from second a.
        return dir === 1 ? b * 1000 : a * 1000;
      }
      // No transition within the span: the period is known to reach this far.
      return dir === 1 ? same + 1 : same;
    };
    const p: Period = { start: edge(-1), end: edge(1), off };
    this.insertPeriod(p);
    return p;
  }

  private insertPeriod(p: Period): void {
    if (this.periods.length >= MAX_PERIODS) this.periods = [];
    const ps = this.periods;
    let i = 0;
    while (i < ps.length && (ps[i] as Period).end < p.start) i++;
    // Merge with neighbours that overlap or touch (same offset by construction: it is a function).
    let j = i;
    while (j < ps.length && (ps[j] as Period).start <= p.end) {
      const q = ps[j] as Period;
      if (q.off === p.off) {
        p.start = Math.min(p.start, q.start);
        p.end = Math.max(p.end, q.end);
      }
      j++;
    }
    const kept = ps.slice(i, j).filter((q) => q.off !== p.off);
    ps.splice(i, j - i, ...[...kept, p].sort((a, b) => a.start - b.start));
  }

  private exactOffset(epochMs: number): number {
    let src = this.source;
    if (src === undefined) {
      src = loadTzif(this.iana) ?? intlFormat(this.iana);
      this.source = src;
    }
    if (!(src instanceof Intl.DateTimeFormat)) return src.offsetAt(Math.floor(epochMs / 1000));
    return intlOffset(src, epochMs);
  }

  /**
   * The instant of a local wall-clock time (given as milliseconds of that wall time read as if it
   * were UTC). In the repeated hour of a DST end the earlier instant is chosen unless `later`; in
   * a skipped hour the time is read with the offset before the gap (so 02:30 becomes 03:30 DST),
   * as most systems do.
   */
  localToEpoch(localMs: number, later = false): number {
    if (this.fixedOffset !== null) return localMs - this.fixedOffset * 1000;
    // The offsets in force a day either side bound every candidate.
    const o1 = this.offsetAt(localMs - 86_400_000);
    const o2 = this.offsetAt(localMs + 86_400_000);
    const candidates: number[] = [];
    for (const o of o1 === o2 ? [o1] : [o1, o2]) {
      const t = localMs - o * 1000;
      if (this.offsetAt(t) === o) candidates.push(t);
    }
    if (candidates.length === 0) {
      // A gap: local time does not exist; use the offset before the transition.
      return localMs - Math.min(o1, o2) * 1000 ;
    }
    candidates.sort((a, b) => a - b);
    return (later ? candidates[candidates.length - 1] : candidates[0]) as number;
  }

  /**
   * `YYYY-MM-DDThh:mm:ss[.fff]` plus the offset in force (`Z` for UTC, `-00:00` for Rel), then per
   * `tail`: nothing (0), ` Zone` as Zinc writes it (1), or ` Zone"` ending a JSON string (2). The
   * tails are built once per offset, so writing history concatenates a handful of cached pieces.
   */
  formatInstant(epochMs: number, tail: 0 | 1 | 2 = 0): string {
    const off = this.offsetAt(epochMs);
    const local = epochMs + off * 1000;
    const day = Math.floor(local / 86_400_000);
    const msOfDay = local - day * 86_400_000;
    if (day !== this.lastDay) {
      const [y, m, d] = civilFromDays(day);
      const yy = y >= 0 && y <= 9999 ? String(y).padStart(4, '0') : String(y);
      this.lastDayText = yy + '-' + PAD2[m] + '-' + PAD2[d] + 'T';
      this.lastDay = day;
    }
    const ms = msOfDay % 1000;
    const secOfDay = (msOfDay - ms) / 1000;
    const sec = secOfDay % 60;
    let text = this.lastDayText + MINUTE_TEXT[(secOfDay - sec) / 60] + PAD2[sec];
    if (ms !== 0) text += ms < 10 ? '.00' + ms : ms < 100 ? '.0' + ms : '.' + ms;
    if (off !== this.lastTailsOff) {
      let t = this.offsetTails.get(off);
      if (t === undefined) {
        const o = formatOffset(off, this.utcZ, this.rel);
        t = [o, o + ' ' + this.name, o + ' ' + this.name + '"'];
        this.offsetTails.set(off, t);
      }
      this.lastTails = t;
      this.lastTailsOff = off;
    }
    return text + this.lastTails[tail];
  }


  toString(): string {
    return this.name;
  }
}

/** A formatter whose parts give the wall-clock time of an instant in a zone. */
export function intlFormat(iana: string): Intl.DateTimeFormat {
  return new Intl.DateTimeFormat('en-US', {
    timeZone: iana,
    hourCycle: 'h23',
    year: 'numeric',
    month: 'numeric',
    day: 'numeric',
    hour: 'numeric',
    minute: 'numeric',
    second: 'numeric',
    era: 'short',
  });
}

/** The offset in seconds in force at an instant, from the zone's wall-clock time by Intl. */
export function intlOffset(dtf: Intl.DateTimeFormat, epochMs: number): number {
  let y = 0;
  let mo = 0;
  let d = 0;
  let h = 0;
  let mi = 0;
  let s = 0;
  let bc = false;
  for (const p of dtf.formatToParts(epochMs)) {
    switch (p.type) {
      case 'year':
        y = Number(p.value);
        break;
      case 'month':
        mo = Number(p.value);
        break;
      case 'day':
        d = Number(p.value);
        break;
      case 'hour':
        h = Number(p.value);
        break;
      case 'minute':
        mi = Number(p.value);
        break;
      case 'second':
        s = Number(p.value);
        break;
      case 'era':
        bc = p.value.startsWith('B');
        break;
    }
  }
  const date = new Date(0);
  date.setUTCFullYear(bc ? 1 - y : y, mo - 1, d);
  date.setUTCHours(h, mi, s, 0);
  const wholeSec = Math.floor(epochMs / 1000) * 1000;
  return Math.round((date.getTime() - wholeSec) / 1000);
}

let byName: Map<string, string> | undefined;
const zones = new Map<string, TimeZone>();

/** Prefixes tried for a Haystack name that is an alias unknown to Intl's canonical list. */
const REGIONS = [
  'America',
  'Europe',
  'Asia',
  'Africa',
  'Australia',
  'Pacific',
  'Atlantic',
  'Indian',
  'Antarctica',
  'America/Argentina',
  'America/Indiana',
  'America/Kentucky',
  'America/North_Dakota',
];

function ianaNames(): Map<string, string> {
  if (byName === undefined) {
    byName = new Map();
    for (const iana of Intl.supportedValuesOf('timeZone')) {
      const name = haystackNameOf(iana);
      if (!byName.has(name)) byName.set(name, iana);
    }
  }
  return byName;
}

function validIana(iana: string): boolean {
  if (hasZoneFile(iana)) return true;
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: iana });
    return true;
  } catch {
    return false;
  }
}

/** The Haystack name of an IANA zone: its last part (`Etc/GMT+5` gives `GMT+5`). */
export function haystackNameOf(iana: string): string {
  if (iana === 'Etc/UTC' || iana === 'Etc/UCT' || iana === 'UTC' || iana === 'Etc/Universal' || iana === 'Etc/Zulu') return 'UTC';
  const i = iana.lastIndexOf('/');
  return i < 0 ? iana : iana.slice(i + 1);
}

export const UTC: TimeZone = new TimeZone('UTC', 'UTC', 0);
/** Haystack's `Rel` zone: offset zero, written `-00:00 Rel`, used when points' zones differ. */
export const REL: TimeZone = new TimeZone('Rel', 'UTC', 0);
zones.set('UTC', UTC);
zones.set('Rel', REL);

/** The zone of a Haystack name, or undefined when unknown. */
export function findTimeZone(name: string): TimeZone | undefined {
  const cached = zones.get(name);
  if (cached !== undefined) return cached;
  let tz: TimeZone | undefined;
  const g = GMT_NAME.exec(name);
  if (name === 'GMT') tz = new TimeZone('GMT', 'Etc/GMT', 0);
  else if (g !== null) {
    const hours = Number(g[2]);
    const sign = g[1] === '+' ? -1 : 1;
    if ((g[1] === '+' && hours <= 12) || (g[1] === '-' && hours <= 14)) {
      tz = new TimeZone(name, `Etc/${name}`, sign * hours * 3600);
    }
  } else if (/^[A-Za-z][A-Za-z0-9_+-]*$/.test(name)) {
    let iana = ianaNames().get(name);
    if (iana === undefined) iana = REGIONS.map((r) => `${r}/${name}`).find(validIana);
    if (iana !== undefined) tz = new TimeZone(name, iana, null);
  }
  if (tz !== undefined) zones.set(name, tz);
  return tz;
}

/** The zone of a Haystack name; throws HL_UNKNOWN_TZ naming the zone. */
export function timeZone(name: string): TimeZone {
  const tz = findTimeZone(name);
  if (tz === undefined) throw new HayloftError(ErrorCodes.UNKNOWN_TZ, `"${name}" is not a known time zone`);
  return tz;
}

/** The zone for an IANA name (`America/New_York`), named as Haystack names it. */
export function timeZoneFromIana(iana: string): TimeZone {
  const name = haystackNameOf(iana);
  const tz = findTimeZone(name);
  if (tz === undefined) throw new HayloftError(ErrorCodes.UNKNOWN_TZ, `"${iana}" is not a known time zone`);
  return tz;
}

/** Every Haystack zone name this runtime knows (the Intl list plus UTC, Rel and the GMT zones). */
export function timeZoneNames(): string[] {
  const names = new Set(ianaNames().keys());
  names.add('UTC');
  names.add('Rel');
  names.add('GMT');
  for (let h = 1; h <= 12; h++) names.add(`GMT+${h}`);
  for (let h = 1; h <= 14; h++) names.add(`GMT-${h}`);
  return [...names].sort();
}

/** The host's zone as a Haystack zone (UTC when the host's is unknown). */
export function hostTimeZone(): TimeZone {
  const iana = hostIana() ?? new Intl.DateTimeFormat().resolvedOptions().timeZone;
  return findTimeZone(haystackNameOf(iana)) ?? UTC;
}

/**
 * The host's IANA zone as the C library finds it (`TZ`, the `/etc/localtime` link, Debian's
 * `/etc/timezone`), when it names a zone Intl lists by the same Haystack name; otherwise undefined
 * and Intl is asked (which costs what tzif.ts says). An alias (`US/Eastern`) is left to Intl,
 * which gives its canonical name (`America/New_York`), so the Haystack name is the same either way.
 */
export function hostIana(env: Readonly<Record<string, string | undefined>> = process.env, etc = '/etc'): string | undefined {
  const candidates: (() => string | undefined)[] = [
    () => {
      const tz = env.TZ;
      if (tz === undefined || tz === '') return undefined;
      return tz.startsWith(':') ? tz.slice(1) : tz;
    },
    () => {
      const link = readlinkSync(path.join(etc, 'localtime'));
      const i = link.lastIndexOf('zoneinfo/');
      return i < 0 ? undefined : link.slice(i + 'zoneinfo/'.length);
    },
    () => readFileSync(path.join(etc, 'timezone'), 'utf8').trim(),
  ];
  for (const candidate of candidates) {
    let iana: string | undefined;
    try {
      iana = candidate();
    } catch {
      continue;
    }
    if (iana === undefined || iana === '') continue;
    const name = haystackNameOf(iana);
    if (name === 'UTC' || (ianaNames().get(name) === iana && hasZoneFile(iana))) return iana;
    // The first source the C library would use decides; a name we cannot take goes to Intl.
    return undefined;
  }
  return undefined;
}
