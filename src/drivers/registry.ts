/**
 * The drivers a running Hayloft knows, looked up by the tags that name them. Built by the
 * composition root (no module-level registry: tests build their own with fake drivers).
 * Drivers are given loaded, or as kinds (kinds.ts) loaded when a record of theirs first exists.
 *
 * It is also what the rest of Hayloft learns the drivers from (driver.ts, DriverInfo): the model
 * its connector markers and record checks (connMarkers, checkRecord), the ops and the console
 * the kinds, tags and features (infos), commissioning a connector's driver (infoOf).
 */
import type { HDict } from '../haystack/values.js';
import type { Driver, DriverInfo, DriverKind } from './driver.js';

/** A driver given loaded, without its kind, supports what its tags say (and no commissioning). */
function infoOfLoaded(d: Driver): DriverInfo {
  return {
    name: d.name,
    dis: d.name,
    connTag: d.connTag,
    refTag: d.refTag,
    curTag: d.curTag,
    ...(d.writeTag === undefined ? {} : { writeTag: d.writeTag }),
    ...(d.covTags === undefined ? {} : { covTags: d.covTags }),
    features: { cur: true, write: d.writeTag !== undefined, his: false, learn: false, discover: false, cov: d.covTags !== undefined },
  };
}

/** Whether a loaded driver has the tags its kind said (what the model and the ops were told). */
function sameTags(kind: DriverInfo, d: Driver): boolean {
  return (
    d.name === kind.name &&
    d.connTag === kind.connTag &&
    d.refTag === kind.refTag &&
    d.curTag === kind.curTag &&
    d.writeTag === kind.writeTag &&
    d.covTags?.marker === kind.covTags?.marker &&
    d.covTags?.lifetime === kind.covTags?.lifetime
  );
}

/** Why a kind's features disagree with what it declares; undefined when they agree. */
function inconsistent(k: DriverInfo): string | undefined {
  const f = k.features;
  if (f.write !== (k.writeTag !== undefined)) return 'write';
  if (f.cov !== (k.covTags !== undefined)) return 'cov';
  if (f.learn !== (k.learn !== undefined)) return 'learn';
  if (f.discover !== (k.discover !== undefined)) return 'discover';
  return undefined;
}

export class DriverRegistry {
  private readonly drivers: Driver[] = [];
  /** Every driver known, loaded or not, in registration order. */
  private readonly known: DriverInfo[] = [];
  private readonly kinds: DriverKind[] = [];
  private readonly loading = new Map<DriverKind, Promise<void>>();

  constructor(drivers: readonly Driver[] = [], kinds: readonly DriverKind[] = []) {
    for (const d of drivers) this.register(d);
    for (const k of kinds) {
      this.clash(k);
      const wrong = inconsistent(k);
      if (wrong !== undefined) throw new Error(`driver ${k.name}: its feature ${wrong} disagrees with its tags or commissioning`);
      this.kinds.push(k);
      this.known.push(k);
    }
  }

  private clash(driver: DriverInfo | Driver): void {
    for (const d of this.known) {
      if (d.name === driver.name || d.connTag === driver.connTag || d.refTag === driver.refTag) {
        throw new Error(`driver ${driver.name} clashes with driver ${d.name}`);
      }
    }
  }

  register(driver: Driver): void {
    this.clash(driver);
    this.drivers.push(driver);
    this.known.push(infoOfLoaded(driver));
  }

  /** The loaded drivers. */
  all(): readonly Driver[] {
    return this.drivers;
  }

  byName(name: string): Driver | undefined {
    return this.drivers.find((d) => d.name === name);
  }

  /** Every driver known, loaded or not: tags, features, record checks and commissioning. */
  infos(): readonly DriverInfo[] {
    return this.known;
  }

  /** The driver of a connector record (the one whose marker it carries). */
  infoOf(rec: HDict): DriverInfo | undefined {
    return this.known.find((d) => rec.has(d.connTag));
  }

  /** The markers of connector records (`modbusConn`): primary markers of the model. */
  connMarkers(): string[] {
    return this.known.map((d) => d.connTag);
  }

  /** Runs every driver's check of a record created (old undefined) or updated; throws to refuse it. */
  checkRecord(rec: HDict, old: HDict | undefined): void {
    for (const d of this.known) d.checkRecord?.(rec, old);
  }

  /** Lets the drivers forget what commissioning keeps between requests. */
  forget(): void {
    for (const d of this.known) d.forget?.();
  }

  /** The Ref tags naming a connector, of every driver loaded or not. */
  refTags(): string[] {
    return this.tags().map((d) => d.refTag);
  }

  /** The tags binding a point to a driver (its connector Ref, its write address), loaded or not. */
  tags(): { refTag: string; writeTag?: string }[] {
    return this.known.map((d) => (d.writeTag === undefined ? { refTag: d.refTag } : { refTag: d.refTag, writeTag: d.writeTag }));
  }

  /** Whether some driver is known only by its kind (not loaded yet). */
  hasUnloaded(): boolean {
    return this.kinds.length > 0;
  }

  /**
   * Loads the drivers not loaded yet whose connector or point tag `has` says exists. Resolves
   * true when one was loaded (the poller then looks at the model again).
   */
  async loadFor(has: (tag: string) => boolean): Promise<boolean> {
    const due = this.kinds.filter((k) => has(k.connTag) || has(k.refTag));
    if (due.length === 0) return false;
    await Promise.all(due.map((k) => this.load(k)));
    return true;
  }

  /** The driver of that name, loaded now when it is known only by its kind; undefined when unknown. */
  async loadByName(name: string): Promise<Driver | undefined> {
    const kind = this.kinds.find((k) => k.name === name);
    if (kind !== undefined) await this.load(kind);
    return this.byName(name);
  }

  private load(kind: DriverKind): Promise<void> {
    let p = this.loading.get(kind);
    if (p === undefined) {
      p = kind.load().then((d) => {
        if (!sameTags(kind, d)) throw new Error(`driver ${d.name} does not have the tags of its kind ${kind.name}`);
        this.kinds.splice(this.kinds.indexOf(kind), 1);
        this.drivers.push(d);
      });
      this.loading.set(kind, p);
      // A failed load (a missing native build) is tried again at the next record of its kind.
      p.catch(() => this.loading.delete(kind));
    }
    return p;
  }

  /** Closes every driver's links. */
  async close(): Promise<void> {
    await Promise.all(this.loading.values()).catch(() => undefined);
    await Promise.all(this.drivers.map((d) => d.close()));
  }
}
