/**
 * The console's only way to the server: HTTP to /oauth2/token and /api/<op>, with the same bearer
 * tokens and permissions as any other client. Grids are Haystack JSON (wire-notes §1); values are
 * kept in their encoded form (`n:21.5 °C`) and read with the helpers below.
 *
 * Tokens live in sessionStorage (gone when the tab closes, never in a URL) and are refreshed five
 * minutes before they expire. The OAuth2 client id and secret are needed for both grants; the
 * login form can remember them in localStorage so a technician types the secret once per device.
 */

export type Cell = string | number | boolean | null | undefined | Cell[] | { [k: string]: Cell };
export type Row = Record<string, Cell>;
export interface Grid {
  meta: Record<string, Cell>;
  cols: { name: string }[];
  rows: Row[];
}

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

// ---- values --------------------------------------------------------------------------------

export function str(v: Cell): string {
  if (typeof v !== 'string') return v == null ? '' : typeof v === 'object' ? JSON.stringify(v) : String(v);
  if (v.length >= 2 && v[1] === ':') return v.slice(2);
  return v;
}

/** A Ref's id (`r:<id> <dis>` -> id). */
export function refId(v: Cell): string {
  const s = str(v);
  const sp = s.indexOf(' ');
  return sp < 0 ? s : s.slice(0, sp);
}

/** A Ref's display name, or its id. */
export function refDis(v: Cell): string {
  const s = str(v);
  const sp = s.indexOf(' ');
  return sp < 0 ? s : s.slice(sp + 1);
}

export function num(v: Cell): { val: number; unit: string } | undefined {
  if (typeof v !== 'string' || !v.startsWith('n:')) return undefined;
  const body = v.slice(2);
  const sp = body.indexOf(' ');
  const n = sp < 0 ? body : body.slice(0, sp);
  const val = n === 'INF' ? Infinity : n === '-INF' ? -Infinity : Number(n);
  return { val, unit: sp < 0 ? '' : body.slice(sp + 1) };
}

/** Epoch ms of a DateTime (`t:2024-03-10T03:00:00-04:00 New_York`). */
export function time(v: Cell): number | undefined {
  if (typeof v !== 'string' || !v.startsWith('t:')) return undefined;
  const body = v.slice(2);
  const sp = body.indexOf(' ');
  const ms = Date.parse(sp < 0 ? body : body.slice(0, sp));
  return Number.isNaN(ms) ? undefined : ms;
}

/** A value as a person reads it. */
export function show(v: Cell): string {
  if (v === true) return 'true';
  if (v === false) return 'false';
  if (v == null) return '';
  if (Array.isArray(v)) return v.map(show).join(', ');
  if (typeof v === 'object') return JSON.stringify(v);
  if (typeof v === 'number') return String(v);
  if (v.length < 2 || v[1] !== ':') return v;
  switch (v[0]) {
    case 'm':
      return '✓';
    case 'n': {
      const n = num(v);
      if (n === undefined) return v;
      const rounded = Number.isInteger(n.val) ? String(n.val) : n.val.toFixed(Math.abs(n.val) >= 100 ? 1 : 2);
      return n.unit === '' ? rounded : `${rounded} ${n.unit}`;
    }
    case 'r':
      return `@${refId(v)}${refDis(v) === refId(v) ? '' : ` ${refDis(v)}`}`;
    case 't': {
      const ms = time(v);
      return ms === undefined ? v.slice(2) : new Date(ms).toLocaleString();
    }
    default:
      return v.slice(2);
  }
}

/** One grid from rows of already-encoded cells. */
export function grid(rows: Row[], meta: Record<string, Cell> = {}): Grid {
  const names: string[] = [];
  for (const r of rows) for (const k of Object.keys(r)) if (!names.includes(k)) names.push(k);
  return { meta: { ver: '3.0', ...meta }, cols: (names.length === 0 ? ['empty'] : names).map((name) => ({ name })), rows };
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
  /** Epoch ms (the server's expires_in is an instant, wire-notes §3). */
  expires: number;
  clientId: string;
  clientSecret: string;
  username: string;
}

const KEY = 'hayloft.session';
const CLIENT_KEY = 'hayloft.client';
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

  /** The client id and secret remembered on this browser, if any. */
  static rememberedClient(): { clientId: string; clientSecret: string } | undefined {
    try {
      const raw = localStorage.getItem(CLIENT_KEY);
      return raw === null ? undefined : (JSON.parse(raw) as { clientId: string; clientSecret: string });
    } catch {
      return undefined;
    }
  }

  async login(clientId: string, clientSecret: string, username: string, password: string, remember: boolean): Promise<void> {
    const t = await this.grant(clientId, clientSecret, { grant_type: 'password', username, password });
    this.save({ ...t, clientId, clientSecret, username });
    if (remember) localStorage.setItem(CLIENT_KEY, JSON.stringify({ clientId, clientSecret }));
    else localStorage.removeItem(CLIENT_KEY);
  }

  private async grant(clientId: string, clientSecret: string, body: Record<string, string>): Promise<{ access: string; refresh: string; expires: number }> {
    const res = await fetch('/oauth2/token', {
      method: 'POST',
      headers: { Authorization: `Basic ${btoa(`${clientId}:${clientSecret}`)}`, 'Content-Type': 'application/json', Accept: 'application/json' },
      body: JSON.stringify(body),
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
      const n = await this.grant(t.clientId, t.clientSecret, { grant_type: 'refresh_token', refresh_token: t.refresh });
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
