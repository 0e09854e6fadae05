/**
 * A minimal Modbus TCP slave for benchmarks: answers FC 3 and 4 from a register array (the
 * caller changes the values), exception 2 for anything else. `onRead` sees each answered block,
 * so a benchmark can time what happens after a poll.
 */
import net from 'node:net';

export function serveRegisters(regs: Uint16Array, onRead?: (addr: number, qty: number) => void): Promise<net.Server> {
  const server = net.createServer((sock) => {
    sock.setNoDelay(true);
    let buf: Buffer = Buffer.alloc(0);
    sock.on('data', (chunk: Buffer) => {
      buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk]);
      while (buf.length >= 12 && buf.length >= 6 + buf.readUInt16BE(4)) {
        const n = 6 + buf.readUInt16BE(4);
        const tid = buf.readUInt16BE(0);
        const unit = buf[6] as number;
        const fc = buf[7] as number;
        const addr = buf.readUInt16BE(8);
        const qty = buf.readUInt16BE(10);
        buf = buf.subarray(n);
        let pdu: Buffer;
        if ((fc === 3 || fc === 4) && qty >= 1 && qty <= 125 && addr + qty <= regs.length) {
          pdu = Buffer.alloc(2 + qty * 2);
          pdu[0] = fc;
          pdu[1] = qty * 2;
          for (let i = 0; i < qty; i++) pdu.writeUInt16BE(regs[addr + i] as number, 2 + i * 2);
          onRead?.(addr, qty);
        } else pdu = Buffer.from([fc | 0x80, 2]);
        const out = Buffer.alloc(7 + pdu.length);
        out.writeUInt16BE(tid, 0);
        out.writeUInt16BE(0, 2);
        out.writeUInt16BE(pdu.length + 1, 4);
        out[6] = unit;
        pdu.copy(out, 7);
        sock.write(out);
      }
    });
    sock.on('error', () => undefined);
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

/**
 * `count` devices of `per` registers each, every register changing every second (as a busy
 * building's would); `onRead(d)` gives device d's block-read observer. `stop` ends the changes.
 */
export async function changingDevices(
  count: number,
  per: number,
  onRead?: (device: number) => (addr: number, qty: number) => void,
): Promise<{ regs: Uint16Array[]; ports: number[]; stop(): void }> {
  const regs: Uint16Array[] = [];
  const ports: number[] = [];
  for (let d = 0; d < count; d++) {
    const r = new Uint16Array(per);
    regs.push(r);
    const server = await serveRegisters(r, onRead?.(d));
    server.unref();
    ports.push((server.address() as net.AddressInfo).port);
  }
  let tick = 0;
  const ticker = setInterval(() => {
    tick++;
    for (const r of regs) for (let i = 0; i < r.length; i++) r[i] = (tick * 7 + i) % 1000;
  }, 1000);
  return { regs, ports, stop: () => clearInterval(ticker) };
}
