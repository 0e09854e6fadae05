/**
 * The drivers a running Hayloft knows, looked up by the tags that name them. Built by the
 * composition root (no module-level registry: tests build their own with fake drivers).
 */
import type { Driver } from './driver.js';

export class DriverRegistry {
  private readonly drivers: Driver[] = [];

  constructor(drivers: readonly Driver[] = []) {
    for (const d of drivers) this.register(d);
  }

  register(driver: Driver): void {
    for (const d of this.drivers) {
      if (d.name === driver.name || d.connTag === driver.connTag || d.refTag === driver.refTag) {
        throw new Error(`driver ${driver.name} clashes with driver ${d.name}`);
      }
    }
    this.drivers.push(driver);
  }

  all(): readonly Driver[] {
    return this.drivers;
  }

  byName(name: string): Driver | undefined {
    return this.drivers.find((d) => d.name === name);
  }

  /** Closes every driver's links. */
  async close(): Promise<void> {
    await Promise.all(this.drivers.map((d) => d.close()));
  }
}
