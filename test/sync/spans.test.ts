/** Span sets of the uplink's late samples (src/sync/spans.ts). */
import t from 'tap';
import { addSpan, parseSpans, subtractSpan } from '../../src/sync/spans.js';

t.test('addSpan keeps spans sorted, disjoint, and joins overlapping and adjacent ones', async (t) => {
  t.same(addSpan([], [5, 9]), [[5, 9]]);
  t.same(addSpan([[5, 9]], [20, 30]), [[5, 9], [20, 30]], 'after');
  t.same(addSpan([[20, 30]], [5, 9]), [[5, 9], [20, 30]], 'before');
  t.same(addSpan([[5, 9], [20, 30]], [12, 14]), [[5, 9], [12, 14], [20, 30]], 'between');
  t.same(addSpan([[5, 9], [20, 30]], [10, 19]), [[5, 30]], 'adjacent on both sides: one span');
  t.same(addSpan([[5, 9], [20, 30]], [8, 21]), [[5, 30]], 'overlapping both');
  t.same(addSpan([[5, 9], [20, 30], [40, 50]], [0, 100]), [[0, 100]], 'covering all');
  t.same(addSpan([[5, 9]], [6, 7]), [[5, 9]], 'inside');
});

t.test('addSpan past the cap joins the two nearest spans (more is sent again, never less)', async (t) => {
  let s = addSpan([], [0, 0], 3);
  s = addSpan(s, [100, 100], 3);
  s = addSpan(s, [110, 110], 3);
  s = addSpan(s, [500, 500], 3);
  t.same(s, [[0, 0], [100, 110], [500, 500]]);
  s = addSpan(s, [1000, 1000], 3);
  t.same(s, [[0, 110], [500, 500], [1000, 1000]], 'the gaps were 89 and 390 and 500: 0..110 joined');
});

t.test('subtractSpan removes instants, splitting a span when needed', async (t) => {
  t.same(subtractSpan([[5, 30]], 5, 30), []);
  t.same(subtractSpan([[5, 30]], 10, 20), [[5, 9], [21, 30]]);
  t.same(subtractSpan([[5, 30]], 0, 9), [[10, 30]]);
  t.same(subtractSpan([[5, 9], [20, 30]], 0, 25), [[26, 30]]);
  t.same(subtractSpan([[5, 9], [20, 30]], 11, 19), [[5, 9], [20, 30]], 'between: unchanged');
});

t.test('parseSpans reads what is stored, and refuses anything else', async (t) => {
  t.same(parseSpans('[[1,5],[3,9],[20,30]]'), [[1, 9], [20, 30]], 'normalised');
  for (const bad of ['', 'x', '{}', '[]', '[[1]]', '[[5,1]]', '[["1",2]]', '[[1,null]]', '5']) t.equal(parseSpans(bad), undefined, JSON.stringify(bad));
});
