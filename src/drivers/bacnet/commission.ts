/**
 * BACnet commissioning (docs/drivers.md, "Commissioning"): finding devices (discover) and
 * turning a connector's device's objects into point proposals (learn), for the generic
 * orchestration in poller/commission.ts, which hands over the model's side (the connectors made,
 * the points bound) through the driver contract's contexts (driver.ts).
 *
 * A learn of a large device reads its object list once and keeps it (per connector, for
 * LIST_TTL_MS, then forgets it) for the drill-ins that follow; progress shows as `learnProgress`
 * (a percentage) on the connector while a learn runs.
 *
 * Loaded with the BACnet library, on the first discover or learn (kind.ts).
 */
import { HDict, HNumber, HRef, HUri, MARKER, type HVal } from '../../haystack/values.js';
import { ErrorCodes, HayloftError } from '../../lib/errors.js';
import type { DiscoverContext, LearnContext } from '../driver.js';
import { durationTag, uriTag } from '../tags.js';
import { parseBacnetCur, parseBacnetUri } from './address.js';
import type { BacnetDriver } from './bacnet-driver.js';
import { discover } from './discovery.js';
import { BACNET_TAGS } from './info.js';
import { type BacnetProposal, type ObjectRef, groupsOf, proposalOf, readObjectList, readObjects, typeAbbr, typeOfAbbr } from './learn.js';
import { DeviceSession } from './session.js';

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

export class BacnetCommissioning {
  private readonly lists = new Map<string, Kept>();

  /** Forgets the object lists it keeps. */
  forget(): void {
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

  /** One row per device that answered: dis, uri, bacnetDevice, vendorName, modelName, segmentation, maxApdu, connRef. */
  async discover(ctx: DiscoverContext): Promise<HDict[]> {
    const found = await discover((await ctx.driver()) as BacnetDriver, ctx.request);
    // Connectors already made for a device, by `host:port/instance`.
    const conns = new Map<string, string>();
    for (const c of ctx.conns) {
      try {
        const d = parseBacnetUri(uriTag(c.tags, ''));
        conns.set(`${d.address}/${d.deviceInstance}`, c.id);
      } catch {
        // a connector with a bad uri matches no device
      }
    }
    ctx.log.info({ devices: found.length, address: ctx.request.address ?? 'broadcast' }, 'BACnet discovery');
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
      if (conn !== undefined) row.connRef = new HRef(conn, ctx.displayOf(conn));
      return HDict.of(row);
    });
  }

  /** Groups to drill into (dis, learn), or the point proposals of one group (`arg`, `AI`). */
  async learn(ctx: LearnContext): Promise<HDict[]> {
    const { conn, arg, clock } = ctx;
    const driver = (await ctx.driver()) as BacnetDriver;
    const uri = uriTag(conn.tags, 'bacnet://10.0.0.9/1001');
    const device = parseBacnetUri(uri);
    const timeoutMs = durationTag(conn.tags, 'timeout', driver.timeoutMs);
    let type: number | undefined;
    if (arg !== undefined) {
      type = typeOfAbbr(arg);
      if (type === undefined) throw new HayloftError(ErrorCodes.BAD_REQUEST, `learn arg "${arg}" is not a group of a BACnet device (AI, AO, AV, BI, BO, BV, MSI, MSO, MSV, ACC, IV, PIV, LAV, CSV)`);
    }
    const session = new DeviceSession(driver, device.address, timeoutMs);
    const progress = (from: number, span: number) => (done: number, total: number): void => {
      const pct = total === 0 ? from + span : from + (span * done) / total;
      ctx.progress(Math.floor(pct));
    };
    try {
      let kept = this.lists.get(conn.id);
      if (arg === undefined || kept === undefined || kept.uri !== uri || clock.now() - kept.at > LIST_TTL_MS) {
        const objects = await readObjectList(session, device.deviceInstance, progress(0, arg === undefined ? 100 : 50));
        kept = this.keep(conn.id, { uri, at: clock.now(), objects, names: kept?.uri === uri ? kept.names : new Names() });
        ctx.log.info({ connId: conn.id, objects: objects.length, requests: session.requests, batch: session.per }, 'BACnet object list read');
      }
      if (type === undefined) {
        return groupsOf(kept.objects).map((g) => HDict.of({ dis: g.dis, learn: g.abbr }));
      }
      const wanted = kept.objects.filter((o) => o.type === type);
      const learned = await readObjects(session, wanted, progress(arg === undefined ? 0 : 50, 50));
      return proposals(ctx, kept.names, learned.map(proposalOf).filter((p) => p !== undefined));
    } finally {
      session.close();
    }
  }
}

function proposals(ctx: LearnContext, names: Names, props: readonly BacnetProposal[]): HDict[] {
  const connId = ctx.conn.id;
  // Points already bound to an object of this connector's device, by `AI1` (presentValue only).
  const bound = new Map<string, string>();
  const points = ctx.points();
  for (const p of points) {
    const cur = p.tags.get(BACNET_TAGS.curTag);
    if (typeof cur !== 'string') continue;
    try {
      const a = parseBacnetCur(cur);
      const abbr = typeAbbr(a.type);
      if (abbr !== undefined && a.property === 85) bound.set(`${abbr}${a.instance}`, p.id);
    } catch {
      // a point with a bad address binds nothing
    }
  }
  const byId = new Map(points.map((p) => [p.id, p.tags]));
  return props.map((p) => {
    const id = bound.get(p.cur);
    // An object already bound keeps its point's name.
    const taken = id === undefined ? undefined : byId.get(id)?.get('name');
    const name = typeof taken === 'string' ? taken : names.of(p.cur, p.name);
    const row: Record<string, HVal> = { dis: p.dis, name, point: MARKER, cur: MARKER, kind: p.kind };
    if (p.unit !== undefined) row.unit = p.unit;
    if (p.his) row.his = MARKER;
    row.bacnetConnRef = new HRef(connId, ctx.displayOf(connId));
    row.bacnetCur = p.cur;
    if (p.writable) {
      row.writable = MARKER;
      row.bacnetWrite = p.cur;
    }
    if (id !== undefined) row.id = new HRef(id, ctx.displayOf(id));
    return HDict.of(row);
  });
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
