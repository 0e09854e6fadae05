/**
 * A TCP proxy on loopback that can cut the link (drop every connection and refuse new ones) and
 * restore it on the same port: a network cut between Hayloft and a device or a broker. The
 * Modbus flavour also records every request it forwards (unit, function code, address, quantity):
 * tests see what went on the wire without trusting the driver's word for it.
 */
import net from 'node:net';

export interface SeenRequest {
  unit: number;
  fc: number;
  addr: number;
  qty: number;
}

export class TcpProxy {
  private server: net.Server | undefined;
  private readonly sockets = new Set<net.Socket>();

  constructor(
    readonly port: number,
    private readonly target: number,
  ) {}

  static async start<P extends TcpProxy>(this: new (port: number, target: number) => P, target: number): Promise<P> {
    const p = new this(0, target);
    const port = await p.listen(0);
    return Object.assign(p, { port });
  }

  /** Sees each chunk the client sends, before it is forwarded. */
  protected observe(_client: net.Socket, _d: Buffer): void {}

  private listen(port: number): Promise<number> {
    const server = net.createServer((client) => this.accept(client));
    this.server = server;
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve((server.address() as net.AddressInfo).port));
    });
  }

  private accept(client: net.Socket): void {
    const upstream = net.connect(this.target, '127.0.0.1');
    this.sockets.add(client);
    this.sockets.add(upstream);
    client.on('data', (d: Buffer) => {
      this.observe(client, d);
      upstream.write(d);
    });
    upstream.on('data', (d: Buffer) => client.write(d));
    const end = (): void => {
      client.destroy();
      upstream.destroy();
      this.sockets.delete(client);
      this.sockets.delete(upstream);
    };
    client.on('close', end);
    upstream.on('close', end);
    client.on('error', end);
    upstream.on('error', end);
  }

  /** Drops every connection and refuses new ones (connection refused). */
  async cut(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    this.sockets.clear();
    const s = this.server;
    this.server = undefined;
    if (s !== undefined) await new Promise<void>((resolve) => s.close(() => resolve()));
  }

  /** Accepts connections again, on the same port. */
  async restore(): Promise<void> {
    if (this.server === undefined) await this.listen(this.port);
  }

  async close(): Promise<void> {
    await this.cut();
  }
}

/** Records the Modbus TCP requests it forwards. */
export class ModbusTcpProxy extends TcpProxy {
  readonly requests: SeenRequest[] = [];
  /** Bytes of a request not yet complete, per connection. */
  private readonly partial = new WeakMap<net.Socket, Buffer>();

  protected override observe(client: net.Socket, d: Buffer): void {
    let buf = Buffer.concat([this.partial.get(client) ?? Buffer.alloc(0), d]);
    while (buf.length >= 6 && buf.length >= 6 + buf.readUInt16BE(4)) {
      const n = 6 + buf.readUInt16BE(4);
      if (n >= 12) this.requests.push({ unit: buf[6] as number, fc: buf[7] as number, addr: buf.readUInt16BE(8), qty: buf.readUInt16BE(10) });
      buf = buf.subarray(n);
    }
    this.partial.set(client, buf);
  }
}
