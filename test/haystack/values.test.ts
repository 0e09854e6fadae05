import t from 'tap';
import { parseDateTime } from '../../src/haystack/datetime.js';
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
  compare,
  equals,
  isTagName,
  kindOf,
} from '../../src/haystack/values.js';

t.test('kinds', async (t) => {
  const cases: [HVal, string][] = [
    [null, 'Null'],
    [MARKER, 'Marker'],
    [REMOVE, 'Remove'],
    [NA, 'NA'],
    [true, 'Bool'],
    [new HNumber(1, 'kW'), 'Number'],
    ['s', 'Str'],
    [new HRef('a'), 'Ref'],
    [new HDate(2024, 1, 1), 'Date'],
    [new HTime(1, 2, 3), 'Time'],
    [parseDateTime('2024-01-01T00:00:00Z UTC'), 'DateTime'],
    [new HUri('http://x'), 'Uri'],
    [new HCoord(1, 2), 'Coord'],
    [new HXStr('Span', 'today'), 'XStr'],
    [new HBin('text/plain'), 'Bin'],
    [[MARKER], 'List'],
    [HDict.of({ a: MARKER }), 'Dict'],
    [HGrid.empty(), 'Grid'],
  ];
  for (const [v, k] of cases) t.equal(kindOf(v), k, k);
});

t.test('construction checks', async (t) => {
  const bad: [string, () => unknown][] = [
    ['unit with space', () => new HNumber(1, 'deg F')],
    ['empty unit', () => new HNumber(1, '')],
    ['ref chars', () => new HRef('a b')],
    ['empty ref', () => new HRef('')],
    ['month 13', () => new HDate(2024, 13, 1)],
    ['Feb 30', () => new HDate(2024, 2, 30)],
    ['Feb 29 non-leap', () => new HDate(2023, 2, 29)],
    ['hour 24', () => new HTime(24, 0)],
    ['ms 1000', () => new HTime(0, 0, 0, 1000)],
    ['lat 91', () => new HCoord(91, 0)],
    ['lng -181', () => new HCoord(0, -181)],
    ['xstr type lowercase', () => new HXStr('span', 'x')],
  ];
  for (const [what, f] of bad) t.throws(f, { code: 'HL_BAD_VALUE' }, what);
  t.equal(new HDate(2024, 2, 29).toString(), '2024-02-29');
  t.equal(new HDate(2000, 2, 29).plusDays(1).toString(), '2000-03-01');
  t.equal(new HDate(1970, 1, 1).toEpochDay(), 0);
  t.equal(new HTime(9, 5, 7, 30).toString(), '09:05:07.030');
  t.ok(isTagName('curVal') && isTagName('v0') && !isTagName('Foo') && !isTagName('_x') && !isTagName('a-b'));
});

t.test('equality', async (t) => {
  const eq: [HVal, HVal][] = [
    [new HNumber(1, 'kW'), new HNumber(1, 'kW')],
    [new HNumber(NaN), new HNumber(NaN)],
    [new HRef('a', 'A'), new HRef('a', 'other display')],
    [[new HNumber(1), 's'], [new HNumber(1), 's']],
    [HDict.of({ a: MARKER, b: new HNumber(2) }), HDict.of({ b: new HNumber(2), a: MARKER })],
    [parseDateTime('2024-01-01T00:00:00Z UTC'), parseDateTime('2024-01-01T00:00:00.000Z UTC')],
  ];
  for (const [a, b] of eq) t.ok(equals(a, b), `${String(a)} == ${String(b)}`);
  const ne: [HVal, HVal][] = [
    [new HNumber(1, 'kW'), new HNumber(1, 'W')],
    [new HNumber(1), new HNumber(1, 'kW')],
    [new HNumber(1), '1'],
    [new HRef('a'), new HRef('b')],
    [[MARKER], [MARKER, MARKER]],
    [HDict.of({ a: MARKER }), HDict.of({ a: NA })],
    // same instant, different zones: different values
    [parseDateTime('2024-01-01T00:00:00Z UTC'), parseDateTime('2023-12-31T19:00:00-05:00 New_York')],
    [MARKER, REMOVE],
    [null, false],
  ];
  for (const [a, b] of ne) t.notOk(equals(a, b), `${String(a)} != ${String(b)}`);
  t.ok(HDict.of({ a: null, b: undefined }).isEmpty(), 'null tags are dropped');
});

t.test('ordering is total and sensible within a kind', async (t) => {
  const sorted: HVal[] = [
    null,
    MARKER,
    false,
    true,
    new HNumber(-Infinity),
    new HNumber(-1),
    new HNumber(2),
    new HNumber(2, 'kW'),
    new HNumber(Infinity),
    new HNumber(NaN),
    'a',
    'b',
    new HRef('a'),
    new HDate(2023, 12, 31),
    new HDate(2024, 1, 1),
    new HTime(1, 0),
    parseDateTime('2024-11-03T01:30:00-04:00 New_York'),
    parseDateTime('2024-11-03T01:30:00-05:00 New_York'),
    [new HNumber(1)],
    [new HNumber(1), new HNumber(0)],
    [new HNumber(2)],
  ];
  const shuffled = [...sorted].reverse();
  shuffled.sort(compare);
  for (let i = 0; i < sorted.length; i++) t.ok(equals(shuffled[i], sorted[i]), `position ${i}: ${String(sorted[i])}`);
  t.equal(compare(new HNumber(1), new HNumber(1)), 0);
});

t.test('dicts and grids', async (t) => {
  const d = HDict.of({ a: MARKER, n: new HNumber(1), s: 'x', r: new HRef('q') });
  t.same(d.names(), ['a', 'n', 's', 'r']);
  t.equal(d.size, 4);
  t.ok(d.isMarker('a') && !d.isMarker('n'));
  t.equal(d.num('n')?.val, 1);
  t.equal(d.str('s'), 'x');
  t.equal(d.ref('r')?.id, 'q');
  t.equal(d.ref('s'), undefined);
  const e = d.with({ s: null, z: NA });
  t.same(e.names(), ['a', 'n', 'r', 'z']);
  t.same(d.names(), ['a', 'n', 's', 'r'], 'the original is unchanged');
  t.same(d.without('a', 'n').names(), ['s', 'r']);
  const g = HGrid.fromRows([d], HDict.of({ x: MARKER }), ['id']);
  t.same(g.colNames(), ['id', 'a', 'n', 's', 'r']);
  t.ok(g.hasCol('s') && !g.hasCol('zz'));
  t.equal(g.size, 1);
  t.equal(g.first(), d);
});
