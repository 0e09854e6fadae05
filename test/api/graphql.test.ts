/**
 * GraphQL at /graphql against a real Hayloft: WideSky's queries with a plain HTTP client
 * (fetch), permissions, limits, and history aggregates checked against values computed here
 * from the raw samples, for points in zones with DST changes inside the range.
 */
import t from 'tap';
import { HDict, HNumber, HRef, MARKER } from '../../src/haystack/values.js';
import { errOf, gridOf, postGrid } from '../helpers/http.js';
import { prng } from '../helpers/prng.js';
import { startApp, type Running } from '../helpers/app.js';

interface Answer {
  status: number;
  body: { data?: Record<string, unknown> | null; errors?: { message: string; extensions?: { errCode?: string } }[] };
}

async function gql(s: Running, query: string, headers: Record<string, string> = s.auth, variables?: Record<string, unknown>): Promise<Answer> {
  const res = await fetch(`${s.base}/graphql`, {
    method: 'POST',
    headers: { ...headers, 'content-type': 'application/json' },
    body: JSON.stringify({ query, ...(variables === undefined ? {} : { variables }) }),
  });
  return { status: res.status, body: (await res.json()) as Answer['body'] };
}

async function model(s: Running): Promise<{ site: string; points: string[] }> {
  const [site] = await s.app.model.create([HDict.of({ site: MARKER, name: 'hq', dis: 'HQ', tz: 'Sydney', area: new HNumber(500, 'm²') })]);
  const siteRef = site?.get('id') as HRef;
  const [equip] = await s.app.model.create([HDict.of({ equip: MARKER, name: 'ahu', dis: 'AHU', siteRef })]);
  const equipRef = equip?.get('id') as HRef;
  const pts = await s.app.model.create([
    HDict.of({ point: MARKER, his: MARKER, kind: 'Number', name: 'syd', dis: 'Sydney temp', tz: 'Sydney', unit: '°C', siteRef, equipRef }),
    HDict.of({ point: MARKER, his: MARKER, kind: 'Number', name: 'nyc', dis: 'New York temp', tz: 'New_York', unit: '°F', siteRef, equipRef }),
    HDict.of({ point: MARKER, his: MARKER, kind: 'Bool', name: 'run', tz: 'Sydney', siteRef, equipRef }),
  ]);
  return { site: siteRef.id, points: pts.map((p) => (p.get('id') as HRef).id) };
}

t.test('entity queries as WideSky answers them', async (t) => {
  const s = await startApp(t);
  const { site, points } = await model(s);
  const a = await gql(s, '{ haystack { search(filter: "point", limit: 0) { count entity { id name description } } } }');
  t.equal(a.status, 200);
  const search = (a.body.data?.haystack as { search: { count: number; entity: { id: string; name: string; description: string }[] } }).search;
  t.equal(search.count, 3);
  t.same(search.entity.map((e) => e.id).sort(), [...points].sort(), 'ids are bare uuids');
  t.ok(search.entity.some((e) => e.name === 'syd' && e.description === 'Sydney temp'));

  const one = await gql(s, `{ haystack { entity(id: "hq.ahu.syd") { id name(fullyQualified: true) units tags(tagFilter: ["unit", "siteRef", "his", "kind"]) { name value kindValue { __typename ... on Ref { ref } ... on Number { value } } } refEntity(refTag: "siteRef") { name } ref(path: "equipRef->siteRef") { count entity { id } } } } }`);
  const e = (one.body.data?.haystack as { entity: Record<string, unknown> }).entity;
  t.equal(e.name, 'hq.ahu.syd', 'an entity by fully qualified name');
  t.equal(e.units, '°C');
  t.same(e.tags, [
    { name: 'his', value: 'marker', kindValue: { __typename: 'Marker' } },
    { name: 'kind', value: 'Number', kindValue: { __typename: 'Str' } },
    { name: 'siteRef', value: site, kindValue: { __typename: 'Ref', ref: site } },
    { name: 'unit', value: '°C', kindValue: { __typename: 'Str' } },
  ]);
  t.same(e.refEntity, { name: 'hq' });
  t.same(e.ref, { count: 1, entity: [{ id: site }] }, 'ref follows a path');

  const rel = await gql(s, `{ haystack { search(filter: "site") { search(filter: "point", whereTag: "siteRef") { count } tagSummary(tagFilter: ["area", "tz"]) { name count kind values(distinct: true) } units } } }`);
  t.same(rel.body.data, {
    haystack: {
      search: {
        search: { count: 3 },
        tagSummary: [
          { name: 'area', count: 1, kind: 'Number', values: ['500 m²'] },
          { name: 'tz', count: 1, kind: 'Str', values: ['Sydney'] },
        ],
        units: null,
      },
    },
  });
  const missing = await gql(s, '{ haystack { entity(id: "nowhere.at.all") { id } } }');
  t.same(missing.body.data, { haystack: { entity: null } }, 'an unknown id is null');

  const bad = await gql(s, '{ haystack { search(filter: "point and") { count } } }');
  t.equal(bad.body.errors?.[0]?.extensions?.errCode, 'HL_BAD_FILTER', 'a filter error carries its code');

  const intro = await gql(s, '{ __schema { queryType { name } types { name } } }');
  t.equal((intro.body.data?.__schema as { queryType: { name: string } }).queryType.name, 'Query', 'introspection is on');
  const unauth = await gql(s, '{ haystack { search(filter: "site") { count } } }', {});
  t.equal(unauth.status, 401, 'no token: 401 as REST');
});

t.test('permissions and impersonation as REST', async (t) => {
  const s = await startApp(t);
  await model(s);
  const [pol] = await s.app.model.create([HDict.of({ actionPolicy: MARKER, name: 'nycOnly', permissions: ['MODEL_READ'], filter: 'name == "nyc" or site' })]);
  const [role] = await s.app.model.create([HDict.of({ role: MARKER, name: 'nycReader', actionPolicyRefs: [pol?.get('id') as HRef] })]);
  const uid = await s.app.auth.addUser('nyc@example.com', 'nyc-password-1', (role?.get('id') as HRef).id);
  const login = await s.login('nyc@example.com', 'nyc-password-1');
  const h = { authorization: `Bearer ${String(login.body.access_token)}` };
  const a = await gql(s, '{ haystack { search(filter: "point") { count entity { name } } } }', h);
  t.same(a.body.data, { haystack: { search: { count: 1, entity: [{ name: 'nyc' }] } } }, 'only readable entities are found');
  const his = await gql(s, '{ haystack { search(filter: "point") { history(rangeRelative: {size: 1, timeUnit: DAY}) { timeSeries { dataPoints { time } } } } } }', h);
  t.equal(his.body.errors?.[0]?.extensions?.errCode, 'HL_FORBIDDEN', 'history needs HIS_READ');
  const imp = await gql(s, '{ haystack { search(filter: "point") { count } } }', { ...s.auth, 'x-impersonate': uid });
  t.same(imp.body.data, { haystack: { search: { count: 1 } } }, 'X-IMPERSONATE applies');
});

t.test('history of a point hisRead refuses is refused the same way (one set of checks, his-points.ts)', async (t) => {
  const s = await startApp(t);
  const { points } = await model(s);
  const made = await s.app.model.create([
    HDict.of({ point: MARKER, kind: 'Number', name: 'sp', unit: '°C' }),
    HDict.of({ point: MARKER, his: MARKER, name: 'nokind' }),
  ]);
  const [noHis, noKind] = made.map((r) => (r.get('id') as HRef).id) as [string, string];
  const history = (id: string): string => `{ haystack { entity(id: "${id}") { history(rangeRelative: {size: 1, timeUnit: DAY}) { timeSeries { dataPoints { time } } } } } }`;
  for (const [what, id, code, why] of [
    ['a point without his', noHis, 'HL_BAD_REQUEST', /is not a historized point/],
    ['a point without kind', noKind, 'HL_INVALID_RECORD', /no kind tag/],
  ] as const) {
    const rest = await postGrid(s.base, 'hisRead', gridOf({ id: HRef.of(id), range: 'today' }), { headers: s.auth });
    t.equal(errOf(rest)?.code, code, `hisRead refuses ${what}`);
    const a = await gql(s, history(id));
    t.equal(a.body.errors?.[0]?.extensions?.errCode, code, `GraphQL history refuses ${what} as hisRead does`);
    t.match(a.body.errors?.[0]?.message, why);
  }
  const ok = await gql(s, history(points[0] as string));
  t.equal(ok.body.errors, undefined, 'a historized point is read');
});

t.test('limits: depth, fields, history points; 2,000 aliased searches pass', async (t) => {
  const s = await startApp(t);
  const { points } = await model(s);
  let deep = 'id';
  for (let i = 0; i < 12; i++) deep = `ref(path: "siteRef") { entity { ${deep} } }`;
  const d = await gql(s, `{ haystack { search(filter: "point") { ${deep} } } }`);
  t.equal(d.status, 400);
  t.equal(d.body.errors?.[0]?.extensions?.errCode, 'HL_GRAPHQL_LIMIT');
  t.match(d.body.errors?.[0]?.message, /levels deep/);

  const many = Array.from({ length: 2000 }, (_, i) => `filter${i}:search(filter: "point and name == \\"syd\\"", limit: 0) { entity { tags { name value kindValue { __typename } } } }`).join('\n');
  const m = await gql(s, `{ haystack { ${many} } }`);
  t.equal(m.status, 200, '2,000 aliased searches in one query');
  t.equal(Object.keys(m.body.data?.haystack as object).length, 2000);

  const frag = `fragment T on Tag { name value kindValue { __typename } } { haystack { ${Array.from({ length: 9000 }, (_, i) => `a${i}:entity(id: "${points[0]}") { tags { ...T } }`).join(' ')} } }`;
  const f = await gql(s, frag);
  t.equal(f.body.errors?.[0]?.extensions?.errCode, 'HL_GRAPHQL_LIMIT', 'fields counted through fragments');

  const samples = Array.from({ length: 3000 }, (_, i) => ({ ts: Date.UTC(2024, 0, 1) + i * 60_000, val: i }));
  await s.app.history.write(points[0] as string, 'Number', samples);
  await s.app.history.write(points[1] as string, 'Number', samples);
  // The default bound is 100,000 points: ask 200,000 one-second buckets.
  const many2 = await gql(s, `{ haystack { search(filter: "point and kind == \\"Number\\"") { history(rangeAbsolute: {start: "2024-01-01T00:00:00Z", end: "2024-01-03T08:00:00Z"}) { aggregate(function: MEAN, groupBy: {groupByUnits: SECOND, groupBySize: 1}) { timeSeries { dataPoints { time } } } } } } }`);
  t.equal(many2.body.errors?.[0]?.extensions?.errCode, 'HL_GRAPHQL_LIMIT', 'history points per answer are bounded');
  const raw = await gql(s, `{ haystack { search(filter: "point and kind == \\"Number\\"") { history(rangeAbsolute: {start: "2024-01-01T00:00:00Z", end: "2024-01-03T08:00:00Z"}) { timeSeries { dataPoints { time value } } } } } }`);
  const ts = (raw.body.data?.haystack as { search: { history: { timeSeries: { dataPoints: unknown[] }[] } } }).search.history.timeSeries;
  t.same(ts.map((x) => x.dataPoints.length), [3000, 3000], 'raw samples, one series per point');
});

/** Bucket figures computed naively from the raw samples: the reference. */
function expected(samples: { ts: number; val: number }[], f: string, size: number, offset: number, start: number, end: number): Map<number, number | null> {
  const by = new Map<number, { ts: number; val: number }[]>();
  for (const s of samples) {
    if (s.ts < start || s.ts >= end) continue;
    const b = Math.floor((s.ts - offset) / size) * size + offset;
    by.set(b, [...(by.get(b) ?? []), s]);
  }
  const out = new Map<number, number | null>();
  for (const [b, xs] of by) {
    const v = xs.map((x) => x.val);
    const sum = v.reduce((a, c) => a + c, 0);
    const mean = sum / v.length;
    const value =
      f === 'COUNT' ? v.length
      : f === 'SUM' ? sum
      : f === 'MEAN' ? mean
      : f === 'MIN' ? Math.min(...v)
      : f === 'MAX' ? Math.max(...v)
      : f === 'SPREAD' ? Math.max(...v) - Math.min(...v)
      : f === 'FIRST' ? (xs[0] as { val: number }).val
      : f === 'LAST' ? (xs[xs.length - 1] as { val: number }).val
      : v.length < 2 ? null : Math.sqrt(v.reduce((a, c) => a + (c - mean) ** 2, 0) / (v.length - 1));
    out.set(b, value);
  }
  return out;
}

t.test('aggregates across DST changes and zones equal those computed from the raw samples', async (t) => {
  const s = await startApp(t);
  const { points } = await model(s);
  const rnd = prng(17);
  // Sydney leaves DST on 2024-04-07 (03:00 -> 02:00 local); New York enters it on 2024-03-10.
  const cases = [
    { id: points[0] as string, start: Date.UTC(2024, 3, 5, 7), end: Date.UTC(2024, 3, 9, 5) },
    { id: points[1] as string, start: Date.UTC(2024, 2, 8, 13), end: Date.UTC(2024, 2, 12, 2) },
  ];
  for (const c of cases) {
    const samples: { ts: number; val: number }[] = [];
    // Irregular times (1 to 14 minutes apart) and a gap of 5 hours, to leave buckets empty.
    for (let ts = c.start - 3_600_000; ts < c.end + 3_600_000; ts += 60_000 * (1 + Math.floor(rnd() * 14))) {
      if (ts > c.start + 30 * 3_600_000 && ts < c.start + 35 * 3_600_000) continue;
      samples.push({ ts, val: Math.round((15 + 10 * rnd()) * 1000) / 1000 });
    }
    await s.app.history.write(c.id, 'Number', samples);
    const iso = (ms: number): string => new Date(ms).toISOString();
    const groupings = [
      { units: 'HOUR', size: 1, ms: 3_600_000, offset: '', off: 0 },
      { units: 'MINUTE', size: 90, ms: 5_400_000, offset: ', offset: {direction: BACK, offsetUnits: MINUTE, offsetSize: 20}', off: -1_200_000 },
      { units: 'DAY', size: 1, ms: 86_400_000, offset: ', offset: {direction: FORWARD, offsetUnits: HOUR, offsetSize: 14}', off: 14 * 3_600_000 },
    ];
    for (const g of groupings) {
      for (const [field, f] of [['aggregate', 'COUNT'], ['aggregate', 'MEAN'], ['aggregate', 'SUM'], ['aggregate', 'SPREAD'], ['aggregate', 'STDDEV'], ['select', 'MIN'], ['select', 'MAX'], ['select', 'FIRST'], ['select', 'LAST']] as const) {
        const q = `{ haystack { entity(id: "${c.id}") { history(rangeAbsolute: {start: "${iso(c.start)}", end: "${iso(c.end)}"}) { ${field}(function: ${f}, groupBy: {groupByUnits: ${g.units}, groupBySize: ${g.size}, fill: NONE${g.offset}}) { timeSeries { dataPoints { time value } } } } } } }`;
        const a = await gql(s, q);
        const got = (a.body.data?.haystack as { entity: { history: Record<string, { timeSeries: { dataPoints: { time: number; value: string | null }[] }[] }> } } | undefined)?.entity.history[field]?.timeSeries[0]?.dataPoints;
        const want = expected(samples, f, g.ms, g.off, c.start, c.end);
        const ok =
          got !== undefined &&
          got.length === want.size &&
          got.every((p) => {
            const w = want.get(p.time);
            if (w === undefined) return false;
            if (w === null || p.value === null) return w === p.value;
            return Math.abs(Number(p.value) - w) <= 1e-9 * Math.max(1, Math.abs(w));
          });
        t.ok(ok, `${f} by ${g.size} ${g.units}${g.off === 0 ? '' : ` offset ${g.off / 60_000} min`} (${c.id === points[0] ? 'Sydney' : 'New York'}): ${want.size} buckets`);
        if (!ok) t.comment(JSON.stringify({ got: got?.slice(0, 5), want: [...want].slice(0, 5), errors: a.body.errors }));
      }
    }
  }
});

t.test('fill options and whole-range aggregates', async (t) => {
  const s = await startApp(t);
  const { points } = await model(s);
  const h0 = Date.UTC(2024, 5, 1);
  // Hours 0, 1 and 4 hold samples; 2 and 3 are empty.
  await s.app.history.write(points[0] as string, 'Number', [
    { ts: h0 + 10 * 60_000, val: 10 },
    { ts: h0 + 3_600_000 + 60_000, val: 20 },
    { ts: h0 + 4 * 3_600_000 + 60_000, val: 50 },
  ]);
  await s.app.history.write(points[2] as string, 'Bool', [
    { ts: h0 + 60_000, val: true },
    { ts: h0 + 120_000, val: false },
  ]);
  const q = (fill: string): string =>
    `{ haystack { entity(id: "${points[0]}") { history(rangeAbsolute: {start: "2024-06-01T00:00:00Z", end: "2024-06-01T05:00:00Z"}) { aggregate(function: MEAN, groupBy: {groupByUnits: HOUR, groupBySize: 1, fill: ${fill}}) { timeSeries { dataPoints { time value } } } } } } }`;
  const values = async (fill: string): Promise<(string | null)[]> => {
    const a = await gql(s, q(fill));
    return ((a.body.data?.haystack as { entity: { history: { aggregate: { timeSeries: { dataPoints: { value: string | null }[] }[] } } } }).entity.history.aggregate.timeSeries[0]?.dataPoints ?? []).map((p) => p.value);
  };
  t.same(await values('NONE'), ['10', '20', '50']);
  t.same(await values('NULLVALUE'), ['10', '20', null, null, '50']);
  t.same(await values('PREVIOUS'), ['10', '20', '20', '20', '50']);
  t.same(await values('LINEAR'), ['10', '20', '30', '40', '50']);

  const whole = await gql(s, `{ haystack { entity(id: "${points[0]}") { history(rangeAbsolute: {start: "2024-06-01T00:00:00Z", end: "2024-06-01T05:00:00Z"}) { mean: aggregate(function: MEAN) { timeSeries { dataPoints { time value } } } max: select(function: MAX) { timeSeries { dataPoints { time value valueKind { __typename ... on Number { value } } } } } } } } }`);
  const hist = (whole.body.data?.haystack as { entity: { history: Record<string, { timeSeries: { dataPoints: unknown[] }[] }> } }).entity.history;
  t.same(hist.mean?.timeSeries[0]?.dataPoints, [{ time: h0, value: '26.666666666666668' }], 'an aggregate without groupBy is timed at the range start');
  t.same(hist.max?.timeSeries[0]?.dataPoints, [{ time: h0 + 4 * 3_600_000 + 60_000, value: '50', valueKind: { __typename: 'Number', value: 50 } }], 'a selector keeps its sample time');

  const b = await gql(s, `{ haystack { entity(id: "${points[2]}") { history(rangeAbsolute: {start: "2024-06-01T00:00:00Z", end: "2024-06-01T05:00:00Z"}) { select(function: LAST) { timeSeries { dataPoints { value valueKind { __typename ... on Bool { bool } } } } } } } } }`);
  t.same((b.body.data?.haystack as { entity: { history: { select: { timeSeries: unknown[] } } } }).entity.history.select.timeSeries, [{ dataPoints: [{ value: 'false', valueKind: { __typename: 'Bool', bool: false } }] }]);
  const median = await gql(s, `{ haystack { entity(id: "${points[0]}") { history(rangeRelative: {size: 1, timeUnit: DAY}) { aggregate(function: MEDIAN) { timeSeries { dataPoints { value } } } } } } }`);
  t.match(median.body.errors?.[0]?.message, /MEDIAN is not supported/, 'functions that need every sample are refused clearly');
  const noRange = await gql(s, `{ haystack { entity(id: "${points[0]}") { history { timeSeries { dataPoints { value } } } } } }`);
  t.equal(noRange.body.errors?.[0]?.extensions?.errCode, 'HL_BAD_RANGE');
});
