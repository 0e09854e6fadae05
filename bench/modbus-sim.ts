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
