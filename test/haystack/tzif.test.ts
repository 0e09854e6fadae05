/**
 * Offsets from the system's zone files (src/haystack/tzif.ts), checked against Intl (ICU's copy of
 * the same database) and against hand-worked POSIX rules; and the fallback to Intl where a file
 * is missing or malformed.
 */
import { mkdirSync, symlinkSync, writeFileSync, readFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { TimeZone, hostIana, intlFormat, intlOffset } from '../../src/haystack/tz.js';
import { hasZoneFile, loadTzif, parsePosixTz, parseTzif, zoneinfoDir } from '../../src/haystack/tzif.js';
import { tempDir } from '../helpers/tmp.js';

const utc = (y: number, mo: number, d: number, h = 0, mi = 0, s = 0): number => Date.UTC(y, mo - 1, d, h, mi, s) / 1000;
const H = 3600;

t.test('POSIX TZ rules, worked by hand', async (t) => {
  const sydney = parsePosixTz('AEST-10AEDT,M10.1.0,M4.1.0/3');
  t.equal(sydney.std, 10 * H);
  t.equal(sydney.dst, 11 * H);
  // 2030: DST ends Sunday 7 April at 03:00 AEDT (16:00 UTC on the 6th), starts Sunday 6 October
  // at 02:00 AEST (16:00 UTC on the 5th).
  t.equal(sydney.offsetAt(utc(2030, 1, 15)), 11 * H, 'January: summer time');
  t.equal(sydney.offsetAt(utc(2030, 4, 6, 15, 59, 59)), 11 * H, 'a second before the end');
  t.equal(sydney.offsetAt(utc(2030, 4, 6, 16)), 10 * H, 'at the end');
  t.equal(sydney.offsetAt(utc(2030, 10, 5, 15, 59, 59)), 10 * H, 'a second before the start');
  t.equal(sydney.offsetAt(utc(2030, 10, 5, 16)), 11 * H, 'at the start');

  const ny = parsePosixTz('EST5EDT,M3.2.0,M11.1.0');
  // 2031: second Sunday of March is the 9th (07:00 UTC), first Sunday of November the 2nd (06:00 UTC).
  t.equal(ny.offsetAt(utc(2031, 3, 9, 6, 59, 59)), -5 * H);
  t.equal(ny.offsetAt(utc(2031, 3, 9, 7)), -4 * H);
  t.equal(ny.offsetAt(utc(2031, 11, 2, 5, 59, 59)), -4 * H);
  t.equal(ny.offsetAt(utc(2031, 11, 2, 6)), -5 * H);

  const london = parsePosixTz('GMT0BST,M3.5.0/1,M10.5.0');
  // Last Sundays: 30 March and 26 October 2031, at 01:00 UTC both.
  t.equal(london.offsetAt(utc(2031, 3, 30, 0, 59, 59)), 0);
  t.equal(london.offsetAt(utc(2031, 3, 30, 1)), H);
  t.equal(london.offsetAt(utc(2031, 10, 26, 0, 59, 59)), H);
  t.equal(london.offsetAt(utc(2031, 10, 26, 1)), 0);

  const lordHowe = parsePosixTz('<+1030>-10:30<+11>-11,M10.1.0,M4.1.0');
  t.equal(lordHowe.offsetAt(utc(2030, 1, 1)), 11 * H, 'half an hour of daylight time');
  t.equal(lordHowe.offsetAt(utc(2030, 7, 1)), 10.5 * H);

  t.equal(parsePosixTz('<+0545>-5:45').offsetAt(utc(2030, 1, 1)), 5.75 * H, 'a fixed zone with minutes');
  t.equal(parsePosixTz('<-03>3').offsetAt(utc(2030, 1, 1)), -3 * H);

  // Greenland's RFC 8536 example: transitions at -02:00 and -01:00 local time.
  const godthab = parsePosixTz('<-02>2<-01>,M3.5.0/-1,M10.5.0/0');
  // 2031: last Sunday of March is the 30th; -01:00 local standard (UTC-2) is 01:00 UTC that day.
  t.equal(godthab.offsetAt(utc(2031, 3, 30, 0, 59, 59)), -2 * H);
  t.equal(godthab.offsetAt(utc(2031, 3, 30, 1)), -H);

  // Daylight time all year (RFC 8536 3.3.1's example): never standard time.
  const allYear = parsePosixTz('EST5EDT,0/0,J365/25');
  for (const m of [1, 4, 7, 10, 12]) t.equal(allYear.offsetAt(utc(2031, m, 15)), -4 * H, `all-year daylight time, month ${m}`);

  // Julian days: J60 is 1 March in every year; 59 (zero-based) is 29 February in a leap year.
  const jul = parsePosixTz('AAA0BBB,J60/0,J300/0');
  t.equal(jul.offsetAt(utc(2032, 2, 29, 23, 59, 59)), 0, 'J60 skips 29 February');
  t.equal(jul.offsetAt(utc(2032, 3, 1)), H);
  const zb = parsePosixTz('AAA0BBB,59/0,300/0');
  t.equal(zb.offsetAt(utc(2032, 2, 28, 23, 59, 59)), 0, 'zero-based day 59 is 29 February in 2032');
  t.equal(zb.offsetAt(utc(2032, 2, 29)), H);

  for (const bad of ['', 'AB5', 'EST', 'EST5EDT', 'EST5EDT,M3.2.0', 'EST5EDT,M13.1.0,M11.1.0', 'EST5EDT,M3.6.0,M11.1.0', 'EST5EDT,M3.2.7,M11.1.0', 'EST5EDT,J0,J100', 'EST5EDT,366,J100', '<+03-3', 'EST200', 'EST5EDT,M3.2.0,M11.1.0x']) {
    t.throws(() => parsePosixTz(bad), /malformed POSIX TZ string/, `${JSON.stringify(bad)} is refused`);
  }
});

const zonesDir = zoneinfoDir();
const haveFiles = hasZoneFile('Australia/Sydney', zonesDir);

/** The release of the system's database (`# version 2025b`, tzdata.zi's first line), if it says. */
function systemTzVersion(): string | undefined {
  try {
    return /^# version (\S+)/.exec(readFileSync(path.join(zonesDir, 'tzdata.zi'), 'latin1').slice(0, 64))?.[1];
  } catch {
    return undefined;
  }
}

t.test('zone files agree with Intl, 1970 to 2100', { skip: haveFiles ? false : `no zone files in ${zonesDir} (Debian's tzdata)` }, async (t) => {
  // Zones with every kind of rule: both hemispheres, half-hour and 45-minute offsets, half an hour
  // of DST, a zone that changed its base offset, one that crossed the date line, ones that ended
  // DST (Sao_Paulo, Tehran, Apia).
  const zones = ['Australia/Sydney', 'Australia/Lord_Howe', 'America/New_York', 'America/Santiago', 'America/Sao_Paulo', 'Europe/London', 'Europe/Berlin', 'Europe/Moscow', 'Asia/Tehran', 'Asia/Kathmandu', 'Asia/Kolkata', 'Pacific/Chatham', 'Pacific/Apia', 'America/Godthab'];
  // Casablanca's transitions follow Ramadan and are predicted anew by each release of the
  // database (its 2025b and 2026c differ in 2026): compared only when both are the same release.
  const system = systemTzVersion();
  if (system !== undefined && system === process.versions.tz) zones.push('Africa/Casablanca');
  else t.comment(`Africa/Casablanca not compared: the system's database is ${system ?? 'of an unknown release'}, Node's ${process.versions.tz ?? 'unknown'}`);
  for (const iana of zones) {
    const z = loadTzif(iana, zonesDir);
    if (z === null) {
      t.fail(`${iana}: its file cannot be read`);
      continue;
    }
    const f = intlFormat(iana);
    let bad = 0;
    let first = '';
    // Every 5 days and 1 h 7 s (so the time of day walks), plus each side of every change found.
    let prev = z.offsetAt(utc(1970, 1, 1));
    for (let s = utc(1970, 1, 1); s < utc(2100, 1, 1); s += 5 * 86_400 + 3607) {
      const off = z.offsetAt(s);
      const instants = [s];
      if (off !== prev) {
        // Find the change to the second, then check either side of it.
        let a = s - 5 * 86_400 - 3607;
        let b = s;
        while (b - a > 1) {
          const m = Math.floor((a + b) / 2);
          if (z.offsetAt(m) === prev) a = m;
          else b = m;
        }
        instants.push(a, b);
      }
      prev = off;
      for (const x of instants) {
        if (z.offsetAt(x) !== intlOffset(f, x * 1000)) {
          bad++;
          if (first === '') first = `${new Date(x * 1000).toISOString()}: file ${z.offsetAt(x)}, Intl ${intlOffset(f, x * 1000)}`;
        }
      }
    }
    t.equal(bad, 0, `${iana}: the file's offsets are Intl's${first === '' ? '' : ` (first difference ${first})`}`);
  }
});

t.test('malformed or missing files are not used; the zone asks Intl instead', async (t) => {
  const dir = tempDir(t);
  mkdirSync(path.join(dir, 'Australia'));
  const good = haveFiles ? readFileSync(path.join(zonesDir, 'Australia/Sydney')) : null;
  const cases: [string, Buffer][] = [
    ['not TZif', Buffer.from('hello, this is not a zone file at all, not even close to one....')],
    ['empty', Buffer.alloc(0)],
  ];
  if (good !== null) {
    cases.push(['truncated', good.subarray(0, 200)]);
    const badType = Buffer.from(good);
    // The first transition of the 64-bit block (after the 32-bit one) names a type that does not exist.
    const n = (at: number, k: number): number => badType.readUInt32BE(at + 20 + 4 * k);
    const v1 = n(0, 3) * 5 + n(0, 4) * 6 + n(0, 5) + n(0, 2) * 8 + n(0, 1) + n(0, 0);
    const h2 = 44 + v1;
    badType[h2 + 44 + n(h2, 3) * 8] = 250;
    cases.push(['a transition with a missing type', badType]);
    const noFooterEnd = Buffer.from(good.subarray(0, good.length - 1));
    cases.push(['a footer without its newline', noFooterEnd]);
  }
  for (const [what, bytes] of cases) {
    writeFileSync(path.join(dir, 'Australia/Sydney'), bytes);
    t.equal(loadTzif('Australia/Sydney', dir), null, `${what}: not loaded`);
    if (what === 'not TZif') t.throws(() => parseTzif(bytes), /not a TZif file/);
  }
  t.equal(loadTzif('../etc/passwd', dir), null, 'a name that leaves the folder is not a zone');
  t.equal(loadTzif('Australia/Nowhere', dir), null, 'a missing file');
  t.notOk(hasZoneFile('Australia', dir), 'a folder is not a zone file');

  const saved = process.env.TZDIR;
  process.env.TZDIR = dir;
  t.teardown(() => {
    if (saved === undefined) delete process.env.TZDIR;
    else process.env.TZDIR = saved;
  });
  const tz = new TimeZone('Sydney', 'Australia/Sydney', null);
  const f = intlFormat('Australia/Sydney');
  for (const ms of [Date.UTC(2024, 0, 15), Date.UTC(2024, 6, 15), Date.UTC(2024, 3, 6, 15, 59, 59), Date.UTC(2024, 3, 6, 16)]) {
    t.equal(tz.offsetAt(ms), intlOffset(f, ms), `without a usable file the offset at ${new Date(ms).toISOString()} is Intl's`);
  }
});

t.test('the host zone from TZ, /etc/localtime or /etc/timezone', { skip: haveFiles ? false : `no zone files in ${zonesDir}` }, async (t) => {
  const etc = tempDir(t);
  t.equal(hostIana({ TZ: 'Australia/Sydney' }, etc), 'Australia/Sydney');
  t.equal(hostIana({ TZ: ':America/New_York' }, etc), 'America/New_York', 'TZ with a leading colon');
  t.equal(hostIana({ TZ: 'Etc/UTC' }, etc), 'Etc/UTC');
  t.equal(hostIana({ TZ: 'US/Eastern' }, etc), undefined, 'an alias is left to Intl, which names it canonically');
  t.equal(hostIana({ TZ: 'EST5EDT,M3.2.0,M11.1.0' }, etc), undefined, 'a POSIX rule is left to Intl');
  t.equal(hostIana({}, etc), undefined, 'nothing to go by');
  symlinkSync('/usr/share/zoneinfo/Europe/Berlin', path.join(etc, 'localtime'));
  writeFileSync(path.join(etc, 'timezone'), 'Asia/Tokyo\n');
  t.equal(hostIana({}, etc), 'Europe/Berlin', 'the /etc/localtime link comes before /etc/timezone');
  t.equal(hostIana({ TZ: 'Australia/Perth' }, etc), 'Australia/Perth', 'TZ comes first');
  const etc2 = tempDir(t);
  writeFileSync(path.join(etc2, 'timezone'), 'Asia/Tokyo\n');
  t.equal(hostIana({}, etc2), 'Asia/Tokyo', "Debian's /etc/timezone");
});
