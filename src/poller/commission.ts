/**
 * Commissioning: finding devices (discover) and turning what a connector's device holds into
 * point proposals (learn), for any driver that has those features (driver.ts, DriverInfo).
 *
 * It sits beside the poller because it joins the drivers (the protocol work, in each driver's
 * folder: drivers/bacnet/commission.ts, drivers/modbus/kind.ts) and the model (which connectors
 * already point at a device, which points are already bound to an address, how far a learn got).
 * It knows no protocol: only the driver registry and the contract.
 *
 * Learns of one connector run one at a time (the second waits, then finds what the first kept).
 */
import type { DiscoverRequest, DriverInfo, PointSpec } from '../drivers/driver.js';
import type { DriverRegistry } from '../drivers/registry.js';
import { type HDict, HRef } from '../haystack/values.js';
import { ErrorCodes, HayloftError } from '../lib/errors.js';
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/log.js';
import type { Model } from '../model/model.js';
import type { PointState } from '../model/point-state.js';

export type { DiscoverRequest } from '../drivers/driver.js';

export interface CommissioningOptions {
  model: Model;
  /** Shows a learn's progress on its connector. */
  points: PointState;
  drivers: DriverRegistry;
  clock: Clock;
  log: Logger;
}

export class Commissioning {
  private readonly model: Model;
  private readonly points: PointState;
  private readonly drivers: DriverRegistry;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly running = new Map<string, Promise<unknown>>();

  constructor(opts: CommissioningOptions) {
    this.model = opts.model;
    this.points = opts.points;
    this.drivers = opts.drivers;
    this.clock = opts.clock;
    this.log = opts.log;
  }

  /** Lets the drivers forget what they keep between requests (a device's object list). */
  stop(): void {
    this.drivers.forget();
  }

  /** The loaded driver of a kind, loaded now if no record of its kind has loaded it yet. */
  private async driverOf(info: DriverInfo) {
    const d = this.drivers.byName(info.name) ?? (await this.drivers.loadByName(info.name));
    if (d === undefined) throw new HayloftError(ErrorCodes.CANNOT_LEARN, `this Hayloft runs without its ${info.dis} driver`);
    return d;
  }

  /** The names of the drivers that discover (`bacnet`), for the discover op's `proto`. */
  protos(): string[] {
    return this.drivers.infos().filter((d) => d.discover !== undefined).map((d) => d.name);
  }

  /** One row per device that answered, as the driver of `proto` describes it (dis, uri, connRef when one is made ...). */
  async discover(proto: string, request: DiscoverRequest): Promise<HDict[]> {
    const info = this.drivers.infos().find((d) => d.name === proto);
    if (info?.discover === undefined) throw new HayloftError(ErrorCodes.CANNOT_LEARN, `no driver discovers devices for proto "${proto}"`);
    return info.discover({
      request,
      conns: this.model.idsWithTag(info.connTag).map((id) => ({ id, tags: this.model.stored(id) as HDict })),
      driver: () => this.driverOf(info),
      displayOf: (id) => this.model.displayOf(id),
      log: this.log,
    });
  }

  /** Groups to drill into (dis, learn) or point proposals for a connector's device. */
  learn(connId: string, arg: string | undefined): Promise<HDict[]> {
    const rec = this.model.stored(connId);
    if (rec === undefined) throw new HayloftError(ErrorCodes.NOT_FOUND, `no record @${connId}`);
    const info = this.drivers.infoOf(rec);
    if (info?.learn === undefined) {
      const markers = this.drivers.infos().filter((d) => d.learn !== undefined).map((d) => d.connTag);
      throw new HayloftError(ErrorCodes.CANNOT_LEARN, `@${connId} is not a connector that can be learned (${markers.join(' or ')})`);
    }
    const learn = info.learn.bind(info);
    const run = async (): Promise<HDict[]> => {
      try {
        return await learn({
          conn: { id: connId, tags: rec },
          points: () => this.boundTo(info, connId),
          arg,
          progress: (percent) => this.points.setLearnProgress(connId, percent),
          driver: () => this.driverOf(info),
          displayOf: (id) => this.model.displayOf(id),
          clock: this.clock,
          log: this.log,
        });
      } finally {
        this.points.setLearnProgress(connId, null);
      }
    };
    // One learn of a connector at a time: the second waits, then finds what the first kept.
    const before = this.running.get(connId) ?? Promise.resolve();
    const p = before.catch(() => undefined).then(run);
    const tail = p.catch(() => undefined);
    this.running.set(connId, tail);
    void tail.then(() => {
      if (this.running.get(connId) === tail) this.running.delete(connId);
    });
    return p;
  }

  /** The points with an address of the driver whose connector Ref names the connector. */
  private boundTo(info: DriverInfo, connId: string): PointSpec[] {
    const out: PointSpec[] = [];
    for (const id of this.model.idsWithTag(info.curTag)) {
      const tags = this.model.stored(id) as HDict;
      const ref = tags.get(info.refTag);
      if (ref instanceof HRef && ref.id === connId) out.push({ id, tags });
    }
    return out;
  }
}
