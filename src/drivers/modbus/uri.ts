/**
 * Modbus connector URIs:
 *
 *   modbus-tcp://host[:port]                      (port 502 by default)
 *   modbus-rtu:/dev/ttyUSB0?baud=9600&parity=none&dataBits=8&stopBits=1
 *
 * Serial settings default to 9600 baud, no parity, 8 data bits, 1 stop bit (the Modbus RTU
 * defaults most devices ship with, though the spec prefers even parity).
 */
import { configError } from '../driver.js';

export type Parity = 'none' | 'even' | 'odd';

export type LinkSpec =
  | { readonly kind: 'tcp'; readonly host: string; readonly port: number }
  | {
      readonly kind: 'rtu';
      readonly path: string;
      readonly baudRate: number;
      readonly parity: Parity;
      readonly dataBits: 5 | 6 | 7 | 8;
      readonly stopBits: 1 | 2;
    };

const BAUDS = [1200, 2400, 4800, 9600, 14400, 19200, 38400, 57600, 115200, 230400];

/** The key of the physical link: connectors sharing it (slaves of one bus or gateway) share one request queue. */
export function linkKey(s: LinkSpec): string {
  return s.kind === 'tcp' ? `tcp://${s.host}:${s.port}` : `rtu:${s.path}`;
}

export function describeLink(s: LinkSpec): string {
  return s.kind === 'tcp' ? `${s.host}:${s.port}` : `${s.path} (${s.baudRate} ${s.dataBits}${s.parity[0]?.toUpperCase() ?? 'N'}${s.stopBits})`;
}

export function parseModbusUri(text: string): LinkSpec {
  let u: URL;
  try {
    u = new URL(text);
  } catch {
    throw configError(`uri "${text}" is not a URI; use modbus-tcp://host:port or modbus-rtu:/dev/ttyUSB0?baud=9600`);
  }
  if (u.protocol === 'modbus-tcp:') {
    const host = u.hostname.replace(/^\[(.*)\]$/, '$1');
    if (host === '') throw configError(`uri "${text}" has no host`);
    const port = u.port === '' ? 502 : Number(u.port);
    if (!(port > 0 && port < 65536)) throw configError(`uri "${text}": port must be from 1 to 65535`);
    return { kind: 'tcp', host, port };
  }
  if (u.protocol === 'modbus-rtu:') {
    const path = decodeURIComponent(u.host === '' ? u.pathname : `/${u.host}${u.pathname}`);
    if (path === '' || path === '/') throw configError(`uri "${text}" names no serial device`);
    const q = u.searchParams;
    for (const k of q.keys()) {
      if (!['baud', 'parity', 'dataBits', 'stopBits'].includes(k)) throw configError(`uri "${text}": unknown setting "${k}" (baud, parity, dataBits, stopBits)`);
    }
    const baudRate = Number(q.get('baud') ?? 9600);
    if (!BAUDS.includes(baudRate)) throw configError(`uri "${text}": baud must be one of ${BAUDS.join(', ')}`);
    const parity = q.get('parity') ?? 'none';
    if (parity !== 'none' && parity !== 'even' && parity !== 'odd') throw configError(`uri "${text}": parity must be none, even or odd`);
    const dataBits = Number(q.get('dataBits') ?? 8);
    if (dataBits !== 5 && dataBits !== 6 && dataBits !== 7 && dataBits !== 8) throw configError(`uri "${text}": dataBits must be 5 to 8`);
    const stopBits = Number(q.get('stopBits') ?? 1);
    if (stopBits !== 1 && stopBits !== 2) throw configError(`uri "${text}": stopBits must be 1 or 2`);
    return { kind: 'rtu', path, baudRate, parity, dataBits, stopBits };
  }
  throw configError(`uri "${text}": scheme ${u.protocol} is not modbus-tcp: or modbus-rtu:`);
}
