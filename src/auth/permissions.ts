/**
 * Permissions (docs/spec/wire-notes.md §3): a user's `roleRef` names a `role` whose `actionPolicyRefs` list
 * `actionPolicy` entities; each grants `permissions` (List of Str), scoped by an optional
 * `filter` (Str) to the entities it matches. A policy without a filter applies to everything.
 *
 * POINT_WRITE (pointWrite) is bounded by level too: a policy's `pointWriteLevel` (Number, 1-17)
 * is the highest-priority level it lets its holders write, so `pointWriteLevel: 8` allows levels
 * 8 to 17 (a technician's manual override, not emergency level 1). Without it, every level.
 */
import { compileFilter, parseFilter, type CompiledFilter } from '../haystack/filter.js';
import { type HDict, HNumber, HRef, type HVal } from '../haystack/values.js';
import type { Model } from '../model/model.js';
import { ErrorCodes, HayloftError } from '../lib/errors.js';

export const PERMISSIONS = [
  'MODEL_READ',
  'MODEL_CREATE',
  'MODEL_UPDATE',
  'MODEL_DELETE',
  'HIS_READ',
  'HIS_WRITE',
  'POINT_WRITE',
  'WATCH',
  'IMPERSONATE',
  'USER_ADMIN',
  'ALARM_ACK',
  'ALARM_SHELVE',
] as const;
export type Permission = (typeof PERMISSIONS)[number];

/**
 * Permissions added after the first release, each with every permission there was before it: the
 * built-in administrators' policy that holds all of those gets it at start
 * (AuthService.grantNewPermissions). Add a row here with every new permission.
 */
export const LATER_PERMISSIONS: readonly { readonly perm: Permission; readonly before: readonly Permission[] }[] = [
  { perm: 'POINT_WRITE', before: ['MODEL_READ', 'MODEL_CREATE', 'MODEL_UPDATE', 'MODEL_DELETE', 'HIS_READ', 'HIS_WRITE', 'WATCH', 'IMPERSONATE', 'USER_ADMIN'] },
  // Acknowledging and shelving alarms (docs/alarms.md).
  { perm: 'ALARM_ACK', before: ['MODEL_READ', 'MODEL_CREATE', 'MODEL_UPDATE', 'MODEL_DELETE', 'HIS_READ', 'HIS_WRITE', 'POINT_WRITE', 'WATCH', 'IMPERSONATE', 'USER_ADMIN'] },
  { perm: 'ALARM_SHELVE', before: ['MODEL_READ', 'MODEL_CREATE', 'MODEL_UPDATE', 'MODEL_DELETE', 'HIS_READ', 'HIS_WRITE', 'POINT_WRITE', 'WATCH', 'IMPERSONATE', 'USER_ADMIN'] },
];

export function isPermission(s: string): s is Permission {
  return (PERMISSIONS as readonly string[]).includes(s);
}

/**
 * What a principal holds: a user's Grants, or everything (ALLOW_ALL, for a server without
 * authentication and for the daemon's own callers). The gate (gate.ts) asks only this.
 */
export interface Access {
  /** Granted at all (for some entities at least). */
  has(perm: Permission): boolean;
  /** Granted for every entity. */
  hasAll(perm: Permission): boolean;
  /** Granted for this entity. */
  allows(perm: Permission, entity: HDict): boolean;
  /** Throws unless the holder may write `level` of this point (Grants.authorizeWrite). */
  authorizeWrite(rec: HDict, level: number): void;
}

/** Everything, on every entity, at every level. */
export const ALLOW_ALL: Access = Object.freeze({
  has: () => true,
  hasAll: () => true,
  allows: () => true,
  authorizeWrite: () => undefined,
});

/** What one user may do: per permission, either everything or the entities some filter matches. */
export class Grants implements Access {
  private readonly all = new Set<Permission>();
  private readonly scoped = new Map<Permission, CompiledFilter[]>();
  /** POINT_WRITE grants with their highest-priority level (filter null: every entity). */
  private readonly writeLevels: { filter: CompiledFilter | null; level: number }[] = [];

  constructor(
    private readonly model: Model,
    policies: readonly HDict[],
  ) {
    for (const p of policies) {
      const perms = p.get('permissions');
      if (!Array.isArray(perms)) continue;
      const filterText = p.get('filter');
      let filter: CompiledFilter | null = null;
      if (typeof filterText === 'string' && filterText.trim() !== '') {
        try {
          filter = compileFilter(parseFilter(filterText));
        } catch {
          // A policy with a broken filter grants nothing rather than everything.
          continue;
        }
      }
      for (const x of perms as readonly HVal[]) {
        if (typeof x !== 'string' || !isPermission(x)) continue;
        if (x === 'POINT_WRITE') {
          const lv = p.get('pointWriteLevel');
          // A level that is not 1-17 grants nothing rather than everything.
          if (lv !== undefined && !(lv instanceof HNumber && Number.isInteger(lv.val) && lv.val >= 1 && lv.val <= 17)) continue;
          this.writeLevels.push({ filter, level: lv instanceof HNumber ? lv.val : 1 });
        }
        if (filter === null) this.all.add(x);
        else {
          let list = this.scoped.get(x);
          if (list === undefined) this.scoped.set(x, (list = []));
          list.push(filter);
        }
      }
    }
  }

  /** Granted at all (for some entities at least). */
  has(perm: Permission): boolean {
    return this.all.has(perm) || this.scoped.has(perm);
  }

  /** Granted for every entity. */
  hasAll(perm: Permission): boolean {
    return this.all.has(perm);
  }

  /** Granted for this entity. */
  allows(perm: Permission, entity: HDict): boolean {
    if (this.all.has(perm)) return true;
    const list = this.scoped.get(perm);
    if (list === undefined) return false;
    const resolve = (r: HRef): HDict | undefined => this.model.get(r.id);
    return list.some((f) => f(entity, resolve));
  }

  /**
   * The highest-priority (lowest) level the user may write to this point through any policy
   * granting POINT_WRITE for it; undefined when none does.
   */
  writeLevelFor(entity: HDict): number | undefined {
    let best: number | undefined;
    const resolve = (r: HRef): HDict | undefined => this.model.get(r.id);
    for (const g of this.writeLevels) {
      if (best !== undefined && g.level >= best) continue;
      if (g.filter === null || g.filter(entity, resolve)) best = g.level;
    }
    return best;
  }

  /**
   * Throws unless the user may write `level` of this point: HL_NOT_FOUND when it may not even read
   * it (a point it cannot read looks unknown, as everywhere), HL_FORBIDDEN without POINT_WRITE or
   * above the highest level its policies allow. Every write asks it through the gate (gate.ts).
   */
  authorizeWrite(rec: HDict, level: number): void {
    if (!this.allows('MODEL_READ', rec)) throw new HayloftError(ErrorCodes.NOT_FOUND, `no record @${(rec.get('id') as HRef).id}`);
    const best = this.writeLevelFor(rec);
    if (best === undefined) throw new HayloftError(ErrorCodes.FORBIDDEN, 'permission denied: pointWrite of this point needs POINT_WRITE');
    if (level < best) throw new HayloftError(ErrorCodes.FORBIDDEN, `permission denied: you may write levels ${best} to 17 of this point, not level ${level}`);
  }

  /** The granted permissions, for display. */
  names(): Permission[] {
    return PERMISSIONS.filter((p) => this.has(p));
  }
}

/** The policies that apply to a user entity (through its role). */
export function policiesOf(model: Model, user: HDict): HDict[] {
  const roleRef = user.get('roleRef');
  if (!(roleRef instanceof HRef)) return [];
  const role = model.get(roleRef.id);
  const refs = role?.get('actionPolicyRefs');
  if (role === undefined || !role.has('role') || !Array.isArray(refs)) return [];
  const out: HDict[] = [];
  for (const r of refs as readonly HVal[]) {
    if (!(r instanceof HRef)) continue;
    const p = model.get(r.id);
    if (p?.has('actionPolicy')) out.push(p);
  }
  return out;
}
