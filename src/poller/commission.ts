/**
 * Commissioning: finding BACnet devices (discover) and turning what a connector's device holds
 * (BACnet objects, or the registers of a Modbus register map) into point proposals (learn).
 *
 * It sits beside the poller because it needs both the drivers (the protocol work) and the model
 * (which connector already points at a device, which object is already bound to a point); the
 * protocol itself stays in src/drivers (bacnet/discovery.ts, bacnet/learn.ts, modbus/reg-map.ts).
 *
 * A learn of a large device reads its object list once and keeps it (per connector, for
 * LIST_TTL_MS, then forgets it) for the drill-ins that follow; progress shows as `learnProgress`
 * (a percentage) on the connector while a learn runs. Learns of one connector run one at a time.
 */
import type { BacnetDriver } from '../drivers/bacnet/bacnet-driver.js';
import { parseBacnetCur, parseBacnetUri } from '../drivers/bacnet/address.js';
import { discover } from '../drivers/bacnet/discovery.js';
import { type ObjectRef, groupsOf, proposalOf, readObjectList, readObjects, typeAbbr, typeOfAbbr } from '../drivers/bacnet/learn.js';
import { DeviceSession } from '../drivers/bacnet/session.js';
import { parseRegMap } from '../drivers/modbus/reg-map.js';
import type { DriverRegistry } from '../drivers/registry.js';
import { durationTag, uriTag } from '../drivers/tags.js';
import { HDict, HNumber, HRef, HUri, MARKER, type HVal } from '../haystack/values.js';
import { ErrorCodes, HayloftError } from '../lib/errors.js';
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/log.js';
import type { Model } from '../model/model.js';
import type { PointState } from '../model/point-state.js';

export interface DiscoverRequest {
  /** `host:port` for a directed Who-Is. */
  readonly address?: string;
  readonly low?: number;
  readonly high?: number;
  readonly timeoutMs: number;
}

export interface CommissioningOptions {
  model: Model;
  /** Shows a learn's progress on its connector. */
  points: PointState;
  drivers: DriverRegistry;
  clock: Clock;
  log: Logger;
}

/**
 * A device's object list kept for drill-ins, and the names proposed so far: names are unique
 * across the device (points of one device usually land under one equip), first come first
 * served, and the same object gets the same name on every learn.
 */
interface Kept {
  readonly uri: string;
  readonly at: number;
  readonly objects: readonly ObjectRef[];
  readonly names: Names;
  /** Forgets it when LIST_TTL_MS is up. */
  readonly expiry: ReturnType<typeof setTimeout>;
}

/** How long a device's object list is kept for drill-ins. */
const LIST_TTL_MS = 10 * 60_000;

export class Commissioning {
  private readonly model: Model;
  private readonly points: PointState;
  private readonly drivers: DriverRegistry;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly lists = new Map<string, Kept>();
  private readonly running = new Map<string, Promise<unknown>>();

  constructor(opts: CommissioningOptions) {
    this.model = opts.model;
    this.points = opts.points;
    this.drivers = opts.drivers;
    this.clock = opts.clock;
    this.log = opts.log;
  }

  /** Forgets the object lists it keeps. */
  stop(): void {
    for (const k of this.lists.values()) clearTimeout(k.expiry);
    this.lists.clear();
  }

  /**
   * Keeps a device's object list for LIST_TTL_MS, then lets it go: a list of thousands of
   * objects is not held for the life of the daemon (nor for a connector deleted since).
   */
  private keep(connId: string, list: Omit<Kept, 'expiry'>): Kept {
    const old = this.lists.get(connId);
    if (old !== undefined) clearTimeout(old.expiry);
    const kept: Kept = {
      ...list,
      expiry: setTimeout(() => {
        if (this.lists.get(connId) === kept) this.lists.delete(connId);
      }, LIST_TTL_MS),
    };
    kept.expiry.unref();
    this.lists.set(connId, kept);
    return kept;
  }

  /** The BACnet driver, loaded now if no BACnet record has loaded it yet. */
  private async bacnet(): Promise<BacnetDriver> {
    const d = this.drivers.byName('bacnet') ?? (await this.drivers.loadByName('bacnet'));
    if (d?.name !== 'bacnet') throw new HayloftError(ErrorCodes.CANNOT_LEARN, 'this Hayloft runs without its BACnet driver');
    return d as BacnetDriver;
  }

  /** One row per device that answered: dis, uri, bacnetDevice, vendorName, modelName, segmentation, maxApdu, connRef. */
  async discover(req: DiscoverRequest): Promise<HDict[]> {
    const found = await discover(await this.bacnet(), req);
    // Connectors already made for a device, by `host:port/instance`.
    const conns = new Map<string, string>();
    for (const id of this.model.idsWithTag('bacnetConn')) {
      try {
        const d = parseBacnetUri(uriTag(this.model.stored(id) as HDict, ''));
        conns.set(`${d.address}/${d.deviceInstance}`, id);
      } catch {
        // a connector with a bad uri matches no device
      }
    }
    this.log.info({ devices: found.length, address: req.address ?? 'broadcast' }, 'BACnet discovery');
    return found.map((d) => {
      const row: Record<string, HVal> = {
        dis: d.objectName ?? `Device ${d.deviceInstance}`,
        uri: new HUri(`bacnet://${d.host}:${d.port}/${d.deviceInstance}`),
        bacnetDevice: new HNumber(d.deviceInstance),
        segmentation: d.segmentation,
        maxApdu: new HNumber(d.maxApdu),
      };
      if (d.vendorName !== undefined) row.vendorName = d.vendorName;
      if (d.modelName !== undefined) row.modelName = d.modelName;
      const conn = conns.get(`${d.host}:${d.port}/${d.deviceInstance}`);
      if (conn !== undefined) row.connRef = new HRef(conn, this.model.displayOf(conn));
      return HDict.of(row);
    });
  }

  /** Groups to drill into (dis, learn) or point proposals for a connector's device. */
  learn(connId: string, arg: string | undefined): Promise<HDict[]> {
    const rec = this.model.stored(connId);
    if (rec === undefined) throw new HayloftError(ErrorCodes.NOT_FOUND, `no record @${connId}`);
    let run: () => Promise<HDict[]>;
    if (rec.has('bacnetConn')) run = () => this.learnBacnet(connId, rec, arg);
    else if (rec.has('modbusConn')) run = () => Promise.resolve(this.learnModbus(connId, rec, arg));
    else throw new HayloftError(ErrorCodes.CANNOT_LEARN, `@${connId} is not a connector that can be learned (bacnetConn or modbusConn)`);
    // One learn of a connector at a time: the second waits, then finds the object list kept.
    const before = this.running.get(connId) ?? Promise.resolve();
    const p = before.catch(() => undefined).then(run);
    const tail = p.catch(() => undefined);
    this.running.set(connId, tail);
    void tail.then(() => {
      if (this.running.get(connId) === tail) this.running.delete(connId);
    });
    return p;
  }

  private async learnBacnet(connId: string, rec: HDict, arg: string | undefined): Promise<HDict[]> {
    const driver = await this.bacnet();
    const uri = uriTag(rec, 'bacnet://10.0.0.9/1001');
    const device = parseBacnetUri(uri);
    const timeoutMs = durationTag(rec, 'timeout', driver.timeoutMs);
    let type: number | undefined;
    if (arg !== undefined) {
      type = typeOfAbbr(arg);
      if (type === undefined) throw new HayloftError(ErrorCodes.BAD_REQUEST, `learn arg "${arg}" is not a group of a BACnet device (AI, AO, AV, BI, BO, BV, MSI, MSO, MSV, ACC, IV, PIV, LAV, CSV)`);
    }
    const session = new DeviceSession(driver, device.address, timeoutMs);
    const progress = (from: number, span: number) => (done: number, total: number): void => {
      const pct = total === 0 ? from + span : from + (span * done) / total;
      this.points.setLearnProgress(connId, Math.floor(pct));
    };
    try {
      let kept = this.lists.get(connId);
      if (arg === undefined || kept === undefined || kept.uri !== uri || this.clock.now() - kept.at > LIST_TTL_MS) {
        const objects = await readObjectList(session, device.deviceInstance, progress(0, arg === undefined ? 100 : 50));
        kept = this.keep(connId, { uri, at: this.clock.now(), objects, names: kept?.uri === uri ? kept.names : new Names() });
        this.log.info({ connId, objects: objects.length, requests: session.requests, batch: session.per }, 'BACnet object list read');
      }
      if (type === undefined) {
        return groupsOf(kept.objects).map((g) => HDict.of({ dis: g.dis, learn: g.abbr }));
      }
      const wanted = kept.objects.filter((o) => o.type === type);
      const learned = await readObjects(session, wanted, progress(arg === undefined ? 0 : 50, 50));
      return this.bacnetProposals(connId, kept.names, learned.map(proposalOf).filter((p) => p !== undefined));
    } finally {
      session.close();
      this.points.setLearnProgress(connId, null);
    }
  }

  private bacnetProposals(connId: string, names: Names, props: readonly NonNullable<ReturnType<typeof proposalOf>>[]): HDict[] {
    // Points already bound to an object of this connector's device, by `AI1` (presentValue only).
    const bound = new Map<string, string>();
    for (const id of this.model.idsWithTag('bacnetCur')) {
      const p = this.model.stored(id) as HDict;
      const ref = p.get('bacnetConnRef');
      const cur = p.get('bacnetCur');
      if (!(ref instanceof HRef) || ref.id !== connId || typeof cur !== 'string') continue;
      try {
        const a = parseBacnetCur(cur);
        const abbr = typeAbbr(a.type);
        if (abbr !== undefined && a.property === 85) bound.set(`${abbr}${a.instance}`, id);
      } catch {
        // a point with a bad address binds nothing
      }
    }
    return props.map((p) => {
      const id = bound.get(p.cur);
      // An object already bound keeps its point's name.
      const taken = id === undefined ? undefined : this.model.stored(id)?.get('name');
      const name = typeof taken === 'string' ? taken : names.of(p.cur, p.name);
      const row: Record<string, HVal> = { dis: p.dis, name, point: MARKER, cur: MARKER, kind: p.kind };
      if (p.unit !== undefined) row.unit = p.unit;
      if (p.his) row.his = MARKER;
      row.bacnetConnRef = new HRef(connId, this.model.displayOf(connId));
      row.bacnetCur = p.cur;
      if (p.writable) {
        row.writable = MARKER;
        row.bacnetWrite = p.cur;
      }
      if (id !== undefined) row.id = new HRef(id, this.model.displayOf(id));
      return HDict.of(row);
    });
  }

  private learnModbus(connId: string, rec: HDict, arg: string | undefined): HDict[] {
    if (arg !== undefined) throw new HayloftError(ErrorCodes.BAD_REQUEST, 'a Modbus connector has no groups to drill into: learn it without arg');
    const map = rec.get('modbusRegMap');
    if (map === undefined) return [];
    if (typeof map !== 'string') throw new HayloftError(ErrorCodes.BAD_REG_MAP, 'modbusRegMap must be a Str holding the CSV text of the register map');
    const entries = parseRegMap(map);
    const bound = new Map<string, string>();
    for (const id of this.model.idsWithTag('modbusCur')) {
      const p = this.model.stored(id) as HDict;
      const ref = p.get('modbusConnRef');
      const cur = p.get('modbusCur');
      if (ref instanceof HRef && ref.id === connId && typeof cur === 'string') bound.set(cur.trim(), id);
    }
    return entries.map((e) => {
      const row: Record<string, HVal> = { dis: e.dis, name: e.name, point: MARKER, cur: MARKER, kind: e.kind };
      if (e.unit !== undefined) row.unit = e.unit;
      row.modbusConnRef = new HRef(connId, this.model.displayOf(connId));
      row.modbusCur = e.cur;
      if (e.scale !== undefined) row.modbusScale = new HNumber(e.scale);
      if (e.offset !== undefined) row.modbusOffset = new HNumber(e.offset);
      if (e.writable) {
        row.writable = MARKER;
        row.modbusWrite = e.cur;
      }
      const id = bound.get(e.cur);
      if (id !== undefined) row.id = new HRef(id, this.model.displayOf(id));
      return HDict.of(row);
    });
  }
}

/** Names unique across a device: the second `zoneTemp` (object AV3) becomes `zoneTemp_av3`. */
class Names {
  private readonly byCur = new Map<string, string>();
  private readonly used = new Set<string>();

  of(cur: string, name: string): string {
    const known = this.byCur.get(cur);
    if (known !== undefined) return known;
    const suffix = cur.toLowerCase();
    let n = this.used.has(name) ? `${name}_${suffix}` : name;
    for (let k = 2; this.used.has(n); k++) n = `${name}_${suffix}_${k}`;
    this.used.add(n);
    this.byCur.set(cur, n);
    return n;
  }
}
