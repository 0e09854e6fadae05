import t from 'tap';
import { cutMessage, groupThousands, quoteInput } from '../../src/lib/quote.js';

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

t.test('groupThousands: counts as en-US writes them, without an Intl formatter', async (t) => {
  for (const n of [0, 7, 999, 1000, 12_345, 100_002, 1_234_567, -1_234_567, 1234.5678, 10_000_000]) {
    t.equal(groupThousands(n), n.toLocaleString('en-US', { maximumFractionDigits: 20 }), String(n));
  }
});
