/**
 * src/model: the asset model. Entities live in LevelDB (src/store) and, for queries, in memory
 * here, with indexes:
 * - by id;
 * - by parent and name, for `name` uniqueness among siblings and fully qualified names
 *   (`site.equip.point`; the parent is `equipRef`, else `spaceRef`, else `siteRef`);
 * - by referenced id, so deleteRec can refuse an entity others reference and name them, and a
 *   filter `equipRef==@x` starts from the entities that reference @x;
 * - by tag name, so `point and his` starts from the smaller of the two sets.
 *
 * Changes (create, update, delete) of one request are computed against a transaction overlay,
 * validated whole, written in one synced LevelDB batch and only then applied in memory: all or
 * nothing. Commits are serialised; reads never wait.
 *
 * Live tags (live-tags.ts: `curVal`, `hisSize`, `connStatus`, `writeVal` ...) are kept in memory,
 * returned by read, never written to disk (a poll cycle must not cost a flash write). Their one
 * writer is point state (point-state.ts) through setTransient; createRec and updateRec refuse
 * them (HL_LIVE_TAG), so a client can never store or fake a reading.
 */
import { quoteInput } from '../lib/quote.js';
import { compileFilter, filterHints, parseFilter, type FilterNode } from '../haystack/filter.js';
import { HDateTime, HDict, HRef, type HVal, MARKER, REMOVE, equals, isRefId, newRecord } from '../haystack/values.js';
import { UTC } from '../haystack/tz.js';
import { ErrorCodes, HayloftError } from '../lib/errors.js';
import type { Clock } from '../lib/clock.js';
import type { RecordStore } from '../store/records.js';
import { checkRetentionTags } from '../store/retention-policy.js';
import { EventBus } from '../lib/events.js';
import { LIVE_TAGS } from './live-tags.js';
import type { ModelChange, ModelEvents } from './events.js';

export type { CommitHook, ModelChange, ModelListener, TransientListener } from './events.js';

/**
 * The markers that say what an entity is; each entity has exactly one. The connector markers of
 * the drivers (`modbusConn`) are primary markers too, learnt from the driver registry at load
 * (ModelOptions.drivers), after `conn`.
 */
export const PRIMARY_MARKERS: readonly string[] = ['site', 'space', 'equip', 'point', 'device', 'conn', 'weatherStation', 'user', 'role', 'actionPolicy', 'alarmCond', 'notifyRoute', 'schedule', 'calendar'];

/**
 * What the model knows of the protocol drivers: the driver registry (drivers/registry.ts), given
 * by the composition root (the model may not import drivers/, .dependency-cruiser.cjs).
 */
export interface DriverCatalog {
  /** The markers of connector records (`modbusConn`, `bacnetConn`). */
  connMarkers(): readonly string[];
  /**
   * Checks a record created (old undefined) or updated against the drivers' rules (a Modbus
   * connector's register map); throws a HayloftError to refuse it.
   */
  checkRecord(rec: HDict, old: HDict | undefined): void;
}

/** True when an object has no own enumerable key (without building the list of keys). */
function isEmpty(o: object): boolean {
  for (const _ in o) return false;
  return true;
}

/** Parent tags, in precedence order, and the marker their target must carry. */
const PARENT_TAGS: readonly [string, string][] = [
  ['equipRef', 'equip'],
  ['spaceRef', 'space'],
  ['siteRef', 'site'],
];

/**
 * Tags never stored: a `password` tag would be kept and returned in clear. Passwords are set with
 * updatePassword or `hayloft user passwd` and kept hashed outside the records.
 */
const FORBIDDEN_TAGS: ReadonlySet<string> = new Set(['password', 'newPassword', 'passwordHash']);

/** Names become parts of fully qualified names, which are Ref ids: Ref chars without `.`. */
const NAME = /^[A-Za-z0-9_:\-~]+$/;

const ROOT = '';





/**
 * Checks a caller's right to each change, run inside the transaction on the validated records
 * (Refs resolved), so a refusal aborts the whole request. Throw to refuse.
 */
export interface CommitGuard {
  create?(rec: HDict): void;
  update?(old: HDict, rec: HDict): void;
  delete?(rec: HDict): void;
  /**
   * Whether the caller may read a record: a refusal names only those (a delete refused for its
   * referrers counts the others without naming them). Absent: every record may be named.
   */
  readonly visible?: (rec: HDict) => boolean;
}

function invalid(message: string): HayloftError {
  return new HayloftError(ErrorCodes.INVALID_RECORD, message);
}

function liveTag(tag: string): HayloftError {
  return new HayloftError(
    ErrorCodes.LIVE_TAG,
    `"${tag}" is kept by the server (drivers, history, writes, the uplink) and cannot be set by createRec or updateRec; leave it out (write a writable point with pointWrite, a point's history with hisWrite)`,
  );
}

/** Every Ref a record holds (tags and lists of Refs), except its own id. */
function refsOf(rec: HDict): { tag: string; id: string }[] {
  const out: { tag: string; id: string }[] = [];
  for (const [tag, v] of rec) {
    if (tag === 'id') continue;
    if (v instanceof HRef) out.push({ tag, id: v.id });
    else if (Array.isArray(v)) {
      for (const x of v as readonly HVal[]) if (x instanceof HRef) out.push({ tag, id: x.id });
    }
  }
  return out;
}

function parentId(rec: HDict): string {
  for (const [tag] of PARENT_TAGS) {
    const r = rec.get(tag);
    if (r instanceof HRef) return r.id;
  }
  return ROOT;
}

function idOf(rec: HDict): string {
  return (rec.get('id') as HRef).id;
}

function label(rec: HDict | undefined, id: string): string {
  const n = rec?.get('name') ?? rec?.get('dis');
  return typeof n === 'string' ? `@${id} (${n})` : `@${id}`;
}

/**
 * A request's working state: changed records over the committed ones, with its own name index,
 * so rows later in a request see rows earlier in it (create a site and its equips at once).
 */
class Tx {
  readonly puts = new Map<string, HDict>();
  readonly dels = new Set<string>();
  /** parent + "\0" + name -> id, or null where a committed entry no longer holds. */
  private readonly names = new Map<string, string | null>();

  constructor(private readonly model: Model) {}

  get(id: string): HDict | undefined {
    if (this.dels.has(id)) return undefined;
    return this.puts.get(id) ?? this.model.stored(id);
  }

  childByName(parent: string, name: string): string | undefined {
    const k = parent + '\0' + name;
    const o = this.names.get(k);
    if (o !== undefined) return o ?? undefined;
    return this.model.childId(parent, name);
  }

  /** Id or fully qualified name to id, as of this transaction. */
  resolveId(text: string): string | undefined {
    if (this.get(text) !== undefined) return text;
    let cur = ROOT;
    for (const part of text.split('.')) {
      const next = this.childByName(cur, part);
      if (next === undefined) return undefined;
      cur = next;
    }
    return cur === ROOT ? undefined : cur;
  }

  put(rec: HDict): void {
    const id = idOf(rec);
    const old = this.get(id);
    const oldName = old?.get('name');
    if (old !== undefined && typeof oldName === 'string') this.names.set(parentId(old) + '\0' + oldName, null);
    const name = rec.get('name');
    if (typeof name === 'string') this.names.set(parentId(rec) + '\0' + name, id);
    this.puts.set(id, rec);
  }

  del(id: string): void {
    const old = this.get(id);
    const oldName = old?.get('name');
    if (old !== undefined && typeof oldName === 'string') this.names.set(parentId(old) + '\0' + oldName, null);
    this.puts.delete(id);
    this.dels.add(id);
  }
}

export interface ModelOptions {
  records: RecordStore;
  clock: Clock;
  /** Generates ids for new records; UUID v4 by default. */
  newId?: () => string;
  /**
   * The bus the model emits 'records.batch', 'records.committed' and 'live.changed' on (the app's,
   * shared by every part); a model built alone (tests, CLI commands) makes its own.
   */
  events?: EventBus<ModelEvents>;
  /** The drivers: their connector markers and record checks. Absent: no connector marker but `conn`. */
  drivers?: DriverCatalog;
}

export class Model {
  private readonly records: RecordStore;
  private readonly clock: Clock;
  private readonly newId: () => string;
  private readonly drivers: DriverCatalog | undefined;
  /** PRIMARY_MARKERS with the drivers' connector markers. */
  private readonly primary: readonly string[];
  private readonly isPrimary: ReadonlySet<string>;
  private readonly byId = new Map<string, HDict>();
  private readonly transient = new Map<string, Record<string, HVal>>();
  private readonly children = new Map<string, Map<string, string>>();
  private readonly referrers = new Map<string, Set<string>>();
  private readonly byTag = new Map<string, Set<string>>();
  /** Every tag name ever set as transient: filters on them cannot use the tag index. */
  private readonly transientNames = new Set<string>(LIVE_TAGS);
  /** Records as returned (Refs with display names); cleared on every commit. */
  private readonly views = new Map<string, HDict>();
  private readonly filters = new Map<string, { node: FilterNode; run: ReturnType<typeof compileFilter> }>();
  /** The bus this model emits on: parts that react to records and live tags subscribe to it. */
  readonly events: EventBus<ModelEvents>;
  private lock: Promise<unknown> = Promise.resolve();

  private constructor(opts: ModelOptions) {
    this.records = opts.records;
    this.clock = opts.clock;
    this.newId = opts.newId ?? (() => crypto.randomUUID());
    this.events = opts.events ?? new EventBus<ModelEvents>();
    this.drivers = opts.drivers;
    const conn = PRIMARY_MARKERS.indexOf('conn') + 1;
    this.primary = [...PRIMARY_MARKERS.slice(0, conn), ...(opts.drivers?.connMarkers() ?? []), ...PRIMARY_MARKERS.slice(conn)];
    this.isPrimary = new Set(this.primary);
  }

  /** Loads every stored record and builds the indexes. */
  static async load(opts: ModelOptions): Promise<Model> {
    const m = new Model(opts);
    for (const rec of await opts.records.loadAll()) m.index(rec);
    return m;
  }

  get size(): number {
    return this.byId.size;
  }

  /** The committed, persisted tags of a record (no transient tags, no display names). */
  stored(id: string): HDict | undefined {
    return this.byId.get(id);
  }

  childId(parent: string, name: string): string | undefined {
    return this.children.get(parent)?.get(name);
  }

  /** An id, or a fully qualified name (`site.equip.point`), to the record's id. */
  resolveId(text: string): string | undefined {
    if (this.byId.has(text)) return text;
    let cur = ROOT;
    for (const part of text.split('.')) {
      const next = this.children.get(cur)?.get(part);
      if (next === undefined) return undefined;
      cur = next;
    }
    return cur === ROOT ? undefined : cur;
  }

  /** The record as read returns it: transient tags included, Refs carrying display names. */
  get(idOrName: string): HDict | undefined {
    const id = this.resolveId(idOrName);
    return id === undefined ? undefined : this.view(id);
  }

  /** How messages name a record: its fully qualified name, else `@id`. */
  nameOf(id: string): string {
    return this.fqname(id) ?? `@${id}`;
  }

  /** The fully qualified name of a record, or undefined when it or an ancestor has no name. */
  fqname(id: string): string | undefined {
    const parts: string[] = [];
    let cur: string = id;
    for (let depth = 0; cur !== ROOT && depth < 64; depth++) {
      const rec = this.byId.get(cur);
      const name = rec?.get('name');
      if (rec === undefined || typeof name !== 'string') return undefined;
      parts.push(name);
      cur = parentId(rec);
    }
    return parts.reverse().join('.');
  }

  /** The display name given to Refs to a record: its `name`, else its `dis`. */
  displayOf(id: string): string | null {
    const rec = this.byId.get(id);
    const n = rec?.get('name') ?? rec?.get('dis');
    return typeof n === 'string' ? n : null;
  }

  /**
   * The record as returned, cached until it changes (a commit, or its transient tags), so reads
   * return the same immutable dict and encoders can reuse its text.
   */
  private view(id: string): HDict | undefined {
    let v = this.views.get(id);
    if (v === undefined) {
      const rec = this.byId.get(id);
      if (rec === undefined) return undefined;
      const out = newRecord();
      for (const [tag, val] of rec) out[tag] = this.withDisplay(val);
      const t = this.transient.get(id);
      if (t !== undefined) Object.assign(out, t);
      v = HDict.adopt(out);
      this.views.set(id, v);
    }
    return v;
  }

  private withDisplay(v: HVal): HVal {
    if (v instanceof HRef) return v.withDis(this.displayOf(v.id) ?? v.dis);
    if (Array.isArray(v)) return Object.freeze((v as readonly HVal[]).map((x) => this.withDisplay(x)));
    return v;
  }

  /**
   * Ids of the records that have a tag, from the tag index: no read views are built (the poller
   * finds its thousands of connectors and points at start without making a view of each).
   */
  idsWithTag(tag: string): string[] {
    return [...(this.byTag.get(tag) ?? [])];
  }

  /** Ids of the records that reference `id`. */
  referrersOf(id: string): string[] {
    return [...(this.referrers.get(id) ?? [])];
  }

  private compiled(filter: string): { node: FilterNode; run: ReturnType<typeof compileFilter> } {
    let c = this.filters.get(filter);
    if (c === undefined) {
      const node = parseFilter(filter);
      c = { node, run: compileFilter(node) };
      if (this.filters.size > 500) this.filters.clear();
      this.filters.set(filter, c);
    }
    return c;
  }

  /**
   * Records matching a filter (text or parsed), as read returns them; `limit` 0 or absent means
   * all. Candidates come from the smallest index the filter's required terms allow.
   */
  query(filter: string | FilterNode, limit = 0): HDict[] {
    const { node, run } = typeof filter === 'string' ? this.compiled(filter) : { node: filter, run: compileFilter(filter) };
    const hints = filterHints(node);
    let candidates: Iterable<string> = this.byId.keys();
    let best = Infinity;
    for (const tag of hints.has) {
      // Transient tags (curStatus, hisSize ...) are in no index: they narrow nothing.
      if (this.transientNames.has(tag)) continue;
      const s = this.byTag.get(tag);
      if (s === undefined) return [];
      if (s.size < best) {
        best = s.size;
        candidates = s;
      }
    }
    for (const { path, id } of hints.refEq) {
      if (path.includes('->')) continue;
      // `id == @x` matches x itself, which the referrers index (Refs to x held by other
      // records) never contains: its one candidate is x.
      const s = path === 'id' ? (this.byId.has(id) ? new Set([id]) : undefined) : this.referrers.get(id);
      if (s === undefined) return [];
      if (s.size < best) {
        best = s.size;
        candidates = s;
      }
    }
    const resolve = (ref: HRef): HDict | undefined => this.view(ref.id);
    const out: HDict[] = [];
    for (const id of candidates) {
      const v = this.view(id);
      if (v !== undefined && run(v, resolve)) {
        out.push(v);
        if (limit > 0 && out.length >= limit) break;
      }
    }
    return out;
  }

  /**
   * A record's live tags as they are now (undefined: none), for point state's repeat check. Read
   * only: it is the model's own object, not a copy, so the poll path allocates nothing to look.
   */
  liveTags(id: string): Readonly<Record<string, HVal>> | undefined {
    return this.transient.get(id);
  }

  /**
   * Sets live tags of a record (null removes one). Point state (point-state.ts) is the one
   * caller in the app; tests of watches use it as a driver would.
   */
  setTransient(id: string, tags: Record<string, HVal>): void {
    // A record with live tags exists (a delete drops them): one lookup on the poll path.
    const had = this.transient.get(id);
    if (had === undefined && !this.byId.has(id)) return;
    const cur = had ?? {};
    let removed = false;
    // Only tags whose value differs count as changed: a driver re-reading the same value, or
    // hisWrite republishing his stats, must not make every watch report the point again.
    let changed: string[] | undefined;
    // for-in, not Object.entries: no array per tag on the poll path.
    for (const k in tags) {
      const v = tags[k] as HVal | null;
      if (!this.transientNames.has(k)) this.transientNames.add(k);
      const old = cur[k];
      if (v === null || v === REMOVE) {
        if (old === undefined) continue;
        delete cur[k];
        removed = true;
      } else {
        if (old !== undefined && equals(old, v)) continue;
        cur[k] = v;
      }
      (changed ??= []).push(k);
    }
    if (changed === undefined) return;
    if (removed && isEmpty(cur)) this.transient.delete(id);
    else if (had === undefined) this.transient.set(id, cur);
    this.views.delete(id);
    // The poll hot path (a driver sets thousands of points a second): listeners get the id and
    // the changed tag names only and must be cheap (the watch manager adds the id to a Set per
    // watch); they read values later.
    this.events.emit('live.changed', id, changed);
  }

  /** Creates records; returns them in request order, as read returns them. */
  create(rows: readonly HDict[], guard: CommitGuard = {}): Promise<HDict[]> {
    return this.serialise(async () => {
      const tx = new Tx(this);
      const now = new HDateTime(this.clock.now(), UTC);
      const created: HDict[] = [];
      rows.forEach((row, i) => {
        const where = rows.length > 1 ? `row ${i}: ` : '';
        try {
          const rec = newRecord();
          let id: string;
          const given = row.get('id');
          if (given === undefined) id = this.newId();
          else if (given instanceof HRef) {
            id = given.id;
            if (tx.get(id) !== undefined) throw new HayloftError(ErrorCodes.CONFLICT, `id @${id} already exists`);
            if (!isRefId(id)) throw invalid(`${quoteInput(id)} is not a valid id`);
          } else throw invalid('id must be a Ref');
          rec.id = new HRef(id);
          for (const [tag, v] of row) {
            if (LIVE_TAGS.has(tag)) throw liveTag(tag);
            if (tag === 'id' || v === REMOVE) continue;
            rec[tag] = v;
          }
          rec.mod = now;
          const dict = this.check(tx, HDict.adopt(rec));
          guard.create?.(dict);
          // After the caller's rights: a refused caller learns nothing of the drivers' rules.
          this.drivers?.checkRecord(dict, undefined);
          tx.put(dict);
          created.push(dict);
        } catch (e) {
          throw prefixed(e, where);
        }
      });
      await this.commit(tx);
      this.emit({ created, updated: [], deleted: [] });
      return created.map((r) => this.view(idOf(r)) as HDict);
    });
  }

  /**
   * Updates records: each row names a record by `id` (id or fully qualified name); other tags
   * are set, Remove (`-:` or `x:`) removes one; `id` and the primary marker cannot change.
   */
  update(rows: readonly HDict[], guard: CommitGuard = {}): Promise<HDict[]> {
    return this.serialise(async () => {
      const tx = new Tx(this);
      const now = new HDateTime(this.clock.now(), UTC);
      const updated: HDict[] = [];
      rows.forEach((row, i) => {
        const where = rows.length > 1 ? `row ${i}: ` : '';
        try {
          const ref = row.get('id');
          if (!(ref instanceof HRef)) throw new HayloftError(ErrorCodes.BAD_REQUEST, 'each row needs an id (a Ref: id or fully qualified name)');
          const id = tx.resolveId(ref.id);
          if (id === undefined) throw new HayloftError(ErrorCodes.NOT_FOUND, `no record @${ref.id}`);
          const old = tx.get(id) as HDict;
          const rec = old.toRecord();
          let changed = false;
          for (const [tag, v] of row) {
            if (tag === 'id') continue;
            if (LIVE_TAGS.has(tag)) throw liveTag(tag);
            if (tag === 'mod') continue;
            if (this.isPrimary.has(tag) && (v === REMOVE) === old.has(tag)) {
              throw invalid(`the primary marker "${tag}" of ${label(old, id)} cannot be ${v === REMOVE ? 'removed' : 'added'}`);
            }
            if (v === REMOVE) {
              if (tag in rec) {
                delete rec[tag];
                changed = true;
              }
            } else {
              rec[tag] = v;
              changed = true;
            }
          }
          let dict = old;
          if (changed) {
            rec.mod = now;
            dict = this.check(tx, HDict.adopt(rec));
            guard.update?.(old, dict);
            this.drivers?.checkRecord(dict, old);
            tx.put(dict);
          }
          updated.push(dict);
        } catch (e) {
          throw prefixed(e, where);
        }
      });
      if (tx.puts.size > 0) await this.commit(tx);
      this.emit({ created: [], updated, deleted: [] });
      return updated.map((r) => this.view(idOf(r)) as HDict);
    });
  }

  /**
   * Deletes records by id or fully qualified name. Refused, whole, when any of them is
   * referenced by a record that is not deleted too; the error names the referrers.
   */
  delete(ids: readonly string[], guard: CommitGuard = {}): Promise<HDict[]> {
    return this.serialise(async () => {
      const tx = new Tx(this);
      const deleted: HDict[] = [];
      // Resolve every id or name before deleting any: once a record is deleted in the
      // transaction, its id and the names of its descendants no longer resolve, which would
      // refuse a request naming a parent before its children, or one record twice.
      const resolved = ids.map((text) => {
        const id = tx.resolveId(text);
        if (id === undefined) throw new HayloftError(ErrorCodes.NOT_FOUND, `no record @${text}`);
        return id;
      });
      for (const id of resolved) {
        if (tx.dels.has(id)) continue;
        const rec = this.view(id) as HDict;
        guard.delete?.(rec);
        deleted.push(rec);
        tx.del(id);
      }
      const blocked: string[] = [];
      for (const id of tx.dels) {
        const all = [...(this.referrers.get(id) ?? [])].filter((r) => !tx.dels.has(r));
        if (all.length === 0) continue;
        const rec = this.byId.get(id);
        const visible = guard.visible;
        const by = visible === undefined ? all : all.filter((r) => visible(this.view(r) as HDict));
        const hidden = all.length - by.length;
        const via = by.slice(0, 10).map((r) => {
          const src = this.byId.get(r) as HDict;
          const tags = refsOf(src)
            .filter((x) => x.id === id)
            .map((x) => x.tag);
          return `${label(src, r)} via ${[...new Set(tags)].join(', ')}`;
        });
        if (by.length > 10) via.push(`${by.length - 10} more`);
        if (hidden > 0) via.push(`${hidden} record${hidden === 1 ? '' : 's'} you cannot read`);
        blocked.push(`${label(rec, id)} is referenced by ${via.join('; ')}`);
      }
      if (blocked.length > 0) {
        throw new HayloftError(ErrorCodes.REFERENCED, `cannot delete: ${blocked.join('. ')}. Delete or update the referrers first.`);
      }
      await this.commit(tx);
      for (const id of tx.dels) this.transient.delete(id);
      this.emit({ created: [], updated: [], deleted });
      return deleted;
    });
  }

  /** Validates a new version of a record against the transaction; returns it (Refs resolved). */
  private check(tx: Tx, rec: HDict): HDict {
    const id = idOf(rec);
    const primaries = rec.names().filter((t) => this.isPrimary.has(t));
    if (primaries.length !== 1) {
      throw invalid(
        primaries.length === 0
          ? `a record needs one primary marker (${this.primary.join(', ')}); none given`
          : `a record has exactly one primary marker; got ${primaries.join(', ')}`,
      );
    }
    for (const tag of rec.names()) {
      if (FORBIDDEN_TAGS.has(tag)) {
        throw invalid(`"${tag}" cannot be a tag: passwords are never stored in records (set them with updatePassword or hayloft user passwd)`);
      }
    }
    const primary = primaries[0] as string;
    if (rec.get(primary) !== MARKER) throw invalid(`"${primary}" must be a Marker`);
    // Refs may name their target by fully qualified name: store the id.
    let changed: Record<string, HVal> | undefined;
    for (const [tag, v] of rec) {
      if (tag === 'id') continue;
      const fixed = this.resolveRefs(tx, tag, v, id);
      if (fixed !== v) (changed ??= {})[tag] = fixed;
    }
    if (changed !== undefined) rec = rec.with(changed);
    const name = rec.get('name');
    if (name !== undefined) {
      if (typeof name !== 'string' || !NAME.test(name)) {
        throw invalid(`name ${typeof name === 'string' ? JSON.stringify(name) : 'must be a Str'}: use letters, digits, _ : - ~ (no dots or spaces; names make up fully qualified names)`);
      }
    }
    // How long its history is kept (store/retention-policy.ts): refused here, not at the next retention run.
    checkRetentionTags(rec);
    for (const [tag, marker] of PARENT_TAGS) {
      const r = rec.get(tag);
      if (r === undefined) continue;
      if (!(r instanceof HRef)) throw invalid(`${tag} must be a Ref`);
      const target = tx.get(r.id) as HDict;
      if (!target.has(marker)) throw invalid(`${tag} ${label(target, r.id)} is not a ${marker}`);
    }
    const parent = parentId(rec);
    // No cycles through parents (an equip whose equipRef leads back to itself).
    for (let cur = parent, depth = 0; cur !== ROOT; depth++) {
      if (cur === id || depth > 64) throw invalid(`${label(rec, id)} cannot be its own ancestor`);
      cur = parentId(tx.get(cur) as HDict);
    }
    if (typeof name === 'string') {
      const holder = tx.childByName(parent, name);
      if (holder !== undefined && holder !== id) {
        const where = parent === ROOT ? 'at the top level' : `under ${label(tx.get(parent), parent)}`;
        throw new HayloftError(ErrorCodes.CONFLICT, `name "${name}" is already used ${where} by @${holder}`);
      }
    }
    return rec;
  }

  private resolveRefs(tx: Tx, tag: string, v: HVal, self: string): HVal {
    if (v instanceof HRef) {
      const target = v.id === self ? self : tx.resolveId(v.id);
      if (target === undefined) throw invalid(`${tag} @${v.id} does not exist`);
      return target === v.id && v.dis === null ? v : new HRef(target);
    }
    if (Array.isArray(v)) {
      let out: HVal[] | undefined;
      (v as readonly HVal[]).forEach((x, i) => {
        const y = this.resolveRefs(tx, `${tag}[${i}]`, x, self);
        if (y !== x) (out ??= [...(v as readonly HVal[])])[i] = y;
      });
      return out === undefined ? v : Object.freeze(out);
    }
    return v;
  }

  private async commit(tx: Tx): Promise<void> {
    const change = { puts: [...tx.puts.values()], deleted: [...tx.dels].map((id) => this.byId.get(id)).filter((r): r is HDict => r !== undefined) };
    await this.records.write(
      [...tx.puts].map(([id, rec]) => ({ id, rec })),
      [...tx.dels],
      this.events.has('records.batch') ? (ops) => this.events.emit('records.batch', change, ops) : undefined,
    );
    for (const id of tx.dels) this.unindex(id);
    for (const rec of tx.puts.values()) {
      this.unindex(idOf(rec));
      this.index(rec);
    }
    this.views.clear();
  }

  private index(rec: HDict): void {
    const id = idOf(rec);
    this.byId.set(id, rec);
    const name = rec.get('name');
    if (typeof name === 'string') {
      const p = parentId(rec);
      let m = this.children.get(p);
      if (m === undefined) this.children.set(p, (m = new Map<string, string>()));
      m.set(name, id);
    }
    for (const { id: target } of refsOf(rec)) {
      let s = this.referrers.get(target);
      if (s === undefined) this.referrers.set(target, (s = new Set()));
      s.add(id);
    }
    for (const tag of rec.names()) {
      let s = this.byTag.get(tag);
      if (s === undefined) this.byTag.set(tag, (s = new Set()));
      s.add(id);
    }
  }

  private unindex(id: string): void {
    const rec = this.byId.get(id);
    if (rec === undefined) return;
    this.byId.delete(id);
    const name = rec.get('name');
    if (typeof name === 'string') {
      const m = this.children.get(parentId(rec));
      if (m?.get(name) === id) m.delete(name);
    }
    for (const { id: target } of refsOf(rec)) this.referrers.get(target)?.delete(id);
    for (const tag of rec.names()) this.byTag.get(tag)?.delete(id);
  }

  private emit(change: ModelChange): void {
    this.events.emit('records.committed', change);
  }

  private serialise<T>(f: () => Promise<T>): Promise<T> {
    const run = this.lock.then(f, f);
    this.lock = run.catch(() => undefined);
    return run;
  }
}

function prefixed(e: unknown, where: string): unknown {
  if (where === '' || !(e instanceof HayloftError)) return e;
  return new HayloftError(e.code, where + e.message, { cause: e.cause });
}
