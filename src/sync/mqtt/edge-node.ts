/**
 * Hayloft as a Sparkplug B 3.0 edge node: one MQTT session at a time to the configured broker.
 *
 * Session: each connection gets the next `bdSeq` (0-255, kept in the `sync` sublevel so it goes on
 * after a restart), given in the MQTT will (an NDEATH the broker publishes when the link dies)
 * and in the NBIRTH that follows. With `primaryHostId`, nothing is born until that host's STATE
 * says online; a STATE offline makes the node publish NDEATH, disconnect and come back later.
 * `seq` runs 0-255 over NBIRTH, DBIRTH, DDATA and DDEATH of the session (NBIRTH is 0), and
 * restarts at 0 with each NBIRTH (a Rebirth asked by NCMD included).
 *
 * What goes out (report by exception, as Sparkplug hosts read it):
 * - Live data: every point fed by a driver, and every point without `his`, reports its curVal as
 *   it changes (beyond the deadband for Numbers), at most once per publish interval, heard from
 *   the model's `live.changed`: whatever its history settings (a point collected every 15 minutes
 *   still reports each change of its polled value).
 * - Store and forward: points with `his` have a cursor per point (the newest sample the broker
 *   acknowledged, in the `sync` sublevel like the REST uplink's); samples after it are read
 *   oldest first. Those already in the store when the device's birth went out (the backlog of an
 *   outage or a restart) are sent with `is_historical`, each once. The newer ones, stored while
 *   the device is born: for a driver-fed point they are samples of the curVal the live stream
 *   carries, so they are not sent again (the cursor moves past them: "covered"); for a point fed
 *   by hisWrite (no driver, so no live value of its own) they are its live data, each with its
 *   own timestamp. A point seen for the first time starts at its newest sample: older history is
 *   not replayed to a broker.
 * - Quality (the `Quality` property, see sparkplug.ts) in every DBIRTH, and in DDATA when a
 *   point's status changes. A device whose points are all `down` publishes DDEATH and is born
 *   again when one answers.
 *
 * Data messages go with QoS 1 (Sparkplug 3.0 asks QoS 0 for DDATA): the broker's PUBACK is what
 * moves a cursor, so a sample in flight when the link dies is sent again rather than lost. A
 * cursor moves only after every message of its pass is acknowledged; what was sent but not
 * acknowledged goes again after a reconnect (as historical, never into the live stream twice).
 * Live, cursors are stored every CURSOR_FLUSH_MS (and at a stop or a lost session), not every
 * pass; while a backlog drains, after every pass. A kill -9 sends up to that much again, as
 * historical.
 *
 * Live samples are not read back from LevelDB: the outbox keeps what the history store commits
 * after each cursor in memory (its tails); the store is read for the backlog of an outage or a
 * restart.
 *
 * Cursors, late samples, claims, the choice of pending points, the reads, the acknowledgements,
 * the forgetting of deleted points and the backlog figures are the outbox's (../outbox.ts),
 * shared with the REST uplink; this file is how they go over Sparkplug. Points show no
 * syncStatus (docs/uplink.md, "Store and forward" of MQTT).
 */
import mqtt, { type IClientOptions, type MqttClient } from 'mqtt';
import { readFileSync } from 'node:fs';
import type { MqttConfig } from '../../config/mqtt.js';
import { type HDict, HNumber, type HVal } from '../../haystack/values.js';
import type { Clock } from '../../lib/clock.js';
import type { DatingTrust } from '../../lib/clock-trust.js';
import { ErrorCodes } from '../../lib/errors.js';
import type { Logger } from '../../lib/log.js';
import type { Metrics } from '../../lib/metrics.js';
import type { NodeFigures, Part } from '../../lib/part.js';
import type { Model } from '../../model/model.js';
import type { Store } from '../../store/db.js';
import type { HisKind, HistoryStore } from '../../store/history.js';
import type { Run } from '../his-batch.js';
import { Outbox, type Sent } from '../outbox.js';
import type { SyncState } from '../state.js';
import { type Catalogue, type Device, type MetricDef, buildCatalogue } from './catalogue.js';
import { BD_SEQ, QUALITY, REBIRTH, REBOOT, type UMetric, type UPayload, decode, encode, num, qualityOf, stateTopic, topic } from './sparkplug.js';

/** A write asked by a host application (DCMD), for pointWrite. */
export interface CommandWrite {
  pointId: string;
  value: number | boolean | string | null;
  level: number;
  /** Who asked: the host, as Sparkplug names it, for the point's write history. */
  who: string;
  /** The Hayloft user whose permissions the write is checked against. */
  user: string;
}

/** Carries DCMD writes to the point's priority array; null refuses every DCMD. */
export type CommandWriter = (w: CommandWrite) => Promise<void>;

export interface EdgeNodeOptions {
  config: MqttConfig;
  model: Model;
  history: HistoryStore;
  store: Store;
  clock: Clock;
  log: Logger;
  commands?: CommandWriter | null;
  random?: () => number;
  /** Whether the wall clock may date what is published (lib/clock-trust.ts); absent: always. */
  trust?: DatingTrust;
  /** Whether a driver feeds a point (PointState.fedByDriver): its live data is then its curVal. */
  fedByDriver?: (rec: HDict) => boolean;
  /** The gateway's figures for the fleet's host (App.nodeFigures): in NBIRTH, and NDATA as they change. */
  figures?: () => Promise<NodeFigures>;
  /**
   * Restarts the daemon for `Node Control/Reboot`, checked against the permissions of `user` (the
   * configured writeAs); rejects when refused.
   */
  reboot?: (r: { user: string; who: string }) => Promise<void>;
}

export type EdgeNodePhase = 'starting' | 'connecting' | 'waiting-host' | 'online' | 'offline' | 'stopped';

export interface EdgeNodeStats {
  name: string;
  url: string;
  state: EdgeNodePhase;
  bdSeq: number;
  devices: number;
  /** Devices born in the current session (the rest are dead: every point down). */
  devicesAlive: number;
  points: number;
  /** Points with history samples not yet acknowledged by the broker. */
  backlogPoints: number;
  /** Samples not yet acknowledged, estimated from each point's density (exact: `hayloft sync status`). */
  backlogSamples: number;
  liveSamples: number;
  historicalSamples: number;
  /** History samples of driver-fed points stored while born: their values went live, not again. */
  coveredSamples: number;
  messages: number;
  connects: number;
  failures: number;
  commandsRefused: number;
  lastAck: number | null;
  lastError: string | null;
}

interface Session {
  client: MqttClient;
  bdSeq: number;
  seq: number;
  connected: boolean;
  closed: boolean;
}

/** What was last reported of a point. */
interface Reported {
  value: number | boolean | string | null;
  quality: number;
}

/** Samples read for one point in a pass. */
interface Pending {
  m: MetricDef;
  run: Run;
  /** Index of the first live sample (samples before it are historical). */
  liveFrom: number;
}

/**
 * Cursors are stored at most this often (see SyncState.advance): a crash sends up to this much
 * again, as historical; 10,000 points at 1 s do not write 10,000 keys a second.
 */
const CURSOR_FLUSH_MS = 2000;

/** Most samples read per point per pass: bounds memory, keeps passes short. */
const READ_MAX = 10_000;
/** Historical samples sent per pass before live data gets its turn. */
const PASS_BUDGET_BATCHES = 16;
/** How often the node figures are gathered again (NDATA when one changed). */
const FIGURES_MS = 5000;

function plain(v: HVal | undefined): number | boolean | string | null {
  if (v instanceof HNumber) return v.val;
  if (typeof v === 'boolean' || typeof v === 'string') return v;
  return null;
}

export class EdgeNode implements Part {
  readonly name = 'mqtt';
  private readonly o: EdgeNodeOptions;
  private readonly cfg: MqttConfig;
  private readonly outbox: Outbox;
  private readonly aliases = new Map<string, number>();
  private cat: Catalogue = { devices: new Map(), byPoint: new Map(), skipped: [] };
  private catDirty = true;
  /** Devices born in this session. */
  private readonly alive = new Set<string>();
  /** Per point: samples at or before this instant are historical in this session. */
  private readonly boundary = new Map<string, number>();
  private readonly reported = new Map<string, Reported>();
  /**
   * Points whose curVal or curStatus changed since the last pass, with the monotonic time of the
   * latest change: a report is dated when the reading came, not when the pass ran.
   */
  private readonly dirty = new Map<string, number>();
  private session: Session | null = null;
  private phase: EdgeNodePhase = 'starting';
  private bdSeq = 0;
  private timer: NodeJS.Timeout | undefined;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private running: Promise<void> | null = null;
  private rebirthAsked = false;
  private hostOnlineAt = -Infinity;
  private stopping = false;
  private started = false;
  private counters = { liveSamples: 0, historicalSamples: 0, coveredSamples: 0, messages: 0, connects: 0, failures: 0, commandsRefused: 0 };
  private lastError: string | null = null;
  /** Monotonic time of the last cursor flush (a wall-clock step must not hold flushes back). */
  private flushedAt = -Infinity;
  /** When the last pass began: passes run at the interval, not the interval after each other. */
  private passAt = 0;
  /** The node figures as last published (NBIRTH or NDATA), and when they were last gathered. */
  private figuresSent: NodeFigures = {};
  private figuresAt = -Infinity;

  constructor(opts: EdgeNodeOptions) {
    this.o = opts;
    this.cfg = opts.config;
    this.outbox = new Outbox({
      ...opts,
      connector: opts.config,
      tails: true,
      modelChanged: () => (this.catDirty = true),
    });
  }

  /** The connector's cursors (the outbox's). */
  get state(): SyncState {
    return this.outbox.state;
  }

  private get bdSeqKey(): string {
    return `${this.cfg.name}:b`;
  }

  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    await this.outbox.start();
    const b = Number(await this.o.store.sync.get(this.bdSeqKey));
    this.bdSeq = Number.isInteger(b) ? b : -1;
    this.o.model.events.on('live.changed', this, (id, changed) => {
      if (this.cat.byPoint.has(id) && (changed.includes('curVal') || changed.includes('curStatus'))) this.dirty.set(id, this.o.clock.monotonic());
    });
    this.o.log.info({ connector: this.cfg.name, url: this.cfg.url, groupId: this.cfg.groupId, edgeNodeId: this.cfg.edgeNodeId, filter: this.cfg.filter }, 'mqtt: edge node starting');
    this.connect();
  }

  /** Publishes NDEATH (a clean goodbye: the broker drops the will) and disconnects. */
  async stop(): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    this.phase = 'stopped';
    clearTimeout(this.timer);
    clearTimeout(this.reconnectTimer);
    this.o.model.events.off(this);
    this.outbox.stop();
    // A pass waits for the broker's acknowledgements; a broker that stalls does not hold the stop.
    await Promise.race([this.running, new Promise((r) => setTimeout(r, 5000).unref())]);
    await this.outbox.flush().catch((err: unknown) => this.o.log.warn({ err }, 'mqtt: cannot store cursors'));
    const s = this.session;
    if (s !== null && !s.closed) {
      s.closed = true;
      const goodbye = (async () => {
        if (s.connected) await this.publishDeath(s).catch(() => undefined);
        await s.client.endAsync().catch(() => undefined);
      })();
      // A link that died unnoticed would hold the goodbye: the will says it instead.
      const late = await Promise.race([goodbye.then(() => false), new Promise<boolean>((r) => setTimeout(() => r(true), 5000).unref())]);
      if (late) s.client.end(true);
    }
  }

  // --- sessions ----------------------------------------------------------------------------

  private deathPayload(bdSeq: number): Buffer {
    return Buffer.from(encode({ timestamp: this.o.clock.now(), metrics: [{ name: BD_SEQ, type: 'Int64', value: bdSeq }] }));
  }

  private connect(): void {
    if (this.stopping) return;
    this.phase = 'connecting';
    this.bdSeq = (this.bdSeq + 1) % 256;
    const bdSeq = this.bdSeq;
    // Kept before connecting: the will of this session carries it, so a restart must not reuse it.
    this.o.store.sync.put(this.bdSeqKey, String(bdSeq)).catch((err: unknown) => this.o.log.warn({ err }, 'mqtt: cannot keep bdSeq'));
    const c = this.cfg;
    const opts: IClientOptions = {
      clientId: c.clientId ?? `hayloft-${c.groupId}-${c.edgeNodeId}`,
      protocolVersion: 4,
      clean: true,
      keepalive: c.keepaliveS,
      // Reconnects are ours: each session needs a new bdSeq in its will.
      reconnectPeriod: 0,
      connectTimeout: 30_000,
      will: { topic: topic(c.groupId, 'NDEATH', c.edgeNodeId), payload: this.deathPayload(bdSeq), qos: 1, retain: false },
      rejectUnauthorized: c.rejectUnauthorized,
    };
    if (c.username !== null) opts.username = c.username;
    if (c.password !== null) opts.password = c.password;
    try {
      if (c.caFile !== null) opts.ca = readFileSync(c.caFile);
      if (c.certFile !== null) opts.cert = readFileSync(c.certFile);
      if (c.keyFile !== null) opts.key = readFileSync(c.keyFile);
    } catch (e) {
      this.failed(null, `cannot read a TLS file: ${(e as Error).message}`);
      return;
    }
    if (c.keyPassphrase !== null) (opts as Record<string, unknown>).passphrase = c.keyPassphrase;
    const client = mqtt.connect(c.url, opts);
    const s: Session = { client, bdSeq, seq: 0, connected: false, closed: false };
    this.session = s;
    client.on('connect', () => {
      s.connected = true;
      this.counters.connects++;
      this.onConnect(s).catch((err: unknown) => this.failed(s, `after connecting: ${(err as Error).message}`));
    });
    client.on('message', (t, payload) => this.onMessage(s, t, payload));
    client.on('error', (err) => {
      if (s === this.session) this.lastError = err.message;
    });
    client.on('close', () => this.failed(s, this.lastError ?? 'the connection closed'));
  }

  /**
   * The session ended (or never began): log once, back off, connect again. `clean`: the node said
   * goodbye (NDEATH) itself, so it disconnects properly and the broker drops the will.
   */
  private failed(s: Session | null, why: string, clean = false): void {
    if (s !== null) {
      if (s !== this.session || s.closed) return;
      s.closed = true;
      s.client.end(!clean);
    }
    if (this.stopping) return;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.alive.clear();
    this.phase = 'offline';
    this.outbox.flush().catch((err: unknown) => this.o.log.warn({ err }, 'mqtt: cannot store cursors'));
    this.counters.failures++;
    this.lastError = why;
    this.o.log.warn({ connector: this.cfg.name, code: ErrorCodes.MQTT_UNREACHABLE, err: why }, 'mqtt: broker unreachable; samples are kept and sent on reconnect');
    this.state.setError(why).catch(() => undefined);
    // The node never tells the outbox of a recovery: its reconnect delays grow with every failure
    // since it started, as `failures` in its stats counts them.
    const delay = this.outbox.failed(why);
    clearTimeout(this.reconnectTimer);
    this.reconnectTimer = setTimeout(() => {
      // The pass of the old session finishes (its publishes fail) before a new one starts.
      void (this.running ?? Promise.resolve()).then(() => this.connect());
    }, delay);
  }

  private async onConnect(s: Session): Promise<void> {
    const c = this.cfg;
    const subs = [topic(c.groupId, 'NCMD', c.edgeNodeId), topic(c.groupId, 'DCMD', c.edgeNodeId, '+')];
    if (c.primaryHostId !== null) subs.push(stateTopic(c.primaryHostId));
    await s.client.subscribeAsync(subs, { qos: 1 });
    this.lastError = null;
    this.o.log.info({ connector: c.name, bdSeq: s.bdSeq }, 'mqtt: connected');
    if (c.primaryHostId === null) this.rebirth();
    else if (this.phase !== 'online') this.phase = 'waiting-host';
  }

  private onMessage(s: Session, t: string, payload: Buffer): void {
    if (s !== this.session || s.closed) return;
    const c = this.cfg;
    try {
      if (c.primaryHostId !== null && t === stateTopic(c.primaryHostId)) return this.onState(s, payload);
      const dcmd = topic(c.groupId, 'DCMD', c.edgeNodeId) + '/';
      if (t === topic(c.groupId, 'NCMD', c.edgeNodeId)) {
        for (const m of decode(payload).metrics ?? []) {
          if (m.name === REBIRTH && m.value === true) {
            this.o.log.info({ connector: c.name }, 'mqtt: rebirth asked by a host');
            this.rebirth();
          } else if (m.name === REBOOT && m.value === true) this.onReboot();
          else this.o.log.warn({ connector: c.name, code: ErrorCodes.MQTT_COMMAND_REFUSED, metric: m.name ?? num(m.alias) }, 'mqtt: NCMD refused: only Node Control/Rebirth and Node Control/Reboot are known');
        }
      } else if (t.startsWith(dcmd)) this.onDeviceCommand(t.slice(dcmd.length), decode(payload));
    } catch (err) {
      this.o.log.warn({ connector: c.name, topic: t, code: ErrorCodes.MQTT_COMMAND_REFUSED, err: (err as Error).message }, 'mqtt: a message that does not decode was ignored');
    }
  }

  private onState(s: Session, payload: Buffer): void {
    let j: { online?: unknown; timestamp?: unknown };
    try {
      j = JSON.parse(payload.toString('utf8')) as typeof j;
    } catch {
      this.o.log.warn({ connector: this.cfg.name }, 'mqtt: a STATE message that is not JSON was ignored');
      return;
    }
    const ts = typeof j.timestamp === 'number' ? j.timestamp : 0;
    // An older STATE than one already seen (a retained message crossing a newer one) is stale.
    if (ts < this.hostOnlineAt) return;
    this.hostOnlineAt = ts;
    if (j.online === true) {
      if (this.phase === 'waiting-host') {
        this.o.log.info({ connector: this.cfg.name, host: this.cfg.primaryHostId }, 'mqtt: the primary host is online');
        this.rebirth();
      }
    } else if (j.online === false && this.phase !== 'waiting-host') {
      // Sparkplug: an edge node whose primary host went offline says goodbye and comes back later.
      this.o.log.warn({ connector: this.cfg.name, host: this.cfg.primaryHostId }, 'mqtt: the primary host is offline; disconnecting');
      void this.publishDeath(s)
        .catch(() => undefined)
        .then(() => this.failed(s, 'the primary host went offline', true));
    }
  }

  private async publishDeath(s: Session): Promise<void> {
    await s.client.publishAsync(topic(this.cfg.groupId, 'NDEATH', this.cfg.edgeNodeId), this.deathPayload(s.bdSeq), { qos: 1 });
  }

  // --- passes --------------------------------------------------------------------------------

  /** Asks for NBIRTH and every DBIRTH at the next pass, which runs at once. */
  private rebirth(): void {
    this.rebirthAsked = true;
    this.phase = 'online';
    this.schedule(0);
  }

  private schedule(ms: number): void {
    if (this.stopping) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      if (this.running !== null) return this.schedule(10);
      this.running = this.pass().finally(() => (this.running = null));
    }, ms);
  }

  private async pass(): Promise<void> {
    const s = this.session;
    if (s === null || s.closed || !s.connected || this.phase !== 'online') return;
    let more = false;
    // Monotonic: a wall-clock step back must not hold the next pass back by the step.
    this.passAt = this.o.clock.monotonic();
    try {
      more = await this.step(s);
    } catch (err) {
      if (s.closed || this.stopping) return;
      // A publish refused by a live client (too large, ...) or a store failure: drop the session.
      this.o.log.error({ connector: this.cfg.name, err }, 'mqtt: pass failed; reconnecting');
      this.failed(s, (err as Error).message);
      return;
    }
    if (!s.closed) this.schedule(more ? 0 : Math.max(0, this.cfg.publishIntervalMs - (this.o.clock.monotonic() - this.passAt)));
  }

  /**
   * A message outside Sparkplug (alarm notifications, docs/alarms.md "MQTT") on this session, QoS
   * 1, not retained: resolves on the broker's PUBACK; throws while there is no session (the caller
   * keeps the message and tries again). It does not wait for the births or a primary host: an
   * alarm is for whoever subscribes to its topic.
   */
  async publishMessage(t: string, payload: string, timeoutMs = 10_000): Promise<void> {
    const s = this.session;
    if (s === null || s.closed || !s.connected) throw new Error(`mqtt: not connected to ${this.cfg.url}${this.lastError !== null ? ` (${this.lastError})` : ''}`);
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, fail) => {
      timer = setTimeout(() => fail(new Error(`mqtt: no PUBACK from ${this.cfg.url} within ${timeoutMs} ms`)), timeoutMs);
    });
    try {
      await Promise.race([s.client.publishAsync(t, payload, { qos: 1, retain: false }), late]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Publishes with the session's next seq; resolves on the broker's acknowledgement. */
  private publish(s: Session, t: string, payload: UPayload, qos: 0 | 1 = 1): Promise<unknown> {
    if (s.closed) return Promise.reject(new Error('the session closed'));
    payload.seq = s.seq;
    s.seq = (s.seq + 1) % 256;
    this.counters.messages++;
    return s.client.publishAsync(t, Buffer.from(encode(payload)), { qos });
  }

  private metricValue(m: MetricDef, v: number | boolean | string | null): Pick<UMetric, 'type' | 'value'> & { isNull?: boolean } {
    if (v === null || (m.type === 'Double' && typeof v !== 'number') || (m.type === 'Boolean' && typeof v !== 'boolean') || (m.type === 'String' && typeof v !== 'string')) {
      return { type: m.type, value: null, isNull: true };
    }
    return { type: m.type, value: v };
  }

  /** The current value and quality of a point, from its curVal and curStatus. */
  private current(m: MetricDef): Reported {
    const rec = this.o.model.get(m.pointId);
    const value = plain(rec?.get('curVal'));
    const st = rec?.get('curStatus');
    return { value, quality: qualityOf(typeof st === 'string' ? st : undefined, value !== null) };
  }

  private deviceDown(d: Device): boolean {
    if (d.metrics.length === 0) return false;
    for (const m of d.metrics) if (this.o.model.get(m.pointId)?.get('curStatus') !== 'down') return false;
    return true;
  }

  private birthMetric(m: MetricDef, now: number): UMetric {
    const r = this.current(m);
    this.reported.set(m.pointId, r);
    const properties: NonNullable<UMetric['properties']> = {
      Quality: { type: 'Int32', value: r.quality },
      id: { type: 'String', value: '@' + m.pointId },
    };
    if (m.unit !== null) properties.unit = { type: 'String', value: m.unit };
    if (m.dis !== null) properties.dis = { type: 'String', value: m.dis };
    if (m.writable) properties.writable = { type: 'Boolean', value: true };
    return { name: m.name, alias: m.alias, timestamp: now, ...this.metricValue(m, r.value), properties };
  }

  private birthDevice(s: Session, d: Device, acks: Promise<unknown>[]): void {
    const now = this.o.clock.now();
    for (const m of d.metrics) {
      if (!m.his) continue;
      this.boundary.set(m.pointId, this.o.history.stats(m.pointId).end ?? -Infinity);
    }
    acks.push(this.publish(s, topic(this.cfg.groupId, 'DBIRTH', this.cfg.edgeNodeId, d.id), { timestamp: now, metrics: d.metrics.map((m) => this.birthMetric(m, now)) }));
    this.alive.add(d.id);
  }

  private deathOfDevice(s: Session, id: string, acks: Promise<unknown>[]): void {
    acks.push(this.publish(s, topic(this.cfg.groupId, 'DDEATH', this.cfg.edgeNodeId, id), { timestamp: this.o.clock.now() }));
    this.alive.delete(id);
  }

  /** Rebuilds what is published; points new to the node start at their newest sample. */
  private async rebuild(): Promise<void> {
    this.catDirty = false;
    try {
      this.cat = buildCatalogue({ model: this.o.model, filter: this.cfg.filter, deviceBy: this.cfg.deviceBy, edgeNodeId: this.cfg.edgeNodeId, aliases: this.aliases, ...(this.o.fedByDriver ? { fedByDriver: this.o.fedByDriver } : {}) });
    } catch (e) {
      this.o.log.error({ connector: this.cfg.name, filter: this.cfg.filter, err: (e as Error).message }, 'mqtt: the filter does not parse; nothing is published');
      this.cat = { devices: new Map(), byPoint: new Map(), skipped: [] };
    }
    this.outbox.keepTails((id) => this.cat.byPoint.has(id));
    for (const x of this.cat.skipped) this.o.log.warn({ connector: this.cfg.name, id: x.id, why: x.why }, 'mqtt: point not published');
    await this.outbox.startAtEnd(this.hisPoints());
  }

  /** One pass: births as needed, device deaths and rebirths, then data. True when more is waiting. */
  private async step(s: Session): Promise<boolean> {
    const c = this.cfg;
    const acks: Promise<unknown>[] = [];
    await this.outbox.forgetDeleted();
    if (this.catDirty) {
      // Points came or went, or their names, units, kinds changed: a new NBIRTH and DBIRTHs
      // (Sparkplug births are the only place metric definitions are given).
      const before = signature(this.cat);
      await this.rebuild();
      if (signature(this.cat) !== before) this.rebirthAsked = true;
    }
    // The node figures, every FIGURES_MS: a new figure (or one of another type) means a new
    // NBIRTH (births alone define metrics); changed values go in NDATA below.
    let figures: NodeFigures | null = null;
    if (this.rebirthAsked || this.o.clock.monotonic() - this.figuresAt >= FIGURES_MS) {
      figures = await this.gatherFigures();
      if (!this.rebirthAsked && figureShape(figures) !== figureShape(this.figuresSent)) this.rebirthAsked = true;
    }
    if (this.rebirthAsked) {
      this.rebirthAsked = false;
      this.alive.clear();
      s.seq = 0;
      const now = this.o.clock.now();
      const nodeFigures = figures ?? (await this.gatherFigures());
      this.figuresSent = nodeFigures;
      figures = null;
      acks.push(
        this.publish(s, topic(c.groupId, 'NBIRTH', c.edgeNodeId), {
          timestamp: now,
          metrics: [
            { name: BD_SEQ, type: 'Int64', value: s.bdSeq, timestamp: now },
            { name: REBIRTH, type: 'Boolean', value: false, timestamp: now },
            { name: REBOOT, type: 'Boolean', value: false, timestamp: now },
            ...Object.entries(nodeFigures).map(([name, f]) => ({ name, type: f.type, value: f.value, timestamp: now })),
          ],
        }),
      );
    } else if (figures !== null) {
      const now = this.o.clock.now();
      const changed = Object.entries(figures).filter(([name, f]) => this.figuresSent[name]?.value !== f.value);
      if (changed.length > 0) {
        this.figuresSent = figures;
        acks.push(this.publish(s, topic(c.groupId, 'NDATA', c.edgeNodeId), { timestamp: now, metrics: changed.map(([name, f]) => ({ name, type: f.type, value: f.value, timestamp: now })) }));
      }
    }
    // Devices to look at: those not born (dead, or new), and those whose points changed status.
    const check = new Set<string>();
    for (const id of this.cat.devices.keys()) if (!this.alive.has(id)) check.add(id);
    for (const id of this.dirty.keys()) {
      const m = this.cat.byPoint.get(id);
      if (m !== undefined) check.add(m.device);
    }
    for (const id of check) {
      const d = this.cat.devices.get(id) as Device;
      const down = this.deviceDown(d);
      if (!down && !this.alive.has(d.id)) this.birthDevice(s, d, acks);
      else if (down && this.alive.has(d.id)) {
        this.o.log.info({ connector: c.name, device: d.id }, 'mqtt: every point of the device is down: DDEATH');
        this.deathOfDevice(s, d.id, acks);
      }
    }
    const more = await this.data(s, acks);
    return more;
  }

  /** DDATA: historical backlog (oldest first, in batches), then live samples and changes. */
  private async data(s: Session, acks: Promise<unknown>[]): Promise<boolean> {
    const c = this.cfg;
    const now = this.o.clock.now();
    const sent: Sent[] = [];
    let more = false;
    // Per device: the metrics of live data, and the points with samples to send.
    const live = new Map<string, UMetric[]>();
    const pending = new Map<string, Pending[]>();
    let budget = c.batchSamples * PASS_BUDGET_BATCHES;
    // Reports of curVal (points without history) and quality carry this pass's time: while the clock
    // cannot be trusted they wait, and go once it is, with the right time (docs/clock.md). History
    // is stored only once the clock is set, so the backlog below is rightly dated already.
    const dating = this.o.trust?.trusted() !== false;
    const dirty = dating ? [...this.dirty] : [];
    const mono = this.o.clock.monotonic();
    if (dating) this.dirty.clear();
    // Points with samples after their cursor, or late ones before it, oldest first.
    const behind = this.outbox.pending(this.hisPoints(true));
    // From here every write the reads below may miss marks its point late.
    await this.outbox.beginReads(behind);
    for (const due of behind) {
      if (budget <= 0) {
        more = true;
        break;
      }
      const m = this.cat.byPoint.get(due.id) as MetricDef;
      const max = Math.min(READ_MAX, budget);
      const { run, full } = due.tail ? this.outbox.readTail(due, kindOf(m), max) : await this.outbox.read(due, kindOf(m), max);
      if (full) more = true;
      if (run === null) {
        if (due.late !== undefined) {
          sent.push(this.outbox.settled(due.id, due.late));
          more = true;
        }
        continue;
      }
      if (run.kind !== kindOf(m)) {
        this.o.log.warn({ connector: c.name, id: m.pointId, kind: run.kind }, 'mqtt: history of another kind than the point; skipped');
        continue;
      }
      budget -= run.ts.length;
      sent.push(this.outbox.sent(due, run));
      let liveFrom = 0;
      if (due.late !== undefined) {
        // Late samples go as historical, up to the cursor (what is after it goes as usual).
        liveFrom = run.ts.length;
        more = true;
      } else {
        const b = this.boundary.get(m.pointId) ?? -Infinity;
        while (liveFrom < run.ts.length && (run.ts[liveFrom] as number) <= b) liveFrom++;
      }
      let list = pending.get(m.device);
      if (list === undefined) pending.set(m.device, (list = []));
      list.push({ m, run, liveFrom });
    }
    // Historical samples: per device, merged into time order, in messages of batchSamples.
    const dev = [...pending.entries()].sort((a, b) => firstTs(a[1]) - firstTs(b[1]));
    for (const [device, list] of dev) {
      const hist: { ts: number; metric: UMetric }[] = [];
      for (const p of list) {
        for (let i = 0; i < p.liveFrom; i++) hist.push({ ts: p.run.ts[i] as number, metric: this.sample(p.m, p.run, i, true) });
        if (p.liveFrom < p.run.ts.length && p.m.live) {
          // Stored while the device is born: the live stream carried this point's curVal, of
          // which these are samples; sent once is enough (the cursor moves past them).
          this.counters.coveredSamples += p.run.ts.length - p.liveFrom;
        } else if (p.liveFrom < p.run.ts.length) {
          let out = live.get(device);
          if (out === undefined) live.set(device, (out = []));
          for (let i = p.liveFrom; i < p.run.ts.length; i++) {
            const v = p.run.val[i] as number | boolean | string;
            const last = this.reported.get(p.m.pointId);
            // The deadband thins live data only; the backlog is sent whole.
            if (c.deadband > 0 && typeof v === 'number' && typeof last?.value === 'number' && Math.abs(v - last.value) <= c.deadband) continue;
            out.push(this.sample(p.m, p.run, i, false));
            this.reported.set(p.m.pointId, { value: v, quality: last?.quality ?? QUALITY.GOOD });
            this.counters.liveSamples++;
          }
        }
      }
      hist.sort((a, b) => a.ts - b.ts);
      for (let i = 0; i < hist.length; i += c.batchSamples) {
        const metrics = hist.slice(i, i + c.batchSamples).map((h) => h.metric);
        acks.push(this.publish(s, topic(c.groupId, 'DDATA', c.edgeNodeId, device), { timestamp: now, metrics }));
        this.counters.historicalSamples += metrics.length;
      }
    }
    // Changes of curVal (live points: without his, or fed by a driver) and of quality (every point).
    for (const [id, changedAt] of dirty) {
      const m = this.cat.byPoint.get(id);
      if (m === undefined || !this.alive.has(m.device)) continue;
      const cur = this.current(m);
      const last = this.reported.get(id);
      const qualityChanged = last === undefined || last.quality !== cur.quality;
      let valueChanged = false;
      if (m.live) {
        if (last === undefined || last.value === null || cur.value === null) valueChanged = cur.value !== (last?.value ?? null);
        else if (typeof cur.value === 'number' && typeof last.value === 'number') valueChanged = Math.abs(cur.value - last.value) > c.deadband || (c.deadband === 0 && cur.value !== last.value);
        else valueChanged = cur.value !== last.value;
      }
      if (!qualityChanged && !valueChanged) continue;
      // A value report of a live point is a live sample too (a quality-only report is not).
      if (valueChanged) this.counters.liveSamples++;
      // Dated when the change came (now less the monotonic time since): a wall-clock step meanwhile
      // does not move it, and a report that waited for the clock's trust gets the set time.
      const metric: UMetric = { alias: m.alias, timestamp: now - (mono - changedAt), ...this.metricValue(m, cur.value) };
      if (qualityChanged) metric.properties = { Quality: { type: 'Int32', value: cur.quality } };
      let out = live.get(m.device);
      if (out === undefined) live.set(m.device, (out = []));
      out.push(metric);
      this.reported.set(id, { value: m.live ? cur.value : (last?.value ?? cur.value), quality: cur.quality });
    }
    for (const [device, metrics] of live) {
      if (metrics.length === 0) continue;
      for (let i = 0; i < metrics.length; i += c.batchSamples) {
        acks.push(this.publish(s, topic(c.groupId, 'DDATA', c.edgeNodeId, device), { timestamp: now, metrics: metrics.slice(i, i + c.batchSamples) }));
      }
    }
    // Every message of the pass acknowledged (or the session is gone and nothing moves).
    try {
      await Promise.all(acks);
    } catch (e) {
      this.outbox.releaseClaims();
      throw e;
    }
    await this.outbox.advance(sent);
    if (sent.some((x) => x.late === null)) {
      const at = this.o.clock.monotonic();
      // Draining a backlog (more to come): stored every pass, so a crash mid-drain sends at most
      // one pass again; live, every CURSOR_FLUSH_MS.
      if (more || at - this.flushedAt >= CURSOR_FLUSH_MS) {
        this.flushedAt = at;
        await this.outbox.flush();
      }
    }
    return more;
  }

  /** The app's figures and the edge node's own (its backlog); a failure leaves them out, logged. */
  private async gatherFigures(): Promise<NodeFigures> {
    this.figuresAt = this.o.clock.monotonic();
    let app: NodeFigures = {};
    try {
      app = (await this.o.figures?.()) ?? {};
    } catch (err) {
      this.o.log.warn({ connector: this.cfg.name, err }, 'mqtt: cannot gather the node figures');
      app = this.figuresSent;
    }
    const backlog = this.outbox.backlog(this.hisPoints());
    return {
      ...app,
      'MQTT/Backlog Points': { type: 'Int64', value: backlog.points },
      'MQTT/Backlog Samples': { type: 'Int64', value: backlog.samples },
    };
  }

  private sample(m: MetricDef, run: Run, i: number, historical: boolean): UMetric {
    const metric: UMetric = { alias: m.alias, timestamp: run.ts[i], type: m.type, value: run.val[i] as number | boolean | string };
    if (historical) metric.isHistorical = true;
    return metric;
  }

  // --- commands ------------------------------------------------------------------------------

  private refuse(device: string, metric: string, why: string): void {
    this.counters.commandsRefused++;
    this.o.log.warn({ connector: this.cfg.name, code: ErrorCodes.MQTT_COMMAND_REFUSED, device, metric, why }, device === '' ? 'mqtt: NCMD refused' : 'mqtt: DCMD refused');
  }

  /**
   * `Node Control/Reboot`: with the permission model of DCMD writes, the configured `writeAs`
   * user's, checked by the app (it must hold USER_ADMIN on everything, as for a backup); the app
   * then stops cleanly (NDEATH included) and exits for systemd to start it again.
   */
  private onReboot(): void {
    const c = this.cfg;
    if (c.writeAs === null || c.writeLevel === null) return this.refuse('', REBOOT, 'commands are off (set mqtt.writeLevel and mqtt.writeAs)');
    const reboot = this.o.reboot;
    if (reboot === undefined) return this.refuse('', REBOOT, 'this process cannot restart itself (it is not `hayloft serve`)');
    const who = `sparkplug host ${c.primaryHostId ?? '(any)'} via ${c.url} as ${c.writeAs}`;
    const user = c.writeAs;
    // Through a promise: a refusal thrown at once is refused and logged like one that comes later.
    Promise.resolve()
      .then(() => reboot({ user, who }))
      .then(
        () => this.o.log.warn({ connector: c.name, who }, 'mqtt: reboot asked by a host: restarting'),
        (err: unknown) => this.refuse('', REBOOT, (err as Error).message),
      );
  }

  private onDeviceCommand(device: string, p: UPayload): void {
    const d = this.cat.devices.get(device);
    for (const cm of p.metrics ?? []) {
      const key = cm.name ?? (cm.alias === undefined || cm.alias === null ? '' : `alias ${num(cm.alias)}`);
      if (d === undefined) {
        this.refuse(device, key, 'no such device on this edge node');
        continue;
      }
      const m = cm.name !== undefined && cm.name !== null ? d.metrics.find((x) => x.name === cm.name) : d.metrics.find((x) => cm.alias !== undefined && cm.alias !== null && x.alias === num(cm.alias));
      if (m === undefined) {
        this.refuse(device, key, 'no such metric in the device');
        continue;
      }
      if (!m.writable) {
        this.refuse(device, m.name, 'the point is not writable');
        continue;
      }
      const write = this.o.commands ?? null;
      if (this.cfg.writeLevel === null || this.cfg.writeAs === null) {
        this.refuse(device, m.name, 'DCMD writes are off (set mqtt.writeLevel and mqtt.writeAs)');
        continue;
      }
      if (write === null) {
        this.refuse(device, m.name, 'this build of Hayloft has no point writes (pointWrite) to carry DCMD to');
        continue;
      }
      const v = cm.value;
      const ok = (m.type === 'Double' && typeof v === 'number') || (m.type === 'Boolean' && typeof v === 'boolean') || (m.type === 'String' && typeof v === 'string') || cm.isNull === true;
      if (!ok) {
        this.refuse(device, m.name, `a ${m.type} value was expected`);
        continue;
      }
      const who = `sparkplug host ${this.cfg.primaryHostId ?? '(any)'} via ${this.cfg.url} as ${this.cfg.writeAs}`;
      write({ pointId: m.pointId, value: cm.isNull === true ? null : (v as number | boolean | string), level: this.cfg.writeLevel, who, user: this.cfg.writeAs }).then(
        () => this.o.log.info({ connector: this.cfg.name, device, metric: m.name, level: this.cfg.writeLevel }, 'mqtt: DCMD written'),
        (err: unknown) => this.refuse(device, m.name, (err as Error).message),
      );
    }
  }

  /** The points whose history is published (`alive`: of the devices born in this session). */
  private *hisPoints(alive = false): Iterable<string> {
    for (const m of this.cat.byPoint.values()) if (m.his && (!alive || this.alive.has(m.device))) yield m.pointId;
  }

  // --- figures -------------------------------------------------------------------------------

  /** The edge node's figures (stats()), read at scrape time. */
  metrics(metrics: Metrics): void {
    const connector = this.state.name;
    const one = (pick: (s: EdgeNodeStats) => number) => () => [{ labels: { connector }, value: pick(this.stats()) }];
    metrics.gauge('hayloft_mqtt_connected', 'The edge node has a broker session and has published its births (1) or not (0)', ['connector'], one((s) => (s.state === 'online' ? 1 : 0)));
    metrics.gauge('hayloft_mqtt_backlog_points', 'Points with history samples the broker has not acknowledged', ['connector'], one((s) => s.backlogPoints));
    metrics.gauge('hayloft_mqtt_backlog_samples', "Samples the broker has not acknowledged (estimated from each point's density)", ['connector'], one((s) => s.backlogSamples));
    metrics.gauge('hayloft_mqtt_devices_alive', 'Sparkplug devices born in the current session', ['connector'], one((s) => s.devicesAlive));
    metrics.counter('hayloft_mqtt_samples_live_total', 'Samples published as live DDATA since start', () => this.stats().liveSamples);
    metrics.counter('hayloft_mqtt_samples_historical_total', 'Samples published as historical DDATA (store and forward) since start', () => this.stats().historicalSamples);
    metrics.counter('hayloft_mqtt_samples_covered_total', 'History samples of driver-fed points stored while born: their values went live, so not sent again', () => this.stats().coveredSamples);
    metrics.counter('hayloft_mqtt_messages_total', 'Sparkplug messages published since start', () => this.stats().messages);
    metrics.counter('hayloft_mqtt_connection_failures_total', 'Broker sessions that failed or ended since start', () => this.stats().failures);
    metrics.counter('hayloft_mqtt_commands_refused_total', 'DCMD and NCMD metrics refused since start', () => this.stats().commandsRefused);
  }

  stats(): EdgeNodeStats {
    const backlog = this.outbox.backlog(this.hisPoints());
    return {
      name: this.cfg.name,
      url: this.cfg.url,
      state: this.phase,
      bdSeq: this.bdSeq,
      devices: this.cat.devices.size,
      devicesAlive: this.alive.size,
      points: this.cat.byPoint.size,
      backlogPoints: backlog.points,
      backlogSamples: backlog.samples,
      ...this.counters,
      lastAck: this.state.info.lastAck,
      lastError: this.lastError,
    };
  }
}

/** The history kind of a metric's samples. */
function kindOf(m: MetricDef): HisKind {
  return m.type === 'Double' ? 'Number' : m.type === 'Boolean' ? 'Bool' : 'Str';
}

/** What the births say of the catalogue: when it changes, the node is born again. */
function signature(cat: Catalogue): string {
  const parts: string[] = [];
  for (const d of cat.devices.values()) for (const m of d.metrics) parts.push(`${d.id}\u0000${m.name}\u0000${m.alias}\u0000${m.type}\u0000${m.unit ?? ''}\u0000${m.dis ?? ''}\u0000${m.writable}\u0000${m.his}`);
  return parts.join('\u0001');
}

/** The names and types of the figures: when they change, the node is born again. */
function figureShape(f: NodeFigures): string {
  return Object.entries(f)
    .map(([name, x]) => `${name}\u0000${x.type}`)
    .sort()
    .join('\u0001');
}

function firstTs(list: readonly Pending[]): number {
  let t = Infinity;
  for (const p of list) if (p.run.ts.length > 0 && (p.run.ts[0] as number) < t) t = p.run.ts[0] as number;
  return t;
}
