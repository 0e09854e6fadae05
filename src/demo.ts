/**
 * Demo mode (`hayloft serve --demo`, and `npm start`): a simulated Modbus TCP device inside the
 * process (modbus-serial's ServerTCP on 127.0.0.1) and a small site whose points poll it, so a
 * newcomer sees curVal change and history grow at once, through the same driver, poller and
 * history store a real installation uses. The device's values follow slow curves with a little
 * noise; the fan speed is a holding register anyone may write.
 */
import net from 'node:net';
import ModbusRTU from 'modbus-serial';
import { HDict, HNumber, HRef, HUri, type HVal, MARKER } from './haystack/values.js';
import type { Clock } from './lib/clock.js';
import type { Model } from './model/model.js';

const { ServerTCP } = ModbusRTU;

export interface DemoOptions {
  /** Poll time of the demo connector (default 2 s). */
  pollTime?: HNumber;
  /** hisCollectInterval of the demo's historized points (default 10 s). */
  collect?: HNumber;
  /** The demo site's zone (the server's). */
  tz: string;
}

/** A free TCP port on 127.0.0.1 (ServerTCP takes 0 as "the default port 502"). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

/** The simulated device: an air handler's sensors and fan on unit 1. */
export class DemoDevice {
  readonly port: number;
  private readonly server: InstanceType<typeof ServerTCP>;
  private readonly clock: Clock;
  private fanSpeed = 65;
  private readonly started: number;

  private constructor(port: number, clock: Clock, server: InstanceType<typeof ServerTCP>) {
    this.port = port;
    this.clock = clock;
    this.server = server;
    this.started = clock.now();
  }

  static async start(clock: Clock): Promise<DemoDevice> {
    const port = await freePort();
    // The vector refers to the device, which needs the server: build both, then wire them.
    const ref: { device?: DemoDevice } = {};
    const server = new ServerTCP(
      {
        getInputRegister: (addr: number) => (ref.device as DemoDevice).input(addr),
        getHoldingRegister: (addr: number) => (addr === 0 ? (ref.device as DemoDevice).fanSpeed : 0),
        getCoil: (addr: number) => addr === 0 && (ref.device as DemoDevice).fanSpeed > 0,
        getDiscreteInput: (addr: number) => addr === 0 && (ref.device as DemoDevice).filterAlarm(),
        setRegister: (addr: number, value: number) => {
          if (addr === 0) (ref.device as DemoDevice).fanSpeed = Math.max(0, Math.min(100, value));
        },
      },
      { host: '127.0.0.1', port, unitID: 1 },
    );
    const device = new DemoDevice(port, clock, server);
    ref.device = device;
    await new Promise<void>((resolve, reject) => {
      server.once('initialized', () => resolve());
      server.once('serverError', (e: unknown) => reject(e instanceof Error ? e : new Error(String(e))));
    });
    return device;
  }

  /** Minutes since the device started, for the curves. */
  private t(): number {
    return (this.clock.now() - this.started) / 60_000;
  }

  private noise(scale: number): number {
    return (Math.random() - 0.5) * scale;
  }

  private input(addr: number): number {
    const t = this.t();
    const supply = 16 + 2 * Math.sin(t / 7) + this.noise(0.2);
    const ret = 22 + 1.5 * Math.sin(t / 11 + 1) + this.noise(0.2);
    switch (addr) {
      case 0:
        return Math.round(supply * 10) & 0xffff; // int16, 0.1 °C
      case 1:
        return Math.round(ret * 10) & 0xffff;
      case 2:
      case 3: {
        // float32, big-endian word order: fan power in kW.
        const kw = (this.fanSpeed / 100) ** 3 * 7.5 + this.noise(0.05);
        const b = Buffer.alloc(4);
        b.writeFloatBE(Math.max(0, kw));
        return b.readUInt16BE(addr === 2 ? 0 : 2);
      }
      default:
        return 0;
    }
  }

  private filterAlarm(): boolean {
    return Math.floor(this.t() / 5) % 4 === 3;
  }

  stop(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

/** The fan speed command is writable (pointWrite moves the simulated fan), within 0-100 %. */
const FAN_SPEED_WRITE: Record<string, HVal> = { writable: MARKER, modbusWrite: 'holding:0', minVal: new HNumber(0, '%'), maxVal: new HNumber(100, '%') };

/**
 * Creates the demo site (once: a later `--demo` start keeps it and its history) and points its
 * connector at the device's current port.
 */
export async function seedDemo(model: Model, device: DemoDevice, opts: DemoOptions): Promise<void> {
  const uri = new HUri(`modbus-tcp://127.0.0.1:${device.port}`);
  const connId = model.resolveId('demoPlc');
  if (connId !== undefined) {
    await model.update([HDict.of({ id: new HRef(connId), uri })]);
    // Demo data from before writes: its fan speed becomes writable too.
    const fan = model.resolveId('demo.ahu1.fanSpeed');
    if (fan !== undefined && model.stored(fan)?.has('writable') === false) await model.update([HDict.of({ id: new HRef(fan), ...FAN_SPEED_WRITE })]);
    return;
  }
  const pollTime = opts.pollTime ?? new HNumber(2, 's');
  const collect = opts.collect ?? new HNumber(10, 's');
  const [conn] = await model.create([HDict.of({ modbusConn: MARKER, name: 'demoPlc', dis: 'Demo PLC (simulated)', uri, modbusSlave: new HNumber(1), pollTime })]);
  const [site] = await model.create([HDict.of({ site: MARKER, name: 'demo', dis: 'Demo Building', tz: opts.tz, area: new HNumber(1200, 'm²') })]);
  const siteRef = site?.get('id') as HRef;
  const [ahu] = await model.create([HDict.of({ equip: MARKER, ahu: MARKER, name: 'ahu1', dis: 'AHU 1', siteRef })]);
  const equipRef = ahu?.get('id') as HRef;
  const modbusConnRef = conn?.get('id') as HRef;
  const point = (name: string, dis: string, kind: string, modbusCur: string, extra: Record<string, HVal>): HDict =>
    HDict.of({ point: MARKER, cur: MARKER, his: MARKER, name, dis, kind, tz: opts.tz, siteRef, equipRef, modbusConnRef, modbusCur, hisCollectInterval: collect, ...extra });
  await model.create([
    point('supplyTemp', 'Supply air temperature', 'Number', 'input:0:int16', { sensor: MARKER, temp: MARKER, unit: '°C', modbusScale: new HNumber(0.1) }),
    point('returnTemp', 'Return air temperature', 'Number', 'input:1:int16', { sensor: MARKER, temp: MARKER, unit: '°C', modbusScale: new HNumber(0.1) }),
    point('fanPower', 'Fan power', 'Number', 'input:2:float32', { sensor: MARKER, power: MARKER, unit: 'kW' }),
    point('fanSpeed', 'Fan speed command', 'Number', 'holding:0', { cmd: MARKER, unit: '%', ...FAN_SPEED_WRITE }),
    point('fanRunning', 'Fan running', 'Bool', 'coil:0', { sensor: MARKER }),
    point('filterAlarm', 'Filter dirty', 'Bool', 'discrete:0', { sensor: MARKER, alarm: MARKER }),
  ]);
}
