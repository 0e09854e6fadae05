import t from 'tap';
import { parseDateTime } from '../../src/haystack/datetime.js';

t.test('offset checked against the zone', async (t) => {
  t.throws(() => parseDateTime('2024-03-10T03:00:00-05:00 New_York'), { code: 'HL_BAD_OFFSET' });
  t.equal(parseDateTime('2024-03-10T03:00:00-04:00 New_York').toString(), '2024-03-10T03:00:00-04:00 New_York');
});
