/**
 * BACnet change of value for one connector's device: SubscribeCOV per object (unconfirmed
 * notifications), notifications matched to their point by subscriber process id and object, and
 * the device's I-Am (sent when it starts) reported as a restart.
 *
 * Every subscription gets a process id of its own from the driver (unique on the socket), so a
 * notification can only land on the point that asked for it. Confirmed notifications, which some
 * devices send anyway, are acknowledged. Decisions (when to renew, when to give up and poll) are
 * the poller's (poller/cov.ts).
 */
import { PropertyIdentifier } from '@bacnet-js/client';
import type { CovSupport, PointRead, PreparedPoint } from '../driver.js';
import { downError, refusedError } from '../driver.js';
import type { BacnetAddress, DeviceAddress } from './address.js';
import { bacnetErrorText, classify, rawOf, timed, type AppValue } from './wire.js';

/** What cov.ts needs of the driver (bacnet-driver.ts passes it; importing it would be a cycle). */
export interface CovSocket {
  client(): CovClient;
  nextProcessId(): number;
}

interface Notification {
  header?: { sender?: { address?: string } };
  invokeId?: number;
  payload: { subscriberProcessId: number; initiatingDeviceId: number; monitoredObjectId: { type: number; instance: number }; values: { property: { id: number }; value: AppValue[] }[] };
}

/** The library client, as far as COV uses it. */
export interface CovClient {
  subscribeCov(receiver: { address: string }, objectId: { type: number; instance: number }, subscribeId: number, cancel: boolean, issueConfirmedNotifications: boolean, lifetime: number): Promise<void>;
  simpleAckResponse(receiver: { address: string }, service: number, invokeId: number): void;
  on(event: 'covNotifyUnconfirmed' | 'covNotify', f: (c: Notification) => void): unknown;
  on(event: 'iAm', f: (c: { header?: { sender?: { address?: string } }; payload: { deviceId: number } }) => void): unknown;
  off(event: string, f: (...args: never[]) => void): unknown;
}

interface CovPoint extends PreparedPoint {
  readonly addr: BacnetAddress;
}

const CONFIRMED_COV_NOTIFICATION = 1;
const PRESENT_VALUE: number = PropertyIdentifier.PRESENT_VALUE;

/** `host`, `host:port` as senders are named, to `host:port`. */
function withPort(address: string): string {
  return /:\d+$/.test(address) ? address : `${address}:47808`;
}

export class BacnetCov implements CovSupport {
  onValue: ((point: PreparedPoint, read: PointRead) => void) | undefined;
  onRestart: (() => void) | undefined;
  /** Process id -> point, and back. */
  private readonly byPid = new Map<number, CovPoint>();
  private readonly pids = new Map<CovPoint, number>();
  private listening: CovClient | undefined;
  private closed = false;

  constructor(
    private readonly socket: CovSocket,
    private readonly device: DeviceAddress,
    private readonly timeoutMs: number,
  ) {}

  async subscribe(point: PreparedPoint, lifetimeMs: number): Promise<void> {
    const p = point as CovPoint;
    if (p.addr.property !== PRESENT_VALUE) throw refusedError(`${p.addr.text}: change of value reports presentValue only`);
    const client = this.listen();
    let pid = this.pids.get(p);
    if (pid === undefined) {
      pid = this.socket.nextProcessId();
      this.pids.set(p, pid);
      this.byPid.set(pid, p);
    }
    try {
      await timed(client.subscribeCov({ address: this.device.address }, { type: p.addr.type, instance: p.addr.instance }, pid, false, false, Math.max(1, Math.round(lifetimeMs / 1000))), this.timeoutMs);
    } catch (e) {
      const c = classify(e);
      const msg = bacnetErrorText(e);
      if (c.kind === 'timeout') throw downError(`no answer to SubscribeCOV of ${p.addr.text} from device ${this.device.deviceInstance} within ${this.timeoutMs} ms`);
      if (c.kind === 'other') throw downError(`SubscribeCOV of ${p.addr.text}: ${msg}`, e);
      throw refusedError(`device ${this.device.deviceInstance} refused SubscribeCOV of ${p.addr.text} (${msg})`, e);
    }
  }

  async cancel(point: PreparedPoint): Promise<void> {
    const p = point as CovPoint;
    const pid = this.pids.get(p);
    // A closed connection's socket may be gone: its subscriptions lapse by themselves.
    if (pid === undefined || this.closed) return;
    this.pids.delete(p);
    this.byPid.delete(pid);
    try {
      await timed(this.listen().subscribeCov({ address: this.device.address }, { type: p.addr.type, instance: p.addr.instance }, pid, true, false, 0), this.timeoutMs);
    } catch {
      // The subscription lapses by itself at the end of its lifetime.
    }
  }

  /** Stops listening (the connection closes). */
  close(): void {
    this.closed = true;
    this.unhook();
    this.byPid.clear();
    this.pids.clear();
  }

  private unhook(): void {
    const c = this.listening;
    this.listening = undefined;
    if (c === undefined) return;
    c.off('covNotifyUnconfirmed', this.notified);
    c.off('covNotify', this.notifiedConfirmed);
    c.off('iAm', this.announced);
  }

  private listen(): CovClient {
    const c = this.socket.client();
    if (this.closed) throw downError('the connection is closed');
    if (this.listening !== c) {
      this.unhook();
      c.on('covNotifyUnconfirmed', this.notified);
      c.on('covNotify', this.notifiedConfirmed);
      c.on('iAm', this.announced);
      this.listening = c;
    }
    return c;
  }

  private fromDevice(sender: string | undefined): boolean {
    return sender !== undefined && withPort(sender) === this.device.address;
  }

  private readonly notified = (n: Notification): void => {
    const sender = n.header?.sender?.address;
    if (!this.fromDevice(sender)) return;
    const p = this.byPid.get(n.payload.subscriberProcessId);
    const o = n.payload.monitoredObjectId;
    if (p === undefined || o.type !== p.addr.type || o.instance !== p.addr.instance) return;
    const pv = n.payload.values.find((v) => v.property.id === PRESENT_VALUE);
    if (pv === undefined) return;
    const r = rawOf(pv.value[0], `${p.addr.text} of device ${this.device.deviceInstance}`);
    this.onValue?.(p, typeof r === 'object' ? { err: r } : { val: r });
  };

  /** Confirmed notifications (which some devices send anyway) wait for an acknowledgement. */
  private readonly notifiedConfirmed = (n: Notification): void => {
    const sender = n.header?.sender?.address;
    if (!this.fromDevice(sender)) return;
    this.listening?.simpleAckResponse({ address: sender as string }, CONFIRMED_COV_NOTIFICATION, n.invokeId ?? 0);
    this.notified(n);
  };

  private readonly announced = (c: { header?: { sender?: { address?: string } }; payload: { deviceId: number } }): void => {
    if (c.payload.deviceId === this.device.deviceInstance && this.fromDevice(c.header?.sender?.address)) this.onRestart?.();
  };
}
