/**
 * The Modbus driver: Modbus TCP and RTU masters (modbus-serial) reading coils, discrete inputs,
 * input and holding registers.
 *
 * Connector tags: `modbusConn`, `uri` (see uri.ts), `modbusSlave` (unit id, 0-255: 255 and 0 are
 * what many TCP devices answer to), optional `timeout` (Number with a time unit, default 3 s).
 * Point tags: `modbusCur` (see address.ts), optional `modbusScale` and `modbusOffset`
 * (value = raw × scale + offset, for numeric types).
 *
 * Values are the decimals they are (src/lib/decimal.ts): a float32 register gives the shortest
 * decimal that is the same float32 (21.3, not 21.299999237060547), and a scaled value is rounded
 * to the digits its scale and offset imply (7 × 0.1 is 0.7, not 0.7000000000000001; a scale that
 * is no short decimal, such as 1/3, keeps two digits finer than one raw step). History stores
 * such values in its compact decimal codec, and clients see what the device meant.
 *
 * Writes: `modbusWrite`, the same grammar as `modbusCur`, `holding` or `coil` only (the other
 * tables are read-only in Modbus). Scale and offset are inverted (raw = (value - offset) / scale).
 * A coil is written with function 5, one register with function 6, a value of several registers
 * (int32, float32 ...) with one function 16, so the device never holds half a value. Modbus has
 * no priorities: relinquishing (null) writes nothing.
 *
 * Block reads: the points of one read are grouped by table and merged into requests over
 * contiguous (or overlapping) addresses of at most 100 registers or 2000 bits. When a device
 * refuses a block (exception 1, 2 or 3: a register in it does not exist), the block's points are
 * read one by one from then on, so one bad address costs its own point a fault and nothing else.
 */
import type { HDict } from '../../haystack/values.js';
import type { HayloftError } from '../../lib/errors.js';
import {
  type ConnSpec,
  type Driver,
  type DriverConn,
  type PointRead,
  type PointSpec,
  type PreparedPoint,
  type PreparedWrite,
  type RawValue,
  configError,
  downError,
  refusedError,
} from '../driver.js';
import { DecimalScale, float32Decimal, fractionDigits } from '../../lib/decimal.js';
import { durationTag, intTag, numberTag, uriTag } from '../tags.js';
import { type ModbusAddress, type Table, decodeRegisters, encodeRegisters, isBitTable, parseModbusCur, unencodable } from './address.js';
import { MODBUS_TAGS } from './info.js';
import { ModbusException, ModbusLink, type ReadFunction, type WriteRequest } from './link.js';
import { type LinkSpec, linkKey, parseModbusUri } from './uri.js';

export interface ModbusDriverOptions {
  /** Request timeout when a connector has no `timeout` tag. */
  timeoutMs?: number;
  /** Most registers in one request (the issue's limit; the protocol allows 125). */
  maxRegisters?: number;
  /** Most bits in one request (the protocol's limit). */
  maxBits?: number;
}

export const MODBUS_DEFAULT_TIMEOUT_MS = 3000;

const FC: Readonly<Record<Table, ReadFunction>> = { coil: 1, discrete: 2, holding: 3, input: 4 };

/** Exceptions that say the request names something the device does not have: a fault, not an outage. */
const REFUSALS = new Set([1, 2, 3]);

interface ModbusPoint extends PreparedPoint {
  readonly conn: ModbusConn;
  readonly addr: ModbusAddress;
  readonly scale: DecimalScale;
}

interface ModbusWrite extends PreparedWrite {
  readonly conn: ModbusConn;
  readonly addr: ModbusAddress;
  readonly scale: number;
  readonly offset: number;
  readonly text: string;
}

interface Block {
  readonly table: Table;
  readonly start: number;
  readonly count: number;
  /** Positions in the read's points array. */
  readonly members: readonly number[];
  /** Set once the device refused the block as a whole: its points are read one by one. */
  split: boolean;
}

/** A register value as the point holds it: float32 as its shortest decimal, then scaled. */
function scaled(p: ModbusPoint, v: number | boolean): number | boolean {
  if (typeof v === 'boolean') return v;
  const type = p.addr.type;
  if (type === 'float32') v = float32Decimal(v);
  if (p.scale.identity) return v;
  // Integer registers have no fractional digits; a float's own digits add to the scale's.
  return p.scale.apply(v, type === 'float32' || type === 'float64' ? fractionDigits(v) : 0);
}

class ModbusConn implements DriverConn {
  private readonly plans = new WeakMap<readonly PreparedPoint[], Block[]>();
  private closed = false;

  constructor(
    private readonly driver: ModbusDriver,
    readonly id: string,
    private readonly link: ModbusLink,
    private readonly unit: number,
    private readonly timeoutMs: number,
  ) {}

  prepare(point: PointSpec): ModbusPoint {
    const cur = point.tags.get('modbusCur');
    if (typeof cur !== 'string') throw configError('modbusCur is missing (a Str such as "holding:10:float32")');
    const addr = parseModbusCur(cur);
    const scale = numberTag(point.tags, 'modbusScale', 1);
    const offset = numberTag(point.tags, 'modbusOffset', 0);
    if (addr.type === 'bool' && (scale !== 1 || offset !== 0)) throw configError('modbusScale and modbusOffset apply to numeric types, not bool');
    return { id: point.id, conn: this, addr, scale: new DecimalScale(scale, offset) };
  }

  prepareWrite(point: PointSpec): ModbusWrite {
    const w = point.tags.get('modbusWrite');
    if (typeof w !== 'string') throw configError('modbusWrite is missing (a Str such as "holding:10:float32" or "coil:3")');
    const addr = parseModbusCur(w, 'modbusWrite');
    if (addr.table !== 'holding' && addr.table !== 'coil') {
      throw configError(`modbusWrite "${w}": a ${addr.table === 'input' ? 'input register' : 'discrete input'} is read-only; write a holding register or a coil`);
    }
    const scale = numberTag(point.tags, 'modbusScale', 1);
    const offset = numberTag(point.tags, 'modbusOffset', 0);
    if (scale === 0) throw configError('modbusScale 0 cannot be inverted for writing');
    if (addr.type === 'bool' && (scale !== 1 || offset !== 0)) throw configError('modbusScale and modbusOffset apply to numeric types, not bool');
    return { id: point.id, conn: this, addr, scale, offset, text: w };
  }

  async write(point: PreparedWrite, val: RawValue | null): Promise<void> {
    if (this.closed) throw downError('the connection is closed');
    const p = point as ModbusWrite;
    if (p.conn !== this) throw new Error(`point ${p.id} was prepared by another connection`);
    // No priorities in Modbus: relinquishing leaves the device's last value.
    if (val === null) return;
    if (typeof val === 'string') throw configError(`modbusWrite ${p.text}: a Str cannot be written to a ${p.addr.table}`);
    const a = p.addr;
    let req: WriteRequest;
    if (a.table === 'coil') req = { fc: 5, addr: a.address, value: typeof val === 'boolean' ? val : val !== 0 };
    else {
      const raw = typeof val === 'boolean' ? (val ? 1 : 0) : (val - p.offset) / p.scale;
      const why = unencodable(a, raw);
      if (why !== undefined) throw configError(`modbusWrite ${p.text}: ${why}${p.scale !== 1 || p.offset !== 0 ? ` (${String(val)} unscaled)` : ''}`);
      const words = encodeRegisters(a, raw);
      req = words.length === 1 ? { fc: 6, addr: a.address, value: words[0] as number } : { fc: 16, addr: a.address, values: words };
    }
    try {
      await this.link.write(this.unit, req, this.timeoutMs);
    } catch (e) {
      if (!(e instanceof ModbusException)) throw this.asDown(e);
      const what = a.size > 1 ? `${a.table} ${a.address}..${a.address + a.size - 1}` : `${a.table} ${a.address}`;
      throw refusedError(`unit ${this.unit} refused the write of ${what}: ${e.message}`, e);
    }
  }

  async read(points: readonly PreparedPoint[]): Promise<PointRead[]> {
    if (this.closed) throw downError('the connection is closed');
    let plan = this.plans.get(points);
    if (plan === undefined) {
      plan = this.plan(points as readonly ModbusPoint[]);
      this.plans.set(points, plan);
    }
    const out = new Array<PointRead>(points.length);
    for (const b of plan) {
      if (b.split) {
        for (const i of b.members) await this.readOne(points as readonly ModbusPoint[], i, out);
        continue;
      }
      try {
        const ans = await this.link.read(this.unit, FC[b.table], b.start, b.count, this.timeoutMs);
        for (const i of b.members) out[i] = this.decode(points[i] as ModbusPoint, b.start, ans.data, ans.buffer);
      } catch (e) {
        if (!(e instanceof ModbusException) || !REFUSALS.has(e.code)) throw this.asDown(e);
        if (b.members.length === 1) {
          out[b.members[0] as number] = { err: this.refusal(points[b.members[0] as number] as ModbusPoint, e) };
          continue;
        }
        b.split = true;
        for (const i of b.members) await this.readOne(points as readonly ModbusPoint[], i, out);
      }
    }
    return out;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.driver.release(this.link);
  }

  private async readOne(points: readonly ModbusPoint[], i: number, out: PointRead[]): Promise<void> {
    const p = points[i] as ModbusPoint;
    try {
      const ans = await this.link.read(this.unit, FC[p.addr.table], p.addr.address, p.addr.size, this.timeoutMs);
      out[i] = this.decode(p, p.addr.address, ans.data, ans.buffer);
    } catch (e) {
      if (!(e instanceof ModbusException) || !REFUSALS.has(e.code)) throw this.asDown(e);
      out[i] = { err: this.refusal(p, e) };
    }
  }

  private decode(p: ModbusPoint, start: number, data: readonly (boolean | number)[], buffer: Uint8Array): PointRead {
    if (isBitTable(p.addr.table)) {
      const v = data[p.addr.address - start];
      if (typeof v !== 'boolean') return { err: refusedError(`unit ${this.unit} sent a short answer for ${p.addr.table} ${p.addr.address}`) };
      return { val: v };
    }
    try {
      return { val: scaled(p, decodeRegisters(buffer, start, p.addr)) };
    } catch {
      return { err: refusedError(`unit ${this.unit} sent a short answer for ${p.addr.table} ${p.addr.address}`) };
    }
  }

  private refusal(p: ModbusPoint, e: ModbusException): HayloftError {
    const what = p.addr.size > 1 ? `${p.addr.table} ${p.addr.address}..${p.addr.address + p.addr.size - 1}` : `${p.addr.table} ${p.addr.address}`;
    return refusedError(`unit ${this.unit} refused to read ${what}: ${e.message}`, e);
  }

  private asDown(e: unknown): Error {
    if (e instanceof ModbusException) return downError(`unit ${this.unit} on ${this.link.description}: ${e.message}`, e);
    return e instanceof Error ? e : downError(String(e));
  }

  private plan(points: readonly ModbusPoint[]): Block[] {
    const byTable = new Map<Table, number[]>();
    points.forEach((p, i) => {
      if (p.conn !== this) throw new Error(`point ${p.id} was prepared by another connection`);
      let l = byTable.get(p.addr.table);
      if (l === undefined) byTable.set(p.addr.table, (l = []));
      l.push(i);
    });
    const blocks: Block[] = [];
    for (const [table, idx] of byTable) {
      const max = isBitTable(table) ? this.driver.maxBits : this.driver.maxRegisters;
      idx.sort((a, b) => (points[a] as ModbusPoint).addr.address - (points[b] as ModbusPoint).addr.address);
      let start = -1;
      let end = -1;
      let members: number[] = [];
      const flush = (): void => {
        if (members.length > 0) blocks.push({ table, start, count: end - start, members, split: false });
      };
      for (const i of idx) {
        const a = (points[i] as ModbusPoint).addr;
        const aEnd = a.address + a.size;
        if (members.length > 0 && a.address <= end && Math.max(end, aEnd) - start <= max) {
          end = Math.max(end, aEnd);
          members.push(i);
        } else {
          flush();
          start = a.address;
          end = aEnd;
          members = [i];
        }
      }
      flush();
    }
    return blocks;
  }
}

export class ModbusDriver implements Driver {
  readonly name = MODBUS_TAGS.name;
  readonly connTag = MODBUS_TAGS.connTag;
  readonly refTag = MODBUS_TAGS.refTag;
  readonly curTag = MODBUS_TAGS.curTag;
  readonly writeTag = MODBUS_TAGS.writeTag;
  readonly maxRegisters: number;
  readonly maxBits: number;
  private readonly timeoutMs: number;
  private readonly links = new Map<string, ModbusLink>();

  constructor(opts: ModbusDriverOptions = {}) {
    this.timeoutMs = opts.timeoutMs ?? MODBUS_DEFAULT_TIMEOUT_MS;
    this.maxRegisters = opts.maxRegisters ?? 100;
    this.maxBits = opts.maxBits ?? 2000;
  }

  open(conn: ConnSpec): DriverConn {
    const tags: HDict = conn.tags;
    const spec = parseModbusUri(uriTag(tags, 'modbus-tcp://10.0.0.5:502'));
    const unit = intTag(tags, 'modbusSlave', 0, 255);
    const timeoutMs = durationTag(tags, 'timeout', this.timeoutMs);
    const link = this.acquire(spec);
    return new ModbusConn(this, conn.id, link, unit, timeoutMs);
  }

  async close(): Promise<void> {
    const links = [...this.links.values()];
    this.links.clear();
    await Promise.all(links.map((l) => l.close()));
  }

  private acquire(spec: LinkSpec): ModbusLink {
    const key = linkKey(spec);
    let link = this.links.get(key);
    if (link !== undefined && link.spec.kind === 'rtu' && spec.kind === 'rtu') {
      const a = link.spec;
      if (a.baudRate !== spec.baudRate || a.parity !== spec.parity || a.dataBits !== spec.dataBits || a.stopBits !== spec.stopBits) {
        throw configError(`serial port ${spec.path} is already used by another connector at other settings (${link.description}); one bus has one speed and framing`);
      }
    }
    if (link === undefined) this.links.set(key, (link = new ModbusLink(spec)));
    link.users++;
    return link;
  }

  /** @internal A connection is done with its link: the last user closes it. */
  async release(link: ModbusLink): Promise<void> {
    link.users--;
    if (link.users > 0) return;
    const key = linkKey(link.spec);
    if (this.links.get(key) === link) this.links.delete(key);
    await link.close();
  }
}
