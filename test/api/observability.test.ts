/**
 * Observability, end to end on the real App: `GET /api/health` without authentication, and
 * `GET /metrics` behind authentication (unless metricsOpen), read back through an independent
 * Prometheus text-format parser so the exposition itself is checked, not just grepped.
 */
import parsePrometheus from 'parse-prometheus-text-format';
import t from 'tap';
import { HDateTime, HNumber } from '../../src/haystack/values.js';
import { timeZone } from '../../src/haystack/tz.js';
import { startApp } from '../helpers/app.js';
import { until } from '../helpers/api-fixture.js';
import { ok } from '../helpers/his.js';
import { hisWorld } from '../helpers/his-world.js';

type Families = ReturnType<typeof parsePrometheus>;

async function scrape(base: string, headers: Record<string, string> = {}): Promise<{ status: number; type: string | null; families: Families; text: string }> {
  const res = await fetch(`${base}/metrics`, { headers });
  const text = await res.text();
  return { status: res.status, type: res.headers.get('content-type'), families: res.status === 200 ? parsePrometheus(text) : [], text };
}

/** The value of one sample (labels matched exactly), or undefined. */
function value(families: Families, name: string, labels: Record<string, string> = {}): number | undefined {
  const f = families.find((x) => x.name === name);
  const s = f?.metrics.find((m) => JSON.stringify(Object.entries(m.labels ?? {}).sort()) === JSON.stringify(Object.entries(labels).sort()));
  return s?.value === undefined ? undefined : Number(s.value);
}

t.test('GET /api/health: no authentication, liveness and storage state', async (t) => {
  const r = await startApp(t);
  const res = await fetch(`${r.base}/api/health`);
  t.equal(res.status, 200);
  t.match(res.headers.get('content-type'), /^application\/json/);
  t.equal(res.headers.get('cache-control'), 'no-store');
  const body = (await res.json()) as Record<string, unknown>;
  t.match(body, { ok: true, status: 'ok', uptimeSeconds: Number, storage: { status: 'open', formatVersion: 2, sizeBytes: Number } });
  t.ok((body.storage as { sizeBytes: number }).sizeBytes > 0, 'the store takes room on disk');
  t.notOk('version' in body || 'serverName' in body, 'nothing about the device beyond its state, for an unauthenticated caller');
  // `health` is a route, not an op: an op of that name would need authentication.
  const ops = await fetch(`${r.base}/api/ops`, { headers: r.auth });
  t.notMatch(await ops.text(), /"health"/);
});

t.test('GET /metrics: authenticated, Prometheus text format, the figures that matter', async (t) => {
  const { r, admin } = await hisWorld(t);
  const denied = await scrape(r.base);
  t.equal(denied.status, 401, 'closed without a token');

  // Traffic to count: two abouts, an unknown op, a history write of 5 samples.
  await fetch(`${r.base}/api/about`, { headers: r.auth });
  await fetch(`${r.base}/api/about`, { headers: r.auth });
  await fetch(`${r.base}/api/nope`, { headers: r.auth });
  const ny = timeZone('New_York');
  const t0 = Date.UTC(2024, 0, 1);
  ok(t, await admin.write('temp', [0, 1, 2, 3, 4].map((i) => [new HDateTime(t0 + i * 60_000, ny), HNumber.of(20 + i)] as const)), 'hisWrite');
  // A request is counted when its response closes, just after the client has it.
  await until(() => false, 50);

  const m = await scrape(r.base, r.auth);
  t.equal(m.status, 200, m.text.slice(0, 300));
  t.match(m.type, /^text\/plain; version=0\.0\.4/);
  t.ok(m.families.length >= 6, 'parsed by an independent parser');
  for (const f of m.families) t.ok(f.help.length > 0, `${f.name} has help text`);

  t.equal(value(m.families, 'hayloft_http_requests_total', { op: 'about', status: '200' }), 2, 'requests by op and status');
  t.equal(value(m.families, 'hayloft_http_requests_total', { op: 'unknown', status: '404' }), 1, 'an unknown op is one bounded label');
  t.equal(value(m.families, 'hayloft_http_requests_total', { op: 'metrics', status: '401' }), 1, 'the refused scrape');
  t.ok((value(m.families, 'hayloft_http_requests_total', { op: 'hisWrite', status: '200' }) ?? 0) >= 1);
  t.equal(value(m.families, 'hayloft_errors_total', { code: 'HL_UNKNOWN_OP' }), 1, 'errors by code');
  t.equal(value(m.families, 'hayloft_errors_total', { code: 'HL_UNAUTHORIZED' }), 1);
  const latency = m.families.find((f) => f.name === 'hayloft_http_request_duration_seconds');
  t.equal(latency?.type, 'HISTOGRAM', 'latency is a histogram');
  t.match(m.text, /^hayloft_http_request_duration_seconds_count\{op="about"\} 2$/m, 'latency per op');

  t.equal(value(m.families, 'hayloft_history_samples_written_total'), 5, 'history samples written');
  // hisWorld's points: none has a current value yet.
  t.equal(value(m.families, 'hayloft_points', { curStatus: 'none' }), 11, 'points by curStatus');
  t.ok((value(m.families, 'hayloft_store_size_bytes') ?? 0) > 0, 'LevelDB size on disk');
  // Flash wear: synced batches, what reached the disk, compaction, the open tails.
  t.ok((value(m.families, 'hayloft_history_syncs_total') ?? 0) >= 1, 'synced history batches (one fsync each)');
  t.ok((value(m.families, 'hayloft_process_disk_write_bytes_total') ?? -1) >= 0, 'bytes written to the disk');
  t.ok((value(m.families, 'hayloft_store_compaction_write_bytes_total') ?? -1) >= 0, 'bytes LevelDB compactions wrote');
  t.equal(value(m.families, 'hayloft_history_tail_samples'), 5, 'the samples in open tails');
  t.equal(value(m.families, 'hayloft_history_journal_entries'), 1, 'one journal entry holds them');
  t.equal(value(m.families, 'hayloft_info', { version: String((await (await fetch(`${r.base}/api/about`, { headers: r.auth })).json() as { rows: { productVersion: string }[] }).rows[0]?.productVersion).replace(/^s:/, '') }), 1);
  t.notOk(m.families.some((f) => f.name.startsWith('process_')), 'process metrics are for the daemon only');
  // The poller's figures are there from the start (no connector in this model).
  t.equal(value(m.families, 'hayloft_poll_reads_total'), 0, 'poll reads');
  t.equal(value(m.families, 'hayloft_poll_failures_total'), 0, 'poll failures');
  t.equal(value(m.families, 'hayloft_history_backlog_samples'), 0, 'collected samples waiting');
  t.ok(m.families.some((f) => f.name === 'hayloft_connectors'), 'connectors by connStatus');
});

t.test('metricsOpen: /metrics for anyone', async (t) => {
  const r = await startApp(t, { env: { HAYLOFT_METRICS_OPEN: 'true' } });
  const m = await scrape(r.base);
  t.equal(m.status, 200);
  t.ok(m.families.some((f) => f.name === 'hayloft_http_requests_total'));
});
