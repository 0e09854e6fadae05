import t from 'tap';
import { cutMessage, quoteInput } from '../../src/lib/quote.js';

t.test('quoteInput: short texts whole, long ones cut with their length', async (t) => {
  t.equal(quoteInput('today'), '"today"');
  t.equal(quoteInput('a"b\n'), '"a\\"b\\n"', 'quoted as JSON');
  t.equal(quoteInput('a'.repeat(100)), `"${'a'.repeat(100)}"`, '100 chars are kept whole');
  t.equal(quoteInput('a'.repeat(100_002)), `"${'a'.repeat(100)}…" (100,002 chars)`, 'the issue\'s example');
  t.equal(quoteInput('abcdef', 3), '"abc…" (6 chars)');
  t.equal(quoteInput('ab😀cd', 3), '"ab…" (6 chars)', 'never cut inside a surrogate pair');
});

t.test('cutMessage: the safety net for whole messages', async (t) => {
  t.equal(cutMessage('short'), 'short');
  const m = cutMessage('x'.repeat(5000));
  t.equal(m, `${'x'.repeat(1000)}… (5,000 chars)`);
});
