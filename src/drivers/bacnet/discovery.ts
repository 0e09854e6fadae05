/**
 * BACnet discovery: a Who-Is (broadcast on the driver's interface, or directed to one address or
 * router for devices beyond the local broadcast), the I-Am answers collected for a while, then
 * each device's name, vendor and model read from its device object.
 *
 * Devices answer a Who-Is to the address and port it came from, so discovery runs on the
 * driver's own socket (shared with polling: BACnet/IP is connectionless).
 */
import { ObjectType, PropertyIdentifier } from '@bacnet-js/client';
import { isHayloftError } from '../../lib/errors.js';
import type { BacnetDriver } from './bacnet-driver.js';
import { DeviceSession } from './session.js';

export interface DiscoverOptions {
  /** `host[:port]` for a directed Who-Is; absent: broadcast. */
  readonly address?: string;
  readonly low?: number;
  readonly high?: number;
  /** How long to collect I-Am answers; also the timeout of the reads that follow. */
  readonly timeoutMs: number;
}

export interface FoundDevice {
  readonly host: string;
  readonly port: number;
  readonly deviceInstance: number;
  readonly maxApdu: number;
  /** `both`, `transmit`, `receive` or `none`, from the I-Am. */
  readonly segmentation: string;
  readonly vendorId: number;
  readonly objectName?: string;
  readonly vendorName?: string;
  readonly modelName?: string;
}

const SEGMENTATION = ['both', 'transmit', 'receive', 'none'];
/** Devices whose names are read at once. */
const PARALLEL = 8;

/** `host` or `host:port` as the library names senders, split (47808 when no port). */
export function splitAddress(address: string): { host: string; port: number } {
  const m = /^(.*):(\d+)$/.exec(address);
  return m === null ? { host: address, port: 47808 } : { host: m[1] as string, port: Number(m[2]) };
}

export async function discover(driver: BacnetDriver, opts: DiscoverOptions): Promise<FoundDevice[]> {
  const client = driver.acquire();
  const seen = new Map<number, { address: string; maxApdu: number; segmentation: number; vendorId: number }>();
  const low = opts.low ?? 0;
  const high = opts.high ?? 4194303;
  const onIam = (c: { header?: { sender?: { address?: string; forwardedFrom?: string | null } }; payload: { deviceId: number; maxApdu: number; segmentation: number; vendorId: number } }): void => {
    const p = c.payload;
    // An I-Am forwarded by a BBMD names the device in forwardedFrom; the sender is the BBMD.
    const address = c.header?.sender?.forwardedFrom ?? c.header?.sender?.address;
    // Devices that ignore the range in the Who-Is (some do) are left out here.
    if (address === undefined || p.deviceId < low || p.deviceId > high || seen.has(p.deviceId)) return;
    seen.set(p.deviceId, { address, maxApdu: p.maxApdu, segmentation: p.segmentation, vendorId: p.vendorId });
  };
  client.on('iAm', onIam);
  try {
    const range = opts.low === undefined && opts.high === undefined ? undefined : { lowLimit: low, highLimit: high };
    if (opts.address !== undefined) client.whoIs({ address: opts.address }, range);
    else {
      if (range !== undefined) client.whoIs(range);
      else client.whoIs();
      // Registered with a BBMD: the Who-Is reaches its networks too (Distribute-Broadcast-To-Network).
      const bbmd = driver.bbmd;
      if (bbmd !== undefined && (await driver.foreignSettled(opts.timeoutMs))) client.whoIsThroughBBMD({ address: bbmd }, range);
    }
    await new Promise((resolve) => setTimeout(resolve, opts.timeoutMs));
  } finally {
    client.off('iAm', onIam);
  }
  try {
    const devices = [...seen].sort((a, b) => a[0] - b[0]);
    const out: FoundDevice[] = [];
    for (let i = 0; i < devices.length; i += PARALLEL) {
      out.push(...(await Promise.all(devices.slice(i, i + PARALLEL).map(([instance, d]) => describe(driver, instance, d, opts.timeoutMs)))));
    }
    return out;
  } finally {
    driver.release();
  }
}

/** A device's names from its device object; a device that does not answer is listed without them. */
async function describe(driver: BacnetDriver, deviceInstance: number, d: { address: string; maxApdu: number; segmentation: number; vendorId: number }, timeoutMs: number): Promise<FoundDevice> {
  const { host, port } = splitAddress(d.address);
  const base = { host, port, deviceInstance, maxApdu: d.maxApdu, segmentation: SEGMENTATION[d.segmentation] ?? String(d.segmentation), vendorId: d.vendorId };
  const s = new DeviceSession(driver, d.address, timeoutMs, 3);
  try {
    const props = [PropertyIdentifier.OBJECT_NAME, PropertyIdentifier.VENDOR_NAME, PropertyIdentifier.MODEL_NAME];
    const got = await s.readMany(props.map((property) => ({ type: ObjectType.DEVICE, instance: deviceInstance, property })));
    const str = (k: number): string | undefined => {
      const r = got[k];
      const v = r !== undefined && 'values' in r ? r.values[0]?.value : undefined;
      return typeof v === 'string' ? v : undefined;
    };
    const names: { objectName?: string; vendorName?: string; modelName?: string } = {};
    const [objectName, vendorName, modelName] = [str(0), str(1), str(2)];
    if (objectName !== undefined) names.objectName = objectName;
    if (vendorName !== undefined) names.vendorName = vendorName;
    if (modelName !== undefined) names.modelName = modelName;
    return { ...base, ...names };
  } catch (e) {
    if (isHayloftError(e)) return base;
    throw e;
  } finally {
    s.close();
  }
}
