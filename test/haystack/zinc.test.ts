import t from 'tap';
import { ErrorCodes, HayloftError } from '../../src/lib/errors.js';
import { parseDateTime } from '../../src/haystack/datetime.js';
import { decodeVal, readJsonGrid, writeJsonGrid, writeJsonVal } from '../../src/haystack/json.js';
import {
  HBin,
  HCoord,
  HDate,
  type HDateTime,
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
  equals,
  kindOf,
} from '../../src/haystack/values.js';
import { readZinc, readZincVal, writeZinc, zincStr, zincVal } from '../../src/haystack/zinc.js';

const n = (v: number, unit: string | null = null): HNumber => new HNumber(v, unit);
const dict = (tags: Record<string, HVal>): HDict => HDict.of(tags);
const col = (name: string, meta: Record<string, HVal> = {}): { name: string; meta: HDict } => ({ name, meta: HDict.of(meta) });
const nested = new HGrid(HDict.of({ foo: MARKER }), [col('a'), col('b')], [dict({ a: n(1), b: 'x' }), dict({ b: n(2) })]);

/**
 * Values with their canonical Zinc text: the writer must produce exactly this text and the reader
 * must read it back to an equal value. Together the rows cover every kind (checked below).
 */
const canonical: [string, HVal, string][] = [
  ['null', null, 'N'],
  ['marker', MARKER, 'M'],
  ['remove', REMOVE, 'R'],
  ['NA', NA, 'NA'],
  ['true', true, 'T'],
  ['false', false, 'F'],
  ['zero', n(0), '0'],
  ['negative fraction', n(-1.5), '-1.5'],
  ['integer with unit', n(5, 'kW'), '5kW'],
  ['unit beyond ASCII', n(72.5, '°F'), '72.5°F'],
  ['unit with / and %', n(3, 'm/s'), '3m/s'],
  ['percent unit', n(45, '%'), '45%'],
  ['dollar unit', n(12, '$'), '12$'],
  // `_` between digits is a separator, so a unit may start with `_` only because a digit never follows.
  ['unit starting with _', n(5, '_x'), '5_x'],
  ['fraction, unit starting with _', n(-1.5, '_a_b'), '-1.5_a_b'],
  ['large exponent', n(1e21), '1e+21'],
  ['small exponent with unit', n(1.5e-7, 'm'), '1.5e-7m'],
  ['INF', n(Infinity), 'INF'],
  ['-INF', n(-Infinity), '-INF'],
  ['NaN', n(NaN), 'NaN'],
  ['empty Str', '', '""'],
  ['plain Str', 'hello world', '"hello world"'],
  ['Str quote and backslash', 'a"b\\c', '"a\\"b\\\\c"'],
  ['Str control escapes', 'l1\nl2\r\t\b\f', '"l1\\nl2\\r\\t\\b\\f"'],
  ['Str other control char', 'x\u0001y\u001f', '"x\\u0001y\\u001f"'],
  ['Str dollar stays plain', 'cost $5', '"cost $5"'],
  ['Str unicode stays raw', 'café ✓ 日本', '"café ✓ 日本"'],
  ['Ref', HRef.of('abc'), '@abc'],
  ['Ref with every id char', HRef.of('a-b.c:d~e_F9'), '@a-b.c:d~e_F9'],
  ['Ref with display', HRef.of('site1', 'Site "One"'), '@site1 "Site \\"One\\""'],
  ['Uri', HUri.of('http://example.com/a?b=c#d'), '`http://example.com/a?b=c#d`'],
  ['Uri with backtick, backslash and newline', HUri.of('a`b\\c\nd'), '`a\\`b\\\\c\\nd`'],
  ['Date', HDate.of(2024, 3, 10), '2024-03-10'],
  ['Time', HTime.of(9, 30), '09:30:00'],
  ['Time with ms', HTime.of(23, 59, 59, 5), '23:59:59.005'],
  ['DateTime New_York', parseDateTime('2024-03-10T03:00:00-04:00 New_York'), '2024-03-10T03:00:00-04:00 New_York'],
  ['DateTime UTC', parseDateTime('2024-01-01T00:00:00Z UTC'), '2024-01-01T00:00:00Z UTC'],
  ['DateTime ms', parseDateTime('2024-07-01T12:00:00.123+10:00 Sydney'), '2024-07-01T12:00:00.123+10:00 Sydney'],
  ['DateTime zone with + and -', parseDateTime('2024-01-01T00:00:00-03:00 GMT+3'), '2024-01-01T00:00:00-03:00 GMT+3'],
  ['DateTime zone with hyphens', parseDateTime('2024-01-01T00:00:00-05:00 Port-au-Prince'), '2024-01-01T00:00:00-05:00 Port-au-Prince'],
  ['DateTime Rel', parseDateTime('2024-01-01T00:00:00-00:00 Rel'), '2024-01-01T00:00:00-00:00 Rel'],
  ['Coord', HCoord.of(37.55, -77.45), 'C(37.55,-77.45)'],
  ['XStr', HXStr.of('Span', 'today'), 'Span("today")'],
  ['XStr with escapes', HXStr.of('Foo_2', 'a"b\nc'), 'Foo_2("a\\"b\\nc")'],
  ['Bin', new HBin('text/plain; charset=utf-8'), 'Bin("text/plain; charset=utf-8")'],
  ['empty List', Object.freeze([]), '[]'],
  ['List of mixed kinds', Object.freeze([n(1), 'a', null, MARKER, HRef.of('x', 'X')]), '[1,"a",N,M,@x "X"]'],
  ['nested List', Object.freeze([Object.freeze([n(1)]), Object.freeze([])]), '[[1],[]]'],
  ['empty Dict', HDict.EMPTY, '{}'],
  ['Dict', dict({ dis: 'Building', site: MARKER, area: n(35000, 'ft²') }), '{dis:"Building" site area:35000ft²}'],
  ['nested Dict', dict({ a: dict({ b: Object.freeze([n(1), dict({ c: REMOVE })]) }) }), '{a:{b:[1,{c:R}]}}'],
  ['nested Grid', nested, '<<\nver:"3.0" foo\na,b\n1,"x"\n,2\n>>'],
  ['List holding a Grid', Object.freeze([HGrid.empty()]), '[<<\nver:"3.0"\nempty\n>>]'],
];

/** A Ref's display is not part of `equals`, so compare it too; DateTimes also by zone name. */
function same(a: HVal, b: HVal): boolean {
  if (!equals(a, b)) return false;
  if (a instanceof HRef && b instanceof HRef) return a.dis === b.dis;
  if (Array.isArray(a) && Array.isArray(b)) return a.every((x, i) => same(x as HVal, b[i] as HVal));
  if (a instanceof HDict && b instanceof HDict) return a.names().every((k) => same(a.get(k) as HVal, b.get(k) as HVal));
  return true;
}

void t.test('the canonical table covers every kind', (t) => {
  const all: Kind[] = ['Null', 'Marker', 'Remove', 'NA', 'Bool', 'Number', 'Str', 'Ref', 'Date', 'Time', 'DateTime', 'Uri', 'Coord', 'XStr', 'Bin', 'List', 'Dict', 'Grid'];
  const covered = new Set(canonical.map(([, v]) => kindOf(v)));
  t.same([...covered].sort(), [...all].sort());
  t.end();
});

void t.test('zincVal writes each kind canonically', (t) => {
  for (const [name, v, text] of canonical) t.equal(zincVal(v), text, name);
  t.end();
});

void t.test('readZincVal reads each canonical text back', (t) => {
  for (const [name, v, text] of canonical) {
    const back = readZincVal(text);
    t.equal(kindOf(back), kindOf(v), `${name}: kind`);
    t.ok(same(back, v), `${name}: value`);
    t.equal(zincVal(back), text, `${name}: rewritten`);
  }
  t.end();
});

void t.test('lists read from Zinc are frozen', (t) => {
  t.ok(Object.isFrozen(readZincVal('[1,[2]]')));
  t.end();
});

// Other spellings the reader accepts, with the canonical text they read as.
const accepted: [string, string, string][] = [
  ['time without seconds', '12:30', '12:30:00'],
  ['DateTime without zone name', '2024-01-01T00:00:00Z', '2024-01-01T00:00:00Z UTC'],
  ['DateTime fraction beyond ms', '2024-01-01T00:00:00.123456Z UTC', '2024-01-01T00:00:00.123Z UTC'],
  ['\\$ escape', '"a\\$b"', '"a$b"'],
  ['\\u escape', '"caf\\u00e9 \\u2713"', '"café ✓"'],
  ['escaped / is not Zinc but \\\\ is', '"\\\\"', '"\\\\"'],
  ['Uri keeps an unknown escape verbatim', '`a\\:b`', '`a\\\\:b`'],
  ['Uri \\u escape', '`caf\\u00e9`', '`café`'],
  ['list with spaces', '[ 1 , 2 ]', '[1,2]'],
  ['list with trailing comma', '[1,2,]', '[1,2]'],
  ['list across lines', '[1,\n2]', '[1,2]'],
  ['dict with commas', '{a:1, b, c:"x"}', '{a:1 b c:"x"}'],
  ['dict null tag is absent', '{a:N b}', '{b}'],
  ['dict explicit marker', '{a:M}', '{a}'],
  ['negative number with unit', '-0.5kW', '-0.5kW'],
  ['exponent with capital E', '2E3', '2000'],
  ['digit separators', '1_000_000', '1000000'],
  ['digit separators in the fraction, then a unit', '1_0.2_5kW', '10.25kW'],
  ['a separator needs a digit after it, else it starts the unit', '5__x', '5__x'],
  ['hex integer with separators', '0xff_ff', '65535'],
  ['leading and trailing blanks', '  \n @abc  \n', '@abc'],
  ['byte-order mark', '\ufeff"x"', '"x"'],
  ['Coord with spaces', 'C( 1.5 , -2 )', 'C(1.5,-2)'],
  ['XStr spaced', 'Span( "today" )', 'Span("today")'],
  ['nested grid written on one line after <<', '<<ver:"3.0"\na\n1\n>>', '<<\nver:"3.0"\na\n1\n>>'],
  ['nested grid with 2.0 header', '<<\nver:"2.0"\na\n1\n>>', '<<\nver:"3.0"\na\n1\n>>'],
];

void t.test('readZincVal accepts the other spellings', (t) => {
  for (const [name, text, canon] of accepted) t.equal(zincVal(readZincVal(text)), canon, name);
  t.end();
});

void t.test('a Ref read alone (the fast path) reads as the tokenizer reads it', (t) => {
  // The fast path takes only the first two; the others go through the tokenizer.
  for (const text of ['@abc', '@a-b.c:d~e_f', ' @abc ', '@abc\n', '@abc "Dis"']) {
    t.equal(zincVal(readZincVal(text)), zincVal(readZincVal(`[${text.trim()}]`)).slice(1, -1), JSON.stringify(text));
  }
  t.same(readZincVal('@p:1'), new HRef('p:1'));
  t.equal((readZincVal('@abc "Dis"') as HRef).dis, 'Dis');
  for (const bad of ['@', '@a b', '@a,b', '@a@b']) t.throws(() => readZincVal(bad), { code: 'HL_BAD_ZINC' }, JSON.stringify(bad));
  t.end();
});

void t.test('INF and NaN lose their unit in Zinc, which has no syntax for it', (t) => {
  t.equal(zincVal(n(Infinity, 'kW')), 'INF');
  t.equal(zincVal(n(-Infinity, '°F')), '-INF');
  t.equal(zincVal(n(NaN, '%')), 'NaN');
  t.end();
});

void t.test('zincStr escapes only what it must', (t) => {
  t.equal(zincStr('plain'), '"plain"');
  t.equal(zincStr('"'), '"\\""');
  t.equal(zincStr('a\u007fb'), '"a\u007fb"');
  t.equal(zincStr('end\\'), '"end\\\\"');
  t.end();
});

void t.test('numbers read as JavaScript reads their text (the digits are not sliced out)', (t) => {
  const texts = [
    '0', '-0', '-0.0', '7', '0.1', '0.3', '-2.675', '123456789012345', '9007199254740993', '123456789012345678901',
    '3.14159265358979323846', '1.7976931348623157e308', '1e308', '1e309', '5e-324', '1e-400', '2.2250738585072014E-308',
    '1e22', '1e23', '1.5e-7', '4.35e+2', '0.000001', '1_234.567_8',
  ];
  for (const text of texts) {
    const v = readZincVal(text);
    t.ok(v instanceof HNumber && Object.is(v.val, Number(text.replaceAll('_', ''))), text);
  }
  t.end();
});

void t.test('DateTimes inside rows: zone names that prefix one another, offsets checked per row', (t) => {
  const text = 'ver:"2.0"\nts,v\n2024-01-01T00:00:00-01:00 GMT+1,1\n2024-01-01T00:00:00-10:00 GMT+10,2\n2024-01-01T00:00:00-01:00 GMT+1,3\n2024-01-01T00:00:00Z,4\n';
  const g = readZinc(text);
  t.same(
    g.rows.map((r) => (r.get('ts') as HDateTime).tz.name),
    ['GMT+1', 'GMT+10', 'GMT+1', 'UTC'],
  );
  t.equal(writeZinc(g), text.replace('00Z,4', '00Z UTC,4'));
  const [, message] = outcome(() => readZinc('ver:"3.0"\nts,v\n2024-03-10T03:00:00-05:00 New_York,1\n'));
  t.match(message, /^zinc: "2024-03-10T03:00:00-05:00 New_York" is not a DateTime: New_York is at -04:00 at that instant at line 3, column 1$/);
  t.end();
});

// ---------------------------------------------------------------------------------------------
// Grids

const siteGrid = new HGrid(
  HDict.of({ database: 'test', dis: 'Site Energy Summary' }),
  [col('siteName', { dis: 'Sites' }), col('val', { dis: 'Value', unit: 'kW' })],
  [dict({ siteName: 'Site 1', val: n(356.214, 'kW') }), dict({ siteName: 'Site 2', val: n(463.028, 'kW') }), dict({})],
);

const grids: [string, HGrid, string][] = [
  ['empty grid', HGrid.empty(), 'ver:"2.0"\nempty\n'],
  ['empty grid with meta', HGrid.empty(HDict.of({ err: MARKER, dis: 'boom' })), 'ver:"2.0" err dis:"boom"\nempty\n'],
  ['meta, column meta, nulls', siteGrid, 'ver:"2.0" database:"test" dis:"Site Energy Summary"\nsiteName dis:"Sites",val dis:"Value" unit:"kW"\n"Site 1",356.214kW\n"Site 2",463.028kW\n,\n'],
  ['one column, null row', new HGrid(HDict.EMPTY, [col('id')], [dict({ id: HRef.of('a') }), dict({}), dict({ id: HRef.of('b') })]), 'ver:"2.0"\nid\n@a\nN\n@b\n'],
  ['first cell null', new HGrid(HDict.EMPTY, [col('a'), col('b')], [dict({ b: n(1) })]), 'ver:"2.0"\na,b\n,1\n'],
  ['every 2.0 scalar keeps ver 2.0', new HGrid(HDict.EMPTY, [col('v')], [dict({ v: MARKER }), dict({ v: REMOVE }), dict({ v: HCoord.of(1, 2) }), dict({ v: new HBin('a/b') })]), 'ver:"2.0"\nv\nM\nR\nC(1,2)\nBin("a/b")\n'],
  ['NA needs 3.0', new HGrid(HDict.EMPTY, [col('v')], [dict({ v: NA })]), 'ver:"3.0"\nv\nNA\n'],
  ['XStr needs 3.0', new HGrid(HDict.EMPTY, [col('v')], [dict({ v: HXStr.of('Span', 'today') })]), 'ver:"3.0"\nv\nSpan("today")\n'],
  ['List in meta needs 3.0', HGrid.empty(HDict.of({ ids: Object.freeze([HRef.of('a')]) })), 'ver:"3.0" ids:[@a]\nempty\n'],
  ['Dict in column meta needs 3.0', new HGrid(HDict.EMPTY, [col('v', { x: HDict.EMPTY })], []), 'ver:"3.0"\nv x:{}\n'],
  ['nested grid', new HGrid(HDict.EMPTY, [col('g')], [dict({ g: nested })]), 'ver:"3.0"\ng\n<<\nver:"3.0" foo\na,b\n1,"x"\n,2\n>>\n'],
];

void t.test('writeZinc writes grids', (t) => {
  for (const [name, g, text] of grids) t.equal(writeZinc(g), text, name);
  t.end();
});

void t.test('readZinc reads written grids back', (t) => {
  for (const [name, g, text] of grids) {
    const back = readZinc(text);
    t.equal(equals(back, g), true, name);
    t.equal(writeZinc(back), text, `${name}: rewritten`);
  }
  t.end();
});

void t.test('writeZinc drops a meta ver and writes a column-less grid as the empty grid', (t) => {
  t.equal(writeZinc(HGrid.empty(HDict.of({ ver: '3.0', a: MARKER }))), 'ver:"2.0" a\nempty\n');
  t.equal(writeZinc(new HGrid(HDict.EMPTY, [], [])), 'ver:"2.0"\nempty\n');
  t.end();
});

void t.test('writeZinc refuses names Zinc cannot hold', (t) => {
  t.throws(() => writeZinc(new HGrid(HDict.EMPTY, [col('Bad name')], [])), { code: ErrorCodes.CANNOT_ENCODE });
  t.throws(() => writeZinc(HGrid.empty(HDict.of({ 'x-y': MARKER }))), { code: ErrorCodes.CANNOT_ENCODE });
  t.throws(() => zincVal(HDict.of({ '1a': n(1) })), { code: ErrorCodes.CANNOT_ENCODE });
  t.end();
});

void t.test('readZinc: the Zinc page example, 2.0 header, CRLF, blank lines', (t) => {
  const g = readZinc('ver:"2.0" database:"test" dis:"Site Energy Summary"\r\nsiteName dis:"Sites", val dis:"Value" unit:"kW"\r\n"Site 1", 356.214kW\r\n\r\n"Site 2", 463.028kW\r\n,\r\n\r\n');
  t.ok(equals(g, siteGrid));
  t.equal(g.meta.has('ver'), false, 'ver is a header, not meta');
  t.same(g.colNames(), ['siteName', 'val']);
  t.equal(g.cols[1]?.meta.str('unit'), 'kW');
  t.equal(g.rows.length, 3);
  t.end();
});

void t.test('readZinc: grids without columns read as the empty grid', (t) => {
  for (const text of ['ver:"3.0"', 'ver:"3.0"\n', 'ver:"3.0"\n\n\n', 'ver:"2.0" err dis:"x"\n']) {
    const g = readZinc(text);
    t.same(g.colNames(), ['empty'], JSON.stringify(text));
    t.equal(g.rows.length, 0);
  }
  t.equal(readZinc('ver:"2.0" err dis:"x"').meta.str('dis'), 'x');
  const inner = readZincVal('<<\nver:"3.0"\n>>');
  t.ok(inner instanceof HGrid && inner.colNames()[0] === 'empty');
  t.end();
});

void t.test('readZinc: every kind in cells, grid meta and column meta', (t) => {
  const cells = canonical.filter(([, v]) => v !== null).map(([, , text]) => text);
  // The reader takes `name:M`; the writer writes a Marker tag as its bare name.
  const items = (prefix: string, written: boolean): string =>
    cells.map((c, i) => (written && c === 'M' ? `${prefix}${i}` : `${prefix}${i}:${c}`)).join(' ');
  const text = (written: boolean): string => `ver:"3.0" ${items('m', written)}\nv ${items('c', written)}\n${cells.join('\n')}\n`;
  const g = readZinc(text(false));
  t.equal(g.rows.length, cells.length);
  t.equal(g.meta.size, cells.length);
  t.equal(g.cols[0]?.meta.size, cells.length);
  t.equal(writeZinc(g), text(true));
  t.end();
});

// ---------------------------------------------------------------------------------------------
// Bad input: each case names the code and where the message must point.

const badGrids: [string, string, string, number, number][] = [
  ['empty text', '', ErrorCodes.BAD_ZINC, 1, 1],
  ['no header', 'a,b\n1,2\n', ErrorCodes.BAD_ZINC, 1, 1],
  ['unquoted version', 'ver:3.0\na\n', ErrorCodes.BAD_ZINC, 1, 5],
  ['unsupported version', 'ver:"4.0"\na\n', ErrorCodes.BAD_ZINC, 1, 5],
  ['junk after meta', 'ver:"3.0" a b 5\nx\n', ErrorCodes.BAD_ZINC, 1, 15],
  ['duplicate meta tag', 'ver:"3.0" a b a\nx\n', ErrorCodes.BAD_ZINC, 1, 15],
  ['uppercase column name', 'ver:"3.0"\nA,b\n', ErrorCodes.BAD_ZINC, 2, 1],
  ['duplicate column', 'ver:"3.0"\na,b,a\n', ErrorCodes.BAD_ZINC, 2, 5],
  ['bad column separator', 'ver:"3.0"\na;b\n', ErrorCodes.BAD_ZINC, 2, 2],
  ['value as column name', 'ver:"3.0"\na,5\n', ErrorCodes.BAD_ZINC, 2, 3],
  ['value where columns belong', 'ver:"3.0"\n5\n', ErrorCodes.BAD_ZINC, 2, 1],
  ['value after the last cell', 'ver:"3.0"\na,b\n1,2 3\n', ErrorCodes.BAD_ZINC, 3, 5],
  ['rows without columns', 'ver:"3.0"\n\n1\n', ErrorCodes.BAD_ZINC, 3, 1],
  ['too many cells', 'ver:"3.0"\na,b\n1,2\n1,2,3\n', ErrorCodes.BAD_ZINC, 4, 4],
  ['too few cells', 'ver:"3.0"\na,b,c\n1,2\n', ErrorCodes.BAD_ZINC, 3, 4],
  ['two values in a cell', 'ver:"3.0"\na,b\n1 2,3\n', ErrorCodes.BAD_ZINC, 3, 3],
  ['unknown keyword', 'ver:"3.0"\na\nfoo\n', ErrorCodes.BAD_ZINC, 3, 1],
  ['true is not Zinc', 'ver:"3.0"\na\ntrue\n', ErrorCodes.BAD_ZINC, 3, 1],
  ['unterminated string', 'ver:"3.0"\na\n"abc\n', ErrorCodes.BAD_ZINC, 3, 1],
  ['bad escape', 'ver:"3.0"\na\n"ab\\qc"\n', ErrorCodes.BAD_ZINC, 3, 4],
  ['bad \\u escape', 'ver:"3.0"\na\n"\\u12g4"\n', ErrorCodes.BAD_ZINC, 3, 1],
  ['unterminated uri', 'ver:"3.0"\na\n`http://x\n', ErrorCodes.BAD_ZINC, 3, 1],
  ['empty ref', 'ver:"3.0"\na\n@\n', ErrorCodes.BAD_ZINC, 3, 1],
  ['bad date', 'ver:"3.0"\na\n2024-02-30\n', ErrorCodes.BAD_ZINC, 3, 1],
  ['bad time', 'ver:"3.0"\na\n25:00\n', ErrorCodes.BAD_ZINC, 3, 1],
  ['DateTime offset wrong for its zone', 'ver:"3.0"\na\n2024-03-10T03:00:00-05:00 New_York\n', ErrorCodes.BAD_ZINC, 3, 1],
  ['DateTime unknown zone', 'ver:"3.0"\na\n2024-03-10T03:00:00Z Nowhere_Land\n', ErrorCodes.BAD_ZINC, 3, 1],
  ['Coord out of range', 'ver:"3.0"\na\nC(95,0)\n', ErrorCodes.BAD_VALUE, 3, 1],
  ['Coord with unit', 'ver:"3.0"\na\nC(1kW,2)\n', ErrorCodes.BAD_ZINC, 3, 3],
  ['Coord missing comma', 'ver:"3.0"\na\nC(1 2)\n', ErrorCodes.BAD_ZINC, 3, 5],
  ['XStr without string', 'ver:"3.0"\na\nSpan(5)\n', ErrorCodes.BAD_ZINC, 3, 6],
  ['XStr not closed', 'ver:"3.0"\na\nSpan("x"\n', ErrorCodes.BAD_ZINC, 3, 9],
  ['lowercase XStr type', 'ver:"3.0"\na\nspan("x")\n', ErrorCodes.BAD_ZINC, 3, 1],
  ['unclosed list', 'ver:"3.0"\na\n[1,2\n', ErrorCodes.BAD_ZINC, 3, 1],
  ['list missing comma', 'ver:"3.0"\na\n[1 2]\n', ErrorCodes.BAD_ZINC, 3, 4],
  ['unclosed dict', 'ver:"3.0"\na\n{a:1\n', ErrorCodes.BAD_ZINC, 3, 1],
  ['dict value without name', 'ver:"3.0"\na\n{5}\n', ErrorCodes.BAD_ZINC, 3, 2],
  ['dict tag without value after colon', 'ver:"3.0"\na\n{a:}\n', ErrorCodes.BAD_ZINC, 3, 4],
  ['duplicate dict tag', 'ver:"3.0"\na\n{a:1 a:2}\n', ErrorCodes.BAD_ZINC, 3, 6],
  ['nested grid without >>', 'ver:"3.0"\na\n<<\nver:"3.0"\nb\n1\n', ErrorCodes.BAD_ZINC, 7, 1],
  ['nested grid without columns or >>', 'ver:"3.0"\na\n<<\nver:"3.0"\n', ErrorCodes.BAD_ZINC, 5, 1],
  ['>> at top level', 'ver:"3.0"\na\n>>\n', ErrorCodes.BAD_ZINC, 3, 1],
  ['meta tag with colon but no value', 'ver:"3.0" a:\nb\n', ErrorCodes.BAD_ZINC, 1, 13],
  // Limits on shape (src/haystack/limits.ts): HL_LIMIT, answered 400 naming the limit.
  ['hostile nesting', `ver:"3.0"\na\n${'['.repeat(10_000)}${']'.repeat(10_000)}\n`, ErrorCodes.LIMIT, 3, 33],
  ['nesting through dicts and grids', `ver:"3.0"\na\n${'{a:['.repeat(16)}<<\nver:"3.0"\nb\n1\n>>${']}'.repeat(16)}\n`, ErrorCodes.LIMIT, 3, 65],
  ['a Str over maxValueChars', `ver:"3.0"\na\n"${'x'.repeat(70_000)}"\n`, ErrorCodes.LIMIT, 3, 1],
  ['a name over maxValueChars', `ver:"3.0" ${'x'.repeat(70_000)}\na\n`, ErrorCodes.LIMIT, 1, 11],
  ['columns over maxCols', `ver:"3.0"\n${Array.from({ length: 1001 }, (_, i) => `c${i}`).join(',')}\n`, ErrorCodes.LIMIT, 2, 4891],
];

const badVals: [string, string, string, number, number][] = [
  ['nothing', '', ErrorCodes.BAD_ZINC, 1, 1],
  ['two values', '@abc x', ErrorCodes.BAD_ZINC, 1, 6],
  ['a comma list', '1,2', ErrorCodes.BAD_ZINC, 1, 2],
  ['a bare word', 'today', ErrorCodes.BAD_ZINC, 1, 1],
  ['a JSON-style number', 'n:5', ErrorCodes.BAD_ZINC, 1, 1],
  ['unterminated string', '"today', ErrorCodes.BAD_ZINC, 1, 1],
  ['a second line', '5\n6', ErrorCodes.BAD_ZINC, 2, 1],
];

/** [code, line, column] of what `f` throws (0, 0 when the message names no place), and the message. */
function outcome(f: () => unknown): [[string, number, number] | undefined, string] {
  try {
    f();
  } catch (e) {
    if (!(e instanceof HayloftError)) return [undefined, String(e)];
    const m = /at line (\d+), column (\d+)/.exec(e.message);
    return [m === null ? [e.code, 0, 0] : [e.code, Number(m[1]), Number(m[2])], e.message];
  }
  return [undefined, 'no error'];
}

void t.test('readZinc rejects bad grids, saying where', (t) => {
  for (const [name, text, code, line, column] of badGrids) {
    const [got, message] = outcome(() => readZinc(text));
    t.same(got, [code, line, column], `${name}: ${message}`);
  }
  t.end();
});

void t.test('readZincVal rejects bad values, saying where', (t) => {
  for (const [name, text, code, line, column] of badVals) {
    const [got, message] = outcome(() => readZincVal(text));
    t.same(got, [code, line, column], `${name}: ${message}`);
  }
  t.end();
});

// ---------------------------------------------------------------------------------------------
// Round trips through JSON: Zinc -> value -> JSON -> value -> Zinc gives the same text.

void t.test('every canonical value survives Zinc -> JSON -> Zinc', (t) => {
  for (const [name, , text] of canonical) {
    const json = writeJsonVal(readZincVal(text));
    const back = decodeVal(JSON.parse(json));
    t.equal(zincVal(back), text, `${name} via ${json}`);
  }
  t.end();
});

void t.test('grids survive Zinc -> JSON -> Zinc', (t) => {
  const cells = canonical.filter(([, v]) => v !== null).map(([, , text]) => text);
  const text = `ver:"3.0" m:[${cells.join(',')}]\nv dis:"Value",w\n${cells.map((c, i) => `${c},${i}`).join('\n')}\n`;
  const g = readZinc(text);
  const back = readJsonGrid(writeJsonGrid(g));
  t.equal(writeZinc(back), writeZinc(g));
  t.equal(writeZinc(back), text);
  for (const [name, , z] of grids) t.equal(writeZinc(readJsonGrid(writeJsonGrid(readZinc(z)))), z, name);
  t.end();
});

t.test('zero before a unit starting with x is not read as hex', async (t) => {
  for (const n of [new HNumber(0, 'xyz'), new HNumber(0, 'x'), new HNumber(5, 'xyz'), new HNumber(0, 'kW')]) {
    t.ok(equals(readZincVal(zincVal(n)), n), `${zincVal(n)} reads back`);
  }
});
