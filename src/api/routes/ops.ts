/**
 * The ops at `/api/<op>`: find the op (404), check the method (405 with Allow), pick the answer's
 * format from Accept (406), authenticate and ask the caller's gate (auth/gate.ts) for the op's permission, build the request grid
 * from the query (GET) or the body by Content-Type (415, 413), run the op, encode its grid.
 *
 * Ops are most requests, so a plain op URL is matched here without polka (`direct`): polka's
 * general path (its URL parse, a match against every route, a promise per handler) was about a
 * microsecond of a read by id's fifteen. Escaped names and unknown names go through polka's
 * `/api/:op` route, registered last so every other group's routes win.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { HGrid } from '../../haystack/values.js';
import { ErrorCodes, HayloftError } from '../../lib/errors.js';
import { quoteInput } from '../../lib/quote.js';
import type { Gate } from '../../auth/gate.js';
import { bodyText, bufferedBody, checkLength, hasBody, readBody, wholeBodyLength } from '../body.js';
import type { Codec } from '../codecs.js';
import type { ExchangeRequest, Responder } from '../exchange.js';
import { GridCache } from '../grid-cache.js';
import { type Formats, type NegotiationCache, WIDESKY_FORMATS, requestCodec, responseCodec } from '../negotiate.js';
import type { HttpMethod, Op, OpContext } from '../op.js';
import { withOpList } from '../ops/ops.js';
import { queryGrid } from '../query.js';
import type { RouteGroup, RouteKit } from '../routes.js';

function allowOf(op: Op): string {
  // HEAD is answered wherever GET is, as HTTP expects of every GET resource.
  return op.methods.flatMap((m) => (m === 'GET' ? ['GET', 'HEAD'] : [m])).join(', ');
}

export interface OpRoutes extends RouteGroup {
  /** Op names by which `/api/<name>` is served. */
  readonly names: ReadonlySet<string>;
  /** Answers a plain `/api/<op>` URL of a known op and returns true; else false (for polka). */
  direct(req: IncomingMessage, res: ServerResponse): boolean;
}

/** What sets one op API apart from another: the WideSky one at /api/ (the defaults), Haystack 4's at /haystack/. */
export interface OpRoutesOptions {
  /** The URL prefix of the ops, with both slashes: `/api/` by default. */
  prefix?: string;
  /** The formats answered and read: WideSky's by default (negotiate.ts). */
  formats?: Formats;
  /**
   * The caller's gate, in place of the kit's (bearer token): at once, or a promise; null when the
   * hook answered the request itself (a step of a login handshake). Refusals are thrown.
   */
  gate?: (req: IncomingMessage, res: ServerResponse) => Gate | Promise<Gate | null> | null;
}

export function opRoutes(ops: readonly Op[], baseCtx: OpContext, opts: OpRoutesOptions = {}): OpRoutes {
  const prefix = opts.prefix ?? '/api/';
  const formats = opts.formats ?? WIDESKY_FORMATS;
  const byName = new Map<string, Op>();
  for (const op of ops) {
    if (byName.has(op.name)) throw new HayloftError(ErrorCodes.INTERNAL, `two ops are named "${op.name}"`);
    byName.set(op.name, op);
  }
  const ctx = withOpList(baseCtx, ops);
  const negotiated: NegotiationCache = new Map();
  // Per server, as the negotiation cache: the grids of small bodies seen before (grid-cache.ts).
  const grids = new GridCache();
  // Set by routes(): the server registers every group before it serves a request.
  let kit: RouteKit | undefined;
  let respond: Responder;

  /** The format key of query strings in the grid cache (bodies are keyed by their codec). */
  const QUERY = 'query';
  const queryGridOfSearch = (_: string, search: string): HGrid => queryGrid(search);

  function decodeBody(codec: Codec, bytes: Buffer): HGrid {
    const shape = (kit as RouteKit).limits.shape;
    const fast = codec.readBytes?.(bytes, shape);
    if (fast !== undefined) return fast;
    const text = bodyText(bytes);
    return text.trim() === '' ? HGrid.empty() : (codec.read as NonNullable<Codec['read']>)(text, shape);
  }

  /** The request grid of a POST's body: at once when the body has arrived whole, else read first. */
  function bodyGrid(req: IncomingMessage, op: Op): HGrid | Promise<HGrid> {
    // Check the type before reading: no point receiving a body that cannot be decoded.
    const codec = requestCodec(req.headers['content-type'], formats);
    if (!hasBody(req)) return HGrid.empty();
    const { limits, budget } = kit as RouteKit;
    const large = op.largeBody === true;
    const max = large ? limits.maxBodyBytes : limits.maxRequestBodyBytes;
    const limitName = large ? 'maxBodyBytes' : 'maxRequestBodyBytes';
    const now = bufferedBody(req, max, limitName);
    if (now !== undefined) {
      respond.exchangeOf(req).bodyRead = true;
      return grids.grid(codec, now, decodeBody);
    }
    return readBody(req, max, { limitName, budget }).then((bytes) => grids.grid(codec, bytes, decodeBody));
  }

  /**
   * `name` is the path's segment after /api/, decoded; `search` the query string, `?` included.
   * Runs without a promise as far as it can: a GET with a known token and a synchronous op (a read,
   * most requests) is answered in the tick that read it. What must wait (a new token, a body, an
   * asynchronous op) goes on in opAfterWait and runOp.
   */
  function handleOp(req: IncomingMessage, res: ServerResponse, name: string, search: string): void {
    const x = respond.exchangeOf(req);
    x.op = 'unknown';
    // Another API's errors before negotiation (an unknown op) come in its format, not WideSky's JSON.
    if (opts.formats !== undefined) {
      try {
        x.codec = responseCodec(req.headers.accept, negotiated, formats);
      } catch {
        x.codec = formats.fallback;
      }
    }
    try {
      const op = byName.get(name);
      if (op !== undefined) x.op = op.name;
      if (op === undefined) {
        throw new HayloftError(ErrorCodes.UNKNOWN_OP, `there is no op ${quoteInput(name)}: GET ${prefix}ops lists them`);
      }
      const method = (req.method === 'HEAD' ? 'GET' : req.method) as HttpMethod;
      if (!op.methods.includes(method)) {
        res.setHeader('Allow', allowOf(op));
        throw new HayloftError(ErrorCodes.METHOD_NOT_ALLOWED, `${op.name} does not accept ${req.method}: use ${op.methods.join(' or ')}`);
      }
      x.codec = responseCodec(req.headers.accept, negotiated, formats);
      // 413 from Content-Length at once, before the token is checked or a byte of body read.
      if (method === 'POST') {
        const limits = (kit as RouteKit).limits;
        if (op.largeBody === true) checkLength(req, limits.maxBodyBytes, 'maxBodyBytes');
        else checkLength(req, limits.maxRequestBodyBytes, 'maxRequestBodyBytes');
      }
      const gate = opts.gate === undefined ? (kit as RouteKit).gate(req) : opts.gate(req, res);
      if (gate === null) return;
      if (method === 'POST' && !(gate instanceof Promise) && wholeBodyLength(req) !== undefined) {
        // A small body from a known caller (most POSTs): taken whole as it is parsed, and the op
        // run then, without a promise (exchange.ts). Permission and type first, as below.
        permit(op, gate);
        const codec = requestCodec(req.headers['content-type'], formats);
        if ((req as ExchangeRequest).takeBody((bytes) => afterBody(req, res, op, gate, codec, bytes))) return;
      }
      if (gate instanceof Promise || method !== 'GET') {
        void opAfterWait(req, res, op, method, search, gate);
        return;
      }
      permit(op, gate);
      void runOp(req, res, op, method, gate, grids.grid(QUERY, search, queryGridOfSearch));
    } catch (e) {
      respond.sendError(req, res, e);
    }
  }

  /** takeBody's continuation: runs inside Node's parser callback, so it never throws. */
  function afterBody(req: IncomingMessage, res: ServerResponse, op: Op, gate: Gate, codec: Codec, bytes: Buffer): void {
    try {
      respond.exchangeOf(req).bodyRead = true;
      // An asynchronous op's promise sends its own errors.
      void runOp(req, res, op, 'POST', gate, grids.grid(codec, bytes, decodeBody));
    } catch (e) {
      respond.sendError(req, res, e);
    }
  }

  async function opAfterWait(
    req: IncomingMessage,
    res: ServerResponse,
    op: Op,
    method: HttpMethod,
    search: string,
    pending: Gate | Promise<Gate | null>,
  ): Promise<void> {
    try {
      // One wait even for a known token: by then Node's parser has buffered a body that came in
      // the packet of its headers, and bodyGrid takes it without another.
      const gate = await pending;
      if (gate === null) return;
      // Before reading a body: no point receiving what the caller may not send.
      permit(op, gate);
      let grid = method === 'GET' ? grids.grid(QUERY, search, queryGridOfSearch) : bodyGrid(req, op);
      if (grid instanceof Promise) grid = await grid;
      const sent = runOp(req, res, op, method, gate, grid);
      if (sent !== undefined) await sent;
    } catch (e) {
      respond.sendError(req, res, e);
    }
  }

  function permit(op: Op, gate: Gate): void {
    if (op.permission !== undefined) gate.require(op.permission, op.name);
  }

  /**
   * Runs the op and sends its answer. Throws what a synchronous op throws; returns a promise only
   * when the op or the sending is asynchronous, and that promise sends its errors and never rejects.
   */
  function runOp(req: IncomingMessage, res: ServerResponse, op: Op, method: HttpMethod, gate: Gate, grid: HGrid): Promise<void> | undefined {
    const ran = op.run({ op: op.name, method, grid, ctx, gate });
    if (ran instanceof Promise) return ran.then((result) => deliver(req, res, result)).catch((e: unknown) => respond.sendError(req, res, e));
    return deliver(req, res, ran);
  }

  function deliver(req: IncomingMessage, res: ServerResponse, result: HGrid): Promise<void> | undefined {
    const codec = respond.exchangeOf(req).codec;
    const chunks = codec.chunks?.(result);
    if (chunks !== undefined) return respond.sendChunks(req, res, codec, chunks);
    respond.send(req, res, 200, codec, result);
    return undefined;
  }

  return {
    names: new Set(byName.keys()),
    routes(k) {
      kit = k;
      respond = k.respond;
      k.route('ALL', `${prefix}:op`, (req, res) => {
        const r = req as IncomingMessage & { params?: Record<string, string>; search?: string | null };
        handleOp(req, res, r.params?.op ?? '', r.search ?? '');
      });
    },
    direct(req, res) {
      const url = req.url ?? '';
      if (!url.startsWith(prefix)) return false;
      const n = prefix.length;
      const q = url.indexOf('?', n);
      const name = q < 0 ? url.slice(n) : url.slice(n, q);
      if (!byName.has(name)) return false;
      const search = q < 0 ? '' : url.slice(q);
      if (search.includes('#')) return false;
      handleOp(req, res, name, search);
      return true;
    },
  };
}
