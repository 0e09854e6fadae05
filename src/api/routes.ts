/**
 * How route groups join the server. Each group lives in its own file under api/routes/ (or beside
 * its capability: GraphQL, sockets) and registers itself: its HTTP routes, and, when it needs the
 * node server itself (an `upgrade` listener for websockets), an `attach` hook. The server owns
 * the mechanics every route shares (exchange, metrics, error grids, draining at close).
 */
import type { BodyBudget, ServerLimits } from './guard.js';
import type http from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from '../lib/log.js';
import type { Gate } from '../auth/gate.js';
import type { AuthHttp } from './auth-http.js';
import type { Responder } from './exchange.js';

export type RouteMethod = 'GET' | 'POST' | 'PUT' | 'DELETE' | 'ALL';

/**
 * Handles one request. Throwing or rejecting is allowed: the server answers with an error grid
 * (handlers that write their own error shapes catch first).
 */
export type RouteHandler = (req: IncomingMessage, res: ServerResponse) => void | Promise<void>;

/** What a route group is given to register with and answer through. */
export interface RouteKit {
  /**
   * Adds a route (polka's path syntax). `name` labels its requests in the metrics (keep the
   * set small: it is a Prometheus label); without one they count as `other`.
   */
  route: (method: RouteMethod, path: string, handler: RouteHandler, name?: string) => void;
  respond: Responder;
  log: Logger;
  /** The token and password endpoints (auth-http.ts); null on a server without auth. */
  auth: AuthHttp | null;
  /**
   * The permission gate of a request's caller (bearer token, then X-IMPERSONATE): at once for a
   * known token, else a promise; refusals are thrown or rejected. Every route that serves data
   * asks it (auth/gate.ts); a server without auth answers Gate.OPEN.
   */
  gate: (req: IncomingMessage) => Gate | Promise<Gate>;
  /** Largest request body of the bulk-write ops, in bytes (limits.maxBodyBytes). */
  maxBodyBytes: number;
  /** Request limits (guard.ts): bodies per op, shape of grids, connections, timeouts. */
  limits: ServerLimits;
  /** Bytes of request bodies being read at once, shared by every route that reads one. */
  budget: BodyBudget;
}

export interface RouteGroup {
  /** Registers the group's routes; they win over `/api/<op>` for the same path. */
  routes?(kit: RouteKit): void;
  /**
   * Given each node server (HTTP, and HTTPS when it starts) before it listens, for an `upgrade`
   * listener: state shared by both belongs in the group, not per server.
   */
  attach?(server: http.Server, kit: RouteKit): void;
  /** At close, before requests in flight are awaited: ends long-lived connections (sockets). */
  close?(): Promise<void> | void;
}
