/**
 * A TCP proxy between a Modbus master and a slave that records every request it forwards
 * (unit, function code, address, quantity): tests see what went on the wire without trusting the
 * driver's word for it. It can also cut the link (drop every connection and refuse new ones).
 */
import net from 'node:net';

export interface SeenRequest {
  unit: number;
  fc: number;
  addr: number;
  qty: number;
}

export class ModbusTcpProxy {
  readonly requests: SeenRequest[] = [];
  private server: net.Server | undefined;
  private readonly sockets = new Set<net.Socket>();

  private constructor(
    readonly port: number,
    private readonly target: number,
  ) {}

  static async start(target: number): Promise<ModbusTcpProxy> {
    const p = new ModbusTcpProxy(0, target);
    const port = await p.listen(0);
    return Object.assign(p, { port });
  }

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
    let buf = Buffer.alloc(0);
    client.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      while (buf.length >= 6 && buf.length >= 6 + buf.readUInt16BE(4)) {
        const n = 6 + buf.readUInt16BE(4);
        if (n >= 12) this.requests.push({ unit: buf[6] as number, fc: buf[7] as number, addr: buf.readUInt16BE(8), qty: buf.readUInt16BE(10) });
        buf = buf.subarray(n);
      }
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
