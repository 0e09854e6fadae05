/**
 * The `smtp` section of the config file (src/config/smtp.ts): defaults, every key checked,
 * unknown keys refused, credentials together, environment overrides, the password never shown.
 */
import t from 'tap';
import { loadConfig, redactSmtp } from '../../src/config/index.js';
import { findTimeZone } from '../../src/haystack/tz.js';
import { configFile, problemsOf } from '../helpers/config-file.js';

const zones = { host: () => 'UTC', known: (n: string) => findTimeZone(n) !== undefined };
const base = { zones, cwd: '/srv/hayloft', hostname: () => 'pi-42' };

const file = configFile;

t.test('absent: null; given: defaults filled in; the environment overrides; the password hidden when shown', async (t) => {
  t.equal(loadConfig({ ...base, env: {} }).smtp, null, 'no section, no e-mail');
  const c = loadConfig({ ...base, env: { HAYLOFT_SMTP_PASSWORD: 'pw-from-env' }, file: file(t, { smtp: { url: 'smtp://mail.example.com:587/', from: 'hayloft@plant.example.com', username: 'hl' } }) });
  t.same(c.smtp, { url: 'smtp://mail.example.com:587', from: 'hayloft@plant.example.com', username: 'hl', password: 'pw-from-env', requireTls: true, caFile: null, rejectUnauthorized: true });
  t.equal(redactSmtp(c.smtp as NonNullable<typeof c.smtp>).password, '(hidden)');
  const e = loadConfig({ ...base, env: { HAYLOFT_SMTP_URL: 'smtps://mail.example.com', HAYLOFT_SMTP_FROM: 'a@b.example' } });
  t.equal(e.smtp?.url, 'smtps://mail.example.com', 'the environment alone configures it');
});

t.test('every problem at once, the password never shown back', async (t) => {
  const p = problemsOf(t, { ...base, env: {}, file: file(t, { smtp: { url: 'http://mail.example.com', from: 'not an address', password: 'secret-pw-9', caFile: '/nonexistent/ca.pem', requireTls: 'maybe', extra: 1 } }) });
  t.match(p.get('smtp.url')?.expected, /smtp:\/\/ \(STARTTLS\) or smtps:\/\//);
  t.match(p.get('smtp.from')?.expected, /sender address/);
  t.match(p.get('smtp.caFile')?.expected, /readable file/);
  t.ok(p.has('smtp.requireTls'));
  t.match(p.get('smtp.extra')?.expected, /a known smtp key/);
  t.match(p.get('smtp.username')?.expected, /together/, 'a password without a user name');
  t.notOk(JSON.stringify([...p.values()]).includes('secret-pw-9'), 'the password is not in the report');
  const q = problemsOf(t, { ...base, env: {}, file: file(t, { smtp: { url: 'smtp://user:pw@mail.example.com', from: 'a@b.example' } }) });
  t.match(q.get('smtp.url')?.expected, /without credentials/);
  const r = problemsOf(t, { ...base, env: {}, file: file(t, { smtp: { username: 'x', password: 'y' } }) });
  t.ok(r.has('smtp.url') && r.has('smtp.from'), 'url and from are required');
});
