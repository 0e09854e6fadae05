/**
 * Issue 31: Hayson (src/haystack/hayson.ts) and Zinc round trips of every value kind Hayloft
 * stores, refereed by haystack-core (j2inn's codecs, what haystack-nclient uses): Hayloft writes,
 * haystack-core reads and writes back, Hayloft reads: the same values. Plus strict decoding.
 */
import t, { type Test } from 'tap';
import core from 'haystack-core';
import { readHayson, writeHayson, writeHaysonChunks } from '../../src/haystack/hayson.js';
import { HisGrid } from '../../src/haystack/his-grid.js';
import { timeZone } from '../../src/haystack/tz.js';
import { HCoord, HDate, HDateTime, HDict, HGrid, HNumber, HRef, HTime, HUri, type HVal, HXStr, MARKER, NA, REMOVE } from '../../src/haystack/values.js';
import { readZinc, writeZinc } from '../../src/haystack/zinc.js';
import { ErrorCodes } from '../../src/lib/errors.js';

const NY = timeZone('New_York');

/** One cell per value kind Hayloft stores, each in its own column. */
const VALUES: Record<string, HVal> = {
  marker: MARKER,
  na: NA,
  remove: REMOVE,
  boolT: true,
  boolF: false,
  num: HNumber.of(72.5),
  numUnit: HNumber.of(-3.25, '°F'),
  numInf: HNumber.of(Infinity),
  // No unit on INF: Zinc's grammar has none there, and haystack-core drops it.
  numNegInf: HNumber.of(-Infinity),
  numNaN: HNumber.of(NaN),
  str: 'text with "quotes", a \\ and ünïcödé\nnew line',
  ref: HRef.of('abc-123'),
  refDis: HRef.of('p.1', 'Temp'),
  date: HDate.of(2024, 3, 10),
  time: HTime.of(9, 30, 15, 250),
  dateTime: new HDateTime(Date.parse('2024-03-10T07:30:00Z'), NY),
  dateTimeUtc: new HDateTime(Date.parse('2024-03-10T07:30:00.123Z'), timeZone('UTC')),
  uri: HUri.of('http://example.com/a b'),
  coord: HCoord.of(37.55, -77.45),
  xstr: HXStr.of('Span', 'today'),
  list: Object.freeze([HNumber.of(1), 'a', MARKER, null]),
  dict: HDict.of({ a: HNumber.of(1, 'm'), b: 'x', c: MARKER }),
  grid: HGrid.fromRows([HDict.of({ a: HNumber.of(1) }), HDict.of({ a: 'two' })], HDict.of({ inner: MARKER })),
};

const GRID = HGrid.fromRows([HDict.of(VALUES)], HDict.of({ id: HRef.of('meta-ref'), hisStart: VALUES.dateTime as HVal }));

function same(t: Test, got: HGrid, what: string): void {
  const row = got.rows[0] as HDict;
  for (const [k, v] of Object.entries(VALUES)) {
    const g = row.get(k);
    if (v instanceof HNumber && Number.isNaN(v.val)) t.ok(g instanceof HNumber && Number.isNaN(g.val), `${what}: ${k}`);
    else if (v instanceof HGrid) t.same((g as HGrid).rows.map((r) => r.toRecord()), v.rows.map((r) => r.toRecord()), `${what}: ${k}`);
    else if (v instanceof HDateTime) t.ok(g instanceof HDateTime && g.epochMs === v.epochMs && g.tz.name === v.tz.name, `${what}: ${k} (${String(g)})`);
    else t.same(g, v, `${what}: ${k}`);
  }
  t.same(got.meta.get('id'), HRef.of('meta-ref'), `${what}: meta`);
}

t.test('Hayson: Hayloft writes, haystack-core reads and writes back, Hayloft reads the same values', async (t) => {
  const text = writeHayson(GRID);
  const theirs = core.HGrid.make(JSON.parse(text) as never);
  t.equal(theirs.length, 1, 'haystack-core reads one row');
  t.equal(theirs.get(0)?.get('str')?.toString(), VALUES.str, 'a plain string');
  t.equal((theirs.get(0)?.get('numUnit') as unknown as { unit?: { symbol: string } }).unit?.symbol, '°F', 'a unit');
  same(t, readHayson(JSON.stringify(theirs.toJSON())), 'back from haystack-core');
  same(t, readHayson(text), 'our own');
});

t.test('Zinc: the same round trip', async (t) => {
  const text = writeZinc(GRID);
  const theirs = core.ZincReader.readValue(text) as core.HGrid;
  t.equal(theirs.length, 1, 'haystack-core reads one row');
  // haystack-core writes Refs without their dis: compare that one without it.
  const back = readZinc(theirs.toZinc());
  const row = back.rows[0] as HDict;
  t.same(row.get('refDis'), HRef.of('p.1'), 'a Ref comes back (haystack-core drops dis in Zinc)');
  same(t, HGrid.fromRows([row.with({ refDis: VALUES.refDis })], back.meta), 'back from haystack-core');
  // And what haystack-core writes in Hayson from that Zinc reads as the same values.
  const viaHayson = readHayson(JSON.stringify(theirs.toJSON()));
  same(t, HGrid.fromRows([(viaHayson.rows[0] as HDict).with({ refDis: VALUES.refDis })], viaHayson.meta), 'Zinc to Hayson through haystack-core');
});

t.test('Hayson decoding is strict and bounded', async (t) => {
  const bad = (text: string, code: string, what: string): void => {
    try {
      readHayson(text);
      t.fail(`${what}: should be refused`);
    } catch (e) {
      t.equal((e as { code?: string }).code, code, what);
    }
  };
  bad('not json', ErrorCodes.BAD_GRID, 'not JSON');
  bad('[]', ErrorCodes.BAD_GRID, 'not an object');
  bad('{"_kind":"dict"}', ErrorCodes.BAD_GRID, 'not a grid');
  bad('{"cols":[{"name":"a"}],"rows":[{"b":1}]}', ErrorCodes.BAD_GRID, 'a cell outside the columns');
  bad('{"cols":[{"name":"a"}],"rows":[{"a":{"_kind":"wat"}}]}', ErrorCodes.BAD_VALUE, 'an unknown _kind');
  bad('{"cols":[{"name":"a"}],"rows":[{"a":{"_kind":"ref","val":"a b"}}]}', ErrorCodes.BAD_VALUE, 'a bad Ref id');
  bad('{"cols":[{"name":"a"}],"rows":[{"a":{"_kind":"dateTime","val":"2024-01-01T00:00:00Z","tz":"Mars"}}]}', ErrorCodes.UNKNOWN_TZ, 'an unknown zone');
  bad(`{"cols":[{"name":"a"}],"rows":[{"a":${'['.repeat(40)}${']'.repeat(40)}}]}`, ErrorCodes.LIMIT, 'nesting past maxDepth');
  const g = readHayson('{"cols":[{"name":"ts"}],"rows":[{"ts":{"_kind":"dateTime","val":"2024-01-01T00:00:00-05:00"}}]}');
  t.equal((g.rows[0]?.get('ts') as HDateTime).epochMs, Date.parse('2024-01-01T05:00:00Z'), 'a dateTime without tz: its offset\'s instant');
  t.same(readHayson('{"cols":[{"name":"s"}],"rows":[{"s":{"_kind":"symbol","val":"elec-meter"}}]}').rows[0]?.get('s'), 'elec-meter', 'a Symbol reads as its name');
});

t.test('history is written from its columns, in chunks that make one grid', async (t) => {
  const n = 5000;
  const ts = Float64Array.from({ length: n }, (_, i) => Date.parse('2024-01-01T00:00:00Z') + i * 60_000);
  const val = Float64Array.from({ length: n }, (_, i) => i / 4);
  const g = new HisGrid(HDict.of({ id: HRef.of('p') }), ts, NY, { kind: 'Number', val, unit: 'kW' });
  const chunks = [...writeHaysonChunks(g)];
  t.ok(chunks.length > 3, `streamed in ${chunks.length} pieces`);
  const theirs = core.HGrid.make(JSON.parse(chunks.join('')) as never);
  t.equal(theirs.length, n, 'haystack-core reads every row');
  const back = readHayson(chunks.join(''));
  t.equal(back.rows.length, n);
  t.same((back.rows[n - 1]?.get('val') as HNumber).val, (n - 1) / 4, 'the last value');
  t.equal((back.rows[1]?.get('ts') as HDateTime).epochMs, ts[1], 'a timestamp');
  t.equal((back.rows[1]?.get('ts') as HDateTime).tz.name, 'New_York', 'in its zone');
});
