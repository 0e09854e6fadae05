import t from 'tap';
import { dateTimeOf, parseDate, parseDateTime, parseTime, startOfDay } from '../../src/haystack/datetime.js';
import { REL, UTC, findTimeZone, haystackNameOf, timeZone, timeZoneFromIana, timeZoneNames } from '../../src/haystack/tz.js';
import { loadTzif } from '../../src/haystack/tzif.js';
import { HDate, compare } from '../../src/haystack/values.js';

const H = 3_600_000;

t.test('every zone Intl knows maps to a Haystack name and back', async (t) => {
  const all = Intl.supportedValuesOf('timeZone');
  t.ok(all.length > 300, 'Intl lists the tz database');
  for (const iana of all) {
    const tz = timeZoneFromIana(iana);
    t.equal(tz.name, haystackNameOf(iana), iana);
    t.equal(timeZone(tz.name), tz, `${tz.name} resolves to the same zone`);
  }
  const names = timeZoneNames();
  for (const n of ['UTC', 'Rel', 'GMT', 'GMT+5', 'GMT-14', 'New_York', 'Sydney', 'Port-au-Prince']) t.ok(names.includes(n), n);
  for (const n of names) t.ok(findTimeZone(n), `listed name ${n} resolves`);
});

t.test('zone names', async (t) => {
  const cases: [string, string, number | null][] = [
    ['New_York', 'America/New_York', null],
    ['Sydney', 'Australia/Sydney', null],
    ['Port-au-Prince', 'America/Port-au-Prince', null],
    ['Kolkata', 'Asia/Kolkata', null], // an alias that is not in Intl's canonical list
    ['UTC', 'UTC', 0],
    ['Rel', 'UTC', 0],
    ['GMT', 'Etc/GMT', 0],
    ['GMT+5', 'Etc/GMT+5', -5 * 3600], // POSIX sign: five hours behind UTC
    ['GMT-10', 'Etc/GMT-10', 10 * 3600],
  ];
  for (const [name, iana, fixed] of cases) {
    const tz = timeZone(name);
    t.equal(tz.iana, iana, `${name} iana`);
    t.equal(tz.fixedOffset, fixed, `${name} fixed offset`);
  }
  for (const bad of ['Nowhere', 'GMT+13', 'GMT-15', 'America/New_York', '', 'new york']) {
    t.throws(() => timeZone(bad), { code: 'HL_UNKNOWN_TZ' }, `unknown: ${JSON.stringify(bad)}`);
  }
  t.equal(haystackNameOf('Etc/UTC'), 'UTC');
});

t.test('offsets and formatting across DST days', async (t) => {
  // [zone, UTC instant, expected text]
  const cases: [string, string, string][] = [
    // New York spring forward 2024-03-10 02:00 EST -> 03:00 EDT
    ['New_York', '2024-03-10T06:59:59Z', '2024-03-10T01:59:59-05:00'],
    ['New_York', '2024-03-10T07:00:00Z', '2024-03-10T03:00:00-04:00'],
    // New York fall back 2024-11-03 02:00 EDT -> 01:00 EST: 01:30 happens twice
    ['New_York', '2024-11-03T05:30:00Z', '2024-11-03T01:30:00-04:00'],
    ['New_York', '2024-11-03T06:30:00Z', '2024-11-03T01:30:00-05:00'],
    // Sydney DST ends 2024-04-07 03:00 AEDT -> 02:00 AEST
    ['Sydney', '2024-04-06T15:30:00Z', '2024-04-07T02:30:00+11:00'],
    ['Sydney', '2024-04-06T16:30:00Z', '2024-04-07T02:30:00+10:00'],
    // Sydney DST starts 2024-10-06 02:00 AEST -> 03:00 AEDT
    ['Sydney', '2024-10-05T15:59:59Z', '2024-10-06T01:59:59+10:00'],
    ['Sydney', '2024-10-05T16:00:00Z', '2024-10-06T03:00:00+11:00'],
    ['UTC', '2024-01-01T00:00:00Z', '2024-01-01T00:00:00Z'],
    ['Rel', '2024-01-01T00:00:00Z', '2024-01-01T00:00:00-00:00'],
    ['GMT+5', '2024-01-01T00:00:00Z', '2023-12-31T19:00:00-05:00'],
    ['Kolkata', '2024-01-01T00:00:00.123Z', '2024-01-01T05:30:00.123+05:30'],
  ];
  for (const [zone, iso, text] of cases) {
    const tz = timeZone(zone);
    t.equal(tz.formatInstant(Date.parse(iso)), text, `${zone} ${iso}`);
    // and back: the text parses to the same instant
    t.equal(parseDateTime(`${text} ${zone}`).epochMs, Date.parse(iso), `${text} ${zone} parses back`);
  }
});

t.test('the repeated hour stays two distinct, ordered instants', async (t) => {
  const a = parseDateTime('2024-11-03T01:30:00-04:00 New_York');
  const b = parseDateTime('2024-11-03T01:30:00-05:00 New_York');
  t.equal(b.epochMs - a.epochMs, H);
  t.ok(compare(a, b) < 0);
  t.equal(a.toString(), '2024-11-03T01:30:00-04:00 New_York');
  t.equal(b.toString(), '2024-11-03T01:30:00-05:00 New_York');
  const c = parseDateTime('2024-04-07T02:30:00+11:00 Sydney');
  const d = parseDateTime('2024-04-07T02:30:00+10:00 Sydney');
  t.equal(d.epochMs - c.epochMs, H);
});

t.test('DateTime parsing rejects wrong offsets and malformed text', async (t) => {
  const wrongOffset = [
    '2024-03-10T03:00:00-05:00 New_York', // EDT already
    '2024-07-01T12:00:00-05:00 New_York',
    '2024-07-01T12:00:00+11:00 Sydney',
    '2024-01-01T00:00:00+01:00 UTC',
  ];
  for (const s of wrongOffset) t.throws(() => parseDateTime(s), { code: 'HL_BAD_OFFSET' }, s);
  const err = t.throws(() => parseDateTime('2024-03-10T03:00:00-05:00 New_York')) as Error;
  t.match(err.message, /New_York is at -04:00/);
  const malformed = [
    '',
    '2024-03-10',
    '2024-03-10T',
    '2024-03-10 03:00:00Z',
    '2024-13-10T03:00:00Z',
    '2024-02-30T03:00:00Z',
    '2024-03-10T24:00:00Z',
    '2024-03-10T03:60:00Z',
    '2024-03-10T03:00:00',
    '2024-03-10T03:00:00+05:30', // non-hour offset needs a zone name
    '2024-03-10T03:00:00Z Nowhere',
    '2024-03-10T03:00:00Z ',
    '2024-03-10T03:00:00.Z',
    '2024-03-10T03:00:00-0500 New_York',
  ];
  for (const s of malformed) t.throws(() => parseDateTime(s), { code: 'HL_BAD_VALUE' }, JSON.stringify(s));
});

t.test('DateTime parsing forms', async (t) => {
  const cases: [string, string, string][] = [
    ['2024-01-12T13:00:00.000Z UTC', '2024-01-12T13:00:00.000Z', 'UTC'],
    ['2024-01-12T13:00:00Z', '2024-01-12T13:00:00.000Z', 'UTC'],
    ['2024-01-12T13:00Z', '2024-01-12T13:00:00.000Z', 'UTC'], // hh:mm
    ['2024-01-12T08:00:00-05:00', '2024-01-12T13:00:00.000Z', 'GMT+5'],
    ['2024-01-12T13:00:00.123456789Z UTC', '2024-01-12T13:00:00.123Z', 'UTC'], // truncated to ms
    ['2024-01-12T13:00:00-00:00 Rel', '2024-01-12T13:00:00.000Z', 'Rel'],
    ['2024-01-12T13:00:00-03:00 GMT+3', '2024-01-12T16:00:00.000Z', 'GMT+3'],
  ];
  for (const [s, iso, zone] of cases) {
    const dt = parseDateTime(s);
    t.equal(new Date(dt.epochMs).toISOString(), iso, s);
    t.equal(dt.tz.name, zone, `${s} zone`);
  }
  t.equal(REL.formatInstant(0), '1970-01-01T00:00:00-00:00');
  t.equal(UTC.formatInstant(-1), '1969-12-31T23:59:59.999Z');
});

t.test('local times to instants', async (t) => {
  const ny = timeZone('New_York');
  // skipped hour: 02:30 does not exist on 2024-03-10; read with the offset before the gap
  t.equal(dateTimeOf(ny, 2024, 3, 10, 2, 30).toString(), '2024-03-10T03:30:00-04:00 New_York');
  // repeated hour: earlier by default, later on request
  t.equal(dateTimeOf(ny, 2024, 11, 3, 1, 30).toString(), '2024-11-03T01:30:00-04:00 New_York');
  t.equal(dateTimeOf(ny, 2024, 11, 3, 1, 30, 0, 0, true).toString(), '2024-11-03T01:30:00-05:00 New_York');
  // midnights: the DST days are 23 and 25 hours long
  const d = (s: string): HDate => parseDate(s);
  t.equal(startOfDay(d('2024-03-11'), ny) - startOfDay(d('2024-03-10'), ny), 23 * H);
  t.equal(startOfDay(d('2024-11-04'), ny) - startOfDay(d('2024-11-03'), ny), 25 * H);
  const syd = timeZone('Sydney');
  t.equal(startOfDay(d('2024-04-08'), syd) - startOfDay(d('2024-04-07'), syd), 25 * H);
  t.equal(startOfDay(d('2024-10-07'), syd) - startOfDay(d('2024-10-06'), syd), 23 * H);
  const dt = parseDateTime('2024-11-03T01:30:00-05:00 New_York');
  t.equal(dt.date().toString(), '2024-11-03');
  t.equal(dt.time().toString(), '01:30:00');
  t.equal(dt.inZone(timeZone('Sydney')).toString(), '2024-11-03T17:30:00+11:00 Sydney');
});

t.test('Date and Time text', async (t) => {
  t.equal(parseDate('2024-02-29').toString(), '2024-02-29');
  t.equal(parseTime('09:30').toString(), '09:30:00');
  t.equal(parseTime('09:30:05.5').toString(), '09:30:05.500');
  for (const s of ['2023-02-29', '2024-1-01', '20240101', '2024-01-01x']) t.throws(() => parseDate(s), { code: 'HL_BAD_VALUE' }, s);
  for (const s of ['9:30', '24:00', '09:30:', '09:30:5', '09:30:05.', 'x']) t.throws(() => parseTime(s), { code: 'HL_BAD_VALUE' }, s);
});

t.test('early years are not read as 19xx', async (t) => {
  t.equal(parseDateTime('0050-06-01T00:00:00Z UTC').toString(), '0050-06-01T00:00:00Z UTC');
  t.equal(parseDate('0099-12-31').plusDays(1).toString(), '0100-01-01');
  t.equal(parseDate('0004-02-29').toEpochDay() - parseDate('0004-02-28').toEpochDay(), 1);
  for (const s of ['1970-01-01', '2000-02-29', '2024-12-31', '1600-03-01', '0001-01-01']) {
    t.equal(HDate.fromEpochDay(parseDate(s).toEpochDay()).toString(), s, `${s} round-trips through epoch days`);
  }
  t.equal(parseDate('1970-01-01').toEpochDay(), 0);
  t.equal(parseDate('2024-03-10').toEpochDay(), Date.UTC(2024, 2, 10) / 86_400_000);
});

t.test('learned offset periods agree with their source at random instants', async (t) => {
  // Independent reference: the offset the zone's source gives for the instant itself, with no
  // periods learned: the zone file where there is one (as TimeZone uses), else Intl, computed
  // from its parts. (Whether the files and Intl agree is test/haystack/tzif.test.ts's: they are
  // two releases of the database and may differ where a release changed a zone.)
  const reference = (iana: string, ms: number): number => {
    const file = loadTzif(iana);
    if (file !== null) return file.offsetAt(Math.floor(ms / 1000));
    const parts = new Intl.DateTimeFormat('en-US', { timeZone: iana, hourCycle: 'h23', year: 'numeric', month: 'numeric', day: 'numeric', hour: 'numeric', minute: 'numeric', second: 'numeric', era: 'short' }).formatToParts(ms);
    const get = (type: string): number => Number(parts.find((p) => p.type === type)?.value);
    const bc = parts.find((p) => p.type === 'era')?.value.startsWith('B') === true;
    const d = new Date(0);
    d.setUTCFullYear(bc ? 1 - get('year') : get('year'), get('month') - 1, get('day'));
    d.setUTCHours(get('hour'), get('minute'), get('second'), 0);
    return Math.round((d.getTime() - Math.floor(ms / 1000) * 1000) / 1000);
  };
  let seed = 12345;
  const rnd = (): number => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
  const lo = Date.UTC(1900, 0, 1);
  const hi = Date.UTC(2040, 0, 1);
  for (const name of ['New_York', 'Sydney', 'London', 'Lord_Howe', 'Casablanca', 'Santiago', 'Tehran', 'Kathmandu', 'Chatham', 'Apia']) {
    const tz = timeZone(name);
    let bad = 0;
    for (let i = 0; i < 150; i++) {
      const ms = Math.floor(lo + rnd() * (hi - lo));
      if (tz.offsetAt(ms) !== reference(tz.iana, ms)) bad++;
    }
    t.equal(bad, 0, `${name}: every random instant has its source's offset`);
  }
});
