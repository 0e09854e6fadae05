/**
 * A BBMD for tests (BACnet Annex J), on a UDP socket of its own: it keeps a foreign-device table
 * (Register-Foreign-Device answered with a BVLC-Result), and forwards a registered device's
 * Distribute-Broadcast-To-Network to the other foreign devices as Forwarded-NPDUs carrying the
 * originator's address. Given the broadcast address of its own subnet (`localBroadcast`, for
 * tests across network namespaces), it also does what a BBMD does for the devices beside it:
 * a Distribute-Broadcast-To-Network goes out on that subnet too, and a local broadcast
 * (Original-Broadcast-NPDU) heard there is forwarded to the foreign devices (a second socket,
 * bound to the broadcast address, hears them: answers must come from the BBMD's own address, which
 * a socket bound to 0.0.0.0 does not guarantee on a host with two subnets). Written from the BVLL layout rather than with a BACnet library, so it is
 * not the code Hayloft uses: BVLC type 0x81, function, 16-bit length; Forwarded-NPDU adds the
 * originating IPv4 address and port.
 */
import { createSocket, type Socket } from 'node:dgram';

const REGISTER = 0x05;
const DISTRIBUTE = 0x09;
const FORWARDED = 0x04;
const ORIGINAL_BROADCAST = 0x0b;

export class TestBbmd {
  /** `host:port` -> epoch ms when the entry lapses (TTL + 30 s, J.5.2.3). */
  readonly fdt = new Map<string, number>();
  readonly registrations: { from: string; ttl: number }[] = [];
  forwarded = 0;
  /** Registrations refused (result 0x0030) while set. */
  refuse = false;
  private sock: Socket | undefined;
  private listener: Socket | undefined;

  constructor(
    readonly host: string,
    readonly port: number,
    readonly localBroadcast?: string,
  ) {}

  async start(): Promise<void> {
    this.sock = await this.bound(this.host);
    if (this.localBroadcast !== undefined) {
      this.sock.setBroadcast(true);
      this.listener = await this.bound(this.localBroadcast);
    }
  }

  private async bound(host: string): Promise<Socket> {
    const s = createSocket('udp4');
    s.on('message', (buf, rinfo) => this.message(buf, `${rinfo.address}:${rinfo.port}`));
    await new Promise<void>((resolve, reject) => {
      s.once('error', reject);
      s.bind(this.port, host, () => resolve());
    });
    return s;
  }

  async stop(): Promise<void> {
    for (const s of [this.sock, this.listener]) if (s !== undefined) await new Promise<void>((resolve) => s.close(() => resolve()));
    this.sock = undefined;
    this.listener = undefined;
  }

  private send(buf: Buffer, to: string): void {
    const [host, port] = to.split(':');
    this.sock?.send(buf, Number(port), host);
  }

  private result(code: number, to: string): void {
    this.send(Buffer.from([0x81, 0x00, 0x00, 0x06, code >> 8, code & 0xff]), to);
  }

  private message(buf: Buffer, from: string): void {
    if (buf.length < 4 || buf[0] !== 0x81) return;
    const func = buf[1];
    if (func === REGISTER && buf.length >= 6) {
      const ttl = buf.readUInt16BE(4);
      this.registrations.push({ from, ttl });
      if (this.refuse) return this.result(0x0030, from);
      this.fdt.set(from, Date.now() + (ttl + 30) * 1000);
      return this.result(0x0000, from);
    }
    if (func === DISTRIBUTE) {
      const until = this.fdt.get(from);
      if (until === undefined || until < Date.now()) return this.result(0x0060, from); // Distribute-Broadcast-To-Network NAK
      const out = this.forwardedNpdu(buf, from);
      this.toForeignDevices(out, from);
      if (this.localBroadcast !== undefined) this.send(out, `${this.localBroadcast}:${this.port}`);
      return;
    }
    // A broadcast on the BBMD's own subnet reaches the foreign devices too.
    if (func === ORIGINAL_BROADCAST && this.localBroadcast !== undefined) this.toForeignDevices(this.forwardedNpdu(buf, from), from);
  }

  /** The NPDU of `buf` as a Forwarded-NPDU naming its originator `from`. */
  private forwardedNpdu(buf: Buffer, from: string): Buffer {
    const npdu = buf.subarray(4);
    const [a, b, c, d] = (from.split(':')[0] as string).split('.').map(Number) as [number, number, number, number];
    const out = Buffer.concat([Buffer.from([0x81, FORWARDED, 0, 0, a, b, c, d, 0, 0]), npdu]);
    out.writeUInt16BE(out.length, 2);
    out.writeUInt16BE(Number(from.split(':')[1]), 8);
    return out;
  }

  private toForeignDevices(out: Buffer, from: string): void {
    for (const fd of this.fdt.keys()) {
      if (fd === from) continue;
      this.forwarded++;
      this.send(out, fd);
    }
  }
}
