/**
 * WideSky's administration calls, as its client sends them:
 * - `PUT /api/admin/user` (createUser): a JSON object `{email, name, description, roles,
 *   password, method}`; needs USER_ADMIN over everything (a user with a role grants what the
 *   role grants). Hayloft users hold one role and log in with a password (OAuth2, `local`):
 *   several roles, `scram`, or no password (WideSky then e-mails an activation link) are refused
 *   with a clear error rather than half done.
 * - `GET /api/reloadAuthCache`: drops the cached grants and user names (they are rebuilt on the
 *   next request; Hayloft also drops them on every model change) and answers an empty grid, the
 *   "raw grid" the client documents.
 */
import type { IncomingMessage } from 'node:http';
import { HGrid, type HVal } from '../../haystack/values.js';
import { ErrorCodes, HayloftError } from '../../lib/errors.js';
import type { AuthService, Principal } from '../../auth/auth.js';
import { hasBody, readBodyText } from '../body.js';
import { JSON_CODEC } from '../codecs.js';
import type { RouteGroup, RouteKit } from '../routes.js';

/** A createUser body is a few hundred bytes. */
const ADMIN_BODY_MAX = 16 * 1024;

function bad(message: string): HayloftError {
  return new HayloftError(ErrorCodes.BAD_REQUEST, message);
}

async function jsonObject(kit: RouteKit, req: IncomingMessage): Promise<Record<string, unknown>> {
  if (!hasBody(req)) throw bad('send a JSON object: {"email", "name", "description", "roles", "password"}');
  const text = await readBodyText(req, ADMIN_BODY_MAX, { limitName: 'fixed for admin calls', budget: kit.budget });
  let j: unknown;
  try {
    j = JSON.parse(text);
  } catch {
    throw bad('the body is not valid JSON');
  }
  if (typeof j !== 'object' || j === null || Array.isArray(j)) throw bad('the body must be a JSON object');
  return j as Record<string, unknown>;
}

function text(body: Record<string, unknown>, name: string, required: boolean): string | undefined {
  const v = body[name];
  if (v === undefined || v === null || v === '') {
    if (required) throw bad(`"${name}" is required`);
    return undefined;
  }
  if (typeof v !== 'string') throw bad(`"${name}" must be a string`);
  return v;
}

/** The caller, who must hold USER_ADMIN over everything (a user with a role grants what the role grants). */
async function adminPrincipal(kit: RouteKit, req: IncomingMessage, what: string): Promise<Principal> {
  const gate = await kit.gate(req);
  gate.requireAll('USER_ADMIN', what);
  return gate.principal;
}

export function adminRoutes(auth: AuthService): RouteGroup {
  return {
    routes(kit) {
      const { route, respond, log } = kit;
      route(
        'PUT',
        '/api/admin/user',
        async (req, res) => {
          const p = await adminPrincipal(kit, req, 'creating a user');
          const body = await jsonObject(kit, req);
          const email = text(body, 'email', true) as string;
          const name = text(body, 'name', false);
          const description = text(body, 'description', false);
          const method = text(body, 'method', false) ?? 'local';
          if (method !== 'local') throw bad(`authentication method "${method}" is not supported: Hayloft users log in with a password ("local")`);
          const password = text(body, 'password', false);
          if (password === undefined) throw bad('"password" is required: Hayloft sends no activation e-mails');
          const roles = body.roles;
          if (!Array.isArray(roles) || roles.length === 0 || roles.some((r) => typeof r !== 'string' || r === '')) {
            throw bad('"roles" must be a non-empty array of role ids or names');
          }
          if (new Set(roles).size > 1) throw bad('a Hayloft user holds one role: send exactly one in "roles"');
          const extra: Record<string, HVal> = {};
          if (description !== undefined) extra.primaryFunction = description;
          const id = await auth.addUser(email, password, roles[0] as string, name, extra);
          log.info({ userId: id, username: email, by: p.username }, 'user created');
          respond.sendJson(res, 200, { id, email });
        },
        'adminUser',
      );
      route(
        'GET',
        '/api/reloadAuthCache',
        async (req, res) => {
          await adminPrincipal(kit, req, 'reloading the authorisation cache');
          auth.reloadCache();
          respond.exchangeOf(req).codec = JSON_CODEC;
          respond.send(req, res, 200, JSON_CODEC, HGrid.empty());
        },
        'reloadAuthCache',
      );
    },
  };
}
