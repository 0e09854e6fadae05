import { parse } from 'node:querystring';
import t from 'tap';
import { queryGrid, splitQuery } from '../../src/api/query.js';
import { HRef } from '../../src/haystack/values.js';

t.test('splitQuery agrees with node:querystring for queries without escapes', async (t) => {
  const fixed = ['', 'a=1', 'a=1&b=2', 'a', 'a=', '=a', '&&a=1&&', 'a=1&a=2', 'a=1&a=2&a=3', 'a=b=c', '__proto__=x', '&', '=', 'a&b', 'constructor=1', 'id=@p:1.x~y'];
  for (const q of fixed) t.same(Object.fromEntries(splitQuery(q)), parse(q), JSON.stringify(q));
  // Random queries over an alphabet heavy in separators.
  const alphabet = 'ab=&=&c@_-.~:"';
  let seed = 42;
  const rnd = (n: number): number => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) % n);
  let agreed = 0;
  for (let i = 0; i < 2000; i++) {
    let q = '';
    for (let j = rnd(24); j > 0; j--) q += alphabet[rnd(alphabet.length)];
    if (JSON.stringify(Object.fromEntries(splitQuery(q))) === JSON.stringify(parse(q))) agreed++;
    else t.fail(`differs on ${JSON.stringify(q)}: ${JSON.stringify(Object.fromEntries(splitQuery(q)))} vs ${JSON.stringify(parse(q))}`);
  }
  t.equal(agreed, 2000, 'all 2,000 random queries parse alike');
  t.equal(splitQuery(Array.from({ length: 1500 }, (_, i) => `k${i}=1`).join('&')).length, 1000, 'at most 1,000 keys, as querystring');
  // Many pairs without `=`, then one with: the `=` is searched for once, not once per pair.
  const long = 'a&'.repeat(5000) + 'b=1';
  t.same(Object.fromEntries(splitQuery(long)), parse(long));
});

t.test('queryGrid reads the same grid with and without escapes', async (t) => {
  const plain = queryGrid('?id=@abc&limit=10');
  const escaped = queryGrid('?id=%40abc&limit=1%30');
  t.same(plain.rows[0]?.get('id'), new HRef('abc'));
  t.same(escaped.rows[0]?.get('id'), new HRef('abc'));
  t.same(plain.rows[0]?.get('limit'), escaped.rows[0]?.get('limit'));
  t.equal(queryGrid('?filter=point+and+his').rows[0]?.get('filter'), 'point and his', '+ is a space');
  t.throws(() => queryGrid('?id=@a&id=@b'), { code: 'HL_BAD_REQUEST', message: /more than once/ });
  t.throws(() => queryGrid('?Bad=1'), { code: 'HL_BAD_REQUEST', message: /not a valid column name/ });
  t.equal(queryGrid('').rows.length, 0);
  const withNull = queryGrid('?x=N&y=1');
  t.same(withNull.cols.map((c) => c.name), ['x', 'y'], 'a null value keeps its column');
  t.equal(withNull.rows[0]?.has('x'), false, 'but no value');
});
