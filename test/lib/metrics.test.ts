import t from 'tap';
import { Metrics } from '../../src/lib/metrics.js';

t.test('requests and latency per op, read at scrape time in the Prometheus shapes', async (t) => {
  const m = new Metrics({ productVersion: '0.0.0' });
  m.request('read', 200, 0.0005);
  m.request('read', 200, 0.003);
  m.request('read', 500, 100);
  m.request('about', 200, 0.001);
  const text = await m.text();
  const line = (re: RegExp): string | undefined => text.split('\n').find((l) => re.test(l));
  t.match(line(/^hayloft_http_requests_total\{op="read",status="200"\}/), / 2$/);
  t.match(line(/^hayloft_http_requests_total\{op="read",status="500"\}/), / 1$/);
  t.match(text, /^# TYPE hayloft_http_request_duration_seconds histogram$/m);
  const bucket = (op: string, le: string): number => Number(line(new RegExp(`^hayloft_http_request_duration_seconds_bucket\\{le="${le.replace('+', '\\+')}",op="${op}"\\}`))?.split(' ')[1]);
  t.equal(bucket('read', '0.001'), 1, 'cumulative buckets');
  t.equal(bucket('read', '0.0025'), 1);
  t.equal(bucket('read', '0.005'), 2);
  t.equal(bucket('read', '30'), 2, 'above every bound: only in +Inf');
  t.equal(bucket('read', '+Inf'), 3);
  t.equal(bucket('about', '0.001'), 1, 'a bound is inclusive (le)');
  t.match(line(/^hayloft_http_request_duration_seconds_count\{op="read"\}/), / 3$/);
  t.equal(Number(line(/^hayloft_http_request_duration_seconds_sum\{op="read"\}/)?.split(' ')[1]), 100.0035);
  // Scrapes do not reset or double anything.
  t.equal(await m.text(), text);
  const json = await m.registry.getMetricsAsJSON();
  t.ok(json.some((x) => x.name === 'hayloft_http_request_duration_seconds' && String(x.type) === 'histogram'), 'also as JSON');
});
