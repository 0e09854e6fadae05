/**
 * The console's only way to the server: HTTP to /oauth2/token and /api/<op>, with the same bearer
 * tokens and permissions as any other client. Grids are Haystack JSON (docs/spec/wire-notes.md §1); values are
 * kept in their encoded form (`n:21.5 °C`) and read with the helpers of cells.ts.
 *
 * Tokens live in sessionStorage (gone when the tab closes, never in a URL) and are refreshed five
 * minutes before they expire. The console is the gateway's public OAuth2 client `hayloft-console`:
 * it has no secret (a secret in a page is no secret), names itself with `client_id`, and the server
 * accepts it only from this page's own origin (docs/security.md "The console's login").
 */

export { type Cell, type Grid, type Row, ago, grid, num, refDis, refId, show, str, time } from './cells.js';
import type { Cell, Grid, Row } from './cells.js';
import { grid, str } from './cells.js';

/** A non-2xx answer: the server's message (the grid's `dis`, or its plain text) and status. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly errCode?: string,
  ) {
    super(message);
  }
  /** The op does not exist on this server (404 of an unknown op). */
  get notAvailable(): boolean {
    return this.status === 404;
  }
}

/** A text field of a submitted form ('' when absent). */
export function field(f: FormData, name: string): string {
  const v = f.get(name);
  return typeof v === 'string' ? v : '';
}

/** A Haystack Str for a filter, quoted. */
export function quote(s: string): string {
  return `"${s.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
}

// ---- session -------------------------------------------------------------------------------

interface Tokens {
  access: string;
  refresh: string;
  /** Epoch ms (the server's expires_in is an instant, docs/spec/wire-notes.md §3). */
  expires: number;
  username: string;
}

const KEY = 'hayloft.session';
/** The console's public client (src/auth/auth.ts CONSOLE_CLIENT). */
const CONSOLE_CLIENT = 'hayloft-console';
const REFRESH_EARLY_MS = 5 * 60_000;

async function errorOf(res: Response): Promise<ApiError> {
  const text = await res.text();
  try {
    const body = JSON.parse(text) as { meta?: Record<string, Cell>; error_description?: string; error?: string };
    if (body.meta !== undefined) return new ApiError(res.status, str(body.meta.dis) || `HTTP ${res.status}`, str(body.meta.errCode) || undefined);
    if (body.error !== undefined) return new ApiError(res.status, body.error_description ?? body.error);
  } catch {
    // plain text
  }
  return new ApiError(res.status, text.trim() || `HTTP ${res.status}`);
}

export class Session {
  private tokens: Tokens | undefined;
  private timer: ReturnType<typeof setTimeout> | undefined;
  /** The user whose permissions requests run with (X-IMPERSONATE), when an admin acts as another. */
  impersonating: { id: string; name: string } | undefined;
  /** Called when the session ends (logout, or a refresh refused): the page goes back to the login form. */
  onEnd: () => void = () => undefined;

  constructor() {
    try {
      const raw = sessionStorage.getItem(KEY);
      if (raw !== null) this.tokens = JSON.parse(raw) as Tokens;
    } catch {
      this.tokens = undefined;
    }
    if (this.tokens !== undefined) this.schedule();
  }

  get loggedIn(): boolean {
    return this.tokens !== undefined && this.tokens.expires > Date.now();
  }

  get username(): string {
    return this.tokens?.username ?? '';
  }

  /** The current access token, for the push socket's handshake (never put in a URL). */
  get accessToken(): string {
    return this.tokens?.access ?? '';
  }

  async login(username: string, password: string): Promise<void> {
    const t = await this.grant({ grant_type: 'password', username, password });
    this.save({ ...t, username });
    // What consoles before 0.2 kept: a client secret has no business in a browser.
    localStorage.removeItem('hayloft.client');
  }

  private async grant(body: Record<string, string>): Promise<{ access: string; refresh: string; expires: number }> {
    const res = await fetch('/oauth2/token', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: 'application/json' },
      body: JSON.stringify({ ...body, client_id: CONSOLE_CLIENT }),
    });
    if (!res.ok) throw await errorOf(res);
    const j = (await res.json()) as { access_token: string; refresh_token: string; expires_in: number };
    return { access: j.access_token, refresh: j.refresh_token, expires: j.expires_in };
  }

  private save(t: Tokens): void {
    this.tokens = t;
    sessionStorage.setItem(KEY, JSON.stringify(t));
    this.schedule();
  }

  private schedule(): void {
    clearTimeout(this.timer);
    const t = this.tokens;
    if (t === undefined) return;
    // setTimeout holds at most 2^31-1 ms (24.8 days); tokens live 7 days.
    const wait = Math.min(Math.max(t.expires - REFRESH_EARLY_MS - Date.now(), 0), 2 ** 31 - 1);
    this.timer = setTimeout(() => void this.refresh(), wait);
  }

  /** A new access token from the refresh token (which rotates). */
  async refresh(): Promise<void> {
    const t = this.tokens;
    if (t === undefined) return;
    try {
      const n = await this.grant({ grant_type: 'refresh_token', refresh_token: t.refresh });
      this.save({ ...t, ...n });
    } catch {
      this.end();
    }
  }

  /** Revokes the token on the server (DELETE /oauth2/token), then forgets it. */
  async logout(): Promise<void> {
    const t = this.tokens;
    if (t !== undefined) {
      await fetch('/oauth2/token', { method: 'DELETE', headers: { Authorization: `Bearer ${t.access}` } }).catch(() => undefined);
    }
    this.end();
  }

  private end(): void {
    clearTimeout(this.timer);
    this.tokens = undefined;
    this.impersonating = undefined;
    sessionStorage.removeItem(KEY);
    this.onEnd();
  }

  headers(extra: Record<string, string> = {}): Record<string, string> {
    const h: Record<string, string> = { Accept: 'application/json', ...extra };
    if (this.tokens !== undefined) h.Authorization = `Bearer ${this.tokens.access}`;
    if (this.impersonating !== undefined) h['X-IMPERSONATE'] = this.impersonating.id;
    return h;
  }

  /** Any request with the session's headers; a 401 ends the session. */
  async fetch(path: string, init: RequestInit & { headers?: Record<string, string> } = {}): Promise<Response> {
    const res = await fetch(path, { ...init, headers: this.headers(init.headers) });
    if (res.status === 401) {
      this.end();
      throw await errorOf(res);
    }
    if (!res.ok) throw await errorOf(res);
    return res;
  }

  /** POST a grid to /api/<op>. */
  async op(name: string, g: Grid): Promise<Grid> {
    const res = await this.fetch(`/api/${name}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(g) });
    return (await res.json()) as Grid;
  }

  async get(name: string): Promise<Grid> {
    const res = await this.fetch(`/api/${name}`);
    return (await res.json()) as Grid;
  }

  async read(filter: string, limit = 0): Promise<Row[]> {
    return (await this.op('read', grid([{ filter: `s:${filter}`, limit: `n:${limit}` }]))).rows;
  }

  async readById(ids: string[]): Promise<Row[]> {
    return (await this.op('read', grid(ids.map((id) => ({ id: `r:${id}` }))))).rows;
  }
}
