import t from 'tap';
import { parseDateTime } from '../../src/haystack/datetime.js';
import { decodeGrid, decodeVal, encodeVal, readJsonGrid, writeJsonBytes, writeJsonGrid, writeJsonVal } from '../../src/haystack/json.js';
import {
  HBin,
  HCoord,
  HDate,
  HDict,
  HGrid,
  HNumber,
  HRef,
  HTime,
  HUri,
  HXStr,
  type HVal,
  MARKER,
  NA,
  REMOVE,
  equals,
  kindOf,
} from '../../src/haystack/values.js';

// [JSON v3 text, value, canonical JSON when it differs from the input]
const scalars: [string, HVal, string?][] = [
  ['"m:"', MARKER],
  ['"-:"', REMOVE],
  ['"x:"', REMOVE, '"-:"'], // WideSky 2.0 habit
  ['"z:"', NA],
  ['true', true],
  ['false', false],
  ['null', null],
  ['"n:72.5"', new HNumber(72.5)],
  ['"n:72.5 °F"', new HNumber(72.5, '°F')],
  ['"n:-3 kW/m²"', new HNumber(-3, 'kW/m²')],
  ['"n:1e+21"', new HNumber(1e21)],
  ['"n:1.5E-7 %"', new HNumber(1.5e-7, '%'), '"n:1.5e-7 %"'],
  ['"n:INF"', new HNumber(Infinity)],
  ['"n:-INF"', new HNumber(-Infinity)],
  ['"n:NaN"', new HNumber(NaN)],
  ['42', new HNumber(42), '"n:42"'], // bare JSON numbers are accepted
  ['"s:text"', 'text'],
  ['"s:"', ''],
  ['"s:a:b"', 'a:b'],
  ['"plain"', 'plain', '"s:plain"'], // second char not ":": a Str
  ['"s:quote \\" and \\\\ and \\n"', 'quote " and \\ and \n'],
  ['"r:abc-1"', new HRef('abc-1')],
  ['"r:abc-1 Main Site"', new HRef('abc-1', 'Main Site')],
  ['"r:site.equip.point"', new HRef('site.equip.point')],
  ['"d:2024-03-10"', new HDate(2024, 3, 10)],
  ['"h:09:30:00"', new HTime(9, 30)],
  ['"h:09:30:00.250"', new HTime(9, 30, 0, 250)],
  ['"h:09:30"', new HTime(9, 30), '"h:09:30:00"'],
  ['"t:2024-03-10T03:00:00-04:00 New_York"', parseDateTime('2024-03-10T03:00:00-04:00 New_York')],
  ['"t:2024-03-10T03:00:00.5Z UTC"', parseDateTime('2024-03-10T03:00:00.500Z UTC'), '"t:2024-03-10T03:00:00.500Z UTC"'],
  ['"t:2024-03-10T03:00:00-03:00 GMT+3"', parseDateTime('2024-03-10T03:00:00-03:00 GMT+3')],
  ['"t:2024-01-10T03:00:00-05:00 Port-au-Prince"', parseDateTime('2024-01-10T03:00:00-05:00 Port-au-Prince')],
  ['"u:http://example.com/a?b=c"', new HUri('http://example.com/a?b=c')],
  ['"c:37.55,-77.45"', new HCoord(37.55, -77.45)],
  ['"x:Span:today"', new HXStr('Span', 'today')],
  ['"b:text/plain"', new HBin('text/plain')],
];

t.test('scalars decode and encode', async (t) => {
  for (const [json, val, canonical] of scalars) {
    const got = decodeVal(JSON.parse(json));
    t.ok(equals(got, val), `${json} decodes to ${kindOf(val)} ${String(val)}`);
    t.equal(kindOf(got), kindOf(val), `${json} kind`);
    t.equal(writeJsonVal(got), canonical ?? json, `${json} re-encodes`);
    t.equal(JSON.stringify(encodeVal(got)), canonical ?? json, `${json} encodeVal`);
  }
  const ref = decodeVal('r:abc Main Site') as HRef;
  t.equal(ref.dis, 'Main Site');
  const n = decodeVal('n:72.5 °F') as HNumber;
  t.equal(n.unit, '°F');
});

t.test('bad values are errors that say where, never a silent Str', async (t) => {
  const cases: [unknown, string][] = [
    ['n:abc', '"n:abc" is not a Number'],
    ['n:', 'is not a Number'],
    ['n:1.', 'is not a Number'],
    ['n:0x10', 'is not a Number'],
    ['n:72 deg F', 'is not a valid unit'],
    ['m:x', 'is not a Marker'],
    ['z:x', 'is not NA'],
    ['r:', 'is not a Ref'],
    ['r:bad!id', 'is not a Ref'],
    ['d:2024-02-30', 'is not a Date'],
    ['h:25:00:00', 'is not a Time'],
    ['t:2024-03-10T03:00:00-05:00 New_York', 'New_York is at -04:00'],
    ['t:2024-03-10T03:00:00Z Mars', 'not a known time zone'],
    ['t:yesterday', 'is not a DateTime'],
    ['c:91,0', 'is not a Coord'],
    ['c:1', 'is not a Coord'],
    ['x:lower:x', 'is not a XStr'],
    ['x:Nocolon', 'is not an XStr'],
    ['q:what', 'unknown type prefix "q:"'],
  ];
  for (const [input, message] of cases) {
    const err = t.throws(() => decodeVal(input, 'rows[3].val'), { code: /^HL_BAD_(VALUE|OFFSET)$/ }, String(input)) as Error;
    t.match(err.message, /^rows\[3\]\.val: /, `${String(input)} names where`);
    t.match(err.message, message, `${String(input)} says why`);
  }
  t.throws(() => decodeVal(undefined), { code: 'HL_BAD_VALUE' });
});

t.test('nested lists, dicts and grids', async (t) => {
  const json = {
    list: ['n:1', 's:two', ['m:', null], { a: 'r:x' }],
    dict: { a: 'n:1 kW', b: { c: 'm:', d: null } },
    grid: { meta: { ver: '3.0', x: 'm:' }, cols: [{ name: 'a' }, { name: 'b', dis: 's:B' }], rows: [{ a: 'n:1' }, { b: 's:q' }] },
  };
  const v = decodeVal(json) as HDict;
  t.ok(v instanceof HDict);
  const list = v.get('list') as readonly HVal[];
  t.ok(Array.isArray(list) && Object.isFrozen(list), 'lists are frozen arrays');
  t.ok(equals(list[1], 'two'));
  t.ok(equals((list[2] as HVal[])[0], MARKER));
  t.equal((list[2] as HVal[])[1], null);
  t.ok((list[3] as HDict).get('a') instanceof HRef);
  const dict = v.get('dict') as HDict;
  t.notOk(dict.get('b') instanceof HGrid);
  t.same((dict.get('b') as HDict).names(), ['c'], 'null tags are absent from dicts');
  const grid = v.get('grid') as HGrid;
  t.ok(grid instanceof HGrid);
  t.same(grid.colNames(), ['a', 'b']);
  t.equal(grid.col('b')?.meta.get('dis'), 'B');
  t.equal(grid.rows.length, 2);
  t.equal(grid.meta.get('x'), MARKER);
  // and back again, with the nested grid written as ver 2.0
  const text = writeJsonVal(v);
  const again = decodeVal(JSON.parse(text));
  t.ok(equals(again, v), 'nested values round-trip');
  t.match(text, /"grid":\{"meta":\{"ver":"2.0","x":"m:"\}/);
  const err = t.throws(() => decodeVal({ l: ['n:1', 'n:x'] })) as Error;
  t.match(err.message, /^l\[1\]: "n:x" is not a Number/);
  const err2 = t.throws(() => decodeVal({ d: { e: 'h:99:00' } })) as Error;
  t.match(err2.message, /^d\.e: /);
});

t.test('grids', async (t) => {
  const g = readJsonGrid(
    JSON.stringify({
      meta: { ver: '2.0', id: 'r:p1 Point 1' },
      cols: [{ name: 'ts' }, { name: 'val', unit: 's:kW' }],
      rows: [{ ts: 't:2024-01-01T00:00:00Z UTC', val: 'n:1 kW' }, { ts: 't:2024-01-01T00:01:00Z UTC' }],
    }),
  );
  t.equal(g.rows.length, 2);
  t.ok(g.meta.get('id') instanceof HRef);
  t.notOk(g.meta.has('ver'), 'ver is not kept as a tag');
  t.equal(g.rows[1]?.get('val'), undefined, 'an absent cell is null');
  t.equal(
    writeJsonGrid(g),
    '{"meta":{"ver":"2.0","id":"r:p1 Point 1"},"cols":[{"name":"ts"},{"name":"val","unit":"s:kW"}],"rows":[{"ts":"t:2024-01-01T00:00:00Z UTC","val":"n:1 kW"},{"ts":"t:2024-01-01T00:01:00Z UTC"}]}',
  );
  t.equal(writeJsonGrid(HGrid.empty()), '{"meta":{"ver":"2.0"},"cols":[{"name":"empty"}],"rows":[]}');
  const e = decodeGrid({ meta: { ver: '2.0' }, cols: [{ name: 'empty' }], rows: [] });
  t.equal(e.rows.length, 0);
  t.same(e.colNames(), ['empty']);
  t.equal(decodeGrid({ cols: [{ name: 'a' }], rows: [{ a: 'n:1' }] }).rows.length, 1, 'meta may be left out');
  const fromRows = HGrid.fromRows([HDict.of({ a: new HNumber(1) }), HDict.of({ b: MARKER })]);
  t.same(fromRows.colNames(), ['a', 'b']);
  t.same(HGrid.fromRows([]).colNames(), ['empty']);
});

t.test('malformed grids', async (t) => {
  const cases: [string, string, string][] = [
    ['not json', 'HL_BAD_GRID', 'not valid JSON'],
    ['[]', 'HL_BAD_GRID', 'must be a JSON object'],
    ['{"meta":{"ver":"1.0"},"cols":[],"rows":[]}', 'HL_BAD_GRID', 'meta.ver: "1.0" is not a supported grid version'],
    ['{"meta":[],"cols":[],"rows":[]}', 'HL_BAD_GRID', 'meta: must be an object'],
    ['{"meta":{"ver":"2.0"},"rows":[]}', 'HL_BAD_GRID', 'cols: must be an array'],
    ['{"meta":{"ver":"2.0"},"cols":[{"name":"Bad"}],"rows":[]}', 'HL_BAD_GRID', 'cols[0].name: "Bad" is not a valid column name'],
    ['{"meta":{"ver":"2.0"},"cols":[{}],"rows":[]}', 'HL_BAD_GRID', 'cols[0].name'],
    ['{"meta":{"ver":"2.0"},"cols":[{"name":"a"},{"name":"a"}],"rows":[]}', 'HL_BAD_GRID', 'appears twice'],
    ['{"meta":{"ver":"2.0"},"cols":[{"name":"a"}],"rows":{}}', 'HL_BAD_GRID', 'rows: must be an array'],
    ['{"meta":{"ver":"2.0"},"cols":[{"name":"a"}],"rows":["x"]}', 'HL_BAD_GRID', 'rows[0]: a row must be an object'],
    ['{"meta":{"ver":"2.0"},"cols":[{"name":"a"}],"rows":[{"b":"n:1"}]}', 'HL_BAD_GRID', 'rows[0]: "b" is not one of the grid\'s columns'],
    ['{"meta":{"ver":"2.0"},"cols":[{"name":"a"}],"rows":[{"a":"n:1"},{"a":"n:1"},{"a":"n:1"},{"a":"n:abc"}]}', 'HL_BAD_VALUE', 'rows[3].a: "n:abc" is not a Number'],
    ['{"meta":{"ver":"2.0","id":"r:"},"cols":[{"name":"a"}],"rows":[]}', 'HL_BAD_VALUE', 'meta.id: "r:" is not a Ref'],
    ['{"meta":{"ver":"2.0"},"cols":[{"name":"a","unit":"n:x"}],"rows":[]}', 'HL_BAD_VALUE', 'cols[0].unit: "n:x" is not a Number'],
  ];
  for (const [text, code, message] of cases) {
    const err = t.throws(() => readJsonGrid(text), { code }, text) as Error;
    t.match(err.message, message, `${text}: ${message}`);
  }
  // Names that are properties of Object.prototype are plain tags, never inherited values.
  const d = decodeVal({ toString: 's:x', constructor: 'm:' }) as HDict;
  t.equal(d.get('toString'), 'x');
  t.equal(HDict.EMPTY.get('toString'), undefined);
  t.equal(HDict.EMPTY.get('__proto__'), undefined);
  const p = decodeVal(JSON.parse('{"__proto__":"s:x"}')) as HDict;
  t.equal(p.get('__proto__'), 'x', '__proto__ is just a key');
  t.equal(({} as Record<string, unknown>).x, undefined, 'no prototype was polluted');
});

t.test('history-shaped grids decode as columns, equal to the general decode', async (t) => {
  const { HisGrid } = await import('../../src/haystack/his-grid.js');
  const rows = (vals: string[], zones: string[] = []): string =>
    vals.map((v, i) => `{"ts":"t:2024-11-03T0${1 + i}:30:00-05:00 ${zones[i] ?? 'New_York'}","val":${JSON.stringify(v)}}`).join(',');
  const grid = (body: string, meta = '"ver":"2.0","id":"r:p1"'): string => `{"meta":{${meta}},"cols":[{"name":"ts"},{"name":"val"}],"rows":[${body}]}`;
  const g = readJsonGrid(grid(rows(['n:1.5 °F', 'n:NaN °F', 'n:-INF °F'])));
  t.ok(g instanceof HisGrid, 'one zone, one unit: columns');
  t.equal(g.size, 3);
  t.ok(g.meta.get('id') instanceof HRef);
  const again = readJsonGrid(writeJsonGrid(g));
  t.equal(writeJsonGrid(again), writeJsonGrid(g), 'it writes back the same');
  t.ok(equals(g.rows[0]?.get('val'), new HNumber(1.5, '°F')));
  t.equal((g.rows[0]?.get('ts') as { tz: { name: string } }).tz.name, 'New_York');
  // Not history-shaped: decoded the general way.
  const cases: [string, string][] = [
    ['two zones', grid(rows(['n:1', 'n:2'], ['New_York', 'GMT+5']))],
    ['two units', grid(rows(['n:1 kW', 'n:2 W']))],
    ['a Bool', grid(rows(['n:1', 'x']).replace('"x"', 'true'))],
    ['a null cell', grid('{"ts":"t:2024-01-01T00:00:00Z UTC"}')],
  ];
  for (const [what, text] of cases) {
    const d = readJsonGrid(text);
    t.notOk(d instanceof HisGrid, `${what}: rows`);
    t.ok(d.size >= 1, what);
  }
  // Errors keep their place and words.
  const err = t.throws(() => readJsonGrid(grid(rows(['n:1', 'n:2', 'n:3', 'n:abc'])))) as Error;
  t.match(err.message, /^rows\[3\]\.val: "n:abc" is not a Number/);
  const err2 = t.throws(() => readJsonGrid(grid(rows(['n:1']) + ',{"ts":"t:2024-11-03T02:30:00-04:00 New_York","val":"n:2"}'))) as Error;
  t.match(err2.message, /rows\[1\]\.ts: .*New_York is at -05:00/);
});

void t.test('writeJsonBytes: the UTF-8 of writeJsonGrid, kept for small row-built grids in their own memory', (t) => {
  const rec = HDict.of({ id: HRef.of('p1'), dis: 'Température', curVal: HNumber.of(21.5, '°C'), point: MARKER });
  const small = HGrid.fromRows([rec], HDict.EMPTY, ['id']);
  const bytes = writeJsonBytes(small);
  t.equal(bytes.toString('utf8'), writeJsonGrid(small), 'the same text');
  t.equal(bytes.length, Buffer.byteLength(writeJsonGrid(small)), 'encoded as UTF-8');
  t.equal(writeJsonBytes(small), bytes, 'the same bytes for the same grid');
  t.equal(bytes.buffer.byteLength, bytes.length, 'not a slice of the shared pool');
  const big = HGrid.fromRows(Array.from({ length: 10 }, (_, i) => HDict.of({ id: HRef.of(`p${i}`), dis: `°${i}` })));
  t.equal(writeJsonBytes(big).toString('utf8'), writeJsonGrid(big), 'larger grids are encoded each time');
  t.not(writeJsonBytes(big), writeJsonBytes(big));
  t.end();
});

// Issue 18: grids nested 10,000 deep overflowed the decoder's stack (500 on every op). Each limit
// is an HL_LIMIT error naming the limit and the place.
t.test('limits on shape: nesting, long texts, columns', async (t) => {
  const grid = (meta: string, cols: string, rows: string): string => `{"meta":{"ver":"3.0"${meta}},"cols":[${cols}],"rows":[${rows}]}`;
  const nest = (n: number): string => '['.repeat(n) + ']'.repeat(n);
  const big = 'x'.repeat(100_002);
  const cases: [string, string, RegExp][] = [
    ['a list 10,000 deep in a cell', grid('', '{"name":"a"}', `{"a":${nest(10_000)}}`), /^rows\[0\]\.a(\[0\]){32}: the nesting of lists, dicts and grids is above the limit of 32 \(maxDepth\)$/],
    ['in grid meta', grid(`,"x":${nest(10_000)}`, '{"name":"a"}', ''), /^meta\.x(\[0\]){32}: .*\(maxDepth\)$/],
    ['in column meta', grid('', `{"name":"a","x":${nest(10_000)}}`, ''), /^cols\[0\]\.x(\[0\]){32}: .*\(maxDepth\)$/],
    ['dicts 5,000 deep', grid('', '{"name":"a"}', `{"a":${'{"b":'.repeat(5000)}1${'}'.repeat(5000)}}`), /\(maxDepth\)$/],
    ['grids in grids', grid('', '{"name":"a"}', `{"a":${`{"meta":{"ver":"3.0"},"cols":[{"name":"a"}],"rows":[{"a":`.repeat(40)}1${'}]}'.repeat(40)}}`), /\(maxDepth\)$/],
    ['one level too many', grid('', '{"name":"a"}', `{"a":${nest(33)}}`), /\(maxDepth\)$/],
    ['a 100,002-char Ref', grid('', '{"name":"id"}', `{"id":"r:${big}"}`), /^rows\[0\]\.id: a text of 100,004 chars is above the limit of 65,536 \(maxValueChars\)$/],
    ['a long Str in meta', grid(`,"dis":"s:${big}"`, '{"name":"a"}', ''), /^meta\.dis: a text of 100,004 chars .*\(maxValueChars\)$/],
    ['a long column name', grid('', `{"name":"${big}"}`, ''), /^cols\[0\]\.name: a text of 100,002 chars .*\(maxValueChars\)$/],
    ['a long tag name', grid(`,"${big}":"m:"`, '{"name":"a"}', ''), /^meta: a text of 100,002 chars .*\(maxValueChars\)$/],
    ['1,001 columns', JSON.stringify({ meta: { ver: '3.0' }, cols: Array.from({ length: 1001 }, (_, i) => ({ name: `c${i}` })), rows: [] }), /^cols: 1,001 columns is above the limit of 1,000 \(maxCols\)$/],
  ];
  for (const [what, text, message] of cases) t.throws(() => readJsonGrid(text), { code: 'HL_LIMIT', message }, what);
  t.equal(readJsonGrid(grid('', '{"name":"a"}', `{"a":${nest(32)}}`)).size, 1, '32 levels are accepted');
  t.equal(readJsonGrid(grid('', '{"name":"a"}', `{"a":"s:${'x'.repeat(65_534)}"}`)).size, 1, 'a Str of 65,536 chars with its prefix is accepted');
  const lim = { maxDepth: 32, maxValueChars: 10, maxCols: 2 };
  t.throws(() => readJsonGrid(grid('', '{"name":"a"}', '{"a":"s:12345678901"}'), lim), { code: 'HL_LIMIT', message: /limit of 10 \(maxValueChars\)/ }, 'limits are the caller\'s');
  t.throws(() => readJsonGrid(grid('', '{"name":"a"},{"name":"b"},{"name":"c"}', ''), lim), { code: 'HL_LIMIT', message: /limit of 2 \(maxCols\)/ });
});

t.test('error texts quote long input cut to 100 chars with its length', async (t) => {
  const long = 'n:' + '9'.repeat(50_000) + 'x';
  t.throws(() => readJsonGrid(`{"meta":{"ver":"3.0"},"cols":[{"name":"a"}],"rows":[{"a":"${long}"}]}`), {
    code: 'HL_BAD_VALUE',
    message: `rows[0].a: "n:${'9'.repeat(98)}…" (50,003 chars) is not a Number`,
  });
});
