/**
 * Foreign-device registration (BACnet Annex J.5): a socket on a subnet without a BBMD of its own
 * registers with a BBMD elsewhere for a time-to-live, and so receives the broadcasts of the
 * BBMD's networks (Who-Is, I-Am) and can send its own through it (Distribute-Broadcast-To-Network).
 * The registration is renewed at half its time-to-live (the BBMD drops it 30 s after the TTL);
 * a refused or unanswered one is tried again with backoff (lib/backoff.ts), at most every TTL.
 * The library sends the request and matches the BVLC-Result; this keeps it alive and says how it is.
 */
import { backoffDelay } from '../../lib/backoff.js';
import { bacnetErrorText } from './wire.js';

/** What registration needs of the library's client. */
export interface RegisteringClient {
  registerForeignDevice(receiver: { address: string }, ttl: number): Promise<void>;
}

export type ForeignState = 'registering' | 'registered' | 'failed' | 'stopped';

export interface ForeignStatus {
  bbmd: string;
  ttlS: number;
  state: ForeignState;
  /** Epoch ms of the last successful registration (null: none yet). */
  registeredAt: number | null;
  /** Why the last attempt failed (null after a success). */
  error: string | null;
  registrations: number;
  failures: number;
}

export class ForeignRegistration {
  private timer: ReturnType<typeof setTimeout> | undefined;
  private failuresInRow = 0;
  private stopped = false;
  private first: Promise<void> | undefined;
  private readonly st: ForeignStatus;

  constructor(
    private readonly client: () => RegisteringClient | undefined,
    bbmd: string,
    ttlS: number,
    private readonly now: () => number,
    private readonly log?: (level: 'info' | 'warn', msg: string, detail: Record<string, unknown>) => void,
    /** Told after each successful registration (the device announces itself through the BBMD). */
    private readonly registered?: () => void,
  ) {
    this.st = { bbmd, ttlS, state: 'registering', registeredAt: null, error: null, registrations: 0, failures: 0 };
  }

  status(): ForeignStatus {
    return { ...this.st };
  }

  start(): void {
    this.first = this.register();
  }

  /** Resolves once the first attempt has an outcome (or after `ms`): true when registered. */
  async settled(ms: number): Promise<boolean> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([this.first, new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))]);
    clearTimeout(timer);
    return this.st.state === 'registered';
  }

  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.stopped = true;
    this.st.state = 'stopped';
  }

  private async register(): Promise<void> {
    const c = this.client();
    if (c === undefined || this.stopped) return;
    try {
      await c.registerForeignDevice({ address: this.st.bbmd }, this.st.ttlS);
    } catch (e) {
      if (this.stopped) return;
      this.failuresInRow++;
      this.st.failures++;
      this.st.state = 'failed';
      this.st.error = bacnetErrorText(e) === 'no answer' ? `no answer from the BBMD at ${this.st.bbmd}` : `the BBMD at ${this.st.bbmd} refused the registration (${bacnetErrorText(e)})`;
      const delay = backoffDelay(this.failuresInRow, { minMs: 1000, maxMs: Math.max(1000, this.st.ttlS * 1000) });
      if (this.failuresInRow === 1) this.log?.('warn', 'BACnet foreign-device registration failed', { bbmd: this.st.bbmd, error: this.st.error, retryInMs: delay });
      this.schedule(delay);
      return;
    }
    if (this.stopped) return;
    if (this.st.state !== 'registered') this.log?.('info', 'BACnet foreign device registered', { bbmd: this.st.bbmd, ttlS: this.st.ttlS });
    this.failuresInRow = 0;
    this.st.state = 'registered';
    this.st.error = null;
    this.st.registeredAt = this.now();
    this.st.registrations++;
    this.registered?.();
    this.schedule(Math.max(500, (this.st.ttlS * 1000) / 2));
  }

  private schedule(ms: number): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.register(), ms);
    this.timer.unref();
  }
}
