/**
 * The drivers a running Hayloft knows, looked up by the tags that name them. Built by the
 * composition root (no module-level registry: tests build their own with fake drivers).
 * Drivers are given loaded, or as kinds (kinds.ts) loaded when a record of theirs first exists.
 */
import type { Driver } from './driver.js';
import type { DriverKind } from './kinds.js';

export class DriverRegistry {
  private readonly drivers: Driver[] = [];
  private readonly kinds: DriverKind[] = [];
  private readonly loading = new Map<DriverKind, Promise<void>>();

  constructor(drivers: readonly Driver[] = [], kinds: readonly DriverKind[] = []) {
    for (const d of drivers) this.register(d);
    for (const k of kinds) {
      this.clash(k);
      this.kinds.push(k);
    }
  }

  private clash(driver: Omit<DriverKind, 'load'>): void {
    for (const d of [...this.drivers, ...this.kinds]) {
      if (d.name === driver.name || d.connTag === driver.connTag || d.refTag === driver.refTag) {
        throw new Error(`driver ${driver.name} clashes with driver ${d.name}`);
      }
    }
  }

  register(driver: Driver): void {
    this.clash(driver);
    this.drivers.push(driver);
  }

  /** The loaded drivers. */
  all(): readonly Driver[] {
    return this.drivers;
  }

  byName(name: string): Driver | undefined {
    return this.drivers.find((d) => d.name === name);
  }

  /** The Ref tags naming a connector, of every driver loaded or not. */
  refTags(): string[] {
    return this.tags().map((d) => d.refTag);
  }

  /** The tags binding a point to a driver (its connector Ref, its write address), loaded or not. */
  tags(): { refTag: string; writeTag?: string }[] {
    return [...this.drivers, ...this.kinds].map((d) => (d.writeTag === undefined ? { refTag: d.refTag } : { refTag: d.refTag, writeTag: d.writeTag }));
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
        if (d.name !== kind.name || d.connTag !== kind.connTag || d.refTag !== kind.refTag || d.curTag !== kind.curTag) {
          throw new Error(`driver ${d.name} does not have the tags of its kind ${kind.name}`);
        }
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
