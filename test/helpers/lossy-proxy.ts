/**
 * An HTTP proxy between an edge's uplink and the cloud that forwards every request, waits for the
 * cloud's whole answer, and then either relays it or drops it (destroys the client's connection):
 * the request took effect upstream but its acknowledgement is lost, which is what a flaky link
 * does to a client. A hook runs between the two, so a test can act at that exact moment (kill the
 * edge with a batch applied upstream and unacknowledged).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Exchange {
  method: string;
  path: string;
  /** The op (`hisWrite`, `read`, ...) or `token` for /oauth2/token. */
  op: string;
  /** 1 for the first request of this op, 2 for the second, ... */
  n: number;
  /** The cloud's status. */
  status: number;
  /** The request body (text). */
  body: string;
}

export type Decision = 'relay' | 'drop';

export interface ProxyOptions {
  target: string;
  /** Decides per exchange; relay by default. */
  policy?: (x: Exchange) => Decision;
  /** Runs after the cloud answered and before the answer is relayed or dropped. */
  beforeAnswer?: (x: Exchange) => Promise<void> | void;
  /** Runs once a relayed answer has been written out. */
  afterAnswer?: (x: Exchange) => Promise<void> | void;
}

export class LossyProxy {
  readonly base: string;
  readonly counts = new Map<string, number>();
  readonly dropped: Exchange[] = [];
  readonly relayed: Exchange[] = [];
  private readonly server: http.Server;
  private target: string;
  private readonly opts: ProxyOptions;

  private constructor(server: http.Server, base: string, opts: ProxyOptions) {
    this.server = server;
    this.base = base;
    this.target = opts.target.replace(/\/+$/, '');
    this.opts = opts;
  }

  static async start(opts: ProxyOptions): Promise<LossyProxy> {
    const ref: { proxy?: LossyProxy } = {};
    const server = http.createServer((req, res) => {
      void (ref.proxy as LossyProxy).handle(req, res);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    ref.proxy = new LossyProxy(server, `http://127.0.0.1:${(server.address() as AddressInfo).port}`, opts);
    return ref.proxy;
  }

  /** Points the proxy at another cloud address (a cloud restarted on another port). */
  retarget(target: string): void {
    this.target = target.replace(/\/+$/, '');
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const path = req.url ?? '/';
    const op = path.startsWith('/oauth2/token') ? 'token' : (path.split('?')[0]?.split('/').pop() ?? '');
    const n = (this.counts.get(op) ?? 0) + 1;
    this.counts.set(op, n);
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string' && k !== 'host' && k !== 'connection') headers[k] = v;
    let status: number;
    let body: Buffer;
    let resHeaders: Headers;
    try {
      const r = await fetch(this.target + path, { method: req.method ?? 'GET', headers, ...(chunks.length > 0 ? { body: Buffer.concat(chunks) } : {}) });
      status = r.status;
      resHeaders = r.headers;
      body = Buffer.from(await r.arrayBuffer());
    } catch {
      // The cloud is down: so is the proxy, as far as the edge can tell.
      req.socket.destroy();
      return;
    }
    const x: Exchange = { method: req.method ?? 'GET', path, op, n, status, body: Buffer.concat(chunks).toString('utf8') };
    await this.opts.beforeAnswer?.(x);
    if ((this.opts.policy?.(x) ?? 'relay') === 'drop') {
      this.dropped.push(x);
      req.socket.destroy();
      return;
    }
    this.relayed.push(x);
    const out: Record<string, string> = {};
    resHeaders.forEach((v, k) => {
      if (k !== 'content-length' && k !== 'transfer-encoding' && k !== 'connection' && k !== 'content-encoding') out[k] = v;
    });
    out['content-length'] = String(body.length);
    res.writeHead(status, out);
    res.end(body, () => void this.opts.afterAnswer?.(x));
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
