/**
 * The composition root: builds every part from the Config, starts them in order (store, model,
 * auth, history, watches, poller, HTTP) and stops them in reverse. Nothing else constructs long-lived parts.
 */
import { join } from 'node:path';
import { AuthService, type Bootstrap } from './auth/auth.js';
import { type ApiServer, createApiServer } from './api/server.js';
import { type TlsFiles, tlsFiles, watchTls } from './api/tls.js';
import { ErrorCodes, HayloftError } from './lib/errors.js';
import { allOps } from './api/ops/index.js';
import { graphqlGroup } from './api/graphql/index.js';
import { pushGroup } from './api/push.js';
import { adminRoutes } from './api/routes/admin.js';
import { consoleFiles, consoleRoutes } from './api/routes/console.js';
import type { Config } from './config/index.js';
import { MAX_DEPTH } from './haystack/limits.js';
import { timeZone } from './haystack/tz.js';
import { type Clock, systemClock } from './lib/clock.js';
import { ClockTrust, type ClockTrustOptions } from './lib/clock-trust.js';
import type { Logger } from './lib/log.js';
import { Model } from './model/model.js';
import { Store } from './store/db.js';
import { RecordStore } from './store/records.js';
import { WatchManager } from './watch/index.js';
import { PointState } from './model/point-state.js';
import { EventBus } from './lib/events.js';
import type { ModelEvents } from './model/events.js';
import { type Part, type PartHealth, Parts } from './lib/part.js';
import { PointWriter } from './model/point-writer.js';
import { WriteStore } from './store/write-store.js';
import { HistoryStore } from './store/history.js';
import type { HealthReport } from './api/server.js';
import { Metrics } from './lib/metrics.js';
import { backupStream } from './store/backup.js';
import { DiskSpace } from './store/space.js';
import { StoreKeeper } from './store/recovery.js';
import { RollupStore } from './store/rollups.js';
import { Retention } from './store/retention.js';
import { retentionPolicy } from './store/retention-policy.js';
import { type HRef, HNumber } from './haystack/values.js';
import { Uplink } from './sync/index.js';
import { DriverRegistry } from './drivers/registry.js';
import { builtinDriverKinds } from './drivers/kinds.js';
import type { CommandWrite, EdgeNode } from './sync/mqtt/index.js';
import type { BacnetExport } from './export/index.js';
import type { ForeignStatus } from './drivers/bacnet/foreign.js';
import { foreignHealth } from './drivers/bacnet/foreign-health.js';
import { gateOfUser } from './auth/gate.js';
import { Poller } from './poller/index.js';
import type { Commissioning } from './poller/commission.js';
import { configChecksum, nodeFigures } from './sync/mqtt/node-figures.js';
import type { NodeFigures } from './lib/part.js';
import { AlarmEngine } from './alarm/engine.js';
import { AlarmStore } from './alarm/alarm-store.js';
import { type Delivery, type RouteKind, webhookDelivery } from './alarm/delivery.js';
import { defaultAlarmTopic, mqttDelivery } from './alarm/mqtt-notify.js';
import { Notifier } from './alarm/notifier.js';
import { Scheduler } from './schedule/scheduler.js';
import { installPrefix, stateFile as updateStateFile } from './lib/update.js';
import { packageRoot, productVersion } from './lib/package-dir.js';
import { UpdateStatus } from './lib/update-status.js';

/** Where `npm run build` puts the console (web/ built into dist/web), whether the server runs from src/ or dist/. */
export function consoleDir(): string {
  return join(packageRoot(), 'dist', 'web') + '/';
}

/** First-run credentials from the environment (HAYLOFT_ADMIN_USER, ...); ignored on later starts. */
export interface FirstRun {
  adminUser?: string;
  adminPassword?: string;
  clientId?: string;
  clientSecret?: string;
}

export function firstRunFromEnv(env: Readonly<Record<string, string | undefined>>): FirstRun {
  const pick = (k: string): string | undefined => (env[k] === undefined || env[k] === '' ? undefined : env[k]);
  const out: FirstRun = {};
  const u = pick('HAYLOFT_ADMIN_USER');
  const p = pick('HAYLOFT_ADMIN_PASSWORD');
  const c = pick('HAYLOFT_CLIENT_ID');
  const s = pick('HAYLOFT_CLIENT_SECRET');
  if (u !== undefined) out.adminUser = u;
  if (p !== undefined) out.adminPassword = p;
  if (c !== undefined) out.clientId = c;
  if (s !== undefined) out.clientSecret = s;
  return out;
}

export interface AppOptions {
  config: Config;
  log: Logger;
  clock?: Clock;
  firstRun?: FirstRun;
  /** Process metrics (CPU, memory, event loop) in /metrics: the daemon turns them on. */
  processMetrics?: boolean;
  /** Overrides of the clock's witnesses (lib/clock-trust.ts): tests give a floor, a timesync folder. */
  clockTrust?: Pick<ClockTrustOptions, 'floorMs' | 'timesyncDir' | 'timers'>;
  /** The last update's state file (lib/update.ts); default: the install's, when running from one. */
  updateState?: string | null;
}

/** What App.open builds before the App exists. */
interface Built {
  store: Store;
  model: Model;
  events: EventBus<ModelEvents>;
  auth: AuthService;
  history: HistoryStore;
  rollups: RollupStore;
  space: DiskSpace;
  points: PointState;
  writer: PointWriter;
  watches: WatchManager;
  metrics: Metrics;
  server: ApiServer;
  drivers: DriverRegistry;
  parts: Parts;
  clock: Clock;
  bootTime: number;
  clockTrust: ClockTrust;
  alarms: AlarmEngine;
  scheduler: Scheduler;
  notifier: Notifier;
}

/**
 * A Hayloft data folder opened, and while serving, its parts running. The app only assembles:
 * each part is built from the Config, registers its own metrics and reacts to the others through
 * the event bus (docs/design/README.md, "Parts and events"). `open` starts the parts the CLI's
 * offline commands need too (store, auth, history, writer); `start` adds the serving ones (watches,
 * poller, uplink, MQTT edge node, HTTP). They stop in the reverse order of their start.
 */
export class App {
  readonly config: Config;
  readonly store: Store;
  readonly model: Model;
  /** The bus every part emits on and listens to (lib/events.ts); the model and history emit on it. */
  readonly events: EventBus<ModelEvents>;
  readonly auth: AuthService;
  readonly history: HistoryStore;
  /** 15-minute rollups of the history retention removed (store/rollups.ts). */
  readonly rollups: RollupStore;
  /** History retention while serving (store/retention.ts). */
  retention: Retention | null = null;
  private readonly space: DiskSpace;
  /** The owner of points' live tags (cur*, his*, conn*, write*, sync*). */
  readonly points: PointState;
  /** Priority arrays of writable points: pointWrite, and MQTT commands, call it. */
  readonly writer: PointWriter;
  readonly watches: WatchManager;
  /** Whether the wall clock can date what is stored (docs/clock.md). */
  readonly clockTrust: ClockTrust;
  /** Alarm conditions and the alarms they raise (docs/alarms.md). */
  readonly alarms: AlarmEngine;
  /** Alarm notifications by webhook (docs/alarms.md); started with the serving parts. */
  readonly notifier: Notifier;
  /** Weekly schedules commanding points (docs/schedules.md); started with the serving parts. */
  readonly scheduler: Scheduler;
  /** What GET /metrics serves: every part registers its own figures as it starts. */
  readonly metrics: Metrics;
  private readonly server: ApiServer;
  private readonly drivers: DriverRegistry;
  private readonly log: Logger;
  private readonly parts: Parts;
  private readonly clock: Clock;
  private readonly bootTime: number;
  /** The port actually bound (differs from config.port when that is 0); 0 when plain HTTP is off. */
  port = 0;
  /** The HTTPS port bound; 0 when HTTPS is off. */
  httpsPort = 0;
  /** The certificate HTTPS serves (its SHA-256 fingerprint is logged at start), or null. */
  tls: TlsFiles | null = null;
  /** What the first start created (credentials to print once), or null on later starts. */
  bootstrap: Bootstrap | null = null;
  /** The uplink to the upstream service while serving, when one is configured and enabled. */
  uplink: Uplink | null = null;
  /** The Sparkplug B edge node while serving, when an mqtt section is configured and enabled. */
  edgeNode: EdgeNode | null = null;
  /** Hayloft as a BACnet/IP device while serving, when a bacnetDevice section is configured. */
  bacnetDevice: BacnetExport | null = null;
  /** The poller while serving: reads devices into curVal/curStatus/curErr and collects history. */
  poller: Poller | null = null;
  private commissioning: Commissioning | undefined;
  /**
   * How this process restarts itself (`hayloft serve` sets it: a clean stop, then an exit systemd
   * restarts); null elsewhere (tests, offline commands), where a restart is refused.
   */
  onRestart: ((why: string) => void) | null = null;
  private readonly checksum: string;

  private constructor(config: Config, log: Logger, o: Built) {
    this.config = config;
    this.log = log;
    this.store = o.store;
    this.model = o.model;
    this.events = o.events;
    this.auth = o.auth;
    this.history = o.history;
    this.rollups = o.rollups;
    this.space = o.space;
    this.points = o.points;
    this.writer = o.writer;
    this.watches = o.watches;
    this.metrics = o.metrics;
    this.server = o.server;
    this.drivers = o.drivers;
    this.parts = o.parts;
    this.clockTrust = o.clockTrust;
    this.alarms = o.alarms;
    this.scheduler = o.scheduler;
    this.notifier = o.notifier;
    this.clock = o.clock;
    this.bootTime = o.bootTime;
    this.checksum = configChecksum(config.configFile);
  }

  /** What a fleet's host sees of this gateway (src/sync/mqtt/node-figures.ts): the MQTT edge node's NBIRTH and NDATA. */
  async nodeFigures(): Promise<NodeFigures> {
    const f = await nodeFigures({ version: productVersion(), checksum: this.checksum, health: () => this.health(), model: this.model, history: this.history, parts: () => this.parts.list() });
    const up = this.uplink?.stats();
    if (up !== undefined) f['Uplink/Backlog Samples'] = { type: 'Int64', value: up.backlogSamples };
    return f;
  }

  /**
   * A restart asked from outside (an MQTT host's Node Control/Reboot), authorised by the gate of
   * `user` (USER_ADMIN on everything, as a backup needs), then done by onRestart.
   */
  restart(r: { user: string; who: string }): Promise<void> {
    try {
      gateOfUser(this.auth, r.user, 'mqtt writeAs').requireAll('USER_ADMIN', 'a restart');
    } catch (e) {
      return Promise.reject(e instanceof Error ? e : new Error(String(e)));
    }
    const restart = this.onRestart;
    if (restart === null) return Promise.reject(new HayloftError(ErrorCodes.BAD_REQUEST, 'this process cannot restart itself (it is not `hayloft serve`)'));
    this.log.warn({ who: r.who, user: r.user }, 'restart asked');
    setImmediate(() => restart(`asked by ${r.who}`));
    return Promise.resolve();
  }

  /**
   * GET /api/health: the health of every part that reports one (src/lib/part.ts), aggregated.
   * `status` is `unavailable` (503, `ok` false) when a part is not ok, else `degraded` (200) when
   * a part works only partly (history refused on a full disk), else `ok`; `reasons` lists what is
   * wrong, one line per part, starting with its error code where there is one. `storage` is the
   * store's part (kept from before parts reported health); `clockStatus` the clock's (docs/clock.md).
   */
  async health(): Promise<HealthReport> {
    const parts: Record<string, PartHealth> = {};
    for (const p of this.parts.list()) if (p.health !== undefined) parts[p.name] = await p.health();
    const reasons: string[] = [];
    let ok = true;
    let degraded = false;
    for (const [name, h] of Object.entries(parts)) {
      if (!h.ok) {
        ok = false;
        reasons.push(`${name}: ${typeof h.error === 'string' ? h.error : typeof h.status === 'string' ? h.status : 'not ok'}`);
      } else if (h.degraded !== undefined) {
        degraded = true;
        reasons.push(`${name}: ${h.degraded}`);
      }
    }
    const { store, ...others } = parts;
    return {
      ok,
      status: !ok ? 'unavailable' : degraded ? 'degraded' : 'ok',
      uptimeSeconds: Math.round((this.clock.now() - this.bootTime) / 1000),
      ...(reasons.length > 0 ? { reasons } : {}),
      // Whether the wall clock can date what is stored (lib/clock-trust.ts; its detail in parts.clock).
      clockStatus: this.clockTrust.status().status,
      storage: store === undefined ? {} : withoutOk(store),
      parts: Object.fromEntries(Object.entries(others).map(([k, v]) => [k, withoutOk(v)])),
    };
  }

  /**
   * Whether systemd's watchdog should still be fed: false only when a part says a restart would
   * help (src/lib/part.ts `restartHelps`). A full disk is not cured by a restart, and a store that
   * failed a write reopens by itself: the watchdog is withheld only when that keeps failing.
   */
  async watchdogOk(): Promise<boolean> {
    for (const p of this.parts.list()) {
      if (p.health === undefined) continue;
      if ((await p.health()).restartHelps === true) return false;
    }
    return true;
  }

  /** Opens the data (the parts the CLI's offline commands need too), without serving. */
  static async open(opts: AppOptions): Promise<App> {
    const { config, log } = opts;
    const clock = opts.clock ?? systemClock;
    const parts = new Parts((part, err) => log.error({ err, part: part.name }, 'a part failed to stop'));
    const metrics = new Metrics({ productVersion: productVersion(), processMetrics: opts.processMetrics === true });
    const store = await Store.open(config.dataDir, {
      cacheBytes: config.storeCacheBytes,
      writeBufferBytes: config.storeWriteBufferBytes,
      openFiles: config.storeOpenFiles,
      fileBytes: config.storeFileBytes,
    });
    // The store's part first, so it closes last; it reopens LevelDB after a failed write
    // (store/recovery.ts) and reloads history's metadata from the reopened store.
    let history: HistoryStore | undefined;
    let rollups: RollupStore | undefined;
    const space = new DiskSpace({ dir: store.dir, floorBytes: config.historyMinFreeBytes, log });
    await parts.start(new StoreKeeper({ store, space, log, writeBufferBytes: config.storeWriteBufferBytes, reload: async () => {
      await history?.reload();
      await rollups?.reload();
    } }), metrics);
    // Before anything is dated: whether the clock can be trusted (its last good time is in the data folder).
    const clockTrust = new ClockTrust({ clock, log, dataDir: store.dir, sync: config.clockSync, ...(opts.clockTrust ?? {}) });
    await parts.start(clockTrust, metrics);
    // The last `hayloft update`, shown in /api/health and NBIRTH (lib/update-status.ts).
    const installed = installPrefix(packageRoot());
    const updateStatus = new UpdateStatus(opts.updateState !== undefined ? opts.updateState : installed === null ? null : updateStateFile(installed));
    await parts.start(updateStatus, metrics);
    try {
      // Built first (no I/O until a connector opens): the model learns the connector markers and
      // record checks from it, point state which tags name a driver's connector.
      const drivers = driversOf(config, log);
      const events = new EventBus<ModelEvents>();
      const model = await Model.load({ records: new RecordStore(store), clock, events, drivers });
      const auth = await AuthService.open({ store, model, clock, log, dataDir: store.dir, trust: clockTrust });
      await parts.start(auth, metrics);
      await parts.start(space, metrics);
      const his = new HistoryStore(store, {
        events,
        space,
        flushInterval: config.historyFlushMs,
        tailBudget: config.historyTailSamples,
        onFlushError: (err, dropped) => log.error({ err, dropped }, 'cannot write collected history: the polled samples since the last flush are dropped (counted in hayloft_history_refused_samples_total)'),
      });
      history = his;
      await parts.start(history, metrics);
      rollups = new RollupStore(store);
      await parts.start(rollups);
      await parts.start({ name: 'drivers', stop: () => drivers.close() });
      const points = new PointState({ model, history, drivers: drivers.tags(), hisTagsMs: config.historyFlushMs });
      await parts.start(historyFollowsPoints(model, history, rollups, log));
      const writer = new PointWriter({ model, points, store: new WriteStore(store), clock, log, trust: clockTrust });
      // Timed overrides that ended while stopped are relinquished before anything reads them.
      await parts.start(writer, metrics);
      // Alarm conditions are checked in every records commit from here on (CLI commands too).
      const alarmStore = new AlarmStore(store);
      const alarms = new AlarmEngine({ model, store: alarmStore, clock, log, trust: clockTrust, connMarkers: drivers.connMarkers() });
      await parts.start(alarms, metrics);
      // One delivery per kind of notification route (alarm/delivery.ts); e-mail only with an smtp
      // section (nodemailer is loaded then, not by every CLI command).
      const deliveries: Partial<Record<RouteKind, Delivery>> = { webhook: webhookDelivery };
      if (config.smtp !== null) deliveries.email = (await import('./alarm/email.js')).emailDelivery(config.smtp);
      // MQTT on the edge node's connection (started later, in start(); asked at each send).
      if (config.mqtt !== null) deliveries.mqtt = mqttDelivery(() => app.edgeNode ?? undefined, defaultAlarmTopic(config.mqtt.groupId, config.mqtt.edgeNodeId));
      const notifier = new Notifier({ model, store: alarmStore, engine: alarms, clock, log, deliveries, tz: config.tz });
      const scheduler = new Scheduler({ model, writer, clock, log, tz: timeZone(config.tz), trust: clockTrust });
      const watches = new WatchManager({
        model,
        clock,
        log,
        limits: { maxWatchesPerUser: config.watchMaxPerUser, maxPointsPerWatch: config.watchMaxPoints },
      });
      const bootTime = clock.now();
      // Loaded on the first discover or learn, which loads a driver's commissioning code and
      // protocol library (the BACnet library, which a Hayloft without BACnet connectors never
      // loads otherwise: drivers/bacnet/kind.ts).
      let commissioning: Promise<Commissioning> | undefined;
      const commission = (): Promise<Commissioning> =>
        (commissioning ??= import('./poller/commission.js').then((m) => {
          const c = new m.Commissioning({ model, points, drivers, clock, log });
          app.commissioning = c;
          return c;
        }));
      await parts.start({ name: 'commissioning', stop: () => app.commissioning?.stop() });
      const server = createApiServer({
        ops: allOps,
        auth,
        ctx: {
          model,
          clock,
          log,
          info: { serverName: config.serverName, tz: timeZone(config.tz), productVersion: productVersion(), bootTime: clock.now(), clockStatus: () => clockTrust.status().status, lastUpdate: () => updateStatus.lastUpdate() },
          watches,
          history,
          rollups,
          points,
          writer,
          drivers: drivers.infos(),
          commission,
          alarms,
          schedules: scheduler,
          // Started with the serving parts (App.start), when configured.
          bacnetDevice: () => app.bacnetDevice?.listing() ?? null,
        },
        log,
        maxBodyBytes: config.maxBodyBytes,
        limits: {
          maxRequestBodyBytes: config.maxRequestBodyBytes,
          maxBodyBytesInFlight: config.maxBodyBytesInFlight,
          shape: { maxDepth: MAX_DEPTH, maxValueChars: config.maxValueChars, maxCols: config.maxCols },
          maxConnectionsPerAddress: config.maxConnectionsPerAddress,
          headersTimeoutMs: config.headersTimeoutMs,
          requestTimeoutMs: config.requestTimeoutMs,
          keepAliveTimeoutMs: config.keepAliveTimeoutMs,
        },
        debug: config.debug,
        metrics,
        metricsOpen: config.metricsOpen,
        health: () => app.health(),
        // Polled samples still waiting for their flush go into the backup too (when the store
        // takes writes: a backup of a full or failed store still reads what is there).
        backup: async () => {
          await his.flush().catch(() => undefined);
          return backupStream(store, { productVersion: productVersion(), now: clock.now() });
        },
        // WideSky's calls beyond the ops (push of watch changes, GraphQL, admin calls), and the console.
        groups: [pushGroup({ auth, watches, log, metrics }), graphqlGroup({ model, history, rollups, clock }), adminRoutes(auth), consoleRoutes(consoleFiles(consoleDir()))],
      });
      const app = new App(config, log, { store, model, events, auth, history, rollups, space, points, writer, watches, metrics, server, drivers, parts, clock, bootTime, clockTrust, alarms, scheduler, notifier });
      for (const id of new Set([...history.points(), ...rollups.ids()])) {
        // History of a point deleted while its history could not follow (a crash) goes now.
        if (model.stored(id)?.has('point') !== true) dropHistory(history, rollups, id, log);
      }
      // Points show their his tags, and cur points fed by hisWrite their newest sample, at once;
      // from now on point state hears every history write itself.
      await parts.start(points, metrics);
      if (auth.needsBootstrap()) app.bootstrap = await auth.bootstrap(opts.firstRun ?? {});
      else await auth.grantNewPermissions();
      return app;
    } catch (e) {
      await parts.stopAll();
      throw e;
    }
  }

  /** Opens the data and serves HTTP. */
  static async start(opts: AppOptions): Promise<App> {
    const app = await App.open(opts);
    const clock = opts.clock ?? systemClock;
    try {
      // Retention first: it finishes a roll a stop interrupted before anything writes history.
      const cfg = opts.config;
      const defaults = { rawDays: cfg.historyRetentionDays, rollupDays: cfg.historyRollupRetentionDays };
      app.retention = new Retention({
        history: app.history,
        rollups: app.rollups,
        store: app.store,
        space: app.space,
        clock,
        trust: app.clockTrust,
        log: app.log,
        policy: (id) => retentionPolicy(app.model.stored(id), defaults),
        maxStoreBytes: cfg.historyMaxBytes,
      });
      await app.parts.start(app.retention, app.metrics);
      await app.parts.start(app.watches, app.metrics);
      const poller = (app.poller = new Poller({ model: app.model, points: app.points, writer: app.writer, history: app.history, drivers: app.drivers, clock, log: app.log, trust: app.clockTrust }));
      // A protocol library is loaded when the first record of its kind exists (drivers/kinds.ts).
      await app.drivers.loadFor((tag) => app.model.idsWithTag(tag).length > 0);
      await app.parts.start(driversFollowRecords(app.model, app.drivers, poller, app.log));
      if (opts.config.bacnetBbmd !== '') await app.parts.start(bacnetBbmdHealth(app.drivers, opts.config.bacnetBbmd));
      await app.parts.start(poller, app.metrics);
      // After the poller (its write queue hears write.effective): at start the value due now is written.
      await app.parts.start(app.scheduler, app.metrics);
      await app.parts.start(app.notifier, app.metrics);
      // The senders before the server: they mark late samples from the first hisWrite on, and
      // stop after it, so no write is left unmarked.
      const up = opts.config.uplink;
      if (up !== null && up.enabled) {
        app.uplink = new Uplink({ config: up, model: app.model, points: app.points, history: app.history, store: app.store, clock, log: app.log, defaultTz: timeZone(opts.config.tz) });
        await app.parts.start(app.uplink, app.metrics);
      }
      const mq = opts.config.mqtt;
      if (mq !== null && mq.enabled) {
        // Loaded only when configured: MQTT.js and protobufjs cost every CLI command their load time.
        const { EdgeNode } = await import('./sync/mqtt/index.js');
        app.edgeNode = new EdgeNode({ config: mq, model: app.model, history: app.history, store: app.store, clock, log: app.log, commands: (w) => app.command(w), trust: app.clockTrust, fedByDriver: (rec) => app.points.fedByDriver(rec), figures: () => app.nodeFigures(), reboot: (r) => app.restart(r) });
        await app.parts.start(app.edgeNode, app.metrics);
      }
      const bd = opts.config.bacnetDevice;
      if (bd !== null) {
        // Loaded only when configured, like the edge node: the BACnet library is not loaded otherwise.
        const { BacnetExport } = await import('./export/index.js');
        app.bacnetDevice = new BacnetExport({
          config: bd,
          serverName: opts.config.serverName,
          version: productVersion(),
          model: app.model,
          writer: app.writer,
          store: app.store,
          log: app.log,
          write: (w) => app.command({ pointId: w.pointId, value: w.val, level: w.level, who: w.who, user: w.user }, 'bacnetDevice writeAs'),
        });
        await app.parts.start(app.bacnetDevice, app.metrics);
      }
      await app.parts.start({ name: 'http', start: () => app.listen(opts.config), stop: () => app.server.close() });
      app.log.debug({ parts: app.parts.list().map((p) => p.name), events: app.wiring() }, 'parts started, and who listens to what');
    } catch (e) {
      await app.parts.stopAll();
      throw e;
    }
    return app;
  }

  /** Who listens to which event, in calling order (for `hayloft` debug logs and tests). */
  wiring(): Record<string, string[]> {
    return this.events.describe();
  }

  /**
   * A DCMD from an MQTT host application (or a BACnet WriteProperty), written through pointWrite's path: the priority array
   * at the configured level, authorised by the gate of the configured Hayloft user as its
   * pointWrite would be (auth/gate.ts), audited like any write.
   */
  private async command(w: CommandWrite, role = 'mqtt writeAs'): Promise<void> {
    const gate = gateOfUser(this.auth, w.user, role);
    const val = w.value === null ? null : typeof w.value === 'number' ? new HNumber(w.value) : w.value;
    await this.writer.write({ id: w.pointId, level: w.level, val, who: w.who, actor: { user: w.user }, authorize: gate.authorizeWrite });
  }

  /**
   * Plain HTTP and HTTPS, each where configured. With no certificate configured, HTTPS serves a
   * self-signed one made on the first start and kept in the data folder; its fingerprint is
   * logged so a client can pin it. Certificate files are watched and reloaded when they change.
   */
  private async listen(c: Config): Promise<void> {
    if (c.port === null && c.httpsPort === null) {
      throw new HayloftError(ErrorCodes.BAD_CONFIG, 'port and httpsPort are both off: nothing would serve the API; turn one on');
    }
    if (c.port !== null) this.port = (await this.server.listen(c.port, c.host)).port;
    if (c.httpsPort !== null) {
      const files = await tlsFiles({ dataDir: this.store.dir, certFile: c.tlsCert, keyFile: c.tlsKey });
      this.tls = files;
      this.httpsPort = (await this.server.listenTls(c.httpsPort, c.host, files)).port;
      this.log.info(
        { fingerprint256: files.fingerprint, cert: files.certPath, port: this.httpsPort },
        files.generated ? 'made a self-signed TLS certificate (kept in the data folder): check this SHA-256 fingerprint in your client' : 'HTTPS certificate',
      );
      const stopWatch = watchTls(files, (pair) => this.server.setCertificate(pair), this.log);
      await this.parts.start({ name: 'tls-watch', stop: stopWatch });
    }
  }

  /** Stops serving (finishing requests in flight), then every part in the reverse order of its start. */
  async stop(): Promise<void> {
    await this.parts.stopAll();
  }
}

/** A deleted point takes its history and its rollups with it (after the commit: history is another keyspace). */
function historyFollowsPoints(model: Model, history: HistoryStore, rollups: RollupStore, log: Logger): Part {
  const part: Part = {
    name: 'history-follows-points',
    start() {
      model.events.on('records.committed', part, (change) => {
        for (const r of change.deleted) if (r.has('point')) dropHistory(history, rollups, (r.get('id') as HRef).id, log);
      });
    },
    stop() {
      model.events.off(part);
    },
  };
  return part;
}

function dropHistory(history: HistoryStore, rollups: RollupStore, id: string, log: Logger): void {
  history.deleteAll(id).catch((err: unknown) => log.error({ err, pointId: id }, 'cannot delete the history of a deleted point'));
  rollups.dropPoint(id).catch((err: unknown) => log.error({ err, pointId: id }, 'cannot delete the history rollups of a deleted point'));
}

/**
 * The client side's foreign-device registration in /api/health (docs/drivers.md): the BACnet
 * driver registers its socket while it is open (while BACnet connectors exist or a discover runs).
 */
function bacnetBbmdHealth(drivers: DriverRegistry, bbmd: string): Part {
  return {
    name: 'bacnet-bbmd',
    health() {
      const d = drivers.byName('bacnet') as { foreignStatus?: () => ForeignStatus | null } | undefined;
      const f = d?.foreignStatus?.() ?? null;
      if (f === null) return { ok: true, bbmd, bbmdState: 'idle' };
      return { ok: true, ...foreignHealth(f) };
    },
  };
}

/** A protocol library is loaded when the first record of its kind is created (drivers/kinds.ts). */
function driversFollowRecords(model: Model, drivers: DriverRegistry, poller: Poller, log: Logger): Part {
  const part: Part = {
    name: 'driver-loader',
    start() {
      model.events.on('records.committed', part, (c) => {
        if (!drivers.hasUnloaded()) return;
        const recs = [...c.created, ...c.updated];
        drivers.loadFor((tag) => recs.some((r) => r.has(tag))).then(
          (loaded) => {
            if (loaded) poller.driversChanged();
          },
          (err: unknown) => log.error({ err }, 'cannot load a driver'),
        );
      });
    },
    stop() {
      model.events.off(part);
    },
  };
  return part;
}

/** The drivers a running Hayloft knows, each loaded when a record of its kind first exists. */
function driversOf(c: Config, log: Logger): DriverRegistry {
  return new DriverRegistry(
    [],
    builtinDriverKinds({
      bacnet: {
        interface: c.bacnetInterface,
        port: c.bacnetPort,
        timeoutMs: c.bacnetTimeoutMs,
        ...(c.bacnetBroadcast === '' ? {} : { broadcastAddress: c.bacnetBroadcast }),
        ...(c.bacnetBbmd === '' ? {} : { bbmd: c.bacnetBbmd, bbmdTtlS: c.bacnetBbmdTtl }),
        log: (message) => log.info({ driver: 'bacnet' }, message),
      },
    }),
  );
}

/** A part's health as /api/health shows it: `ok` and the watchdog's flag are the report's, not the part's detail. */
function withoutOk(h: PartHealth): Record<string, unknown> {
  const { ok: _ok, restartHelps: _r, degraded: _d, ...rest } = h;
  return rest;
}
