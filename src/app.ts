/**
 * The composition root: builds every part from the Config, starts them in order (store, model,
 * auth, history, watches, poller, HTTP) and stops them in reverse. Nothing else constructs long-lived parts.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { AuthService, type Bootstrap } from './auth/auth.js';
import { type ApiServer, createApiServer } from './api/server.js';
import { allOps } from './api/ops/index.js';
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
import { HistoryStore } from './store/history.js';
import type { HealthReport } from './api/server.js';
import { Metrics } from './lib/metrics.js';
import { backupStream, storeSizeBytes } from './store/backup.js';
import type { HRef } from './haystack/values.js';
import { Uplink } from './sync/index.js';
import { BacnetDriver, DriverRegistry, ModbusDriver } from './drivers/index.js';
import { type ConnectorStats, Poller } from './poller/index.js';
import { Commissioning } from './poller/commission.js';

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
  drivers: DriverRegistry;
  watches: WatchManager;
  server: ApiServer;
  commission: Commissioning;
}

export class App {
  readonly config: Config;
  readonly store: Store;
  readonly model: Model;
  readonly auth: AuthService;
  readonly history: HistoryStore;
  /** The owner of points' live tags (cur*, his*, conn*, write*, sync*). */
  readonly points: PointState;
  readonly watches: WatchManager;
  private readonly server: ApiServer;
  private readonly drivers: DriverRegistry;
  private readonly log: Logger;
  private readonly unsubscribe: () => void;
  /** The port actually bound (differs from config.port when that is 0). */
  port = 0;
  /** What the first start created (credentials to print once), or null on later starts. */
  bootstrap: Bootstrap | null = null;
  /** What GET /metrics serves; parts started later (poller, uplink) may add their own. */
  metrics: Metrics | null = null;
  /** The uplink to the upstream service while serving, when one is configured and enabled. */
  uplink: Uplink | null = null;
  /** The poller while serving: reads devices into curVal/curStatus/curErr and collects history. */
  poller: Poller | null = null;
  private readonly commission: Commissioning;

  private constructor(config: Config, log: Logger, parts: Parts) {
    this.config = config;
    this.log = log;
    this.store = parts.store;
    this.model = parts.model;
    this.auth = parts.auth;
    this.history = parts.history;
    this.points = parts.points;
    this.drivers = parts.drivers;
    this.watches = parts.watches;
    this.server = parts.server;
    this.commission = parts.commission;
    // A deleted point takes its history with it.
    this.unsubscribe = parts.model.onChange((change) => {
      for (const r of change.deleted) if (r.has('point')) this.dropHistory((r.get('id') as HRef).id);
    });
  }

  /** Opens the data (the parts the CLI's offline commands need too), without serving. */
  static async open(opts: AppOptions): Promise<App> {
    const { config, log } = opts;
    const clock = opts.clock ?? systemClock;
    const store = await Store.open(config.dataDir);
    try {
      const model = await Model.load({ records: new RecordStore(store), clock });
      const auth = await AuthService.open({ store, model, clock, log, dataDir: store.dir });
      const history = new HistoryStore(store);
      await history.start();
      // Built here (no I/O until a connector opens) so point state knows which tags name a
      // driver's connector, for the ops as for the poller.
      const drivers = driversOf(config, log);
      const points = new PointState({ model, history, driverRefTags: drivers.all().map((d) => d.refTag) });
      const watches = new WatchManager({
        model,
        clock,
        log,
        limits: { maxWatchesPerUser: config.watchMaxPerUser, maxPointsPerWatch: config.watchMaxPoints },
      });
      const metrics = new Metrics({ productVersion: productVersion(), processMetrics: opts.processMetrics === true });
      watchMetrics(metrics, store, model, history);
      const bootTime = clock.now();
      const commission = new Commissioning({ model, points, drivers, clock, log });
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
        groups: [consoleRoutes(consoleFiles(consoleDir()))],
        backup: () => backupStream(store, { productVersion: productVersion(), now: clock.now() }),
      });
      const app = new App(config, log, { store, model, auth, history, points, drivers, watches, server, commission });
      app.metrics = metrics;
      const withHistory: string[] = [];
      for (const id of history.points()) {
        // History of a point deleted while its history could not follow (a crash) goes now.
        if (model.stored(id)?.has('point') === true) withHistory.push(id);
        else app.dropHistory(id);
      }
      // Points show their his tags, and cur points fed by hisWrite their newest sample, at once.
      for (let i = 0; i < withHistory.length; i += 64) {
        await Promise.all(withHistory.slice(i, i + 64).map((id) => points.refreshFromHistory(id)));
      }
      if (auth.needsBootstrap()) app.bootstrap = await auth.bootstrap(opts.firstRun ?? {});
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
      app.startPoller(opts.clock ?? systemClock);
      if (app.metrics !== null && app.poller !== null) pollerMetrics(app.metrics, app.poller, app.model);
      app.port = (await app.server.listen(opts.config.port, opts.config.host)).port;
      const up = opts.config.uplink;
      if (up !== null && up.enabled) {
        app.uplink = new Uplink({ config: up, model: app.model, points: app.points, history: app.history, store: app.store, clock: opts.clock ?? systemClock, log: app.log, defaultTz: timeZone(opts.config.tz) });
        await app.uplink.start();
        if (app.metrics !== null) uplinkMetrics(app.metrics, app.uplink);
      }
    } catch (e) {
      await app.close();
      throw e;
    }
    return app;
  }

  private startPoller(clock: Clock): void {
    this.poller = new Poller({ model: this.model, points: this.points, history: this.history, drivers: this.drivers, clock, log: this.log });
    this.poller.start();
  }

  private dropHistory(id: string): void {
    this.history.deleteAll(id).catch((err: unknown) => this.log.error({ err, pointId: id }, 'cannot delete the history of a deleted point'));
  }

  /** Stops serving (finishing requests in flight), then closes the data. */
  async stop(): Promise<void> {
    await this.server.close();
    await this.close();
  }

  private async close(): Promise<void> {
    // First: it reads history and writes its cursors until it stops.
    await this.uplink?.stop();
    // Before history: it writes what it collected until it stops.
    await this.poller?.stop();
    this.commission.stop();
    await this.drivers.close();
    this.unsubscribe();
    this.watches.stop();
    this.auth.stop();
    await this.history.stop();
    await this.store.close();
  }
}

/** The drivers a running Hayloft knows. */
function driversOf(c: Config, log: Logger): DriverRegistry {
  const bacnet = new BacnetDriver({
    interface: c.bacnetInterface,
    port: c.bacnetPort,
    timeoutMs: c.bacnetTimeoutMs,
    ...(c.bacnetBroadcast === '' ? {} : { broadcastAddress: c.bacnetBroadcast }),
  });
  bacnet.log = (message) => log.info({ driver: 'bacnet' }, message);
  return new DriverRegistry([new ModbusDriver(), bacnet]);
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
