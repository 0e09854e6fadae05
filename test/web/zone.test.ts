/** The console's zones (web/src/zone.ts): Haystack names to IANA, dates and midnights in a point's zone. */
import t from 'tap';
import { Zone, ianaOf } from '../../web/src/zone.js';

t.test('Haystack zone names to the IANA names Intl knows', async (t) => {
  t.equal(ianaOf('Sydney'), 'Australia/Sydney');
  t.equal(ianaOf('New_York'), 'America/New_York');
  t.match(ianaOf('Indianapolis'), /^America\/(Indiana\/)?Indianapolis$/, 'a name Intl lists under an alias');
  t.equal(ianaOf('Kolkata'), 'Asia/Kolkata', 'a name Intl does not list (ICU lists Asia/Calcutta), found under its area');
  t.equal(ianaOf('UTC'), 'UTC');
  t.equal(ianaOf('Rel'), 'UTC');
  t.equal(ianaOf('GMT+5'), 'Etc/GMT+5');
  t.equal(ianaOf('Nowhere'), undefined);
  t.equal(ianaOf('../etc'), undefined);
  t.equal(Zone.of('Nowhere').iana, Intl.DateTimeFormat().resolvedOptions().timeZone, 'unknown: the browser\'s own zone');
});

t.test('dates and midnights in the point\'s zone, across daylight saving changes', async (t) => {
  const syd = Zone.of('Sydney');
  // 2024-10-06: Sydney goes from +10:00 to +11:00 at 02:00.
  t.equal(syd.midnight('2024-10-06'), Date.UTC(2024, 9, 5, 14), 'midnight before the change: +10:00');
  t.equal(syd.midnight('2024-10-07'), Date.UTC(2024, 9, 6, 13), 'the next one: +11:00 (a 23-hour day)');
  t.equal(syd.date(Date.UTC(2024, 9, 5, 13, 59)), '2024-10-05');
  t.equal(syd.date(Date.UTC(2024, 9, 5, 14)), '2024-10-06');
  t.equal(syd.offsetText(Date.UTC(2024, 0, 1)), 'UTC+11:00');
  const ny = Zone.of('New_York');
  t.equal(ny.midnight('2024-03-10'), Date.UTC(2024, 2, 10, 5), 'New York, the day clocks go forward: -05:00 at midnight');
  t.equal(ny.offsetText(Date.UTC(2024, 6, 1)), 'UTC−04:00');
  t.equal(Zone.of('UTC').midnight('2024-02-29'), Date.UTC(2024, 1, 29));
});

t.test('a DateTime is shown in its own zone, not the browser\'s', async (t) => {
  const { show } = await import('../../web/src/cells.js');
  const ms = Date.UTC(2023, 11, 31, 13);
  const inSydney = show('t:2024-01-01T00:00:00+11:00 Sydney');
  t.equal(inSydney, new Date(ms).toLocaleString(undefined, { timeZone: 'Australia/Sydney' }), 'Sydney: midnight of the new year');
  t.equal(show('t:2023-12-31T13:00:00Z UTC'), new Date(ms).toLocaleString(undefined, { timeZone: 'UTC' }), 'the same instant in UTC');
  t.not(inSydney, show('t:2023-12-31T13:00:00Z UTC'), 'which reads differently');
  t.equal(show('t:2023-12-31T13:00:00Z Nowhere'), new Date(ms).toLocaleString(), 'a zone the browser does not know: its own');
});
