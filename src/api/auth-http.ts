/**
 * The HTTP side of authentication (docs/spec/interface.md "Authentication", docs/spec/wire-notes.md §3):
 * - `POST /oauth2/token` (grants password and refresh_token; client credentials by HTTP Basic, or
 *   the console's public client from its own origin; JSON or form body) answering the token object or an RFC 6749 §5.2 error body;
 * - `DELETE /oauth2/token` (logout);
 * - `POST /api/updatePassword` and `/user/updatePassword` (plain-text answers, 200 / 400);
 * - bearer authentication and `X-IMPERSONATE` for the data operations.
 * These answers have their own shapes (not grids), so they are written here, not by ops.
 */
import { quoteInput } from '../lib/quote.js';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { type AuthService, CONSOLE_CLIENT, type ClientCredentials, type Principal } from '../auth/auth.js';
import { ErrorCodes, HayloftError, isHayloftError } from '../lib/errors.js';
import { hasBody, readBodyText } from './body.js';
import type { BodyBudget } from './guard.js';
import { statusOf } from './http-errors.js';

/** Token requests are small; a smaller limit than grids keeps junk out cheaply. */
const TOKEN_BODY_MAX = 16 * 1024;

const OAUTH_ERROR: Partial<Record<string, string>> = {
  [ErrorCodes.INVALID_CLIENT]: 'invalid_client',
  [ErrorCodes.INVALID_GRANT]: 'invalid_grant',
  [ErrorCodes.LOCKED_OUT]: 'invalid_grant',
  [ErrorCodes.UNSUPPORTED_GRANT]: 'unsupported_grant_type',
  [ErrorCodes.INVALID_TOKEN_REQUEST]: 'invalid_request',
  [ErrorCodes.UNAUTHORIZED]: 'invalid_token',
  // RFC 6749 §4.1.2.1's word for "try again later" (503 with Retry-After).
  [ErrorCodes.BUSY]: 'temporarily_unavailable',
};

function tokenRequestError(message: string): HayloftError {
  return new HayloftError(ErrorCodes.INVALID_TOKEN_REQUEST, message);
}

/** The caller's address, for the login lockout. */
export function addressOf(req: IncomingMessage): string {
  return req.socket.remoteAddress ?? 'unknown';
}

/** The bearer token of a request; HL_UNAUTHORIZED when there is none. */
export function bearerOf(req: IncomingMessage): string {
  const h = req.headers.authorization;
  // The usual spelling without a regex match (allocation and all) on every request.
  if (h !== undefined && h.startsWith('Bearer ')) {
    const token = h.slice(7);
    if (token !== '' && !/\s/.test(token)) return token;
  }
  const m = h === undefined ? null : /^Bearer\s+(\S+)\s*$/i.exec(h);
  if (m === null) {
    throw new HayloftError(
      ErrorCodes.UNAUTHORIZED,
      h === undefined ? 'authentication required: send Authorization: Bearer <access token> (POST /oauth2/token gives one)' : 'the Authorization header must be "Bearer <access token>"',
    );
  }
  return m[1] as string;
}

function basicOf(req: IncomingMessage): { id: string; secret: string } {
  const h = req.headers.authorization;
  const m = h === undefined ? null : /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(h);
  if (m === null) throw new HayloftError(ErrorCodes.INVALID_CLIENT, 'client authentication required: send Authorization: Basic base64(clientId:clientSecret)');
  const text = Buffer.from(m[1] as string, 'base64').toString('utf8');
  const i = text.indexOf(':');
  if (i < 0) throw new HayloftError(ErrorCodes.INVALID_CLIENT, 'malformed client credentials');
  // RFC 6749 §2.3.1: both parts are form-urlencoded before base64.
  const dec = (s: string): string => {
    try {
      return decodeURIComponent(s.replace(/\+/g, ' '));
    } catch {
      return s;
    }
  };
  return { id: dec(text.slice(0, i)), secret: dec(text.slice(i + 1)) };
}

/** The origin a request was sent to: the scheme of the listener that took it and its Host header. */
export function ownOrigin(req: IncomingMessage): string | undefined {
  const host = req.headers.host;
  if (host === undefined || host === '') return undefined;
  return `${(req.socket as { encrypted?: boolean }).encrypted === true ? 'https' : 'http'}://${host.toLowerCase()}`;
}

/**
 * The client of a token request. A confidential client authenticates with HTTP Basic (RFC 6749
 * §2.3.1), as before. The console's public client names itself in the body (`client_id`, §2.3)
 * and is accepted only from a page of the server's own origin: the browser sets `Origin` on every
 * POST a script makes and a page cannot forge it, so another site's page cannot use the console
 * client to guess passwords from a browser on the site's network or log a visitor in. A program
 * can write any Origin, but then it holds the user's password already: the console client gives it
 * nothing a confidential client would not, and the login lockout applies the same.
 */
function clientOf(req: IncomingMessage, form: Record<string, string>): ClientCredentials {
  if (req.headers.authorization !== undefined || form.client_id === undefined) return basicOf(req);
  const id = form.client_id;
  if (id !== CONSOLE_CLIENT) throw new HayloftError(ErrorCodes.INVALID_CLIENT, `client ${quoteInput(id)} must authenticate with its secret: send Authorization: Basic base64(clientId:clientSecret)`);
  const origin = req.headers.origin;
  const own = ownOrigin(req);
  const site = req.headers['sec-fetch-site'];
  if (origin === undefined || own === undefined || origin.toLowerCase() !== own || (site !== undefined && site !== 'same-origin')) {
    throw new HayloftError(ErrorCodes.INVALID_CLIENT, `client "${CONSOLE_CLIENT}" logs in only from the console's own page (Origin ${own ?? 'of this server'}); programs use a client with a secret`);
  }
  return { id, secret: null };
}

/** A JSON or form body as string fields. */
async function formOf(req: IncomingMessage, budget: BodyBudget | undefined): Promise<Record<string, string>> {
  if (!hasBody(req)) return {};
  const type = (req.headers['content-type'] ?? 'application/json').split(';')[0]?.trim().toLowerCase();
  const text = await readBodyText(req, TOKEN_BODY_MAX, { limitName: 'fixed for token requests', ...(budget === undefined ? {} : { budget }) });
  const out: Record<string, string> = {};
  if (type === 'application/x-www-form-urlencoded') {
    for (const [k, v] of new URLSearchParams(text)) out[k] = v;
    return out;
  }
  if (type !== 'application/json' && type !== 'text/plain') throw tokenRequestError(`unsupported body type ${type}: send JSON or application/x-www-form-urlencoded`);
  let j: unknown;
  try {
    j = JSON.parse(text);
  } catch {
    throw tokenRequestError('the body is not valid JSON');
  }
  if (typeof j !== 'object' || j === null || Array.isArray(j)) throw tokenRequestError('the body must be a JSON object');
  for (const [k, v] of Object.entries(j as Record<string, unknown>)) if (typeof v === 'string') out[k] = v;
  return out;
}

function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  if (res.headersSent || res.destroyed) return;
  const text = JSON.stringify(body);
  res.statusCode = status;
  for (const [k, v] of Object.entries(headers)) res.setHeader(k, v);
  res.setHeader('Content-Type', 'application/json');
  res.setHeader('Content-Length', Buffer.byteLength(text));
  res.end(text);
}

function sendText(res: ServerResponse, status: number, text: string): void {
  if (res.headersSent || res.destroyed) return;
  res.statusCode = status;
  res.setHeader('Content-Type', 'text/plain; charset=utf-8');
  res.setHeader('Content-Length', Buffer.byteLength(text));
  res.end(text);
}

/** Token answers must not be cached by anything in between (RFC 6749 §5.1). */
const NO_STORE = { 'Cache-Control': 'no-store', Pragma: 'no-cache' };

function refuseImpersonation(req: IncomingMessage): void {
  if (req.headers['x-impersonate'] !== undefined) throw new HayloftError(ErrorCodes.CANNOT_IMPERSONATE, 'Cannot impersonate');
}

/**
 * The principal of an access token (the WideSky bearer token or Haystack 4's authToken), after
 * X-IMPERSONATE when `target` is given: at once for a known token without impersonation.
 */
export function principalOfToken(auth: AuthService, token: string, target: string | string[] | undefined): Principal | Promise<Principal> {
  const cached = auth.cachedPrincipal(token);
  // Without a promise when the token is known: most requests.
  if (cached !== undefined && target === undefined) return cached;
  const as = async (): Promise<Principal> => {
    const p = cached ?? (await auth.authenticate(token));
    if (target === undefined) return p;
    const t = Array.isArray(target) ? target[0] : target;
    return auth.impersonate(p, (t ?? '').trim());
  };
  return as();
}

export interface AuthHttp {
  token(req: IncomingMessage, res: ServerResponse): Promise<void>;
  logout(req: IncomingMessage, res: ServerResponse): Promise<void>;
  updatePassword(req: IncomingMessage, res: ServerResponse): Promise<void>;
  /**
   * The principal a data operation runs as (after X-IMPERSONATE): at once for a known token,
   * else a promise. Refusals are thrown or rejected: call it inside a try and await it.
   */
  principal(req: IncomingMessage): Principal | Promise<Principal>;
}

/**
 * `budget`: the server's budget of bodies in flight; token and password bodies are read under it
 * as every other body is (503 with Retry-After past it).
 */
export function authHttp(auth: AuthService, onUnexpected: (req: IncomingMessage, e: unknown) => void, budget?: BodyBudget): AuthHttp {
  function oauthError(req: IncomingMessage, res: ServerResponse, e: unknown): void {
    if (!isHayloftError(e) || OAUTH_ERROR[e.code] === undefined) {
      if (isHayloftError(e) && statusOf(e) < 500) {
        sendJson(res, statusOf(e), { error: 'invalid_request', error_description: e.message }, NO_STORE);
        return;
      }
      onUnexpected(req, e);
      sendJson(res, 500, { error: 'server_error', error_description: 'unexpected server error' }, NO_STORE);
      return;
    }
    const headers: Record<string, string> = { ...NO_STORE };
    if (e.code === ErrorCodes.INVALID_CLIENT) headers['WWW-Authenticate'] = 'Basic realm="hayloft"';
    if (e.code === ErrorCodes.UNAUTHORIZED) headers['WWW-Authenticate'] = 'Bearer';
    if (e.retryAfter !== undefined) headers['Retry-After'] = String(e.retryAfter);
    sendJson(res, statusOf(e), { error: OAUTH_ERROR[e.code], error_description: e.message }, headers);
  }

  // The Authorization header of the last request answered from the token cache, and its token.
  let lastHeader: string | undefined;
  let lastToken = '';

  return {
    async token(req, res) {
      try {
        refuseImpersonation(req);
        // Confidential clients are refused before their body is read, as before.
        if (req.headers.authorization !== undefined) basicOf(req);
        const form = await formOf(req, budget);
        const client = clientOf(req, form);
        const grant = form.grant_type;
        let answer;
        if (grant === 'password') {
          if (form.username === undefined || form.password === undefined) throw tokenRequestError('grant_type password needs username and password');
          answer = await auth.passwordGrant(client, form.username, form.password, addressOf(req));
        } else if (grant === 'refresh_token') {
          if (form.refresh_token === undefined) throw tokenRequestError('grant_type refresh_token needs refresh_token');
          answer = await auth.refreshGrant(client, form.refresh_token, addressOf(req));
        } else if (grant === undefined) {
          throw tokenRequestError('grant_type is required (password or refresh_token)');
        } else {
          throw new HayloftError(ErrorCodes.UNSUPPORTED_GRANT, `grant_type ${quoteInput(grant)} is not supported: use password or refresh_token`);
        }
        sendJson(res, 200, answer, NO_STORE);
      } catch (e) {
        if (isHayloftError(e, ErrorCodes.CANNOT_IMPERSONATE)) sendText(res, 400, 'Cannot impersonate');
        else oauthError(req, res, e);
      }
    },

    async logout(req, res) {
      try {
        refuseImpersonation(req);
        await auth.logout(bearerOf(req));
        res.statusCode = 204;
        res.end();
      } catch (e) {
        if (isHayloftError(e, ErrorCodes.CANNOT_IMPERSONATE)) sendText(res, 400, 'Cannot impersonate');
        else oauthError(req, res, e);
      }
    },

    async updatePassword(req, res) {
      let p: Principal;
      try {
        p = await auth.authenticate(bearerOf(req));
      } catch (e) {
        if (isHayloftError(e) && statusOf(e) === 401) {
          res.setHeader('WWW-Authenticate', 'Bearer');
          sendText(res, 401, e.message);
        } else {
          onUnexpected(req, e);
          sendText(res, 500, 'unexpected server error');
        }
        return;
      }
      try {
        refuseImpersonation(req);
        const form = await formOf(req, budget).catch((e: unknown) => {
          if (isHayloftError(e, ErrorCodes.BUSY)) throw e;
          throw new HayloftError(ErrorCodes.BAD_REQUEST, 'send a JSON object: {"newPassword": "..."}');
        });
        const pw = form.newPassword ?? form.password;
        if (pw === undefined) throw new HayloftError(ErrorCodes.BAD_REQUEST, 'send a JSON object with the new password in "newPassword" (or "password")');
        await auth.updatePassword(p, pw);
        sendText(res, 200, 'Password updated. Other sessions of this user were logged out.');
      } catch (e) {
        if (isHayloftError(e) && statusOf(e) < 500) sendText(res, 400, e.message);
        else if (isHayloftError(e, ErrorCodes.BUSY)) {
          res.setHeader('Retry-After', String(e.retryAfter ?? 1));
          sendText(res, 503, e.message);
        } else {
          onUnexpected(req, e);
          sendText(res, 500, 'unexpected server error');
        }
      }
    },

    principal(req) {
      const target = req.headers['x-impersonate'];
      const h = req.headers.authorization;
      // Most requests: a token verified before, in the usual spelling. A cached token has no
      // white space, so a hit needs none of bearerOf's checks of the header's form. The header of
      // the last hit is compared whole (two flat strings) and its token reused: the token the
      // cache compares is then the same string, not a slice compared character by character.
      if (target === undefined && h !== undefined) {
        const token = h === lastHeader ? lastToken : h.startsWith('Bearer ') ? h.slice(7) : undefined;
        const hit = token === undefined ? undefined : auth.cachedPrincipal(token);
        if (hit !== undefined) {
          lastHeader = h;
          lastToken = token as string;
          return hit;
        }
      }
      return principalOfToken(auth, bearerOf(req), target);
    },
  };
}
