/**
 * Maps local entities to upstream ones by fully qualified name (`site.equip.point`): a synced
 * point and its ancestors are looked up upstream by name (read by id accepts one), created with
 * createRec when missing (parents first, so children can reference them), and their tags kept in
 * step with updateRec. Once found, an entity is known by its upstream id (kept in SyncState), so a
 * local rename renames it upstream instead of creating another.
 *
 * Tags sent: every stored tag except `id` and `mod` (the upstream keeps its own); Refs are
 * translated to upstream ids, and Refs to entities that are not synced (a driver connection, a
 * role) are left out. Only tags the uplink sent before are ever removed upstream: tags added there
 * by other clients stay. Every step is idempotent, so a lost answer is handled by doing it again:
 * a createRec that landed unseen is found by name on the next pass.
 */
import { writeJsonGrid, writeJsonVal } from '../haystack/json.js';
import { HDict, HGrid, HRef, type HVal, REMOVE, newRecord } from '../haystack/values.js';
import { ErrorCodes } from '../lib/errors.js';
import type { Logger } from '../lib/log.js';
import type { Model } from '../model/model.js';
import { type UpstreamClient, UpstreamError } from './client.js';
import type { Mapping, SyncState } from './state.js';

/** Parent tags in precedence order (docs/spec/wire-notes.md §4, as src/model resolves parents). */
const PARENT_TAGS = ['equipRef', 'spaceRef', 'siteRef'] as const;
/** Tags the upstream keeps for itself. */
const OWN_TAGS = new Set(['id', 'mod']);
/** Rows per read/createRec/updateRec request. */
const CHUNK = 500;

export function parentOf(rec: HDict): string | undefined {
  for (const tag of PARENT_TAGS) {
    const r = rec.get(tag);
    if (r instanceof HRef) return r.id;
  }
  return undefined;
}

export interface MapperOptions {
  model: Model;
  client: UpstreamClient;
  state: SyncState;
  createMissing: boolean;
  updateTags: boolean;
  log: Logger;
}

export interface MapOutcome {
  /** Points that cannot be synced, with the reason (shown as syncErr). */
  faults: Map<string, string>;
  /** True when mappings changed: Refs to newly mapped entities may now be sent, so run again. */
  changed: boolean;
}

function isRejected(e: unknown): e is UpstreamError {
  return e instanceof UpstreamError && e.code === ErrorCodes.UPLINK_REJECTED;
}

export class Mapper {
  private readonly o: MapperOptions;

  constructor(opts: MapperOptions) {
    this.o = opts;
  }

  /**
   * Makes sure every given point (and its ancestors) is mapped upstream with its tags in step.
   * Throws UNREACHABLE/AUTH errors (the caller retries later); problems of single entities come
   * back as faults of the points concerned.
   */
  async sync(pointIds: readonly string[]): Promise<MapOutcome> {
    const { model, state } = this.o;
    const faults = new Map<string, string>();
    let changed = false;
    // Every entity involved, with its depth (roots 0), and the points under each.
    const depth = new Map<string, number>();
    const pointsUnder = new Map<string, string[]>();
    for (const pid of pointIds) {
      const chain: string[] = [];
      let cur: string | undefined = pid;
      let problem: string | undefined;
      while (cur !== undefined && chain.length < 64) {
        const rec = model.stored(cur);
        if (rec === undefined) {
          problem = `its parent @${cur} does not exist`;
          break;
        }
        if (typeof rec.get('name') !== 'string') {
          problem = `${cur === pid ? 'it has' : `its ancestor @${cur} has`} no name, so it has no fully qualified name to be found by upstream`;
          break;
        }
        chain.push(cur);
        cur = parentOf(rec);
      }
      if (problem !== undefined) {
        faults.set(pid, problem);
        continue;
      }
      chain.reverse();
      chain.forEach((id, d) => {
        depth.set(id, d);
        let under = pointsUnder.get(id);
        if (under === undefined) pointsUnder.set(id, (under = []));
        under.push(pid);
      });
    }
    const entityFault = (id: string, why: string): void => {
      for (const pid of pointsUnder.get(id) ?? []) if (!faults.has(pid)) faults.set(pid, why);
    };

    // 1. Look up unmapped entities by fully qualified name.
    const unmapped = [...depth.keys()].filter((id) => state.mapping(id) === undefined);
    const found = await this.lookup(unmapped);
    if (found.length > 0) changed = true;
    // Adopted entities start with no tags "sent": step 3 sends all of ours.
    await state.setMappings(found.map(([id, up]) => [id, { up, tags: {} }] as const));

    // 2. Create what is still missing, parents first.
    const missing = unmapped.filter((id) => state.mapping(id) === undefined);
    if (missing.length > 0 && !this.o.createMissing) {
      for (const id of missing) entityFault(id, `@${model.fqname(id) ?? id} does not exist upstream (and uplink.createMissing is off)`);
    } else if (missing.length > 0) {
      const maxDepth = Math.max(...missing.map((id) => depth.get(id) as number));
      for (let d = 0; d <= maxDepth; d++) {
        const level = missing.filter((id) => depth.get(id) === d);
        const ready: string[] = [];
        for (const id of level) {
          const p = parentOf(model.stored(id) as HDict);
          if (p === undefined || state.mapping(p) !== undefined) ready.push(id);
        }
        if (ready.length > 0) {
          await this.create(ready, entityFault);
          changed = true;
        }
      }
    }

    // 3. Keep tags in step.
    if (this.o.updateTags) {
      const mapped = [...depth.keys()].filter((id) => state.mapping(id) !== undefined);
      const gone = await this.update(mapped, entityFault);
      if (gone.length > 0) {
        // Deleted upstream: forget them; the next pass finds or creates them again.
        await state.forget(gone, { cursor: false, mapping: true });
        changed = true;
      }
    }
    return { faults, changed };
  }

  /** [localId, upstreamId] of the entities found upstream by fully qualified name. */
  private async lookup(ids: readonly string[]): Promise<[string, string][]> {
    const out: [string, string][] = [];
    for (let i = 0; i < ids.length; i += CHUNK) {
      const part = ids.slice(i, i + CHUNK);
      const names = part.map((id) => this.o.model.fqname(id) as string);
      const rows = names.map((n) => HDict.of({ id: new HRef(n) }));
      const g = await this.o.client.call('read', writeJsonGrid(HGrid.fromRows(rows)));
      // Rows come back in request order; an unknown id gives an empty row.
      part.forEach((id, k) => {
        const r = g.rows[k]?.get('id');
        if (r instanceof HRef) out.push([id, r.id]);
      });
    }
    return out;
  }

  /** The tags to send for a local entity, as they should be upstream. */
  upstreamTags(rec: HDict): Record<string, HVal> {
    const out: Record<string, HVal> = {};
    for (const [tag, v] of rec) {
      if (OWN_TAGS.has(tag)) continue;
      const t = this.translate(v);
      if (t !== undefined) out[tag] = t;
    }
    return out;
  }

  /** A value with its Refs translated to upstream ids; undefined when it refers to something not synced. */
  private translate(v: HVal): HVal | undefined {
    if (v instanceof HRef) {
      const m = this.o.state.mapping(v.id);
      return m === undefined ? undefined : new HRef(m.up);
    }
    if (Array.isArray(v)) {
      const list = v as readonly HVal[];
      if (!list.some((x) => x instanceof HRef || Array.isArray(x))) return list;
      const out: HVal[] = [];
      for (const x of list) {
        const t = this.translate(x);
        if (t === undefined) return undefined;
        out.push(t);
      }
      return out;
    }
    return v;
  }

  private async create(ids: readonly string[], fault: (id: string, why: string) => void): Promise<void> {
    const { model, state } = this.o;
    for (let i = 0; i < ids.length; i += CHUNK) {
      const part = ids.slice(i, i + CHUNK);
      const tags = part.map((id) => this.upstreamTags(model.stored(id) as HDict));
      const send = async (idx: readonly number[]): Promise<void> => {
        const rows = idx.map((k) => HDict.of(tags[k] as Record<string, HVal>));
        const g = await this.o.client.call('createRec', writeJsonGrid(HGrid.fromRows(rows)));
        const entries: [string, Mapping][] = [];
        idx.forEach((k, j) => {
          const r = g.rows[j]?.get('id');
          if (r instanceof HRef) entries.push([part[k] as string, { up: r.id, tags: encodeTags(tags[k] as Record<string, HVal>) }]);
        });
        await state.setMappings(entries);
        // A point created upstream has no history there: all of ours is to be sent, even if a
        // point of that name (deleted upstream since) had received it.
        await state.forget(
          entries.map(([id]) => id),
          { cursor: true, mapping: false },
        );
      };
      const all = part.map((_, k) => k);
      try {
        await send(all);
      } catch (e) {
        if (!isRejected(e)) throw e;
        // One bad row refuses the whole request (all-or-nothing): find it by sending one at a time.
        for (const k of all) {
          try {
            await send([k]);
          } catch (e1) {
            if (!isRejected(e1)) throw e1;
            const id = part[k] as string;
            this.o.log.warn({ id, fqname: model.fqname(id), err: e1.message }, 'uplink: the upstream refused to create an entity');
            fault(id, `creating @${model.fqname(id) ?? id} upstream: ${e1.message}`);
          }
        }
      }
    }
  }

  /** Sends changed tags of mapped entities; returns those the upstream no longer has. */
  private async update(ids: readonly string[], fault: (id: string, why: string) => void): Promise<string[]> {
    const { model, state } = this.o;
    const work: { id: string; row: HDict; tags: Record<string, string> }[] = [];
    for (const id of ids) {
      const m = state.mapping(id) as Mapping;
      const current = this.upstreamTags(model.stored(id) as HDict);
      const want = encodeTags(current);
      const rec = newRecord();
      rec.id = new HRef(m.up);
      let diff = false;
      for (const [tag, text] of Object.entries(want)) {
        if (m.tags[tag] !== text) {
          rec[tag] = current[tag] as HVal;
          diff = true;
        }
      }
      for (const tag of Object.keys(m.tags)) {
        if (!(tag in want)) {
          rec[tag] = REMOVE;
          diff = true;
        }
      }
      if (diff) work.push({ id, row: HDict.adopt(rec), tags: want });
    }
    const gone: string[] = [];
    for (let i = 0; i < work.length; i += CHUNK) {
      const part = work.slice(i, i + CHUNK);
      const send = async (items: typeof part): Promise<void> => {
        await this.o.client.call('updateRec', writeJsonGrid(HGrid.fromRows(items.map((w) => w.row))));
        await state.setMappings(items.map((w) => [w.id, { up: (state.mapping(w.id) as Mapping).up, tags: w.tags }] as const));
      };
      try {
        await send(part);
      } catch (e) {
        if (!isRejected(e)) throw e;
        for (const w of part) {
          try {
            await send([w]);
          } catch (e1) {
            if (!isRejected(e1)) throw e1;
            if (e1.upstreamCode === ErrorCodes.NOT_FOUND) gone.push(w.id);
            else {
              this.o.log.warn({ id: w.id, err: e1.message }, 'uplink: the upstream refused a tag update');
              fault(w.id, `updating the tags of @${model.fqname(w.id) ?? w.id} upstream: ${e1.message}`);
            }
          }
        }
      }
    }
    return gone;
  }
}

function encodeTags(tags: Record<string, HVal>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(tags)) out[k] = writeJsonVal(v);
  return out;
}
