/**
 * The driver contract: what the poller asks of a protocol (Modbus, BACnet, ...) and nothing more.
 *
 * Drivers know nothing of the model (docs/design/README.md): the poller hands them a connector's tags and
 * the tags of its points and gets raw values back. Deciding `curStatus`, units, kinds, stale
 * times, backoff and history is the poller's job, once, for every protocol.
 *
 * Errors carry stable codes and decide the status the poller shows:
 * - HL_DRIVER_CONFIG (fault): a connector or point is configured wrongly. Thrown by `open` and
 *   `prepare`, which do no I/O, so a bad address is a fault at once, not after a timeout.
 * - HL_DRIVER_DOWN (down): the device does not answer or the link is lost. `read` rejects with it
 *   and the whole connector is down; the poller backs off and tries again.
 * - HL_DRIVER_REFUSED (fault): the device answered but refused one point (no such register or
 *   object). `read` reports it for that point only: the other points keep their values.
 *
 * Writing is optional: a driver that writes names its address tag (`writeTag`), and its
 * connections check that tag in `prepareWrite` and send values with `write`, one point at a time
 * (the poller's write queue decides when). The same codes apply: a write rejected with
 * HL_DRIVER_DOWN shows `writeStatus` down, with HL_DRIVER_REFUSED or HL_DRIVER_CONFIG fault.
 */
import type { HDict } from '../haystack/values.js';
import type { Clock } from '../lib/clock.js';
import { ErrorCodes, HayloftError } from '../lib/errors.js';
import type { Logger } from '../lib/log.js';

/** A connector record as the driver sees it: id and stored tags. */
export interface ConnSpec {
  readonly id: string;
  readonly tags: HDict;
}

/** A point record as the driver sees it: id and stored tags. */
export interface PointSpec {
  readonly id: string;
  readonly tags: HDict;
}

/** A point checked by `prepare`: opaque to the poller, which passes it back to `read`. */
export interface PreparedPoint {
  readonly id: string;
}

/** A value as read from the device, before the poller applies the point's kind and unit. */
export type RawValue = number | boolean | string;

/** The outcome of one point of a read. */
export type PointRead = { readonly val: RawValue } | { readonly err: HayloftError };

/** A point's write address checked by `prepareWrite`: opaque to the poller, passed back to `write`. */
export interface PreparedWrite {
  readonly id: string;
}

/**
 * Change of value, for drivers whose devices push changes (BACnet SubscribeCOV). The poller
 * decides which points use it and falls back to polling when it fails (poller/cov.ts).
 */
export interface CovSupport {
  /**
   * Subscribes (or renews) a point for `lifetimeMs`. Resolves when the device accepted; rejects
   * with HL_DRIVER_REFUSED (the device refused) or HL_DRIVER_DOWN (no answer).
   */
  subscribe(point: PreparedPoint, lifetimeMs: number): Promise<void>;
  /** Cancels a point's subscription (best effort: a device that does not answer lets it lapse). */
  cancel(point: PreparedPoint): Promise<void>;
  /** Set by the poller: a notification for a subscribed point. */
  onValue: ((point: PreparedPoint, read: PointRead) => void) | undefined;
  /** Set by the poller: the device announced itself (it restarted and forgot its subscriptions). */
  onRestart: (() => void) | undefined;
}

export interface DriverConn {
  /** Change of value, when the protocol has it. */
  readonly cov?: CovSupport;
  /**
   * Checks a point's address tags and compiles them for `read`. No I/O. Throws HL_DRIVER_CONFIG
   * with a message an operator can act on.
   */
  prepare(point: PointSpec): PreparedPoint;
  /**
   * Reads points prepared by this connection (usually one poll bucket: the same array every
   * cycle, so a driver may cache its request plan by array identity). Resolves with one outcome
   * per point, in order. Rejects with HL_DRIVER_DOWN when the device cannot be reached. Settles
   * within the connection's timeouts, whatever the device does.
   */
  read(points: readonly PreparedPoint[]): Promise<PointRead[]>;
  /**
   * For drivers that write: checks a point's write address tags (the driver's `writeTag`, and
   * what goes with it) and compiles them for `write`. No I/O. Throws HL_DRIVER_CONFIG.
   */
  prepareWrite?(point: PointSpec): PreparedWrite;
  /**
   * Writes a value to the device; null relinquishes it where the protocol has priorities (BACnet
   * writes NULL at its priority) and does nothing where it has none (Modbus). Resolves once the
   * device acknowledged (and, where the device shows it, the value is in place). Rejects with
   * HL_DRIVER_DOWN (no answer), HL_DRIVER_REFUSED (the device said no) or HL_DRIVER_CONFIG (the
   * value cannot be sent to that address). Settles within the connection's timeouts.
   */
  write?(point: PreparedWrite, val: RawValue | null): Promise<void>;
  /** Releases the connection's share of its link. Reads after close reject. */
  close(): Promise<void>;
}

/** The tags that bind records to a driver, all derived from its name (driverTags). */
export interface DriverTags {
  /** Short name for logs: `modbus`, `bacnet`. */
  readonly name: string;
  /** The marker of its connector records: `modbusConn`. */
  readonly connTag: string;
  /** The Ref tag on points naming their connector: `modbusConnRef`. */
  readonly refTag: string;
  /** The point tag holding the address to read: `modbusCur`. */
  readonly curTag: string;
  /** The point tag holding the address to write (`modbusWrite`); absent: the driver does not write. */
  readonly writeTag?: string;
  /**
   * The marker asking for change of value on a point or its connector (`bacnetCov`), and the
   * tag of the subscription lifetime (`bacnetCovLifetime`), for drivers whose connections have `cov`.
   */
  readonly covTags?: { readonly marker: string; readonly lifetime: string };
}

/**
 * What a driver supports, said before it is loaded (the console and the ops ask; the registry
 * checks a loaded driver against it). The names are Haxall's connector features.
 */
// A type, not an interface: a listing of features by name (api/op.ts, DriverListing) takes it as a record.
export type DriverFeatures = {
  /** Reads points' current values (`<name>Cur`): every driver the poller runs does. */
  readonly cur: boolean;
  /** Writes points (`<name>Write`). */
  readonly write: boolean;
  /** Reads a device's own history. None of the built-in drivers: the poller collects history from curVal. */
  readonly his: boolean;
  /** Lists what a connector's device offers as point proposals (`learn`). */
  readonly learn: boolean;
  /** Finds devices on the network (`discover`). */
  readonly discover: boolean;
  /** Change of value pushed by the device (`<name>Cov`, `<name>CovLifetime`). */
  readonly cov: boolean;
};

/**
 * The tags of a driver, from its name alone, as Haystack connectors name them: `<name>Conn`,
 * `<name>ConnRef`, `<name>Cur`, and, when it has those features, `<name>Write` and
 * `<name>Cov`/`<name>CovLifetime`. A new driver picks a name and gets its tags.
 */
export function driverTags<F extends Pick<DriverFeatures, 'write' | 'cov'>>(name: string, features: F): TagsOf<F> {
  return {
    name,
    connTag: `${name}Conn`,
    refTag: `${name}ConnRef`,
    curTag: `${name}Cur`,
    ...(features.write ? { writeTag: `${name}Write` } : {}),
    ...(features.cov ? { covTags: { marker: `${name}Cov`, lifetime: `${name}CovLifetime` } } : {}),
  } as TagsOf<F>;
}

/** The tags of a driver with those features: `writeTag` and `covTags` present when they are `true`. */
export type TagsOf<F extends Pick<DriverFeatures, 'write' | 'cov'>> = Omit<DriverTags, 'writeTag' | 'covTags'> &
  (F['write'] extends true ? { readonly writeTag: string } : object) &
  (F['cov'] extends true ? { readonly covTags: { readonly marker: string; readonly lifetime: string } } : object);

/** A `discover` request (docs/drivers.md, "Commissioning"), checked by the op. */
export interface DiscoverRequest {
  /** `host:port` for a directed search. */
  readonly address?: string;
  readonly low?: number;
  readonly high?: number;
  readonly timeoutMs: number;
}

/** What commissioning (poller/commission.ts) gives a driver's learn and discover. */
export interface CommissionContext {
  /** The loaded driver of this kind, loaded now if no record has loaded it yet (its protocol library with it). */
  driver(): Promise<Driver>;
  /** A record's display name, for the Refs of the answer. */
  displayOf(id: string): string | null;
  readonly log: Logger;
}

/** What a driver's discover is given by commissioning. */
export interface DiscoverContext extends CommissionContext {
  readonly request: DiscoverRequest;
  /** The driver's connectors already made: a device answering for one names it (`connRef`). */
  readonly conns: readonly ConnSpec[];
}

/** What a driver's learn is given by commissioning. */
export interface LearnContext extends CommissionContext {
  readonly conn: ConnSpec;
  /**
   * The points bound to this connector now (its Ref tag naming it, with an address): a proposal
   * for an address already bound carries the point's `id` (and keeps its `name`). Asked once the
   * device has answered, so points made meanwhile count.
   */
  points(): readonly PointSpec[];
  /** The `learn` value of a group row to drill into; absent: the top. */
  readonly arg: string | undefined;
  /** Shows how far the learn got on the connector (`learnProgress`), in percent. */
  progress(percent: number): void;
  readonly clock: Clock;
}

/**
 * A driver as the rest of Hayloft knows it before loading its protocol library: its tags, its
 * features, and the commissioning and record checks it brings (Haxall's ConnModel). Only what
 * is here is needed to add a driver: the model, the ops and the console learn from the registry.
 */
export interface DriverInfo extends DriverTags {
  /** Its name for people: `Modbus`, `BACnet`. */
  readonly dis: string;
  readonly features: DriverFeatures;
  /**
   * Checks a record's tags of this driver as createRec (old undefined) and updateRec store it,
   * so a record the driver could not use is refused at once and changes nothing. Runs for every
   * record written, inside the model's transaction: it returns at once for records that are
   * none of its business. Throws a HayloftError to refuse. Must not need the protocol library.
   */
  checkRecord?(rec: HDict, old: HDict | undefined): void;
  /** For `features.learn`: groups to drill into (dis, learn) or point proposals ready for createRec. */
  learn?(ctx: LearnContext): Promise<HDict[]>;
  /** For `features.discover`: one row per device that answered (dis, uri, connRef when one is made ...). */
  discover?(ctx: DiscoverContext): Promise<HDict[]>;
  /** Forgets what commissioning keeps between requests (a device's object list). */
  forget?(): void;
}

/** A driver by its tags and features, with how to load it (drivers/kinds.ts). The tags must equal those of the loaded driver. */
export interface DriverKind extends DriverInfo {
  load(): Promise<Driver>;
}

export interface Driver extends DriverTags {
  /**
   * A connection for a connector record. No I/O (links open on first read). Throws
   * HL_DRIVER_CONFIG when the connector's tags are wrong.
   */
  open(conn: ConnSpec): DriverConn;
  /** Closes every link this driver opened. */
  close(): Promise<void>;
}

export function configError(message: string, cause?: unknown): HayloftError {
  return new HayloftError(ErrorCodes.DRIVER_CONFIG, message, cause === undefined ? undefined : { cause });
}

export function downError(message: string, cause?: unknown): HayloftError {
  return new HayloftError(ErrorCodes.DRIVER_DOWN, message, cause === undefined ? undefined : { cause });
}

export function refusedError(message: string, cause?: unknown): HayloftError {
  return new HayloftError(ErrorCodes.DRIVER_REFUSED, message, cause === undefined ? undefined : { cause });
}
