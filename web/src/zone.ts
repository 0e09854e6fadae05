/**
 * A point's time zone in the browser: the trend's days ("Today", "Yesterday", the dates of a custom
 * range) and its time axis are the point's (its `tz` tag, else the server's zone), as the server's
 * hisRead ranges are, not the zone of whoever looks at it from elsewhere.
 *
 * Haystack names a zone by the last part of its IANA name (`New_York`, `Sydney`, plus `UTC`,
 * `Rel` and `GMT+n`); the browser knows IANA names, so the name is looked up among the zones it
 * supports, then tried under the usual areas. The browser's Intl does the offsets (its tz database
 * is the one its users' clocks use).
 */

const AREAS = ['America', 'Europe', 'Asia', 'Africa', 'Australia', 'Pacific', 'Atlantic', 'Indian', 'Antarctica', 'Arctic', 'America/Argentina', 'America/Indiana', 'America/Kentucky', 'America/North_Dakota'];

function known(iana: string): boolean {
  try {
    new Intl.DateTimeFormat('en', { timeZone: iana });
    return true;
  } catch {
    return false;
  }
}

const found = new Map<string, string | undefined>();

/** The IANA name of a Haystack zone name, or undefined when the browser knows no such zone. */
export function ianaOf(name: string): string | undefined {
  if (!found.has(name)) found.set(name, lookUp(name));
  return found.get(name);
}

function lookUp(name: string): string | undefined {
  if (name === 'UTC' || name === 'Rel' || name === 'GMT') return 'UTC';
  const gmt = /^GMT([+-])(\d{1,2})$/.exec(name);
  if (gmt !== null) return known(`Etc/GMT${gmt[1]}${Number(gmt[2])}`) ? `Etc/GMT${gmt[1]}${Number(gmt[2])}` : undefined;
  if (!/^[A-Za-z][A-Za-z0-9_+-]*$/.test(name)) return undefined;
  const listed = typeof Intl.supportedValuesOf === 'function' ? Intl.supportedValuesOf('timeZone').find((z) => z === name || z.endsWith(`/${name}`)) : undefined;
  if (listed !== undefined) return listed;
  return AREAS.map((a) => `${a}/${name}`).find(known);
}

export class Zone {
  /** The Haystack name (`Sydney`). */
  readonly name: string;
  readonly iana: string;
  private readonly parts: Intl.DateTimeFormat;

  constructor(name: string, iana: string) {
    this.name = name;
    this.iana = iana;
    this.parts = new Intl.DateTimeFormat('en-US', { timeZone: iana, year: 'numeric', month: 'numeric', day: 'numeric', hour: 'numeric', minute: 'numeric', second: 'numeric', hourCycle: 'h23' });
  }

  /** The zone of a Haystack name, or of this browser when the browser does not know it. */
  static of(name: string | undefined): Zone {
    const iana = name === undefined || name === '' ? undefined : ianaOf(name);
    if (name !== undefined && iana !== undefined) return new Zone(name, iana);
    const own = Intl.DateTimeFormat().resolvedOptions().timeZone;
    return new Zone(own.split('/').pop() ?? own, own);
  }

  /** The wall-clock fields at an instant. */
  private fields(ms: number): { y: number; m: number; d: number; h: number; mi: number; s: number } {
    const f: Record<string, number> = {};
    for (const p of this.parts.formatToParts(ms)) if (p.type !== 'literal') f[p.type] = Number(p.value);
    return { y: f.year ?? 1970, m: f.month ?? 1, d: f.day ?? 1, h: (f.hour ?? 0) % 24, mi: f.minute ?? 0, s: f.second ?? 0 };
  }

  /** The zone's offset from UTC at an instant, in ms. */
  offset(ms: number): number {
    const f = this.fields(ms);
    return Date.UTC(f.y, f.m - 1, f.d, f.h, f.mi, f.s) - (ms - (((ms % 1000) + 1000) % 1000));
  }

  /** The date at an instant, `2024-03-10`. */
  date(ms: number): string {
    const f = this.fields(ms);
    return `${f.y}-${String(f.m).padStart(2, '0')}-${String(f.d).padStart(2, '0')}`;
  }

  /** The instant a date begins (its midnight, or the first instant after a gap over it). */
  midnight(date: string): number {
    const [y, m, d] = date.split('-').map(Number);
    const wall = Date.UTC(y ?? 1970, (m ?? 1) - 1, d ?? 1);
    let t = wall - this.offset(wall);
    t = wall - this.offset(t);
    return t;
  }

  /** `UTC+11:00` at an instant. */
  offsetText(ms: number): string {
    const off = Math.round(this.offset(ms) / 60_000);
    if (off === 0) return 'UTC';
    const a = Math.abs(off);
    return `UTC${off < 0 ? '−' : '+'}${String(Math.floor(a / 60)).padStart(2, '0')}:${String(a % 60).padStart(2, '0')}`;
  }
}
