import t from 'tap';
import { ErrorCodes } from '../../src/lib/errors.js';
import { parseDateTime } from '../../src/haystack/datetime.js';

void t.test('parseDateTime reads s[start, end) as the same text sliced out', (t) => {
  const texts = [
    '2024-03-10T03:00:00-04:00 New_York',
    '2024-01-01T00:00:00Z',
    '2024-01-01T00:00:00.123456Z UTC',
    '2024-01-01T00:00:00-10:00 GMT+10',
    '2024-01-01T00:00:00-01:00 GMT+1',
    '2024-01-01T00:00:00+05:00',
  ];
  for (const text of texts) {
    // Text around the range that would change the result if the parser read past `end`.
    const s = `x,${text},GMT+1 y`;
    const got = parseDateTime(s, 2, 2 + text.length);
    const want = parseDateTime(text);
    t.equal(got.epochMs, want.epochMs, text);
    t.equal(got.tz, want.tz, `${text}: zone`);
  }
  t.end();
});

void t.test('parseDateTime errors quote only the range', (t) => {
  const s = '[2024-03-10T03:00:00-05:00 New_York]';
  t.throws(() => parseDateTime(s, 1, s.length - 1), {
    code: ErrorCodes.BAD_OFFSET,
    message: '"2024-03-10T03:00:00-05:00 New_York" is not a DateTime: New_York is at -04:00 at that instant',
  });
  const u = '[2024-03-10T03:00:00Z Nowhere] New_York';
  t.throws(() => parseDateTime(u, 1, u.indexOf(']')), { code: ErrorCodes.BAD_VALUE, message: /^"2024-03-10T03:00:00Z Nowhere" is not a DateTime: "Nowhere" is not a known time zone$/ });
  t.end();
});

void t.test('a zone name after `end` is not read', (t) => {
  const s = '2024-03-10T03:00:00-05:00 New_York';
  t.equal(parseDateTime(s, 0, 25).tz.name, 'GMT+5');
  t.end();
});
