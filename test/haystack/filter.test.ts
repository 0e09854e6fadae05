import t from 'tap';
import { ErrorCodes } from '../../src/lib/errors.js';
import { parseDateTime } from '../../src/haystack/datetime.js';
import {
  type FilterNode,
  MAX_FILTER_DEPTH,
  andNode,
  cmpNode,
  compileFilter,
  filterEquals,
  filterHints,
  filterPath,
  filterToString,
  hasNode,
  matchNode,
  matches,
  missingNode,
  orNode,
  parseFilter,
} from '../../src/haystack/filter.js';
import { HDate, HDict, HNumber, HRef, HTime, HUri, MARKER, NA } from '../../src/haystack/values.js';

const BAD_FILTER = 'HL_BAD_FILTER';

type Tap = Parameters<Parameters<typeof t.test>[0]>[0];

/** A synchronous subtest: nothing here awaits, so the body runs and the subtest ends. */
function test(parent: Tap | typeof t, name: string, body: (t: Tap) => void): void {
  void parent.test(name, (sub) => {
    body(sub);
    sub.end();
  });
}

/** Print, re-parse, print again: the AST and the text must both be stable. */
function roundTrip(t: Tap, ast: FilterNode, text: string): void {
  const printed = filterToString(ast);
  t.equal(printed, text, 'canonical text');
  const again = parseFilter(printed);
  t.ok(filterEquals(again, ast), `re-parses to an equal AST: ${printed}`);
  t.equal(filterToString(again), printed, 'printing is stable');
}

test(t, 'parse, print and re-parse every construct', (t) => {
  // [input, canonical text]
  const cases: [string, string][] = [
    ['point', 'point'],
    ['  point  ', 'point'],
    ['not point', 'not point'],
    ['siteRef->geoCity', 'siteRef->geoCity'],
    ['not equipRef->siteRef->site', 'not equipRef->siteRef->site'],
    ['a_1B', 'a_1B'],
    ['curVal==72.5°F', 'curVal == 72.5°F'],
    ['curVal != 5', 'curVal != 5'],
    ['curVal<-3.25', 'curVal < -3.25'],
    ['curVal <= 1e3kW', 'curVal <= 1000kW'],
    ['curVal > 0.5%', 'curVal > 0.5%'],
    ['area >= 500ft²', 'area >= 500ft²'],
    ['speed == 3m/s', 'speed == 3m/s'],
    ['n == 1_000kW', 'n == 1000kW'],
    ['n == 5_x', 'n == 5_x'],
    ['big == 1e21', 'big == 1e+21'],
    ['x == INF', 'x == INF'],
    ['x == -INF', 'x == -INF'],
    ['x == NaN', 'x == NaN'],
    ['enabled == true', 'enabled == true'],
    ['enabled != false', 'enabled != false'],
    ['dis == "AHU-1"', 'dis == "AHU-1"'],
    ['dis == "a\\"b\\\\c\\nd\\t\\u00e9\\$"', 'dis == "a\\"b\\\\c\\nd\\té$"'],
    ['dis == ""', 'dis == ""'],
    ['equipRef == @e1', 'equipRef == @e1'],
    ['equipRef == @e1 "AHU-1"', 'equipRef == @e1'],
    ['siteRef == @a.b:c-d~e_f', 'siteRef == @a.b:c-d~e_f'],
    ['uri == `http://x/a?b=c`', 'uri == `http://x/a?b=c`'],
    ['uri == `a\\`b\\\\c`', 'uri == `a\\`b\\\\c`'],
    ['installed == 2020-05-01', 'installed == 2020-05-01'],
    ['start < 08:00', 'start < 08:00:00'],
    ['start < 08:00:00.5', 'start < 08:00:00.500'],
    ['ts > 2024-03-10T03:00:00-04:00 New_York', 'ts > 2024-03-10T03:00:00-04:00 New_York'],
    ['ts > 2024-03-10T07:00:00Z UTC', 'ts > 2024-03-10T07:00:00Z UTC'],
    ['ts > 2024-03-10T07:00:00Z', 'ts > 2024-03-10T07:00:00Z UTC'],
    ['(ts > 2024-03-10T07:00:00Z UTC)', 'ts > 2024-03-10T07:00:00Z UTC'],
    ['ts > 2024-03-10T07:00:00Z and x', 'ts > 2024-03-10T07:00:00Z UTC and x'],
    ['dis =~ /^AHU-\\d+$/', 'dis =~ /^AHU-\\d+$/'],
    ['dis=~/a\\/b/', 'dis =~ /a\\/b/'],
    ['dis =~ /a\\\\/', 'dis =~ /a\\\\/'],
    ['dis =~ /[a-z] (x|y)/', 'dis =~ /[a-z] (x|y)/'],
    ['dis =~ //', 'dis =~ //'],
    ['a and b', 'a and b'],
    ['a and b and c', 'a and b and c'],
    ['a or b or c', 'a or b or c'],
    ['a or b and c', 'a or b and c'],
    ['(a or b) and c', '(a or b) and c'],
    ['a and (b or c)', 'a and (b or c)'],
    ['(a and b) or c', 'a and b or c'],
    ['(a and b) and c', '(a and b) and c'],
    ['a or (b or c)', 'a or (b or c)'],
    ['((a))', 'a'],
    ['not a and not b->c or d == 1', 'not a and not b->c or d == 1'],
    ['point\nand\this', 'point and his'],
    ['equip and siteRef->geoCity == "Chicago"', 'equip and siteRef->geoCity == "Chicago"'],
  ];
  for (const [input, canonical] of cases) {
    test(t, input, (t) => {
      const ast = parseFilter(input);
      roundTrip(t, ast, canonical);
    });
  }
});

test(t, 'AST shapes', (t) => {
  // `and` binds tighter than `or`.
  t.ok(filterEquals(parseFilter('a or b and c'), orNode(hasNode('a'), andNode(hasNode('b'), hasNode('c')))));
  t.ok(filterEquals(parseFilter('a and b or c'), orNode(andNode(hasNode('a'), hasNode('b')), hasNode('c'))));
  t.ok(filterEquals(parseFilter('a and b or c and d'), orNode(andNode(hasNode('a'), hasNode('b')), andNode(hasNode('c'), hasNode('d')))));
  t.notOk(filterEquals(parseFilter('a or b and c'), andNode(orNode(hasNode('a'), hasNode('b')), hasNode('c'))));
  // Chains are n-ary; parentheses keep their nesting.
  t.ok(filterEquals(parseFilter('a and b and c'), andNode(hasNode('a'), hasNode('b'), hasNode('c'))));
  t.ok(filterEquals(parseFilter('(a and b) and c'), andNode(andNode(hasNode('a'), hasNode('b')), hasNode('c'))));
  t.notOk(filterEquals(parseFilter('(a and b) and c'), parseFilter('a and b and c')));
  t.ok(filterEquals(parseFilter('not a->b'), missingNode(['a', 'b'])));
  t.ok(filterEquals(parseFilter('a->b == 2kW'), cmpNode('a->b', '==', new HNumber(2, 'kW'))));
  t.ok(filterEquals(parseFilter('a =~ /x/'), matchNode('a', 'x')));

  const cmp = parseFilter('ts >= 2024-03-10T03:00:00-04:00 New_York');
  t.equal(cmp.kind, 'cmp');
  if (cmp.kind === 'cmp') {
    t.same(cmp.path, ['ts']);
    t.equal(cmp.op, '>=');
    t.ok(cmp.val instanceof Object && filterEquals(cmp, cmpNode('ts', '>=', parseDateTime('2024-03-10T03:00:00-04:00 New_York'))));
  }
  const m = parseFilter('dis =~ /a\\/b/');
  t.equal(m.kind === 'match' ? m.pattern : undefined, 'a/b', 'the pattern is the text between the slashes, \\/ unescaped');
  t.ok(m.kind === 'match' && m.regex.test('xa/by'), 'the compiled regex matches unanchored');
});

test(t, 'filterEquals tells ASTs apart', (t) => {
  const pairs: [string, string][] = [
    ['a == 1', 'a == 1kW'],
    ['a == 1', 'a != 1'],
    ['a == 1', 'b == 1'],
    ['a->b', 'a'],
    ['a', 'not a'],
    ['a == "1"', 'a == 1'],
    ['a =~ /x/', 'a =~ /y/'],
    ['a and b', 'a or b'],
    ['a and b', 'a and b and c'],
    ['ts == 2024-03-10T07:00:00Z UTC', 'ts == 2024-03-10T03:00:00-04:00 New_York'],
  ];
  for (const [x, y] of pairs) t.notOk(filterEquals(parseFilter(x), parseFilter(y)), `${x} vs ${y}`);
  t.ok(filterEquals(parseFilter('r == @x "one"'), parseFilter('r == @x "two"')), 'Ref display is not identity');
});

test(t, 'hand-built ASTs print and re-parse', (t) => {
  const a = hasNode('a');
  const b = hasNode('b');
  const c = hasNode('c');
  const cases: [FilterNode, string][] = [
    [andNode(a, andNode(b, c)), 'a and (b and c)'],
    [orNode(a, orNode(b, c)), 'a or (b or c)'],
    [orNode(andNode(a, b), c), 'a and b or c'],
    [andNode(orNode(a, b), c), '(a or b) and c'],
    [andNode(orNode(a, b), orNode(b, c)), '(a or b) and (b or c)'],
    [orNode(andNode(a, orNode(b, c)), missingNode('d')), 'a and (b or c) or not d'],
    [cmpNode('dis', '==', 'tab\there "q" back\\slash \u0001 nul\u0000 é 😀'), 'dis == "tab\\there \\"q\\" back\\\\slash \\u0001 nul\\u0000 é 😀"'],
    [cmpNode('dis', '<', 'cr\rlf\nbs\bff\f'), 'dis < "cr\\rlf\\nbs\\bff\\f"'],
    [cmpNode('u', '==', HUri.of('http://x/a\\:b`c d')), 'u == `http://x/a\\\\:b\\`c d`'],
    // Literals print as the Zinc writer writes them: DEL stays raw, \b and \f are short escapes.
    [cmpNode('dis', '==', 'del\u007f'), 'dis == "del\u007f"'],
    [cmpNode('u', '==', HUri.of('a\bb\fc\u007f')), 'u == `a\\bb\\fc\u007f`'],
    [cmpNode('n', '==', new HNumber(5, '_x')), 'n == 5_x'],
    [cmpNode('n', '>', new HNumber(-0.5, '%')), 'n > -0.5%'],
    [cmpNode('n', '>', new HNumber(1e-7, 'm/s')), 'n > 1e-7m/s'],
    [cmpNode('n', '<', new HNumber(123456789012, '$')), 'n < 123456789012$'],
    [cmpNode('n', '!=', new HNumber(NaN)), 'n != NaN'],
    [cmpNode('n', '>', new HNumber(-Infinity)), 'n > -INF'],
    [cmpNode('r', '==', HRef.of('a.b:c-d~e', 'Dis')), 'r == @a.b:c-d~e'],
    [cmpNode('d', '>=', HDate.of(999, 1, 2)), 'd >= 0999-01-02'],
    [cmpNode('t', '<=', HTime.of(23, 59, 59, 7)), 't <= 23:59:59.007'],
    [cmpNode('b', '==', false), 'b == false'],
    [cmpNode(['a', 'b', 'c'], '==', 'x'), 'a->b->c == "x"'],
    [matchNode('dis', 'a/b'), 'dis =~ /a\\/b/'],
    // `\/` and a raw line break have one canonical form: the one the tokenizer yields.
    [matchNode('dis', 'a\\/b\nc'), 'dis =~ /a\\/b\\nc/'],
    [matchNode('dis', '\\d+\\.\\\\'), 'dis =~ /\\d+\\.\\\\/'],
  ];
  for (const [ast, text] of cases) {
    test(t, text, (t) => {
      roundTrip(t, ast, text);
    });
  }
});

test(t, 'constructors reject what has no filter text', (t) => {
  t.throws(() => filterPath('Point'), { code: BAD_FILTER });
  t.throws(() => filterPath('a->'), { code: BAD_FILTER });
  t.throws(() => filterPath([]), { code: BAD_FILTER });
  t.throws(() => hasNode('not'), { code: BAD_FILTER });
  t.throws(() => andNode(hasNode('a')), { code: BAD_FILTER });
  t.throws(() => orNode(), { code: BAD_FILTER });
  t.throws(() => cmpNode('a', '==', new HNumber(Infinity, 'kW')), { code: BAD_FILTER });
  t.throws(() => cmpNode('a', '==', MARKER as never), { code: BAD_FILTER });
  t.throws(() => cmpNode('a', '=' as never, 1 as never), { code: BAD_FILTER });
  t.throws(() => matchNode('a', '('), { code: BAD_FILTER, message: /^filter: invalid regex \/\(\//u });
  t.same(filterPath('a->b->c'), ['a', 'b', 'c']);
});

test(t, 'parse errors say what and where', (t) => {
  // [filter, column, message fragment]
  const cases: [string, number, RegExp][] = [
    ['', 1, /empty/],
    ['   ', 4, /empty/],
    ['a ==', 5, /expected a value/],
    ['a == b', 6, /expected a value \(found "b"\)/],
    ['a == tru', 6, /expected a value/],
    ['a == T', 6, /expected a value/],
    ['a == M', 6, /expected a value/],
    ['a == 5 kW', 8, /found "kW"/],
    ['point and', 10, /expected a tag name, "not" or "\(" \(found the end of the filter\)/],
    ['point and and his', 11, /expected a tag name/],
    ['a and or b', 7, /expected a tag name/],
    ['(a', 3, /expected "and", "or" or "\)"/],
    ['(a or b', 8, /expected "and", "or" or "\)"/],
    ['((a) or b', 10, /"\)"/],
    ['a)', 2, /expected "and", "or" or the end of the filter \(found "\)"\)/],
    ['a b', 3, /the end of the filter/],
    ['a = 1', 3, /found "="/],
    ['a == 1 2', 8, /the end of the filter/],
    ['()', 2, /expected a tag name/],
    ['not', 4, /expected a tag name/],
    ['not (a)', 5, /expected a tag name/],
    ['not not a', 5, /expected a tag name/],
    ['true', 1, /expected a tag name/],
    ['a and false', 7, /expected a tag name/],
    ['Point', 1, /expected a tag name/],
    ['_a', 1, /expected a tag name/],
    ['@x', 1, /expected a tag name/],
    ['"str"', 1, /expected a tag name/],
    ['5', 1, /expected a tag name/],
    ['a->', 4, /expected a tag name/],
    ['site and equipRef->', 20, /expected a tag name/],
    ['a->and', 4, /expected a tag name/],
    ['a->B', 4, /expected a tag name/],
    ['a =~ /(/', 6, /invalid regex \/\(\//],
    ['dis =~ /[/ and site', 8, /invalid regex/],
    ['dis =~ /a/ and x =~ /b{2,1}/', 21, /invalid regex/],
    // Outside what the linear-time engine runs: the message names the feature.
    ['dis =~ /(a)\\1/', 8, /invalid regex \/\(a\)\\1\/ \(backreferences .* are not supported; filters take linear-time RE2 patterns, see docs\/filters.md\)/],
    ['dis =~ /(?<w>a)\\k<w>/', 8, /backreferences/],
    ['dis =~ /a(?=b)/', 8, /lookahead .* is not supported/],
    ['dis =~ /a(?!b)/', 8, /lookahead .* is not supported/],
    ['dis =~ /(?<=(a))b/', 8, /lookbehind may not hold a capturing group/],
    ['dis =~ /a{1001}/', 8, /repeat count is above 1000/],
    ['dis =~ /[a-z]{1000}[a-z]{1000}[a-z]{1000}[a-z]{1000}[a-z]{1000}[a-z]{1000}/', 8, /compiles to \d+ instructions, above the limit of 5000/],
    ['x =~ "a"', 6, /expected a \/regex\/ after "=~"/],
    ['x =~', 5, /expected a \/regex\//],
    ['x =~ /abc', 6, /unterminated regex/],
    ['a == "x', 6, /unterminated string/],
    ['a == "\\q"', 7, /bad escape/],
    ['a == 2024-13-01', 6, /not a Date/],
    ['a == 25:00', 6, /not a Time/],
    ['a == `http://x', 6, /unterminated Uri/],
    ['a == @', 6, /Ref id/],
    ['#', 1, /expected a tag name, "not" or "\(" \(found "#"\)/],
    ['~', 1, /unexpected character/],
    ['a and ~', 7, /unexpected character/],
  ];
  for (const [text, col, fragment] of cases) {
    test(t, JSON.stringify(text), (t) => {
      t.throws(() => parseFilter(text), { code: BAD_FILTER, message: fragment });
      t.throws(() => parseFilter(text), { message: new RegExp(`^filter: .* at column ${col}$`, 'u') });
    });
  }
});

test(t, 'nesting depth is bounded', (t) => {
  const ok = '('.repeat(MAX_FILTER_DEPTH) + 'a' + ')'.repeat(MAX_FILTER_DEPTH);
  t.ok(filterEquals(parseFilter(ok), hasNode('a')));
  const deep = '('.repeat(MAX_FILTER_DEPTH + 1) + 'a' + ')'.repeat(MAX_FILTER_DEPTH + 1);
  t.throws(() => parseFilter(deep), { code: BAD_FILTER, message: new RegExp(`at column ${MAX_FILTER_DEPTH + 1}$`, 'u') });
  t.throws(() => parseFilter('('.repeat(4_000)), { code: BAD_FILTER });
  t.throws(() => parseFilter('('.repeat(100_000)), { code: ErrorCodes.LIMIT, message: 'filter: a text of 100,000 chars is above the limit of 4,096 (maxFilterChars)' });
});

// ---------------------------------------------------------------------------------------------
// Evaluation

const dt = (s: string) => parseDateTime(s);

const site = HDict.of({
  id: HRef.of('s1', 'HQ'),
  site: MARKER,
  dis: 'HQ',
  area: new HNumber(500, 'ft²'),
  geoCity: 'Chicago',
});
const equip = HDict.of({
  id: HRef.of('e1', 'AHU-1'),
  equip: MARKER,
  dis: 'AHU-1',
  siteRef: HRef.of('s1', 'HQ'),
});
const p1 = HDict.of({
  id: HRef.of('p1'),
  point: MARKER,
  his: MARKER,
  dis: 'Zone Temp',
  equipRef: HRef.of('e1', 'AHU-1'),
  siteRef: HRef.of('s1'),
  kind: 'Number',
  curVal: new HNumber(72.5, '°F'),
  count: new HNumber(3),
  enabled: true,
  installed: HDate.of(2020, 5, 1),
  start: HTime.of(8, 0),
  lastWrite: dt('2024-03-10T03:00:00-04:00 New_York'),
  uri: HUri.of('http://x/p1'),
  navName: 'Temp/Zone',
  name: 'Zeta',
  glyph: '\uffff',
  nan: new HNumber(NaN),
  na: NA,
  tags: ['a', 'b'],
});
const p2 = HDict.of({
  id: HRef.of('p2'),
  point: MARKER,
  equipRef: HRef.of('gone'),
  curVal: new HNumber(20, '°C'),
  curStatus: 'ok',
  name: 'alpha',
  glyph: '😀',
  enabled: false,
});
// siteRef is a Str here: a path cannot go through it.
const odd = HDict.of({ id: HRef.of('odd'), siteRef: 's1', equipRef: HRef.of('p2') });

const byId = new Map<string, HDict>([
  ['s1', site],
  ['e1', equip],
  ['p1', p1],
  ['p2', p2],
]);
const resolve = (ref: HRef): HDict | undefined => byId.get(ref.id);
const dicts = { site, equip, p1, p2, odd };
type Name = keyof typeof dicts;

// [filter, dict, expected]
const truth: [string, Name, boolean][] = [
  // has / missing
  ['point', 'p1', true],
  ['point', 'site', false],
  ['not point', 'site', true],
  ['not point', 'p1', false],
  ['na', 'p1', true],
  ['tags', 'p1', true],
  // Numbers and units
  ['curVal == 72.5°F', 'p1', true],
  ['curVal == 72.5', 'p1', false],
  ['curVal == 72.5°C', 'p1', false],
  ['curVal != 72.5°C', 'p1', false],
  ['curVal != 70°F', 'p1', true],
  ['curVal != 72.5°F', 'p1', false],
  ['curVal > 70°F', 'p1', true],
  ['curVal > 70', 'p1', false],
  ['curVal < 70°F', 'p1', false],
  ['curVal < 100°C', 'p1', false],
  ['curVal >= 72.5°F', 'p1', true],
  ['curVal <= 72.5°F', 'p1', true],
  ['curVal < 72.5°F', 'p1', false],
  ['curVal < 25°C', 'p2', true],
  ['count == 3', 'p1', true],
  ['count == 3.0', 'p1', true],
  ['count == 3kW', 'p1', false],
  ['count > -INF', 'p1', true],
  ['count < INF', 'p1', true],
  ['nan == NaN', 'p1', false],
  ['nan != NaN', 'p1', true],
  ['nan < 1', 'p1', false],
  // different kinds compare false, `!=` included
  ['kind == 5', 'p1', false],
  ['kind != 5', 'p1', false],
  ['curVal == "72.5°F"', 'p1', false],
  ['curVal != "x"', 'p1', false],
  ['enabled == "true"', 'p1', false],
  ['installed == 2020-05-01T00:00:00Z UTC', 'p1', false],
  ['uri == "http://x/p1"', 'p1', false],
  ['equipRef == "e1"', 'p1', false],
  ['point == true', 'p1', false],
  ['tags == "a"', 'p1', false],
  // `!=` on a missing tag is false
  ['curStatus != "fault"', 'p1', false],
  ['curStatus != "fault"', 'p2', true],
  ['curStatus == "ok"', 'p2', true],
  ['curStatus == "ok"', 'p1', false],
  ['not curStatus', 'p1', true],
  // Bool
  ['enabled == true', 'p1', true],
  ['enabled == true', 'p2', false],
  ['enabled != false', 'p1', true],
  ['enabled > false', 'p1', true],
  ['enabled < true', 'p2', true],
  // Str by UTF-16 code units, not locale or code points
  ['name < "alpha"', 'p1', true],
  ['name > "Zeta"', 'p2', true],
  ['name == "zeta"', 'p1', false],
  ['glyph > "😀"', 'p1', true],
  ['glyph < "\uffff"', 'p2', true],
  ['dis == "Zone Temp"', 'p1', true],
  ['dis >= "Zone"', 'p1', true],
  // Ref by id only
  ['equipRef == @e1', 'p1', true],
  ['equipRef == @e1 "Another name"', 'p1', true],
  ['equipRef == @e2', 'p1', false],
  ['equipRef != @e1', 'p1', false],
  ['equipRef != @e1', 'p2', true],
  ['equipRef < @f', 'p1', true],
  // Date, Time, DateTime
  ['installed == 2020-05-01', 'p1', true],
  ['installed < 2020-05-02', 'p1', true],
  ['installed > 2019-12-31', 'p1', true],
  ['installed > 2020-05-01', 'p1', false],
  ['installed < 2020-10-01', 'p1', true],
  ['start == 08:00', 'p1', true],
  ['start < 08:00:00.001', 'p1', true],
  ['start > 07:59:59.999', 'p1', true],
  ['start > 10:00', 'p1', false],
  ['lastWrite == 2024-03-10T07:00:00Z UTC', 'p1', true],
  ['lastWrite == 2024-03-10T03:00:00-04:00 New_York', 'p1', true],
  ['lastWrite == 2024-03-10T08:00:00+01:00 Paris', 'p1', true],
  ['lastWrite != 2024-03-10T07:00:00Z UTC', 'p1', false],
  ['lastWrite < 2024-03-10T07:00:00.001Z UTC', 'p1', true],
  ['lastWrite > 2024-03-10T06:59:59Z UTC', 'p1', true],
  ['lastWrite > 2024-03-10T07:00:00Z UTC', 'p1', false],
  ['lastWrite == 2024-03-10', 'p1', false],
  // Uri
  ['uri == `http://x/p1`', 'p1', true],
  ['uri < `http://y`', 'p1', true],
  // paths through Refs
  ['equipRef->equip', 'p1', true],
  ['equipRef->siteRef->geoCity == "Chicago"', 'p1', true],
  ['equipRef->siteRef->area > 100ft²', 'p1', true],
  ['equipRef->siteRef->area > 100', 'p1', false],
  ['equipRef->siteRef->site', 'p1', true],
  ['equipRef->siteRef->nothing', 'p1', false],
  ['not equipRef->siteRef->nothing', 'p1', true],
  ['equipRef->equip', 'p2', false],
  ['not equipRef->equip', 'p2', true],
  ['equipRef->dis != "x"', 'p2', false],
  ['equipRef->dis =~ /AHU/', 'p1', true],
  ['equipRef->dis =~ /AHU/', 'p2', false],
  ['siteRef->site', 'odd', false],
  ['not siteRef->site', 'odd', true],
  ['siteRef->dis', 'site', false],
  ['kind->x', 'p1', false],
  ['equipRef->equipRef->equip', 'odd', false],
  ['equipRef->point', 'odd', true],
  ['equipRef->curStatus == "ok"', 'odd', true],
  // regex: Str only, JavaScript syntax within RE2's (docs/filters.md), no flags, unanchored
  ['dis =~ /^AHU-\\d+$/', 'equip', true],
  ['dis =~ /^AHU-\\d+$/', 'site', false],
  ['navName =~ /Temp\\/Zone/', 'p1', true],
  ['navName =~ /^Temp/', 'p1', true],
  ['kind =~ /umb/', 'p1', true],
  ['kind =~ /^num/', 'p1', false],
  ['curVal =~ /72/', 'p1', false],
  ['uri =~ /http/', 'p1', false],
  ['equipRef =~ /e1/', 'p1', false],
  ['missingTag =~ /.*/', 'p1', false],
  ['dis =~ //', 'p1', true],
  ['dis =~ /(?<w>Zone) (?:\\d+)?/', 'p1', true],
  ['dis =~ /(?<=Temp)Zone|Zone(?<!x)/', 'p1', true],
  ['dis =~ /\\u0041HU/', 'equip', true],
  // and / or / precedence
  ['point and his', 'p1', true],
  ['point and his', 'p2', false],
  ['site or point and his', 'site', true],
  ['site or point and his', 'p2', false],
  ['(site or point) and his', 'site', false],
  ['(site or point) and his', 'p1', true],
  ['point and his or site', 'site', true],
  ['point and (his or site)', 'site', false],
  ['not his and point', 'p2', true],
  ['equip or site or point', 'p2', true],
  ['equip or site or his', 'p2', false],
  ['point and curVal > 0°C and curStatus == "ok"', 'p2', true],
  ['point and curVal > 0°C and curStatus == "ok"', 'p1', false],
];

test(t, 'evaluation truth table', (t) => {
  for (const [text, name, expected] of truth) {
    const f = compileFilter(parseFilter(text));
    t.equal(f(dicts[name], resolve), expected, `${text} on ${name}`);
  }
});

test(t, 'the printed form evaluates the same', (t) => {
  for (const [text, name, expected] of truth) {
    const reparsed = parseFilter(filterToString(parseFilter(text)));
    t.equal(matches(reparsed, dicts[name], resolve), expected, `${filterToString(reparsed)} on ${name}`);
  }
});

test(t, 'without a resolver every -> path is missing', (t) => {
  t.equal(matches(parseFilter('equipRef->equip'), p1), false);
  t.equal(matches(parseFilter('not equipRef->equip'), p1), true);
  t.equal(matches(parseFilter('equipRef'), p1), true);
});

test(t, 'the resolver is only asked about Refs on the path', (t) => {
  const asked: string[] = [];
  const spy = (r: HRef): HDict | undefined => {
    asked.push(r.id);
    return resolve(r);
  };
  t.equal(matches(parseFilter('equipRef->siteRef->geoCity == "Chicago"'), p1, spy), true);
  t.same(asked, ['e1', 's1']);
  asked.length = 0;
  t.equal(matches(parseFilter('siteRef->site'), odd, spy), false);
  t.same(asked, [], 'a Str is not followed');
});

test(t, 'compileFilter compiles a node once', (t) => {
  const ast = parseFilter('point and his');
  t.equal(compileFilter(ast), compileFilter(ast));
  t.not(compileFilter(ast), compileFilter(parseFilter('point and his')));
});

// The issue's case: V8's backtracking engine took more than 10 s on this and held the event
// loop meanwhile. Linear time cannot be asserted by a clock here (bench/ measures speed); what
// is asserted is that these catastrophic patterns give the right answers on texts that would
// never finish under backtracking (2^49 and more paths), so a return at all is the evidence.
test(t, 'ReDoS patterns answer on texts that backtracking never finishes', (t) => {
  const cases: [string, string, boolean][] = [
    ['point and dis =~ /(a+)+$/', 'a'.repeat(48) + '!', false],
    ['point and dis =~ /(a+)+$/', '!' + 'a'.repeat(48), true],
    ['point and dis =~ /^(a+)+$/', 'a'.repeat(48) + '!', false],
    ['point and dis =~ /^(a|aa)+$/', 'a'.repeat(60) + '!', false],
    ['point and dis =~ /^(\\w+\\s?)*$/', 'word '.repeat(20) + '!', false],
    ['point and dis =~ /^(.*a){30}$/', 'a'.repeat(40) + '!', false],
    ['point and dis =~ /(x+x+)+y/', 'x'.repeat(5000), false],
  ];
  for (const [filter, dis, want] of cases) {
    t.equal(matches(parseFilter(filter), HDict.of({ point: MARKER, dis })), want, filter);
  }
});

test(t, 'regex keeps no state between dicts', (t) => {
  const f = compileFilter(parseFilter('dis =~ /a/'));
  const d = HDict.of({ dis: 'a' });
  for (let i = 0; i < 3; i++) t.equal(f(d), true);
});

// ---------------------------------------------------------------------------------------------
// Hints

test(t, 'filterHints', (t) => {
  const cases: [string, string[], { path: string; id: string }[]][] = [
    ['point and his and equipRef==@x', ['point', 'his', 'equipRef'], [{ path: 'equipRef', id: 'x' }]],
    ['point', ['point'], []],
    ['equipRef == @x', ['equipRef'], [{ path: 'equipRef', id: 'x' }]],
    ['equipRef != @x', ['equipRef'], []],
    ['equipRef > @x', ['equipRef'], []],
    ['a or b', [], []],
    ['not a', [], []],
    ['not a and b', ['b'], []],
    ['site and (equip or point)', ['site'], []],
    ['(a and b) and c', ['a', 'b', 'c'], []],
    ['a and b or c', [], []],
    ['siteRef->geoCity == "X" and equipRef->siteRef == @s', ['siteRef', 'equipRef'], [{ path: 'equipRef->siteRef', id: 's' }]],
    ['curVal > 5 and dis =~ /x/ and curStatus != "ok"', ['curVal', 'dis', 'curStatus'], []],
    ['a and a and equipRef == @x and (equipRef == @x and siteRef == @s)', ['a', 'equipRef', 'siteRef'], [
      { path: 'equipRef', id: 'x' },
      { path: 'siteRef', id: 's' },
    ]],
  ];
  for (const [text, has, refEq] of cases) t.same(filterHints(parseFilter(text)), { has, refEq }, text);
});

test(t, 'hints hold for every dict the truth table matches', (t) => {
  for (const [text, name, expected] of truth) {
    if (!expected) continue;
    const d = dicts[name];
    const hints = filterHints(parseFilter(text));
    for (const tag of hints.has) t.ok(d.has(tag), `${text}: ${name} has ${tag}`);
    for (const { path, id } of hints.refEq) {
      if (!path.includes('->')) t.equal(d.ref(path)?.id, id, `${text}: ${name}.${path} is @${id}`);
    }
  }
});
