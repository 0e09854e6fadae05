/**
 * The contract between the HTTP layer and the operations. An op receives the request grid
 * (decoded from the body by Content-Type, or built from GET query parameters) and the services
 * it may use, and returns a grid; the server encodes it by Accept. Ops never see HTTP objects:
 * they throw HayloftErrors and the server maps codes to statuses in one place.
 */
import type { Gate } from '../auth/gate.js';
import type { Permission } from '../auth/permissions.js';
import type { TimeZone } from '../haystack/tz.js';
import type { HGrid } from '../haystack/values.js';
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/log.js';
import type { Model } from '../model/model.js';
import type { PointState } from '../model/point-state.js';
import type { PointWriter } from '../model/point-writer.js';
import type { WatchManager } from '../watch/index.js';
import type { HistoryStore } from '../store/history.js';
import type { RollupStore } from '../store/rollups.js';
import type { Commissioning } from '../poller/commission.js';
import type { AlarmEngine } from '../alarm/engine.js';
import type { Scheduler } from '../schedule/scheduler.js';

export type HttpMethod = 'GET' | 'POST';

/** What `about` reports. */
export interface ServerInfo {
  serverName: string;
  /** The server's default zone. */
  tz: TimeZone;
  productVersion: string;
  /** Epoch ms of boot. */
  bootTime: number;
  /** Whether the wall clock can be trusted (lib/clock-trust.ts `ClockStatus`); `about`'s extra column. */
  clockStatus?: () => string;
  /** The last `hayloft update` (lib/update-status.ts), null when none; `about`'s extra `update*` columns. */
  lastUpdate?: () => LastUpdate | null;
}

/** The last `hayloft update` as `about` shows it to a logged-in client (the console's System page). */
export interface LastUpdate {
  result: string;
  from: string;
  to: string;
  /** ISO time of the result. */
  at: string;
  message: string;
}

/**
 * A protocol driver as the ops see it: the driver registry's DriverInfo (drivers/driver.ts),
 * which the api layer may not import; the app passes the registry's list.
 */
export interface DriverListing {
  /** `modbus`, `bacnet`: the `proto` of discover. */
  readonly name: string;
  /** `Modbus`, `BACnet`. */
  readonly dis: string;
  /** The marker of its connectors (`modbusConn`). */
  readonly connTag: string;
  /** The Ref tag on its points naming their connector (`modbusConnRef`). */
  readonly refTag: string;
  /** The point tag of the address it reads (`modbusCur`). */
  readonly curTag: string;
  /** The point tag of the address it writes (`modbusWrite`), for drivers that write. */
  readonly writeTag?: string;
  /** What it supports, by feature name (cur, write, his, learn, discover, cov). */
  readonly features: Readonly<Record<string, boolean>>;
}

/** One object of Hayloft's BACnet device as the `bacnetObjects` op shows it (export/bacnet-export.ts). */
export interface BacnetObjectListing {
  readonly pointId: string;
  /** `analog-input`, `binary-value`, `multi-state-output`, ... */
  readonly objectType: string;
  readonly instance: number;
  readonly name: string;
  readonly commandable: boolean;
  /** The point's Haystack unit (analog objects). */
  readonly unit: string | null;
  /** presentValue as the device answers it: a REAL, 0/1 (binary), a state 1..n; null when it has none. */
  readonly presentValue: number | null;
  /** Multi-state: the state's text. */
  readonly stateText: string | null;
  readonly fault: boolean;
  readonly outOfService: boolean;
  readonly overridden: boolean;
  /** Commandable objects: the priority whose value is in effect (17: the relinquish default). */
  readonly priority: number | null;
}

/** Hayloft's BACnet device as the `bacnetObjects` op shows it. */
export interface BacnetDeviceListing {
  readonly instance: number;
  readonly name: string;
  readonly interface: string;
  readonly port: number;
  /** Points the filter matched that are not exported (a Str point without an enum). */
  readonly skipped: number;
  readonly objects: readonly BacnetObjectListing[];
}

/** The services an op may use. Grows as capabilities land (auth, history, watches). */
export interface OpContext {
  model: Model;
  clock: Clock;
  log: Logger;
  info: ServerInfo;
  /** Open watches (watchSub, watchPoll, watchUnsub). */
  watches: WatchManager;
  /** Point history (hisRead, hisWrite, hisDelete). */
  history: HistoryStore;
  /** 15-minute rollups of history retention removed (store/rollups.ts): hisDelete removes them over its range. Absent: none kept. */
  rollups?: RollupStore;
  /** The owner of points' live tags (hisWrite tells it what it wrote). */
  points: PointState;
  /** Priority arrays of writable points (pointWrite, pointWriteAudit). */
  writer: PointWriter;
  /** The protocol drivers this server has, loaded or not (the `drivers` op, discover's `proto`). Absent: none. */
  drivers?: readonly DriverListing[];
  /** Discovery and learning through the drivers (discover, learn); absent in servers built without drivers.  Loaded on first use; the drivers load their protocol libraries only when asked. */
  commission?: () => Promise<Commissioning>;
  /** The alarms (alarms, alarmAck, alarmShelve, alarmHistory); absent in servers built without them. */
  alarms?: AlarmEngine;
  /** The schedules (the `schedules` op); absent in servers built without them. */
  schedules?: Scheduler;
  /** Hayloft's BACnet device (the `bacnetObjects` op): null while none is configured; absent in servers built without it. */
  bacnetDevice?: () => BacnetDeviceListing | null;
}

export interface OpRequest {
  op: string;
  method: HttpMethod;
  grid: HGrid;
  ctx: OpContext;
  /**
   * Who the request acts as (after X-IMPERSONATE), and what it may do: every permission an op
   * checks is asked of this gate (auth/gate.ts). Gate.OPEN on a server built without
   * authentication, which the tests of HTTP mechanics use; the app always authenticates.
   */
  gate: Gate;
}

export interface Op {
  name: string;
  summary: string;
  methods: readonly HttpMethod[];
  /** Needed (for some entities at least) to call the op at all; the server asks the gate. */
  permission?: Permission;
  /**
   * Takes bodies up to maxBodyBytes (bulk writes: hisWrite, createRec, updateRec); every other
   * op's body is held to the far smaller maxRequestBodyBytes.
   */
  largeBody?: boolean;
  run(req: OpRequest): HGrid | Promise<HGrid>;
}
