/**
 * The byte fast path for history bodies (src/haystack/json-his.ts) against the general decoder:
 * what it takes it decodes exactly as readJsonGrid does (same instants, same numbers bit for bit,
 * same zone, unit and meta), and everything else it leaves to readJsonGrid (undefined).
 */
import t, { type Test } from 'tap';
import { HisGrid } from '../../src/haystack/his-grid.js';
import { readJsonGrid, writeJsonGrid } from '../../src/haystack/json.js';
import { readJsonHisBytes } from '../../src/haystack/json-his.js';
import { timeZone } from '../../src/haystack/tz.js';
import { prng } from '../helpers/prng.js';

const SYD = timeZone('Sydney');
const MIN = 60_000;
// Sydney leaves daylight saving at 03:00 on 2024-04-07 (to 02:00 +10:00).
const T0 = Date.UTC(2024, 3, 6, 12, 0, 0);

function rowsOf(n: number, val: (i: number) => string, ts: (i: number) => string = (i) => `t:${SYD.formatInstant(T0 + i * MIN)} Sydney`): string[] {
  return Array.from({ length: n }, (_, i) => `{"ts":${JSON.stringify(ts(i))},"val":${JSON.stringify(val(i))}}`);
}

function body(rows: string[], meta = '{"ver":"3.0","id":"r:p1"}', cols = '[{"name":"ts"},{"name":"val"}]'): string {
  return `{"meta":${meta},"cols":${cols},"rows":[${rows.join(',')}]}`;
}

/** Asserts the fast path takes `text` and gives what readJsonGrid gives. */
function same(t: Test, text: string, what: string): void {
  const fast = readJsonHisBytes(Buffer.from(text, 'utf8'));
  const general = readJsonGrid(text);
  if (fast === undefined) {
    t.fail(`${what}: taken by the fast path`);
    return;
  }
  t.ok(general instanceof HisGrid, `${what}: columns either way`);
  const g = general as HisGrid;
  let diffs = 0;
  for (let i = 0; i < g.size; i++) if (!Object.is(fast.ts[i], g.ts[i]) || !Object.is(fast.values.val[i], g.values.val[i])) diffs++;
  t.equal(fast.size, g.size, `${what}: as many rows`);
  t.equal(diffs, 0, `${what}: the same instants and numbers, bit for bit`);
  t.equal(fast.tz, g.tz, `${what}: the same zone`);
  t.same(fast.values.kind === 'Number' && fast.values.unit, g.values.kind === 'Number' && g.values.unit, `${what}: the same unit`);
  t.equal(writeJsonGrid(fast), writeJsonGrid(g), `${what}: the same grid`);
}

/** Asserts the fast path leaves `text` (bytes) to the general decoder. */
function left(t: Test, bytes: string | Buffer, what: string): void {
  t.equal(readJsonHisBytes(typeof bytes === 'string' ? Buffer.from(bytes, 'utf8') : bytes), undefined, `${what}: left to the general decoder`);
}

t.test('taken: history bodies as clients send them, decoded exactly as the general decoder does', async (t) => {
  const sensor = (i: number): string => `n:${Math.round((21 + 3 * Math.sin(i / 100)) * 10) / 10} °C`;
  same(t, body(rowsOf(2000, sensor)), 'a day and more across the end of daylight saving');
  same(t, body(rowsOf(300, (i) => `n:${i - 150}`)), 'no unit, negative numbers');
  same(t, body(rowsOf(300, (i) => `n:${i - 150}`)).replace(/,/g, ' ,\n\t').replace(/:"/g, ' :\r\n "'), 'whitespace between tokens');
  same(t, body(rowsOf(300, (i) => `n:${i} kW`).map((r) => r.replace(/^\{("ts":"[^"]*"),("val":"[^"]*")\}$/, '{$2,$1}'))), 'val before ts');
  const texts = ['-0', '0', '-0.0', '007', '1.5', '0.1', '0.30000000000000004', '9007199254740991', '9007199254740993', '12345678901234567890.5', '1e3', '1.5E-7', '-2.5e+300', 'INF', '-INF', 'NaN', '0.0000000000000000000001', '1.00000000000000000000001'];
  same(t, body(rowsOf(texts.length * 20, (i) => `n:${texts[i % texts.length] as string} m³/h`)), 'number forms');
  same(t, body(rowsOf(300, (i) => `n:${i}`, (i) => `t:2024-01-01T${String(Math.floor(i / 60) % 24).padStart(2, '0')}:${String(i % 60).padStart(2, '0')}Z UTC`)), 'times without seconds, UTC');
  same(t, body(rowsOf(300, (i) => `n:${i}`, (i) => `t:2024-01-01T10:00:${String(i % 60).padStart(2, '0')}.${String(i).padStart(i % 7, '9')}+01:00 GMT-1`)), 'fractions of a second of any length');
  same(t, body(rowsOf(300, (i) => `n:${i}`, (i) => `t:2024-02-${String(1 + (i % 29)).padStart(2, '0')}T10:00:00-05:00 New_York`)), 'a new date on every row');
  same(t, body(rowsOf(300, (i) => `n:${i}`, (i) => `t:2024-01-01T10:00:${String(i % 60).padStart(2, '0')}+05:00`)), 'an offset without a zone name');
  // Keys in another order, meta with more tags.
  const rows = rowsOf(300, (i) => `n:${i}`);
  same(t, `{"rows":[${rows.join(',')}],"cols":[{"name":"ts"},{"name":"val"}],"meta":{"id":"r:p1 The point","ver":"2.0","note":"s:ü \\" \\u00e9"}}`, 'rows first, escapes in meta');

  const rnd = prng(7);
  const random: string[] = [];
  for (let i = 0; i < 3000; i++) {
    const x = (rnd() - 0.5) * 10 ** Math.floor(rnd() * 40 - 20);
    random.push(i % 3 === 0 ? String(x) : i % 3 === 1 ? x.toFixed(Math.floor(rnd() * 20)) : String(Math.round(x * 1e6)));
  }
  same(t, body(rowsOf(random.length, (i) => `n:${random[i] as string}`)), 'random numbers');
});

t.test('left to the general decoder: anything else, with its errors', async (t) => {
  const rows = rowsOf(300, (i) => `n:${i} °C`);
  left(t, body(rows.slice(0, 20)), 'a small body');
  left(t, body(rows).replace('"n:5 °C"', '"n:5 \\u00b0C"'), 'an escape in a row');
  t.ok(readJsonGrid(body(rows).replace('"n:5 °C"', '"n:5 \\u00b0C"')) instanceof HisGrid, 'which the general decoder still takes as columns');
  left(t, body(rows).replace('"n:7 °C"', '"n:7 °F"'), 'a second unit');
  left(t, body(rows).replace('"n:7 °C"', '"n:7"'), 'a row without the unit');
  left(t, body(rows).replace('"n:7 °C"', '"n:abc °C"'), 'not a number');
  t.throws(() => readJsonGrid(body(rows).replace('"n:7 °C"', '"n:abc °C"')), /rows\[7\]\.val: "n:abc °C" is not a Number/, 'the error the general decoder gives');
  left(t, body(rows).replace('"n:7 °C"', '"n:1. °C"'), 'a number ending in a point');
  left(t, body(rows).replace('"n:7 °C"', '"s:7"'), 'a Str');
  left(t, body(rows).replace('"n:7 °C"', 'null'), 'a null');
  left(t, body(rows).replace('+11:00 Sydney","val":"n:9 °C"', '+10:00 Sydney","val":"n:9 °C"'), 'an offset not in force');
  t.throws(() => readJsonGrid(body(rows).replace('+11:00 Sydney","val":"n:9 °C"', '+10:00 Sydney","val":"n:9 °C"')), { code: 'HL_BAD_OFFSET' });
  left(t, body(rows).replace('Sydney","val":"n:9 °C"', 'Melbourne","val":"n:9 °C"'), 'a second zone');
  left(t, body(rows).replace('2024-04-06T23:09', '2024-04-31T22:09'), 'a date that does not exist');
  left(t, body(rows).replace('T23:09:00', 'T23:69:00'), 'a time that does not exist');
  left(t, body(rows).replace('{"ts":"t:2024-04-06T23:05', '{"ts":"t:2024-04-06T23:05:00+11:00 Sydney","ts":"t:2024-04-06T23:05'), 'a key twice');
  left(t, body(rows).replace('"val":"n:7 °C"', '"val":"n:7 °C","x":"m:"'), 'a third key');
  left(t, body(rows) + 'x', 'text after the grid');
  left(t, body(rows).slice(0, -30), 'a truncated body');
  left(t, body(rows).replace('"rows"', '"x":1,"rows"'), 'another key in the grid');
  left(t, body(rows, '{"ver":"1.0","id":"r:p1"}'), 'a version not supported');
  t.throws(() => readJsonGrid(body(rows, '{"ver":"1.0","id":"r:p1"}')), /meta\.ver: .* is not a supported grid version/);
  left(t, body(rows, undefined, '[{"name":"ts"},{"name":"val","unit":"s:°C"}]'), 'a column with meta');
  left(t, body(rows, undefined, '[{"name":"ts"},{"name":"v0"}]'), 'other columns');
  left(t, body([]), 'no rows');
  // Bytes that are not UTF-8, in a unit, in meta: the text decoder refuses the body.
  const bad = Buffer.from(body(rows), 'utf8');
  const unitAt = bad.indexOf('°C');
  bad[unitAt] = 0xff;
  left(t, bad, 'a unit that is not UTF-8');
  const badMeta = Buffer.from(body(rows, '{"ver":"3.0","id":"r:p1","dis":"s:x"}'), 'utf8');
  badMeta[badMeta.indexOf('s:x') + 2] = 0xc3;
  left(t, badMeta, 'meta that is not UTF-8');
});
