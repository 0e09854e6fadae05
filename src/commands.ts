/**
 * The `hayloft` command (loaded by cli.ts, the entry): serve, and the offline administration commands that work on the data
 * folder while the server is stopped (LevelDB's lock makes them refuse, clearly, while it runs).
 * Argument parsing is node:util's parseArgs: no dependency for a handful of flags.
 */
import { parseArgs } from 'node:util';
import type { DemoDevice } from './demo.js';
import { systemClock } from './lib/clock.js';
import { App, type AppOptions, firstRunFromEnv } from './app.js';
import { packageRoot, productVersion } from './lib/package-dir.js';
import { installPrefix, recover, update as runUpdate } from './lib/update.js';
import type { Bootstrap } from './auth/auth.js';
import { randomSecret } from './auth/passwords.js';
import { type Config, loadConfig, redactMqtt, redactSmtp, redactUplink } from './config/index.js';
import { parseFilter } from './haystack/filter.js';
import { findTimeZone, hostTimeZone } from './haystack/tz.js';
import { ErrorCodes, HayloftError, isHayloftError } from './lib/errors.js';
import { backlogReport, formatBacklog } from './sync/index.js';
import { createLogger, type Logger } from './lib/log.js';
import { SystemdNotifier } from './lib/systemd.js';
import { runtimeReport, unappliedSettings } from './lib/runtime.js';
import { settleWhenQuiet } from './lib/settle.js';
import { reachableAddresses, urlHost } from './lib/addresses.js';
import { existsSync, createReadStream, readFileSync, createWriteStream, renameSync, rmSync, statSync } from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { readBackup, restoreBackup } from './store/backup.js';
import { HDict, HRef } from './haystack/values.js';

const USAGE = `usage: hayloft <command> [options]

commands:
  serve [--demo]                 start the server (default command); --demo adds a demo site
                                 polling a simulated Modbus device (what npm start runs)
  check-config                   validate the configuration and print it
  version                        print the version
  user add <username> [--role <role>] [--password <pw>]
                                 add a user (role default: admin); prints a generated password
  user passwd <username> [--password <pw>]
                                 set a user's password (generated and printed when not given)
  user list | user remove <username>
  client add <clientId> [--secret <secret>] | client list | client remove <clientId>
  backup <file> [--url <url>] [--user <name>] [--password <pw>] [--token <token>]
                                 take a consistent backup from the running server (needs
                                 USER_ADMIN); also HAYLOFT_URL, HAYLOFT_USER, HAYLOFT_PASSWORD,
                                 HAYLOFT_TOKEN, HAYLOFT_CLIENT_ID, HAYLOFT_CLIENT_SECRET
  restore <file>                 restore a backup into the data folder, which must be empty
  sync status [--points] [--json]
                                 the uplink backlog per connector (samples not yet acknowledged)
  update <artifact> [--public-key FILE] [--health-timeout S]
                                 install a signed release artifact beside the running one, back
                                 the data folder up, switch, and roll back code and data by
                                 itself when it is not healthy in time (docs/updates.md)
  update --recover               finish or undo an interrupted update (the unit runs it before
                                 each start)
  modbus-map import <connector> <file.csv>
                                 attach a Modbus register map to a connector (id or name) as
                                 its modbusRegMap; every bad row is listed and nothing changes

options:
  --config <file>                config file (YAML, or JSON when named *.json); also HAYLOFT_CONFIG
  -h, --help                     this text

The admin commands and restore work on the data folder while the server is stopped;
backup talks to the running server.`;

function fail(message: string): never {
  process.stderr.write(`hayloft: ${message}\n`);
  process.exit(1);
}

function config(argv: readonly string[]): Config {
  return loadConfig({
    env: process.env,
    argv,
    zones: { host: () => hostTimeZone().name, known: (n) => findTimeZone(n) !== undefined },
    checkFilter: (text) => {
      try {
        parseFilter(text);
        return null;
      } catch (e) {
        return (e as Error).message;
      }
    },
  });
}

/** Where the console answers, for the first-start message (serve only). */
interface Serving {
  host: string;
  /** 0 when plain HTTP is off. */
  port: number;
  /** 0 when HTTPS is off. */
  httpsPort: number;
  /** SHA-256 fingerprint of the HTTPS certificate, and whether it is the self-signed one Hayloft made. */
  tls: { fingerprint: string; selfSigned: boolean } | null;
}

/**
 * The first start's message, printed once: where the console is and the user and password to
 * type there first (a person at a terminal reads it top down), then the programs' client.
 */
function printBootstrap(b: Bootstrap, serving?: Serving): void {
  const lines = ['Hayloft\'s first start: an administrator and an OAuth2 client for programs were created.', ''];
  if (serving !== undefined) {
    const hosts = reachableAddresses(serving.host).map(urlHost);
    lines.push('Open the console in a browser:');
    if (serving.port > 0) for (const h of hosts) lines.push(`  http://${h}:${serving.port}/`);
    if (serving.httpsPort > 0) {
      for (const h of hosts) lines.push(`  https://${h}:${serving.httpsPort}/`);
      if (serving.tls !== null) {
        lines.push(serving.tls.selfSigned ? '  (a self-signed certificate: check that the browser shows this SHA-256 fingerprint' : '  (the configured certificate, SHA-256 fingerprint');
        lines.push(`   ${serving.tls.fingerprint})`);
      }
    }
    lines.push('and log in with');
  } else {
    lines.push('Log in to the console with');
  }
  lines.push(
    `  user:      ${b.adminUser}`,
    `  password:  ${b.adminPassword ?? '(from HAYLOFT_ADMIN_PASSWORD)'}`,
    'then change the password on the System page.',
    '',
    'For programs (SCADA, WideSky clients, scripts), the OAuth2 client:',
    `  client id:      ${b.clientId}`,
    `  client secret:  ${b.clientSecret ?? '(from HAYLOFT_CLIENT_SECRET, or kept from before)'}`,
    '  POST /oauth2/token with HTTP Basic client id:secret, grant_type=password.',
    '',
    'These are shown once.',
  );
  const width = Math.min(100, Math.max(...lines.map((l) => l.length)));
  const bar = '='.repeat(width);
  process.stdout.write(`${bar}\n${lines.join('\n')}\n${bar}\n`);
}

async function withApp<T>(argv: readonly string[], log: Logger, f: (app: App) => Promise<T>): Promise<T> {
  const opts: AppOptions = { config: config(argv), log, firstRun: firstRunFromEnv(process.env) };
  const app = await App.open(opts);
  try {
    if (app.bootstrap !== null) printBootstrap(app.bootstrap);
    return await f(app);
  } finally {
    await app.stop();
  }
}

async function serve(argv: readonly string[]): Promise<void> {
  const cfg = config(argv);
  const log = createLogger({ level: cfg.logLevel, format: cfg.logFormat });
  const unapplied = unappliedSettings();
  if (unapplied !== undefined) {
    log.warn(
      { missingNodeFlags: unapplied.flags, missingMallocTunables: unapplied.tunables ?? null },
      'started without the runtime settings, and this Node cannot restart itself with them: start Hayloft with its command (bin/hayloft), or give them to node, for the memory figures of docs/performance.md',
    );
  }
  // A bug that escapes a request must not take the building's server down: log it and go on.
  process.on('unhandledRejection', (err) => log.error({ err }, 'unhandled promise rejection (a bug): logged, still serving'));
  const app = await App.start({ config: cfg, log, firstRun: firstRunFromEnv(process.env), processMetrics: true });
  if (app.bootstrap !== null) printBootstrap(app.bootstrap, { host: cfg.host, port: app.port, httpsPort: app.httpsPort, tls: app.tls === null ? null : { fingerprint: app.tls.fingerprint, selfSigned: cfg.tlsCert === null } });
  let device: DemoDevice | null = null;
  if (argv.includes('--demo')) {
    // Loaded only here: the demo's simulated device brings modbus-serial.
    const { DemoDevice, seedDemo } = await import('./demo.js');
    device = await DemoDevice.start(systemClock);
    await seedDemo(app.model, device, { tz: cfg.tz });
    log.info({ device: `modbus-tcp://127.0.0.1:${device.port}` }, 'demo mode: site "demo" polls a simulated Modbus device (try read?filter=point, hisRead of demo.ahu1.supplyTemp, and pointWrite of demo.ahu1.fanSpeed)');
  }
  log.info({ dataDir: cfg.dataDir, host: cfg.host, port: app.port, httpsPort: app.httpsPort, pid: process.pid, version: productVersion(), runtime: runtimeReport() }, 'Hayloft is serving');
  const cancelSettle = settleWhenQuiet(log);
  // Under systemd (Type=notify): READY now, watchdog keep-alives unless a part says a restart
  // would cure it (App.watchdogOk: not for a full disk, which a restart does not fix).
  const systemd = new SystemdNotifier({ log, env: process.env, pid: process.pid, healthy: () => app.watchdogOk() });
  void systemd.ready(`serving on ${cfg.host}:${app.port}`);
  let stopping = false;
  /** `code` RESTART_EXIT_CODE: a restart asked (Node Control/Reboot); systemd starts the service again. */
  const stop = (signal: string, code = 0): void => {
    if (stopping) {
      log.warn({ signal }, 'second signal: exiting at once');
      process.exit(1);
    }
    stopping = true;
    cancelSettle();
    log.info({ signal }, 'stopping: finishing requests in flight');
    void systemd.stopping();
    app.stop().then(
      async () => {
        await device?.stop();
        await systemd.flushed();
        log.info(code === RESTART_EXIT_CODE ? 'stopped: exiting for a restart' : 'stopped');
        log.flush();
        process.exitCode = code;
      },
      (e: unknown) => {
        log.error({ err: e }, 'error while stopping');
        process.exitCode = 1;
      },
    );
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
  app.onRestart = (why) => stop(`restart ${why}`, RESTART_EXIT_CODE);
}

/**
 * The exit status of a clean stop for a restart: the unit names it in SuccessExitStatus (not a
 * failure) and RestartForceExitStatus (started again), systemd/hayloft.service.
 */
export const RESTART_EXIT_CODE = 75;

async function user(args: string[], argv: readonly string[]): Promise<void> {
  const { values, positionals } = parseArgs({ args, options: { role: { type: 'string' }, password: { type: 'string' }, config: { type: 'string' } }, allowPositionals: true });
  const [sub, name] = positionals;
  const log = createLogger({ level: 'warn' });
  await withApp(argv, log, async (app) => {
    switch (sub) {
      case 'add': {
        if (name === undefined) fail('user add needs a user name');
        const pw = values.password ?? randomSecret(12);
        await app.auth.addUser(name, pw, values.role ?? 'admin');
        process.stdout.write(`user ${name} added${values.password === undefined ? `; password: ${pw}` : ''}\n`);
        return;
      }
      case 'passwd': {
        if (name === undefined) fail('user passwd needs a user name');
        const id = app.auth.userIdByName(name);
        if (id === undefined) fail(`no user "${name}"`);
        const pw = values.password ?? randomSecret(12);
        await app.auth.setPassword(id, pw);
        await app.auth.revokeUser(id, null);
        process.stdout.write(`password of ${name} set${values.password === undefined ? `: ${pw}` : ''}; its sessions were logged out\n`);
        return;
      }
      case 'list':
        for (const u of app.auth.listUsers()) process.stdout.write(`${u.username}\t${u.role ?? '-'}\t@${u.id}\n`);
        return;
      case 'remove':
        if (name === undefined) fail('user remove needs a user name');
        await app.auth.removeUser(name);
        process.stdout.write(`user ${name} removed\n`);
        return;
      default:
        fail(`unknown user command "${sub ?? ''}": use add, passwd, list or remove`);
    }
  });
}

async function client(args: string[], argv: readonly string[]): Promise<void> {
  const { values, positionals } = parseArgs({ args, options: { secret: { type: 'string' }, config: { type: 'string' } }, allowPositionals: true });
  const [sub, id] = positionals;
  const log = createLogger({ level: 'warn' });
  await withApp(argv, log, async (app) => {
    switch (sub) {
      case 'add': {
        if (id === undefined) fail('client add needs a client id');
        const secret = await app.auth.addClient(id, values.secret);
        process.stdout.write(`client ${id} added${values.secret === undefined ? `; secret: ${secret}` : ''}\n`);
        return;
      }
      case 'list':
        for (const c of await app.auth.listClients()) process.stdout.write(`${c}\n`);
        return;
      case 'remove':
        if (id === undefined) fail('client remove needs a client id');
        await app.auth.removeClient(id);
        process.stdout.write(`client ${id} removed; its sessions were logged out\n`);
        return;
      default:
        fail(`unknown client command "${sub ?? ''}": use add, list or remove`);
    }
  });
}

async function sync(args: string[], argv: readonly string[]): Promise<void> {
  const { values, positionals } = parseArgs({ args, options: { points: { type: 'boolean' }, json: { type: 'boolean' }, config: { type: 'string' } }, allowPositionals: true });
  const [sub] = positionals;
  if (sub !== 'status') fail(`unknown sync command "${sub ?? ''}": use status`);
  const log = createLogger({ level: 'warn' });
  try {
    await withApp(argv, log, async (app) => {
      const report = await backlogReport({ store: app.store, model: app.model, history: app.history, config: app.config.uplink, mqtt: app.config.mqtt });
      process.stdout.write(values.json === true ? JSON.stringify(report, null, 2) + '\n' : formatBacklog(report, values.points === true));
    });
  } catch (e) {
    if (!isHayloftError(e, ErrorCodes.STORE_LOCKED)) throw e;
    // Counting the backlog exactly reads the data folder, which the running server holds.
    fail(`${e.message}. While it runs, each synced point shows syncStatus, syncErr and syncLast, and GET /metrics the uplink figures.`);
  }
}

async function modbusMap(args: string[], argv: readonly string[]): Promise<void> {
  const { positionals } = parseArgs({ args, options: { config: { type: 'string' } }, allowPositionals: true });
  const [sub, conn, file] = positionals;
  if (sub !== 'import') fail(`unknown modbus-map command "${sub ?? ''}": use import <connector> <file.csv>`);
  if (conn === undefined || file === undefined) fail('modbus-map import needs a connector (id or name) and a CSV file');
  let csv: string;
  try {
    csv = readFileSync(file, 'utf8');
  } catch (e) {
    fail(`cannot read ${file}: ${(e as Error).message}`);
  }
  // Checked before the data folder is opened: a map with errors changes nothing.
  // Loaded here only: csv-parse is not needed by `serve`.
  const { parseRegMap } = await import('./drivers/modbus/reg-map.js');
  const entries = parseRegMap(csv);
  const log = createLogger({ level: 'warn' });
  await withApp(argv, log, async (app) => {
    const id = app.model.resolveId(conn);
    const rec = id === undefined ? undefined : app.model.stored(id);
    if (id === undefined || rec === undefined) fail(`no record "${conn}"`);
    if (!rec.has('modbusConn')) fail(`"${conn}" is not a Modbus connector (modbusConn)`);
    await app.model.update([HDict.of({ id: HRef.of(id), modbusRegMap: csv })]);
    process.stdout.write(`${entries.length} register${entries.length === 1 ? '' : 's'} attached to @${id}; learn lists them as points\n`);
  });
}

/** The running server's address: the configured port on loopback (the bind address may be 0.0.0.0). */
function localUrl(cfg: Config): string {
  const any = cfg.host === '0.0.0.0' || cfg.host === '::';
  const host = any ? '127.0.0.1' : cfg.host.includes(':') ? `[${cfg.host}]` : cfg.host;
  if (cfg.port === null) fail('plain HTTP is off (port: off): this command talks to the server over HTTP on loopback; turn port on, bound to 127.0.0.1 if need be');
  return `http://${host}:${cfg.port}`;
}

/** Network failures said in one line: the server is not there, or not at that address. */
async function call(url: string, init: RequestInit): Promise<Response> {
  try {
    return await fetch(url, init);
  } catch (e) {
    const cause = (e as { cause?: { code?: string; message?: string } }).cause;
    fail(`cannot reach Hayloft at ${new URL(url).origin}: ${cause?.code ?? cause?.message ?? (e as Error).message} (is it running? give its address with --url or HAYLOFT_URL)`);
  }
}

/** The message of a refused request: an OAuth error body or an error grid's dis. */
async function refusal(res: Response): Promise<string> {
  const text = await res.text();
  try {
    const j = JSON.parse(text) as { error_description?: string; error?: string; meta?: { dis?: string } };
    const dis = j.meta?.dis;
    return j.error_description ?? (typeof dis === 'string' ? dis.replace(/^s:/, '') : undefined) ?? j.error ?? text;
  } catch {
    return text.trim() || `HTTP ${res.status}`;
  }
}

async function backup(args: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args,
    options: {
      url: { type: 'string' },
      user: { type: 'string' },
      password: { type: 'string' },
      token: { type: 'string' },
      'client-id': { type: 'string' },
      'client-secret': { type: 'string' },
      force: { type: 'boolean' },
      config: { type: 'string' },
    },
    allowPositionals: true,
  });
  const env = process.env;
  const pick = (flag: string | undefined, name: string): string | undefined => flag ?? (env[name] === '' ? undefined : env[name]);
  const [file] = positionals;
  if (file === undefined) fail('backup needs a file name: hayloft backup <file>');
  const target = path.resolve(file);
  if (existsSync(target) && values.force !== true) fail(`${target} already exists: choose another name, or add --force to replace it`);
  const base = (pick(values.url, 'HAYLOFT_URL') ?? localUrl(config(args))).replace(/\/+$/, '');

  let token = pick(values.token, 'HAYLOFT_TOKEN');
  const loggedIn = token === undefined;
  if (token === undefined) {
    const user = pick(values.user, 'HAYLOFT_USER');
    const password = pick(values.password, 'HAYLOFT_PASSWORD');
    if (user === undefined || password === undefined) fail('a backup needs an administrator: give --user and --password (or HAYLOFT_USER and HAYLOFT_PASSWORD), or --token');
    const clientId = pick(values['client-id'], 'HAYLOFT_CLIENT_ID') ?? 'hayloft';
    const secret = pick(values['client-secret'], 'HAYLOFT_CLIENT_SECRET');
    if (secret === undefined) fail('logging in needs the OAuth2 client secret: give --client-secret or HAYLOFT_CLIENT_SECRET (and --client-id when not "hayloft")');
    const res = await call(`${base}/oauth2/token`, {
      method: 'POST',
      headers: { authorization: 'Basic ' + Buffer.from(`${encodeURIComponent(clientId)}:${encodeURIComponent(secret)}`).toString('base64'), 'content-type': 'application/json' },
      body: JSON.stringify({ grant_type: 'password', username: user, password }),
    });
    if (!res.ok) fail(`login refused (${res.status}): ${await refusal(res)}`);
    token = ((await res.json()) as { access_token: string }).access_token;
  }
  const auth = { authorization: `Bearer ${token}` };
  try {
    const res = await call(`${base}/api/backup`, { headers: auth });
    if (!res.ok || res.body === null) fail(`the server refused the backup (${res.status}): ${await refusal(res)}`);
    // Written beside the target, checked end to end, then renamed: a file with the target's
    // name is always a complete backup.
    const partial = `${target}.partial`;
    try {
      await pipeline(Readable.fromWeb(res.body as WebReadableStream<Uint8Array>), createWriteStream(partial, { mode: 0o600 }));
      const summary = await readBackup(createReadStream(partial));
      renameSync(partial, target);
      const mb = (statSync(target).size / 1024 / 1024).toFixed(1);
      process.stdout.write(`backup of ${summary.entries} entries (Hayloft ${summary.header.productVersion}, ${summary.header.createdAt}) written to ${target} (${mb} MB)\n`);
    } catch (e) {
      rmSync(partial, { force: true });
      if (e instanceof HayloftError) throw e;
      fail(`the backup was cut off: ${(e as Error).message}`);
    }
  } finally {
    // A token this command made for itself is not left valid behind it.
    if (loggedIn) await fetch(`${base}/oauth2/token`, { method: 'DELETE', headers: auth }).catch(() => undefined);
  }
}

async function restore(args: string[]): Promise<void> {
  const { positionals } = parseArgs({ args, options: { config: { type: 'string' } }, allowPositionals: true });
  const [file] = positionals;
  if (file === undefined) fail('restore needs a backup file: hayloft restore <file>');
  const source = path.resolve(file);
  if (!existsSync(source)) fail(`${source} does not exist`);
  const cfg = config(args);
  const summary = await restoreBackup(cfg.dataDir, createReadStream(source));
  process.stdout.write(
    `restored ${summary.entries} entries (backup of ${summary.header.createdAt}, Hayloft ${summary.header.productVersion}) into ${cfg.dataDir}\n` +
      'The token signing key is not part of a backup: a new one is made at the next start, so clients log in again.\n',
  );
}

async function update(args: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args,
    options: {
      'public-key': { type: 'string' },
      signature: { type: 'string' },
      'health-timeout': { type: 'string' },
      prefix: { type: 'string' },
      url: { type: 'string' },
      'stop-command': { type: 'string' },
      'start-command': { type: 'string' },
      recover: { type: 'boolean' },
      config: { type: 'string' },
    },
    allowPositionals: true,
  });
  const env = process.env;
  const prefix = values.prefix ?? installPrefix(packageRoot());
  const log = createLogger({ level: 'info' });
  if (values.recover === true) {
    // The unit's ExecStartPre: outside an install (a checkout) there is nothing to recover.
    if (prefix === null) return;
    const r = recover(path.resolve(prefix), log);
    if (r !== null) process.stdout.write(`${r.message}\n`);
    log.flush();
    return;
  }
  const [artifact] = positionals;
  if (artifact === undefined) fail('update needs a release artifact: hayloft update <hayloft-<version>-linux.tar.gz>');
  if (prefix === null) fail(`${packageRoot()} is not a release of an install (<prefix>/releases/<version>, scripts/install.sh): give --prefix`);
  const cfg = config(args);
  const timeout = Number(values['health-timeout'] ?? 120);
  if (!Number.isFinite(timeout) || timeout < 1 || timeout > 3600) fail(`--health-timeout: expected seconds from 1 to 3600, got "${values['health-timeout']}"`);
  const systemd = existsSync('/run/systemd/system');
  const stop = values['stop-command'] ?? env.HAYLOFT_UPDATE_STOP ?? (systemd ? 'systemctl stop hayloft.service' : undefined);
  const start = values['start-command'] ?? env.HAYLOFT_UPDATE_START ?? (systemd ? 'systemctl start hayloft.service' : undefined);
  if (stop === undefined || start === undefined) fail('systemd is not running here: give the commands that stop and start Hayloft (--stop-command and --start-command, or HAYLOFT_UPDATE_STOP and HAYLOFT_UPDATE_START)');
  const r = await runUpdate({
    artifact: path.resolve(artifact),
    ...(values.signature !== undefined ? { signature: path.resolve(values.signature) } : {}),
    publicKey: values['public-key'] ?? cfg.updatePublicKey,
    prefix: path.resolve(prefix),
    dataDir: cfg.dataDir,
    healthUrl: `${(values.url ?? env.HAYLOFT_URL ?? localUrl(cfg)).replace(/\/+$/, '')}/api/health`,
    healthTimeoutMs: timeout * 1000,
    service: { stop, start },
    log,
  });
  log.flush();
  process.stdout.write(`${r.message}\n`);
}

async function main(argv: string[]): Promise<void> {
  const [command = 'serve', ...rest] = argv;
  switch (command) {
    case 'serve':
      return serve(argv.slice(1));
    case 'check-config': {
      const cfg = config(rest);
      // Secrets of the uplink and the broker are masked: this output ends up in terminals and tickets.
      const shown = { ...cfg, uplink: cfg.uplink === null ? null : redactUplink(cfg.uplink), mqtt: cfg.mqtt === null ? null : redactMqtt(cfg.mqtt), smtp: cfg.smtp === null ? null : redactSmtp(cfg.smtp) };
      process.stdout.write(JSON.stringify(shown, null, 2) + '\nconfiguration is valid\n');
      return;
    }
    case 'version':
    case '--version':
      process.stdout.write(`hayloft ${productVersion()}\n`);
      return;
    case 'user':
      return user(rest, rest);
    case 'client':
      return client(rest, rest);
    case 'sync':
      return sync(rest, rest);
    case 'modbus-map':
      return modbusMap(rest, rest);
    case 'backup':
      return backup(rest);
    case 'restore':
      return restore(rest);
    case 'update':
      return update(rest);
    case '-h':
    case '--help':
    case 'help':
      process.stdout.write(USAGE + '\n');
      return;
    default:
      process.stderr.write(`hayloft: unknown command "${command}"\n\n${USAGE}\n`);
      process.exit(2);
  }
}

main(process.argv.slice(2)).catch((e: unknown) => {
  // Errors an operator can act on are one clear line; anything else keeps its stack.
  if (e instanceof HayloftError) fail(e.message);
  if (e instanceof TypeError && (e as NodeJS.ErrnoException).code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') fail(e.message);
  process.stderr.write(`hayloft: unexpected error\n${(e as Error).stack ?? String(e)}\n`);
  process.exit(1);
});
