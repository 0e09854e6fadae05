/**
 * Live point values for a page: a watch (watchSub) over the points it shows, polled with
 * watchPoll every two seconds, closed (watchUnsub) when the page goes away. Every change is
 * handed to `onRows` as the server's rows (id, curVal, curStatus, curErr).
 */
import { type Row, type Session, grid, str } from './api.js';

const POLL_MS = 2000;

export class LiveWatch {
  private watchId: string | undefined;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private stopped = false;

  constructor(
    private readonly session: Session,
    private readonly ids: string[],
    private readonly onRows: (rows: Row[]) => void,
    private readonly onError: (e: unknown) => void,
  ) {}

  async start(): Promise<void> {
    if (this.ids.length === 0) return;
    try {
      const g = await this.session.op('watchSub', grid(this.ids.map((id) => ({ id: `r:${id}` })), { watchDis: 's:console', lease: 'n:1 min' }));
      if (this.stopped) {
        this.watchId = str(g.meta.watchId);
        this.close();
        return;
      }
      this.watchId = str(g.meta.watchId);
      this.onRows(g.rows);
      this.next();
    } catch (e) {
      if (!this.stopped) this.onError(e);
    }
  }

  private next(): void {
    this.timer = setTimeout(() => void this.poll(), POLL_MS);
  }

  private async poll(): Promise<void> {
    if (this.stopped || this.watchId === undefined) return;
    try {
      const g = await this.session.op('watchPoll', grid([], { watchId: `s:${this.watchId}` }));
      if (this.stopped) return;
      if (g.rows.length > 0) this.onRows(g.rows);
      this.next();
    } catch (e) {
      if (this.stopped) return;
      // An expired or unknown watch (the server restarted): subscribe again.
      this.watchId = undefined;
      this.onError(e);
      this.timer = setTimeout(() => void this.start(), POLL_MS);
    }
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.close();
  }

  private close(): void {
    if (this.watchId === undefined || !this.session.loggedIn) return;
    const id = this.watchId;
    this.watchId = undefined;
    void this.session.op('watchUnsub', grid([], { watchId: `s:${id}`, close: 'm:' })).catch(() => undefined);
  }
}
