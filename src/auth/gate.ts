/**
 * The permission gate: the one place that answers "may this caller do that?" for every entry to
 * the daemon (docs/security.md, "One permission gate"): the REST ops (and so the console, which
 * has no other door), GraphQL, push of watch changes over socket.io, the admin, backup and
 * metrics routes, and the writes an MQTT host application commands.
 *
 * A caller is a Principal; its gate answers
 * - require / requireAll: throws HL_FORBIDDEN "permission denied: <what> needs <PERM>";
 * - can / canAll / readable: the same questions without throwing;
 * - read: a filter read limited to what the caller may see, the limit counted over that;
 * - watchVisible: the predicate a watch filters its rows by (undefined: sees everything);
 * - authorizeWrite: whether, and at which level, the caller may write a point.
 *
 * A server without authentication (and any caller inside the daemon that needs a gate) uses
 * Gate.OPEN, the gate of ALLOW_ALL_PRINCIPAL: callers never test for a missing principal.
 */
import { HDict } from '../haystack/values.js';
import { ErrorCodes, HayloftError } from '../lib/errors.js';
import type { Model } from '../model/model.js';
import type { AuthService, Principal } from './auth.js';
import { ALLOW_ALL, type Permission } from './permissions.js';

/** Who acts when nobody is authenticated: may do everything. Watches it opens belong to user ''. */
export const ALLOW_ALL_PRINCIPAL: Principal = Object.freeze({ userId: '', username: 'anonymous', user: HDict.EMPTY, grants: ALLOW_ALL, sid: '' });

/** A predicate on records; undefined means "every record" (the fast path of watches). */
export type VisibleTo = ((rec: HDict) => boolean) | undefined;

export class Gate {
  /** Whether the caller may read each record (MODEL_READ), as a function to pass around. */
  readonly readable: (rec: HDict) => boolean;

  private constructor(readonly principal: Principal) {
    const g = principal.grants;
    this.readable = (rec) => g.allows('MODEL_READ', rec);
  }

  private static readonly gates = new WeakMap<Principal, Gate>();

  /**
   * The gate of a principal. The auth service hands out the same principal object for as long as
   * a token and the grants are unchanged, so a request's gate is a lookup, not an allocation.
   */
  static of(p: Principal): Gate {
    let g = Gate.gates.get(p);
    if (g === undefined) {
      g = new Gate(p);
      Gate.gates.set(p, g);
    }
    return g;
  }

  /** The gate of ALLOW_ALL_PRINCIPAL. */
  static readonly OPEN: Gate = Gate.of(ALLOW_ALL_PRINCIPAL);

  /** Granted (for this entity, when given; else for some entities at least). */
  can(perm: Permission, entity?: HDict): boolean {
    const g = this.principal.grants;
    return entity === undefined ? g.has(perm) : g.allows(perm, entity);
  }

  /** Granted for every entity. */
  canAll(perm: Permission): boolean {
    return this.principal.grants.hasAll(perm);
  }

  /** Throws HL_FORBIDDEN unless `can(perm, entity)`; `what` names the action in the message. */
  require(perm: Permission, what: string, entity?: HDict): void {
    if (!this.can(perm, entity)) throw forbidden(what, perm);
  }

  /** Throws HL_FORBIDDEN unless `canAll(perm)`: actions over the whole store (backup, user admin). */
  requireAll(perm: Permission, what: string): void {
    if (!this.canAll(perm)) throw forbidden(what, perm);
  }

  /**
   * Records matching a filter that the caller may read, at most `limit` of them (0: all). With
   * scoped read rights the limit counts what the caller may see, not what the filter matched.
   */
  read(model: Model, filter: string, limit: number): HDict[] {
    if (this.canAll('MODEL_READ')) return model.query(filter, limit);
    const rows = model.query(filter).filter(this.readable);
    return limit > 0 ? rows.slice(0, limit) : rows;
  }

  /** The rows of a watch the caller may have: points it may read and watch (undefined: all, no per-point check). */
  watchVisible(): VisibleTo {
    const g = this.principal.grants;
    if (g.hasAll('MODEL_READ') && g.hasAll('WATCH')) return undefined;
    return (rec) => g.allows('MODEL_READ', rec) && g.allows('WATCH', rec);
  }

  /**
   * Throws unless the caller may write `level` of this point: HL_NOT_FOUND when it may not read
   * it, HL_FORBIDDEN without POINT_WRITE on it or above its highest level (permissions.ts).
   * Bound, so it can be handed to the point writer as its `authorize`.
   */
  readonly authorizeWrite = (rec: HDict, level: number): void => {
    this.principal.grants.authorizeWrite(rec, level);
  };
}

function forbidden(what: string, perm: Permission): HayloftError {
  return new HayloftError(ErrorCodes.FORBIDDEN, `permission denied: ${what} needs ${perm}`);
}

/** Gates by access token, for callers that hold a token rather than a request (push sockets). */
export interface TokenGates {
  /** The gate of a token known and valid, without a promise; undefined: ask `of`. */
  cached(token: string): Gate | undefined;
  /** The gate of a token, acting as `impersonate` when given; rejects as authentication and impersonation refuse. */
  of(token: string, impersonate?: string): Promise<Gate>;
}

/** Gates by token from the auth service; every token opens Gate.OPEN on a server without authentication. */
export function tokenGates(auth: AuthService | null): TokenGates {
  if (auth === null) return { cached: () => Gate.OPEN, of: () => Promise.resolve(Gate.OPEN) };
  return {
    cached(token) {
      const p = auth.cachedPrincipal(token);
      return p === undefined ? undefined : Gate.of(p);
    },
    async of(token, impersonate) {
      const p = auth.cachedPrincipal(token) ?? (await auth.authenticate(token));
      return Gate.of(impersonate === undefined ? p : auth.impersonate(p, impersonate.trim()));
    },
  };
}

/**
 * The gate of a user by name, acting without a token: an MQTT host application's commands are
 * checked as the configured `writeAs` user's pointWrite would be, with the same cached grants.
 * `role` says where the name comes from, for the refusal when no such user exists.
 */
export function gateOfUser(auth: AuthService, username: string, role: string): Gate {
  const p = auth.userPrincipal(username);
  if (p === undefined) throw new HayloftError(ErrorCodes.FORBIDDEN, `the ${role} user "${username}" does not exist`);
  return Gate.of(p);
}
