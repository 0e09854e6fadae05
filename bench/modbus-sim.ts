/**
 * A minimal Modbus TCP slave for benchmarks: answers FC 3 and 4 from a register array (the
 * caller changes the values), exception 2 for anything else. `onRead` sees each answered block,
 * so a benchmark can time what happens after a poll.
 */
import { spawn } from 'node:child_process';
import net from 'node:net';
import { createInterface } from 'node:readline';
import { jsonGrid, postOp } from './harness.js';

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

/**
 * Sensor-like registers: register i of every device at second t is 200 + 30 sin(2π (t + 37 i) / 900),
 * rounded (with modbusScale 0.1, temperatures of 17-23 °C moving by 0.1 every few seconds), the
 * way a plant's analog inputs move, unlike `changingDevices` whose every value changes each second.
 */
function sensorValues(regs: Uint16Array, t: number): void {
  for (let i = 0; i < regs.length; i++) regs[i] = Math.round(200 + 30 * Math.sin((2 * Math.PI * (t + 37 * i)) / 900));
}

/**
 * `devices` Modbus TCP slaves of `per` sensor-like registers in a child process of their own (this
 * file run with --serve), so a benchmark's figures hold none of their CPU. They end when the
 * benchmark closes their stdin or exits.
 */
export async function startSensorDevices(devices: number, per: number): Promise<{ ports: number[]; stop(): void }> {
  const proc = spawn(process.execPath, [new URL(import.meta.url).pathname, '--serve', String(devices), String(per)], { stdio: ['pipe', 'pipe', 'inherit'] });
  const line = await new Promise<string>((resolve, reject) => {
    createInterface({ input: proc.stdout as NodeJS.ReadableStream }).once('line', resolve);
    proc.once('exit', (c) => reject(new Error(`the device simulator ended (${c})`)));
  });
  return {
    ports: JSON.parse(line) as number[],
    stop: () => {
      proc.stdin?.end();
      proc.kill();
    },
  };
}

async function serveSensors(devices: number, per: number): Promise<void> {
  const regs = new Uint16Array(per);
  const tick = (): void => sensorValues(regs, Math.floor(Date.now() / 1000));
  tick();
  setInterval(tick, 1000);
  const ports: number[] = [];
  for (let d = 0; d < devices; d++) ports.push(((await serveRegisters(regs)).address() as net.AddressInfo).port);
  process.stdout.write(JSON.stringify(ports) + '\n');
  process.stdin.on('end', () => process.exit(0));
  process.stdin.resume();
}

// Run as a script (`--serve <devices> <registers>`): the simulator process of startSensorDevices.
// Run with no arguments (`npm run bench` running every file) it does nothing.
if (process.argv[1] === new URL(import.meta.url).pathname && process.argv[2] === '--serve') {
  void serveSensors(Number(process.argv[3]), Number(process.argv[4]));
}

/**
 * Creates, over REST (createRec), one `modbusConn` per device port polled every `pollSeconds`
 * and `per` scaled Number points on each (holding registers 0..per-1, modbusScale 0.1, °C),
 * each collecting history every `collectSeconds`. Returns the points' ids, device by device.
 */
export async function seedPlant(base: string, token: string, ports: number[], per: number, pollSeconds = 1, collectSeconds = 1): Promise<string[]> {
  const idOf = (r: Record<string, string>): string => (r.id as string).slice(2).split(' ')[0] as string;
  const conns = ports.map((port, d) => ({ modbusConn: 'm:', name: `dev${d}`, dis: `Device ${d}`, uri: `u:modbus-tcp://127.0.0.1:${port}`, modbusSlave: 'n:1', pollTime: `n:${pollSeconds} s` }));
  const connIds = (await postOp(base, token, 'createRec', jsonGrid(conns))).rows.map(idOf);
  const ids: string[] = [];
  for (let d = 0; d < ports.length; d++) {
    const pts: object[] = [];
    for (let p = 0; p < per; p++) {
      pts.push({ point: 'm:', cur: 'm:', his: 'm:', sensor: 'm:', kind: 'Number', unit: '°C', name: `dev${d}-p${p}`, modbusConnRef: `r:${connIds[d] as string}`, modbusCur: `holding:${p}`, modbusScale: 'n:0.1', hisCollectInterval: `n:${collectSeconds} s` });
    }
    ids.push(...(await postOp(base, token, 'createRec', jsonGrid(pts))).rows.map(idOf));
  }
  return ids;
}
