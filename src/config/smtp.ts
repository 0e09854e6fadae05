/**
 * The `smtp` section of the configuration: the mail server alarm notifications by e-mail go
 * through (docs/alarms.md "E-mail"). Read like the `mqtt` section (src/config/section.ts): every
 * key checked, unknown keys refused, every problem reported with the others as `smtp.<key>`.
 *
 * The server and its credentials are configuration, not `notifyRoute` tags: records are read by
 * every client with MODEL_READ, backed up and synced upstream, and a password must be in none of
 * those. A route names only its recipients. The password (and the user name) have environment
 * overrides so an operator keeps them out of the config file; the password is never shown back.
 */
import { type Parsed, type SectionKeys, type SectionProblem, bool, loadSection, readableFile, redactSection, serverUrl, text } from './section.js';

export interface SmtpConfig {
  /** smtp://host[:port] (plain, upgraded with STARTTLS; port 587 by default) or smtps://host[:port] (TLS from the first byte; 465). */
  readonly url: string;
  /** The sender address of every notification. */
  readonly from: string;
  readonly username: string | null;
  readonly password: string | null;
  /** smtp:// only: refuse to send unless the server upgrades the session with STARTTLS (false: a local relay without TLS). */
  readonly requireTls: boolean;
  /** PEM file of the CAs the server's certificate is checked against (null: the system's). */
  readonly caFile: string | null;
  /** False accepts any server certificate (a test bench only). */
  readonly rejectUnauthorized: boolean;
}

function url(raw: unknown): Parsed<string> {
  const expected = 'an smtp:// (STARTTLS) or smtps:// (TLS) address of the mail server, such as smtp://mail.example.com:587';
  const r = serverUrl(raw, ['smtp:', 'smtps:'], expected, 'username and password');
  if (!('url' in r)) return r;
  if (r.url.pathname !== '' && r.url.pathname !== '/') return { expected };
  return { ok: `${r.url.protocol}//${r.url.host}` };
}

/** One address, as a mail server takes it in MAIL FROM / RCPT TO (no display name, no spaces). */
export const MAIL_ADDRESS = /^[^\s@<>,;"]+@[^\s@<>,;"]+\.?[^\s@<>,;"]*$/;

const KEYS: SectionKeys<SmtpConfig> = {
  url: { env: 'HAYLOFT_SMTP_URL', default: undefined, parse: url },
  from: {
    env: 'HAYLOFT_SMTP_FROM',
    default: undefined,
    parse: (raw) => (typeof raw === 'string' && MAIL_ADDRESS.test(raw.trim()) ? { ok: raw.trim() } : { expected: 'the sender address, such as hayloft@plant.example.com' }),
  },
  username: { env: 'HAYLOFT_SMTP_USERNAME', default: null, parse: (raw) => text(raw, 'the mail server user name') },
  password: { env: 'HAYLOFT_SMTP_PASSWORD', default: null, secret: true, parse: (raw) => (typeof raw === 'string' && raw !== '' ? { ok: raw } : { expected: 'the mail server password' }) },
  requireTls: { default: true, parse: bool },
  caFile: { env: 'HAYLOFT_SMTP_CA_FILE', default: null, parse: (raw) => readableFile(raw, 'the CA certificates (PEM) the mail server is checked against') },
  rejectUnauthorized: { default: true, parse: bool },
};

export const SMTP_KEYS = Object.keys(KEYS) as (keyof SmtpConfig)[];

/** The environment variables of the section (for documentation and tests). */
export const SMTP_ENV: readonly string[] = SMTP_KEYS.map((k) => KEYS[k].env).filter((e): e is string => e !== undefined);

/** Reads the section from the file's value and the environment: null when neither sets anything. */
export function loadSmtp(raw: unknown, file: string | null, env: Readonly<Record<string, string | undefined>>): { value: SmtpConfig | null; problems: SectionProblem[] } {
  const section = loadSection('smtp', KEYS, 'url, from, username, password, ...', raw, file, env, {});
  const { problems, source } = section;
  if (section.value === null) return { value: null, problems };
  const out = section.value;
  const has = (k: keyof SmtpConfig): boolean => out[k] !== undefined && out[k] !== null;
  const bad = (k: keyof SmtpConfig): boolean => problems.some((p) => p.key === `smtp.${k}`);
  if (!bad('username') && !bad('password') && has('username') !== has('password')) {
    problems.push({ key: has('username') ? 'smtp.password' : 'smtp.username', source, expected: 'username and password given together' });
  }
  if (problems.length > 0) return { value: null, problems };
  return { value: Object.freeze(out as unknown as SmtpConfig), problems };
}

/** The section with its password masked, for printing (check-config) and logs. */
export function redactSmtp(s: SmtpConfig): Record<string, unknown> {
  return redactSection(KEYS, s);
}
