/**
 * A BACnet/IP device simulator for tests: a @bacnet-js/client socket bound to a loopback address
 * other than 127.0.0.1 (the library drops requests from exactly 127.0.0.1), answering
 * ReadProperty and ReadPropertyMultiple from a table of values. It can refuse ReadPropertyMultiple
 * (Reject: unrecognized service), abort answers above a number of properties (no segmentation),
 * fall silent, and stop and start again (a device that disappears and comes back).
 *
 * Writes: WriteProperty sets a value; a commandable object (made with `commandable`) keeps a
 * priority array of 16 slots and a relinquish default, as BACnet clause 19 has it: a write at a
 * priority fills that slot, NULL empties it, presentValue is the first filled slot or the
 * relinquish default, and priorityArray / relinquishDefault can be read. `refuseWrites` answers
 * every write with an error (write access denied); `ackButIgnore` acknowledges writes and keeps
 * nothing (a misbehaving device).
 *
 * The library binds its standard port 47808 when asked for port 0, so a test that needs a port of
 * its own (to run beside the other BACnet tests) asks the system for one with freeUdpPort.
 *
 * For commissioning it also answers Who-Is (with an I-Am to the asker), keeps array properties
 * (objectList) readable whole or by index, and can refuse to send a list longer than
 * `maxList` whole (a device that cannot segment its answer).
 */
import { createSocket } from 'node:dgram';
import bacnet, { ApplicationTag, ConfirmedServiceChoice, ErrorClass, ErrorCode, ObjectType, PropertyIdentifier, Segmentation } from '@bacnet-js/client';

type Client = InstanceType<typeof bacnet.default>;

export interface Value {
  type: number;
  value: unknown;
}

export const real = (v: number): Value => ({ type: ApplicationTag.REAL, value: v });
export const enumerated = (v: number): Value => ({ type: ApplicationTag.ENUMERATED, value: v });
export const unsigned = (v: number): Value => ({ type: ApplicationTag.UNSIGNED_INTEGER, value: v });
export const bool = (v: boolean): Value => ({ type: ApplicationTag.BOOLEAN, value: v });
export const text = (v: string): Value => ({ type: ApplicationTag.CHARACTER_STRING, value: v });
export const nul: Value = { type: ApplicationTag.NULL, value: null };

// The library's enums as plain numbers: values on the wire are numbers, compared as such.
const PV: number = PropertyIdentifier.PRESENT_VALUE;
const PA: number = PropertyIdentifier.PRIORITY_ARRAY;
const RD: number = PropertyIdentifier.RELINQUISH_DEFAULT;
const NULL_TAG: number = ApplicationTag.NULL;

interface Commandable {
  slots: (Value | null)[];
  relinquishDefault: Value;
}
export const objectId = (type: number, instance: number): Value => ({ type: ApplicationTag.OBJECTIDENTIFIER, value: { type, instance } });

const ARRAY_ALL = 0xffffffff;

export interface DeviceOptions {
  address: string;
  port?: number;
  deviceInstance: number;
  /** 'ok'; 'reject': ReadPropertyMultiple is not supported; a number: abort above that many properties. */
  rpm?: 'ok' | 'reject' | number;
  /** Longest array sent whole; a longer one is refused (abort: segmentation not supported). */
  maxList?: number;
  /** Vendor id in the I-Am (default 999). */
  vendorId?: number;
  /** Answers ReadProperty(Multiple) this many ms late (a slow controller). */
  delayMs?: number;
  /** SubscribeCOV: 'ok' (default) or 'refuse' (a device without change of value). */
  cov?: 'ok' | 'refuse';
  /**
   * Answers Who-Is with an I-Am broadcast to this address (its subnet's), as most field devices
   * do, rather than to the asker: behind a BBMD, the BBMD carries it to its foreign devices.
   */
  iAmBroadcast?: string;
}

interface Subscription {
  address: string;
  pid: number;
  type: number;
  instance: number;
  /** Epoch ms when it lapses. */
  until: number;
}

export class BacnetDevice {
  /** `${type}:${instance}:${property}` -> value. */
  readonly values = new Map<string, Value | Value[]>();
  silent = false;
  /** Writes answered with an error: true for write-access-denied, or the class and code to send. */
  refuseWrites: boolean | { cls: number; code: number } = false;
  ackButIgnore = false;
  /** `${type}:${instance}` -> priority array and relinquish default. */
  private readonly commandables = new Map<string, Commandable>();
  /** Priorities of the writes received, in order (null: none given). */
  readonly writePriorities: (number | null)[] = [];
  /** Subscriptions are accepted and renewed, but no notification is sent (a device gone quiet). */
  covMuted = false;
  readonly seen = { rp: 0, rpm: 0, rpmProps: 0, wp: 0, whoIs: 0, listWhole: 0, subscribe: 0, notified: 0 };
  /** COV subscriptions by `address|pid|type:instance`; a restart (stop, start) forgets them. */
  readonly subscriptions = new Map<string, Subscription>();
  /** Where requests came from, as the library names senders (`host`, or `host:port` off 47808). */
  readonly senders = new Set<string>();
  private sock: Client | undefined;
  private bbmd: string | undefined;

  constructor(readonly opts: DeviceOptions) {}

  set(type: number, instance: number, v: Value, property: number = PropertyIdentifier.PRESENT_VALUE): void {
    this.values.set(`${type}:${instance}:${property}`, v);
    if (property === (PropertyIdentifier.PRESENT_VALUE as number)) for (const sub of this.subscriptions.values()) if (sub.type === type && sub.instance === instance) this.notify(sub);
  }

  /** A COV notification of an object's present value to a subscriber (unless lapsed or muted). */
  private notify(sub: Subscription): void {
    const v = this.current(sub.type, sub.instance, PV);
    const left = Math.round((sub.until - Date.now()) / 1000);
    if (this.sock === undefined || this.covMuted || this.silent || v === undefined || Array.isArray(v) || left <= 0) return;
    this.seen.notified++;
    this.sock.unconfirmedCOVNotification({ address: sub.address }, sub.pid, this.opts.deviceInstance, { type: sub.type, instance: sub.instance }, left, [
      { property: { id: PropertyIdentifier.PRESENT_VALUE }, value: [v as never] },
    ]);
  }

  /** Sends an I-Am to `address`, as a device starting up broadcasts one. */
  announce(address: string): void {
    this.sock?.iAmResponse({ address }, this.opts.deviceInstance, Segmentation.SEGMENTED_BOTH, this.opts.vendorId ?? 999);
  }

  /** An array property (objectList, priorityArray). */
  setList(type: number, instance: number, property: number, vs: Value[]): void {
    this.values.set(`${type}:${instance}:${property}`, vs);
  }

  /**
   * A device object with a name, vendor and model, and an object list of the objects set so far
   * (call after the objects' own properties are set).
   */
  describe(name: string, vendor = 'Hayloft Test', model = 'Simulator'): void {
    const dev = ObjectType.DEVICE;
    const id = this.opts.deviceInstance;
    this.set(dev, id, text(name), PropertyIdentifier.OBJECT_NAME);
    this.set(dev, id, text(vendor), PropertyIdentifier.VENDOR_NAME);
    this.set(dev, id, text(model), PropertyIdentifier.MODEL_NAME);
    const objects = new Set<string>([`${dev}:${id}`]);
    for (const k of this.values.keys()) objects.add(k.split(':').slice(0, 2).join(':'));
    const list = [...objects].map((o) => o.split(':').map(Number) as [number, number]);
    this.setList(dev, id, PropertyIdentifier.OBJECT_LIST, list.map(([t, i]) => objectId(t, i)));
  }

  /** The answer to one property (element), or the error a device sends. */
  private lookup(type: number, instance: number, property: number, index: number | undefined): Value[] | { cls: number; code: number } {
    const v = this.current(type, instance, property);
    if (v === undefined) {
      const known = this.knows(type, instance);
      return known ? { cls: ErrorClass.PROPERTY, code: ErrorCode.UNKNOWN_PROPERTY } : { cls: ErrorClass.OBJECT, code: ErrorCode.UNKNOWN_OBJECT };
    }
    if (index === undefined || index === ARRAY_ALL) {
      if (!Array.isArray(v)) return [v];
      this.seen.listWhole++;
      if (this.opts.maxList !== undefined && v.length > this.opts.maxList) return { cls: ErrorClass.SERVICES, code: ErrorCode.ABORT_SEGMENTATION_NOT_SUPPORTED };
      return v;
    }
    if (!Array.isArray(v)) return { cls: ErrorClass.PROPERTY, code: ErrorCode.PROPERTY_IS_NOT_AN_ARRAY };
    if (index === 0) return [unsigned(v.length)];
    const e = v[index - 1];
    return e === undefined ? { cls: ErrorClass.PROPERTY, code: ErrorCode.INVALID_ARRAY_INDEX } : [e];
  }

  /** Makes an object commandable: 16 empty slots and a relinquish default. */
  commandable(type: number, instance: number, relinquishDefault: Value): void {
    this.commandables.set(`${type}:${instance}`, { slots: Array.from({ length: 16 }, () => null), relinquishDefault });
  }

  /** A commandable object's 16 slots (null: empty). */
  priorityArray(type: number, instance: number): (Value | null)[] {
    const c = this.commandables.get(`${type}:${instance}`);
    if (c === undefined) throw new Error(`${type}:${instance} is not commandable`);
    return [...c.slots];
  }

  /** What a property reads as: commandable objects answer from their priority array. */
  private current(type: number, instance: number, property: number): Value | Value[] | undefined {
    const c = this.commandables.get(`${type}:${instance}`);
    if (c !== undefined) {
      if (property === PV) return c.slots.find((x) => x !== null) ?? c.relinquishDefault;
      if (property === PA) return c.slots.map((x) => x ?? nul);
      if (property === RD) return c.relinquishDefault;
    }
    return this.values.get(`${type}:${instance}:${property}`);
  }

  private knows(type: number, instance: number): boolean {
    return this.commandables.has(`${type}:${instance}`) || [...this.values.keys()].some((k) => k.startsWith(`${type}:${instance}:`));
  }

  async start(): Promise<void> {
    const sock = new bacnet.default({ interface: this.opts.address, port: this.opts.port ?? 47808, apduTimeout: 2000, ...(this.opts.iAmBroadcast === undefined ? {} : { broadcastAddress: this.opts.iAmBroadcast }) });
    sock.on('error', () => undefined);
    await new Promise<void>((resolve) => sock.once('listening', () => resolve()));
    const later = (f: () => void): void => {
      if (this.opts.delayMs === undefined) f();
      else setTimeout(() => this.sock === sock && f(), this.opts.delayMs);
    };
    sock.on('readProperty', (c) => later(() => {
      if (this.silent) return;
      this.seen.rp++;
      const to = this.sender(c);
      const { objectId, property } = c.payload;
      const got = this.lookup(objectId.type, objectId.instance, property.id, property.index);
      if (!Array.isArray(got)) {
        sock.errorResponse(to, ConfirmedServiceChoice.READ_PROPERTY, c.invokeId ?? 0, got.cls, got.code);
        return;
      }
      sock.readPropertyResponse(to, c.invokeId ?? 0, objectId, property, got as never);
    }));
    sock.on('writeProperty', (c) => {
      if (this.silent) return;
      this.seen.wp++;
      const to = this.sender(c);
      const { objectId, value } = c.payload;
      const key = `${objectId.type}:${objectId.instance}`;
      const prio = typeof value.priority === 'number' && value.priority >= 1 && value.priority <= 16 ? value.priority : null;
      this.writePriorities.push(prio);
      if (this.refuseWrites !== false) {
        const r = this.refuseWrites === true ? { cls: ErrorClass.PROPERTY, code: ErrorCode.WRITE_ACCESS_DENIED } : this.refuseWrites;
        sock.errorResponse(to, ConfirmedServiceChoice.WRITE_PROPERTY, c.invokeId ?? 0, r.cls, r.code);
        return;
      }
      if (!this.knows(objectId.type, objectId.instance)) {
        sock.errorResponse(to, ConfirmedServiceChoice.WRITE_PROPERTY, c.invokeId ?? 0, ErrorClass.OBJECT, ErrorCode.UNKNOWN_OBJECT);
        return;
      }
      const written = value.value[0] as Value | undefined;
      if (!this.ackButIgnore && written !== undefined) {
        const cmd = this.commandables.get(key);
        if (cmd !== undefined && (value.property.id as number) === PV) {
          // No priority given: 16, the lowest (clause 19.2.2).
          cmd.slots[(prio ?? 16) - 1] = written.type === NULL_TAG ? null : { type: written.type, value: written.value };
        } else if (written.type !== NULL_TAG) this.values.set(`${key}:${value.property.id}`, { type: written.type, value: written.value });
      }
      sock.simpleAckResponse(to, ConfirmedServiceChoice.WRITE_PROPERTY, c.invokeId ?? 0);
    });
    sock.on('readPropertyMultiple', (c) => later(() => {
      if (this.silent) return;
      this.seen.rpm++;
      const to = this.sender(c);
      const reqs = c.payload.properties;
      const count = reqs.reduce((n, r) => n + r.properties.length, 0);
      this.seen.rpmProps += count;
      const mode = this.opts.rpm ?? 'ok';
      if (mode === 'reject') {
        // Reject, unrecognized service: a device without ReadPropertyMultiple.
        sock.errorResponse(to, ConfirmedServiceChoice.READ_PROPERTY_MULTIPLE, c.invokeId ?? 0, ErrorClass.SERVICES, ErrorCode.REJECT_UNRECOGNIZED_SERVICE);
        return;
      }
      if (typeof mode === 'number' && count > mode) {
        sock.errorResponse(to, ConfirmedServiceChoice.READ_PROPERTY_MULTIPLE, c.invokeId ?? 0, ErrorClass.SERVICES, ErrorCode.ABORT_SEGMENTATION_NOT_SUPPORTED);
        return;
      }
      const values = reqs.map((r) => ({
        objectId: r.objectId,
        values: r.properties.map((p) => {
          const got = this.lookup(r.objectId.type, r.objectId.instance, p.id, p.index);
          return {
            property: { id: p.id, index: p.index },
            value: Array.isArray(got) ? got : [{ value: { type: 'BacnetError', errorClass: got.cls, errorCode: got.code } }],
          };
        }),
      }));
      sock.readPropertyMultipleResponse(to, c.invokeId ?? 0, values);
    }));
    sock.on('subscribeCov', (c) => {
      if (this.silent) return;
      this.seen.subscribe++;
      const to = this.sender(c);
      const { subscriberProcessId: pid, monitoredObjectId: o, lifetime } = c.payload as { subscriberProcessId: number; monitoredObjectId: { type: number; instance: number }; lifetime: number; cancellationRequest?: boolean };
      if (this.opts.cov === 'refuse') {
        sock.errorResponse(to, ConfirmedServiceChoice.SUBSCRIBE_COV, c.invokeId ?? 0, ErrorClass.OBJECT, ErrorCode.OPTIONAL_FUNCTIONALITY_NOT_SUPPORTED);
        return;
      }
      if (!this.values.has(`${o.type}:${o.instance}:${PropertyIdentifier.PRESENT_VALUE}`)) {
        sock.errorResponse(to, ConfirmedServiceChoice.SUBSCRIBE_COV, c.invokeId ?? 0, ErrorClass.OBJECT, ErrorCode.UNKNOWN_OBJECT);
        return;
      }
      const key = `${to.address}|${pid}|${o.type}:${o.instance}`;
      if ((c.payload as { cancellationRequest?: boolean }).cancellationRequest === true) this.subscriptions.delete(key);
      else this.subscriptions.set(key, { address: to.address, pid, type: o.type, instance: o.instance, until: Date.now() + lifetime * 1000 });
      sock.simpleAckResponse(to, ConfirmedServiceChoice.SUBSCRIBE_COV, c.invokeId ?? 0);
      // The standard's initial notification: the current value, at once.
      const sub = this.subscriptions.get(key);
      if (sub !== undefined) setTimeout(() => this.notify(sub), 5);
    });
    sock.on('whoIs', (c) => {
      if (this.silent) return;
      this.seen.whoIs++;
      const { lowLimit, highLimit } = c.payload as { lowLimit?: number; highLimit?: number };
      const id = this.opts.deviceInstance;
      if ((lowLimit !== undefined && id < lowLimit) || (highLimit !== undefined && id > highLimit)) return;
      if (this.bbmd !== undefined) {
        // A foreign device broadcasts its I-Am through its BBMD (Distribute-Broadcast-To-Network).
        sock.iAmResponse({ address: this.bbmd, distributeBroadcastToNetwork: true }, id, Segmentation.SEGMENTED_BOTH, this.opts.vendorId ?? 999);
        return;
      }
      // No receiver: the library sends an Original-Broadcast-NPDU to its broadcastAddress.
      const to = this.opts.iAmBroadcast !== undefined ? (undefined as never) : this.sender(c);
      sock.iAmResponse(to, id, this.opts.maxList === undefined ? Segmentation.SEGMENTED_BOTH : Segmentation.NO_SEGMENTATION, this.opts.vendorId ?? 999);
    });
    this.sock = sock;
  }

  /** Registers as a foreign device with a BBMD (`host:port`); Who-Is is then answered through it. */
  async registerForeign(bbmd: string, ttl = 60): Promise<void> {
    await this.sock?.registerForeignDevice({ address: bbmd }, ttl);
    this.bbmd = bbmd;
  }

  private sender(c: { header?: { sender?: { address?: string } } }): { address: string } {
    const address = c.header?.sender?.address ?? '';
    this.senders.add(address);
    return { address };
  }

  /** The device disappears (its socket closes). */
  stop(): void {
    this.sock?.close();
    this.sock = undefined;
    this.subscriptions.clear();
  }
}

/** A UDP port free on `address` now (the system picks it; the socket is closed again at once). */
export async function freeUdpPort(address: string): Promise<number> {
  const sock = createSocket('udp4');
  await new Promise<void>((resolve, reject) => {
    sock.once('error', reject);
    sock.bind(0, address, () => resolve());
  });
  const { port } = sock.address();
  await new Promise<void>((resolve) => sock.close(() => resolve()));
  return port;
}
