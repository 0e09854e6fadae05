/**
 * Push of watch changes over socket.io, as WideSky serves it (docs: "Websocket subscription"):
 * path `/socket.io`, one namespace per watch (`/<watchId>`), the access token as the
 * `Authorization` query parameter (WideSky's client), header (`Bearer` optional) or the handshake's
 * `auth.token` (a browser's WebSocket can set no header; a URL would leak the token), and one
 * `pointData` event per changed point: `{id, curVal, curStatus, curErr}` in the Haystack JSON
 * encoding (`"n:21.5 °C"`, `"s:ok"`), the same row watchPoll gives, filtered by the same
 * permissions. Engine.IO 3 (socket.io-client 2.x, which the WideSky client bundles) and 4.
 *
 * Timing: the watch manager calls `changed` synchronously for every value set; ids are gathered
 * per socket (a point set twice before the flush is sent once, with its newest value) and sent
 * in one setImmediate after the poll that set them, so a whole poll cycle goes out together and
 * no event waits for a timer.
 *
 * Ends: a closed watch or an expired lease disconnects the watch's sockets; the token is checked
 * again every `authCheckMs` (expired, revoked, user gone: disconnected; changed permissions apply
 * to the next events); a socket whose unsent packets pass `maxQueued` is a slow consumer and is
 * disconnected rather than buffered without bound (it can poll, or reconnect and refresh).
 *
 * Limits: socket.io's requests are the server's like any other (server.ts, guard.ts). The
 * engine is not attached to the node servers (engine.io would take their `request` listener and
 * answer its paths before the server saw them): `/socket.io/` is a route, so its requests are
 * tracked (metrics, the drain at close), fall under the header and request timeouts and the
 * budget of bodies in flight; a polling packet whose Content-Length is over PACKET_MAX is a 413
 * before a byte is read; websocket upgrades come through the servers' `upgrade` event, past the
 * cap of connections per address. Engine.IO sessions (a polling session costs memory but holds
 * no connection) are capped per address at `maxConnectionsPerAddress` too. One engine serves
 * HTTP and HTTPS, so close() ends the sockets of both.
 *
 * The main namespace (`/`) carries nothing, but a socket.io 2 client (Engine.IO 3) is put in it
 * by the server as it connects, and any client may ask for it: it takes the same token as a
 * watch's namespace, so a client without one holds no namespace, and a session that holds none is
 * closed after `connectTimeoutMs` (socket.io's own default is 45 s).
 *
 * Metrics (`hayloft_push_*`, read at scrape time): sessions and watch sockets open, websocket
 * upgrades, pointData events sent, connections refused by error code, sockets the server ended by
 * reason. A request of the polling transport is counted with the other requests (op `push`).
 */
import type http from 'node:http';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Server as Engine, Socket as EngineSocket } from 'engine.io';
import type { Namespace, Socket } from 'socket.io';
import type { AuthService } from '../auth/auth.js';
import { type Gate, tokenGates } from '../auth/gate.js';
import { encodeVal, type JsonValue } from '../haystack/json.js';
import { HRef, type HDict } from '../haystack/values.js';
import { ErrorCodes, HayloftError, isHayloftError } from '../lib/errors.js';
import type { Logger } from '../lib/log.js';
import type { Metrics } from '../lib/metrics.js';
import type { Visible, WatchManager } from '../watch/index.js';
import { checkLength, hasBody } from './body.js';
import type { RouteGroup, RouteKit } from './routes.js';

export interface PushOptions {
  /** Null only on a server without authentication (tests of the mechanics). */
  auth: AuthService | null;
  watches: WatchManager;
  log: Logger;
  /** Packets waiting in one socket's buffer before it is dropped as a slow consumer (default 50,000). */
  maxQueued?: number;
  /** How often each socket's token is checked again, ms (default 2,000). */
  authCheckMs?: number;
  /** An Engine.IO session that has joined no namespace is closed after this, ms (default 10,000). */
  connectTimeoutMs?: number;
  /** Where its figures go (`hayloft_push_*`); absent: none. */
  metrics?: Metrics;
}

export const DEFAULT_MAX_QUEUED = 50_000;

/** Largest body of a polling request (and websocket message): clients send nothing but pings and connects. */
export const PACKET_MAX = 16 * 1024;
const PATH = '/socket.io/';

/** What one socket on one watch holds. */
class PushClient {
  readonly pending = new Set<string>();
  visible: Visible;
  unlisten: (() => void) | undefined;

  constructor(
    readonly socket: Socket,
    readonly token: string,
    readonly impersonate: string | undefined,
    public gate: Gate,
  ) {
    // What the socket may see: the gate's answer, as watchPoll asks it too.
    this.visible = gate.watchVisible();
  }
}

function tokenOf(socket: Socket): string {
  const q = socket.handshake.query.Authorization ?? socket.handshake.query.authorization;
  const auth = socket.handshake.auth as { token?: unknown } | undefined;
  const raw = typeof q === 'string' ? q : typeof auth?.token === 'string' ? auth.token : socket.handshake.headers.authorization;
  if (raw === undefined || raw === '') {
    throw new HayloftError(ErrorCodes.UNAUTHORIZED, 'authentication required: pass the access token as the Authorization query parameter or header');
  }
  return raw.startsWith('Bearer ') ? raw.slice(7).trim() : raw.trim();
}

/** A watch row as WideSky's pointData: every tag in the JSON encoding, the id without its display name. */
export function pointData(row: HDict): Record<string, JsonValue> {
  const out: Record<string, JsonValue> = {};
  for (const [k, v] of row) out[k] = k === 'id' && v instanceof HRef ? 'r:' + v.id : encodeVal(v);
  return out;
}

export function pushGroup(opts: PushOptions): RouteGroup {
  const { auth, watches, log } = opts;
  const maxQueued = opts.maxQueued ?? DEFAULT_MAX_QUEUED;
  const clients = new Set<PushClient>();
  const dirty = new Set<PushClient>();
  /** Engine.IO sessions per client address (polling and websocket): capped like connections. */
  const sessions = new Map<string, number>();
  let maxSessions = Infinity;
  const counts = { upgrades: new Map<string, number>(), events: 0, refused: new Map<string, number>(), ended: new Map<string, number>() };
  const bump = (m: Map<string, number>, k: string): void => {
    m.set(k, (m.get(k) ?? 0) + 1);
  };
  let flushing: NodeJS.Immediate | undefined;
  let checker: NodeJS.Timeout | undefined;

  const m = opts.metrics;
  if (m !== undefined) {
    const labelled = (key: string, map: ReadonlyMap<string, number>) => () => [...map].map(([k, value]) => ({ labels: { [key]: k }, value }));
    m.gauge('hayloft_push_sessions', 'Engine.IO sessions open (polling or websocket)', [], () => [...sessions.values()].reduce((a, b) => a + b, 0));
    m.gauge('hayloft_push_sockets', "Sockets connected to a watch's namespace", [], () => clients.size);
    m.counter('hayloft_push_upgrades_total', 'WebSocket upgrades asked for since start (push: to /socket.io/; refused: any other path)', () => 0, ['result'], labelled('result', counts.upgrades));
    m.counter('hayloft_push_events_total', 'pointData events sent since start', () => counts.events);
    m.counter('hayloft_push_refused_total', 'Connections refused since start, by error code (HL_* at a namespace, engine_* at the Engine.IO handshake)', () => 0, ['code'], labelled('code', counts.refused));
    m.counter('hayloft_push_disconnects_total', 'Sockets the server ended since start, by reason (auth, watch_ended, slow_consumer)', () => 0, ['reason'], labelled('reason', counts.ended));
  }

  // Who each socket's token speaks for, asked again before each batch and every authCheckMs.
  const gates = tokenGates(auth);

  function flush(): void {
    flushing = undefined;
    const batch = [...dirty];
    dirty.clear();
    for (const c of batch) {
      if (!c.socket.connected) continue;
      // The token again, before each batch: a revoked or expired one closes the socket, and
      // changed permissions apply to these events. Known tokens answer without a promise.
      const cached = c.impersonate === undefined ? gates.cached(c.token) : undefined;
      if (cached === undefined) {
        gates.of(c.token, c.impersonate).then(
          (g) => {
            adopt(c, g);
            send(c);
          },
          (e: unknown) => drop(c, isHayloftError(e) ? e.message : 'authentication failed'),
        );
        continue;
      }
      adopt(c, cached);
      send(c);
    }
  }

  function adopt(c: PushClient, g: Gate): void {
    if (g === c.gate) return;
    c.gate = g;
    c.visible = g.watchVisible();
  }

  function send(c: PushClient): void {
    if (!c.socket.connected) return;
    if (!c.gate.can('WATCH')) {
      drop(c, 'the user lost the WATCH permission');
      return;
    }
    for (const id of c.pending) c.socket.emit('pointData', pointData(watches.row(id, c.visible)));
    counts.events += c.pending.size;
    c.pending.clear();
    // The engine's buffer of packets not yet written: past the bound the client cannot keep up.
    const queued = (c.socket.conn as unknown as { writeBuffer?: unknown[] }).writeBuffer?.length ?? 0;
    if (queued > maxQueued) {
      log.warn({ watchId: c.socket.nsp.name.slice(1), queued, user: c.gate.principal.username }, 'push: slow consumer disconnected');
      bump(counts.ended, 'slow_consumer');
      c.socket.conn.close();
    }
  }

  /** Ends one socket (its namespace only: a client may multiplex several watches on one connection). */
  function drop(c: PushClient, why: string, reason: 'auth' | 'watch_ended' = 'auth'): void {
    if (!c.socket.connected) return;
    bump(counts.ended, reason);
    log.info({ watchId: c.socket.nsp.name.slice(1), user: c.gate.principal.username, why }, 'push: socket disconnected');
    c.socket.disconnect();
  }

  /** Tokens expire and sessions are revoked while a socket is open: check each again. */
  function checkTokens(): void {
    for (const c of clients) {
      gates.of(c.token, c.impersonate).then(
        (g) => {
          adopt(c, g);
          if (!g.can('WATCH')) drop(c, 'the user lost the WATCH permission');
        },
        (e: unknown) => drop(c, isHayloftError(e) ? e.message : 'authentication failed'),
      );
    }
  }

  function connectionError(e: unknown): Error & { data?: unknown } {
    const err: Error & { data?: unknown } = new Error(e instanceof Error ? e.message : String(e));
    const code = isHayloftError(e) ? e.code : ErrorCodes.INTERNAL;
    bump(counts.refused, code);
    err.data = { errCode: code };
    return err;
  }

  /** Who connects: the token (and impersonation) of the handshake, a user with WATCH. */
  async function admit(socket: Socket): Promise<PushClient> {
    const token = tokenOf(socket);
    // X-IMPERSONATE as on REST, or `auth.impersonate`: a browser's WebSocket cannot set headers.
    const imp = socket.handshake.headers['x-impersonate'];
    const fromAuth = (socket.handshake.auth as { impersonate?: unknown } | undefined)?.impersonate;
    const impersonate = typeof fromAuth === 'string' && fromAuth !== '' ? fromAuth : Array.isArray(imp) ? imp[0] : imp;
    const gate = await gates.of(token, impersonate);
    gate.require('WATCH', 'push of watch changes');
    return new PushClient(socket, token, impersonate, gate);
  }

  /** The main namespace: the same admission, and nothing is sent there. */
  function onMain(nsp: Namespace): void {
    nsp.use((socket, next) => {
      admit(socket).then(
        () => next(),
        (e: unknown) => next(connectionError(e)),
      );
    });
  }

  function onNamespace(nsp: Namespace): void {
    nsp.use((socket, next) => {
      const watchId = socket.nsp.name.slice(1);
      admit(socket)
        .then((c) => {
          if (!watches.isOpen(c.gate.principal.userId, watchId)) {
            throw new HayloftError(ErrorCodes.WATCH_NOT_FOUND, `watch "${watchId}" is unknown, closed or expired: open one with watchSub and connect to its namespace`);
          }
          (socket.data as { client?: PushClient }).client = c;
          next();
        })
        .catch((e: unknown) => next(connectionError(e)));
    });
    nsp.on('connection', (socket: Socket) => {
      const c = (socket.data as { client?: PushClient }).client as PushClient;
      const watchId = socket.nsp.name.slice(1);
      try {
        c.unlisten = watches.listen(c.gate.principal.userId, watchId, {
          changed(id) {
            c.pending.add(id);
            dirty.add(c);
            flushing ??= setImmediate(flush);
          },
          ended(why) {
            drop(c, `the watch was ${why}`, 'watch_ended');
          },
        });
      } catch {
        // Closed between the handshake and now.
        socket.disconnect();
        return;
      }
      clients.add(c);
      log.debug({ watchId, user: c.gate.principal.username }, 'push: socket connected');
      socket.on('disconnect', () => {
        clients.delete(c);
        dirty.delete(c);
        c.unlisten?.();
      });
    });
  }

  function engineOf(kit: RouteKit, EngineClass: typeof Engine): Engine {
    maxSessions = kit.limits.maxConnectionsPerAddress;
    const engine = new EngineClass({
      allowEIO3: true,
      // Clients send nothing but pings; a small bound keeps junk out.
      maxHttpBufferSize: PACKET_MAX,
      // Called for new sessions only (a handshake, polling or websocket).
      allowRequest: (req, fn) => {
        const addr = req.socket.remoteAddress ?? '';
        if ((sessions.get(addr) ?? 0) >= maxSessions) fn(`too many sessions from one address (maxConnectionsPerAddress ${maxSessions})`, false);
        else fn(null, true);
      },
    });
    // Handshakes and requests the engine refuses (a session over the cap, an unknown session id).
    engine.on('connection_error', (err: { message?: unknown }) => bump(counts.refused, `engine_${String(err.message).replace(/\W+/g, '_')}`));
    engine.on('connection', (socket: EngineSocket) => {
      const addr = socket.remoteAddress;
      sessions.set(addr, (sessions.get(addr) ?? 0) + 1);
      socket.once('close', () => {
        const left = (sessions.get(addr) ?? 1) - 1;
        if (left <= 0) sessions.delete(addr);
        else sessions.set(addr, left);
      });
    });
    return engine;
  }

  let engine: Engine | undefined;
  let loading: Promise<Engine> | undefined;

  /**
   * The engine and socket.io, loaded on the first request to the push path: the two libraries
   * are some 3.5 MiB resident that a gateway nobody subscribes to by push need not carry (issue
   * 19). Requests that arrive while they load wait for them; their bodies stay unread meanwhile.
   */
  function engineFor(kit: RouteKit): Promise<Engine> {
    loading ??= Promise.all([import('engine.io'), import('socket.io')]).then(([eio, sio]) => {
      const e = engineOf(kit, eio.Server);
      const io = new sio.Server({ serveClient: false, cleanupEmptyChildNamespaces: true, connectTimeout: opts.connectTimeoutMs ?? 10_000 });
      io.bind(e);
      onMain(io.of('/'));
      // One namespace per watch: `/<watchId>`.
      onNamespace(io.of(/^\/[^/]+$/));
      engine = e;
      return e;
    });
    return loading;
  }

  /** Runs `use` with the engine: at once once loaded, else when it is (`fail` if it cannot load). */
  function withEngine(kit: RouteKit, use: (e: Engine) => void, fail: () => void): void {
    if (engine !== undefined) {
      use(engine);
      return;
    }
    engineFor(kit).then(use, (err: unknown) => {
      log.error({ err }, 'cannot load socket.io');
      fail();
    });
  }

  return {
    routes(kit) {
      kit.route(
        'ALL',
        `${PATH}*`,
        (req, res) => {
          // A polling packet: 413 from Content-Length before reading, and its bytes under the
          // budget of bodies in flight (the whole limit for a chunked one) until it is answered.
          if (hasBody(req)) {
            checkLength(req, PACKET_MAX, 'fixed for socket.io packets');
            const n = Math.min(PACKET_MAX, Number(req.headers['content-length'] ?? PACKET_MAX) || PACKET_MAX);
            kit.budget.take(n);
            res.once('close', () => kit.budget.give(n));
          }
          withEngine(kit, (e) => e.handleRequest(req, res), () => res.destroy());
        },
        'push',
      );
      const ms = opts.authCheckMs ?? 2_000;
      checker = setInterval(checkTokens, ms);
      checker.unref();
    },
    attach(server: http.Server, kit: RouteKit) {
      // Websockets: the upgrade of a request the server parsed (headers timeout, connection cap).
      server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
        if (!(req.url ?? '').startsWith(PATH)) {
          bump(counts.upgrades, 'refused');
          socket.destroy();
        } else {
          bump(counts.upgrades, 'push');
          withEngine(kit, (e) => e.handleUpgrade(req, socket, head), () => socket.destroy());
        }
      });
    },
    close() {
      if (checker !== undefined) clearInterval(checker);
      if (flushing !== undefined) clearImmediate(flushing);
      for (const c of clients) c.unlisten?.();
      clients.clear();
      // The engine only: io.close() would close the HTTP servers, which the server closes itself.
      if (engine !== undefined) engine.close();
      else void loading?.then((e) => e.close(), () => undefined);
    },
  };
}
