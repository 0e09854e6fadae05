/**
 * `modbusCur` addresses and the decoding of register contents.
 *
 *   <table>:<address>[:<type>[:<order>]]
 *
 * table `coil|discrete|input|holding`; address 0-based (the PDU address, not the 40001-style
 * register number); type `bool|int16|uint16|int32|uint32|float32|float64` (default `uint16` for
 * registers, `bool` for coils and discrete inputs); word order `be` (default: the first register
 * holds the most significant word) or `le` (word-swapped, as many meters send). Bytes within a
 * register are big-endian in every case: Modbus defines that.
 */
import { configError } from '../driver.js';

export type Table = 'coil' | 'discrete' | 'input' | 'holding';
export type DataType = 'bool' | 'int16' | 'uint16' | 'int32' | 'uint32' | 'float32' | 'float64';
export type WordOrder = 'be' | 'le';

export interface ModbusAddress {
  readonly table: Table;
  readonly address: number;
  readonly type: DataType;
  readonly order: WordOrder;
  /** Registers (or bits, for coils and discrete inputs) the value spans. */
  readonly size: number;
}

const TABLES: readonly Table[] = ['coil', 'discrete', 'input', 'holding'];
const WORDS: Readonly<Record<DataType, number>> = { bool: 1, int16: 1, uint16: 1, int32: 2, uint32: 2, float32: 2, float64: 4 };

export function isBitTable(t: Table): boolean {
  return t === 'coil' || t === 'discrete';
}

export function parseModbusCur(text: string, tag = 'modbusCur'): ModbusAddress {
  const form = '<table>:<address>[:<type>[:<order>]], e.g. holding:10:float32:le';
  const parts = text.trim().split(':');
  if (parts.length < 2 || parts.length > 4) throw configError(`${tag} "${text}" is not of the form ${form}`);
  const [t, a, ty, o] = parts as [string, string, string | undefined, string | undefined];
  if (!(TABLES as readonly string[]).includes(t)) throw configError(`${tag} "${text}": table "${t}" is not one of ${TABLES.join(', ')}`);
  const table = t as Table;
  if (!/^\d+$/.test(a) || Number(a) > 65535) throw configError(`${tag} "${text}": address "${a}" is not a 0-based address from 0 to 65535`);
  const address = Number(a);
  const bits = isBitTable(table);
  const type = (ty === undefined || ty === '' ? (bits ? 'bool' : 'uint16') : ty) as DataType;
  if (!(type in WORDS)) throw configError(`${tag} "${text}": type "${ty}" is not one of ${Object.keys(WORDS).join(', ')}`);
  if (bits && type !== 'bool') throw configError(`${tag} "${text}": a ${table} holds one bit; its type can only be bool`);
  if (o !== undefined && o !== 'be' && o !== 'le') throw configError(`${tag} "${text}": word order "${o}" is not be or le`);
  const size = bits ? 1 : WORDS[type];
  if (address + size - 1 > 65535) throw configError(`${tag} "${text}": a ${type} at ${address} runs past address 65535`);
  return { table, address, type, order: o ?? 'be', size };
}

const scratch = new DataView(new ArrayBuffer(8));

/**
 * The value of a register-table address from the bytes of a read starting at register `start`.
 * `bytes` are the registers as sent (big-endian words).
 */
export function decodeRegisters(bytes: Uint8Array, start: number, a: ModbusAddress): number | boolean {
  const at = (a.address - start) * 2;
  const n = a.size * 2;
  if (at < 0 || at + n > bytes.length) throw new RangeError(`register ${a.address} is outside the read`);
  // Copy the words into scratch in big-endian word order, so one DataView read decodes them.
  for (let w = 0; w < a.size; w++) {
    const from = at + 2 * (a.order === 'be' ? w : a.size - 1 - w);
    scratch.setUint8(2 * w, bytes[from] as number);
    scratch.setUint8(2 * w + 1, bytes[from + 1] as number);
  }
  switch (a.type) {
    case 'bool':
      return scratch.getUint16(0) !== 0;
    case 'uint16':
      return scratch.getUint16(0);
    case 'int16':
      return scratch.getInt16(0);
    case 'uint32':
      return scratch.getUint32(0);
    case 'int32':
      return scratch.getInt32(0);
    case 'float32':
      return scratch.getFloat32(0);
    case 'float64':
      return scratch.getFloat64(0);
  }
}

const INT_RANGE: Partial<Readonly<Record<DataType, [number, number]>>> = {
  bool: [0, 1],
  uint16: [0, 0xffff],
  int16: [-0x8000, 0x7fff],
  uint32: [0, 0xffffffff],
  int32: [-0x80000000, 0x7fffffff],
};

/**
 * Why a value cannot be written to an address of this type (integer types take whole numbers in
 * their range; float32 rounds), or undefined when it can.
 */
export function unencodable(a: ModbusAddress, v: number): string | undefined {
  if (!Number.isFinite(v)) return `${String(v)} cannot be written to a ${a.type} register`;
  const r = INT_RANGE[a.type];
  if (r !== undefined && (Math.round(v) < r[0] || Math.round(v) > r[1])) return `${String(v)} is outside the range of a ${a.type} (${r[0]} to ${r[1]})`;
  if (a.type === 'float32' && Math.abs(v) > 3.4028234663852886e38) return `${String(v)} is outside the range of a float32`;
  return undefined;
}

/**
 * The registers (big-endian words, in the address's word order) that hold `v`: what a write
 * sends (integer types rounded; check with `unencodable` first), and what simulators serve.
 */
export function encodeRegisters(a: ModbusAddress, v: number | boolean): number[] {
  const dv = new DataView(new ArrayBuffer(8));
  const x = typeof v === 'boolean' ? (v ? 1 : 0) : a.type === 'float32' || a.type === 'float64' ? v : Math.round(v);
  switch (a.type) {
    case 'bool':
    case 'uint16':
      dv.setUint16(0, x);
      break;
    case 'int16':
      dv.setInt16(0, x);
      break;
    case 'uint32':
      dv.setUint32(0, x);
      break;
    case 'int32':
      dv.setInt32(0, x);
      break;
    case 'float32':
      dv.setFloat32(0, x);
      break;
    case 'float64':
      dv.setFloat64(0, x);
      break;
  }
  const words: number[] = [];
  for (let w = 0; w < a.size; w++) words.push(dv.getUint16(2 * w));
  return a.order === 'be' ? words : words.reverse();
}
