import t from 'tap';
import { CHUNK_CHARS, HisGrid, type HisValues, STREAMED_ROWS, rowChunks, streamed } from '../../src/haystack/his-grid.js';
import { readJsonGrid, writeJsonChunks, writeJsonGrid } from '../../src/haystack/json.js';
import { timeZone } from '../../src/haystack/tz.js';
import { HDict, HGrid, HNumber, HRef, type HVal, HXStr, MARKER, NA, equals } from '../../src/haystack/values.js';
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
  const text = (chunks: (string | Buffer)[]): string => Buffer.concat(chunks.map((c) => (typeof c === 'string' ? Buffer.from(c, 'utf8') : c))).toString('utf8');
  const json = [...writeJsonChunks(g)];
  t.ok(json.length > 3, 'history comes in several pieces');
  t.equal(text(json), writeJsonGrid(new HGrid(g.meta, g.cols, [...g.rows])), 'the text of the rows written one by one');
  t.equal(readJsonGrid(text(json)).size, n);
  // Number history is written as bytes: every row whole in a piece, across zones, offsets,
  // milliseconds, dates before 1970 and past 9999, special numbers, units and none.
  const odd = [-86_400_000 * 366 * 80 + 1, -1, 0, 999, 1_000, 59_999, Date.UTC(2024, 9, 6, 15, 59, 59, 7), Date.UTC(2024, 9, 6, 16, 0, 0, 70), 253_402_300_800_000 + 12_345];
  const vals = [-0, 0, 1e21, -1.5e-7, Infinity, -Infinity, NaN, 0.30000000000000004, 123456789.125];
  for (const zone of ['Sydney', 'New_York', 'UTC', 'Rel', 'Kolkata', 'GMT-5']) {
    for (const unit of [null, '°C', 'm³/h', 'xyz']) {
      const h = new HisGrid(HDict.of({ id: new HRef('p', 'Temp °C') }), odd, timeZone(zone), { kind: 'Number', val: vals, unit });
      const rows = new HGrid(h.meta, h.cols, [...h.rows]);
      t.equal(text([...writeJsonChunks(h)]), writeJsonGrid(rows), `JSON, ${zone}, unit ${String(unit)}`);
      t.equal(text([...writeZincChunks(h)]), writeZinc(rows), `Zinc, ${zone}, unit ${String(unit)}`);
      t.equal(writeZinc(h), writeZinc(rows), `Zinc whole, ${zone}, unit ${String(unit)}`);
    }
  }
  // Numbers of every shape, against String's text of each (the rows writer's).
  let seed = 42;
  const rnd = (): number => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  const shapes = [
    () => Math.round((rnd() - 0.5) * 2e4) / 10,
    () => Math.round((rnd() - 0.5) * 2e6) / 100,
    () => Math.round((rnd() - 0.5) * 2e9) / 1000,
    () => Math.round((rnd() - 0.5) * 2e9),
    () => (rnd() - 0.5) * 10 ** Math.floor(rnd() * 30 - 10),
    () => 1e9 - Math.round(rnd() * 1e3) / 1e3,
    () => -(1e9 - 1) + Math.round(rnd() * 100) / 10,
    () => Math.round(rnd() * 1e4) / 1e4,
    () => 0.1 + 0.2 * Math.round(rnd() * 10),
    () => 1e-7 * Math.round(rnd() * 100),
  ];
  const many = Array.from({ length: 20_000 }, (_, i) => (shapes[i % shapes.length] as () => number)());
  const mts = many.map((_, i) => Date.UTC(2024, 0, 1) + i * 1000);
  const numbers = new HisGrid(HDict.of({ id: new HRef('p') }), mts, timeZone('UTC'), { kind: 'Number', val: many, unit: null });
  t.equal(text([...writeJsonChunks(numbers)]), writeJsonGrid(new HGrid(numbers.meta, numbers.cols, [...numbers.rows])), 'numbers of every shape');
  t.equal(text([...writeZincChunks(numbers)]), writeZinc(new HGrid(numbers.meta, numbers.cols, [...numbers.rows])), 'numbers of every shape, Zinc');
  const long = new HisGrid(HDict.of({ id: new HRef('p') }), ts, timeZone('Sydney'), { kind: 'Number', val: ts.map((_, i) => i / 7), unit: '°C' });
  for (const c of writeJsonChunks(long)) if (typeof c !== 'string') t.doesNotThrow(() => new TextDecoder('utf-8', { fatal: true }).decode(c));
  t.equal(text([...writeJsonChunks(long)]), writeJsonGrid(new HGrid(long.meta, long.cols, [...long.rows])), 'pieces end between rows, never inside a character');
  const zinc = [...writeZincChunks(g)];
  t.ok(zinc.length > 3);
  t.equal(text(zinc), writeZinc(new HGrid(g.meta, g.cols, [...g.rows])));
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
  const zincPieces = [...writeZincChunks(g)] as string[];
  t.ok(zincPieces.length > 5 && zincPieces.every((p) => p.length < 2 * CHUNK_CHARS), `Zinc in pieces too (${zincPieces.length}), none much above the chunk size`);
  t.equal(zincPieces.join(''), zinc, 'together, the Zinc of the grid written whole');
  // The version line from the cells: 2.0 without a 3.0 value; 3.0 for one in the last row only,
  // in grid meta, in column meta, or of each kind that needs it.
  const plain = HGrid.fromRows(rows.slice(8, 2999));
  t.match(writeZinc(plain), /^ver:"2\.0"/);
  t.equal(([...writeZincChunks(plain)] as string[]).join(''), writeZinc(plain), 'Zinc 2.0 when no value needs 3.0');
  const last = (v: HVal): HGrid => HGrid.fromRows([...rows.slice(8, 2999), HDict.of({ id: new HRef('z'), v })]);
  for (const [what, v] of [['NA', NA], ['a list', [HNumber.of(1)]], ['a dict', HDict.of({ a: MARKER })], ['an XStr', new HXStr('Span', 'today')], ['a grid', HGrid.fromRows([HDict.of({ a: MARKER })])]] as const) {
    const h = last(v);
    t.match(writeZinc(h), /^ver:"3\.0"/, `${what} in the last row: 3.0`);
    t.equal(([...writeZincChunks(h)] as string[]).join(''), writeZinc(h), `${what} in the last row: the pieces say so too`);
  }
  const inMeta = new HGrid(HDict.of({ tags: [HNumber.of(1)] }), plain.cols, [...plain.rows]);
  t.equal(([...writeZincChunks(inMeta)] as string[]).join(''), writeZinc(inMeta), 'a list in grid meta');
  t.match(writeZinc(inMeta), /^ver:"3\.0"/);
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
