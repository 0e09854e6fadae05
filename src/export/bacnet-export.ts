/**
 * Hayloft's points as BACnet objects: the part that runs the BACnet/IP device
 * (drivers/bacnet/device.ts) over the model (docs/bacnet-device.md).
 *
 * - Which points: those matching the section's `filter` (`point and bacnetExport` by default),
 *   followed as records change.
 * - As what: Number points are analog, Bool binary, Str points with an `enum` multi-state (state
 *   texts from the enum); other Str points are not exported. Writable points are commandable:
 *   outputs when marked `cmd`, else values; points that are not writable are inputs when read
 *   by a driver (`cur`) or marked `sensor`, else values.
 * - Instance numbers are kept in the data folder per point (and object type): stable across
 *   restarts and edits (renames, moves, a filter that leaves a point out for a while); a point
 *   that changes kind gets a new one in its new type; a deleted point's number is never given
 *   to another point.
 * - Values: presentValue from `curVal`; for commandable objects the effective value of the
 *   point's priority array, else `curVal`. statusFlags from `curStatus` (fault for fault and
 *   down, out-of-service for disabled), overridden while a level below 17 holds the point.
 * - Writes: WriteProperty at priority n is pointWrite at level n, through the point writer, as
 *   the configured `writeAs` user (its POINT_WRITE permission, by the gate in app.ts), named in
 *   the audit as `bacnet <address>`. Relinquish with NULL. A refusal is a BACnet Error.
 * - COV: notifications follow live.changed (curVal, curStatus) and write.effective.
 */
import { ErrorClass, ErrorCode, ObjectType } from '@bacnet-js/client';
import type { BacnetDeviceConfig } from '../config/bacnet-device.js';
import { BacnetDeviceServer, DeviceRefusal, type DeviceBackend, type ExportObject, type ObjectKind, type ObjectState, OBJECT_TYPES } from '../drivers/bacnet/device.js';
import { foreignHealth } from '../drivers/bacnet/foreign-health.js';
import { bacnetUnits } from '../drivers/bacnet/units.js';
import { HNumber, type HDict, type HRef, type HVal } from '../haystack/values.js';
import { ErrorCodes, isHayloftError } from '../lib/errors.js';
import type { Logger } from '../lib/log.js';
import type { Metrics } from '../lib/metrics.js';
import type { Part, PartHealth } from '../lib/part.js';
import type { Model, ModelChange } from '../model/model.js';
import type { PointWriter } from '../model/point-writer.js';
import type { Store } from '../store/db.js';

/** What app.ts does with a BACnet write: pointWrite as the writeAs user, through its gate. */
export interface ExportWrite {
  pointId: string;
  level: number;
  /** A Number in the point's unit, a Bool, an enum name; null relinquishes. */
  val: number | boolean | string | null;
  who: string;
  user: string;
}

export interface BacnetExportOptions {
  config: BacnetDeviceConfig;
  /** The Device object's name when the section names none. */
  serverName: string;
  version: string;
  model: Model;
  writer: PointWriter;
  store: Store;
  log: Logger;
  write: (w: ExportWrite) => Promise<void>;
}

/**
 * Keys of the instance map in the store's meta sublevel: `bacnetObj/<pointId>` -> `type:instance`,
 * and `bacnetTop/<type>` -> the highest number ever given in that type (so a deleted point's
 * number is not given to another point, which a front-end may still have bound to it).
 */
const KEY_PREFIX = 'bacnetObj/';
const TOP_PREFIX = 'bacnetTop/';
const NO_UNITS = 95;

interface Exported extends ExportObject {
  readonly pointId: string;
  /** Multi-state: the enum names (state n is names[n - 1]). */
  readonly names: readonly string[];
  readonly unit: string | null;
}

/** The object kind of a point, or why it is not exported. */
function kindOf(rec: HDict): { kind: ObjectKind; names: string[] } | string {
  switch (rec.get('kind')) {
    case 'Number':
      return { kind: 'analog', names: [] };
    case 'Bool':
      return { kind: 'binary', names: [] };
    case 'Str': {
      const e = rec.get('enum');
      if (typeof e !== 'string' || e.trim() === '') return 'a Str point without an enum';
      return { kind: 'multiState', names: e.split(',').map((x) => x.trim()) };
    }
    default:
      return 'not of kind Number, Bool or Str';
  }
}

function typeOf(kind: ObjectKind, rec: HDict): number {
  const t = OBJECT_TYPES[kind];
  if (rec.has('writable')) return rec.has('cmd') ? t.output : t.value;
  return rec.has('cur') || rec.has('sensor') ? t.input : t.value;
}

export class BacnetExport implements Part {
  readonly name = 'bacnet-device';
  private readonly server: BacnetDeviceServer;
  /** Point id -> `type:instance`, as stored. */
  private readonly assigned = new Map<string, string>();
  /** Object type -> the highest instance number given. */
  private readonly top = new Map<number, number>();
  /** Exported objects by `type:instance`, and by point id; `list` in object-list order. */
  private readonly byKey = new Map<string, Exported>();
  private readonly byPoint = new Map<string, Exported>();
  private list: Exported[] = [];
  /** Points left out, with why (shown in health). */
  private skipped = new Map<string, string>();
  private readonly dirty = new Set<string>();
  private flushScheduled = false;
  private rescanScheduled: Promise<void> | undefined;
  private running = false;
  private writes = 0;
  private refusedWrites = 0;

  constructor(private readonly o: BacnetExportOptions) {
    const c = o.config;
    this.server = new BacnetDeviceServer(
      {
        instance: c.instance,
        name: c.name ?? o.serverName,
        interface: c.interface,
        port: c.port,
        vendorName: 'Hayloft',
        modelName: 'Hayloft edge gateway',
        firmwareRevision: o.version,
        maxSubscriptions: c.maxSubscriptions,
        ...(c.bbmd === null ? {} : { bbmd: c.bbmd, bbmdTtlS: c.bbmdTtl }),
        ...(c.broadcast === '' ? {} : { broadcastAddress: c.broadcast }),
        log: (level, msg, detail) => o.log[level]({ part: 'bacnet-device', ...detail }, msg),
      },
      this.backend(),
    );
  }

  /** The device's socket (foreign-device registration shares it). */
  get device(): BacnetDeviceServer {
    return this.server;
  }

  async start(): Promise<void> {
    this.running = true;
    for await (const [k, v] of this.o.store.meta.iterator({ gte: KEY_PREFIX, lt: `${KEY_PREFIX}\uffff` })) this.assigned.set(k.slice(KEY_PREFIX.length), v);
    for await (const [k, v] of this.o.store.meta.iterator({ gte: TOP_PREFIX, lt: `${TOP_PREFIX}\uffff` })) this.top.set(Number(k.slice(TOP_PREFIX.length)), Number(v));
    await this.rescan();
    const ev = this.o.model.events;
    ev.on('records.committed', this, (c) => this.committed(c));
    ev.on('live.changed', this, (id, changed) => {
      if (this.byPoint.has(id) && (changed.includes('curVal') || changed.includes('curStatus'))) this.touch(id);
    });
    ev.on('write.effective', this, (id) => {
      if (this.byPoint.has(id)) this.touch(id);
    });
    await this.server.start();
    this.o.log.info({ instance: this.o.config.instance, port: this.o.config.port, interface: this.o.config.interface, objects: this.list.length }, 'BACnet device started');
  }

  async stop(): Promise<void> {
    this.running = false;
    this.o.model.events.off(this);
    await this.rescanScheduled;
    this.server.stop();
  }

  metrics(m: Metrics): void {
    m.gauge('hayloft_bacnet_device_objects', 'Points exported as BACnet objects', [], () => this.list.length);
    m.gauge('hayloft_bacnet_device_subscriptions', 'COV subscriptions held by the BACnet device', [], () => this.server.stats.subscriptions);
    m.counter('hayloft_bacnet_device_requests_total', 'BACnet requests the device answered, since start', () => this.server.stats.requests);
    m.counter('hayloft_bacnet_device_writes_total', 'BACnet writes taken, since start', () => this.writes);
    m.counter('hayloft_bacnet_device_writes_refused_total', 'BACnet writes refused, since start', () => this.refusedWrites);
  }

  health(): PartHealth {
    const f = this.server.foreignStatus();
    return {
      ok: true,
      ...(f === null ? {} : foreignHealth(f)),
      instance: this.o.config.instance,
      port: this.o.config.port,
      objects: this.list.length,
      skipped: this.skipped.size,
      subscriptions: this.server.stats.subscriptions,
    };
  }

  /** The exported objects, in object-list order. */
  objects(): readonly { pointId: string; type: number; instance: number; name: string; kind: ObjectKind; commandable: boolean; units: number }[] {
    return this.list;
  }

  /**
   * The device and its objects with their values and flags now: for the `bacnetObjects` op (its
   * BacnetDeviceListing in api/op.ts, which this layer may not import; app.ts joins the two).
   */
  listing() {
    const c = this.o.config;
    return {
      instance: c.instance,
      name: c.name ?? this.o.serverName,
      interface: c.interface,
      port: c.port,
      skipped: this.skipped.size,
      objects: this.list.map((x) => {
        const st = this.stateOf(x);
        const v = st.value;
        return {
          pointId: x.pointId,
          objectType: objectTypeName(x.type),
          instance: x.instance,
          name: x.name,
          commandable: x.commandable,
          unit: x.unit,
          presentValue: v,
          stateText: x.kind === 'multiState' && v !== null ? (x.names[v - 1] ?? null) : null,
          fault: st.fault,
          outOfService: st.outOfService,
          overridden: st.overridden,
          priority: x.commandable ? this.o.writer.effective(x.pointId).level : null,
        };
      }),
    };
  }

  /** Points the filter matched that are not exported, with why. */
  skippedPoints(): ReadonlyMap<string, string> {
    return this.skipped;
  }

  // -------------------------------------------------------------------------------------------

  private committed(c: ModelChange): void {
    // Renames, kind changes, new and deleted points: the set is worked out again (after the commit).
    if (c.created.length + c.updated.length + c.deleted.length === 0) return;
    const deleted = c.deleted.map((r) => (r.get('id') as HRef).id).filter((id) => this.assigned.has(id));
    if (deleted.length > 0) {
      const batch = this.o.store.db.batch();
      for (const id of deleted) {
        batch.del(`${KEY_PREFIX}${id}`, { sublevel: this.o.store.meta });
        this.assigned.delete(id);
      }
      batch.write().catch((err: unknown) => this.o.log.warn({ err }, 'BACnet device: cannot drop the object numbers of deleted points'));
    }
    this.rescanScheduled ??= Promise.resolve().then(async () => {
      try {
        if (this.running) await this.rescan();
      } catch (err) {
        this.o.log.error({ err }, 'BACnet device: cannot work out the exported objects');
      } finally {
        this.rescanScheduled = undefined;
      }
    });
  }

  /** The exported set from the model: objects, with numbers assigned (and stored) for new ones. */
  private async rescan(): Promise<void> {
    const recs = this.o.model.query(this.o.config.filter).filter((r) => r.has('point'));
    const used = new Map<number, Set<number>>();
    for (const v of this.assigned.values()) {
      const [t, i] = v.split(':').map(Number) as [number, number];
      let s = used.get(t);
      if (s === undefined) used.set(t, (s = new Set()));
      s.add(i);
    }
    const fresh: [string, string][] = [];
    const next: Exported[] = [];
    const skipped = new Map<string, string>();
    for (const rec of recs) {
      const id = (rec.get('id') as HRef).id;
      const k = kindOf(rec);
      if (typeof k === 'string') {
        skipped.set(id, k);
        continue;
      }
      const type = typeOf(k.kind, rec);
      let key = this.assigned.get(id);
      if (key === undefined || Number(key.split(':')[0]) !== type) {
        // A new number in this type: one above the highest ever given in it.
        let s = used.get(type);
        if (s === undefined) used.set(type, (s = new Set()));
        let inst = (this.top.get(type) ?? 0) + 1;
        for (const x of s) if (x >= inst) inst = x + 1;
        s.add(inst);
        this.top.set(type, inst);
        key = `${type}:${inst}`;
        fresh.push([id, key]);
      }
      const instance = Number(key.split(':')[1]);
      const unit = typeof rec.get('unit') === 'string' ? (rec.get('unit') as string) : null;
      const dis = rec.get('dis');
      next.push({
        pointId: id,
        type,
        instance,
        kind: k.kind,
        name: this.o.model.fqname(id) ?? `@${id}`,
        description: typeof dis === 'string' ? dis : '',
        units: k.kind === 'analog' && unit !== null ? (bacnetUnits(unit) ?? NO_UNITS) : NO_UNITS,
        stateTexts: k.names,
        names: k.names,
        unit,
        commandable: this.o.writer.isWritable(rec),
      });
    }
    if (fresh.length > 0) {
      const batch = this.o.store.db.batch();
      for (const [id, key] of fresh) batch.put(`${KEY_PREFIX}${id}`, key, { sublevel: this.o.store.meta });
      for (const [t, n] of this.top) batch.put(`${TOP_PREFIX}${t}`, String(n), { sublevel: this.o.store.meta });
      await batch.write();
      for (const [id, key] of fresh) this.assigned.set(id, key);
    }
    next.sort((a, b) => a.type - b.type || a.instance - b.instance);
    const changed = next.length !== this.list.length || next.some((x, i) => !same(x, this.list[i]));
    this.list = next;
    this.byKey.clear();
    this.byPoint.clear();
    for (const x of next) {
      this.byKey.set(`${x.type}:${x.instance}`, x);
      this.byPoint.set(x.pointId, x);
    }
    this.skipped = skipped;
    if (changed) this.server.objectsChanged();
  }

  private touch(id: string): void {
    this.dirty.add(id);
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(() => {
      this.flushScheduled = false;
      for (const p of this.dirty) {
        const x = this.byPoint.get(p);
        if (x !== undefined) this.server.changed(x.type, x.instance);
      }
      this.dirty.clear();
    });
  }

  /** A point value as the object's number: REAL, 0/1, or state 1..n. */
  private number(x: Exported, v: HVal | undefined | null): number | null {
    if (v instanceof HNumber) return x.kind === 'analog' ? v.val : null;
    if (typeof v === 'boolean') return x.kind === 'binary' ? (v ? 1 : 0) : null;
    if (typeof v === 'string' && x.kind === 'multiState') {
      const i = x.names.indexOf(v);
      return i < 0 ? null : i + 1;
    }
    return null;
  }

  /** presentValue and the status flags of an object now. */
  private stateOf(x: Exported): ObjectState {
    const live = this.o.model.liveTags(x.pointId);
    const status = live?.curStatus;
    let value: number | null = null;
    let overridden = false;
    if (x.commandable) {
      const eff = this.o.writer.effective(x.pointId);
      overridden = eff.level < 17;
      value = this.number(x, eff.val);
    }
    if (value === null && (status === 'ok' || status === 'stale')) value = this.number(x, live?.curVal);
    return { value, fault: status === 'fault' || status === 'down', outOfService: status === 'disabled', overridden };
  }

  private backend(): DeviceBackend {
    return {
      objects: () => this.list,
      object: (type, instance) => this.byKey.get(`${type}:${instance}`),
      state: (o): ObjectState => this.stateOf(o as Exported),
      priorityArray: (o) => {
        const x = o as Exported;
        const rows = this.o.writer.array(x.pointId);
        const nums = rows.map((r) => this.number(x, r.val));
        return { slots: nums.slice(0, 16), relinquishDefault: nums[16] ?? null };
      },
      write: async (o, value, priority, from) => {
        const x = o as Exported;
        const user = this.o.config.writeAs;
        if (user === null) {
          this.refusedWrites++;
          throw new DeviceRefusal(ErrorClass.PROPERTY, ErrorCode.WRITE_ACCESS_DENIED, 'BACnet writes are off (no bacnetDevice.writeAs)');
        }
        let val: number | boolean | string | null = null;
        if (value !== null) val = x.kind === 'analog' ? value : x.kind === 'binary' ? value === 1 : (x.names[value - 1] as string);
        try {
          await this.o.write({ pointId: x.pointId, level: priority, val, who: `bacnet ${from}`, user });
          this.writes++;
        } catch (e) {
          this.refusedWrites++;
          this.o.log.info({ pointId: x.pointId, from, priority, err: e instanceof Error ? e.message : String(e) }, 'BACnet write refused');
          throw refusalOf(e);
        }
      },
    };
  }
}

/** A Hayloft refusal as the BACnet Error a client expects. */
function refusalOf(e: unknown): DeviceRefusal {
  const msg = e instanceof Error ? e.message : String(e);
  if (isHayloftError(e, ErrorCodes.OUT_OF_RANGE)) return new DeviceRefusal(ErrorClass.PROPERTY, ErrorCode.VALUE_OUT_OF_RANGE, msg);
  if (isHayloftError(e, ErrorCodes.FORBIDDEN) || isHayloftError(e, ErrorCodes.NOT_FOUND) || isHayloftError(e, ErrorCodes.NOT_WRITABLE)) return new DeviceRefusal(ErrorClass.PROPERTY, ErrorCode.WRITE_ACCESS_DENIED, msg);
  if (isHayloftError(e, ErrorCodes.BAD_VALUE) || isHayloftError(e, ErrorCodes.BAD_REQUEST)) return new DeviceRefusal(ErrorClass.PROPERTY, ErrorCode.VALUE_OUT_OF_RANGE, msg);
  return new DeviceRefusal(ErrorClass.DEVICE, ErrorCode.OTHER, msg);
}

/** `analog-input`, `multi-state-value`: the standard's names of the object types (the library's enum keys). */
function objectTypeName(type: number): string {
  const k = (ObjectType as unknown as Record<number, string | undefined>)[type];
  return k === undefined ? String(type) : k.toLowerCase().replace(/_/g, '-');
}

function same(a: Exported, b: Exported | undefined): boolean {
  return b !== undefined && a.pointId === b.pointId && a.type === b.type && a.instance === b.instance && a.name === b.name && a.units === b.units && a.commandable === b.commandable && a.description === b.description && a.stateTexts.join(',') === b.stateTexts.join(',');
}
