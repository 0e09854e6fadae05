/**
 * Per-request state and the writing of answers, shared by every route group: the exchange a
 * request carries (id, start time, the format its errors are written in, its metrics label), and
 * `send`/`sendChunks`/`sendError`. Kept out of server.ts so route files need no server closure.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { HGrid } from '../haystack/values.js';
import { ErrorCodes, HayloftError } from '../lib/errors.js';
import type { Logger } from '../lib/log.js';
import type { Metrics } from '../lib/metrics.js';
import { drainRefused, hasBody } from './body.js';
import { type Codec, JSON_CODEC } from './codecs.js';
import { errorGrid, errorHeaders, statusOf } from './http-errors.js';
import { http } from './node-http.js';

/** Per-request state the server keeps on the request (no module-level state). */
export interface Exchange {
  id: number;
  started: number;
  /** The format error grids are written in, once Accept has been read. */
  codec: Codec;
  /** The metrics label: an op's name, `unknown` for a path under /api/ that is none, or a route's name. */
  op: string;
  /** True once the whole body was taken (bufferedBodyText), before Node marks the request complete. */
  bodyRead: boolean;
  /** Its response while it is in an InFlight list, and its neighbours there. */
  res: ServerResponse | undefined;
  prev: Exchange | undefined;
  next: Exchange | undefined;
}

/**
 * The requests being answered, in a list threaded through their exchanges: adding and removing
 * one is a few field writes. A Set of responses cost about 2 us of CPU a request (each response
 * given an identity hash, the table rebuilt as entries came and went): 6 % of a read by id's
 * throughput, in interleaved runs.
 */
export class InFlight implements Iterable<ServerResponse> {
  private head: Exchange | undefined;
  private count = 0;

  get size(): number {
    return this.count;
  }

  add(x: Exchange, res: ServerResponse): void {
    if (x.res !== undefined) return;
    x.res = res;
    x.prev = undefined;
    x.next = this.head;
    if (this.head !== undefined) this.head.prev = x;
    this.head = x;
    this.count++;
  }

  /** Removes the exchange if it is in the list; nothing otherwise. */
  delete(x: Exchange): void {
    if (x.res === undefined) return;
    if (x.prev !== undefined) x.prev.next = x.next;
    else this.head = x.next;
    if (x.next !== undefined) x.next.prev = x.prev;
    x.res = undefined;
    x.prev = undefined;
    x.next = undefined;
    this.count--;
  }

  /** The responses, newest first. Removing the current one while iterating is safe. */
  *[Symbol.iterator](): Iterator<ServerResponse> {
    let x = this.head;
    while (x !== undefined) {
      const { next, res } = x;
      if (res !== undefined) yield res;
      x = next;
    }
  }
}

/**
 * The server's requests: each carries its exchange in a field (the state is read several times on
 * every request's path; a field is cheaper than a WeakMap lookup).
 */
export class ExchangeRequest extends http.IncomingMessage {
  exchange: Exchange | undefined = undefined;
  /** Where takeBody sends the body's chunks, and null at its end; undefined: to the stream. */
  private bodySink: ((chunk: Buffer | null) => void) | undefined = undefined;

  /**
   * Hands the body to `then` whole, as Node's parser delivers it, instead of through the stream:
   * no buffering in the stream, no read, no promise. For a small body announced by Content-Length,
   * taken in the 'request' event, before a byte of it is parsed; false when it is too late (some of
   * the body is in the stream already) and the stream must be read instead. `then` runs inside
   * the parser's callback once the body is complete (the request is `complete`, its stream ended
   * empty, as a GET's) and must not throw. A client that goes away before the end never calls it.
   *
   * The body budget is not involved, as for bufferedBody: these bytes would be held by the stream
   * otherwise. Before, a POST's body went through Readable's push, read and their scheduled
   * ticks, and an async function waited for it, where a GET needs none of that: read by id over
   * POST gained 6 % (docs/performance.md).
   */
  takeBody(then: (bytes: Buffer) => void): boolean {
    if (this.complete || this.readableLength > 0 || this.readableFlowing === true) return false;
    let first: Buffer | undefined;
    let more: Buffer[] | undefined;
    this.bodySink = (chunk) => {
      if (chunk !== null) {
        if (first === undefined) first = chunk;
        else (more ??= [first]).push(chunk);
        return;
      }
      then(more !== undefined ? Buffer.concat(more) : (first ?? Buffer.alloc(0)));
    };
    return true;
  }

  override push(chunk: unknown, encoding?: BufferEncoding): boolean {
    const sink = this.bodySink;
    if (sink === undefined) return super.push(chunk, encoding);
    if (chunk !== null) {
      sink(chunk as Buffer);
      return true;
    }
    this.bodySink = undefined;
    const pushed = super.push(null);
    sink(null);
    return pushed;
  }
}

export function pathOf(req: IncomingMessage): string {
  const url = req.url ?? '';
  const q = url.indexOf('?');
  return q < 0 ? url : url.slice(0, q);
}

/** Writes answers for one server; `closing` is set while the server drains for close(). */
export class Responder {
  closing = false;
  private seq = 0;

  constructor(
    readonly log: Logger,
    private readonly debug: boolean,
    private readonly metrics: Metrics | undefined,
  ) {}

  exchangeOf(req: IncomingMessage): Exchange {
    const r = req as ExchangeRequest;
    return (r.exchange ??= { id: ++this.seq, started: performance.now(), codec: JSON_CODEC, op: 'other', bodyRead: false, res: undefined, prev: undefined, next: undefined });
  }

  send(req: IncomingMessage, res: ServerResponse, status: number, codec: Codec, grid: HGrid): void {
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
    // Closing: end the connection. A body not read (refused before or while reading it): the
    // answer goes first, then the rest is drained (body.ts). (A request without a body is not
    // yet `complete` while its answer is written in the same tick.)
    if (this.closing) headers.Connection = 'close';
    else if (!req.complete && hasBody(req) && !this.exchangeOf(req).bodyRead) drainRefused(req, res);
    res.writeHead(status, headers);
    res.end(req.method === 'HEAD' ? undefined : body);
  }

  /** A JSON answer that is not a grid (health, GraphQL, admin calls): never cached. */
  sendJson(res: ServerResponse, status: number, body: unknown, contentType = 'application/json'): void {
    if (res.headersSent || res.destroyed) return;
    const bytes = Buffer.from(typeof body === 'string' ? body : JSON.stringify(body), 'utf8');
    const headers: Record<string, string | number> = { 'Content-Type': contentType, 'Content-Length': bytes.length, 'Cache-Control': 'no-store' };
    if (this.closing) headers.Connection = 'close';
    res.writeHead(status, headers);
    res.end(res.req.method === 'HEAD' ? undefined : bytes);
  }

  /**
   * Streams a large answer (history) in chunks with backpressure: each chunk is encoded and sent
   * while young, so a point-year never sits in memory as one 30 MB string. The status is sent
   * first; a failure after that can only cut the connection (and is logged).
   */
  async sendChunks(req: IncomingMessage, res: ServerResponse, codec: Codec, chunks: Iterable<string | Uint8Array>): Promise<void> {
    if (res.headersSent || res.destroyed) return;
    const headers: Record<string, string> = { 'Content-Type': codec.contentType, Vary: 'Accept' };
    if (this.closing) headers.Connection = 'close';
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
      this.log.error({ err: e, reqId: this.exchangeOf(req).id, path: pathOf(req) }, 'error while streaming an answer: connection cut');
      res.destroy();
    }
  }

  sendError(req: IncomingMessage, res: ServerResponse, e: unknown): void {
    const x = this.exchangeOf(req);
    const status = statusOf(e);
    this.metrics?.errors.inc({ code: e instanceof HayloftError ? e.code : ErrorCodes.INTERNAL });
    if (status >= 500) this.log.error({ err: e, reqId: x.id, method: req.method, path: pathOf(req) }, 'unexpected error answering a request');
    if (res.headersSent || res.destroyed) return;
    if (e instanceof HayloftError && e.code === ErrorCodes.CANNOT_IMPERSONATE) {
      // docs/spec/interface.md: a deliberately brief plain answer, not a grid.
      res.statusCode = 400;
      res.setHeader('Content-Type', 'text/plain; charset=utf-8');
      res.end('Cannot impersonate');
      return;
    }
    for (const [k, v] of Object.entries(errorHeaders(e))) res.setHeader(k, v);
    // An error grid needs its meta; CSV has none, so such errors are answered in JSON.
    const codec = x.codec.carriesMeta ? x.codec : JSON_CODEC;
    try {
      this.send(req, res, status, codec, errorGrid(e, { debug: this.debug, reqId: x.id }));
    } catch (e2) {
      this.log.error({ err: e2, reqId: x.id }, 'cannot write an error grid');
      this.send(req, res, 500, JSON_CODEC, errorGrid(e2, { debug: this.debug, reqId: x.id }));
    }
  }
}
