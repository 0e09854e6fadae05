/**
 * What an uplink remembers in the `sync` sublevel, per connector (keys start with its name):
 *
 *   <name>:c:<pointId>   cursor: epoch ms of the newest sample the upstream acknowledged
 *   <name>:m:<localId>   mapping: the upstream id of a local entity and the tags last sent for it
 *   <name>:t             the newest refresh token (the upstream rotates it on every refresh)
 *   <name>:s             last acknowledged batch time and last error, for `hayloft sync status`
 *   <name>:l:<pointId>   late: the spans of time (JSON [[from, to], ...], epoch ms) of samples
 *                        written at or before what was already sent (a backfill, a correction
 *                        of an old value), to be sent again. They are put in the very batch that
 *                        writes those samples (the bus's 'his.plan'), so no crash keeps the samples
 *                        and loses their mark.
 *
 * Cursors and mappings are written without fsync: losing the newest of them in a power cut only
 * makes the uplink send a batch again (hisWrite is idempotent per timestamp) or look an entity up
 * again by its name. The refresh token is written with fsync before it is used: the upstream has
 * already forgotten the one before it, and a device that lost it would be locked out.
 */
import { createHash } from 'node:crypto';
import type { Store } from '../store/db.js';
import type { HisBatch, HistoryStore } from '../store/history.js';
import { type Span, addSpan, parseSpans, subtractSpan } from './spans.js';

export interface Mapping {
  /** The entity's id upstream. */
  up: string;
  /** Tag name -> JSON text of the value last acknowledged upstream (for diffs and removals). */
  tags: Record<string, string>;
}

export interface ConnectorInfo {
  /** When the last batch was acknowledged (epoch ms), or null. */
  lastAck: number | null;
  /** The last failure's message, cleared by a success. */
  lastError: string | null;
}

const SYNCED = { sync: true } as object;

export function tokenFingerprint(token: string): string {
  return createHash('sha256').update(token).digest('base64url');
}

export class SyncState {
  private readonly store: Store;
  readonly name: string;
  private readonly cursors = new Map<string, number>();
  private readonly maps = new Map<string, Mapping>();
  /** Cursors moved by advance() and not yet stored. */
  private readonly unsaved = new Map<string, number>();
  /**
   * Late spans, by point (as stored); `fresh`, the spans marked since the point's first span was
   * read to be sent (null when it is not being sent), which ack() keeps pending.
   */
  private readonly lates = new Map<string, { spans: Span[]; fresh: Span[] | null }>();
  /** Per point being sent: samples up to here may be in the batch in flight (Infinity while it is read). */
  private readonly claims = new Map<string, number>();
  info: ConnectorInfo = { lastAck: null, lastError: null };

  constructor(store: Store, name: string) {
    this.store = store;
    this.name = name;
  }

  private key(kind: string, id = ''): string {
    return `${this.name}:${kind}${id === '' ? '' : ':' + id}`;
  }

  /** Loads every cursor and mapping of this connector (a short scan of its keys). */
  async load(): Promise<void> {
    this.cursors.clear();
    this.maps.clear();
    this.lates.clear();
    const prefix = `${this.name}:`;
    for await (const [k, v] of this.store.sync.iterator({ gte: prefix, lt: `${this.name};` })) {
      const rest = k.slice(prefix.length);
      if (rest.startsWith('c:')) {
        const ts = Number(v);
        if (Number.isFinite(ts)) this.cursors.set(rest.slice(2), ts);
      } else if (rest.startsWith('l:')) {
        const spans = parseSpans(v);
        if (spans !== undefined) this.lates.set(rest.slice(2), { spans, fresh: null });
      } else if (rest.startsWith('m:')) {
        try {
          const m = JSON.parse(v) as Mapping;
          if (typeof m.up === 'string' && typeof m.tags === 'object' && m.tags !== null) this.maps.set(rest.slice(2), m);
        } catch {
          // unreadable: the entity is looked up again by name
        }
      } else if (rest === 's') {
        try {
          this.info = { ...this.info, ...(JSON.parse(v) as Partial<ConnectorInfo>) };
        } catch {
          // start without it
        }
      }
    }
  }

  /** The newest acknowledged sample of a point, or -Infinity when none was. */
  cursor(pointId: string): number {
    return this.cursors.get(pointId) ?? -Infinity;
  }

  cursorIds(): string[] {
    return [...this.cursors.keys()];
  }

  /** A point's oldest span of late samples (see the `l` key), or undefined when it has none. */
  late(pointId: string): Span | undefined {
    return this.lates.get(pointId)?.spans[0];
  }

  /** A point's spans of late samples, oldest first (for the backlog and tests). */
  lateSpans(pointId: string): readonly Span[] {
    return this.lates.get(pointId)?.spans ?? [];
  }

  /**
   * The history store's plan event ('his.plan'): a write whose oldest sample is at or
   * before what was sent, or what may be in the batch in flight, marks its span up to there as
   * late, in the write's own batch. `before` is the point's newest sample before the write: a
   * write wholly after it cannot be in a read that began before it (the read's end is the point's
   * end when it began), so a claim does not mark it; it is after the cursor, and goes as usual.
   */
  markLate(pointId: string, first: number, last: number, before: number, batch: HisBatch): void {
    const claim = this.claims.get(pointId);
    const sent = Math.max(this.cursor(pointId), claim === undefined ? -Infinity : Math.min(claim, before));
    if (!(first <= sent)) return;
    const span: Span = [first, Math.min(last, sent)];
    let l = this.lates.get(pointId);
    if (l === undefined) this.lates.set(pointId, (l = { spans: [span], fresh: null }));
    else l.spans = addSpan(l.spans, span);
    if (l.fresh !== null) l.fresh.push(span);
    batch.put(this.key('l', pointId), JSON.stringify(l.spans), { sublevel: this.store.sync });
  }

  /**
   * Before points are read from the store to be sent, under their history locks, so that no write
   * of them is between its plan hook and its commit: a point read after its cursor is claimed
   * whole (see claim()); for a point whose first late span is read, what is marked from now on is
   * kept apart, for ack().
   */
  async beginReads(history: HistoryStore, reads: readonly { readonly id: string; readonly late: boolean }[]): Promise<void> {
    if (reads.length === 0) return;
    await history.exclusive(
      reads.map((r) => r.id),
      () => {
        for (const r of reads) {
          const l = r.late ? this.lates.get(r.id) : undefined;
          if (l !== undefined) l.fresh = [];
          else if (!r.late) this.claims.set(r.id, Infinity);
        }
        return Promise.resolve();
      },
    );
  }

  /**
   * A point's samples up to `upTo` may be in the batch being sent: until releaseClaims(), a write
   * of samples up to there, and not wholly after all the point held, marks it late. Infinity
   * (beginReads) while its read may miss a write; the newest sample read once it has, or once it
   * was taken from memory (what the store committed, so nothing is missed).
   */
  claim(pointId: string, upTo: number): void {
    this.claims.set(pointId, upTo);
  }

  releaseClaims(): void {
    this.claims.clear();
  }

  mapping(localId: string): Mapping | undefined {
    return this.maps.get(localId);
  }

  mappedIds(): string[] {
    return [...this.maps.keys()];
  }

  /**
   * Moves cursors after an acknowledged batch, and records when (one LevelDB batch). `late` gives
   * the late spans sent (a point, and the instants from..to the upstream now has as they were
   * read): they leave the point's spans, except what was marked again since it was read. With
   * `late`, call it under those points' history locks (HistoryStore.exclusive), so that no write's
   * mark comes between.
   */
  async ack(cursors: readonly (readonly [string, number])[], now: number, late: readonly (readonly [string, number, number])[] = []): Promise<void> {
    const batch = this.store.db.batch();
    for (const [id, ts] of cursors) batch.put(this.key('c', id), String(ts), { sublevel: this.store.sync });
    for (const [id, from, to] of late) {
      const l = this.lates.get(id);
      if (l === undefined) continue;
      // Memory moves before the write lands: a failed write only means sending again after a restart.
      let spans = subtractSpan(l.spans, from, to);
      for (const f of l.fresh ?? []) spans = addSpan(spans, f);
      l.fresh = null;
      if (spans.length === 0) {
        this.lates.delete(id);
        batch.del(this.key('l', id), { sublevel: this.store.sync });
      } else {
        l.spans = spans;
        batch.put(this.key('l', id), JSON.stringify(spans), { sublevel: this.store.sync });
      }
    }
    const info = { lastAck: now, lastError: null };
    batch.put(this.key('s'), JSON.stringify(info), { sublevel: this.store.sync });
    await batch.write();
    for (const [id, ts] of cursors) this.cursors.set(id, ts);
    this.info = info;
  }

  /**
   * Moves cursors in memory only; flush() stores them. For a publisher whose receiver takes a
   * sample twice without harm (MQTT: resent as historical): a crash in between sends the samples
   * after the stored cursors again, and writing 10,000 cursors every second is spared.
   */
  advance(cursors: readonly (readonly [string, number])[]): void {
    for (const [id, ts] of cursors) {
      this.cursors.set(id, ts);
      this.unsaved.set(id, ts);
    }
  }

  /** ack() under the history locks of the points whose late spans were sent, as it requires. */
  async ackSent(history: HistoryStore, cursors: readonly (readonly [string, number])[], now: number, late: readonly (readonly [string, number, number])[]): Promise<void> {
    if (late.length === 0) return this.ack(cursors, now);
    return history.exclusive(
      late.map(([id]) => id),
      () => this.ack(cursors, now, late),
    );
  }

  /** Stores the cursors advance() moved (one LevelDB batch), with the time of the acknowledgement. */
  async flush(now: number): Promise<void> {
    if (this.unsaved.size === 0) return;
    const entries = [...this.unsaved];
    this.unsaved.clear();
    await this.ack(entries, now);
  }

  async setMappings(entries: readonly (readonly [string, Mapping])[]): Promise<void> {
    if (entries.length === 0) return;
    const batch = this.store.db.batch();
    for (const [id, m] of entries) batch.put(this.key('m', id), JSON.stringify(m), { sublevel: this.store.sync });
    await batch.write();
    for (const [id, m] of entries) this.maps.set(id, m);
  }

  /** Forgets entities (deleted locally, or gone upstream): their cursors and mappings. */
  async forget(ids: readonly string[], what: { cursor: boolean; mapping: boolean }): Promise<void> {
    if (ids.length === 0) return;
    const batch = this.store.db.batch();
    for (const id of ids) {
      if (what.cursor) batch.del(this.key('c', id), { sublevel: this.store.sync });
      if (what.cursor) batch.del(this.key('l', id), { sublevel: this.store.sync });
      if (what.mapping) batch.del(this.key('m', id), { sublevel: this.store.sync });
    }
    await batch.write();
    for (const id of ids) {
      // A cursor moved by advance() and not yet flushed would otherwise be stored again.
      if (what.cursor) this.unsaved.delete(id);
      if (what.cursor) this.cursors.delete(id);
      if (what.cursor) this.lates.delete(id);
      if (what.mapping) this.maps.delete(id);
    }
  }

  async setError(message: string | null): Promise<void> {
    if (this.info.lastError === message) return;
    this.info = { ...this.info, lastError: message };
    await this.store.sync.put(this.key('s'), JSON.stringify(this.info));
  }

  /** The stored refresh token and the fingerprint of the configured one it descends from. */
  async loadToken(): Promise<{ from: string | null; token: string } | undefined> {
    const v = await this.store.sync.get(this.key('t'));
    if (v === undefined) return undefined;
    try {
      const j = JSON.parse(v) as { from?: unknown; token?: unknown };
      if (typeof j.token !== 'string') return undefined;
      return { from: typeof j.from === 'string' ? j.from : null, token: j.token };
    } catch {
      return undefined;
    }
  }

  async saveToken(from: string | null, token: string): Promise<void> {
    await this.store.sync.put(this.key('t'), JSON.stringify({ from, token }), SYNCED);
  }

  /** Names of the connectors that have anything stored. */
  static async connectors(store: Store): Promise<string[]> {
    const names = new Set<string>();
    for await (const k of store.sync.keys()) {
      const i = k.indexOf(':');
      if (i > 0) names.add(k.slice(0, i));
    }
    return [...names].sort();
  }
}
