#!/usr/bin/env node
/**
 * The `hayloft` command: serve, and the offline administration commands that work on the data
 * folder while the server is stopped (LevelDB's lock makes them refuse, clearly, while it runs).
 * Argument parsing is node:util's parseArgs: no dependency for a handful of flags.
 */
import { parseArgs } from 'node:util';
import { App, type AppOptions, firstRunFromEnv, productVersion } from './app.js';
import type { Bootstrap } from './auth/auth.js';
import { randomSecret } from './auth/passwords.js';
import { type Config, loadConfig, redactUplink } from './config/index.js';
import { parseFilter } from './haystack/filter.js';
import { findTimeZone, hostTimeZone } from './haystack/tz.js';
import { ErrorCodes, HayloftError, isHayloftError } from './lib/errors.js';
import { backlogReport, formatBacklog } from './sync/index.js';
import { createLogger, type Logger } from './lib/log.js';
import { SystemdNotifier } from './lib/systemd.js';

const USAGE = `usage: hayloft <command> [options]

commands:
  serve                          start the server (default command)
  check-config                   validate the configuration and print it
  version                        print the version
  user add <username> [--role <role>] [--password <pw>]
                                 add a user (role default: admin); prints a generated password
  user passwd <username> [--password <pw>]
                                 set a user's password (generated and printed when not given)
  user list | user remove <username>
  client add <clientId> [--secret <secret>] | client list | client remove <clientId>
  sync status [--points] [--json]
                                 the uplink backlog per connector (samples not yet acknowledged)

options:
  --config <file>                config file (YAML, or JSON when named *.json); also HAYLOFT_CONFIG
  -h, --help                     this text

The admin commands work on the data folder while the server is stopped.`;

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

function printBootstrap(b: Bootstrap): void {
  const lines = [
    'First start: an administrator and an OAuth2 client were created.',
    `  admin user:     ${b.adminUser}`,
    `  admin password: ${b.adminPassword ?? '(from HAYLOFT_ADMIN_PASSWORD)'}`,
    `  client id:      ${b.clientId}`,
    `  client secret:  ${b.clientSecret ?? '(from HAYLOFT_CLIENT_SECRET, or kept from before)'}`,
    'These are shown once. Log in with POST /oauth2/token (HTTP Basic client id:secret,',
    'grant_type=password). Change the password with POST /api/updatePassword.',
  ];
  const width = Math.max(...lines.map((l) => l.length));
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
  const log = createLogger({ level: cfg.logLevel });
  const app = await App.start({ config: cfg, log, firstRun: firstRunFromEnv(process.env) });
  if (app.bootstrap !== null) printBootstrap(app.bootstrap);
  log.info({ dataDir: cfg.dataDir, host: cfg.host, port: app.port, version: productVersion() }, 'Hayloft is serving');
  // Under systemd (Type=notify): READY now, watchdog keep-alives while the store is open.
  const systemd = new SystemdNotifier({ log, env: process.env, healthy: () => app.store.db.status === 'open' });
  void systemd.ready(`serving on ${cfg.host}:${app.port}`);
  let stopping = false;
  const stop = (signal: string): void => {
    if (stopping) {
      log.warn({ signal }, 'second signal: exiting at once');
      process.exit(1);
    }
    stopping = true;
    log.info({ signal }, 'stopping: finishing requests in flight');
    void systemd.stopping();
    app.stop().then(
      async () => {
        await systemd.flushed();
        log.info('stopped');
        log.flush();
        process.exitCode = 0;
      },
      (e: unknown) => {
        log.error({ err: e }, 'error while stopping');
        process.exitCode = 1;
      },
    );
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
}

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
      const report = await backlogReport({ store: app.store, model: app.model, history: app.history, config: app.config.uplink });
      process.stdout.write(values.json === true ? JSON.stringify(report, null, 2) + '\n' : formatBacklog(report, values.points === true));
    });
  } catch (e) {
    if (!isHayloftError(e, ErrorCodes.STORE_LOCKED)) throw e;
    // Counting the backlog exactly reads the data folder, which the running server holds.
    fail(`${e.message}. While it runs, each synced point shows syncStatus, syncErr and syncLast, and GET /metrics the uplink figures.`);
  }
}

async function main(argv: string[]): Promise<void> {
  const [command = 'serve', ...rest] = argv;
  switch (command) {
    case 'serve':
      return serve(argv.slice(1));
    case 'check-config': {
      const cfg = config(rest);
      // Secrets of the uplink are masked: this output ends up in terminals and tickets.
      const shown = cfg.uplink === null ? cfg : { ...cfg, uplink: redactUplink(cfg.uplink) };
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
