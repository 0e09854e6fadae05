import t from 'tap';
import { ErrorCodes } from '../../src/lib/errors.js';
import { parseDateTime } from '../../src/haystack/datetime.js';
import { csvCell, csvField, writeCsv } from '../../src/haystack/csv.js';
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
  type Kind,
  MARKER,
  NA,
  REMOVE,
  kindOf,
} from '../../src/haystack/values.js';

const col = (name: string, meta: Record<string, HVal> = {}): { name: string; meta: HDict } => ({ name, meta: HDict.of(meta) });
const oneCell = (v: HVal): HGrid => new HGrid(HDict.EMPTY, [col('v')], [HDict.of({ v })]);

/** Each value with the exact CSV field written for it (after quoting). */
const cells: [string, HVal, string][] = [
  ['null', null, '""'],
  ['marker', MARKER, '\u2713'],
  ['remove', REMOVE, 'R'],
  ['NA', NA, 'NA'],
  ['true', true, 'T'],
  ['false', false, 'F'],
  ['number', new HNumber(72.5), '72.5'],
  ['number with unit', new HNumber(72.5, '°F'), '72.5°F'],
  ['INF', new HNumber(Infinity), 'INF'],
  ['NaN', new HNumber(NaN), 'NaN'],
  ['Str is bare', 'hello world', 'hello world'],
  ['Str with backslash is not escaped', 'a\\b', 'a\\b'],
  ['Str with comma is quoted', 'a,b', '"a,b"'],
  ['Str with quote is quoted and doubled', 'say "hi"', '"say ""hi"""'],
  ['Str with LF is quoted', 'l1\nl2', '"l1\nl2"'],
  ['Str with CR is quoted', 'l1\rl2', '"l1\rl2"'],
  ['Str with spaces is not quoted', '  padded  ', '  padded  '],
  ['Str unicode stays raw', 'café ✓', 'café ✓'],
  ['Ref', HRef.of('abc'), '@abc'],
  ['Ref with display', HRef.of('abc', 'Site 1'), '@abc Site 1'],
  ['Ref with display needing quotes', HRef.of('abc', 'A, "B"'), '"@abc A, ""B"""'],
  ['Uri is bare', HUri.of('http://x/y?a=1&b=2'), 'http://x/y?a=1&b=2'],
  ['Uri with comma is quoted', HUri.of('http://x/a,b'), '"http://x/a,b"'],
  ['Date', HDate.of(2024, 3, 10), '2024-03-10'],
  ['Time', HTime.of(9, 30, 0, 250), '09:30:00.250'],
  ['DateTime', parseDateTime('2024-03-10T03:00:00-04:00 New_York'), '2024-03-10T03:00:00-04:00 New_York'],
  ['Coord has a comma', HCoord.of(37.55, -77.45), '"C(37.55,-77.45)"'],
  ['XStr in Zinc form', HXStr.of('Span', 'today'), '"Span(""today"")"'],
  ['Bin in Zinc form', new HBin('text/plain'), '"Bin(""text/plain"")"'],
  ['List in Zinc form', Object.freeze([new HNumber(1), 'a']), '"[1,""a""]"'],
  ['Dict in Zinc form', HDict.of({ a: new HNumber(1), b: MARKER }), '{a:1 b}'],
];

void t.test('the cell table covers every kind but Grid', (t) => {
  const all: Kind[] = ['Null', 'Marker', 'Remove', 'NA', 'Bool', 'Number', 'Str', 'Ref', 'Date', 'Time', 'DateTime', 'Uri', 'Coord', 'XStr', 'Bin', 'List', 'Dict'];
  t.same([...new Set(cells.map(([, v]) => kindOf(v)))].sort(), [...all].sort());
  t.end();
});

void t.test('cells are written as docs/spec/wire-notes.md §1 says, quoted per RFC 4180', (t) => {
  for (const [name, v, field] of cells) t.equal(writeCsv(oneCell(v)), `v\r\n${field}\r\n`, name);
  t.end();
});

void t.test('csvCell gives the unquoted text; undefined is empty', (t) => {
  t.equal(csvCell(undefined), '');
  t.equal(csvCell(null), '');
  t.equal(csvCell('a,b'), 'a,b');
  t.equal(csvCell(HXStr.of('Span', 'today')), 'Span("today")');
  t.end();
});

void t.test('csvField quotes only what RFC 4180 requires', (t) => {
  const table: [string, string][] = [
    ['', ''],
    ['plain', 'plain'],
    ['a,b', '"a,b"'],
    ['"', '""""'],
    ['a\r\nb', '"a\r\nb"'],
    ["it's", "it's"],
  ];
  for (const [input, out] of table) t.equal(csvField(input), out, JSON.stringify(input));
  t.end();
});

void t.test('header from column dis meta, else the name', (t) => {
  const g = new HGrid(
    HDict.of({ dis: 'ignored: grid meta is not written' }),
    [col('id'), col('dis', { dis: 'Name' }), col('curVal', { dis: 'Value, now', unit: 'kW' }), col('n', { dis: new HNumber(1) }), col('e', { dis: '' })],
    [HDict.of({ id: HRef.of('p1', 'Point 1'), dis: 'Point 1', curVal: new HNumber(3, 'kW'), n: MARKER })],
  );
  t.equal(writeCsv(g), 'id,Name,"Value, now",n,e\r\n@p1 Point 1,Point 1,3kW,\u2713,\r\n');
  t.end();
});

void t.test('rows, missing cells and line ends', (t) => {
  const g = new HGrid(HDict.EMPTY, [col('a'), col('b'), col('c')], [
    HDict.of({ a: new HNumber(1), c: 'x' }),
    HDict.of({}),
    HDict.of({ b: 'multi\nline' }),
  ]);
  const text = writeCsv(g);
  t.equal(text, 'a,b,c\r\n1,,x\r\n,,\r\n,"multi\nline",\r\n');
  t.ok(text.endsWith('\r\n'), 'last record ends with CRLF');
  t.end();
});

void t.test('empty grids', (t) => {
  t.equal(writeCsv(HGrid.empty()), 'empty\r\n');
  t.equal(writeCsv(new HGrid(HDict.EMPTY, [], [])), 'empty\r\n');
  t.equal(writeCsv(new HGrid(HDict.EMPTY, [col('a'), col('b')], [])), 'a,b\r\n');
  t.end();
});

void t.test('a one-column null row is a quoted empty field, not a blank line', (t) => {
  const g = new HGrid(HDict.EMPTY, [col('id')], [HDict.of({ id: HRef.of('a') }), HDict.of({}), HDict.of({ id: '' })]);
  t.equal(writeCsv(g), 'id\r\n@a\r\n""\r\n""\r\n');
  t.end();
});

void t.test('a Grid anywhere in a cell cannot be written', (t) => {
  const inner = HGrid.empty();
  for (const [name, v] of [
    ['grid', inner],
    ['grid in a list', Object.freeze([new HNumber(1), inner])],
    ['grid in a dict', HDict.of({ a: HDict.of({ g: inner }) })],
  ] as [string, HVal][]) {
    t.throws(() => writeCsv(oneCell(v)), { code: ErrorCodes.CANNOT_ENCODE }, name);
  }
  t.end();
});
