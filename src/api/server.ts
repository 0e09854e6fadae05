/**
 * The HTTP server: the node server, its route groups and the mechanics they share (per-request
 * exchange, metrics and debug log line per request, malformed requests, draining at close).
 * What each path answers lives in the groups (api/routes/: ops, auth, health, metrics, backup;
 * GraphQL and sockets beside their capability), each registering itself through a RouteKit. A
 * plain `/api/<op>` URL is answered by the op group's `direct` before polka is consulted (ops are
 * most requests); anything else goes through polka, where the op group's `/api/:op` comes last.
 * Any error becomes an error grid with its status; an unexpected one is logged with its stack and
 * the server keeps serving.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import https from 'node:https';
import type { Duplex, Readable } from 'node:stream';
import type { IError, NextHandler, Request } from 'polka';
import type { HGrid } from '../haystack/values.js';
import { ErrorCodes, HayloftError } from '../lib/errors.js';
import type { AuthService } from '../auth/auth.js';
import { Gate } from '../auth/gate.js';
import type { Logger } from '../lib/log.js';
import type { Metrics } from '../lib/metrics.js';
import { authHttp } from './auth-http.js';
import { JSON_CODEC } from './codecs.js';
import { ExchangeRequest, InFlight, pathOf, Responder } from './exchange.js';
import { http, polka } from './node-http.js';
import { BodyBudget, CONNECTIONS_CHECKING_INTERVAL_MS, DEFAULT_SERVER_LIMITS, type ServerLimits, guardServer, stallMsOf, watchStalls } from './guard.js';
import { errorGrid } from './http-errors.js';
import type { Op, OpContext } from './op.js';
import type { RouteGroup, RouteHandler, RouteKit, RouteMethod } from './routes.js';
import { authRoutes } from './routes/auth.js';
import { backupRoutes } from './routes/backup.js';
import { type HealthReport, healthRoutes } from './routes/health.js';
import { metricsRoutes } from './routes/metrics.js';
import { opRoutes } from './routes/ops.js';
import { haystackRoutes } from './routes/haystack.js';
import { ScramServer } from '../auth/scram.js';

export type { HealthReport } from './routes/health.js';
export type { RouteGroup, RouteKit } from './routes.js';

export interface ApiServerOptions {
  ops: readonly Op[];
  /**
   * Authentication for every data operation, plus the token and updatePassword endpoints.
   * `null` serves without authentication: only for tests of the HTTP mechanics.
   */
  auth: AuthService | null;
  ctx: OpContext;
  log: Logger;
  /** Largest request body of the bulk-write ops (`largeBody`), in bytes (Config.maxBodyBytes). */
  maxBodyBytes: number;
  /** The other limits of guard.ts (Config); absent ones take DEFAULT_SERVER_LIMITS. */
  limits?: Partial<Omit<ServerLimits, 'maxBodyBytes'>>;
  /** Error grids carry `errTrace` (Config.debug). */
  debug: boolean;
  /**
   * How long close() waits for requests in flight before cutting their connections; default
   * 10 s, so a stuck request cannot hold a restart forever.
   */
  closeTimeoutMs?: number;
  /** Request counts and latency are recorded here, and `GET /metrics` serves them; absent: no metrics. */
  metrics?: Metrics;
  /** `GET /metrics` without authentication (Config.metricsOpen). */
  metricsOpen?: boolean;
  /** `GET /api/health` (no authentication): liveness and storage state; 503 when not ok. */
  health?: () => Promise<HealthReport>;
  /** `GET /api/backup` (USER_ADMIN): the bytes of a backup file, read from one snapshot. */
  /** A backup stream (the history store flushes its pending samples first). */
  backup?: () => Promise<Readable>;
  /** More route groups (GraphQL, sockets, admin calls): their routes win over `/api/<op>`. */
  groups?: readonly RouteGroup[];
}

export interface ApiServer {
  /** Starts listening; resolves with the bound port (useful with port 0). */
  listen(port: number, host: string): Promise<{ port: number }>;
  /**
   * Also serves HTTPS (TLS 1.2 and later) on this port, with the same routes; resolves with the
   * bound port. Call after listen() or alone (when plain HTTP is off).
   */
  listenTls(port: number, host: string, pair: { cert: string; key: string }): Promise<{ port: number }>;
  /** Serves another certificate to new TLS connections (a renewed one), without a restart. */
  setCertificate(pair: { cert: string; key: string }): void;
  /** Stops accepting connections and resolves once the requests in flight are answered. */
  close(): Promise<void>;
}

export function createApiServer(opts: ApiServerOptions): ApiServer {
  const { log } = opts;
  const limits: ServerLimits = { ...DEFAULT_SERVER_LIMITS, ...opts.limits, maxBodyBytes: opts.maxBodyBytes };
  const closeTimeoutMs = opts.closeTimeoutMs ?? 10_000;
  const respond = new Responder(log, opts.debug, opts.metrics);
  const inFlight = new InFlight();
  let drained: (() => void) | undefined;

  const app = polka({
    onNoMatch: (req, res) => {
      respond.sendError(req, res, new HayloftError(ErrorCodes.UNKNOWN_OP, `nothing at ${pathOf(req)}: ops are at /api/<op> (GET /api/ops lists them)`));
    },
    // Only reached if something throws outside a route's own handling (polka catches it).
    onError: (err: string | IError, req, res) => {
      respond.sendError(req, res, typeof err === 'string' ? new Error(err) : err);
    },
  });

  const ops = opRoutes(opts.ops, opts.ctx);
  const groups: RouteGroup[] = [
    authRoutes,
    healthRoutes(opts.health),
    metricsRoutes(opts.metrics, opts.metricsOpen === true),
    backupRoutes(opts.backup),
    ...(opts.groups ?? []),
    // The standard Haystack 4 API at /haystack/<op> beside the WideSky one (docs/haystack4.md).
    haystackRoutes({ ctx: opts.ctx, auth: opts.auth, scram: opts.auth === null ? null : new ScramServer(opts.auth, opts.ctx.clock) }),
    // Last: /api/:op must not shadow the routes above.
    ops,
  ];
  const budget = new BodyBudget(limits.maxBodyBytesInFlight);
  const authH =
    opts.auth === null ? null : authHttp(opts.auth, (req, e) => log.error({ err: e, reqId: respond.exchangeOf(req).id, path: pathOf(req) }, 'unexpected error in authentication'), budget);
  const kit: RouteKit = {
    route,
    respond,
    log,
    auth: authH,
    gate:
      authH === null
        ? () => Gate.OPEN
        : (req) => {
            const p = authH.principal(req);
            return p instanceof Promise ? p.then((x) => Gate.of(x)) : Gate.of(p);
          },
    maxBodyBytes: opts.maxBodyBytes,
    limits,
    budget,
  };

  function route(method: RouteMethod, path: string, handler: RouteHandler, name?: string): void {
    // A route of its own under /api/ would make an op of that name unreachable.
    if (path.startsWith('/api/') && ops.names.has(path.slice(5))) {
      throw new HayloftError(ErrorCodes.INTERNAL, `an op cannot be named "${path.slice(5)}": ${path} is a route of its own`);
    }
    const run = (req: IncomingMessage, res: ServerResponse): void => {
      if (name !== undefined) respond.exchangeOf(req).op = name;
      try {
        const done = handler(req, res);
        if (done instanceof Promise) done.catch((e: unknown) => respond.sendError(req, res, e));
      } catch (e) {
        respond.sendError(req, res, e);
      }
    };
    if (method === 'ALL') app.all(path, run);
    else app.add(method, path, run);
  }

  for (const g of groups) g.routes?.(kit);

  /**
   * Every request, before routing: counted in flight, and when its response is done (or cut off)
   * recorded in the metrics and logged (one debug line).
   */
  function track(req: IncomingMessage, res: ServerResponse): void {
    inFlight.add(respond.exchangeOf(req), res);
    // `on`, not `once`: a response closes once, and once's wrapper showed in profiles. One
    // function for every response (it finds its request and exchange), not a closure each.
    res.on('close', onClose);
  }

  function onClose(this: ServerResponse): void {
    const req = this.req;
    const x = respond.exchangeOf(req);
    const debug = log.isLevelEnabled('debug');
    inFlight.delete(x);
    opts.metrics?.request(x.op, this.statusCode, (performance.now() - x.started) / 1000);
    if (debug) log.debug(
      {
        reqId: x.id,
        method: req.method,
        path: pathOf(req),
        status: this.statusCode,
        ms: Math.round((performance.now() - x.started) * 10) / 10,
        ...(this.writableFinished ? {} : { aborted: true }),
      },
      'request',
    );
    if (respond.closing) {
      for (const s of servers()) s.closeIdleConnections();
      if (inFlight.size === 0) drained?.();
    }
  }

  const server = http.createServer({ IncomingMessage: ExchangeRequest, connectionsCheckingInterval: CONNECTIONS_CHECKING_INTERVAL_MS });
  // HTTPS, once listenTls is called: the same routes, guards and handlers as HTTP.
  let tlsServer: https.Server | undefined;
  const servers = (): Server[] => (tlsServer === undefined ? [server] : [server, tlsServer]);
  const onRequest = (req: IncomingMessage, res: ServerResponse): void => {
    track(req, res);
    // polka creates its own `next` when given none.
    if (!ops.direct(req, res)) void app.handler(req as Request, res, undefined as unknown as NextHandler);
  };
  // Malformed requests that never reach a handler (bad request line, headers over Node's
  // 16 KiB limit, a timeout): answer if the socket still can, never throw.
  const onClientError = (err: NodeJS.ErrnoException, socket: Duplex): void => {
    log.debug({ code: err.code, reason: err.message }, 'malformed HTTP request');
    // HPE_INVALID_EOF_STATE: the client ended its side mid-body (it gave up an upload already
    // answered, 413 say): there is no one left to answer.
    if (err.code === 'ECONNRESET' || err.code === 'HPE_INVALID_EOF_STATE' || !socket.writable) {
      socket.destroy();
      return;
    }
    const status = err.code === 'HPE_HEADER_OVERFLOW' ? 431 : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400;
    const body = (JSON_CODEC.write as (g: HGrid) => string)(
      errorGrid(new HayloftError(ErrorCodes.BAD_REQUEST, `malformed HTTP request (${http.STATUS_CODES[status]})`), { debug: false }),
    );
    socket.end(
      `HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  };
  function serve(s: Server): void {
    guardServer(s, limits, log);
    s.on('request', onRequest);
    s.on('clientError', onClientError);
    s.on('error', (err) => log.error({ err }, 'HTTP server error'));
    for (const g of groups) g.attach?.(s, kit);
  }
  serve(server);

  let listening = false;
  // Clients that stop reading an answer or sending a body (guard.ts), while the server listens.
  let stopStallWatch: (() => void) | undefined;

  function listenOn(s: Server, port: number, host: string, what: string): Promise<{ port: number }> {
    return new Promise((resolve, reject) => {
      const onError = (err: NodeJS.ErrnoException): void => {
        s.off('listening', onListening);
        const why = err.code === 'EADDRINUSE' ? 'the port is in use' : err.code === 'EACCES' ? 'permission denied' : err.message;
        reject(new HayloftError(ErrorCodes.LISTEN_FAILED, `cannot listen on ${host}:${port} (${what}): ${why}`, { cause: err }));
      };
      const onListening = (): void => {
        s.off('error', onError);
        listening = true;
        stopStallWatch ??= watchStalls(inFlight, stallMsOf(limits), log);
        const addr = s.address();
        const bound = typeof addr === 'object' && addr !== null ? addr.port : port;
        log.info({ host, port: bound }, `${what} server listening`);
        resolve({ port: bound });
      };
      s.once('error', onError);
      s.once('listening', onListening);
      s.listen(port, host);
    });
  }

  return {
    listen(port: number, host: string): Promise<{ port: number }> {
      return listenOn(server, port, host, 'HTTP');
    },

    listenTls(port: number, host: string, pair: { cert: string; key: string }): Promise<{ port: number }> {
      tlsServer = https.createServer({
        IncomingMessage: ExchangeRequest,
        connectionsCheckingInterval: CONNECTIONS_CHECKING_INTERVAL_MS,
        // TLS 1.0 and 1.1 are broken and deprecated (RFC 8996).
        minVersion: 'TLSv1.2',
        cert: pair.cert,
        key: pair.key,
      });
      serve(tlsServer);
      return listenOn(tlsServer, port, host, 'HTTPS');
    },

    setCertificate(pair: { cert: string; key: string }): void {
      tlsServer?.setSecureContext({ cert: pair.cert, key: pair.key, minVersion: 'TLSv1.2' });
    },

    close(): Promise<void> {
      if (!listening) return Promise.resolve();
      listening = false;
      respond.closing = true;
      // Long-lived connections (sockets) end first: they would hold the drain below.
      const groupsClosed = Promise.all(groups.map(async (g) => g.close?.())).catch((err: unknown) => log.error({ err }, 'cannot close a route group'));
      const requestsDone = new Promise<void>((resolve) => {
        if (inFlight.size === 0) resolve();
        else drained = resolve;
      });
      const serverClosed = Promise.all(servers().map((s) => new Promise<void>((resolve) => (s.listening ? s.close(() => resolve()) : resolve())))).then(() => undefined);
      // Keep-alive connections with no request in flight would otherwise hold close() open.
      for (const s of servers()) s.closeIdleConnections();
      let timer: NodeJS.Timeout | undefined;
      const timedOut = new Promise<void>((resolve) => {
        timer = setTimeout(() => {
          log.warn({ inFlight: inFlight.size }, 'requests still running at close: cutting their connections');
          for (const s of servers()) s.closeAllConnections();
          resolve();
        }, closeTimeoutMs);
        timer.unref();
      });
      return Promise.race([Promise.all([requestsDone, serverClosed, groupsClosed]), timedOut.then(() => serverClosed)]).then(() => {
        clearTimeout(timer);
        stopStallWatch?.();
        stopStallWatch = undefined;
        drained = undefined;
        respond.closing = false;
      });
    },
  };
}
