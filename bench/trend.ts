/**
 * bench/trend: what the console's trend asks of the daemon for a point-year of one-minute samples
 * (525,600): the year view and the week view as the console reads them (one GraphQL query: MEAN,
 * MIN and MAX per bucket, 1 day and 30 min buckets, web/src/history.ts), a 12-hour zoom read raw
 * with hisRead, and as the baseline in the same run the raw hisRead of the whole year, which is
 * what the chart would need without the store's aggregates.
 *
 *   npm run bench -- trend [--rounds N] [--no-record]
 *
 * The daemon is its own process, started by its bin (`hayloft serve` on the bundle dist-bench/dist/cli.js); this process
 * is the client (fetch, reading the whole answer). Rounds are interleaved, medians reported.
 */
import { hasFlag, loginDaemon, machineLine, median, numberArg, recordSection, startDaemon, stopDaemon } from './harness.js';

const ROUNDS = numberArg('--rounds', 5);
const YEAR = 525_600;
const T0 = Date.UTC(2025, 0, 1);
const sensor = (i: number): number => Math.round((21 + 3 * Math.sin(i / 720) + ((i * 7919) % 7) / 10) * 10) / 10;

// The console's query (web/src/history.ts), verbatim.
const QUERY = `query Trend($id: String!, $start: iso8601!, $end: iso8601!, $units: duration!, $size: Int!) {
  haystack { entity(id: $id) { history(rangeAbsolute: { start: $start, end: $end }) {
    mean: aggregate(function: MEAN, groupBy: { groupByUnits: $units, groupBySize: $size, fill: NONE }) { ...series }
    low: select(function: MIN, groupBy: { groupByUnits: $units, groupBySize: $size, fill: NONE }) { ...series }
    high: select(function: MAX, groupBy: { groupByUnits: $units, groupBySize: $size, fill: NONE }) { ...series }
  } } }
}
fragment series on History { timeSeries { dataPoints { time valueKind { ... on Number { value } } } } }`;

const daemon = await startDaemon();
const base = daemon.base;
try {
  const token = await loginDaemon(base);
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json' };
  const post = async (p: string, body: string): Promise<{ ms: number; bytes: number; text: string }> => {
    const t = performance.now();
    const res = await fetch(`${base}${p}`, { method: 'POST', headers, body });
    const text = await res.text();
    const ms = performance.now() - t;
    if (res.status !== 200) throw new Error(`${p}: ${res.status} ${text.slice(0, 300)}`);
    return { ms, bytes: Buffer.byteLength(text), text };
  };

  await post('/api/createRec', JSON.stringify({ meta: { ver: '3.0' }, cols: ['site', 'name', 'tz'].map((name) => ({ name })), rows: [{ site: 'm:', name: 's:site', tz: 's:UTC' }] }));
  await post(
    '/api/createRec',
    JSON.stringify({ meta: { ver: '3.0' }, cols: ['point', 'his', 'name', 'kind', 'unit', 'tz', 'siteRef'].map((name) => ({ name })), rows: [{ point: 'm:', his: 'm:', name: 's:temp', kind: 's:Number', unit: 's:°C', tz: 's:UTC', siteRef: 'r:site' }] }),
  );
  const id = 'site.temp';
  for (let from = 0; from < YEAR; from += 100_000) {
    const rows: string[] = [];
    for (let i = from; i < Math.min(YEAR, from + 100_000); i++) rows.push(`{"ts":"t:${new Date(T0 + i * 60_000).toISOString().replace('.000Z', 'Z')} UTC","val":"n:${sensor(i)} °C"}`);
    await post('/api/hisWrite', `{"meta":{"ver":"3.0","id":"r:${id}"},"cols":[{"name":"ts"},{"name":"val"}],"rows":[${rows.join(',')}]}`);
  }

  const end = T0 + YEAR * 60_000;
  const iso = (ms: number): string => new Date(ms).toISOString();
  const hisRange = (a: number, b: number): string => `${iso(a).replace('.000Z', 'Z')} UTC,${iso(b).replace('.000Z', 'Z')} UTC`;
  const gql = (a: number, b: number, units: string, size: number): string => JSON.stringify({ query: QUERY, variables: { id, start: iso(a), end: iso(b), units, size } });
  const his = (a: number, b: number): string => JSON.stringify({ meta: { ver: '3.0' }, cols: [{ name: 'id' }, { name: 'range' }], rows: [{ id: `r:${id}`, range: `s:${hisRange(a, b)}` }] });
  const cases: Record<string, { path: string; body: string; what: string }> = {
    year: { path: '/graphql', body: gql(T0, end, 'DAY', 1), what: 'year view: GraphQL mean/min/max per day (365 buckets)' },
    week: { path: '/graphql', body: gql(end - 7 * 86_400_000, end, 'MINUTE', 30), what: 'week view: GraphQL mean/min/max per 30 min (336 buckets)' },
    zoom: { path: '/api/hisRead', body: his(end - 12 * 3_600_000, end), what: '12-hour zoom: hisRead raw (720 samples)' },
    raw: { path: '/api/hisRead', body: his(T0, end), what: 'baseline: hisRead raw of the year (525,600 samples)' },
  };
  const times: Record<string, number[]> = {};
  const bytes: Record<string, number> = {};
  for (let r = 0; r < ROUNDS + 1; r++) {
    for (const [k, c] of Object.entries(cases)) {
      const a = await post(c.path, c.body);
      if (c.path === '/graphql' && a.text.includes('"errors"')) throw new Error(`${k}: ${a.text.slice(0, 300)}`);
      bytes[k] = a.bytes;
      if (r > 0) (times[k] ??= []).push(a.ms);
    }
  }
  const med = (k: string): number => median(times[k] as number[]);
  const lines = [
    `Run: \`npm run bench -- trend\` on ${machineLine()}; ${ROUNDS} rounds after one warm-up, interleaved, medians. The daemon is its own process (\`hayloft serve\`, its bin); the client (this process, fetch) reads each whole answer over loopback. One Number point with a year of one-minute samples (525,600, written with hisWrite).`,
    '',
    '| what the console asks | median | answer | vs raw year |',
    '|---|---:|---:|---:|',
    ...Object.entries(cases).map(([k, c]) => `| ${c.what} | ${med(k).toFixed(0)} ms | ${((bytes[k] as number) / 1024).toFixed(0)} KB | ${k === 'raw' ? '1' : (med(k) / med('raw')).toFixed(2)} |`),
  ];
  const table = lines.join('\n');
  console.log(table);
  if (!hasFlag('--no-record')) recordSection('trend', table);
} finally {
  await stopDaemon(daemon);
}
