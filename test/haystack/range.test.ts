import t from 'tap';
import { type HisRange, parseRange } from '../../src/haystack/range.js';
import { timeZone } from '../../src/haystack/tz.js';

const iso = (ms: number): string => (Number.isFinite(ms) ? new Date(ms).toISOString() : String(ms));

function span(r: HisRange): [string, string, string | null] {
  if (r.kind !== 'span') throw new Error(`expected a span, got ${r.kind}`);
  return [iso(r.start), iso(r.end), r.tz?.name ?? null];
}

t.test('every range form', async (t) => {
  const ny = timeZone('New_York');
  const syd = timeZone('Sydney');
  // "now" is 2024-03-10 12:00 UTC: 08:00 EDT in New York, 23:00 AEDT in Sydney
  const now = Date.UTC(2024, 2, 10, 12);
  const cases: [string, typeof ny, [string, string, string | null]][] = [
    // today in New York is the DST day: 23 hours long
    ['today', ny, ['2024-03-10T05:00:00.000Z', '2024-03-11T04:00:00.000Z', null]],
    ['yesterday', ny, ['2024-03-09T05:00:00.000Z', '2024-03-10T05:00:00.000Z', null]],
    // the same instant is already the 10th in Sydney too, never the host's day
    ['today', syd, ['2024-03-09T13:00:00.000Z', '2024-03-10T13:00:00.000Z', null]],
    ['yesterday', syd, ['2024-03-08T13:00:00.000Z', '2024-03-09T13:00:00.000Z', null]],
    ['2024-11-03', ny, ['2024-11-03T04:00:00.000Z', '2024-11-04T05:00:00.000Z', null]],
    ['2024-04-07', syd, ['2024-04-06T13:00:00.000Z', '2024-04-07T14:00:00.000Z', null]],
    ['2024-10-06', syd, ['2024-10-05T14:00:00.000Z', '2024-10-06T13:00:00.000Z', null]],
    ['2024-03-09,2024-03-10', ny, ['2024-03-09T05:00:00.000Z', '2024-03-11T04:00:00.000Z', null]],
    ['2024-03-09, 2024-03-10', ny, ['2024-03-09T05:00:00.000Z', '2024-03-11T04:00:00.000Z', null]],
    ['2024-03-10,2024-03-10', ny, ['2024-03-10T05:00:00.000Z', '2024-03-11T04:00:00.000Z', null]],
    ['2024-01-12T13:00:00.000Z UTC', ny, ['2024-01-12T13:00:00.000Z', 'Infinity', 'UTC']],
    ['2024-01-12T08:00-05:00 New_York', syd, ['2024-01-12T13:00:00.000Z', 'Infinity', 'New_York']],
    [
      '2024-11-03T01:30:00-04:00 New_York,2024-11-03T01:30:00-05:00 New_York',
      ny,
      ['2024-11-03T05:30:00.000Z', '2024-11-03T06:30:00.000Z', 'New_York'],
    ],
    [
      '2024-04-07T00:00:00+11:00 Sydney, 2024-04-08T00:00:00+10:00 Sydney',
      ny,
      ['2024-04-06T13:00:00.000Z', '2024-04-07T14:00:00.000Z', 'Sydney'],
    ],
    ['"today"', ny, ['2024-03-10T05:00:00.000Z', '2024-03-11T04:00:00.000Z', null]],
    ['  2024-03-10  ', ny, ['2024-03-10T05:00:00.000Z', '2024-03-11T04:00:00.000Z', null]],
  ];
  for (const [text, tz, want] of cases) t.same(span(parseRange(text, tz, now)), want, `${text} in ${tz.name}`);
  t.same(parseRange('first', ny, now), { kind: 'first' });
  t.same(parseRange('last', ny, now), { kind: 'last' });
});

t.test('bad ranges', async (t) => {
  const ny = timeZone('New_York');
  const cases: [string, RegExp][] = [
    ['', /is empty/],
    ['""', /is empty/],
    ['tomorrow', /use first, last, today/],
    ['2024-13-01', /is not a Date/],
    ['2024-03-10,2024-03-09', /end date is before the start date/],
    ['2024-03-10T00:00:00Z UTC,2024-03-09T00:00:00Z UTC', /end is before the start/],
    ['2024-03-10,2024-03-10T00:00:00Z', /both ends must be of one form/],
    ['2024-03-10T03:00:00-05:00 New_York', /New_York is at -04:00/],
    ['2024-03-10,', /is not a date/],
    ['today,yesterday', /is not a date/],
  ];
  for (const [text, message] of cases) {
    const err = t.throws(() => parseRange(text, ny, 0), { code: 'HL_BAD_RANGE' }, text) as Error;
    t.match(err.message, message, text);
  }
});
