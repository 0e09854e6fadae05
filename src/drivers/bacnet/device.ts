/**
 * Hayloft as a BACnet/IP device (the server side of BACnet), on @bacnet-js/client's socket: it
 * answers Who-Is (I-Am), Who-Has (I-Have), ReadProperty, ReadPropertyMultiple, WriteProperty and
 * SubscribeCOV, and sends COV notifications (confirmed or not). What the objects are, what they
 * hold and what a write does is the backend's (`DeviceBackend`, given by src/export/): this file
 * knows BACnet, not the model (drivers may not import it; docs/design/README.md).
 *
 * Objects: a Device object with its required properties (clause 12.11), and analog, binary and
 * multi-state inputs, values and outputs with theirs (12.2-12.7, 12.18-12.20): presentValue,
 * statusFlags, eventState, outOfService, units or state texts, and, for commandable objects, the
 * priority array and relinquish default (clause 19).
 *
 * Segmentation: the library sends answers of one datagram only (it would throw on a longer one),
 * so answers longer than the client's maximum APDU are segmented here (clause 5.2, a window of
 * one segment, each acknowledged by the client's Segment-ACK). Segment-ACKs reach this file by a
 * guarded hook on the library's PDU dispatch (`hookSegmentAcks`): the library has no other way to
 * hand them over, and would otherwise take them as segments of its own.
 */
import { createRequire } from 'node:module';
import bacnet, {
  ApplicationTag,
  ConfirmedServiceChoice,
  ErrorClass,
  ErrorCode,
  EventState,
  ObjectType,
  ObjectTypesSupported,
  PDU_TYPE_MASK,
  PduType,
  PropertyIdentifier as P,
  Segmentation,
  ServicesSupported,
} from '@bacnet-js/client';
import { type ForeignStatus, ForeignRegistration } from './foreign.js';
import type * as ApduModule from '@bacnet-js/client/dist/lib/apdu.js';
import type * as NpduModule from '@bacnet-js/client/dist/lib/npdu.js';
import type * as ServicesModule from '@bacnet-js/client/dist/lib/services/index.js';

type Client = InstanceType<typeof bacnet.default>;

// The library's encoders, which its index does not export (CommonJS modules of its package).
const requireLib = createRequire(import.meta.url);
const apdu = requireLib('@bacnet-js/client/dist/lib/apdu.js') as typeof ApduModule;
const npdu = requireLib('@bacnet-js/client/dist/lib/npdu.js') as typeof NpduModule;
const services = requireLib('@bacnet-js/client/dist/lib/services/index.js') as typeof ServicesModule;

export interface AppValue {
  type: number;
  value: unknown;
}

/** What kind of object a point is shown as. */
export type ObjectKind = 'analog' | 'binary' | 'multiState';

export interface ExportObject {
  readonly type: number;
  readonly instance: number;
  readonly kind: ObjectKind;
  readonly name: string;
  readonly description: string;
  /** BACnet engineering units of an analog object (95, no-units, when none). */
  readonly units: number;
  /** Multi-state objects: the state texts (states 1..n). */
  readonly stateTexts: readonly string[];
  /** Outputs, and values with a priority array. */
  readonly commandable: boolean;
}

/** presentValue and status, as the backend knows them now. */
export interface ObjectState {
  /** REAL for analog, 0/1 for binary, 1..n for multi-state; null when there is none (not read yet, down). */
  value: number | null;
  fault: boolean;
  outOfService: boolean;
  /** Held by a priority below the relinquish default (commandable objects). */
  overridden: boolean;
}

/** A refusal the client gets as a BACnet Error. */
export class DeviceRefusal extends Error {
  constructor(
    readonly errorClass: number,
    readonly errorCode: number,
    message: string,
  ) {
    super(message);
  }
}

export interface DeviceBackend {
  /** Every exported object, in a stable order (the object list). */
  objects(): readonly ExportObject[];
  object(type: number, instance: number): ExportObject | undefined;
  state(o: ExportObject): ObjectState;
  /** Commandable objects: slots 1-16 (null: empty) and the relinquish default (level 17). */
  priorityArray(o: ExportObject): { slots: (number | null)[]; relinquishDefault: number | null };
  /** A WriteProperty of presentValue: a value (or null: relinquish) at a priority 1-16; throws DeviceRefusal. */
  write(o: ExportObject, value: number | null, priority: number, from: string): Promise<void>;
}

export interface DeviceOptions {
  instance: number;
  name: string;
  /** Local address to bind (0.0.0.0: all). */
  interface: string;
  port: number;
  vendorName: string;
  modelName: string;
  firmwareRevision: string;
  /** Where I-Am goes when the device starts (the library's broadcast address by default). */
  broadcastAddress?: string;
  /** Most COV subscriptions held at once. */
  maxSubscriptions?: number;
  /** Register as a foreign device with this BBMD (`host:port`) for `bbmdTtlS` seconds (foreign.ts). */
  bbmd?: string;
  bbmdTtlS?: number;
  /** How long to wait for a Segment-ACK or a confirmed notification's answer. */
  apduTimeoutMs?: number;
  log?: (level: 'info' | 'warn' | 'debug', msg: string, detail?: Record<string, unknown>) => void;
}

/** The vendor identifier for a device without one registered with ASHRAE (0 is ASHRAE's own). */
export const VENDOR_ID = 0;
const MAX_APDU = 1476;
const ARRAY_ALL = 0xffffffff;
const WILDCARD_DEVICE = 4194303;
const T = ApplicationTag;

/** Object types by kind: input, value, output. */
export const OBJECT_TYPES: Readonly<Record<ObjectKind, { input: number; value: number; output: number }>> = {
  analog: { input: ObjectType.ANALOG_INPUT, value: ObjectType.ANALOG_VALUE, output: ObjectType.ANALOG_OUTPUT },
  binary: { input: ObjectType.BINARY_INPUT, value: ObjectType.BINARY_VALUE, output: ObjectType.BINARY_OUTPUT },
  multiState: { input: ObjectType.MULTI_STATE_INPUT, value: ObjectType.MULTI_STATE_VALUE, output: ObjectType.MULTI_STATE_OUTPUT },
};
const OUTPUTS = new Set<number>([ObjectType.ANALOG_OUTPUT, ObjectType.BINARY_OUTPUT, ObjectType.MULTI_STATE_OUTPUT]);
const INPUTS = new Set<number>([ObjectType.ANALOG_INPUT, ObjectType.BINARY_INPUT, ObjectType.MULTI_STATE_INPUT]);

const SUPPORTED_SERVICES = [
  ServicesSupported.READ_PROPERTY,
  ServicesSupported.READ_PROPERTY_MULTIPLE,
  ServicesSupported.WRITE_PROPERTY,
  ServicesSupported.SUBSCRIBE_COV,
  ServicesSupported.WHO_IS,
  ServicesSupported.I_AM,
  ServicesSupported.WHO_HAS,
  ServicesSupported.I_HAVE,
  ServicesSupported.CONFIRMED_COV_NOTIFICATION,
  ServicesSupported.UNCONFIRMED_COV_NOTIFICATION,
];
const SUPPORTED_TYPES = [
  ObjectTypesSupported.DEVICE,
  ObjectTypesSupported.ANALOG_INPUT,
  ObjectTypesSupported.ANALOG_OUTPUT,
  ObjectTypesSupported.ANALOG_VALUE,
  ObjectTypesSupported.BINARY_INPUT,
  ObjectTypesSupported.BINARY_OUTPUT,
  ObjectTypesSupported.BINARY_VALUE,
  ObjectTypesSupported.MULTI_STATE_INPUT,
  ObjectTypesSupported.MULTI_STATE_OUTPUT,
  ObjectTypesSupported.MULTI_STATE_VALUE,
];

/** A BIT STRING of `size` bits with `set` on (the library's layout: bit i in byte i/8, 1 << i%8). */
function bits(size: number, set: readonly number[]): AppValue {
  const bytes = new Array<number>(Math.ceil(size / 8)).fill(0);
  for (const i of set) bytes[i >> 3] = (bytes[i >> 3] as number) | (1 << (i & 7));
  return { type: T.BIT_STRING, value: { bitsUsed: size, value: bytes } };
}
const maxOf = (e: object): number => Math.max(...Object.values(e).filter((v): v is number => typeof v === 'number'));

const real = (v: number): AppValue => ({ type: T.REAL, value: v });
const enumerated = (v: number): AppValue => ({ type: T.ENUMERATED, value: v });
const unsigned = (v: number): AppValue => ({ type: T.UNSIGNED_INTEGER, value: v });
const str = (v: string): AppValue => ({ type: T.CHARACTER_STRING, value: v });
const bool = (v: boolean): AppValue => ({ type: T.BOOLEAN, value: v });
const oid = (type: number, instance: number): AppValue => ({ type: T.OBJECTIDENTIFIER, value: { type, instance } });
const NULL: AppValue = { type: T.NULL, value: null };

/** The value of a presentValue-like slot in the object's datatype. */
function typed(kind: ObjectKind, v: number): AppValue {
  return kind === 'analog' ? real(v) : kind === 'binary' ? enumerated(v) : unsigned(v);
}

type Answer = AppValue[] | DeviceRefusal;
const refuse = (cls: number, code: number, message: string): DeviceRefusal => new DeviceRefusal(cls, code, message);
const unknownProperty = (): DeviceRefusal => refuse(ErrorClass.PROPERTY, ErrorCode.UNKNOWN_PROPERTY, 'unknown property');

interface Subscription {
  readonly address: string;
  readonly pid: number;
  readonly type: number;
  readonly instance: number;
  readonly confirmed: boolean;
  /** Epoch-free monotonic ms when it lapses (Infinity: lifetime 0, until cancelled). */
  until: number;
}

/** A segmented answer waiting for its Segment-ACKs. */
interface Transfer {
  readonly key: string;
  readonly onAck: (seq: number, negative: boolean) => void;
}

export interface DeviceStats {
  subscriptions: number;
  requests: number;
  notifications: number;
  segmented: number;
}

export class BacnetDeviceServer {
  private sock: Client | undefined;
  private readonly subs = new Map<string, Subscription>();
  private readonly transfers = new Map<string, Transfer>();
  private databaseRevision = 1;
  private foreign: ForeignRegistration | undefined;
  readonly stats: DeviceStats = { subscriptions: 0, requests: 0, notifications: 0, segmented: 0 };

  constructor(
    private readonly opts: DeviceOptions,
    private readonly backend: DeviceBackend,
  ) {}

  /** Binds the socket and announces the device (I-Am), as a device starting up does. */
  async start(): Promise<void> {
    const c = new bacnet.default({
      interface: this.opts.interface,
      port: this.opts.port,
      apduTimeout: this.opts.apduTimeoutMs ?? 3000,
      ...(this.opts.broadcastAddress === undefined ? {} : { broadcastAddress: this.opts.broadcastAddress }),
    });
    await new Promise<void>((resolve, reject) => {
      c.once('listening', () => resolve());
      c.once('error', reject);
    });
    c.on('error', (err: Error) => this.opts.log?.('warn', `BACnet device socket error: ${err.message}`));
    this.sock = c;
    this.hookSegmentAcks(c);
    c.on('whoIs', (m) => this.guard(() => this.whoIs(m)));
    c.on('whoHas', (m) => this.guard(() => this.whoHas(m)));
    c.on('readProperty', (m) => this.guard(() => this.readProperty(m)));
    c.on('readPropertyMultiple', (m) => this.guard(() => this.readPropertyMultiple(m)));
    c.on('writeProperty', (m) => this.guard(() => this.writeProperty(m)));
    c.on('subscribeCov', (m) => this.guard(() => this.subscribeCov(m)));
    this.announce();
    if (this.opts.bbmd !== undefined) {
      // Announced through the BBMD once registered, so front-ends on its networks learn of it.
      this.foreign = new ForeignRegistration(() => this.sock, this.opts.bbmd, this.opts.bbmdTtlS ?? 600, () => Date.now(), this.opts.log, () => this.announce());
      this.foreign.start();
    }
  }

  /** The foreign-device registration, when a BBMD is configured. */
  foreignStatus(): ForeignStatus | null {
    return this.foreign?.status() ?? null;
  }

  /** The socket, for the foreign-device registration that shares it. */
  get client(): Client | undefined {
    return this.sock;
  }

  stop(): void {
    this.foreign?.stop();
    const c = this.sock;
    this.sock = undefined;
    this.subs.clear();
    this.transfers.clear();
    try {
      c?.close();
    } catch {
      // already closed
    }
  }

  /**
   * I-Am to the local broadcast address and, while registered as a foreign device, to the BBMD's
   * networks (Distribute-Broadcast-To-Network).
   */
  announce(): void {
    const c = this.sock;
    if (c === undefined) return;
    c.iAmResponse(null as never, this.opts.instance, Segmentation.SEGMENTED_BOTH, VENDOR_ID);
    if (this.foreign?.status().state === 'registered') c.iAmResponse({ address: this.opts.bbmd, distributeBroadcastToNetwork: true }, this.opts.instance, Segmentation.SEGMENTED_BOTH, VENDOR_ID);
  }

  /** The object list changed (objects added, removed or renamed): the database revision moves. */
  objectsChanged(): void {
    this.databaseRevision++;
    const now = performance.now();
    for (const [k, s] of this.subs) if (s.until <= now || this.backend.object(s.type, s.instance) === undefined) this.subs.delete(k);
    this.stats.subscriptions = this.subs.size;
  }

  /** An object's value or status changed: its subscribers are notified. */
  changed(type: number, instance: number): void {
    if (this.sock === undefined) return;
    const now = performance.now();
    for (const [k, s] of this.subs) {
      if (s.type !== type || s.instance !== instance) continue;
      if (s.until <= now) {
        this.subs.delete(k);
        continue;
      }
      this.notify(s);
    }
    this.stats.subscriptions = this.subs.size;
  }

  subscriptions(): { address: string; pid: number; type: number; instance: number; confirmed: boolean; remainingS: number | null }[] {
    const now = performance.now();
    return [...this.subs.values()]
      .filter((s) => s.until > now)
      .map((s) => ({ address: s.address, pid: s.pid, type: s.type, instance: s.instance, confirmed: s.confirmed, remainingS: s.until === Infinity ? null : Math.round((s.until - now) / 1000) }));
  }

  // ---------------------------------------------------------------------------------------------
  // Services

  /** A handler's failure answers nothing rather than crashing the daemon (the UDP socket's event). */
  private guard(f: () => unknown): void {
    this.stats.requests++;
    try {
      const r = f();
      if (r instanceof Promise) r.catch((err: unknown) => this.opts.log?.('warn', `BACnet device: ${err instanceof Error ? err.message : String(err)}`));
    } catch (err) {
      this.opts.log?.('warn', `BACnet device: ${err instanceof Error ? err.message : String(err)}`);
    }
  }

  private whoIs(m: { header?: { sender?: { address?: string; forwardedFrom?: string | null } }; payload: { lowLimit?: number; highLimit?: number } }): void {
    const { lowLimit, highLimit } = m.payload;
    const id = this.opts.instance;
    if ((lowLimit !== undefined && id < lowLimit) || (highLimit !== undefined && id > highLimit)) return;
    // I-Am is broadcast (clause 16.10.2), so every client on the network learns of the device; a
    // Who-Is forwarded from another network (a BBMD) is answered to its sender as well.
    this.announce();
    // And to the asker: directly, also when its Who-Is was forwarded by a BBMD (forwardedFrom).
    const s = m.header?.sender;
    const asker = s?.forwardedFrom ?? s?.address;
    if (asker !== undefined && asker !== null) this.sock?.iAmResponse({ address: asker }, id, Segmentation.SEGMENTED_BOTH, VENDOR_ID);
  }

  private whoHas(m: { header?: { sender?: { address?: string } }; payload: { lowLimit?: number; highLimit?: number; objectId?: { type: number; instance: number }; objectName?: string } }): void {
    const { lowLimit, highLimit, objectId, objectName } = m.payload;
    const id = this.opts.instance;
    if ((lowLimit !== undefined && id < lowLimit) || (highLimit !== undefined && id > highLimit)) return;
    let found: { type: number; instance: number; name: string } | undefined;
    if (objectId !== undefined) {
      if (objectId.type === (ObjectType.DEVICE as number) && (objectId.instance === id || objectId.instance === WILDCARD_DEVICE)) found = { type: ObjectType.DEVICE, instance: id, name: this.opts.name };
      const o = this.backend.object(objectId.type, objectId.instance);
      if (o !== undefined) found = o;
    } else if (objectName !== undefined) {
      if (objectName === this.opts.name) found = { type: ObjectType.DEVICE, instance: id, name: this.opts.name };
      else found = this.backend.objects().find((o) => o.name === objectName);
    }
    if (found === undefined) return;
    // Broadcast (clause 16.9.2), and to the asker, who may be on another network (as I-Am).
    const dev = { type: ObjectType.DEVICE as number, instance: id };
    this.sock?.iHaveResponse(null as never, dev, { type: found.type, instance: found.instance }, found.name);
    const sender = m.header?.sender?.address;
    if (sender !== undefined) this.sock?.iHaveResponse({ address: sender }, dev, { type: found.type, instance: found.instance }, found.name);
  }

  private readProperty(m: ConfirmedRequest & { payload: { objectId: { type: number; instance: number }; property: { id: number; index?: number } } }): void {
    const { objectId, property } = m.payload;
    const oidNow = this.resolve(objectId);
    const got = this.read(oidNow, property.id, property.index);
    if (got instanceof DeviceRefusal) return this.error(m, ConfirmedServiceChoice.READ_PROPERTY, got);
    const index = property.index === undefined || property.index === ARRAY_ALL ? ARRAY_ALL : property.index;
    this.complexAck(m, ConfirmedServiceChoice.READ_PROPERTY, (buf) => services.ReadProperty.encodeAcknowledge(buf, oidNow, property.id, index, got as never));
  }

  private readPropertyMultiple(m: ConfirmedRequest & { payload: { properties: { objectId: { type: number; instance: number }; properties: { id: number; index: number }[] }[] } }): void {
    const out = m.payload.properties.map((spec) => {
      const id = this.resolve(spec.objectId);
      const values: { property: { id: number; index: number }; value: unknown[] }[] = [];
      for (const p of spec.properties) {
        const expand = p.id === (P.ALL as number) || p.id === (P.REQUIRED as number) || p.id === (P.OPTIONAL as number);
        if (expand) {
          const list = this.propertyList(id);
          if (list instanceof DeviceRefusal) values.push({ property: { id: p.id, index: ARRAY_ALL }, value: [errorValue(list)] });
          else for (const pid of list) values.push({ property: { id: pid, index: ARRAY_ALL }, value: asValues(this.read(id, pid, undefined)) });
          continue;
        }
        values.push({ property: { id: p.id, index: p.index ?? ARRAY_ALL }, value: asValues(this.read(id, p.id, p.index)) });
      }
      return { objectId: id, values };
    });
    this.complexAck(m, ConfirmedServiceChoice.READ_PROPERTY_MULTIPLE, (buf) => services.ReadPropertyMultiple.encodeAcknowledge(buf, out as never));
  }

  private async writeProperty(m: ConfirmedRequest & { payload: { objectId: { type: number; instance: number }; value: { property: { id: number; index?: number }; value: AppValue[]; priority: number } } }): Promise<void> {
    const { objectId, value } = m.payload;
    const service = ConfirmedServiceChoice.WRITE_PROPERTY;
    const id = this.resolve(objectId);
    const from = m.header?.sender?.address ?? 'unknown';
    if (id.type === (ObjectType.DEVICE as number)) {
      if (id.instance !== this.opts.instance) return this.error(m, service, refuse(ErrorClass.OBJECT, ErrorCode.UNKNOWN_OBJECT, 'unknown object'));
      return this.error(m, service, this.read(id, value.property.id, undefined) instanceof DeviceRefusal ? unknownProperty() : refuse(ErrorClass.PROPERTY, ErrorCode.WRITE_ACCESS_DENIED, 'read only'));
    }
    const o = this.backend.object(id.type, id.instance);
    if (o === undefined) return this.error(m, service, refuse(ErrorClass.OBJECT, ErrorCode.UNKNOWN_OBJECT, 'unknown object'));
    const pid = value.property.id;
    if (pid !== (P.PRESENT_VALUE as number)) {
      return this.error(m, service, this.read(id, pid, undefined) instanceof DeviceRefusal ? unknownProperty() : refuse(ErrorClass.PROPERTY, ErrorCode.WRITE_ACCESS_DENIED, 'read only'));
    }
    if (!o.commandable) return this.error(m, service, refuse(ErrorClass.PROPERTY, ErrorCode.WRITE_ACCESS_DENIED, 'not commandable'));
    if (value.property.index !== undefined && value.property.index !== ARRAY_ALL) return this.error(m, service, refuse(ErrorClass.PROPERTY, ErrorCode.PROPERTY_IS_NOT_AN_ARRAY, 'not an array'));
    // No priority given: 16, the lowest (clause 19.2.2).
    const priority = typeof value.priority === 'number' && value.priority !== 0 ? value.priority : 16;
    if (!Number.isInteger(priority) || priority < 1 || priority > 16) return this.error(m, service, refuse(ErrorClass.PROPERTY, ErrorCode.VALUE_OUT_OF_RANGE, 'priority out of range'));
    const v = value.value[0];
    let n: number | null;
    if (v === undefined || value.value.length !== 1) return this.error(m, service, refuse(ErrorClass.PROPERTY, ErrorCode.INVALID_DATA_TYPE, 'one value expected'));
    if (v.type === (T.NULL as number)) n = null;
    else {
      const checked = checkValue(o.kind, v, o.stateTexts.length);
      if (checked instanceof DeviceRefusal) return this.error(m, service, checked);
      n = checked;
    }
    try {
      await this.backend.write(o, n, priority, from);
    } catch (e) {
      const r = e instanceof DeviceRefusal ? e : refuse(ErrorClass.DEVICE, ErrorCode.OTHER, e instanceof Error ? e.message : String(e));
      return this.error(m, service, r);
    }
    this.sock?.simpleAckResponse(this.to(m), service, m.invokeId ?? 0);
  }

  private subscribeCov(m: ConfirmedRequest & { payload: { subscriberProcessId: number; monitoredObjectId: { type: number; instance: number }; issueConfirmedNotifications?: boolean; lifetime?: number; cancellationRequest?: boolean } }): void {
    const service = ConfirmedServiceChoice.SUBSCRIBE_COV;
    const { subscriberProcessId: pid, monitoredObjectId: id } = m.payload;
    const address = m.header?.sender?.address ?? '';
    const o = this.backend.object(id.type, id.instance);
    if (o === undefined) return this.error(m, service, refuse(ErrorClass.OBJECT, ErrorCode.UNKNOWN_OBJECT, 'unknown object'));
    const key = `${address}|${pid}|${id.type}:${id.instance}`;
    if (m.payload.cancellationRequest === true) {
      // Cancelling what does not exist is not an error (clause 13.14.1.1.3... "shall be ignored").
      this.subs.delete(key);
      this.stats.subscriptions = this.subs.size;
      this.sock?.simpleAckResponse(this.to(m), service, m.invokeId ?? 0);
      return;
    }
    if (!this.subs.has(key) && this.subs.size >= (this.opts.maxSubscriptions ?? 1000)) {
      return this.error(m, service, refuse(ErrorClass.RESOURCES, ErrorCode.NO_SPACE_TO_ADD_LIST_ELEMENT, 'too many subscriptions'));
    }
    const lifetime = m.payload.lifetime ?? 0;
    const sub: Subscription = { address, pid, type: id.type, instance: id.instance, confirmed: m.payload.issueConfirmedNotifications === true, until: lifetime === 0 ? Infinity : performance.now() + lifetime * 1000 };
    this.subs.set(key, sub);
    this.stats.subscriptions = this.subs.size;
    this.sock?.simpleAckResponse(this.to(m), service, m.invokeId ?? 0);
    // The initial notification, with the current value (clause 13.1.2).
    setImmediate(() => this.subs.get(key) === sub && this.notify(sub));
  }

  private notify(s: Subscription): void {
    const c = this.sock;
    const o = this.backend.object(s.type, s.instance);
    if (c === undefined || o === undefined) return;
    const st = this.backend.state(o);
    const values = [
      { property: { id: P.PRESENT_VALUE as number, index: ARRAY_ALL }, value: [st.value === null ? NULL : typed(o.kind, st.value)] },
      { property: { id: P.STATUS_FLAGS as number, index: ARRAY_ALL }, value: [statusFlags(st)] },
    ];
    const remaining = s.until === Infinity ? 0 : Math.max(1, Math.round((s.until - performance.now()) / 1000));
    this.stats.notifications++;
    if (s.confirmed) {
      c.confirmedCOVNotification({ address: s.address }, { type: s.type, instance: s.instance }, s.pid, this.opts.instance, remaining, values as never).catch((err: unknown) =>
        this.opts.log?.('debug', 'a confirmed COV notification was not acknowledged', { to: s.address, err: err instanceof Error ? err.message : String(err) }),
      );
    } else {
      c.unconfirmedCOVNotification({ address: s.address }, s.pid, this.opts.instance, { type: s.type, instance: s.instance }, remaining, values);
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Properties

  /** The device object's wildcard instance (4194303) is this device. */
  private resolve(id: { type: number; instance: number }): { type: number; instance: number } {
    return id.type === (ObjectType.DEVICE as number) && id.instance === WILDCARD_DEVICE ? { type: id.type, instance: this.opts.instance } : id;
  }

  private propertyList(id: { type: number; instance: number }): number[] | DeviceRefusal {
    if (id.type === (ObjectType.DEVICE as number)) return id.instance === this.opts.instance ? DEVICE_PROPERTIES : refuse(ErrorClass.OBJECT, ErrorCode.UNKNOWN_OBJECT, 'unknown object');
    const o = this.backend.object(id.type, id.instance);
    if (o === undefined) return refuse(ErrorClass.OBJECT, ErrorCode.UNKNOWN_OBJECT, 'unknown object');
    return objectProperties(o);
  }

  /** One property (or element of an array property) of an object. */
  private read(id: { type: number; instance: number }, prop: number, index: number | undefined): Answer {
    const whole = index === undefined || index === ARRAY_ALL;
    let all: AppValue | AppValue[] | DeviceRefusal;
    if (id.type === (ObjectType.DEVICE as number)) {
      if (id.instance !== this.opts.instance) return refuse(ErrorClass.OBJECT, ErrorCode.UNKNOWN_OBJECT, 'unknown object');
      all = this.deviceProperty(prop);
    } else {
      const o = this.backend.object(id.type, id.instance);
      if (o === undefined) return refuse(ErrorClass.OBJECT, ErrorCode.UNKNOWN_OBJECT, 'unknown object');
      all = this.objectProperty(o, prop);
    }
    if (all instanceof DeviceRefusal) return all;
    if (whole) return Array.isArray(all) ? all : [all];
    if (!Array.isArray(all) || !ARRAYS.has(prop)) return refuse(ErrorClass.PROPERTY, ErrorCode.PROPERTY_IS_NOT_AN_ARRAY, 'not an array');
    if (index === 0) return [unsigned(all.length)];
    const e = all[index - 1];
    return e === undefined ? refuse(ErrorClass.PROPERTY, ErrorCode.INVALID_ARRAY_INDEX, 'invalid array index') : [e];
  }

  private deviceProperty(prop: number): AppValue | AppValue[] | DeviceRefusal {
    const o = this.opts;
    switch (prop as P) {
      case P.OBJECT_IDENTIFIER:
        return oid(ObjectType.DEVICE, o.instance);
      case P.OBJECT_NAME:
        return str(o.name);
      case P.OBJECT_TYPE:
        return enumerated(ObjectType.DEVICE);
      case P.SYSTEM_STATUS:
        return enumerated(0); // operational
      case P.VENDOR_NAME:
        return str(o.vendorName);
      case P.VENDOR_IDENTIFIER:
        return unsigned(VENDOR_ID);
      case P.MODEL_NAME:
        return str(o.modelName);
      case P.FIRMWARE_REVISION:
        return str(o.firmwareRevision);
      case P.APPLICATION_SOFTWARE_VERSION:
        return str(o.firmwareRevision);
      case P.DESCRIPTION:
        return str('Hayloft edge gateway');
      case P.PROTOCOL_VERSION:
        return unsigned(1);
      case P.PROTOCOL_REVISION:
        return unsigned(14);
      case P.PROTOCOL_SERVICES_SUPPORTED:
        return bits(maxOf(ServicesSupported) + 1, SUPPORTED_SERVICES);
      case P.PROTOCOL_OBJECT_TYPES_SUPPORTED:
        return bits(maxOf(ObjectTypesSupported) + 1, SUPPORTED_TYPES);
      case P.OBJECT_LIST:
        return [oid(ObjectType.DEVICE, o.instance), ...this.backend.objects().map((x) => oid(x.type, x.instance))];
      case P.STRUCTURED_OBJECT_LIST:
        return [];
      case P.MAX_APDU_LENGTH_ACCEPTED:
        return unsigned(MAX_APDU);
      case P.SEGMENTATION_SUPPORTED:
        return enumerated(Segmentation.SEGMENTED_BOTH);
      case P.MAX_SEGMENTS_ACCEPTED:
        return unsigned(64);
      case P.APDU_TIMEOUT:
        return unsigned(o.apduTimeoutMs ?? 3000);
      case P.NUMBER_OF_APDU_RETRIES:
        return unsigned(3);
      case P.DEVICE_ADDRESS_BINDING:
        return [];
      case P.DATABASE_REVISION:
        return unsigned(this.databaseRevision);
      case P.ACTIVE_COV_SUBSCRIPTIONS:
        return [];
      case P.PROPERTY_LIST:
        return DEVICE_PROPERTIES.filter((p) => !LEFT_OUT_OF_PROPERTY_LIST.has(p)).map(enumerated);
      default:
        return unknownProperty();
    }
  }

  private objectProperty(o: ExportObject, prop: number): AppValue | AppValue[] | DeviceRefusal {
    const st = (): ObjectState => this.backend.state(o);
    switch (prop as P) {
      case P.OBJECT_IDENTIFIER:
        return oid(o.type, o.instance);
      case P.OBJECT_NAME:
        return str(o.name);
      case P.OBJECT_TYPE:
        return enumerated(o.type);
      case P.DESCRIPTION:
        return str(o.description);
      case P.PRESENT_VALUE: {
        const v = st().value;
        return v === null ? NULL : typed(o.kind, v);
      }
      case P.STATUS_FLAGS:
        return statusFlags(st());
      case P.EVENT_STATE:
        return enumerated(EventState.NORMAL);
      case P.RELIABILITY:
        return enumerated(st().fault ? 7 /* unreliable-other */ : 0 /* no-fault-detected */);
      case P.OUT_OF_SERVICE:
        return bool(st().outOfService);
      case P.PROPERTY_LIST:
        return objectProperties(o).filter((p) => !LEFT_OUT_OF_PROPERTY_LIST.has(p)).map(enumerated);
    }
    if (o.kind === 'analog' && prop === (P.UNITS as number)) return enumerated(o.units);
    if (o.kind === 'binary') {
      if (prop === (P.POLARITY as number) && (INPUTS.has(o.type) || OUTPUTS.has(o.type))) return enumerated(0);
      if (prop === (P.ACTIVE_TEXT as number)) return str('true');
      if (prop === (P.INACTIVE_TEXT as number)) return str('false');
    }
    if (o.kind === 'multiState') {
      if (prop === (P.NUMBER_OF_STATES as number)) return unsigned(o.stateTexts.length);
      if (prop === (P.STATE_TEXT as number)) return o.stateTexts.map(str);
    }
    if (o.commandable) {
      if (prop === (P.PRIORITY_ARRAY as number)) {
        const pa = this.backend.priorityArray(o);
        return pa.slots.map((v) => (v === null ? NULL : typed(o.kind, v)));
      }
      if (prop === (P.RELINQUISH_DEFAULT as number)) {
        const d = this.backend.priorityArray(o).relinquishDefault;
        return d === null ? (o.kind === 'analog' ? real(0) : typed(o.kind, o.kind === 'binary' ? 0 : 1)) : typed(o.kind, d);
      }
      if (prop === (P.CURRENT_COMMAND_PRIORITY as number)) {
        const slots = this.backend.priorityArray(o).slots;
        const i = slots.findIndex((v) => v !== null);
        return i < 0 ? NULL : unsigned(i + 1);
      }
    }
    return unknownProperty();
  }

  // ---------------------------------------------------------------------------------------------
  // Answers

  private to(m: ConfirmedRequest): Addr {
    const s = m.header?.sender;
    return { address: s?.address ?? '', ...(s?.forwardedFrom ? { forwardedFrom: s.forwardedFrom } : {}) };
  }

  private error(m: ConfirmedRequest, service: number, r: DeviceRefusal): void {
    this.sock?.errorResponse(this.to(m), service, m.invokeId ?? 0, r.errorClass, r.errorCode);
  }

  /**
   * A Complex-ACK: in one datagram when it fits the client's maximum APDU, else segmented when
   * the client accepts segments (clause 5.2), else an Abort (segmentation-not-supported or
   * buffer-overflow), as the standard has it.
   */
  private complexAck(m: ConfirmedRequest, service: number, encode: (buf: { buffer: Buffer; offset: number }) => void): void {
    const c = this.sock;
    if (c === undefined) return;
    // Encoded into a buffer of its own, as big as needed: the library's is one datagram.
    let size = 1 << 16;
    let data: Buffer | undefined;
    while (data === undefined) {
      const buf = { buffer: Buffer.alloc(size), offset: 0 };
      try {
        encode(buf);
        data = buf.buffer.subarray(0, buf.offset);
      } catch (e) {
        if (!(e instanceof RangeError) || size >= 1 << 26) throw e;
        size *= 4;
      }
    }
    const to = this.to(m);
    const maxApdu = Math.min(MAX_APDU, APDU_SIZES[m.maxApdu ?? 5] ?? MAX_APDU);
    const invokeId = m.invokeId ?? 0;
    if (data.length + 3 <= maxApdu) {
      const out = this.pduBuffer(to);
      apdu.encodeComplexAck(out, PduType.COMPLEX_ACK, service, invokeId);
      data.copy(out.buffer, out.offset);
      out.offset += data.length;
      c.sendBvlc(to, out);
      return;
    }
    const per = maxApdu - 5;
    const count = Math.ceil(data.length / per);
    const acceptsSegments = ((m.type ?? 0) & 0x02) !== 0;
    const maxSegments = SEGMENT_COUNTS[(m.maxSegments ?? 0) >> 4] ?? 0;
    if (!acceptsSegments) return this.abort(to, invokeId, ABORT_SEGMENTATION_NOT_SUPPORTED);
    if (maxSegments !== 0 && count > maxSegments) return this.abort(to, invokeId, ABORT_BUFFER_OVERFLOW);
    this.stats.segmented++;
    this.sendSegments(to, service, invokeId, data, per, count);
  }

  private sendSegments(to: Addr, service: number, invokeId: number, data: Buffer, per: number, count: number): void {
    const key = `${to.address}|${invokeId}`;
    const timeoutMs = this.opts.apduTimeoutMs ?? 3000;
    let seq = 0;
    let tries = 0;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const send = (): void => {
      const c = this.sock;
      if (c === undefined) return;
      const more = seq < count - 1;
      const out = this.pduBuffer(to);
      const type = PduType.COMPLEX_ACK | SEGMENTED_MESSAGE | (more ? MORE_FOLLOWS : 0);
      apdu.encodeComplexAck(out, type, service, invokeId, seq % 256, 1);
      const chunk = data.subarray(seq * per, Math.min(data.length, (seq + 1) * per));
      chunk.copy(out.buffer, out.offset);
      out.offset += chunk.length;
      c.sendBvlc(to, out);
      clearTimeout(timer);
      timer = setTimeout(() => {
        if (++tries > 3) {
          this.transfers.delete(key);
          this.opts.log?.('debug', 'a segmented answer was not acknowledged; given up', { to: to.address, invokeId });
          return;
        }
        send();
      }, timeoutMs);
      timer.unref();
    };
    this.transfers.set(key, {
      key,
      onAck: (ackSeq, negative) => {
        if (ackSeq !== seq % 256) {
          if (negative) send(); // the client asks for the segment it expects again
          return;
        }
        tries = 0;
        if (seq >= count - 1) {
          clearTimeout(timer);
          this.transfers.delete(key);
          return;
        }
        seq++;
        send();
      },
    });
    send();
  }

  private abort(to: Addr, invokeId: number, reason: number): void {
    const out = this.pduBuffer(to);
    apdu.encodeAbort(out, PduType.ABORT | 0x01 /* sent by the server */, invokeId, reason);
    this.sock?.sendBvlc(to, out);
  }

  /** A buffer with room for the BVLC header and the NPDU of an answer to `to`. */
  private pduBuffer(to: Addr): { buffer: Buffer; offset: number } {
    const out = { buffer: Buffer.alloc(1500), offset: to.forwardedFrom ? 10 : 4 };
    npdu.encode(out, 0, to);
    return out;
  }

  /**
   * Segment-ACKs for the segmented answers sent here are taken before the library sees them
   * (it would take them for segments of a message to it). Guarded: should a later version of the
   * library rename its dispatch, answers that fit one datagram still work and long ones time out.
   */
  private hookSegmentAcks(c: Client): void {
    const lib = c as unknown as { _handlePdu?: (buffer: Buffer, offset: number, length: number, header: { apduType: number; sender: { address: string } }) => void };
    const orig = lib._handlePdu;
    if (typeof orig !== 'function') {
      this.opts.log?.('warn', 'this version of @bacnet-js/client hides its PDU dispatch: long answers cannot be segmented');
      return;
    }
    lib._handlePdu = (buffer, offset, length, header) => {
      if ((header.apduType & PDU_TYPE_MASK) === (PduType.SEGMENT_ACK as number)) {
        const ack = apdu.decodeSegmentAck(buffer, offset) as { type: number; originalInvokeId: number; sequencenumber: number };
        const t = this.transfers.get(`${header.sender.address}|${ack.originalInvokeId}`);
        if (t !== undefined) {
          t.onAck(ack.sequencenumber, (ack.type & 0x02) !== 0);
          return;
        }
      }
      orig.call(c, buffer, offset, length, header);
    };
  }
}

type Addr = { address: string; forwardedFrom?: string };

interface ConfirmedRequest {
  header?: { sender?: { address?: string; forwardedFrom?: string | null } };
  invokeId?: number;
  /** The request's PDU type octet, with its segmented-response-accepted bit. */
  type?: number;
  maxSegments?: number;
  maxApdu?: number;
}

const SEGMENTED_MESSAGE = 0x08;
const MORE_FOLLOWS = 0x04;
const ABORT_BUFFER_OVERFLOW = 1;
const ABORT_SEGMENTATION_NOT_SUPPORTED = 4;
/** Max-APDU-length-accepted codes (clause 20.1.2.5). */
const APDU_SIZES = [50, 128, 206, 480, 1024, 1476];
/** Max-segments-accepted codes (clause 20.1.2.4): 0 unspecified (taken as no limit). */
const SEGMENT_COUNTS = [0, 2, 4, 8, 16, 32, 64, 0];

/** Array properties (index 0 is the length). */
const ARRAYS = new Set<number>([P.OBJECT_LIST, P.STRUCTURED_OBJECT_LIST, P.PRIORITY_ARRAY, P.STATE_TEXT, P.PROPERTY_LIST]);
/** Property_List leaves out these four (clause 12.1.1.4.1). */
const LEFT_OUT_OF_PROPERTY_LIST = new Set<number>([P.OBJECT_IDENTIFIER, P.OBJECT_NAME, P.OBJECT_TYPE, P.PROPERTY_LIST]);

const DEVICE_PROPERTIES: number[] = [
  P.OBJECT_IDENTIFIER,
  P.OBJECT_NAME,
  P.OBJECT_TYPE,
  P.SYSTEM_STATUS,
  P.VENDOR_NAME,
  P.VENDOR_IDENTIFIER,
  P.MODEL_NAME,
  P.FIRMWARE_REVISION,
  P.APPLICATION_SOFTWARE_VERSION,
  P.DESCRIPTION,
  P.PROTOCOL_VERSION,
  P.PROTOCOL_REVISION,
  P.PROTOCOL_SERVICES_SUPPORTED,
  P.PROTOCOL_OBJECT_TYPES_SUPPORTED,
  P.OBJECT_LIST,
  P.STRUCTURED_OBJECT_LIST,
  P.MAX_APDU_LENGTH_ACCEPTED,
  P.SEGMENTATION_SUPPORTED,
  P.MAX_SEGMENTS_ACCEPTED,
  P.APDU_TIMEOUT,
  P.NUMBER_OF_APDU_RETRIES,
  P.DEVICE_ADDRESS_BINDING,
  P.DATABASE_REVISION,
  P.ACTIVE_COV_SUBSCRIPTIONS,
  P.PROPERTY_LIST,
];

function objectProperties(o: ExportObject): number[] {
  const ps: number[] = [P.OBJECT_IDENTIFIER, P.OBJECT_NAME, P.OBJECT_TYPE, P.DESCRIPTION, P.PRESENT_VALUE, P.STATUS_FLAGS, P.EVENT_STATE, P.RELIABILITY, P.OUT_OF_SERVICE];
  if (o.kind === 'analog') ps.push(P.UNITS);
  if (o.kind === 'binary') {
    if (INPUTS.has(o.type) || OUTPUTS.has(o.type)) ps.push(P.POLARITY);
    ps.push(P.ACTIVE_TEXT, P.INACTIVE_TEXT);
  }
  if (o.kind === 'multiState') ps.push(P.NUMBER_OF_STATES, P.STATE_TEXT);
  if (o.commandable) ps.push(P.PRIORITY_ARRAY, P.RELINQUISH_DEFAULT, P.CURRENT_COMMAND_PRIORITY);
  ps.push(P.PROPERTY_LIST);
  return ps;
}

/** in-alarm, fault, overridden, out-of-service (clause 12.2.8). */
function statusFlags(st: ObjectState): AppValue {
  const set: number[] = [];
  if (st.fault) set.push(1);
  if (st.overridden) set.push(2);
  if (st.outOfService) set.push(3);
  return bits(4, set);
}

/** A written presentValue in the object's datatype and range, as a number. */
function checkValue(kind: ObjectKind, v: AppValue, states: number): number | DeviceRefusal {
  const n = typeof v.value === 'number' ? v.value : typeof v.value === 'boolean' ? (v.value ? 1 : 0) : NaN;
  switch (kind) {
    case 'analog':
      if (v.type !== (T.REAL as number) && v.type !== (T.DOUBLE as number) && v.type !== (T.UNSIGNED_INTEGER as number) && v.type !== (T.SIGNED_INTEGER as number)) {
        return refuse(ErrorClass.PROPERTY, ErrorCode.INVALID_DATA_TYPE, 'an analog value takes a REAL');
      }
      if (!Number.isFinite(n)) return refuse(ErrorClass.PROPERTY, ErrorCode.VALUE_OUT_OF_RANGE, 'not a finite number');
      return n;
    case 'binary':
      if (v.type !== (T.ENUMERATED as number) && v.type !== (T.BOOLEAN as number) && v.type !== (T.UNSIGNED_INTEGER as number)) return refuse(ErrorClass.PROPERTY, ErrorCode.INVALID_DATA_TYPE, 'a binary value takes an ENUMERATED');
      if (n !== 0 && n !== 1) return refuse(ErrorClass.PROPERTY, ErrorCode.VALUE_OUT_OF_RANGE, 'a binary value is 0 or 1');
      return n;
    case 'multiState':
      if (v.type !== (T.UNSIGNED_INTEGER as number) && v.type !== (T.ENUMERATED as number)) return refuse(ErrorClass.PROPERTY, ErrorCode.INVALID_DATA_TYPE, 'a multi-state value takes an Unsigned');
      if (!Number.isInteger(n) || n < 1 || n > states) return refuse(ErrorClass.PROPERTY, ErrorCode.VALUE_OUT_OF_RANGE, `a state from 1 to ${states}`);
      return n;
  }
}

/** A property's error in a ReadPropertyMultiple answer, in the shape the library's encoder takes. */
function errorValue(r: DeviceRefusal): unknown {
  return { value: { type: 'BacnetError', errorClass: r.errorClass, errorCode: r.errorCode } };
}

function asValues(a: Answer): unknown[] {
  return a instanceof DeviceRefusal ? [errorValue(a)] : a;
}
