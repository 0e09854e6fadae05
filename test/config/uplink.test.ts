/**
 * The `uplink` section of the config file: defaults, every key checked, unknown keys refused,
 * credentials checked together, environment overrides for the address and credentials only, and
 * every problem reported at once with the others (as `uplink.<key>`), secrets never shown.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import t, { type Test } from 'tap';
import { type ConfigProblem, loadConfig, redactUplink } from '../../src/config/index.js';
import { parseFilter } from '../../src/haystack/filter.js';
import { findTimeZone } from '../../src/haystack/tz.js';
import { ErrorCodes, HayloftError } from '../../src/lib/errors.js';
import { tempDir } from '../helpers/tmp.js';

const zones = { host: () => 'UTC', known: (n: string) => findTimeZone(n) !== undefined };
const checkFilter = (text: string): string | null => {
  try {
    parseFilter(text);
    return null;
  } catch (e) {
    return (e as Error).message;
  }
};
const base = { zones, cwd: '/srv/hayloft', hostname: () => 'pi-42', checkFilter };

function file(t: Test, content: unknown): string {
  const p = path.join(tempDir(t), 'hayloft.json');
  writeFileSync(p, JSON.stringify(content));
  return p;
}

function problemsOf(t: Test, opts: Parameters<typeof loadConfig>[0]): ConfigProblem[] {
  try {
    loadConfig(opts);
  } catch (e) {
    t.ok(e instanceof HayloftError && e.code === ErrorCodes.BAD_CONFIG, 'HL_BAD_CONFIG');
    return (e as HayloftError).cause as ConfigProblem[];
  }
  t.fail('the config loaded');
  return [];
}

const minimal = { url: 'https://cloud.example.com/', clientId: 'edge', clientSecret: 's3cret', username: 'edge@example.com', password: 'pw-123456' };

t.test('no section: no uplink', async (t) => {
  t.equal(loadConfig({ ...base, env: {} }).uplink, null);
  t.equal(loadConfig({ ...base, env: { HAYLOFT_CONFIG: file(t, { port: 1 }) } }).uplink, null);
});

t.test('defaults of a minimal section', async (t) => {
  const c = loadConfig({ ...base, env: { HAYLOFT_CONFIG: file(t, { uplink: minimal }) } });
  t.same(c.uplink, {
    name: 'upstream',
    enabled: true,
    url: 'https://cloud.example.com',
    clientId: 'edge',
    clientSecret: 's3cret',
    username: 'edge@example.com',
    password: 'pw-123456',
    refreshToken: null,
    filter: 'his',
    createMissing: true,
    updateTags: true,
    batchSamples: 50_000,
    batchPoints: 1000,
    scanIntervalMs: 5000,
    retryMinMs: 1000,
    retryMaxMs: 300_000,
    timeoutMs: 60_000,
  });
  t.ok(Object.isFrozen(c.uplink), 'frozen');
  t.match(redactUplink(c.uplink!), { clientSecret: '(hidden)', password: '(hidden)', refreshToken: null, clientId: 'edge' }, 'redacted for printing');
});

t.test('a refresh token instead of a password; every key set', async (t) => {
  const up = { name: 'cloud-1', enabled: false, url: 'http://10.0.0.5:8080/haystack', clientId: 'edge', clientSecret: 's', refreshToken: 'abc', filter: 'his and siteRef->name=="hq"', createMissing: false, updateTags: false, batchSamples: 10, batchPoints: 2, scanIntervalMs: 100, retryMinMs: 5, retryMaxMs: 50, timeoutMs: 1000 };
  const c = loadConfig({ ...base, env: { HAYLOFT_CONFIG: file(t, { uplink: up }) } });
  t.same(c.uplink, { ...up, username: null, password: null });
});

t.test('environment overrides: address and credentials', async (t) => {
  const f = file(t, { uplink: minimal });
  const c = loadConfig({ ...base, env: { HAYLOFT_CONFIG: f, HAYLOFT_UPLINK_URL: 'http://127.0.0.1:9/', HAYLOFT_UPLINK_PASSWORD: 'from-env' } });
  t.equal(c.uplink?.url, 'http://127.0.0.1:9');
  t.equal(c.uplink?.password, 'from-env');
  t.equal(c.uplink?.clientId, 'edge', 'the rest from the file');
  // The environment alone can configure one (a fleet with one config file and per-device secrets).
  const e = loadConfig({
    ...base,
    env: { HAYLOFT_UPLINK_URL: 'https://c', HAYLOFT_UPLINK_CLIENT_ID: 'i', HAYLOFT_UPLINK_CLIENT_SECRET: 's', HAYLOFT_UPLINK_REFRESH_TOKEN: 'r' },
  });
  t.match(e.uplink, { url: 'https://c', clientId: 'i', refreshToken: 'r', filter: 'his' });
});

t.test('every problem of the section at once, with the others', async (t) => {
  const f = file(t, {
    port: 'x',
    uplink: { url: 'ftp://x', clientSecret: '', password: 'p', filter: 'his and', batchSamples: 0, scanIntervalMs: 'often', colour: 'red', retryMinMs: 10, retryMaxMs: 5, enabled: 'maybe' },
  });
  const problems = problemsOf(t, { ...base, env: { HAYLOFT_CONFIG: f } });
  const byKey = new Map(problems.map((p) => [p.key, p]));
  t.same(
    [...byKey.keys()].sort(),
    ['port', 'uplink.batchSamples', 'uplink.clientId', 'uplink.clientSecret', 'uplink.colour', 'uplink.enabled', 'uplink.filter', 'uplink.retryMaxMs', 'uplink.scanIntervalMs', 'uplink.url', 'uplink.username'].sort(),
  );
  t.match(byKey.get('uplink.url'), { source: f, expected: /http:\/\/ or https:\/\//, got: '"ftp://x"' });
  t.match(byKey.get('uplink.clientId'), { expected: /required; or set HAYLOFT_UPLINK_CLIENT_ID/ });
  t.match(byKey.get('uplink.clientSecret'), { got: '(hidden)' }, 'a secret is never shown back');
  t.match(byKey.get('uplink.filter'), { expected: /a Haystack filter that parses/ });
  t.match(byKey.get('uplink.colour'), { expected: /a known uplink key \(name, enabled, url/ });
  t.match(byKey.get('uplink.username'), { expected: /username and password given together/ });
  t.match(byKey.get('uplink.retryMaxMs'), { expected: /at least retryMinMs \(10\)/ });
});

t.test('credentials are required', async (t) => {
  const { username: _u, password: _p, ...rest } = minimal;
  t.match(problemsOf(t, { ...base, env: { HAYLOFT_CONFIG: file(t, { uplink: rest }) } }), [{ key: 'uplink.username', expected: /username and password, or refreshToken/ }]);
  t.match(problemsOf(t, { ...base, env: { HAYLOFT_CONFIG: file(t, { uplink: 'https://cloud' }) } }), [{ key: 'uplink', expected: /an object of uplink settings/ }]);
  t.match(
    problemsOf(t, { ...base, env: { HAYLOFT_CONFIG: file(t, { uplink: { ...minimal, url: 'https://u:p@cloud' } }) } }),
    [{ key: 'uplink.url', expected: /without credentials/ }],
  );
});
