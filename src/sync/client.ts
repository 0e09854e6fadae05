/**
 * A client of an upstream Haystack REST service (docs/spec/interface.md): OAuth2 tokens by the password or
 * refresh grant (client credentials by HTTP Basic), JSON grids posted to `/api/<op>`.
 *
 * Tokens: the access token is reused until shortly before `expires_in` (an absolute epoch-ms
 * instant per docs/spec/wire-notes.md §3; a small number is taken as a duration in ms, as docs/spec/interface.md words
 * it) and renewed on a 401 as well, whichever comes first. The refresh grant is preferred; every
 * refresh rotates the refresh token, and the new one is stored (fsync) before anything else, as
 * the upstream has already forgotten the old one. A refused refresh falls back to the password
 * grant when a password is configured.
 *
 * Failures come back as HayloftErrors: HL_UPLINK_UNREACHABLE (network, timeout, 5xx, 429: worth
 * retrying as is), HL_UPLINK_AUTH (credentials refused), HL_UPLINK_REJECTED (an error grid or
 * another 4xx: retrying the same request will not help). A lost answer (the request may or may not
 * have been applied) is UNREACHABLE: callers only resend what is idempotent.
 */
import { readJsonGrid } from '../haystack/json.js';
import type { HGrid } from '../haystack/values.js';
import type { Clock } from '../lib/clock.js';
import { ErrorCodes, HayloftError } from '../lib/errors.js';
import { tokenFingerprint } from './state.js';

/** Where rotated refresh tokens are kept (SyncState). */
export interface TokenKeeper {
  loadToken(): Promise<{ from: string | null; token: string } | undefined>;
  saveToken(from: string | null, token: string): Promise<void>;
}

export interface UpstreamOptions {
  url: string;
  clientId: string;
  clientSecret: string;
  username: string | null;
  password: string | null;
  refreshToken: string | null;
  timeoutMs: number;
  clock: Clock;
  tokens: TokenKeeper;
  /** Injectable for tests; node's fetch by default. */
  fetch?: typeof fetch;
}

/** Renew this long before the access token expires, so a request never races its expiry. */
const EXPIRY_MARGIN_MS = 60_000;

export interface UpstreamErrorInfo {
  /** HTTP status, or 0 when no answer came. */
  status: number;
  /** The upstream's error code (`errCode` meta, or the OAuth2 `error`), when it gave one. */
  upstreamCode: string | undefined;
}

export class UpstreamError extends HayloftError {
  readonly status: number;
  readonly upstreamCode: string | undefined;
  constructor(code: typeof ErrorCodes.UPLINK_UNREACHABLE | typeof ErrorCodes.UPLINK_AUTH | typeof ErrorCodes.UPLINK_REJECTED, message: string, info: UpstreamErrorInfo, cause?: unknown) {
    super(code, message, cause === undefined ? undefined : { cause });
    this.status = info.status;
    this.upstreamCode = info.upstreamCode;
  }
}

function unreachable(message: string, status = 0, cause?: unknown): UpstreamError {
  return new UpstreamError(ErrorCodes.UPLINK_UNREACHABLE, message, { status, upstreamCode: undefined }, cause);
}

/** Why a fetch threw, in words an operator can act on. */
function networkReason(e: unknown): string {
  const err = e as { name?: string; message?: string; cause?: { code?: string; message?: string } };
  if (err.name === 'TimeoutError') return 'no answer in time';
  if (err.name === 'AbortError') return 'stopped';
  const c = err.cause;
  if (c?.code !== undefined) return `${c.code}${c.message !== undefined ? ` (${c.message})` : ''}`;
  return c?.message ?? err.message ?? String(e);
}

interface Token {
  access: string;
  /** Epoch ms after which the access token is not used. */
  renewAt: number;
}

export class UpstreamClient {
  private readonly opts: UpstreamOptions;
  private readonly doFetch: typeof fetch;
  private readonly base: string;
  private token: Token | null = null;
  private refresh: string | null = null;
  /** Fingerprint of the configured refresh token the stored one descends from. */
  private refreshFrom: string | null = null;
  private loaded = false;
  private pending: Promise<Token> | null = null;
  /** Aborts requests in flight on close(). */
  private readonly closing = new AbortController();
  requests = 0;

  constructor(opts: UpstreamOptions) {
    this.opts = opts;
    this.doFetch = opts.fetch ?? fetch;
    this.base = opts.url.replace(/\/+$/, '');
  }

  /** Aborts what is in flight; later calls fail at once. */
  close(): void {
    this.closing.abort();
  }

  private signal(): AbortSignal {
    return AbortSignal.any([this.closing.signal, AbortSignal.timeout(this.opts.timeoutMs)]);
  }

  private async loadRefresh(): Promise<void> {
    if (this.loaded) return;
    const configured = this.opts.refreshToken;
    const stored = await this.opts.tokens.loadToken();
    const fp = configured === null ? null : tokenFingerprint(configured);
    // The stored token is the newest descendant of the configured one, unless the operator has
    // configured a new token since (or none, and the stored one came from a password login).
    if (stored !== undefined && stored.from === fp) this.refresh = stored.token;
    else this.refresh = configured;
    this.refreshFrom = fp;
    this.loaded = true;
  }

  /** A valid access token, from the cache or a grant (one grant at a time). */
  private async accessToken(): Promise<Token> {
    const t = this.token;
    if (t !== null && this.opts.clock.now() < t.renewAt) return t;
    this.pending ??= this.grant().finally(() => (this.pending = null));
    return this.pending;
  }

  private async grant(): Promise<Token> {
    await this.loadRefresh();
    if (this.refresh !== null) {
      try {
        return await this.tokenRequest({ grant_type: 'refresh_token', refresh_token: this.refresh });
      } catch (e) {
        // Refused refresh: a password (when kept) is the way back in; anything else is retried.
        if (!(e instanceof UpstreamError && e.code === ErrorCodes.UPLINK_AUTH) || this.opts.password === null || this.opts.username === null) throw e;
      }
    }
    if (this.opts.username === null || this.opts.password === null) {
      throw new UpstreamError(
        ErrorCodes.UPLINK_AUTH,
        'the upstream refused the refresh token (used already, expired or revoked) and no username and password are configured: configure a new refreshToken, or a username and password',
        { status: 0, upstreamCode: undefined },
      );
    }
    return this.tokenRequest({ grant_type: 'password', username: this.opts.username, password: this.opts.password });
  }

  private async tokenRequest(body: Record<string, string>): Promise<Token> {
    const basic = Buffer.from(`${this.opts.clientId}:${this.opts.clientSecret}`).toString('base64');
    let res: Response;
    let text: string;
    try {
      this.requests++;
      res = await this.doFetch(`${this.base}/oauth2/token`, {
        method: 'POST',
        headers: { authorization: `Basic ${basic}`, accept: 'application/json', 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal: this.signal(),
      });
      text = await res.text();
    } catch (e) {
      throw unreachable(`cannot reach the upstream token endpoint ${this.base}/oauth2/token: ${networkReason(e)}`, 0, e);
    }
    let j: Record<string, unknown> = {};
    try {
      j = JSON.parse(text) as Record<string, unknown>;
    } catch {
      // not JSON: judged by the status below
    }
    if (res.status >= 500 || res.status === 429 || res.status === 408) throw unreachable(`the upstream token endpoint answered ${res.status}`, res.status);
    if (res.status !== 200 || typeof j.access_token !== 'string') {
      const code = typeof j.error === 'string' ? j.error : undefined;
      const why = typeof j.error_description === 'string' ? j.error_description : text.slice(0, 200);
      const grant = body.grant_type === 'password' ? `log in as ${body.username}` : 'refresh the access token';
      // 400/401 with an OAuth2 error: the credentials are wrong; anything else is unexpected.
      const auth = res.status === 400 || res.status === 401;
      throw new UpstreamError(auth ? ErrorCodes.UPLINK_AUTH : ErrorCodes.UPLINK_REJECTED, `the upstream refused to ${grant}: ${res.status}${code === undefined ? '' : ` ${code}`}: ${why}`, {
        status: res.status,
        upstreamCode: code,
      });
    }
    if (typeof j.refresh_token === 'string' && j.refresh_token !== this.refresh) {
      await this.opts.tokens.saveToken(this.refreshFrom, j.refresh_token);
      this.refresh = j.refresh_token;
    }
    const now = this.opts.clock.now();
    const exp = typeof j.expires_in === 'number' && j.expires_in > 0 ? (j.expires_in > 1e12 ? j.expires_in : now + j.expires_in) : now + 3600_000;
    const token = { access: j.access_token, renewAt: Math.max(now + 1000, exp - EXPIRY_MARGIN_MS) };
    this.token = token;
    return token;
  }

  /**
   * POSTs a grid (already JSON text) to `/api/<op>` and decodes the answer. An answer that is an
   * error grid, or not 2xx, throws (see the header for which code).
   */
  async call(op: string, body: string): Promise<HGrid> {
    let token = await this.accessToken();
    let res = await this.post(op, body, token);
    if (res.status === 401) {
      // Expired or revoked before we thought: renew once.
      if (this.token === token) this.token = null;
      token = await this.accessToken();
      res = await this.post(op, body, token);
    }
    let grid: HGrid | undefined;
    try {
      grid = readJsonGrid(res.text);
    } catch {
      grid = undefined;
    }
    const err = grid?.meta.has('err') === true ? grid : undefined;
    const dis = err?.meta.get('dis');
    const upstreamCode = err?.meta.get('errCode');
    const detail = typeof dis === 'string' ? dis : res.text.slice(0, 200);
    if (res.status >= 500 || res.status === 429 || res.status === 408) throw unreachable(`upstream ${op} answered ${res.status}: ${detail}`, res.status);
    if (res.status === 401 || res.status === 403 && upstreamCode === undefined) {
      throw new UpstreamError(ErrorCodes.UPLINK_AUTH, `upstream ${op} refused the credentials (${res.status}): ${detail}`, { status: res.status, upstreamCode: typeof upstreamCode === 'string' ? upstreamCode : undefined });
    }
    if (res.status < 200 || res.status >= 300 || err !== undefined || grid === undefined) {
      throw new UpstreamError(ErrorCodes.UPLINK_REJECTED, `upstream ${op} refused the request (${res.status}${typeof upstreamCode === 'string' ? ` ${upstreamCode}` : ''}): ${detail}`, {
        status: res.status,
        upstreamCode: typeof upstreamCode === 'string' ? upstreamCode : undefined,
      });
    }
    return grid;
  }

  private async post(op: string, body: string, token: Token): Promise<{ status: number; text: string }> {
    try {
      this.requests++;
      const res = await this.doFetch(`${this.base}/api/${op}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token.access}`, accept: 'application/json', 'content-type': 'application/json' },
        body,
        signal: this.signal(),
      });
      return { status: res.status, text: await res.text() };
    } catch (e) {
      throw unreachable(`no answer from upstream ${op} at ${this.base}: ${networkReason(e)}`, 0, e);
    }
  }
}
