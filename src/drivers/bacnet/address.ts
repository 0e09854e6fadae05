/**
 * BACnet addresses: connector URIs `bacnet://host[:port]/<deviceInstance>` and point addresses
 * (`bacnetCur`) `<objectType><instance>[.<property>]`: `AI1`, `AV3`, `BV2`, `MSV4`,
 * `AI1.presentValue`, `AV7.outOfService`. Object types by their usual abbreviations; properties
 * by the camelCase of their standard names (or their number), presentValue by default.
 */
import { ObjectType, PropertyIdentifier } from '@bacnet-js/client';
import { configError } from '../driver.js';

export const OBJECT_TYPES: Readonly<Record<string, number>> = {
  AI: ObjectType.ANALOG_INPUT,
  AO: ObjectType.ANALOG_OUTPUT,
  AV: ObjectType.ANALOG_VALUE,
  BI: ObjectType.BINARY_INPUT,
  BO: ObjectType.BINARY_OUTPUT,
  BV: ObjectType.BINARY_VALUE,
  MI: ObjectType.MULTI_STATE_INPUT,
  MO: ObjectType.MULTI_STATE_OUTPUT,
  MSI: ObjectType.MULTI_STATE_INPUT,
  MSO: ObjectType.MULTI_STATE_OUTPUT,
  MSV: ObjectType.MULTI_STATE_VALUE,
  MV: ObjectType.MULTI_STATE_VALUE,
  ACC: ObjectType.ACCUMULATOR,
  PIV: ObjectType.POSITIVE_INTEGER_VALUE,
  IV: ObjectType.INTEGER_VALUE,
  LAV: ObjectType.LARGE_ANALOG_VALUE,
  CSV: ObjectType.CHARACTERSTRING_VALUE,
  DEV: ObjectType.DEVICE,
};

const MAX_INSTANCE = 4194302;

/** presentValue -> 85, from the library's PROPERTY_NAME enum keys. */
const PROPERTIES = new Map<string, number>();
for (const [k, v] of Object.entries(PropertyIdentifier)) {
  if (typeof v !== 'number') continue;
  PROPERTIES.set(k.toLowerCase().replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase()), v);
}

export interface BacnetAddress {
  readonly type: number;
  readonly instance: number;
  readonly property: number;
  /** As written, for messages. */
  readonly text: string;
}

export function parseBacnetCur(text: string, tag = 'bacnetCur'): BacnetAddress {
  const m = /^([A-Za-z]+)(\d+)(?:\.([A-Za-z][A-Za-z0-9]*|\d+))?$/.exec(text.trim());
  if (m === null) throw configError(`${tag} "${text}" is not of the form <objectType><instance>[.<property>], e.g. AI1 or AV3.presentValue`);
  const [, t, i, p] = m as unknown as [string, string, string, string | undefined];
  const type = OBJECT_TYPES[t.toUpperCase()];
  if (type === undefined) throw configError(`${tag} "${text}": object type "${t}" is not one of ${Object.keys(OBJECT_TYPES).join(', ')}`);
  const instance = Number(i);
  if (instance > MAX_INSTANCE) throw configError(`${tag} "${text}": instance ${i} is above ${MAX_INSTANCE}`);
  let property: number = PropertyIdentifier.PRESENT_VALUE;
  if (p !== undefined) {
    const id = /^\d+$/.test(p) ? Number(p) : PROPERTIES.get(p);
    if (id === undefined) throw configError(`${tag} "${text}": "${p}" is not a BACnet property name (presentValue, statusFlags, outOfService, ...)`);
    property = id;
  }
  return { type, instance, property, text: text.trim() };
}

export interface DeviceAddress {
  /** `host:port` as the BACnet library addresses it. */
  readonly address: string;
  readonly deviceInstance: number;
}

export function parseBacnetUri(text: string): DeviceAddress {
  let u: URL;
  try {
    u = new URL(text);
  } catch {
    throw configError(`uri "${text}" is not a URI; use bacnet://host[:port]/<deviceInstance>`);
  }
  if (u.protocol !== 'bacnet:') throw configError(`uri "${text}": scheme ${u.protocol} is not bacnet:`);
  if (u.hostname === '') throw configError(`uri "${text}" has no host`);
  const port = u.port === '' ? 47808 : Number(u.port);
  const dev = u.pathname.replace(/^\//, '');
  if (!/^\d+$/.test(dev) || Number(dev) > MAX_INSTANCE) throw configError(`uri "${text}": the path must be the device instance (0 to ${MAX_INSTANCE}), e.g. bacnet://10.0.0.9/1001`);
  return { address: `${u.hostname}:${port}`, deviceInstance: Number(dev) };
}
