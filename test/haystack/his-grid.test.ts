import t from 'tap';
import { CHUNK_CHARS, HisGrid, type HisValues, STREAMED_ROWS, rowChunks, streamed } from '../../src/haystack/his-grid.js';
import { readJsonGrid, writeJsonChunks, writeJsonGrid } from '../../src/haystack/json.js';
import { timeZone } from '../../src/haystack/tz.js';
import { HDict, HGrid, HNumber, HRef, MARKER, equals } from '../../src/haystack/values.js';
import { readZinc, writeZinc, writeZincChunks } from '../../src/haystack/zinc.js';
import { writeCsv } from '../../src/haystack/csv.js';

t.test('a columnar history grid writes exactly what its rows would', async (t) => {
  const ny = timeZone('New_York');
  // across the 2024-11-03 fall-back: the repeated hour keeps its two offsets
  const ts = [Date.parse('2024-11-03T05:30:00Z'), Date.parse('2024-11-03T06:30:00Z'), Date.parse('2024-11-03T07:00:00.250Z')];
  const meta = HDict.of({ id: new HRef('p1', 'Temp') });
  const cases: HisValues[] = [
    { kind: 'Number', val: new Float64Array([21.5, NaN, -Infinity]), unit: '°F' },
    { kind: 'Number', val: [0, 1e21, Infinity], unit: null },
    { kind: 'Number', val: [0, 1, 2], unit: 'x%' },
    { kind: 'Bool', val: [true, false, true] },
    { kind: 'Str', val: ['a "quoted" \\ text', '', 'ünïcode\n'] },
  ];
  for (const values of cases) {
    const g = new HisGrid(meta, ts, ny, values);
    const plain = new HGrid(g.meta, g.cols, [...g.rows]);
    t.equal(writeJsonGrid(g), writeJsonGrid(plain), `JSON ${values.kind}`);
    t.equal(writeZinc(g), writeZinc(plain), `Zinc ${values.kind}`);
    t.equal(writeCsv(g), writeCsv(plain), `CSV ${values.kind}`);
    const back = readJsonGrid(writeJsonGrid(g));
    t.equal(back.size, 3);
    t.ok(back.rows.every((r, i) => equals(r.get('ts'), g.rows[i]?.get('ts'))), 'timestamps read back');
    t.equal(readZinc(writeZinc(g)).size, 3);
  }
  t.match(writeJsonGrid(new HisGrid(meta, ts, ny, cases[0] as HisValues)), /"t:2024-11-03T01:30:00-04:00 New_York".*"t:2024-11-03T01:30:00-05:00 New_York"/);
  const empty = new HisGrid(meta, [], ny, { kind: 'Bool', val: [] });
  t.equal(empty.size, 0);
  t.equal(writeJsonGrid(empty), '{"meta":{"ver":"2.0","id":"r:p1 Temp"},"cols":[{"name":"ts"},{"name":"val"}],"rows":[]}');
  t.equal(readZinc(writeZinc(empty)).size, 0);
  t.throws(() => new HisGrid(meta, [1, 2], ny, { kind: 'Bool', val: [true] }), RangeError);
});

t.test('streamed chunks concatenate to the whole text', async (t) => {
  const n = 5000; // more than two chunks
  const ts = Array.from({ length: n }, (_, i) => Date.UTC(2024, 3, 6, 12) + i * 60_000); // across Sydney's DST end
  const g = new HisGrid(HDict.of({ id: new HRef('p') }), ts, timeZone('Sydney'), { kind: 'Number', val: ts.map((_, i) => i / 10), unit: 'kW' });
  const json = [...writeJsonChunks(g)];
  t.ok(json.length > 3, 'history comes in several pieces');
  t.equal(json.join(''), writeJsonGrid(new HGrid(g.meta, g.cols, [...g.rows])));
  t.equal(readJsonGrid(json.join('')).size, n);
  const zinc = [...writeZincChunks(g)];
  t.ok(zinc.length > 3);
  t.equal(zinc.join(''), writeZinc(new HGrid(g.meta, g.cols, [...g.rows])));
  const plain = HGrid.fromRows([HDict.of({ a: 'x' })]);
  t.same([...writeJsonChunks(plain)], [writeJsonGrid(plain)], 'small grids come whole');
});

t.test('grids of many rows come in chunks of bounded size that concatenate to the whole text', async (t) => {
  // Records as wide as a point's (300-400 characters of JSON), two of them with nested values.
  const rows = Array.from({ length: 3000 }, (_, i) =>
    HDict.of({
      id: new HRef(`p${i}`, `AHU ${i % 10} point ${i}`),
      point: MARKER,
      his: MARKER,
      kind: 'Number',
      unit: '°C',
      dis: `AHU ${i % 10} point ${i} – zone “${i}”`,
      equipRef: new HRef(`ahu${i % 10}`, `AHU ${i % 10}`),
      mod: new HNumber(i, 'ms'),
      ...(i === 7 ? { tags: ['a', new HNumber(1)] } : {}),
      ...(i === 2999 ? { nested: HDict.of({ x: MARKER }) } : {}),
    }),
  );
  const g = HGrid.fromRows(rows, HDict.of({ ver: '3.0', note: 'x' }));
  t.ok(streamed(g), 'a grid of 3,000 rows is streamed');
  t.notOk(streamed(HGrid.fromRows(rows.slice(0, STREAMED_ROWS - 1))), 'one of fewer rows is not');
  const pieces = [...writeJsonChunks(g)];
  t.ok(pieces.length > 10, `several pieces (${pieces.length})`);
  t.ok(pieces.every((p) => p.length < 2 * CHUNK_CHARS), 'none much above the chunk size');
  const whole = pieces.join('');
  t.equal(whole, writeJsonGrid(g), 'together, the text of the grid written whole');
  const back = readJsonGrid(whole);
  t.equal(back.size, 3000);
  t.ok(back.rows.every((r, i) => (r.get('id') as HRef).id === `p${i}`), 'every row, in order');
  t.same(back.rows[7]?.get('tags'), ['a', new HNumber(1)]);
  const zinc = writeZinc(g);
  t.match(zinc, /^ver:"3\.0"/, 'Zinc: version 3.0 (a list and a dict), decided after the rows');
  const z = readZinc(zinc);
  t.equal(z.size, 3000, 'Zinc reads back every row');
  t.ok(z.rows.every((r, i) => equals(r, rows[i])), 'each as it was');
});

t.test('rowChunks: bounded by rows and by characters, joined with the separator', async (t) => {
  const texts = Array.from({ length: 10 }, (_, i) => 'x'.repeat(i === 4 ? CHUNK_CHARS : 10) + String(i));
  const chunks = [...rowChunks(texts.length, (i) => texts[i] as string, ',', 3)];
  t.same(chunks, [texts.slice(0, 3).join(','), ',' + texts.slice(3, 5).join(','), ',' + texts.slice(5, 8).join(','), ',' + texts.slice(8).join(',')], 'a wide row closes its chunk; otherwise 3 rows a chunk');
  t.same([...rowChunks(0, () => 'x', ',')], [], 'no rows, no chunks');
});
