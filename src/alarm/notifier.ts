/**
 * Alarm notifications (docs/alarms.md "Notifications"): `notifyRoute` records say which alarms (a
 * filter over their sources, a priority bound) go to which receiver (an HTTP webhook, e-mail
 * addresses or an MQTT topic: one Delivery each, delivery.ts), after what delay, with what
 * reminders.
 *
 * Store and forward on a cursor, as the uplink's outbox does for history (sync/outbox.ts): the
 * alarm log (alarm-store.ts) is already durable and in order, so each route keeps only the key of
 * the last entry its receiver took (`alarmCursor` sublevel, stored once the receiver answered
 * 2xx). A receiver that is away is retried with the daemon's backoff (lib/backoff.ts, 1 s doubling
 * to 5 min, with jitter); what happened meanwhile is in the log and goes, in order, when it is
 * back. Nothing is lost while the log holds it (the newest 10,000 transitions); a crash between a
 * receiver's answer and the cursor's write sends that one entry again, with the same
 * `Idempotency-Key`, so a receiver that keeps the keys it saw takes each once. The history outbox
 * itself is not used: it is built on per-point history cursors and reads, not on messages.
 *
 * Delay: an `active` entry waits until the alarm has been active for the route's delay; if by
 * then it is no longer active (a blip), neither it nor its return to normal is sent. Reminders:
 * while an alarm stays active, unacknowledged and not shelved, a `remind` message every `remind`.
 */
import { durationMs } from '../haystack/duration.js';
import { compileFilter, parseFilter } from '../haystack/filter.js';
import { encodeVal } from '../haystack/json.js';
import { findTimeZone } from '../haystack/tz.js';
import { type HDict, HMarker, HNumber, HRef } from '../haystack/values.js';
import { backoffDelay } from '../lib/backoff.js';
import type { Clock } from '../lib/clock.js';
import { ErrorCodes, HayloftError } from '../lib/errors.js';
import type { Logger } from '../lib/log.js';
import type { Metrics } from '../lib/metrics.js';
import { type Part, every } from '../lib/part.js';
import type { Model } from '../model/model.js';
import { timeKey } from '../store/write-store.js';
import { type Alarm, type AlarmLogEntry, type AlarmStore, alarmKey } from './alarm-store.js';
import { type Delivery, type Notice, ROUTE_KINDS, type RouteKind, parseRecipients } from './delivery.js';
import type { AlarmEngine } from './engine.js';

const TICK_MS = 1000;
const BATCH = 50;
export const NOTIFY_RETRY = { minMs: 1000, maxMs: 300_000 };

export interface Route {
  id: string;
  kind: RouteKind;
  /** The webhook's URL, the e-mail addresses (as the record says them), or the MQTT topic. */
  target: string;
  filter: ((rec: HDict) => boolean) | null;
  maxPriority: number;
  delayMs: number;
  remindMs: number;
  disabled: boolean;
}

function bad(rec: HDict, message: string): HayloftError {
  const id = rec.get('id');
  return new HayloftError(ErrorCodes.INVALID_RECORD, `notification route ${id instanceof HRef ? `@${id.id}` : ''}: ${message}`);
}

/** The route a `notifyRoute` record says, or throws HL_INVALID_RECORD. */
export function parseRoute(rec: HDict, model: Model): Route {
  const kinds = ROUTE_KINDS.filter((k) => rec.has(k));
  if (kinds.length !== 1) throw bad(rec, 'give exactly one of webhook (a URL), email (addresses) or mqtt (a topic, or a Marker for the default topic)');
  const kind = kinds[0] as RouteKind;
  let target: string;
  const raw = rec.get(kind);
  if (kind === 'webhook') {
    if (typeof raw !== 'string') throw bad(rec, 'webhook must be a Str: the http:// or https:// URL alarms are posted to');
    let u: URL;
    try {
      u = new URL(raw);
    } catch {
      throw bad(rec, `webhook ${JSON.stringify(raw)} is not a URL`);
    }
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw bad(rec, 'webhook must be an http:// or https:// URL');
    target = raw;
  } else if (kind === 'email') {
    if (typeof raw !== 'string' || parseRecipients(raw) === null) throw bad(rec, 'email must be a Str of e-mail addresses separated by commas (ops@example.com, oncall@example.com), at most 50');
    target = raw;
  } else {
    if (raw instanceof HMarker) target = '';
    else if (typeof raw === 'string' && /^[^+#]{1,200}$/.test(raw) && !raw.includes('\u0000') && !raw.startsWith('$')) target = raw;
    else throw bad(rec, 'mqtt must be a Marker (the default topic) or a Str: an MQTT topic without +, # or a leading $');
  }
  let filter: Route['filter'] = null;
  const f = rec.get('filter');
  if (f !== undefined) {
    if (typeof f !== 'string' || f.trim() === '') throw bad(rec, 'filter must be a non-empty Str over the alarms\' points and connectors');
    try {
      const run = compileFilter(parseFilter(f));
      filter = (r) => run(r, (ref) => model.get(ref.id));
    } catch (e) {
      throw bad(rec, `filter: ${(e as Error).message}`);
    }
  }
  let maxPriority = 255;
  const p = rec.get('maxPriority');
  if (p !== undefined) {
    if (!(p instanceof HNumber) || !Number.isInteger(p.val) || p.val < 1 || p.val > 255) throw bad(rec, 'maxPriority must be a whole Number from 1 to 255 (alarms of that priority or more urgent)');
    maxPriority = p.val;
  }
  const dur = (tag: string): number => {
    const v = rec.get(tag);
    if (v === undefined) return 0;
    const d = durationMs(v);
    if (typeof d === 'string') throw bad(rec, `${tag} ${d}`);
    return d;
  };
  return { id: (rec.get('id') as HRef).id, kind, target, filter, maxPriority, delayMs: dur('delay'), remindMs: dur('remind'), disabled: rec.has('disabled') };
}

interface RouteState {
  route: Route;
  cursor: string | null;
  failures: number;
  /** Monotonic ms before which no pass is tried (backoff). */
  retryAt: number;
  /** The pass in flight, if any: one at a time per route. */
  running: Promise<void> | null;
  /** Alarms whose activation was a blip for this route: their return is not sent either. */
  suppressed: Set<string>;
  /** Monotonic ms an alarm was last announced (active or reminded). */
  announced: Map<string, number>;
  lastErr: string | null;
}

export interface NotifierOptions {
  model: Model;
  store: AlarmStore;
  engine: AlarmEngine;
  clock: Clock;
  log: Logger;
  /** How each kind of route is sent; a kind missing here (no smtp section, no mqtt section) is refused in new routes and retried in old ones. */
  deliveries: Partial<Record<RouteKind, Delivery>>;
  /** The zone times are shown in (e-mail) when a source has no `tz`. */
  tz: string;
  random?: () => number;
}

const WHY_MISSING: Record<RouteKind, string> = {
  webhook: 'webhooks are not available',
  email: 'e-mail routes need an smtp section in the configuration (docs/configuration.md)',
  mqtt: 'mqtt routes need an mqtt section in the configuration (docs/configuration.md)',
};

export class Notifier implements Part {
  readonly name = 'alarm-notifier';
  private readonly o: NotifierOptions;
  private routes = new Map<string, RouteState>();
  private timer: { stop(): void } | undefined;
  private sent = 0;
  private failed = 0;
  private passes: Promise<void>[] = [];
  private readonly createdAt = new Map<string, number>();

  constructor(opts: NotifierOptions) {
    this.o = opts;
  }

  async start(): Promise<void> {
    const ev = this.o.model.events;
    ev.on('records.batch', this, (change) => {
      for (const r of change.puts) {
        if (!r.has('notifyRoute')) continue;
        const route = parseRoute(r, this.o.model);
        if (this.o.deliveries[route.kind] === undefined) throw bad(r, WHY_MISSING[route.kind]);
      }
    });
    ev.on('records.committed', this, (c) => {
      // A new route takes what is logged from its creation on (its cursor is stored by load, a
      // moment later: alarms logged meanwhile are not missed).
      for (const r of c.created) if (r.has('notifyRoute')) this.createdAt.set((r.get('id') as HRef).id, this.o.clock.now());
      if ([...c.created, ...c.updated, ...c.deleted].some((r) => r.has('notifyRoute'))) void this.load();
    });
    await this.load();
    this.timer = every(TICK_MS, () => void this.tick());
  }

  async stop(): Promise<void> {
    this.timer?.stop();
    this.timer = undefined;
    this.o.model.events.off(this);
    await Promise.all(this.passes);
    for (const d of Object.values(this.o.deliveries)) await d.close?.();
  }

  private async load(): Promise<void> {
    const next = new Map<string, RouteState>();
    for (const id of this.o.model.idsWithTag('notifyRoute')) {
      const rec = this.o.model.stored(id);
      if (rec === undefined) continue;
      let route: Route;
      try {
        route = parseRoute(rec, this.o.model);
      } catch (err) {
        this.o.log.warn({ err, routeId: id }, 'a notification route is not valid and is ignored until fixed');
        continue;
      }
      const old = this.routes.get(id);
      if (old !== undefined) {
        old.route = route;
        next.set(id, old);
        continue;
      }
      let cursor = await this.o.store.cursor(id);
      if (cursor === null) {
        // A new route starts from now: it does not replay the whole log to a new receiver.
        const at = this.createdAt.get(id);
        cursor = at !== undefined ? timeKey(at - 1, 999_999_999) : ((await this.o.store.newestKey()) ?? '');
        await this.o.store.setCursor(id, cursor);
      }
      this.createdAt.delete(id);
      next.set(id, { route, cursor, failures: 0, retryAt: 0, running: null, suppressed: new Set(), announced: new Map(), lastErr: null });
    }
    this.routes = next;
  }

  /** Runs a pass of every route that is not busy or backing off. Tests call it; resolves when the passes end. */
  async tick(): Promise<void> {
    const runs: Promise<void>[] = [];
    for (const st of this.routes.values()) {
      if (st.route.disabled) continue;
      // A pass in flight (the timer's) ends first; then one more, unless backing off.
      const p = (st.running ?? Promise.resolve()).then(() => {
        if (this.o.clock.monotonic() < st.retryAt) return;
        return this.pass(st);
      });
      st.running = p;
      void p.finally(() => {
        if (st.running === p) st.running = null;
      });
      runs.push(p);
    }
    this.passes = runs;
    await Promise.all(runs);
  }

  private async pass(st: RouteState): Promise<void> {
    const r = st.route;
    try {
      for (;;) {
        const entries = await this.o.store.readAfter(st.cursor === '' ? null : st.cursor, BATCH);
        if (entries.length === 0) break;
        let waiting = false;
        for (const { key, entry } of entries) {
          const verdict = this.verdict(st, entry);
          if (verdict === 'wait') {
            waiting = true;
            break;
          }
          if (verdict === 'send') {
            await this.send(r, `${r.id}:${key}`, entry, entry.event);
            if (entry.event === 'active') st.announced.set(`${entry.condId}|${entry.sourceId}`, this.o.clock.monotonic());
          }
          st.cursor = key;
          await this.o.store.setCursor(r.id, key);
        }
        if (waiting || entries.length < BATCH) break;
      }
      await this.remind(st);
      st.failures = 0;
      st.lastErr = null;
    } catch (err) {
      st.failures++;
      this.failed++;
      st.lastErr = (err as Error).message;
      st.retryAt = this.o.clock.monotonic() + backoffDelay(st.failures, { ...NOTIFY_RETRY, random: this.o.random ?? Math.random });
      this.o.log.warn({ routeId: r.id, kind: r.kind, err: st.lastErr, failures: st.failures }, `alarm ${r.kind}: the receiver did not take a notification; retrying with backoff`);
    }
  }

  /** What to do with a log entry for this route: send it, skip it, or wait for its delay. */
  private verdict(st: RouteState, e: AlarmLogEntry): 'send' | 'skip' | 'wait' {
    const r = st.route;
    const id = `${e.condId}|${e.sourceId}`;
    if (e.priority > r.maxPriority) return 'skip';
    if (r.filter !== null) {
      const src = this.o.model.get(e.sourceId);
      if (src === undefined || !r.filter(src)) return 'skip';
    }
    const now = this.o.engine.get(e.condId, e.sourceId);
    if (e.event === 'active') {
      st.suppressed.delete(id);
      if (r.delayMs > 0 && this.o.clock.now() < e.ts + r.delayMs) return 'wait';
      // A blip (no longer active by the end of the delay), or shelved: not announced.
      if (r.delayMs > 0 && (now === undefined || !now.active || (now.activeAt !== null && now.activeAt > e.ts))) {
        st.suppressed.add(id);
        return 'skip';
      }
      if (now?.shelvedUntil !== null && now?.shelvedUntil !== undefined) return 'skip';
      return 'send';
    }
    if (e.event === 'normal' && st.suppressed.has(id)) {
      st.suppressed.delete(id);
      return 'skip';
    }
    return 'send';
  }

  /** Reminders of the route's alarms still active, unacknowledged and not shelved. */
  private async remind(st: RouteState): Promise<void> {
    const r = st.route;
    if (r.remindMs <= 0) return;
    const mono = this.o.clock.monotonic();
    for (const a of this.o.engine.list()) {
      if (!a.active || a.acked || a.shelvedUntil !== null || a.priority > r.maxPriority) continue;
      const id = alarmKey(a.condId, a.sourceId);
      const last = st.announced.get(id);
      if (last === undefined) {
        // Announced before this run (or its notice is still in the log): remind from now on.
        st.announced.set(id, mono);
        continue;
      }
      if (mono - last < r.remindMs) continue;
      if (r.filter !== null) {
        const src = this.o.model.get(a.sourceId);
        if (src === undefined || !r.filter(src)) continue;
      }
      await this.send(r, `${r.id}:remind:${id}:${Math.floor(this.o.clock.now())}`, entryOf(a, this.o.clock.now()), 'remind');
      st.announced.set(id, mono);
    }
  }

  private async send(r: Route, key: string, e: AlarmLogEntry, event: string): Promise<void> {
    const delivery = this.o.deliveries[r.kind];
    if (delivery === undefined) throw new Error(WHY_MISSING[r.kind]);
    const m = this.o.model;
    const src = m.get(e.sourceId);
    const tzTag = src?.get('tz');
    const zone = typeof tzTag === 'string' ? findTimeZone(tzTag) : undefined;
    const body: Notice['body'] = {
      id: key,
      event,
      alarmId: `${e.condId}|${e.sourceId}`,
      ts: e.ts > 0 ? new Date(e.ts).toISOString() : null,
      condition: { id: e.condId, dis: str(m.get(e.condId)?.get('dis')) ?? m.displayOf(e.condId) ?? e.condId },
      source: { id: e.sourceId, name: m.fqname(e.sourceId) ?? null, dis: str(src?.get('dis')) ?? m.displayOf(e.sourceId) ?? e.sourceId },
      detail: e.detail,
      priority: e.priority,
      val: e.val === null ? null : encodeVal(e.val),
      user: e.user,
      note: e.note,
      until: e.until === null ? null : new Date(e.until).toISOString(),
    };
    await delivery.send(r.target, {
      body,
      valText: e.val === null ? null : String(e.val),
      tz: zone?.iana ?? findTimeZone(this.o.tz)?.iana ?? 'UTC',
      tsMs: e.ts > 0 ? e.ts : null,
      untilMs: e.until,
    });
    this.sent++;
  }

  metrics(m: Metrics): void {
    m.counter('hayloft_alarm_notifications_total', 'Alarm notifications a receiver took since start', () => this.sent);
    m.counter('hayloft_alarm_notification_failures_total', 'Alarm notification passes that failed (retried with backoff)', () => this.failed);
    m.gauge('hayloft_alarm_routes_failing', 'Notification routes whose receiver is not taking notifications', [], () => [...this.routes.values()].filter((s) => s.failures > 0).length);
  }

  health(): { ok: boolean; degraded?: string } {
    const failing = [...this.routes.values()].filter((s) => s.failures > 0);
    if (failing.length === 0) return { ok: true };
    return { ok: true, degraded: `alarm notifications waiting for ${failing.map((s) => `${s.route.kind} ${s.route.target || '(default topic)'}`).join(', ')}: ${failing[0]?.lastErr ?? ''}` };
  }
}

function str(v: unknown): string | undefined {
  return typeof v === 'string' ? v : undefined;
}

function entryOf(a: Alarm, ts: number): AlarmLogEntry {
  return { ts, condId: a.condId, sourceId: a.sourceId, event: 'active', detail: a.detail, val: a.val, user: null, note: null, until: null, priority: a.priority };
}
