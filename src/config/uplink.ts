/**
 * The `uplink` section of the configuration: where and how history and model are pushed to an
 * upstream Haystack REST service (src/sync). It is the first nested section of the schema, so it
 * brings its own small table of keys, parsed like the top-level ones: every key checked, unknown
 * keys refused, every problem named as `uplink.<key>` and reported with the others.
 *
 * Environment overrides exist for the address and the credentials only: those are what differ
 * between devices of one fleet and what an operator keeps out of a config file (a systemd
 * EnvironmentFile or credential). Tuning keys are file-only.
 */

import { type Parsed, type SectionContext, type SectionKeys, type SectionProblem, bool, filter, integer, loadSection, redactSection, serverUrl, text } from './section.js';

export type { SectionProblem } from './section.js';

/** The uplink settings; null in Config when the file has no `uplink` section. */
export interface UplinkConfig {
  /** Name of this connector: the key of its cursors in the data folder and the label of its status. */
  readonly name: string;
  /** False pauses the uplink without forgetting its cursors. */
  readonly enabled: boolean;
  /** The upstream service address (`https://host[:port][/prefix]`); ops at `/api/<op>`, tokens at `/oauth2/token`. */
  readonly url: string;
  readonly clientId: string;
  readonly clientSecret: string;
  /** User for the password grant (with `password`), or null when only a refresh token is given. */
  readonly username: string | null;
  readonly password: string | null;
  /** A refresh token to start from when no password is kept on the device. */
  readonly refreshToken: string | null;
  /** Which points to sync (Haystack filter); only points with `his` and a history kind qualify. */
  readonly filter: string;
  /** Create sites, equips and points missing upstream (createRec). */
  readonly createMissing: boolean;
  /** Keep upstream tags in step with the local ones (updateRec). */
  readonly updateTags: boolean;
  /** Most samples in one hisWrite request. */
  readonly batchSamples: number;
  /** Most points (vK columns) in one hisWrite request. */
  readonly batchPoints: number;
  /** How often to look for new samples while caught up, in ms. */
  readonly scanIntervalMs: number;
  /** First retry delay after a failure, in ms; doubled per failure up to retryMaxMs, with jitter. */
  readonly retryMinMs: number;
  readonly retryMaxMs: number;
  /** Time limit of one upstream request, in ms. */
  readonly timeoutMs: number;
}

export type UplinkContext = SectionContext;

function url(raw: unknown): Parsed<string> {
  const r = serverUrl(raw, ['http:', 'https:'], 'an http:// or https:// address of the upstream service, such as https://cloud.example.com', 'clientId/clientSecret and username/password');
  if (!('url' in r)) return r;
  // Without a trailing slash, so paths append as `${url}/api/read`.
  return { ok: r.url.href.replace(/\/+$/, '') };
}

const MINUTE = 60_000;
const DAY = 24 * 60 * MINUTE;

const KEYS: SectionKeys<UplinkConfig> = {
  name: {
    default: 'upstream',
    parse: (raw) => (typeof raw === 'string' && /^[A-Za-z0-9_-]{1,40}$/.test(raw) ? { ok: raw } : { expected: 'a short name of letters, digits, _ or - (at most 40)' }),
  },
  enabled: { default: true, parse: bool },
  url: { env: 'HAYLOFT_UPLINK_URL', default: undefined, parse: url },
  clientId: { env: 'HAYLOFT_UPLINK_CLIENT_ID', default: undefined, parse: (raw) => text(raw, 'the OAuth2 client id given by the upstream service') },
  clientSecret: { env: 'HAYLOFT_UPLINK_CLIENT_SECRET', default: undefined, secret: true, parse: (raw) => text(raw, 'the OAuth2 client secret') },
  username: { env: 'HAYLOFT_UPLINK_USERNAME', default: null, parse: (raw) => text(raw, 'the upstream user name (an e-mail address)') },
  password: { env: 'HAYLOFT_UPLINK_PASSWORD', default: null, secret: true, parse: (raw) => (typeof raw === 'string' && raw !== '' ? { ok: raw } : { expected: 'the upstream password' }) },
  refreshToken: { env: 'HAYLOFT_UPLINK_REFRESH_TOKEN', default: null, secret: true, parse: (raw) => text(raw, 'a refresh token issued by the upstream service') },
  filter: { default: 'his', parse: (raw, ctx) => filter(raw, ctx, 'his or his and siteRef->dis=="HQ"') },
  createMissing: { default: true, parse: bool },
  updateTags: { default: true, parse: bool },
  // 50,000 samples is about 2 MB of JSON: well under the upstream's body limit (64 MiB for
  // Hayloft), large enough that a one-day backlog of 1,000 points is about 30 requests.
  batchSamples: { default: 50_000, parse: (raw) => integer(raw, 1, 1_000_000) },
  batchPoints: { default: 1000, parse: (raw) => integer(raw, 1, 10_000) },
  scanIntervalMs: { default: 5000, parse: (raw) => integer(raw, 10, DAY) },
  retryMinMs: { default: 1000, parse: (raw) => integer(raw, 1, DAY) },
  retryMaxMs: { default: 5 * MINUTE, parse: (raw) => integer(raw, 1, DAY) },
  timeoutMs: { default: 60_000, parse: (raw) => integer(raw, 100, 10 * MINUTE) },
};

export const UPLINK_KEYS = Object.keys(KEYS) as (keyof UplinkConfig)[];

/** The environment variables of the section (for documentation and tests). */
export const UPLINK_ENV: readonly string[] = UPLINK_KEYS.map((k) => KEYS[k].env).filter((e): e is string => e !== undefined);

/**
 * Reads the section from the file's value (`raw`, undefined when the file has none) and the
 * environment. Returns null when neither sets anything; otherwise the section with every key
 * checked, or problems for each key that is wrong, missing or unknown.
 */
export function loadUplink(
  raw: unknown,
  file: string | null,
  env: Readonly<Record<string, string | undefined>>,
  ctx: UplinkContext = {},
): { value: UplinkConfig | null; problems: SectionProblem[] } {
  const section = loadSection('uplink', KEYS, 'url, clientId, ...', raw, file, env, ctx);
  const { problems, source: fileSource } = section;
  if (section.value === null) return { value: null, problems };
  const out = section.value;
  // Credentials: a user with a password, or a refresh token (or both: the password is the way
  // back in when the refresh token is lost or revoked).
  const hasUser = out.username !== undefined && out.username !== null;
  const hasPassword = out.password !== undefined && out.password !== null;
  const hasRefresh = out.refreshToken !== undefined && out.refreshToken !== null;
  const credentialProblem = problems.some((p) => ['uplink.username', 'uplink.password', 'uplink.refreshToken'].includes(p.key));
  if (!credentialProblem) {
    if (hasUser !== hasPassword) {
      problems.push({ key: hasUser ? 'uplink.password' : 'uplink.username', source: fileSource, expected: 'username and password given together' });
    } else if (!hasUser && !hasRefresh) {
      problems.push({ key: 'uplink.username', source: fileSource, expected: 'credentials: username and password, or refreshToken' });
    }
  }
  if (typeof out.retryMinMs === 'number' && typeof out.retryMaxMs === 'number' && out.retryMaxMs < out.retryMinMs) {
    problems.push({ key: 'uplink.retryMaxMs', source: fileSource, expected: `at least retryMinMs (${out.retryMinMs})`, got: String(out.retryMaxMs) });
  }
  if (problems.length > 0) return { value: null, problems };
  return { value: Object.freeze(out as unknown as UplinkConfig), problems };
}

/** The section with its secrets masked, for printing (check-config) and logs. */
export function redactUplink(u: UplinkConfig): Record<string, unknown> {
  return redactSection(KEYS, u);
}
