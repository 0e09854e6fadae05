/**
 * Issue 18: property-based fuzzing of every op over HTTP against the real App (fast-check,
 * seeded: a failure prints its seed and path and replays the same way). Generators follow the
 * grammars (JSON v3 grids and values, Zinc grids, filters, hisRead ranges), then the texts are
 * mutated: truncated, a character inserted or changed, nested deep; and each op's own request
 * shape with fuzzed values, as is and mutated. Properties: never a 5xx; every 4xx is an error grid
 * with an errCode; a refused request of any op changes nothing (every record with every tag, the
 * history statistics among them); the server answers after each case.
 */
import fc from 'fast-check';
import t from 'tap';
import { HRef, MARKER } from '../../src/haystack/values.js';
import { type Running, startApp } from '../helpers/app.js';
import { gridOf, postGrid, request } from '../helpers/http.js';

const SEED = 18_2026;
// Every op that takes a body but discover (a BACnet broadcast on the LAN, seconds long).
const OPS = ['read', 'createRec', 'updateRec', 'deleteRec', 'hisRead', 'hisWrite', 'hisDelete', 'watchSub', 'watchPoll', 'watchUnsub', 'pointWrite', 'pointWriteAudit', 'learn'] as const;
type OpName = (typeof OPS)[number];

// ---- values and grids (Haystack JSON v3) ----
const name = fc.constantFrom('id', 'dis', 'name', 'site', 'point', 'his', 'kind', 'tz', 'ts', 'val', 'filter', 'limit', 'range', 'watchId', 'lease', 'siteRef', 'v0', 'id0', 'curVal');
const scalar = fc.oneof(
  fc.constantFrom('m:', '-:', 'z:', 'x:', 'n:72.5 °F', 'n:INF', 'n:NaN', 'r:p1', 'r:hq.p1', 'r:site-1 HQ', 's:today', 's:yesterday', 'd:2024-03-10', 'h:09:30', 't:2024-03-10T03:00:00-04:00 New_York', 't:2024-03-10T07:00:00Z UTC', 'u:http://x', 'c:37.5,-77.4', 'b:text/plain', 'n:1h', 's:point and his'),
  fc.string({ maxLength: 12 }).map((s) => `s:${s}`),
  fc.string({ maxLength: 12 }).map((s) => `r:${s}`),
  fc.string({ maxLength: 12 }).map((s) => `n:${s}`),
  fc.string({ maxLength: 12 }).map((s) => `t:${s}`),
  fc.string({ maxLength: 6 }),
  fc.double(),
  fc.boolean(),
  fc.constant(null),
);
const { value } = fc.letrec<{ value: unknown }>((tie) => ({
  value: fc.oneof({ depthSize: 'small', withCrossShrink: true }, scalar, fc.array(tie('value'), { maxLength: 3 }), fc.dictionary(name, tie('value'), { maxKeys: 3 })),
}));
const jsonGrid = fc.record({
  meta: fc.dictionary(name, value, { maxKeys: 3 }).map((m) => ({ ver: '3.0', ...m })),
  cols: fc.uniqueArray(name, { minLength: 1, maxLength: 4 }).map((ns) => ns.map((n) => ({ name: n }))),
  rows: fc.array(fc.dictionary(name, value, { maxKeys: 4 }), { maxLength: 4 }),
});

/** A text mutated the way broken clients and attackers do. */
function mutated(text: fc.Arbitrary<string>): fc.Arbitrary<string> {
  return fc.oneof(
    text,
    fc.tuple(text, fc.nat()).map(([s, i]) => s.slice(0, i % (s.length + 1))),
    fc.tuple(text, fc.nat(), fc.string({ minLength: 1, maxLength: 3 })).map(([s, i, c]) => s.slice(0, i % (s.length + 1)) + c + s.slice(i % (s.length + 1))),
    fc.tuple(text, fc.nat(), fc.constantFrom('"', '{', '[', ']', '}', ',', ':', '\\', '\n', '\u0000', '\uD800', '<<', '>>')).map(([s, i, c]) => {
      const k = i % (s.length + 1);
      return s.slice(0, k) + c + s.slice(k + 1);
    }),
    fc.tuple(fc.integer({ min: 20, max: 5000 }), fc.constantFrom('[', '{"a":')).map(([n, open]) => `{"meta":{"ver":"3.0"},"cols":[{"name":"id"}],"rows":[{"id":${open.repeat(n)}1${(open === '[' ? ']' : '}').repeat(n)}}]}`),
  );
}

// ---- Zinc ----
const zincVal = fc.constantFrom('M', 'N', 'R', 'NA', 'T', 'F', '72.5°F', '@p1', '@hq.p1', '"today"', '2024-03-10', '09:30', '2024-03-10T03:00:00-04:00 New_York', '`http://x`', '[1,2]', '{a:1 b}', 'C(1,2)', 'Span("x")', '<<\nver:"3.0"\na\n1\n>>', 'INF', '-INF', 'NaN', '1h');
const zincGrid = fc
  .tuple(fc.uniqueArray(name, { minLength: 1, maxLength: 3 }), fc.array(fc.array(zincVal, { minLength: 1, maxLength: 3 }), { maxLength: 3 }), fc.array(fc.tuple(name, zincVal), { maxLength: 2 }))
  .map(([cols, rows, meta]) => `ver:"3.0"${meta.map(([k, v]) => ` ${k}:${v}`).join('')}\n${cols.join(',')}\n${rows.map((r) => r.slice(0, cols.length).join(',')).join('\n')}\n`);

// ---- filters and ranges ----
const { filter } = fc.letrec<{ filter: string }>((tie) => ({
  filter: fc.oneof(
    { depthSize: 'small' },
    name,
    fc.tuple(name, fc.constantFrom('==', '!=', '<', '<=', '>', '>='), fc.constantFrom('1', '72.5°F', '"x"', '@p1', '2024-01-01', 'true', '`u`')).map(([a, op, v]) => `${a} ${op} ${v}`),
    fc.tuple(name, fc.constantFrom('AHU', '(a+)+$', '^(a|aa)+$', '(a)\\1', 'a(?=b)', '[', '\\', '.*', '(?i)x', '(?<=a)b')).map(([a, re]) => `${a} =~ /${re}/`),
    fc.tuple(name, name).map(([a, b]) => `${a}->${b}`),
    tie('filter').map((f) => `not ${f}`),
    tie('filter').map((f) => `(${f})`),
    fc.tuple(tie('filter'), fc.constantFrom('and', 'or'), tie('filter')).map(([a, op, b]) => `${a} ${op} ${b}`),
  ),
}));
const range = fc.oneof(
  fc.constantFrom('today', 'yesterday', 'first', 'last', '2024-03-10', '2024-03-10,2024-03-11', '2024-03-10T00:00:00Z UTC', '2024-03-10T00:00:00Z UTC,2024-03-11T00:00:00Z UTC', '2024-03-11,2024-03-10', 'tomorrow', ''),
  fc.string({ maxLength: 40 }),
);

// ---- each op's own request shape (JSON v3), with fuzzed values ----
const ref = fc.oneof(fc.constantFrom('r:p1', 'r:hq.p1', 'r:hq', 'r:nope', 'r:', 'r:hq.p1.x', 'r:@'), fc.string({ maxLength: 8 }).map((x) => `r:${x}`));
// deleteRec by id: never the fixture's site or point (their loss would blunt every later case).
const goneRef = fc.constantFrom('r:nope', 'r:', 'r:@', 'r:hq', 'r:hq.nope');
const ts = fc.oneof(fc.constantFrom('t:2024-03-10T03:00:00-04:00 New_York', 't:2024-03-10T07:00:00Z UTC', 't:2024-03-10T07:00:00Z', 't:9999-99-99T00:00:00Z UTC'), fc.date({ min: new Date('2000-01-01'), max: new Date('2030-01-01'), noInvalidDate: true }).map((d) => `t:${d.toISOString()} UTC`));
// Mostly values that decode, so requests get past the decoder to the op (and some are taken,
// the rest refused deep inside, where a half-done write would show); now and then any value.
const good = fc.constantFrom('m:', 's:x', 's:', 'n:1', 'n:72.5 °F', 'n:-3', 'r:hq', 'r:p1', 'r:hq.p1', 't:2024-03-10T07:00:00Z UTC', 'd:2024-03-10', 's:Number', 's:UTC');
const val = fc.oneof({ arbitrary: good, weight: 4 }, { arbitrary: value, weight: 1 });
const grid1 = (meta: Record<string, unknown>, rows: Record<string, unknown>[]): string => {
  const cols = [...new Set(rows.flatMap((r) => Object.keys(r)))];
  return JSON.stringify({ meta: { ver: '3.0', ...meta }, cols: (cols.length > 0 ? cols : ['empty']).map((n) => ({ name: n })), rows });
};
const SHAPED: Record<OpName, fc.Arbitrary<string>> = {
  read: fc.oneof(fc.array(ref, { minLength: 1, maxLength: 3 }).map((ids) => grid1({}, ids.map((id) => ({ id })))), fc.tuple(filter, val).map(([f, limit]) => grid1({}, [{ filter: `s:${f}`, limit }]))),
  // A primary marker on most rows (a record needs one), the other tags fuzzed.
  createRec: fc
    .array(fc.tuple(fc.constantFrom('site', 'equip', 'point', 'space', 'nothing'), fc.dictionary(name, val, { maxKeys: 3 })), { minLength: 1, maxLength: 2 })
    .map((rows) => grid1({}, rows.map(([primary, tags]) => ({ ...tags, [primary]: 'm:' })))),
  updateRec: fc.tuple(ref, fc.dictionary(name, val, { maxKeys: 3 })).map(([id, tags]) => grid1({}, [{ ...tags, id }])),
  deleteRec: fc.array(goneRef, { minLength: 1, maxLength: 2 }).map((ids) => grid1({}, ids.map((id) => ({ id })))),
  hisRead: fc.tuple(ref, range).map(([id, r]) => grid1({}, [{ id, range: `s:${r}` }])),
  hisWrite: fc.tuple(fc.oneof(fc.constant('r:hq.p1'), ref), fc.array(fc.tuple(ts, fc.oneof(fc.constantFrom('n:1', 'n:72.5', 'n:-3'), val)), { maxLength: 3 })).map(([id, rows]) => grid1({ id }, rows.map(([t, val]) => ({ ts: t, val })))),
  hisDelete: fc.tuple(ref, range).map(([id, r]) => grid1({}, [{ id, range: `s:${r}` }])),
  watchSub: fc.tuple(val, val, fc.array(ref, { maxLength: 2 })).map(([watchDis, lease, ids]) => grid1({ watchDis, lease }, ids.map((id) => ({ id })))),
  watchPoll: fc.tuple(val, fc.boolean()).map(([watchId, refresh]) => grid1({ watchId, ...(refresh ? { refresh: 'm:' } : {}) }, [])),
  watchUnsub: fc.tuple(val, fc.boolean(), fc.array(ref, { maxLength: 2 })).map(([watchId, close, ids]) => grid1({ watchId, ...(close ? { close: 'm:' } : {}) }, ids.map((id) => ({ id })))),
  pointWrite: fc.tuple(ref, val, val, val).map(([id, level, val, duration]) => grid1({}, [{ id, level, val, who: 's:fuzz', duration }])),
  pointWriteAudit: ref.map((id) => grid1({}, [{ id }])),
  learn: fc.dictionary(name, val, { maxKeys: 2 }).map((row) => grid1({}, [row])),
};

interface Case {
  op: OpName;
  contentType: string;
  body: string;
}

const cases: fc.Arbitrary<Case> = fc.oneof(
  // Each op's own shape, as is (many get past the decoder; some are taken) and mutated.
  { arbitrary: fc.constantFrom(...OPS).chain((op) => SHAPED[op].map((body) => ({ op, contentType: 'application/json', body }))), weight: 2 },
  { arbitrary: fc.constantFrom(...OPS).chain((op) => mutated(SHAPED[op]).map((body) => ({ op, contentType: 'application/json', body }))), weight: 2 },
  fc.tuple(fc.constantFrom(...OPS), mutated(jsonGrid.map((g) => JSON.stringify(g)))).map(([op, body]) => ({ op, contentType: 'application/json', body })),
  fc.tuple(fc.constantFrom(...OPS), mutated(zincGrid)).map(([op, body]) => ({ op, contentType: 'text/zinc', body })),
  // deleteRec by a filter that parses deletes what it matches (users and roles too, with an
  // administrator's token): its filters are fuzzed with a guard that matches nothing (and no parentheses of their own, which could undo it).
  fc.tuple(fc.constantFrom('read', 'deleteRec'), mutated(filter)).map(([op, f]) => ({
    op,
    contentType: 'application/json',
    body: JSON.stringify({ meta: { ver: '3.0' }, cols: [{ name: 'filter' }], rows: [{ filter: `s:${op === 'deleteRec' ? `(${f.replace(/[()]/g, '')}) and fuzzNever` : f}` }] }),
  })),
  mutated(range).map((r) => ({ op: 'hisRead' as const, contentType: 'application/json', body: JSON.stringify({ meta: { ver: '3.0' }, cols: [{ name: 'id' }, { name: 'range' }], rows: [{ id: 'r:hq.p1', range: `s:${r}` }] }) })),
);

/**
 * Everything a request could change, in one answer: every record (users, roles and policies
 * included) with every tag, `mod` and the history statistics (`hisSize`, ...) among them, rows
 * sorted. Compared around each refused request of every op.
 */
async function snapshot(r: Running): Promise<string> {
  const a = await request(r.base, '/api/read?filter=id', { headers: { ...r.auth, accept: 'text/zinc' } });
  return `${a.status}\n${a.text.split('\n').slice(2).sort().join('\n')}`;
}

t.test('every op answers hostile and broken grids, filters and ranges without a 5xx', async (t) => {
  // 3,000 cases take about 30-40 s on this busy 2-core machine (tap's limit per file is 300 s,
  // .taprc); HAYLOFT_FUZZ_RUNS=20000 for a longer run.
  const r = await startApp(t, { env: { HAYLOFT_LOG_LEVEL: 'warn' } });
  const site = await postGrid(r.base, 'createRec', gridOf({ site: MARKER, name: 'hq', dis: 'HQ' }), { headers: r.auth });
  const siteId = (site.grid?.first()?.get('id') as HRef).id;
  await postGrid(r.base, 'createRec', gridOf({ point: MARKER, his: MARKER, cur: MARKER, kind: 'Number', tz: 'UTC', name: 'p1', siteRef: HRef.of(siteId), dis: 'a'.repeat(40) }), { headers: r.auth });
  let failures = 0;
  let refused = 0;
  const taken = new Map<string, number>();
  await fc.assert(
    fc.asyncProperty(cases, async (c) => {
      const before = await snapshot(r);
      const a = await request(r.base, `/api/${c.op}`, { method: 'POST', headers: { ...r.auth, 'content-type': c.contentType, accept: 'application/json' }, body: c.body });
      if (a.status >= 500) return false;
      if (a.status < 400) taken.set(c.op, (taken.get(c.op) ?? 0) + 1);
      if (a.status >= 400) {
        refused++;
        const meta = a.grid?.meta;
        if (meta?.get('err') !== MARKER || typeof meta.get('errCode') !== 'string') return false;
        // Nothing changed by a refused request, whatever the op.
        if ((await snapshot(r)) !== before) return false;
      }
      const about = await request(r.base, '/api/about', { headers: r.auth });
      return about.status === 200;
    }),
    { seed: SEED, numRuns: Number(process.env.HAYLOFT_FUZZ_RUNS ?? 3000), endOnFailure: true },
  ).catch((e: unknown) => {
    failures++;
    t.fail(String(e));
  });
  t.comment(`taken, by op: ${[...taken].map(([op, n]) => `${op} ${n}`).join(', ')}`);
  t.equal(failures, 0, 'no counterexample');
  t.ok(refused > 100, `most cases are refused, each with an error grid (${refused})`);
  t.ok((taken.get('createRec') ?? 0) > 0 && (taken.get('hisWrite') ?? 0) > 0, 'some writes are taken: refusals are checked beside writes that change the state');
});
