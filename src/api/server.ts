/**
 * The HTTP server: `/api/<op>` to the Op objects it is given (plain op URLs directly, everything
 * else through polka's routes: token, health, metrics, backup, escaped names). Everything HTTP lives
 * here and in its helpers (negotiate, body, query, http-errors): ops receive a grid and return
 * one. The request flow: find the op (404), check the method (405 with Allow), pick the answer's
 * format from Accept (406), build the request grid from the query (GET) or the body by
 * Content-Type (415, 413), run the op, encode its grid. Any error becomes an error grid with its
 * status; an unexpected one is logged with its stack and the server keeps serving.
 */
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { Duplex, Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import polka, { type IError, type NextHandler, type Request } from 'polka';
import { HisGrid } from '../haystack/his-grid.js';
import { HGrid } from '../haystack/values.js';
import { ErrorCodes, HayloftError } from '../lib/errors.js';
import type { AuthService, Principal } from '../auth/auth.js';
import type { Logger } from '../lib/log.js';
import type { Metrics } from '../lib/metrics.js';
import { authHttp } from './auth-http.js';
import { hasBody, readBodyText } from './body.js';
import { type Codec, JSON_CODEC } from './codecs.js';
import { errorGrid, errorHeaders, statusOf } from './http-errors.js';
import { type NegotiationCache, requestCodec, responseCodec } from './negotiate.js';
import type { HttpMethod, Op, OpContext } from './op.js';
import { withOpList } from './ops/ops.js';
import { queryGrid } from './query.js';

export interface ApiServerOptions {
  ops: readonly Op[];
  /**
   * Authentication for every data operation, plus the token and updatePassword endpoints.
   * `null` serves without authentication: only for tests of the HTTP mechanics.
   */
  auth: AuthService | null;
  ctx: OpContext;
  log: Logger;
  /** Largest request body accepted, in bytes (Config.maxBodyBytes). */
  maxBodyBytes: number;
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
  backup?: () => Readable;
}

/** What `GET /api/health` answers, as JSON. */
export interface HealthReport {
  ok: boolean;
  [detail: string]: unknown;
}

export interface ApiServer {
  /** Starts listening; resolves with the bound port (useful with port 0). */
  listen(port: number, host: string): Promise<{ port: number }>;
  /** Stops accepting connections and resolves once the requests in flight are answered. */
  close(): Promise<void>;
}

/** Per-request state the server keeps on the request (no module-level state). */
interface Exchange {
  id: number;
  started: number;
  /** The format error grids are written in, once Accept has been read. */
  codec: Codec;
  /** The metrics label: an op's name, `unknown` for a path under /api/ that is none, or a route's name. */
  op: string;
}

/**
 * The server's requests: each carries its exchange in a field (the state is read several times on
 * every request's path; a field is cheaper than a WeakMap lookup).
 */
class ExchangeRequest extends http.IncomingMessage {
  exchange: Exchange | undefined = undefined;
}

function allowOf(op: Op): string {
  // HEAD is answered wherever GET is, as HTTP expects of every GET resource.
  return op.methods.flatMap((m) => (m === 'GET' ? ['GET', 'HEAD'] : [m])).join(', ');
}

function pathOf(req: IncomingMessage): string {
  const url = req.url ?? '';
  const q = url.indexOf('?');
  return q < 0 ? url : url.slice(0, q);
}

export function createApiServer(opts: ApiServerOptions): ApiServer {
  const { log, maxBodyBytes, debug } = opts;
  const byName = new Map<string, Op>();
  for (const op of opts.ops) {
    if (byName.has(op.name)) throw new HayloftError(ErrorCodes.INTERNAL, `two ops are named "${op.name}"`);
    byName.set(op.name, op);
  }
  // Routes of their own under /api/ (below): an op of the same name could never be reached.
  for (const route of ['health', 'backup', 'updatePassword']) {
    if (byName.has(route)) throw new HayloftError(ErrorCodes.INTERNAL, `an op cannot be named "${route}": /api/${route} is a route of its own`);
  }
  const ctx = withOpList(opts.ctx, opts.ops);
  const closeTimeoutMs = opts.closeTimeoutMs ?? 10_000;

  const negotiated: NegotiationCache = new Map();
  let seq = 0;
  let closing = false;
  const inFlight = new Set<ServerResponse>();
  let drained: (() => void) | undefined;

  function exchangeOf(res: ServerResponse): Exchange {
    return exchangeOfRequest(res.req);
  }

  function exchangeOfRequest(req: IncomingMessage): Exchange {
    const r = req as ExchangeRequest;
    return (r.exchange ??= { id: ++seq, started: performance.now(), codec: JSON_CODEC, op: 'other' });
  }

  function send(req: IncomingMessage, res: ServerResponse, status: number, codec: Codec, grid: HGrid): void {
    if (res.headersSent || res.destroyed) return;
    const write = codec.write ?? JSON_CODEC.write;
    // Bytes, not text: given a string, Node would join it to the header text (a copy of both, in
    // two bytes a character when the body has any non-Latin-1 character such as the ° of °C)
    // before encoding that; a Buffer goes out beside the header as it is. JSON keeps the bytes
    // of small answers, so a one-record read answered again is not encoded again.
    const body = codec.bytes !== undefined ? codec.bytes(grid) : Buffer.from((write as (g: HGrid) => string)(grid), 'utf8');
    // One writeHead with every header: cheaper than a setHeader each on the hot path.
    const headers: Record<string, string | number> = {
      'Content-Type': codec.contentType,
      'Content-Length': body.length,
      Vary: 'Accept',
    };
    // Closing, or a body not read (refused before or while reading it): end the connection
    // rather than let Node read and discard the rest of an upload nobody will use. (A request
    // without a body is not yet `complete` while its answer is written in the same tick.)
    if (closing || (!req.complete && hasBody(req))) headers.Connection = 'close';
    res.writeHead(status, headers);
    res.end(req.method === 'HEAD' ? undefined : body);
  }

  /**
   * Streams a large answer (history) in chunks with backpressure: each chunk is encoded and sent
   * while young, so a point-year never sits in memory as one 30 MB string. The status is sent
   * first; a failure after that can only cut the connection (and is logged).
   */
  async function sendChunks(req: IncomingMessage, res: ServerResponse, codec: Codec, chunks: Iterable<string>): Promise<void> {
    if (res.headersSent || res.destroyed) return;
    const headers: Record<string, string> = { 'Content-Type': codec.contentType, Vary: 'Accept' };
    if (closing) headers.Connection = 'close';
    res.writeHead(200, headers);
    if (req.method === 'HEAD') {
      res.end();
      return;
    }
    try {
      for (const chunk of chunks) {
        if (res.destroyed) return;
        if (!res.write(chunk)) {
          await new Promise<void>((resolve) => {
            const done = (): void => {
              res.off('drain', done);
              res.off('close', done);
              resolve();
            };
            res.on('drain', done);
            res.on('close', done);
          });
        }
      }
      res.end();
    } catch (e) {
      log.error({ err: e, reqId: exchangeOf(res).id, path: pathOf(req) }, 'error while streaming an answer: connection cut');
      res.destroy();
    }
  }

  function sendError(req: IncomingMessage, res: ServerResponse, e: unknown): void {
    const x = exchangeOf(res);
    const status = statusOf(e);
    opts.metrics?.errors.inc({ code: e instanceof HayloftError ? e.code : ErrorCodes.INTERNAL });
    if (status >= 500) log.error({ err: e, reqId: x.id, method: req.method, path: pathOf(req) }, 'unexpected error answering a request');
    if (res.headersSent || res.destroyed) return;
    if (e instanceof HayloftError && e.code === ErrorCodes.CANNOT_IMPERSONATE) {
      // interface.md: a deliberately brief plain answer, not a grid.
      res.statusCode = 400;
      res.setHeader('Content-Type', 'text/plain; charset=utf-8');
      res.end('Cannot impersonate');
      return;
    }
    for (const [k, v] of Object.entries(errorHeaders(e))) res.setHeader(k, v);
    // An error grid needs its meta; CSV has none, so such errors are answered in JSON.
    const codec = x.codec.carriesMeta ? x.codec : JSON_CODEC;
    try {
      send(req, res, status, codec, errorGrid(e, { debug, reqId: x.id }));
    } catch (e2) {
      log.error({ err: e2, reqId: x.id }, 'cannot write an error grid');
      send(req, res, 500, JSON_CODEC, errorGrid(e2, { debug, reqId: x.id }));
    }
  }

  async function bodyGrid(req: IncomingMessage): Promise<HGrid> {
    // Check the type before reading: no point receiving a body that cannot be decoded.
    const codec = requestCodec(req.headers['content-type']);
    if (!hasBody(req)) return HGrid.empty();
    const text = await readBodyText(req, maxBodyBytes);
    if (text.trim() === '') return HGrid.empty();
    return (codec.read as (t: string) => HGrid)(text);
  }

  /**
   * `name` is the path's segment after /api/, decoded; `search` the query string, `?` included.
   * Runs without a promise as far as it can: a GET with a known token and a synchronous op (a read,
   * most requests) is answered in the tick that read it. What must wait (a new token, a body, an
   * asynchronous op) goes on in opAfterWait and runOp.
   */
  function handleOp(req: IncomingMessage, res: ServerResponse, name: string, search: string): void {
    const x = exchangeOf(res);
    x.op = 'unknown';
    try {
      const op = byName.get(name);
      if (op !== undefined) x.op = op.name;
      if (op === undefined) {
        throw new HayloftError(ErrorCodes.UNKNOWN_OP, `there is no op "${name}": GET /api/ops lists them`);
      }
      const method = (req.method === 'HEAD' ? 'GET' : req.method) as HttpMethod;
      if (!op.methods.includes(method)) {
        res.setHeader('Allow', allowOf(op));
        throw new HayloftError(ErrorCodes.METHOD_NOT_ALLOWED, `${op.name} does not accept ${req.method}: use ${op.methods.join(' or ')}`);
      }
      x.codec = responseCodec(req.headers.accept, negotiated);
      const principal = authH === null ? null : authH.principal(req);
      if (principal instanceof Promise || method !== 'GET') {
        void opAfterWait(req, res, op, method, search, principal);
        return;
      }
      permit(op, principal);
      void runOp(req, res, op, method, principal, queryGrid(search));
    } catch (e) {
      sendError(req, res, e);
    }
  }

  async function opAfterWait(
    req: IncomingMessage,
    res: ServerResponse,
    op: Op,
    method: HttpMethod,
    search: string,
    pending: Principal | null | Promise<Principal>,
  ): Promise<void> {
    try {
      const principal = await pending;
      // Before reading a body: no point receiving what the caller may not send.
      permit(op, principal);
      const grid = method === 'GET' ? queryGrid(search) : await bodyGrid(req);
      await runOp(req, res, op, method, principal, grid);
    } catch (e) {
      sendError(req, res, e);
    }
  }

  function permit(op: Op, principal: Principal | null): void {
    if (principal !== null && op.permission !== undefined && !principal.grants.has(op.permission)) {
      throw new HayloftError(ErrorCodes.FORBIDDEN, `permission denied: ${op.name} needs ${op.permission}`);
    }
  }

  /**
   * Runs the op and sends its answer. Throws what a synchronous op throws; returns a promise only
   * when the op or the sending is asynchronous, and that promise sends its errors and never rejects.
   */
  function runOp(req: IncomingMessage, res: ServerResponse, op: Op, method: HttpMethod, principal: Principal | null, grid: HGrid): Promise<void> | undefined {
    const ran = op.run({ op: op.name, method, grid, ctx, principal });
    if (ran instanceof Promise) return ran.then((result) => deliver(req, res, result)).catch((e: unknown) => sendError(req, res, e));
    return deliver(req, res, ran);
  }

  function deliver(req: IncomingMessage, res: ServerResponse, result: HGrid): Promise<void> | undefined {
    const codec = exchangeOf(res).codec;
    if (result instanceof HisGrid && codec.chunks !== undefined) return sendChunks(req, res, codec, codec.chunks(result));
    send(req, res, 200, codec, result);
    return undefined;
  }

  async function handleHealth(req: Request, res: ServerResponse): Promise<void> {
    exchangeOf(res).op = 'health';
    try {
      const report = opts.health === undefined ? { ok: true } : await opts.health();
      const body = JSON.stringify(report);
      res.writeHead(report.ok ? 200 : 503, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body), 'Cache-Control': 'no-store' });
      res.end(body);
    } catch (e) {
      sendError(req, res, e);
    }
  }

  async function handleMetrics(req: Request, res: ServerResponse): Promise<void> {
    exchangeOf(res).op = 'metrics';
    try {
      const metrics = opts.metrics;
      if (metrics === undefined) throw new HayloftError(ErrorCodes.UNKNOWN_OP, 'metrics are not enabled on this server');
      // Any authenticated user may read them, unless the config opens them to all.
      if (opts.metricsOpen !== true && authH !== null) await authH.principal(req);
      const body = await metrics.text();
      res.writeHead(200, { 'Content-Type': metrics.contentType, 'Content-Length': Buffer.byteLength(body), 'Cache-Control': 'no-store' });
      res.end(body);
    } catch (e) {
      sendError(req, res, e);
    }
  }

  async function handleBackup(req: Request, res: ServerResponse): Promise<void> {
    const x = exchangeOf(res);
    x.op = 'backup';
    try {
      if (opts.backup === undefined) throw new HayloftError(ErrorCodes.UNKNOWN_OP, 'backups are not enabled on this server');
      if (authH !== null) {
        // A backup holds everything, users and password hashes included: USER_ADMIN over all.
        const p = await authH.principal(req);
        if (!p.grants.hasAll('USER_ADMIN')) throw new HayloftError(ErrorCodes.FORBIDDEN, 'permission denied: a backup needs USER_ADMIN');
        // Always logged: who copied the whole store, users and password hashes included.
        log.info({ reqId: x.id, user: p.username, ...(p.impersonatedBy === undefined ? {} : { impersonatedBy: p.impersonatedBy }) }, 'backup requested');
      }
      const stream = opts.backup();
      const stamp = new Date().toISOString().replace(/[:.]/g, '-');
      const headers: Record<string, string> = {
        'Content-Type': 'application/gzip',
        'Content-Disposition': `attachment; filename="hayloft-${stamp}.backup.gz"`,
        'Cache-Control': 'no-store',
      };
      if (closing) headers.Connection = 'close';
      res.writeHead(200, headers);
      await pipeline(stream, res);
      log.info({ reqId: x.id, ms: Math.round(performance.now() - x.started) }, 'backup sent');
    } catch (e) {
      if (!res.headersSent) {
        sendError(req, res, e);
        return;
      }
      // Cut mid-way (the client went away, or reading failed): the file has no end line, so
      // a restore refuses it.
      log.warn({ err: e, reqId: x.id }, 'backup not completed: connection cut');
      res.destroy();
    }
  }

  const app = polka({
    onNoMatch: (req, res) => {
      sendError(req, res, new HayloftError(ErrorCodes.UNKNOWN_OP, `nothing at ${pathOf(req)}: ops are at /api/<op> (GET /api/ops lists them)`));
    },
    // Only reached if something throws outside handleOp's own try (polka catches it).
    onError: (err: string | IError, req, res) => {
      sendError(req, res, typeof err === 'string' ? new Error(err) : err);
    },
  });


  /**
   * Every request, before routing: counted in flight, and when its response is done (or cut off)
   * recorded in the metrics and logged (one debug line).
   */
  function track(req: IncomingMessage, res: ServerResponse): void {
    exchangeOfRequest(req);
    inFlight.add(res);
    // `on`, not `once`: a response closes once, and once's wrapper showed in profiles. One
    // function for every response (it finds its request and exchange), not a closure each.
    res.on('close', onClose);
  }

  function onClose(this: ServerResponse): void {
    const req = this.req;
    const x = exchangeOfRequest(req);
    const debug = log.isLevelEnabled('debug');
    inFlight.delete(this);
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
    if (closing) {
      server.closeIdleConnections();
      if (inFlight.size === 0) drained?.();
    }
  }
  const authH =
    opts.auth === null
      ? null
      : authHttp(opts.auth, (req, e) => log.error({ err: e, reqId: exchangeOfRequest(req).id, path: pathOf(req) }, 'unexpected error in authentication'));
  if (authH !== null) {
    app.post('/oauth2/token', (req, res) => authH.token(req, res));
    app.delete('/oauth2/token', (req, res) => authH.logout(req, res));
    // The WideSky client posts to /user/updatePassword; the interface names /api/updatePassword.
    app.post('/api/updatePassword', (req, res) => authH.updatePassword(req, res));
    app.post('/user/updatePassword', (req, res) => authH.updatePassword(req, res));
  }
  // Before /api/:op: these are routes of their own, not ops (not in /api/ops).
  app.get('/api/health', handleHealth);
  app.get('/metrics', handleMetrics);
  app.get('/api/backup', handleBackup);
  app.all('/api/:op', (req, res) => handleOp(req, res, req.params.op ?? '', req.search ?? ''));

  /**
   * The op of a plain `/api/<op>` URL, found without polka: ops are most requests, and polka's
   * general path (its URL parse, a match against every route, a promise per handler) was about a
   * microsecond of a read by id's fifteen. Anything else (other routes, escapes in the path,
   * unknown names, which get polka's 404) goes through polka.
   */
  function directOp(url: string): { name: string; search: string } | undefined {
    if (!url.startsWith('/api/')) return undefined;
    const q = url.indexOf('?', 5);
    const name = q < 0 ? url.slice(5) : url.slice(5, q);
    if (!byName.has(name)) return undefined;
    const search = q < 0 ? '' : url.slice(q);
    return search.includes('#') ? undefined : { name, search };
  }

  const server = http.createServer({ IncomingMessage: ExchangeRequest });
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    track(req, res);
    const direct = directOp(req.url ?? '');
    if (direct !== undefined) handleOp(req, res, direct.name, direct.search);
    // polka creates its own `next` when given none.
    else void app.handler(req as Request, res, undefined as unknown as NextHandler);
  });
  // Malformed requests that never reach a handler (bad request line, headers over Node's
  // 16 KiB limit, a timeout): answer if the socket still can, never throw.
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    log.debug({ code: err.code, reason: err.message }, 'malformed HTTP request');
    if (err.code === 'ECONNRESET' || !socket.writable) {
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
  });
  server.on('error', (err) => log.error({ err }, 'HTTP server error'));

  let listening = false;

  return {
    listen(port: number, host: string): Promise<{ port: number }> {
      return new Promise((resolve, reject) => {
        const onError = (err: NodeJS.ErrnoException): void => {
          server.off('listening', onListening);
          const why = err.code === 'EADDRINUSE' ? 'the port is in use' : err.code === 'EACCES' ? 'permission denied' : err.message;
          reject(new HayloftError(ErrorCodes.LISTEN_FAILED, `cannot listen on ${host}:${port}: ${why}`, { cause: err }));
        };
        const onListening = (): void => {
          server.off('error', onError);
          listening = true;
          const addr = server.address();
          const bound = typeof addr === 'object' && addr !== null ? addr.port : port;
          log.info({ host, port: bound }, 'HTTP server listening');
          resolve({ port: bound });
        };
        server.once('error', onError);
        server.once('listening', onListening);
        server.listen(port, host);
      });
    },

    close(): Promise<void> {
      if (!listening) return Promise.resolve();
      listening = false;
      closing = true;
      const requestsDone = new Promise<void>((resolve) => {
        if (inFlight.size === 0) resolve();
        else drained = resolve;
      });
      const serverClosed = new Promise<void>((resolve) => server.close(() => resolve()));
      // Keep-alive connections with no request in flight would otherwise hold close() open.
      server.closeIdleConnections();
      let timer: NodeJS.Timeout | undefined;
      const timedOut = new Promise<void>((resolve) => {
        timer = setTimeout(() => {
          log.warn({ inFlight: inFlight.size }, 'requests still running at close: cutting their connections');
          server.closeAllConnections();
          resolve();
        }, closeTimeoutMs);
        timer.unref();
      });
      return Promise.race([Promise.all([requestsDone, serverClosed]), timedOut.then(() => serverClosed)]).then(() => {
        clearTimeout(timer);
        drained = undefined;
        closing = false;
      });
    },
  };
}
