/**
 * The standard Haystack 4 HTTP API at /haystack/<op> (docs/haystack4.md), beside the WideSky API at
 * /api/<op>: the same op machinery (routes/ops.ts: limits, bodies, permissions, answers), the same
 * records, users, permissions, watches and history, with
 * - Haystack 4's formats (negotiate.ts H4_FORMATS: Zinc by default, Hayson for application/json);
 * - Haystack 4's authentication (the Project Haystack auth spec): `Authorization: HELLO
 *   username=<base64uri>` answers 401 with `WWW-Authenticate: SCRAM handshakeToken=.., hash=SHA-256`;
 *   `SCRAM handshakeToken=.., data=<client-first>` answers 401 with the server-first message;
 *   `SCRAM handshakeToken=.., data=<client-final>` checks the proof (auth/scram.ts) and answers
 *   the op with `Authentication-Info: authToken=.., hash=SHA-256, data=<server-final>`; then
 *   `Authorization: BEARER authToken=..` on every call. X-IMPERSONATE works as on /api/.
 * Nothing under /api/ changes: WideSky clients never reach this group.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AuthService } from '../../auth/auth.js';
import { Gate } from '../../auth/gate.js';
import { type ScramServer, fromBase64Any, toBase64Uri } from '../../auth/scram.js';
import { HDict, HGrid } from '../../haystack/values.js';
import { ErrorCodes, HayloftError } from '../../lib/errors.js';
import { addressOf, principalOfToken } from '../auth-http.js';
import { H4_CODECS } from '../codecs.js';
import type { Responder } from '../exchange.js';
import { H4_FORMATS } from '../negotiate.js';
import type { OpContext } from '../op.js';
import { haystack4Ops } from '../ops/haystack4.js';
import type { RouteGroup } from '../routes.js';
import { opRoutes } from './ops.js';

export const HAYSTACK_PREFIX = '/haystack/';

/** `SCHEME a=1, b=2` of an Authorization header (values may hold `=`, as base64 padding does). */
export function authParams(header: string): { scheme: string; params: Map<string, string> } {
  const sp = header.indexOf(' ');
  const scheme = (sp < 0 ? header : header.slice(0, sp)).toLowerCase();
  const params = new Map<string, string>();
  if (sp >= 0) {
    for (const part of header.slice(sp + 1).split(',')) {
      const i = part.indexOf('=');
      if (i > 0) params.set(part.slice(0, i).trim(), part.slice(i + 1).trim());
    }
  }
  return { scheme, params };
}

function unauthorized(message: string): HayloftError {
  return new HayloftError(ErrorCodes.UNAUTHORIZED, message);
}

function need(params: Map<string, string>, name: string, scheme: string): string {
  const v = params.get(name);
  if (v === undefined || v === '') throw unauthorized(`Authorization: ${scheme.toUpperCase()} needs ${name}=`);
  return v;
}

export interface HaystackRoutesOptions {
  ctx: OpContext;
  /** null: a server without authentication (tests of the HTTP mechanics), as for /api/. */
  auth: AuthService | null;
  scram: ScramServer | null;
}

export function haystackRoutes(opts: HaystackRoutesOptions): RouteGroup {
  const { auth, scram } = opts;
  let respond: Responder | undefined;

  /** A step of the handshake: 401 with the challenge, an empty grid in the negotiated format. */
  function challenge(req: IncomingMessage, res: ServerResponse, header: string): null {
    const r = respond as Responder;
    res.setHeader('WWW-Authenticate', header);
    r.send(req, res, 401, r.exchangeOf(req).codec, HGrid.empty(HDict.EMPTY));
    return null;
  }

  function gate(req: IncomingMessage, res: ServerResponse): Gate | Promise<Gate | null> | null {
    if (auth === null || scram === null) return Gate.OPEN;
    const h = req.headers.authorization;
    if (h === undefined || h.trim() === '') throw unauthorized('authentication required: start the Haystack login with Authorization: HELLO username=<base64uri of the user name>');
    const { scheme, params } = authParams(h.trim());
    switch (scheme) {
      case 'bearer': {
        const p = principalOfToken(auth, need(params, 'authToken', scheme), req.headers['x-impersonate']);
        return p instanceof Promise ? p.then((x) => Gate.of(x)) : Gate.of(p);
      }
      case 'hello': {
        const username = fromBase64Any(need(params, 'username', scheme), 'username').trim();
        const { handshakeToken } = scram.hello(username, addressOf(req));
        return challenge(req, res, `SCRAM handshakeToken=${handshakeToken}, hash=SHA-256`);
      }
      case 'scram': {
        const token = need(params, 'handshakeToken', scheme);
        const data = fromBase64Any(need(params, 'data', scheme), 'data');
        if (!/(^|,)p=/.test(data)) {
          return scram.clientFirst(token, data).then(({ serverFirst }) =>
            challenge(req, res, `SCRAM handshakeToken=${token}, hash=SHA-256, data=${toBase64Uri(serverFirst)}`),
          );
        }
        const done = scram.clientFinal(token, data);
        return auth.haystackSession(done.userId).then(async (authToken) => {
          res.setHeader('Authentication-Info', `authToken=${authToken}, hash=SHA-256, data=${toBase64Uri(done.serverFinal)}`);
          // The op asked for runs as the user just logged in (no X-IMPERSONATE on a login).
          return Gate.of(await auth.authenticate(authToken));
        });
      }
      default:
        throw unauthorized(`the Authorization scheme ${scheme.toUpperCase().slice(0, 20)} is not served at ${HAYSTACK_PREFIX}: use HELLO, SCRAM, then BEARER authToken=`);
    }
  }

  const ops = haystack4Ops(H4_CODECS, async (sid) => {
    if (auth !== null) await auth.endSession(sid);
  });
  const group = opRoutes(ops, opts.ctx, { prefix: HAYSTACK_PREFIX, formats: H4_FORMATS, gate });
  return {
    routes(kit) {
      respond = kit.respond;
      group.routes?.(kit);
    },
  };
}
