/**
 * Issue 5, end to end: hisWrite through real HTTP against the real App on LevelDB. Single-point
 * (meta id) and multi-point (vK columns with meta id) writes in JSON and Zinc; values checked
 * against the point's kind and unit; timestamps in other zones converted; unsorted input sorted,
 * a duplicate timestamp keeps the last; and every refused request writes nothing at all, which
 * is checked by reading every point back.
 */
import t from 'tap';
import { HDate, HDateTime, HNumber, HRef, type HVal, MARKER, NA } from '../../src/haystack/values.js';
import { timeZone } from '../../src/haystack/tz.js';
import { ErrorCodes } from '../../src/lib/errors.js';
import { dt, failed, hisStats, multiWrite, ok, series, singleWrite } from '../helpers/his.js';
import { POINTS, hisWorld } from '../helpers/his-world.js';
import { errOf, gridOf, request } from '../helpers/http.js';

const NY = timeZone('New_York');
const HOUR = 3600_000;
const T0 = Date.UTC(2024, 0, 12, 15, 0, 0); // 2024-01-12T10:00-05:00 New_York

const at = (ms: number): HDateTime => new HDateTime(ms, NY);

t.test('single point: JSON and Zinc bodies; kind Number, Bool and Str; the unit of the point', async (t) => {
  const { admin } = await hisWorld(t);
  for (const as of ['json', 'zinc'] as const) {
    const off = as === 'json' ? 0 : 24 * HOUR;
    const w = ok(t, await admin.write('temp', [[at(T0 + off), HNumber.of(70.5, '°F')], [at(T0 + off + HOUR), HNumber.of(71)]], { as }), `${as}: write temp`);
    t.same(w.colNames(), ['empty'], `${as}: the answer is an empty grid`);
    t.equal(w.size, 0);
    ok(t, await admin.write('fan', [[at(T0 + off), true], [at(T0 + off + HOUR), false]], { as }), `${as}: write fan`);
    ok(t, await admin.write('mode', [[at(T0 + off), 'occupied'], [at(T0 + off + HOUR), 'night, "setback"\n']], { as }), `${as}: write mode`);
    ok(t, await admin.write('plain', [[at(T0 + off), HNumber.of(-0.25)], [at(T0 + off + HOUR), HNumber.of(1e21)]], { as }), `${as}: write plain`);
  }
  t.same(await admin.all('temp'), [
    ['2024-01-12T10:00:00-05:00 New_York', '70.5°F'],
    ['2024-01-12T11:00:00-05:00 New_York', '71°F'],
    ['2024-01-13T10:00:00-05:00 New_York', '70.5°F'],
    ['2024-01-13T11:00:00-05:00 New_York', '71°F'],
  ], 'a Number without a unit is taken in the point\'s unit and read back with it');
  t.same((await admin.all('fan')).map((r) => r[1]), ['T', 'F', 'T', 'F'], 'Bools');
  t.same((await admin.all('mode')).map((r) => r[1]), ['"occupied"', '"night, \\"setback\\"\\n"', '"occupied"', '"night, \\"setback\\"\\n"'], 'Strs, escapes and all');
  t.same((await admin.all('plain')).map((r) => r[1]), ['-0.25', '1e+21', '-0.25', '1e+21'], 'a point without a unit: plain numbers');

  // Special numbers survive.
  ok(t, await admin.write('plain', [[at(T0 + 2 * HOUR), HNumber.of(Infinity)], [at(T0 + 3 * HOUR), HNumber.of(-Infinity)], [at(T0 + 4 * HOUR), HNumber.of(NaN)]]), 'INF, -INF, NaN');
  t.same((await admin.all('plain')).slice(2, 5).map((r) => r[1]), ['INF', '-INF', 'NaN']);

  // By fully qualified name.
  ok(t, await admin.write('hq.ahu.temp', [[at(T0 + 5 * HOUR), HNumber.of(60)]]), 'meta id as a fully qualified name');
  t.same((await admin.all('temp'))[2], ['2024-01-12T15:00:00-05:00 New_York', '60°F']);
});

t.test('multi point: columns v0..vN with meta id, sparse rows, JSON and Zinc', async (t) => {
  const { admin } = await hisWorld(t);
  for (const as of ['json', 'zinc'] as const) {
    const off = as === 'json' ? 0 : 24 * HOUR;
    ok(
      t,
      await admin.writeMulti(
        ['temp', 'fan', 'hq.ahu.mode', 'power'],
        [
          [at(T0 + off), HNumber.of(68, '°F'), true, 'day', HNumber.of(1.5, 'kW')],
          [at(T0 + off + HOUR), HNumber.of(69), undefined, undefined, HNumber.of(2)],
          [at(T0 + off + 2 * HOUR), undefined, false, undefined, undefined],
        ],
        { as },
      ),
      `${as}: multi-point write`,
    );
  }
  t.same((await admin.all('temp')).map((r) => r[1]), ['68°F', '69°F', '68°F', '69°F'], 'v0');
  t.same((await admin.all('fan')).map((r) => r[0].slice(0, 19) + ' ' + r[1]), [
    '2024-01-12T10:00:00 T',
    '2024-01-12T12:00:00 F',
    '2024-01-13T10:00:00 T',
    '2024-01-13T12:00:00 F',
  ], 'v1: absent cells are not samples');
  t.same((await admin.all('mode')).map((r) => r[1]), ['"day"', '"day"'], 'v2 by fully qualified name');
  t.same(await admin.all('power'), [
    ['2024-01-13T02:00:00+11:00 Sydney', '1.5kW'],
    ['2024-01-13T03:00:00+11:00 Sydney', '2kW'],
    ['2024-01-14T02:00:00+11:00 Sydney', '1.5kW'],
    ['2024-01-14T03:00:00+11:00 Sydney', '2kW'],
  ], 'v3, a Sydney point: read back in its own zone');

  // Two columns naming one point: both land (a later column wins on a shared timestamp).
  ok(t, await admin.writeMulti(['plain', 'plain'], [[at(T0), HNumber.of(1), undefined], [at(T0 + HOUR), undefined, HNumber.of(2)]]), 'one point in two columns');
  t.same((await admin.all('plain')).map((r) => r[1]), ['1', '2']);

  ok(t, await admin.writeMulti(['temp'], []), 'no rows: nothing to write, not an error');
  t.equal((await admin.all('temp')).length, 4);
});

t.test('zones: written in Sydney (and others), read in New York: the same instants; offsets checked', async (t) => {
  const { r, admin } = await hisWorld(t);
  ok(t, await admin.write('temp', [
    [dt('2024-01-13T02:00:00+11:00 Sydney'), HNumber.of(1)],
    [dt('2024-01-12T15:30:00Z UTC'), HNumber.of(2)],
    [dt('2024-01-12T10:45:00-05:00 New_York'), HNumber.of(3)],
    [dt('2024-01-12T16:00:00-00:00 Rel'), HNumber.of(4)],
    [dt('2024-01-12T18:15:00+02:00 Athens'), HNumber.of(5)],
  ]), 'write in five zones');
  t.same(await admin.all('temp'), [
    ['2024-01-12T10:00:00-05:00 New_York', '1°F'],
    ['2024-01-12T10:30:00-05:00 New_York', '2°F'],
    ['2024-01-12T10:45:00-05:00 New_York', '3°F'],
    ['2024-01-12T11:00:00-05:00 New_York', '4°F'],
    ['2024-01-12T11:15:00-05:00 New_York', '5°F'],
  ], 'read in the point\'s zone: the same instants');
  // The same sample in Sydney's summer offset, written to a Sydney point, read in New York's.
  ok(t, await admin.write('power', [[dt('2024-07-01T08:00:00+10:00 Sydney'), HNumber.of(3, 'kW')], [dt('2024-01-01T08:00:00+11:00 Sydney'), HNumber.of(4, 'kW')]]), 'Sydney winter and summer');
  const ny = ok(t, await admin.read('power', '2023-12-31T00:00:00-05:00 New_York,2024-12-31T00:00:00-05:00 New_York'), 'read in New York');
  t.same(series(ny), [
    ['2023-12-31T16:00:00-05:00 New_York', '4kW'],
    ['2024-06-30T18:00:00-04:00 New_York', '3kW'],
  ], 'Sydney instants shown in New York, each with the offset in force (EST, then EDT)');

  // A DateTime whose offset is not the one its zone has at that instant, or an unknown zone.
  const raw = (ts: string) =>
    request(r.base, '/api/hisWrite', { method: 'POST', headers: { ...r.auth, 'content-type': 'text/zinc' }, body: `ver:"3.0" id:@temp\nts,val\n${ts},99\n` });
  failed(t, await raw('2024-01-12T10:00:00+11:00 New_York'), 400, ErrorCodes.BAD_ZINC, /New_York is at -05:00 at that instant/, 'an offset New York never has');
  failed(t, await raw('2024-01-12T10:00:00-04:00 New_York'), 400, ErrorCodes.BAD_ZINC, /New_York is at -05:00 at that instant/, 'summer offset in winter');
  const json = await request(r.base, '/api/hisWrite', {
    method: 'POST',
    headers: { ...r.auth, 'content-type': 'application/json' },
    body: JSON.stringify({ meta: { ver: '2.0', id: 'r:temp' }, cols: [{ name: 'ts' }, { name: 'val' }], rows: [{ ts: 't:2024-01-12T10:00:00+11:00 New_York', val: 'n:99' }] }),
  });
  t.equal(json.status, 400, 'the same in JSON: 400');
  t.match(errOf(json)?.dis, /New_York is at -05:00 at that instant/, 'with the same reason');
  const atlantis = await raw('2024-01-12T10:00:00+01:00 Atlantis');
  t.equal(atlantis.status, 400, 'an unknown zone: 400');
  t.ok(errOf(atlantis), 'an error grid');
  t.equal((await admin.all('temp')).length, 5, 'nothing written by any of them');
});

t.test('unsorted input is sorted; a duplicate timestamp keeps the last (in a request and across requests)', async (t) => {
  const { admin } = await hisWorld(t);
  ok(t, await admin.write('plain', [
    [at(T0 + 3 * HOUR), HNumber.of(3)],
    [at(T0), HNumber.of(0)],
    [at(T0 + 2 * HOUR), HNumber.of(2)],
    [at(T0 + HOUR), HNumber.of(1)],
    [at(T0 + 2 * HOUR), HNumber.of(22)],
    [dt('2024-01-13T02:00:00+11:00 Sydney'), HNumber.of(100)], // = T0, written last
  ]), 'unsorted, with duplicates (one of them in another zone)');
  t.same((await admin.all('plain')).map((r) => r[1]), ['100', '1', '22', '3'], 'sorted; the last sample of a timestamp wins');
  ok(t, await admin.write('plain', [[at(T0 + HOUR), HNumber.of(-1)], [at(T0 - HOUR), HNumber.of(-2)]]), 'overwrite one, add one before the rest');
  t.same((await admin.all('plain')).map((r) => r[1]), ['-2', '100', '-1', '22', '3'], 'a later request replaces a sample at the same instant');
  t.equal(hisStats(await admin.rec('plain')).size, '5', 'hisSize counts distinct instants');
  // Multi-point: rows out of order, a duplicate row.
  ok(t, await admin.writeMulti(['fan', 'mode'], [
    [at(T0 + HOUR), true, 'b'],
    [at(T0), false, 'a'],
    [at(T0 + HOUR), false, undefined],
  ]), 'multi-point, unsorted, a duplicate timestamp');
  t.same((await admin.all('fan')).map((r) => r[1]), ['F', 'F'], 'the later row of a timestamp wins for the points it has');
  t.same((await admin.all('mode')).map((r) => r[1]), ['"a"', '"b"'], '...and leaves the others alone');
});

t.test('values are checked against the kind and the unit of the point', async (t) => {
  const { admin } = await hisWorld(t);
  const cases: [string, string, HVal, RegExp][] = [
    ['a Str to a Number point', 'temp', 'hot', /holds Numbers, not a Str/],
    ['a Bool to a Number point', 'plain', true, /holds Numbers, not a Bool/],
    ['another unit', 'temp', HNumber.of(20, '°C'), /unit °C does not match the unit of @temp, °F/],
    ['a unit to a point without one', 'plain', HNumber.of(20, '°C'), /@plain has no unit/],
    ['kW to a kWh point', 'meter', HNumber.of(3, 'kW'), /unit kW does not match .*kWh/],
    ['a Number to a Bool point', 'fan', HNumber.of(1), /holds Bools, not a Number/],
    ['a Str to a Bool point', 'fan', 'true', /holds Bools, not a Str/],
    ['a Bool to a Str point', 'mode', false, /holds Strs, not a Bool/],
    ['a Number to a Str point', 'mode', HNumber.of(1), /holds Strs, not a Number/],
    ['a Ref to a Str point', 'mode', HRef.of('x'), /holds Strs/],
    ['NA', 'temp', NA, /holds Numbers, not NA/],
    ['NA to a Bool point', 'fan', NA, /not NA/],
    ['a Marker', 'temp', MARKER, /holds Numbers/],
    ['a Date', 'mode', HDate.of(2024, 1, 1), /holds Strs/],
    ['a list', 'temp', [HNumber.of(1)], /holds Numbers/],
  ];
  for (const [what, id, val, why] of cases) {
    for (const as of ['json', 'zinc'] as const) {
      const a = await admin.write(id, [[at(T0), val]], { as });
      failed(t, a, 400, ErrorCodes.BAD_VALUE, why, `${what} (${as})`);
      t.match(errOf(a)?.dis, /rows\[0\]\.val/, `${what} (${as}): the message names the cell`);
    }
  }
  for (const id of ['temp', 'plain', 'fan', 'mode', 'meter']) t.same(await admin.all(id), [], `nothing written to ${id}`);
});

t.test('any error: an error grid, and nothing of the request written (for any of its points)', async (t) => {
  const { admin } = await hisWorld(t);
  ok(t, await admin.writeMulti(['temp', 'plain', 'fan', 'mode', 'power'], [[at(T0 - HOUR), HNumber.of(1), HNumber.of(2), true, 'x', HNumber.of(3)]]), 'baseline');
  const baseline = new Map<string, [string, string][]>();
  for (const id of POINTS) baseline.set(id, await admin.all(id));
  const unchanged = async (what: string): Promise<void> => {
    for (const id of POINTS) t.same(await admin.all(id), baseline.get(id), `${what}: ${id} unchanged`);
    t.equal(hisStats(await admin.rec('temp')).size, '1', `${what}: hisSize unchanged`);
  };

  const n = 1000;
  const rows = (f: (i: number) => readonly (HVal | undefined)[]) => Array.from({ length: n }, (_, i) => [at(T0 + i * 60_000), ...f(i)] as const);
  const cases: [string, ReturnType<typeof singleWrite>, string, RegExp][] = [
    ['a Str in row 500 of 1000', singleWrite('temp', rows((i) => [i === 500 ? 'oops' : HNumber.of(i)]) as [HVal, HVal][]), ErrorCodes.BAD_VALUE, /rows\[500\]\.val: @temp holds Numbers/],
    [
      'a bad value of the second point in row 500 of 1000 (multi-point)',
      multiWrite(['temp', 'fan', 'mode'], rows((i) => [HNumber.of(i), i === 500 ? HNumber.of(1) : i % 2 === 0, `m${i}`])),
      ErrorCodes.BAD_VALUE,
      /rows\[500\]\.v1: @fan holds Bools/,
    ],
    ['a unit that does not match in row 999', multiWrite(['plain', 'temp'], rows((i) => [HNumber.of(i), HNumber.of(i, i === 999 ? '°C' : '°F')])), ErrorCodes.BAD_VALUE, /rows\[999\]\.v1: unit °C/],
    ['NA in row 500 (multi-point)', multiWrite(['temp', 'plain'], rows((i) => [HNumber.of(i), i === 500 ? NA : HNumber.of(i)])), ErrorCodes.BAD_VALUE, /rows\[500\]\.v1: .*not NA/],
    ['a Str ts in row 500', singleWrite('temp', rows((i) => [HNumber.of(i)]).map(([ts, v], i) => [i === 500 ? '2024-01-12T10:00:00-05:00 New_York' : ts, v] as [HVal, HVal])), ErrorCodes.BAD_VALUE, /rows\[500\]\.ts must be a DateTime/],
    ['a Date ts in row 0', singleWrite('temp', [[HDate.of(2024, 1, 12), HNumber.of(1)]]), ErrorCodes.BAD_VALUE, /rows\[0\]\.ts must be a DateTime/],
    ['a row without ts (multi-point)', multiWrite(['temp', 'fan'], [[at(T0), HNumber.of(1), true], [undefined, HNumber.of(2), false]]), ErrorCodes.BAD_VALUE, /rows\[1\]\.ts must be a DateTime/],
    ['an unknown point (single)', singleWrite('nope', [[at(T0), HNumber.of(1)]]), ErrorCodes.NOT_FOUND, /unknown point @nope/],
    ['an unknown point in the third column', multiWrite(['temp', 'fan', 'nope'], [[at(T0), HNumber.of(1), true, HNumber.of(3)]]), ErrorCodes.NOT_FOUND, /cols v2 meta id: unknown point @nope/],
    ['a point without his', multiWrite(['temp', 'nohis'], [[at(T0), HNumber.of(1), HNumber.of(3)]]), ErrorCodes.BAD_REQUEST, /@nohis is not a historized point/],
    ['a site (not a point)', singleWrite('hq', [[at(T0), HNumber.of(1)]]), ErrorCodes.BAD_REQUEST, /@hq is not a historized point/],
    ['a his point without kind', multiWrite(['temp', 'nokind'], [[at(T0), HNumber.of(1), HNumber.of(3)]]), ErrorCodes.INVALID_RECORD, /@nokind has no kind tag/],
    ['a his point of kind Coord', multiWrite(['coord', 'temp'], [[at(T0), HNumber.of(1), HNumber.of(3)]]), ErrorCodes.INVALID_RECORD, /@coord has kind "Coord"; .*Number, Bool or Str/],
  ];
  for (const [what, grid, code, why] of cases) {
    for (const as of ['json', 'zinc'] as const) failed(t, await admin.postGrid('hisWrite', grid, { as }), 400, code, why, `${what} (${as})`);
    await unchanged(what);
  }

  // Malformed grids: bad columns, no ts, meta id not a Ref, a vN column without id.
  const shapes: [string, Parameters<typeof gridOf>, RegExp][] = [
    ['a column that is neither ts nor vN', [{ ts: at(T0), temp: HNumber.of(2) }], /column temp is neither ts nor vN/],
    ['vN columns without meta id', [{ ts: at(T0), v0: HNumber.of(1) }], /cols v0 meta id must be a Ref/],
    ['no ts column', [{ val: HNumber.of(1) }, { id: HRef.of('temp') }], /needs columns ts and val/],
    ['meta id with a column other than val', [{ ts: at(T0), value: HNumber.of(1) }, { id: HRef.of('temp') }], /needs columns ts and val/],
    ['meta id a Str', [{ ts: at(T0), val: HNumber.of(1) }, { id: 'temp' }], /meta\.id must be a Ref/],
    ['nothing at all', [[]], /hisWrite needs samples/],
  ];
  for (const [what, args, why] of shapes) {
    const code = ErrorCodes.BAD_REQUEST;
    failed(t, await admin.postGrid('hisWrite', gridOf(...args)), 400, code, why, what);
  }
  await unchanged('malformed grids');
  // A malformed body at all.
  failed(t, await admin.postGrid('hisWrite', singleWrite('temp', [[at(T0), HNumber.of(1)]]), { headers: { 'content-type': 'application/json' }, as: 'zinc' }), 400, ErrorCodes.BAD_GRID, undefined, 'Zinc sent as JSON');
  await unchanged('a body that does not decode');
});

t.test('a point whose kind changed: writes of the new kind are refused until its history is deleted', async (t) => {
  const { admin } = await hisWorld(t);
  ok(t, await admin.write('plain', [[at(T0), HNumber.of(1)]]), 'Number history');
  ok(t, await admin.post('updateRec', [{ id: HRef.of('plain'), kind: 'Bool' }]), 'the point becomes a Bool point');
  const a = await admin.write('plain', [[at(T0 + HOUR), true]]);
  failed(t, a, 400, ErrorCodes.HIS_KIND, /@plain is of kind Bool but its history holds Number samples/, 'Bools to a point holding Numbers');
  failed(t, await admin.read('plain', 'today'), 400, ErrorCodes.HIS_KIND, /holds Number samples/, 'hisRead of it says why too');
  ok(t, await admin.del('plain', '1970-01-01,2100-01-01'), 'hisDelete of all of it');
  ok(t, await admin.write('plain', [[at(T0 + HOUR), true]]), 'now Bools are taken');
  t.same((await admin.all('plain')).map((r) => r[1]), ['T']);
});

t.test('large JSON bodies as clients send them (decoded from their bytes): the same samples, errors and refusals', async (t) => {
  const { r, admin } = await hisWorld(t);
  const post = (body: string | Uint8Array) => request(r.base, '/api/hisWrite', { method: 'POST', headers: { ...r.auth, 'content-type': 'application/json', accept: 'application/json' }, body });
  const n = 2000;
  const rows = (val: (i: number) => string, ts = (i: number): string => `t:${NY.formatInstant(T0 + i * 60_000)} New_York`): string =>
    Array.from({ length: n }, (_, i) => `{"ts":"${ts(i)}","val":"${val(i)}"}`).join(',');
  const body = (id: string, rs: string): string => `{"meta":{"ver":"3.0","id":"r:${id}"},"cols":[{"name":"ts"},{"name":"val"}],"rows":[${rs}]}`;
  ok(t, await post(body('temp', rows((i) => `n:${(i / 10).toFixed(1)} °F`))), 'written');
  const all = await admin.all('temp');
  t.equal(all.length, n);
  t.same(all[0], ['2024-01-12T10:00:00-05:00 New_York', '0°F']);
  t.same(all[n - 1], [`${NY.formatInstant(T0 + (n - 1) * 60_000)} New_York`, '199.9°F'], 'every sample, in the point\'s unit');
  t.equal(hisStats(await admin.rec('temp')).size, String(n), 'hisSize');
  // Refused as before, and nothing written.
  failed(t, await post(body('temp', rows((i) => (i === 1500 ? 'n:abc °F' : `n:${i} °F`)))), 400, ErrorCodes.BAD_VALUE, /rows\[1500\]\.val: "n:abc °F" is not a Number/, 'a bad number in row 1500');
  failed(t, await post(body('temp', rows((i) => `n:${i} ${i === 1999 ? '°C' : '°F'}`))), 400, ErrorCodes.BAD_VALUE, /rows\[1999\]\.val: unit °C does not match/, 'another unit in the last row');
  failed(t, await post(body('temp', rows((i) => `n:${i} °F`, (i) => `t:${NY.formatInstant(T0 + i * 60_000)} ${i === 700 ? 'Chicago' : 'New_York'}`))), 400, ErrorCodes.BAD_OFFSET, /rows\[700\]\.ts: .*Chicago is at -06:00/, 'an offset not in force in row 700');
  const bytes = Buffer.from(body('temp', rows((i) => `n:${i} °F`)), 'utf8');
  bytes[bytes.lastIndexOf('°F')] = 0xff;
  failed(t, await post(bytes), 400, ErrorCodes.BAD_REQUEST, /not valid UTF-8/, 'bytes that are not UTF-8 in a unit');
  failed(t, await post(body('fan', rows((i) => `n:${i}`))), 400, ErrorCodes.BAD_VALUE, /rows\[0\]\.val: @fan holds Bools/, 'Numbers to a Bool point');
  failed(t, await post(body('nope', rows((i) => `n:${i}`))), 400, ErrorCodes.NOT_FOUND, /unknown point @nope/, 'an unknown point');
  t.equal((await admin.all('temp')).length, n, 'nothing of the refused requests was written');
  t.same((await admin.all('temp'))[1500], all[1500]);
});

t.test('samples dated before 2000 come from a writer whose clock is not set: refused, nothing written', async (t) => {
  const { admin } = await hisWorld(t);
  const a = await admin.write('plain', [
    [at(T0), HNumber.of(1)],
    [at(Date.UTC(1970, 0, 1, 0, 5)), HNumber.of(2)],
  ]);
  failed(t, a, 400, ErrorCodes.HIS_BEFORE_FLOOR, /plain: a sample is dated 1970-01-01T00:05:00.000Z, before 2000-01-01.*clock is not set/, 'a 1970 sample');
  t.same(await admin.all('plain'), [], 'nothing written, not even the good sample');
  ok(t, await admin.write('plain', [[at(Date.UTC(2001, 0, 1)), HNumber.of(3)]]), 'an old sample after 2000 (a backfill) is taken');
});
