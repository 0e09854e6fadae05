/**
 * The outbox: store-and-forward of points' history to one upstream, whatever carries it. The REST
 * uplink (uplink.ts) and the MQTT Sparkplug edge node (mqtt/edge-node.ts) are two senders on it:
 * each says how a batch and live data go over its wire and keeps its own connection; everything
 * about what has gone and what is still to go is here.
 *
 * What it owns, per connector (its keys in the `sync` sublevel, see SyncState):
 * - cursors (the newest sample the upstream acknowledged, per point) and late spans (samples
 *   written at or before what was sent: a backfill, a correction), marked in the write's own
 *   LevelDB batch on the bus's 'his.plan' (SyncState.markLate);
 * - the pending points: those with late spans or samples after their cursor, oldest first
 *   (pending());
 * - reads of history under the claim protocol (beginReads(), read(); a write the read may miss,
 *   or into the batch in flight, is marked late; see SyncState.claim), with an optional memory of
 *   what the store committed after each cursor (tails), so live samples are not read back;
 * - acknowledgements: stored at once (ack(), REST), or moved in memory and stored in a batch now
 *   and then (advance() and flush(), MQTT: a crash only resends, which the broker's subscribers
 *   take as historical);
 * - forgetting deleted points: their cursors, late spans and mappings go at the sender's next
 *   pass (forgetDeleted());
 * - the backoff after a failed pass (lib/backoff.ts), the last error, and the backlog figures;
 * - per-point sync status (syncStatus, syncErr, syncLast), when the sender shows it (`status`).
 *   Only the REST uplink does: the tags are one per point, and a point synced by both senders
 *   would show whichever wrote last (docs/uplink.md, "Store and forward" of MQTT).
 */
import type { TimeZone } from '../haystack/tz.js';
import { HDateTime, type HRef } from '../haystack/values.js';
import { type BackoffOptions, backoffDelay } from '../lib/backoff.js';
import type { Clock } from '../lib/clock.js';
import type { Model, ModelChange } from '../model/model.js';
import type { PointState, SyncTags } from '../model/point-state.js';
import type { Store } from '../store/db.js';
import type { HisKind, HistoryStore } from '../store/history.js';
import { type Run, backlogEstimate, readAfter } from './his-batch.js';
import type { Span } from './spans.js';
import { SyncState } from './state.js';

export type SyncStatus = 'ok' | 'pending' | 'down' | 'fault';

export interface OutboxOptions {
  /**
   * The sender's settings: its name (the prefix of its keys in the `sync` sublevel) and the
   * delays before the passes after a failed one.
   */
  connector: { readonly name: string; readonly retryMinMs: number; readonly retryMaxMs: number };
  model: Model;
  history: HistoryStore;
  store: Store;
  clock: Clock;
  /** Random numbers in [0, 1) for the backoff's jitter; Math.random by default. */
  random?: () => number;
  /** Keep what the store commits after each cursor in memory (see Tail). */
  tails?: boolean;
  /** Show syncStatus, syncErr and syncLast on the points (in the zone `zone` gives). */
  status?: { points: PointState; zone: (id: string) => TimeZone };
  /** Told of every model change, once the deleted points are noted to be forgotten. */
  modelChanged?: (c: ModelChange) => void;
}

/** A pending point: where its oldest unsent sample is, and where a read of it is to come from. */
export interface Due {
  readonly id: string;
  /** The oldest sample to send (the start of its late span, or after its cursor). */
  readonly from: number;
  /** Its oldest late span, sent again up to the cursor; undefined: the samples after the cursor. */
  readonly late: Span | undefined;
  /** Read from the tail in memory (what the store committed), not from the store. */
  readonly tail: boolean;
}

/** What a read gave. */
export interface Read {
  /** Samples to send, oldest first; null: none (a late span whose samples are gone is settled()). */
  run: Run | null;
  /** The read stopped at its limit: more of this point is waiting. */
  full: boolean;
}

/** A part sent: up to `last` of a point's samples after its cursor, or of a late span from `late`. */
export interface Sent {
  readonly id: string;
  readonly last: number;
  readonly late: number | null;
}

/**
 * A point's samples after its cursor, as the history store told them ('his.written'), so that live
 * data is not read back from LevelDB (10,000 points at 1 s would be 10,000 reads a second).
 * While `known`, these are all the samples the store holds after the cursor; a delete, a write
 * older than the newest kept, or more than TAIL_MAX samples (an outage) end that, and the point
 * is read from the store again (which makes it known again once the read reaches the end).
 */
interface Tail {
  known: boolean;
  ts: number[];
  val: (number | boolean | string)[];
}

const TAIL_MAX = 64;

interface PointStatus {
  status: SyncStatus;
  err: string | null;
  /** When it was set, monotonic ms (faults are tried again after retry.maxMs). */
  since: number;
}

export class Outbox {
  private readonly o: OutboxOptions;
  readonly state: SyncState;
  private readonly tails = new Map<string, Tail>();
  private readonly status = new Map<string, PointStatus>();
  /** Points deleted from the model, forgotten at the sender's next pass (none is in flight then). */
  private readonly deleted = new Set<string>();
  private failureCount = 0;
  private readonly retry: BackoffOptions;

  constructor(opts: OutboxOptions) {
    this.o = opts;
    this.state = new SyncState(opts.store, opts.connector.name);
    this.retry = { minMs: opts.connector.retryMinMs, maxMs: opts.connector.retryMaxMs, random: opts.random ?? Math.random };
  }

  async start(): Promise<void> {
    await this.state.load();
    const { history, model } = this.o;
    // Samples written at or before what was sent (a backfill, a correction) are marked in the
    // write's own batch, and sent again (see SyncState.markLate).
    history.events.on('his.plan', this, (id, first, last, before, batch) => this.state.markLate(id, first, last, before, batch));
    model.events.on('records.committed', this, (c) => {
      for (const r of c.deleted) this.deleted.add((r.get('id') as HRef).id);
      this.o.modelChanged?.(c);
    });
    if (this.o.tails === true) history.events.on('his.written', this, (id, _kind, written) => this.written(id, written));
  }

  stop(): void {
    this.o.model.events.off(this);
    this.o.history.events.off(this);
  }

  /** Forgets the cursors, late spans and mappings of the points deleted since the last call. */
  async forgetDeleted(): Promise<void> {
    if (this.deleted.size === 0) return;
    const ids = [...this.deleted];
    this.deleted.clear();
    for (const id of ids) this.tails.delete(id);
    await this.state.forget(ids, { cursor: true, mapping: true });
  }

  // --- what is pending -----------------------------------------------------------------------

  /**
   * The points of `ids` with samples to send, oldest first: by where their late spans start
   * (written at or before the cursor: sent again up to it), else by the first sample after the
   * cursor (at least cursor + 1); ties in the order of `ids` (live, 10,000 points often share
   * one instant: a comparison of ids each would cost more than the sort). The history store's
   * stats are in memory: a Map lookup a point.
   */
  pending(ids: Iterable<string>): Due[] {
    const { history } = this.o;
    const out: Due[] = [];
    for (const id of ids) {
      const late = this.state.late(id);
      if (late !== undefined) {
        out.push({ id, from: late[0], late, tail: false });
        continue;
      }
      const cursor = this.state.cursor(id);
      const t = this.o.tails === true ? this.tails.get(id) : undefined;
      if (t?.known === true) {
        let k = 0;
        while (k < t.ts.length && (t.ts[k] as number) <= cursor) k++;
        if (k < t.ts.length) out.push({ id, from: t.ts[k] as number, late: undefined, tail: true });
        continue;
      }
      const st = history.stats(id);
      if (st.end === undefined || st.start === undefined || st.end <= cursor) {
        // Nothing after the cursor: from now on the store's writes say what comes.
        if (this.o.tails === true) this.tails.set(id, { known: true, ts: [], val: [] });
        continue;
      }
      out.push({ id, from: Math.max(cursor + 1, st.start), late: undefined, tail: false });
    }
    out.sort((a, b) => a.from - b.from);
    return out;
  }

  // --- reads ---------------------------------------------------------------------------------

  /**
   * Before pending points are read from the store (SyncState.beginReads): from here every write
   * the reads may miss marks its point late. A tail is what the store committed: taking it misses
   * nothing, and read() claims it.
   */
  async beginReads(dues: readonly Due[]): Promise<void> {
    await this.state.beginReads(
      this.o.history,
      dues.filter((d) => !d.tail).map((d) => ({ id: d.id, late: d.late !== undefined })),
    );
  }

  /**
   * Reads up to `max` samples of a pending point (after beginReads for it): its late span up to
   * the cursor, or what follows the cursor, which it claims (SyncState.claim) until
   * releaseClaims(). `kind` is the point's, for a tail (the store's runs carry their own).
   */
  async read(due: Due, kind: HisKind, max: number): Promise<Read> {
    if (due.tail) return this.readTail(due, kind, max);
    const { history } = this.o;
    const cursor = this.state.cursor(due.id);
    let run: Run | null;
    let full: boolean;
    if (due.late !== undefined) {
      run = await readAfter(history, due.id, due.late[0] - 1, max, Math.min(due.late[1], cursor));
      full = run !== null && run.ts.length >= max;
    } else if (this.o.tails === true) {
      // Known from the start of the read: writes committed meanwhile are kept, and those the read
      // also saw are dropped after it.
      const t: Tail = { known: true, ts: [], val: [] };
      this.tails.set(due.id, t);
      run = await readAfter(history, due.id, cursor, max);
      full = run !== null && run.ts.length >= max;
      if (full) forgetTail(t);
      else if (run !== null && run.ts.length > 0) dropThrough(t, run.ts[run.ts.length - 1] as number);
    } else {
      run = await readAfter(history, due.id, cursor, max);
      full = run !== null && run.ts.length >= max;
    }
    if (run !== null && run.ts.length === 0) run = null;
    if (run !== null && due.late === undefined) this.state.claim(due.id, run.ts[run.ts.length - 1] as number);
    return { run, full };
  }

  /**
   * read() of a point pending from its tail, without a promise: live, every point is, and a
   * pass of 10,000 of them would wait on 10,000 promises that have nothing to wait for.
   */
  readTail(due: Due, kind: HisKind, max: number): Read {
    const t = this.tails.get(due.id);
    const run = t === undefined ? null : tailRun(kind, t, this.state.cursor(due.id), max);
    if (run === null) return { run, full: false };
    this.state.claim(due.id, run.ts[run.ts.length - 1] as number);
    return { run, full: run.ts.length === max && (t as Tail).ts.length > max };
  }

  /** What sending `run` of `due` acknowledges, once the upstream has it. */
  sent(due: Due, run: Run): Sent {
    return { id: due.id, last: run.ts[run.ts.length - 1] as number, late: due.late === undefined ? null : due.late[0] };
  }

  /** A late span whose samples are gone (deleted meanwhile): nothing to send again. */
  settled(id: string, late: Span): Sent {
    return { id, last: late[1], late: late[0] };
  }

  /** Ends the claims of the reads: call it once what was read is acknowledged, or failed. */
  releaseClaims(): void {
    this.state.releaseClaims();
  }

  /** Keeps what the store committed for points whose tail is known (see Tail). */
  private written(id: string, w: { readonly ts: readonly number[]; readonly val: readonly unknown[] } | null): void {
    const t = this.tails.get(id);
    if (t === undefined || !t.known) return;
    const last = t.ts.length > 0 ? (t.ts[t.ts.length - 1] as number) : -Infinity;
    if (w === null || (w.ts[0] as number) <= last || t.ts.length + w.ts.length > TAIL_MAX) {
      forgetTail(t);
      return;
    }
    for (let i = 0; i < w.ts.length; i++) {
      t.ts.push(w.ts[i] as number);
      t.val.push(w.val[i] as number | boolean | string);
    }
  }

  /** Drops the tails of points no longer sent. */
  keepTails(sent: (id: string) => boolean): void {
    for (const id of [...this.tails.keys()]) if (!sent(id)) this.tails.delete(id);
  }

  // --- acknowledgements ----------------------------------------------------------------------

  /**
   * The upstream acknowledged `sent`: cursors move and late spans leave, stored at once (one
   * LevelDB batch, under the history locks of the late points, see SyncState.ackSent). Claims
   * stay until releaseClaims(): the sender may have more of its batch in flight.
   */
  async ack(sent: readonly Sent[]): Promise<void> {
    const [cursors, late] = split(sent);
    await this.state.ackSent(this.o.history, cursors, this.o.clock.now(), late);
  }

  /**
   * The upstream acknowledged `sent`, all the sender had in flight: cursors move in memory
   * (flush() stores them), then the claims end, then late spans leave (stored at once). The
   * cursors move before the claims go, so no write in between falls behind both unmarked.
   */
  async advance(sent: readonly Sent[]): Promise<void> {
    const [cursors, late] = split(sent);
    if (cursors.length > 0) this.state.advance(cursors);
    this.state.releaseClaims();
    if (late.length > 0) await this.state.ackSent(this.o.history, [], this.o.clock.now(), late);
  }

  /** Stores the cursors advance() moved. */
  async flush(): Promise<void> {
    await this.state.flush(this.o.clock.now());
  }

  /** Points of `ids` without a cursor start at their newest sample: their older history is not sent. */
  async startAtEnd(ids: Iterable<string>): Promise<void> {
    const start: [string, number][] = [];
    for (const id of ids) {
      if (this.state.cursor(id) > -Infinity) continue;
      const end = this.o.history.stats(id).end;
      if (end !== undefined) start.push([id, end]);
    }
    if (start.length > 0) await this.state.ack(start, this.state.info.lastAck ?? 0);
  }

  // --- passes that fail ----------------------------------------------------------------------

  /** Failed passes in a row (see recovered()). */
  get failures(): number {
    return this.failureCount;
  }

  /**
   * A pass failed: shows the points of `ids` (those not faulted) as down, and returns the delay
   * before the next pass (lib/backoff.ts). The sender stores `why` (state.setError) as it can
   * wait for it.
   */
  failed(why: string, ids: Iterable<string> = []): number {
    this.failureCount++;
    for (const id of ids) if (this.status.get(id)?.status !== 'fault') this.setStatus(id, 'down', why);
    return backoffDelay(this.failureCount, this.retry);
  }

  /** A pass succeeded: the backoff starts over. True when the passes before it had failed. */
  recovered(): boolean {
    const was = this.failureCount > 0;
    this.failureCount = 0;
    return was;
  }

  // --- status --------------------------------------------------------------------------------

  statusOf(id: string): SyncStatus | undefined {
    return this.status.get(id)?.status;
  }

  /** Shows a point's status (kept for stats(), shown as tags when the sender shows them). */
  setStatus(id: string, status: SyncStatus, err: string | null): void {
    const old = this.status.get(id);
    if (old?.status !== status || old.err !== err) this.status.set(id, { status, err, since: this.o.clock.monotonic() });
    const show = this.o.status;
    if (show === undefined) return;
    const tags: SyncTags = { syncStatus: status, syncErr: err };
    const cursor = this.state.cursor(id);
    if (cursor > -Infinity) tags.syncLast = new HDateTime(cursor, show.zone(id));
    show.points.setSync(id, tags);
  }

  /**
   * ok or pending, from the point's cursor, late spans and newest sample; `ready`: the sender can
   * send it (for REST: found upstream). A fault stays until the statuses are reset.
   */
  refreshStatus(id: string, ready = true): void {
    if (this.status.get(id)?.status === 'fault') return;
    const end = this.o.history.stats(id).end;
    const caughtUp = (end === undefined || end <= this.state.cursor(id)) && this.state.late(id) === undefined;
    this.setStatus(id, ready && caughtUp ? 'ok' : 'pending', null);
  }

  /**
   * Before the points are selected again: statuses are looked at afresh, except those of `keep`;
   * points no longer `selected` lose their tags (their cursors stay, should they come back).
   */
  resetStatus(selected: { has(id: string): boolean }, keep: ReadonlySet<string>): void {
    for (const id of [...this.status.keys()]) {
      if (keep.has(id)) continue;
      this.status.delete(id);
      if (!selected.has(id)) this.o.status?.points.setSync(id, { syncStatus: null, syncErr: null, syncLast: null });
    }
  }

  /** A fault older than retry.maxMs: time to try the faulted points again. */
  faultsDue(): boolean {
    const now = this.o.clock.monotonic();
    for (const s of this.status.values()) if (s.status === 'fault' && now - s.since >= this.retry.maxMs) return true;
    return false;
  }

  // --- figures -------------------------------------------------------------------------------

  /** Points of `ids` by status (pending when none was set yet). */
  byStatus(ids: Iterable<string>): Record<SyncStatus, number> {
    const out: Record<SyncStatus, number> = { ok: 0, pending: 0, down: 0, fault: 0 };
    for (const id of ids) out[this.status.get(id)?.status ?? 'pending']++;
    return out;
  }

  /** Points of `ids` with samples not yet acknowledged, and those samples (estimated from each point's density). */
  backlog(ids: Iterable<string>): { points: number; samples: number } {
    let points = 0;
    let samples = 0;
    for (const id of ids) {
      const n = backlogEstimate(this.o.history.stats(id), this.state.cursor(id), this.state.lateSpans(id));
      if (n === 0) continue;
      points++;
      samples += n;
    }
    return { points, samples };
  }
}

function split(sent: readonly Sent[]): [[string, number][], [string, number, number][]] {
  const cursors: [string, number][] = [];
  const late: [string, number, number][] = [];
  for (const x of sent) {
    if (x.late !== null) late.push([x.id, x.late, x.last]);
    else cursors.push([x.id, x.last]);
  }
  return [cursors, late];
}

function forgetTail(t: Tail): void {
  t.known = false;
  t.ts = [];
  t.val = [];
}

/** Drops the samples at or before `ts` from a tail. */
function dropThrough(t: Tail, ts: number): void {
  let k = 0;
  while (k < t.ts.length && (t.ts[k] as number) <= ts) k++;
  if (k > 0) {
    t.ts.splice(0, k);
    t.val.splice(0, k);
  }
}

/** The samples of a known tail after `cursor`, as a run (those at or before it are dropped). */
function tailRun(kind: HisKind, t: Tail, cursor: number, max: number): Run | null {
  dropThrough(t, cursor);
  if (t.ts.length === 0) return null;
  const n = Math.min(max, t.ts.length);
  const ts = Float64Array.from(t.ts.slice(0, n));
  if (kind === 'Number') return { kind, ts, val: Float64Array.from(t.val.slice(0, n) as number[]) };
  if (kind === 'Bool') return { kind, ts, val: t.val.slice(0, n) as boolean[] };
  return { kind, ts, val: t.val.slice(0, n) as string[] };
}
