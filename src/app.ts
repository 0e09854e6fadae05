/**
 * The composition root: builds every part from the Config, starts them in order (store, model,
 * auth, history, watches, poller, HTTP) and stops them in reverse. Nothing else constructs long-lived parts.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
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
import type { Logger } from './lib/log.js';
import { Model } from './model/model.js';
import { Store } from './store/db.js';
import { RecordStore } from './store/records.js';
import { WatchManager } from './watch/index.js';
import { PointState } from './model/point-state.js';
import { PointWriter } from './model/point-writer.js';
import { WriteStore } from './store/write-store.js';
import { HistoryStore } from './store/history.js';
import type { HealthReport } from './api/server.js';
import { Metrics } from './lib/metrics.js';
import { backupStream, storeSizeBytes } from './store/backup.js';
import { type HRef, HNumber } from './haystack/values.js';
import { Uplink } from './sync/index.js';
import { DriverRegistry } from './drivers/registry.js';
import { builtinDriverKinds } from './drivers/kinds.js';
import type { CommandWrite, EdgeNode, EdgeNodeStats } from './sync/mqtt/index.js';
import { Grants, policiesOf } from './auth/permissions.js';
import { type ConnectorStats, Poller } from './poller/index.js';
import type { Commissioning } from './poller/commission.js';

let pkgDir: { dir: URL; version: string } | undefined;

/** The folder of Hayloft's package.json, the nearest above this file (src/, dist/ or a bench build), and its version. */
function packageDir(): { dir: URL; version: string } {
  if (pkgDir !== undefined) return pkgDir;
  for (let dir = new URL('.', import.meta.url); ; dir = new URL('..', dir)) {
    try {
      const pkg = JSON.parse(readFileSync(new URL('package.json', dir), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'hayloft') return (pkgDir = { dir, version: pkg.version ?? '0.0.0' });
    } catch {
      // not here: look one folder up
    }
    if (dir.pathname === '/') return (pkgDir = { dir: new URL('.', import.meta.url), version: '0.0.0' });
  }
}

export function productVersion(): string {
  return packageDir().version;
}

/** Where `npm run build` puts the console (web/ built into dist/web), whether the server runs from src/ or dist/. */
export function consoleDir(): string {
  return fileURLToPath(new URL('dist/web/', packageDir().dir));
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
}

/** The long-lived parts, built once by App.open. */
interface Parts {
  store: Store;
  model: Model;
  auth: AuthService;
  history: HistoryStore;
  points: PointState;
  writer: PointWriter;
  drivers: DriverRegistry;
  watches: WatchManager;
  server: ApiServer;
}

export class App {
  readonly config: Config;
  readonly store: Store;
  readonly model: Model;
  readonly auth: AuthService;
  readonly history: HistoryStore;
  /** The owner of points' live tags (cur*, his*, conn*, write*, sync*). */
  readonly points: PointState;
  /** Priority arrays of writable points: pointWrite, and (later) MQTT commands, call it. */
  readonly writer: PointWriter;
  readonly watches: WatchManager;
  private readonly server: ApiServer;
  private readonly drivers: DriverRegistry;
  private readonly log: Logger;
  private readonly unsubscribe: () => void;
  private unlistenDrivers: (() => void) | undefined;
  /** The port actually bound (differs from config.port when that is 0); 0 when plain HTTP is off. */
  port = 0;
  /** The HTTPS port bound; 0 when HTTPS is off. */
  httpsPort = 0;
  /** The certificate HTTPS serves (its SHA-256 fingerprint is logged at start), or null. */
  tls: TlsFiles | null = null;
  private stopTlsWatch: (() => void) | undefined;
  /** What the first start created (credentials to print once), or null on later starts. */
  bootstrap: Bootstrap | null = null;
  /** What GET /metrics serves; parts started later (poller, uplink) may add their own. */
  metrics: Metrics | null = null;
  /** The uplink to the upstream service while serving, when one is configured and enabled. */
  uplink: Uplink | null = null;
  /** The Sparkplug B edge node while serving, when an mqtt section is configured and enabled. */
  edgeNode: EdgeNode | null = null;
  /** The poller while serving: reads devices into curVal/curStatus/curErr and collects history. */
  poller: Poller | null = null;
  private commissioning: Commissioning | undefined;

  private constructor(config: Config, log: Logger, parts: Parts) {
    this.config = config;
    this.log = log;
    this.store = parts.store;
    this.model = parts.model;
    this.auth = parts.auth;
    this.history = parts.history;
    this.points = parts.points;
    this.writer = parts.writer;
    this.drivers = parts.drivers;
    this.watches = parts.watches;
    this.server = parts.server;
    // A deleted point takes its history with it.
    this.unsubscribe = parts.model.onChange((change) => {
      for (const r of change.deleted) if (r.has('point')) this.dropHistory((r.get('id') as HRef).id);
    });
  }

  /** Opens the data (the parts the CLI's offline commands need too), without serving. */
  static async open(opts: AppOptions): Promise<App> {
    const { config, log } = opts;
    const clock = opts.clock ?? systemClock;
    const store = await Store.open(config.dataDir, { cacheBytes: config.storeCacheBytes, writeBufferBytes: config.storeWriteBufferBytes });
    try {
      const model = await Model.load({ records: new RecordStore(store), clock });
      const auth = await AuthService.open({ store, model, clock, log, dataDir: store.dir });
      const history = new HistoryStore(store);
      await history.start();
      // Built here (no I/O until a connector opens) so point state knows which tags name a
      // driver's connector, for the ops as for the poller.
      const drivers = driversOf(config, log);
      const points = new PointState({ model, history, drivers: drivers.tags() });
      const writer = new PointWriter({ model, points, store: new WriteStore(store), clock, log });
      // Timed overrides that ended while stopped are relinquished before anything reads them.
      await writer.start();
      const watches = new WatchManager({
        model,
        clock,
        log,
        limits: { maxWatchesPerUser: config.watchMaxPerUser, maxPointsPerWatch: config.watchMaxPoints },
      });
      const metrics = new Metrics({ productVersion: productVersion(), processMetrics: opts.processMetrics === true });
      watchMetrics(metrics, store, model, history);
      const bootTime = clock.now();
      // Loaded on the first discover or learn: it brings the BACnet library, which a Hayloft
      // without BACnet connectors never loads otherwise (drivers/kinds.ts).
      let commissioning: Promise<Commissioning> | undefined;
      const commission = (): Promise<Commissioning> =>
        (commissioning ??= import('./poller/commission.js').then((m) => {
          const c = new m.Commissioning({ model, points, drivers, clock, log });
          app.commissioning = c;
          return c;
        }));
      const server = createApiServer({
        ops: allOps,
        auth,
        ctx: {
          model,
          clock,
          log,
          info: { serverName: config.serverName, tz: timeZone(config.tz), productVersion: productVersion(), bootTime: clock.now() },
          watches,
          history,
          points,
          writer,
          commission,
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
        health: () => healthOf(store, (clock.now() - bootTime) / 1000),
        backup: () => backupStream(store, { productVersion: productVersion(), now: clock.now() }),
        // WideSky's calls beyond the ops (push of watch changes, GraphQL, admin calls), and the console.
        groups: [pushGroup({ auth, watches, log, metrics }), graphqlGroup({ model, history, clock }), adminRoutes(auth), consoleRoutes(consoleFiles(consoleDir()))],
      });
      const app = new App(config, log, { store, model, auth, history, points, writer, drivers, watches, server });
      app.metrics = metrics;
      for (const id of history.points()) {
        // History of a point deleted while its history could not follow (a crash) goes now.
        if (model.stored(id)?.has('point') !== true) app.dropHistory(id);
      }
      // Points show their his tags, and cur points fed by hisWrite their newest sample, at once;
      // from now on point state hears every history write itself.
      await points.start();
      if (auth.needsBootstrap()) app.bootstrap = await auth.bootstrap(opts.firstRun ?? {});
      else await auth.grantNewPermissions();
      return app;
    } catch (e) {
      await store.close();
      throw e;
    }
  }

  /** Opens the data and serves HTTP. */
  static async start(opts: AppOptions): Promise<App> {
    const app = await App.open(opts);
    try {
      app.watches.start();
      await app.startPoller(opts.clock ?? systemClock);
      if (app.metrics !== null && app.poller !== null) pollerMetrics(app.metrics, app.poller, app.model);
      // The uplink before the server: it marks late samples from the first hisWrite on.
      const up = opts.config.uplink;
      if (up !== null && up.enabled) {
        app.uplink = new Uplink({ config: up, model: app.model, points: app.points, history: app.history, store: app.store, clock: opts.clock ?? systemClock, log: app.log, defaultTz: timeZone(opts.config.tz) });
        await app.uplink.start();
        if (app.metrics !== null) uplinkMetrics(app.metrics, app.uplink);
      }
      await app.listen(opts.config);
      const mq = opts.config.mqtt;
      if (mq !== null && mq.enabled) {
        // Loaded only when configured: MQTT.js and protobufjs cost every CLI command their load time.
        const { EdgeNode } = await import('./sync/mqtt/index.js');
        app.edgeNode = new EdgeNode({ config: mq, model: app.model, history: app.history, store: app.store, clock: opts.clock ?? systemClock, log: app.log, commands: (w) => app.command(w) });
        await app.edgeNode.start();
        if (app.metrics !== null) edgeNodeMetrics(app.metrics, app.edgeNode);
      }
    } catch (e) {
      await app.close();
      throw e;
    }
    return app;
  }

  /**
   * A DCMD from an MQTT host application, written through pointWrite's path: the priority array
   * at the configured level, checked against the permissions of the configured Hayloft user
   * (POINT_WRITE, its filter and highest level), audited like any write.
   */
  private async command(w: CommandWrite): Promise<void> {
    const user = this.model
      .idsWithTag('user')
      .map((id) => this.model.stored(id))
      .find((u) => u?.get('username') === w.user);
    if (user === undefined) throw new HayloftError(ErrorCodes.FORBIDDEN, `the mqtt writeAs user "${w.user}" does not exist`);
    const grants = new Grants(this.model, policiesOf(this.model, user));
    const val = w.value === null ? null : typeof w.value === 'number' ? new HNumber(w.value) : w.value;
    await this.writer.write({ id: w.pointId, level: w.level, val, who: w.who, actor: { user: w.user }, authorize: (rec, level) => grants.authorizeWrite(rec, level) });
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
      this.stopTlsWatch = watchTls(files, (pair) => this.server.setCertificate(pair), this.log);
    }
  }

  private async startPoller(clock: Clock): Promise<void> {
    const poller = (this.poller = new Poller({ model: this.model, points: this.points, writer: this.writer, history: this.history, drivers: this.drivers, clock, log: this.log }));
    // A protocol library is loaded when the first record of its kind exists (drivers/kinds.ts).
    await this.drivers.loadFor((tag) => this.model.idsWithTag(tag).length > 0);
    const unlisten = this.model.onChange((c) => {
      if (!this.drivers.hasUnloaded()) return;
      const recs = [...c.created, ...c.updated];
      this.drivers.loadFor((tag) => recs.some((r) => r.has(tag))).then(
        (loaded) => {
          if (loaded) poller.driversChanged();
        },
        (err: unknown) => this.log.error({ err }, 'cannot load a driver'),
      );
    });
    this.unlistenDrivers = unlisten;
    poller.start();
  }

  private dropHistory(id: string): void {
    this.history.deleteAll(id).catch((err: unknown) => this.log.error({ err, pointId: id }, 'cannot delete the history of a deleted point'));
  }

  /** Stops serving (finishing requests in flight), then closes the data. */
  async stop(): Promise<void> {
    this.stopTlsWatch?.();
    await this.server.close();
    await this.close();
  }

  private async close(): Promise<void> {
    // First: they read history and write their cursors until they stop.
    await this.uplink?.stop();
    await this.edgeNode?.stop();
    // Before history: it writes what it collected until it stops.
    this.unlistenDrivers?.();
    await this.poller?.stop();
    this.commissioning?.stop();
    await this.drivers.close();
    this.unsubscribe();
    this.writer.stop();
    this.watches.stop();
    this.auth.stop();
    // Before history: it may still read back the newest sample after a delete.
    await this.points.stop();
    await this.history.stop();
    await this.store.close();
  }
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
      },
      bacnetLog: (message) => log.info({ driver: 'bacnet' }, message),
    }),
  );
}

/** The metrics read at scrape time from the parts that already keep them. */
function watchMetrics(metrics: Metrics, store: Store, model: Model, history: HistoryStore): void {
  metrics.gauge('hayloft_points', 'Points by curStatus (none: no current value)', ['curStatus'], () => {
    const by = new Map<string, number>();
    for (const p of model.query('point')) {
      const s = p.get('curStatus');
      const k = typeof s === 'string' ? s : 'none';
      by.set(k, (by.get(k) ?? 0) + 1);
    }
    return [...by].map(([curStatus, value]) => ({ labels: { curStatus }, value }));
  });
  metrics.counter('hayloft_history_samples_written_total', 'History samples written since start (hisWrite and collection)', () => history.samplesWritten);
  metrics.gauge('hayloft_store_size_bytes', 'Bytes the LevelDB store takes on disk', [], () => storeSizeBytes(store));
}

/** Liveness and storage state for GET /api/health: ok only when a read from the store works. */
async function healthOf(store: Store, uptimeSeconds: number): Promise<HealthReport> {
  const storage: Record<string, unknown> = { status: store.db.status };
  let ok = false;
  if (store.db.status === 'open') {
    try {
      storage.formatVersion = await store.formatVersion();
      storage.sizeBytes = storeSizeBytes(store);
      ok = true;
    } catch {
      // The details go to the log of whatever failed; an unauthenticated answer says only "down".
      storage.status = 'unreadable';
    }
  }
  return { ok, status: ok ? 'ok' : 'unavailable', uptimeSeconds: Math.round(uptimeSeconds), storage };
}

/** The uplink's figures (Uplink.stats), read at scrape time. */
function uplinkMetrics(metrics: Metrics, uplink: Uplink): void {
  const connector = uplink.state.name;
  metrics.gauge('hayloft_uplink_points', 'Points synced upstream, by syncStatus', ['connector', 'syncStatus'], () =>
    Object.entries(uplink.stats().byStatus).map(([syncStatus, value]) => ({ labels: { connector, syncStatus }, value })),
  );
  metrics.gauge('hayloft_uplink_backlog_points', 'Points with samples not yet acknowledged upstream', ['connector'], () => [{ labels: { connector }, value: uplink.stats().backlogPoints }]);
  metrics.gauge('hayloft_uplink_backlog_samples', 'Samples not yet acknowledged upstream (estimated from each point\'s density)', ['connector'], () => [
    { labels: { connector }, value: uplink.stats().backlogSamples },
  ]);
  metrics.counter('hayloft_uplink_samples_sent_total', 'History samples acknowledged upstream since start', () => uplink.stats().sentSamples);
  metrics.counter('hayloft_uplink_batches_sent_total', 'hisWrite batches acknowledged upstream since start', () => uplink.stats().sentBatches);
  metrics.counter('hayloft_uplink_errors_total', 'Failed upstream requests since start', () => uplink.stats().errors);
  metrics.gauge('hayloft_uplink_consecutive_failures', 'Failed uplink passes in a row (0: the last one succeeded)', ['connector'], () => [{ labels: { connector }, value: uplink.stats().failures }]);
  metrics.gauge('hayloft_uplink_last_ack_timestamp_seconds', 'When the upstream last acknowledged a batch (0: never)', ['connector'], () => [
    { labels: { connector }, value: (uplink.stats().lastAck ?? 0) / 1000 },
  ]);
}

/** The edge node's figures (EdgeNode.stats), read at scrape time. */
function edgeNodeMetrics(metrics: Metrics, node: EdgeNode): void {
  const connector = node.state.name;
  const one = (pick: (s: EdgeNodeStats) => number) => () => [{ labels: { connector }, value: pick(node.stats()) }];
  metrics.gauge('hayloft_mqtt_connected', 'The edge node has a broker session and has published its births (1) or not (0)', ['connector'], one((s) => (s.state === 'online' ? 1 : 0)));
  metrics.gauge('hayloft_mqtt_backlog_points', 'Points with history samples the broker has not acknowledged', ['connector'], one((s) => s.backlogPoints));
  metrics.gauge('hayloft_mqtt_backlog_samples', "Samples the broker has not acknowledged (estimated from each point's density)", ['connector'], one((s) => s.backlogSamples));
  metrics.gauge('hayloft_mqtt_devices_alive', 'Sparkplug devices born in the current session', ['connector'], one((s) => s.devicesAlive));
  metrics.counter('hayloft_mqtt_samples_live_total', 'Samples published as live DDATA since start', () => node.stats().liveSamples);
  metrics.counter('hayloft_mqtt_samples_historical_total', 'Samples published as historical DDATA (store and forward) since start', () => node.stats().historicalSamples);
  metrics.counter('hayloft_mqtt_messages_total', 'Sparkplug messages published since start', () => node.stats().messages);
  metrics.counter('hayloft_mqtt_connection_failures_total', 'Broker sessions that failed or ended since start', () => node.stats().failures);
  metrics.counter('hayloft_mqtt_commands_refused_total', 'DCMD and NCMD metrics refused since start', () => node.stats().commandsRefused);
}

/** The poller's running totals and the connectors' states, read at scrape time. */
function pollerMetrics(metrics: Metrics, poller: Poller, model: Model): void {
  metrics.counter('hayloft_poll_reads_total', 'Driver reads (poll buckets read) since start', () => poller.stats().reads);
  metrics.counter('hayloft_poll_failures_total', 'Driver reads that found the device down, since start', () => poller.stats().failures);
  // Per connector (labelled by its name, else its id): reads, failures, and time spent reading.
  const perConnector = (pick: (s: ConnectorStats) => number): (() => { labels: Record<string, string>; value: number }[]) => () =>
    [...poller.connectorStats()].map(([id, s]) => {
      const name = model.stored(id)?.get('name');
      return { labels: { connector: typeof name === 'string' ? name : id }, value: pick(s) };
    });
  metrics.counter('hayloft_connector_reads_total', 'Driver reads per connector since start', () => 0, ['connector'], perConnector((s) => s.reads));
  metrics.counter('hayloft_connector_read_failures_total', 'Driver reads per connector that found the device down', () => 0, ['connector'], perConnector((s) => s.failures));
  metrics.counter('hayloft_connector_read_seconds_total', 'Seconds spent in driver reads per connector (divide by reads for the mean latency)', () => 0, ['connector'], perConnector((s) => s.seconds));
  metrics.gauge('hayloft_history_backlog_samples', 'Collected history samples not yet written', [], () => poller.stats().hisBacklog);
  metrics.gauge('hayloft_connectors', 'Connectors by connStatus', ['connStatus'], () => {
    const by = new Map<string, number>();
    for (const c of model.query('connStatus')) {
      const s = c.get('connStatus');
      if (typeof s === 'string') by.set(s, (by.get(s) ?? 0) + 1);
    }
    return [...by].map(([connStatus, value]) => ({ labels: { connStatus }, value }));
  });
}
