/**
 * What keeps one client (or a few hostile ones) from exhausting the device: limits on request
 * bodies per op, a budget of body bytes read at once by all clients, a cap on connections per
 * address and the timeouts of slow clients. The server applies them; they live here so the
 * request path in server.ts stays a few comparisons long.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { ErrorCodes, HayloftError } from '../lib/errors.js';
import type { Logger } from '../lib/log.js';
import { DEFAULT_SHAPE_LIMITS, type ShapeLimits } from '../haystack/limits.js';

export interface ServerLimits {
  /** Largest body of ops marked `largeBody` (hisWrite, createRec, updateRec): Config.maxBodyBytes. */
  maxBodyBytes: number;
  /** Largest body of every other op (Config.maxRequestBodyBytes). */
  maxRequestBodyBytes: number;
  /** Bytes of bodies being read at once (Config.maxBodyBytesInFlight). */
  maxBodyBytesInFlight: number;
  /** Shape of decoded grids (Config.maxValueChars, maxCols; the depth is fixed). */
  shape: ShapeLimits;
  maxConnectionsPerAddress: number;
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  keepAliveTimeoutMs: number;
}

const MIB = 1024 * 1024;

/** The defaults of the config keys of the same names (config may not be imported here). */
export const DEFAULT_SERVER_LIMITS: ServerLimits = Object.freeze({
  maxBodyBytes: 64 * MIB,
  maxRequestBodyBytes: MIB,
  maxBodyBytesInFlight: 128 * MIB,
  shape: DEFAULT_SHAPE_LIMITS,
  maxConnectionsPerAddress: 64,
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 300_000,
  keepAliveTimeoutMs: 5_000,
});

/** Seconds a client refused for want of budget is asked to wait. */
const BUSY_RETRY_S = 2;

/**
 * The bytes of request bodies held at once. A body announced by Content-Length takes its whole
 * length before the first byte is read; a chunked one takes each chunk as it comes. What cannot
 * be taken is refused with HL_BUSY (503, Retry-After): a burst of uploads waits its turn instead
 * of growing the heap until the kernel kills the daemon.
 */
export class BodyBudget {
  private used = 0;
  constructor(readonly max: number) {}

  /** Takes `n` bytes, or throws HL_BUSY (taking nothing). */
  take(n: number): void {
    if (this.used + n > this.max) {
      throw new HayloftError(
        ErrorCodes.BUSY,
        `the server is reading ${Math.ceil(this.used / MIB)} MiB of other request bodies (maxBodyBytesInFlight ${Math.ceil(this.max / MIB)} MiB): retry in ${BUSY_RETRY_S} s`,
        { retryAfter: BUSY_RETRY_S },
      );
    }
    this.used += n;
  }

  give(n: number): void {
    this.used = Math.max(0, this.used - n);
  }

  /** Bytes taken now (metrics, tests). */
  get inUse(): number {
    return this.used;
  }
}

/**
 * Timeouts for slow clients and a cap on connections per address, on an HTTP or HTTPS server.
 * Node closes a connection whose headers (headersTimeout) or whole request (requestTimeout) take
 * too long with 408, and idle keep-alive sockets after keepAliveTimeout; its check runs every
 * second here (default 30 s) so a slowloris holds a socket for about headersTimeout, no longer.
 */
export function guardServer(server: Server, limits: ServerLimits, log: Logger): void {
  server.headersTimeout = limits.headersTimeoutMs;
  server.requestTimeout = limits.requestTimeoutMs;
  server.keepAliveTimeout = limits.keepAliveTimeoutMs;
  // No inactivity timeout on every socket (Node's `server.timeout`): Node would arm a new timer on
  // each request of a kept-alive connection, and a long op (a 60 s discover) would be cut by it.
  // A socket that sends nothing at all is answered 408 after headersTimeout (Node's connection
  // check, Node 20 and 24); clients that stop reading an answer or sending a body are cut by
  // watchStalls below.
  server.timeout = 0;
  const perAddress = new Map<string, number>();
  let refusedLogged = 0;
  server.on('connection', (socket: Socket) => {
    const addr = socket.remoteAddress ?? '';
    const n = (perAddress.get(addr) ?? 0) + 1;
    if (n > limits.maxConnectionsPerAddress) {
      // Logged at most once a minute: a flood must not flood the journal too.
      const now = performance.now();
      if (refusedLogged === 0 || now - refusedLogged > 60_000) {
        refusedLogged = now;
        log.warn({ address: addr, max: limits.maxConnectionsPerAddress }, 'too many connections from one address: new ones are closed (maxConnectionsPerAddress)');
      }
      socket.destroy();
      return;
    }
    perAddress.set(addr, n);
    socket.once('close', () => {
      const left = (perAddress.get(addr) ?? 1) - 1;
      if (left <= 0) perAddress.delete(addr);
      else perAddress.set(addr, left);
    });
  });
}

/** The connectionsCheckingInterval to build servers with, so the timeouts above bite within a second. */
export const CONNECTIONS_CHECKING_INTERVAL_MS = 1000;

/** How long a connection may hold an answer not read, or a body not sent, before it is cut. */
export function stallMsOf(limits: ServerLimits): number {
  return Math.max(limits.headersTimeoutMs, limits.keepAliveTimeoutMs) * 2;
}

/** What a stall watch remembers of a request between looks. */
interface Progress {
  /** Bytes of the answer the kernel took, and of the request Node read, at the last change. */
  sent: number;
  got: number;
  /** When they last changed, ms. */
  since: number;
}

/**
 * Cuts the connection of a request in flight whose client has stopped: bytes of its answer wait
 * to be sent and none has gone out, or its body is not all in and no byte has come, for
 * `stallMs`. Without it a client that asks for a year of history and never reads it would hold
 * the answer's buffers, and one that announces a large body and stops would hold its share of
 * the body budget, until requestTimeout (5 minutes). An op still working (nothing to send yet,
 * its request all in) is never cut, however long it takes.
 *
 * One look every `everyMs` over the requests in flight (a handful), rather than a timer per
 * request: that costs nothing per request. Returns a function that stops the watch.
 */
export function watchStalls(inFlight: Iterable<ServerResponse>, stallMs: number, log: Logger, everyMs = CONNECTIONS_CHECKING_INTERVAL_MS): () => void {
  const seen = new WeakMap<ServerResponse, Progress>();
  const timer = setInterval(() => {
    // Elapsed time, not the wall clock: a step forward must not cut live requests.
    const now = performance.now();
    for (const res of inFlight) {
      const socket = res.socket;
      if (socket === null || socket.destroyed) continue;
      const req: IncomingMessage = res.req;
      // The answer's bytes the kernel has taken: written, less what still waits (in Node or in
      // a write the kernel has not finished).
      const sent = socket.bytesWritten - socket.writableLength;
      const got = socket.bytesRead;
      const waiting = socket.writableLength > 0 || !req.complete;
      const before = seen.get(res);
      if (before === undefined || !waiting || before.sent !== sent || before.got !== got) {
        seen.set(res, { sent, got, since: now });
        continue;
      }
      if (now - before.since < stallMs) continue;
      log.info(
        { address: socket.remoteAddress, path: (req.url ?? '').split('?')[0], ms: now - before.since, unsent: socket.writableLength, bodyComplete: req.complete },
        'a client stopped reading its answer or sending its request: connection cut',
      );
      socket.destroy();
    }
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}

