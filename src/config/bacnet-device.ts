/**
 * The `bacnetDevice` section of the configuration: Hayloft as a BACnet/IP device (src/export/),
 * off until configured. Read like the `mqtt` section (src/config/section.ts): every key checked,
 * unknown keys refused, every problem reported with the others as `bacnetDevice.<key>`.
 */
import { isIPv4 } from 'node:net';
import { type Parsed, type SectionContext, type SectionKeys, type SectionProblem, bbmdAddress, filter, integer, loadSection, redactSection, text } from './section.js';

export interface BacnetDeviceConfig {
  /** The device instance, 0-4194302: unique on the BACnet internetwork. */
  readonly instance: number;
  /** The Device object's name; null: the serverName. */
  readonly name: string | null;
  /** Local IPv4 address the device's socket binds to (0.0.0.0: all interfaces). */
  readonly interface: string;
  /** Local UDP port of the device (47808, BAC0, by default). */
  readonly port: number;
  /** Where I-Am goes when the device starts and answers a Who-Is; empty: 255.255.255.255. */
  readonly broadcast: string;
  /** Which points are exported (Haystack filter). */
  readonly filter: string;
  /** The Hayloft user whose POINT_WRITE permission BACnet writes are checked against; null: writes refused. */
  readonly writeAs: string | null;
  /** Most COV subscriptions held at once. */
  readonly maxSubscriptions: number;
  /** A BBMD (`host[:port]`) to register with as a foreign device; null: none. */
  readonly bbmd: string | null;
  /** The registration's time-to-live in s (renewed at half of it). */
  readonly bbmdTtl: number;
}

function ipv4(raw: unknown, what: string): Parsed<string> {
  const r = text(raw, what);
  return 'ok' in r && !isIPv4(r.ok) ? { expected: what } : r;
}

const KEYS: SectionKeys<BacnetDeviceConfig> = {
  instance: { env: 'HAYLOFT_BACNET_DEVICE_INSTANCE', default: undefined, parse: (raw) => integer(raw, 0, 4194302) },
  name: { env: 'HAYLOFT_BACNET_DEVICE_NAME', default: null, parse: (raw) => text(raw, 'the Device object name (unique on the BACnet network)') },
  interface: { env: 'HAYLOFT_BACNET_DEVICE_INTERFACE', default: '0.0.0.0', parse: (raw) => ipv4(raw, 'an IPv4 address of this host, such as 192.168.1.20 (0.0.0.0: all interfaces)') },
  // From 1: the library binds 47808 when given 0 (as bacnetPort).
  port: { env: 'HAYLOFT_BACNET_DEVICE_PORT', default: 47808, parse: (raw) => integer(raw, 1, 65535) },
  broadcast: {
    env: 'HAYLOFT_BACNET_DEVICE_BROADCAST',
    default: '',
    parse: (raw) => (typeof raw === 'string' && raw.trim() === '' ? { ok: '' } : ipv4(raw, 'an IPv4 broadcast address such as 192.168.1.255 (empty: 255.255.255.255)')),
  },
  filter: { default: 'point and bacnetExport', parse: (raw, ctx) => filter(raw, ctx, 'point and bacnetExport, or point and equipRef->name=="ahu1"') },
  writeAs: { env: 'HAYLOFT_BACNET_DEVICE_WRITE_AS', default: null, parse: (raw) => text(raw, 'the Hayloft user name BACnet writes are checked against') },
  maxSubscriptions: { default: 1000, parse: (raw) => integer(raw, 1, 100_000) },
  bbmd: { env: 'HAYLOFT_BACNET_DEVICE_BBMD', default: null, parse: (raw) => bbmdAddress(raw, false) },
  // The BBMD keeps an entry TTL + 30 s; BVLC carries the TTL in 16 bits.
  bbmdTtl: { env: 'HAYLOFT_BACNET_DEVICE_BBMD_TTL', default: 600, parse: (raw) => integer(raw, 2, 65535) },
};

export const BACNET_DEVICE_KEYS = Object.keys(KEYS) as (keyof BacnetDeviceConfig)[];

/** Reads the section: null when neither the file nor the environment sets anything. */
export function loadBacnetDevice(
  raw: unknown,
  file: string | null,
  env: Readonly<Record<string, string | undefined>>,
  ctx: SectionContext = {},
): { value: BacnetDeviceConfig | null; problems: SectionProblem[] } {
  const section = loadSection('bacnetDevice', KEYS, 'instance, name, interface, port, filter, writeAs, ...', raw, file, env, ctx);
  if (section.value === null || section.problems.length > 0) return { value: null, problems: section.problems };
  return { value: Object.freeze(section.value as unknown as BacnetDeviceConfig), problems: [] };
}

export function redactBacnetDevice(c: BacnetDeviceConfig): Record<string, unknown> {
  return redactSection(KEYS, c);
}
