import { readFileSync } from 'node:fs';
import t from 'tap';
import { ErrorCodes } from '../../src/lib/errors.js';

t.test('docs/errors.md lists every error code', async (t) => {
  const doc = readFileSync(new URL('../../docs/errors.md', import.meta.url), 'utf8');
  for (const code of Object.values(ErrorCodes)) t.match(doc, `\`${code}\``, code);
});
