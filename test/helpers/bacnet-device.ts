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
 */
import { createSocket } from 'node:dgram';
import bacnet, { ApplicationTag, ConfirmedServiceChoice, ErrorClass, ErrorCode, PropertyIdentifier } from '@bacnet-js/client';

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

export interface DeviceOptions {
  address: string;
  port?: number;
  deviceInstance: number;
  /** 'ok'; 'reject': ReadPropertyMultiple is not supported; a number: abort above that many properties. */
  rpm?: 'ok' | 'reject' | number;
}

export class BacnetDevice {
  /** `${type}:${instance}:${property}` -> value. */
  readonly values = new Map<string, Value>();
  silent = false;
  refuseWrites = false;
  ackButIgnore = false;
  readonly seen = { rp: 0, rpm: 0, rpmProps: 0, wp: 0 };
  /** `${type}:${instance}` -> priority array and relinquish default. */
  private readonly commandables = new Map<string, Commandable>();
  /** Priorities of the writes received, in order (null: none given). */
  readonly writePriorities: (number | null)[] = [];
  /** Where requests came from, as the library names senders (`host`, or `host:port` off 47808). */
  readonly senders = new Set<string>();
  private sock: Client | undefined;

  constructor(readonly opts: DeviceOptions) {}

  set(type: number, instance: number, v: Value, property: number = PropertyIdentifier.PRESENT_VALUE): void {
    this.values.set(`${type}:${instance}:${property}`, v);
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
  private lookup(type: number, instance: number, property: number): Value | Value[] | undefined {
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
    const sock = new bacnet.default({ interface: this.opts.address, port: this.opts.port ?? 47808, apduTimeout: 2000 });
    sock.on('error', () => undefined);
    await new Promise<void>((resolve) => sock.once('listening', () => resolve()));
    sock.on('readProperty', (c) => {
      if (this.silent) return;
      this.seen.rp++;
      const to = this.sender(c);
      const { objectId, property } = c.payload;
      const v = this.lookup(objectId.type, objectId.instance, property.id);
      if (v === undefined) {
        const known = this.knows(objectId.type, objectId.instance);
        sock.errorResponse(to, ConfirmedServiceChoice.READ_PROPERTY, c.invokeId ?? 0, known ? ErrorClass.PROPERTY : ErrorClass.OBJECT, known ? ErrorCode.UNKNOWN_PROPERTY : ErrorCode.UNKNOWN_OBJECT);
        return;
      }
      sock.readPropertyResponse(to, c.invokeId ?? 0, objectId, property, (Array.isArray(v) ? v : [v]) as never);
    });
    sock.on('writeProperty', (c) => {
      if (this.silent) return;
      this.seen.wp++;
      const to = this.sender(c);
      const { objectId, value } = c.payload;
      const key = `${objectId.type}:${objectId.instance}`;
      const prio = typeof value.priority === 'number' && value.priority >= 1 && value.priority <= 16 ? value.priority : null;
      this.writePriorities.push(prio);
      if (this.refuseWrites) {
        sock.errorResponse(to, ConfirmedServiceChoice.WRITE_PROPERTY, c.invokeId ?? 0, ErrorClass.PROPERTY, ErrorCode.WRITE_ACCESS_DENIED);
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
    sock.on('readPropertyMultiple', (c) => {
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
          const v = this.lookup(r.objectId.type, r.objectId.instance, p.id);
          const known = this.knows(r.objectId.type, r.objectId.instance);
          return {
            property: { id: p.id, index: p.index },
            value: v === undefined ? [{ value: { type: 'BacnetError', errorClass: known ? ErrorClass.PROPERTY : ErrorClass.OBJECT, errorCode: known ? ErrorCode.UNKNOWN_PROPERTY : ErrorCode.UNKNOWN_OBJECT } }] : Array.isArray(v) ? v : [v],
          };
        }),
      }));
      sock.readPropertyMultipleResponse(to, c.invokeId ?? 0, values);
    });
    this.sock = sock;
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
