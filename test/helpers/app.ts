/**
 * Starts the real Hayloft (App: LevelDB in a temp folder, auth, HTTP on 127.0.0.1 with an
 * ephemeral port) for end-to-end tests, with a known administrator and client, and helpers to
 * log in and to restart on the same data.
 */
import type { Writable } from 'node:stream';
import { App } from '../../src/app.js';
import { loadConfig } from '../../src/config/index.js';
import { findTimeZone } from '../../src/haystack/tz.js';
import type { Clock } from '../../src/lib/clock.js';
import type { ClockTrustOptions } from '../../src/lib/clock-trust.js';
import { createLogger } from '../../src/lib/log.js';
import { tempDir } from './tmp.js';

export const ADMIN = { username: 'admin@example.com', password: 'admin-password-1' };
export const CLIENT = { id: 'test-client', secret: 'test-client-secret-123' };

export interface Running {
  app: App;
  base: string;
  dir: string;
  /** Every log line written so far (JSON text). */
  logs: string[];
  /** An admin access token. */
  token: string;
  /** Authorization header for the admin. */
  auth: Record<string, string>;
  login(username: string, password: string): Promise<TokenAnswer>;
  /** Stops and starts again on the same data folder (same port is not kept). */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

export interface TokenAnswer {
  status: number;
  body: Record<string, unknown>;
  headers: Headers;
}

export function basic(id: string, secret: string): string {
  return 'Basic ' + Buffer.from(`${id}:${secret}`).toString('base64');
}

export async function tokenRequest(base: string, body: unknown, authorization = basic(CLIENT.id, CLIENT.secret), contentType = 'application/json'): Promise<TokenAnswer> {
  const res = await fetch(`${base}/oauth2/token`, {
    method: 'POST',
    headers: { authorization, 'content-type': contentType },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let parsed: Record<string, unknown> = {};
  try {
    parsed = JSON.parse(text) as Record<string, unknown>;
  } catch {
    parsed = { text };
  }
  return { status: res.status, body: parsed, headers: res.headers };
}

/**
 * Tests write history dated years back, which the default retention (730 days, the store bounded
 * at 4 GiB) would remove mid-test: off unless a test asks for it (test/api/retention.test.ts).
 */
const NO_RETENTION = { HAYLOFT_HISTORY_RETENTION_DAYS: '0', HAYLOFT_HISTORY_MAX_BYTES: '0' };

export async function startApp(t: { teardown(f: () => unknown): void }, opts: { clock?: Clock; env?: Record<string, string>; dir?: string; clockTrust?: Pick<ClockTrustOptions, 'floorMs' | 'timesyncDir' | 'timers'>; updateState?: string } = {}): Promise<Running> {
  const dir = opts.dir ?? tempDir(t);
  const logs: string[] = [];
  const dest = { write: (s: string) => void logs.push(s) } as unknown as Writable;
  const config = loadConfig({
    // The floor at 8 MiB: a test machine's free disk is not a gateway's (see serve-child.ts).
    env: { HAYLOFT_DATA_DIR: dir, HAYLOFT_HOST: '127.0.0.1', HAYLOFT_PORT: '0', HAYLOFT_HTTPS_PORT: '0', HAYLOFT_TZ: 'UTC', HAYLOFT_LOG_LEVEL: 'debug', HAYLOFT_HISTORY_MIN_FREE_BYTES: String(8 * 1024 * 1024), HAYLOFT_CLOCK_SYNC: 'none', ...NO_RETENTION, ...(opts.env ?? {}) },
    zones: { host: () => 'UTC', known: (n) => findTimeZone(n) !== undefined },
  });
  const log = createLogger({ level: 'debug', destination: dest });
  const firstRun = { adminUser: ADMIN.username, adminPassword: ADMIN.password, clientId: CLIENT.id, clientSecret: CLIENT.secret };
  // Tests do not depend on the host's NTP (clockSync none, above); a hand-moved clock set years
  // back would be behind the release's date, so it has no floor unless the test gives one.
  const clockTrust = opts.clockTrust ?? (opts.clock ? { floorMs: 0 } : undefined);
  const start = (): Promise<App> => App.start({ config, log, firstRun, ...(opts.clock ? { clock: opts.clock } : {}), ...(clockTrust ? { clockTrust } : {}), ...(opts.updateState !== undefined ? { updateState: opts.updateState } : {}) });
  const r = {} as Running;
  r.dir = dir;
  r.logs = logs;
  r.app = await start();
  r.base = `http://127.0.0.1:${r.app.port}`;
  r.login = (username, password) => tokenRequest(r.base, { grant_type: 'password', username, password });
  const adminLogin = async (): Promise<void> => {
    const a = await r.login(ADMIN.username, ADMIN.password);
    if (a.status !== 200) throw new Error(`admin login failed: ${a.status} ${JSON.stringify(a.body)}`);
    r.token = a.body.access_token as string;
    r.auth = { authorization: `Bearer ${r.token}` };
  };
  await adminLogin();
  let stopped = false;
  r.stop = async () => {
    if (stopped) return;
    stopped = true;
    await r.app.stop();
  };
  r.restart = async () => {
    await r.app.stop();
    r.app = await start();
    r.base = `http://127.0.0.1:${r.app.port}`;
    await adminLogin();
  };
  t.teardown(() => r.stop());
  return r;
}
