/**
 * The BACnet/IP driver (@bacnet-js/client): reads present values (or another property) of a
 * device's objects.
 *
 * Connector tags: `bacnetConn`, `uri` `bacnet://host[:port]/<deviceInstance>`, optional `timeout`
 * (Number with a time unit, default 3 s). Point tag: `bacnetCur` (see address.ts).
 *
 * One UDP socket serves every device (BACnet/IP is connectionless); it is opened on the first
 * connector, bound to the driver's interface and port (47808 by default). Requests to one device
 * go one at a time.
 *
 * Batching: a read asks for its points with ReadPropertyMultiple, at most `maxPerRequest`
 * properties a request. A device that rejects or aborts it (no RPM support, or an answer too big
 * without segmentation) is asked again with half as many, down to one, and from then on with
 * ReadProperty if even that fails; a device that answers a whole RPM with an object or property
 * error (some do, for one unknown object) has that batch read point by point, so the error lands
 * on the point it belongs to.
 *
 * Writes: `bacnetWrite` (object and property, as `bacnetCur`) and `bacnetWriteLevel` (the BACnet
 * priority, 1-16, default 16). A value is written with WriteProperty at that priority, in the
 * object type's datatype (REAL for analog objects, ENUMERATED for binary, Unsigned for
 * multi-state ...); relinquishing writes NULL at that priority. Afterwards the device's
 * priority array is read back where it has one: a device that acknowledged but holds another
 * value at that priority is a fault, not a success.
 *
 * The library drops requests from exactly 127.0.0.1 (shared/notes/dependencies.md): on loopback,
 * bind the driver and the device to other addresses of 127/8.
 */
import bacnet, { ApplicationTag, ObjectType, PropertyIdentifier } from '@bacnet-js/client';
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
import { durationTag, intTag, uriTag } from '../tags.js';
import { BacnetCov } from './cov.js';
import { type ForeignStatus, ForeignRegistration } from './foreign.js';
import { BACNET_TAGS } from './info.js';
import { type AppValue, bacnetErrorText, CLASS_OBJECT, CLASS_PROPERTY, CODE_DENIED, CODE_UNRECOGNIZED, REJECT_UNRECOGNIZED_SERVICE, TAG_BOOLEAN, TAG_DOUBLE, TAG_ENUMERATED, TAG_REAL, TAG_SIGNED, TAG_STRING, TAG_UNSIGNED, classify, rawOf, timed } from './wire.js';
import { type BacnetAddress, type DeviceAddress, parseBacnetCur, parseBacnetUri } from './address.js';

type Client = InstanceType<typeof bacnet.default>;

export interface BacnetDriverOptions {
  /** Local address to bind (default all interfaces). */
  interface?: string;
  /** Local UDP port (default 47808). */
  port?: number;
  /** Request timeout when a connector has no `timeout` tag. */
  timeoutMs?: number;
  /** Most properties in one ReadPropertyMultiple. */
  maxPerRequest?: number;
  /** Where a broadcast Who-Is goes (discovery.ts); the library's default is 255.255.255.255. */
  broadcastAddress?: string;
  /** A BBMD (`host:port`) the socket registers with as a foreign device while open (foreign.ts). */
  bbmd?: string;
  bbmdTtlS?: number;
}

export const BACNET_DEFAULT_TIMEOUT_MS = 3000;
const ARRAY_ALL = 0xffffffff;
// The library's enums as plain numbers (the shared ones are in wire.ts).
const TAG_NULL: number = ApplicationTag.NULL;
const PROP_PRESENT_VALUE: number = PropertyIdentifier.PRESENT_VALUE;
const PROP_PRIORITY_ARRAY: number = PropertyIdentifier.PRIORITY_ARRAY;
/** The datatype of presentValue by object type (BACnet clause 12): what a write must send. */
const PRESENT_VALUE_TAG: ReadonlyMap<number, number> = new Map<number, number>([
  [ObjectType.ANALOG_INPUT, ApplicationTag.REAL],
  [ObjectType.ANALOG_OUTPUT, ApplicationTag.REAL],
  [ObjectType.ANALOG_VALUE, ApplicationTag.REAL],
  [ObjectType.LARGE_ANALOG_VALUE, ApplicationTag.DOUBLE],
  [ObjectType.BINARY_INPUT, ApplicationTag.ENUMERATED],
  [ObjectType.BINARY_OUTPUT, ApplicationTag.ENUMERATED],
  [ObjectType.BINARY_VALUE, ApplicationTag.ENUMERATED],
  [ObjectType.MULTI_STATE_INPUT, ApplicationTag.UNSIGNED_INTEGER],
  [ObjectType.MULTI_STATE_OUTPUT, ApplicationTag.UNSIGNED_INTEGER],
  [ObjectType.MULTI_STATE_VALUE, ApplicationTag.UNSIGNED_INTEGER],
  [ObjectType.POSITIVE_INTEGER_VALUE, ApplicationTag.UNSIGNED_INTEGER],
  [ObjectType.INTEGER_VALUE, ApplicationTag.SIGNED_INTEGER],
  [ObjectType.CHARACTERSTRING_VALUE, ApplicationTag.CHARACTER_STRING],
]);
export const BACNET_DEFAULT_WRITE_LEVEL = 16;

interface BacnetPoint extends PreparedPoint {
  readonly conn: BacnetConn;
  readonly addr: BacnetAddress;
}

interface BacnetWrite extends PreparedWrite {
  readonly conn: BacnetConn;
  readonly addr: BacnetAddress;
  readonly priority: number;
}

class BacnetConn implements DriverConn {
  /** Change of value (SubscribeCOV) for this connector's device. */
  readonly cov: BacnetCov;
  /** Properties per ReadPropertyMultiple; 0 once the device is read with ReadProperty only. */
  private per: number;
  private queue: Promise<unknown> = Promise.resolve();
  private closed = false;

  constructor(
    private readonly driver: BacnetDriver,
    readonly id: string,
    private readonly device: DeviceAddress,
    private readonly timeoutMs: number,
  ) {
    this.per = driver.maxPerRequest;
    this.cov = new BacnetCov({ client: () => driver.client(), nextProcessId: () => driver.nextProcessId() }, device, timeoutMs);
  }

  /** ReadPropertyMultiple batch size in use (0: ReadProperty only); for tests and diagnostics. */
  get batchSize(): number {
    return this.per;
  }

  prepare(point: PointSpec): BacnetPoint {
    const cur = point.tags.get('bacnetCur');
    if (typeof cur !== 'string') throw configError('bacnetCur is missing (a Str such as "AI1" or "AV3.presentValue")');
    return { id: point.id, conn: this, addr: parseBacnetCur(cur) };
  }

  read(points: readonly PreparedPoint[]): Promise<PointRead[]> {
    const run = this.queue.then(() => this.readNow(points as readonly BacnetPoint[]));
    this.queue = run.catch(() => undefined);
    return run;
  }

  prepareWrite(point: PointSpec): BacnetWrite {
    const w = point.tags.get('bacnetWrite');
    if (typeof w !== 'string') throw configError('bacnetWrite is missing (a Str such as "AV3" or "BO1.presentValue")');
    const addr = parseBacnetCur(w, 'bacnetWrite');
    const priority = intTag(point.tags, 'bacnetWriteLevel', 1, 16, BACNET_DEFAULT_WRITE_LEVEL);
    return { id: point.id, conn: this, addr, priority };
  }

  write(point: PreparedWrite, val: RawValue | null): Promise<void> {
    const run = this.queue.then(() => this.writeNow(point as BacnetWrite, val));
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async writeNow(p: BacnetWrite, val: RawValue | null): Promise<void> {
    if (p.conn !== this) throw new Error(`point ${p.id} was prepared by another connection`);
    const a = p.addr;
    const what = `${a.text} of device ${this.device.deviceInstance}`;
    const value = val === null ? { type: TAG_NULL, value: null } : this.encode(a, val, what);
    try {
      await this.request((c) => c.writeProperty({ address: this.device.address }, { type: a.type, instance: a.instance }, a.property, [value] as never, { priority: p.priority }));
    } catch (e) {
      const c = classify(e);
      if (c.kind === 'timeout' || c.kind === 'other') throw this.down(e);
      throw refusedError(`${what}: the device refused the write at priority ${p.priority} (${bacnetErrorText(e)})`, e);
    }
    if (a.property !== PROP_PRESENT_VALUE) return;
    // Read the priority array back: the device may acknowledge and still hold something else.
    let slots: AppValue[];
    try {
      const ans = (await this.request((c) => c.readProperty({ address: this.device.address }, { type: a.type, instance: a.instance }, PROP_PRIORITY_ARRAY))) as unknown as { values: AppValue[] };
      slots = ans.values;
    } catch (e) {
      const c = classify(e);
      if (c.kind === 'timeout' || c.kind === 'other') throw this.down(e);
      return; // no priority array (a non-commandable object): nothing more to check
    }
    const slot = slots[p.priority - 1];
    if (slot === undefined) return;
    const held = slot.type === TAG_NULL ? null : rawOf(slot, what);
    const same =
      held === null || val === null
        ? held === val
        : typeof held === 'number' && typeof value.value === 'number'
          ? Math.fround(held) === Math.fround(value.value)
          : held === value.value || (typeof held === 'number' && typeof val === 'boolean' && held === (val ? 1 : 0));
    if (!same) {
      const shown = held === null ? 'nothing (NULL)' : typeof held === 'object' ? 'an unreadable value' : String(held);
      throw refusedError(`${what}: the device acknowledged the write but its priority array holds ${shown} at priority ${p.priority}, not ${val === null ? 'NULL' : String(val)}`);
    }
  }

  /** A value in the datatype the object's property takes. */
  private encode(a: BacnetAddress, val: RawValue, what: string): { type: number; value: unknown } {
    const tag = a.property === PROP_PRESENT_VALUE ? PRESENT_VALUE_TAG.get(a.type) : undefined;
    const num = typeof val === 'boolean' ? (val ? 1 : 0) : val;
    switch (tag) {
      case TAG_REAL:
      case TAG_DOUBLE:
        if (typeof num !== 'number') throw configError(`${what}: a Str cannot be written to an analog value`);
        return { type: tag, value: num };
      case TAG_ENUMERATED:
      case TAG_UNSIGNED:
      case TAG_SIGNED:
        if (typeof num !== 'number' || !Number.isInteger(num) || (tag !== TAG_SIGNED && num < 0)) {
          throw configError(`${what}: takes ${tag === TAG_SIGNED ? 'a whole number' : 'a whole number, 0 or more'}, not ${String(val)}`);
        }
        return { type: tag, value: num };
      case TAG_STRING:
        return { type: tag, value: String(val) };
      default:
        // Another property, or an object type without a known presentValue datatype: by value.
        if (typeof val === 'boolean') return { type: TAG_BOOLEAN, value: val };
        if (typeof val === 'string') return { type: TAG_STRING, value: val };
        return { type: TAG_REAL, value: val };
    }
  }

  close(): Promise<void> {
    if (!this.closed) {
      this.closed = true;
      this.cov.close();
      this.driver.release();
    }
    return Promise.resolve();
  }

  private async readNow(points: readonly BacnetPoint[]): Promise<PointRead[]> {
    if (this.closed) throw downError('the connection is closed');
    for (const p of points) if (p.conn !== this) throw new Error(`point ${p.id} was prepared by another connection`);
    const out = new Array<PointRead>(points.length);
    let i = 0;
    while (i < points.length) {
      if (this.per === 0) {
        await this.readOne(points, i, out);
        i++;
        continue;
      }
      const n = Math.min(this.per, points.length - i);
      const outcome = await this.readMany(points, i, n, out);
      if (outcome === 'retry') continue; // a smaller batch size, or ReadProperty from now on
      i += n;
    }
    return out;
  }

  /** One ReadPropertyMultiple of points [from, from + n). */
  private async readMany(points: readonly BacnetPoint[], from: number, n: number, out: PointRead[]): Promise<'done' | 'retry'> {
    const specs: { objectId: { type: number; instance: number }; properties: { id: number; index: number }[] }[] = [];
    for (let k = from; k < from + n; k++) {
      const a = (points[k] as BacnetPoint).addr;
      specs.push({ objectId: { type: a.type, instance: a.instance }, properties: [{ id: a.property, index: ARRAY_ALL }] });
    }
    let ans: { values: { objectId: { type: number; instance: number }; values: { id: number; value: AppValue[] }[] }[] };
    try {
      ans = await this.request((c) => c.readPropertyMultiple({ address: this.device.address }, specs as never));
    } catch (e) {
      const c = classify(e);
      if (c.kind === 'timeout' || c.kind === 'other') throw this.down(e);
      if (c.kind === 'error' && (c.cls === CLASS_OBJECT || c.cls === CLASS_PROPERTY)) {
        // The whole request refused for one object or property: find out which, point by point.
        for (let k = from; k < from + n; k++) await this.readOne(points, k, out);
        return 'done';
      }
      // Rejected or aborted (no RPM, or an answer too big), or refused as a service: smaller,
      // or ReadProperty at once when the device says it does not know the service at all.
      const before = this.per;
      const unknownService = (c.kind === 'error' && (c.code === CODE_UNRECOGNIZED || c.code === CODE_DENIED)) || (c.kind === 'abort' && c.reason === REJECT_UNRECOGNIZED_SERVICE);
      this.per = n > 1 && !unknownService ? Math.ceil(n / 2) : 0;
      this.driver.log?.(`device ${this.device.address} refused ReadPropertyMultiple of ${n} (${bacnetErrorText(e)}): ${this.per === 0 ? 'ReadProperty from now on' : `batches of ${this.per}`} (was ${before})`);
      return 'retry';
    }
    // Answers come per object, in request order; match them by object and property to be safe.
    const found = new Map<string, AppValue[]>();
    for (const obj of ans.values ?? []) {
      for (const v of obj.values ?? []) found.set(`${obj.objectId.type}:${obj.objectId.instance}:${v.id}`, v.value);
    }
    for (let k = from; k < from + n; k++) {
      const a = (points[k] as BacnetPoint).addr;
      const r = rawOf(found.get(`${a.type}:${a.instance}:${a.property}`)?.[0], `${a.text} of device ${this.device.deviceInstance}`);
      out[k] = typeof r === 'object' ? { err: r } : { val: r };
    }
    return 'done';
  }

  private async readOne(points: readonly BacnetPoint[], k: number, out: PointRead[]): Promise<void> {
    const a = (points[k] as BacnetPoint).addr;
    const what = `${a.text} of device ${this.device.deviceInstance}`;
    try {
      const ans = (await this.request((c) => c.readProperty({ address: this.device.address }, { type: a.type, instance: a.instance }, a.property))) as unknown as { values: AppValue[] };
      const r = rawOf(ans.values[0], what);
      out[k] = typeof r === 'object' ? { err: r } : { val: r };
    } catch (e) {
      const c = classify(e);
      if (c.kind === 'error' && (c.cls === CLASS_OBJECT || c.cls === CLASS_PROPERTY)) {
        out[k] = { err: refusedError(`${what}: the device refused it (${c.cls === CLASS_OBJECT ? 'no such object' : 'no such property'}; ${bacnetErrorText(e)})`, e) };
      } else if (c.kind === 'error' || c.kind === 'abort') {
        out[k] = { err: refusedError(`${what}: the device refused it (${bacnetErrorText(e)})`, e) };
      } else throw this.down(e);
    }
  }

  private down(e: unknown): HayloftError {
    const c = classify(e);
    return c.kind === 'timeout'
      ? downError(`no answer from device ${this.device.deviceInstance} at ${this.device.address} within ${this.timeoutMs} ms`)
      : downError(`device ${this.device.deviceInstance} at ${this.device.address}: ${e instanceof Error ? e.message : String(e)}`, e);
  }

  /** A request with this connector's timeout (the library's own is one for the whole socket). */
  private request<T>(f: (c: Client) => Promise<T>): Promise<T> {
    if (this.closed) throw downError('the connection is closed');
    return timed(f(this.driver.client()), this.timeoutMs).finally(() => this.driver.forgetAnswered());
  }
}

export class BacnetDriver implements Driver {
  readonly name = BACNET_TAGS.name;
  readonly connTag = BACNET_TAGS.connTag;
  readonly refTag = BACNET_TAGS.refTag;
  readonly curTag = BACNET_TAGS.curTag;
  readonly writeTag = BACNET_TAGS.writeTag;
  readonly covTags = BACNET_TAGS.covTags;
  readonly maxPerRequest: number;
  /** Told of batch-size changes (the app logs them). */
  log: ((message: string) => void) | undefined;
  private readonly opts: BacnetDriverOptions;
  /** Request timeout of connectors without a `timeout` tag, and of discovery by default. */
  readonly timeoutMs: number;
  private sock: Client | undefined;
  private foreign: ForeignRegistration | undefined;
  private users = 0;
  private processIds = 0;

  constructor(opts: BacnetDriverOptions = {}) {
    this.opts = opts;
    this.timeoutMs = opts.timeoutMs ?? BACNET_DEFAULT_TIMEOUT_MS;
    this.maxPerRequest = opts.maxPerRequest ?? 20;
  }

  open(conn: ConnSpec): DriverConn {
    const tags: HDict = conn.tags;
    const device = parseBacnetUri(uriTag(tags, 'bacnet://10.0.0.9/1001'));
    const timeoutMs = durationTag(tags, 'timeout', this.timeoutMs);
    this.users++;
    return new BacnetConn(this, conn.id, device, timeoutMs);
  }

  /** The shared socket, held open until `release()` (discovery, learning and COV use it too). */
  acquire(): Client {
    this.users++;
    return this.client();
  }

  /** @internal The shared socket, opened on first use. */
  client(): Client {
    if (this.sock === undefined) {
      const c = new bacnet.default({
        interface: this.opts.interface,
        port: this.opts.port ?? 47808,
        apduTimeout: Math.max(this.timeoutMs, 10_000),
        ...(this.opts.broadcastAddress === undefined ? {} : { broadcastAddress: this.opts.broadcastAddress }),
      });
      // Socket errors (a port in use, an address not on this host) come as events: unheard they
      // would crash the daemon; requests then time out and the connectors show down.
      c.on('error', (err: Error) => this.log?.(`BACnet socket error: ${err.message}`));
      // Every connector's change-of-value listens on the one socket.
      c.setMaxListeners(0);
      this.sock = c;
      if (this.opts.bbmd !== undefined) {
        this.foreign = new ForeignRegistration(() => this.sock, this.opts.bbmd, this.opts.bbmdTtlS ?? 600, () => Date.now(), (_level, msg, detail) => this.log?.(`${msg} ${JSON.stringify(detail)}`));
        this.foreign.start();
      }
    }
    return this.sock;
  }

  /**
   * Drops the library's records of requests that have been answered. @bacnet-js/client keeps
   * each request (its answer or error, with the datagram) in a list that it sweeps only when the
   * oldest entry's apduTimeout (10 s here) is up, so a burst of requests (a learn is thousands)
   * held every answer of the last 10 s or more: 30 MB of heap at the peak of back-to-back learns
   * of 3,000 objects, which the process then kept resident (docs/performance.md). The sweep
   * itself is the library's and drops answered entries, so it runs as each request settles.
   * Reaching into the client is guarded: should a later version rename it, requests still work
   * and are only kept longer.
   */
  forgetAnswered(): void {
    const requests = (this.sock as unknown as { _requestManager?: { clear?: unknown } } | undefined)?._requestManager;
    if (typeof requests?.clear === 'function') (requests.clear as (force: boolean) => void)(false);
  }

  /** A SubscribeCOV process id not used on this socket yet (1 to 2^22 - 1, then round again). */
  nextProcessId(): number {
    this.processIds = (this.processIds % 4194303) + 1;
    return this.processIds;
  }

  /** Gives back a share of the socket taken by `open` or `acquire`. */
  release(): void {
    this.users--;
    if (this.users <= 0) this.closeSocket();
  }

  close(): Promise<void> {
    this.users = 0;
    this.closeSocket();
    return Promise.resolve();
  }

  /** The BBMD configured, if any. */
  get bbmd(): string | undefined {
    return this.opts.bbmd;
  }

  /** The socket's foreign-device registration: null without a BBMD or while the socket is closed. */
  foreignStatus(): ForeignStatus | null {
    return this.foreign?.status() ?? null;
  }

  /** Waits (at most `ms`) for the registration's first outcome: true when registered. */
  foreignSettled(ms: number): Promise<boolean> {
    return this.foreign === undefined ? Promise.resolve(false) : this.foreign.settled(ms);
  }

  private closeSocket(): void {
    this.foreign?.stop();
    this.foreign = undefined;
    const c = this.sock;
    this.sock = undefined;
    try {
      c?.close();
    } catch {
      // already closed
    }
  }
}
