/**
 * Live point values for a page: a watch (watchSub) over the points it shows, whose changes come
 * by push (socket.io on the watch's namespace, event `pointData`, docs/api-push-graphql.md) and,
 * while no socket is connected, by watchPoll every two seconds. The watch is closed (watchUnsub)
 * when the page goes away. Every change is handed to `onRows` as the server's rows (id, curVal,
 * curStatus, curErr).
 *
 * - The token goes in the handshake's `auth` (re-read at every connect, so a refreshed token is
 *   used), never in the URL; an admin acting as another user sends `auth.impersonate` (a browser's
 *   WebSocket cannot set the X-IMPERSONATE header).
 * - WebSocket only: its one long request is what push is for, and a proxy that blocks it leaves
 *   the page on watchPoll, which needs nothing more.
 * - A socket does not renew the watch's lease: while connected, a watchSub with no points renews
 *   it (a watchPoll would too, but then changes would come twice).
 * - The socket is retried every RETRY_MS after it fails or is dropped; a watch the server no
 *   longer knows (restart, expired lease) is opened again.
 * - Pushed rows are handed on in batches (one per BATCH_MS): a poll cycle of a thousand points is
 *   one render, not a thousand.
 */
import { type Socket, io } from 'socket.io-client';
import { type Row, type Session, grid, str } from './api.js';

const POLL_MS = 2000;
const RETRY_MS = 10_000;
const BATCH_MS = 50;
const LEASE = 'n:1 min';
const RENEW_MS = 20_000;

export type LiveMode = 'push' | 'poll';

export class LiveWatch {
  private watchId: string | undefined;
  private socket: Socket | undefined;
  private pollTimer: ReturnType<typeof setTimeout> | undefined;
  private retryTimer: ReturnType<typeof setTimeout> | undefined;
  private renewTimer: ReturnType<typeof setInterval> | undefined;
  private batchTimer: ReturnType<typeof setTimeout> | undefined;
  private batch: Row[] = [];
  private stopped = false;
  /** How values come now; shown on the page (and read by the browser test). */
  mode: LiveMode = 'poll';
  onMode: (mode: LiveMode) => void = () => undefined;

  constructor(
    private readonly session: Session,
    private readonly ids: string[],
    private readonly onRows: (rows: Row[]) => void,
    private readonly onError: (e: unknown) => void,
  ) {}

  async start(): Promise<void> {
    if (this.ids.length === 0 || this.stopped) return;
    try {
      const g = await this.session.op('watchSub', grid(this.ids.map((id) => ({ id: `r:${id}` })), { watchDis: 's:console', lease: LEASE }));
      this.watchId = str(g.meta.watchId);
      if (this.stopped) {
        this.close();
        return;
      }
      this.onRows(g.rows);
      this.connect();
    } catch (e) {
      if (this.stopped) return;
      this.onError(e);
      this.pollTimer = setTimeout(() => void this.start(), POLL_MS);
    }
  }

  private setMode(mode: LiveMode): void {
    if (this.mode === mode) return;
    this.mode = mode;
    this.onMode(mode);
  }

  /** Opens the push socket; until it connects (and whenever it is lost) values come by watchPoll. */
  private connect(): void {
    const watchId = this.watchId;
    if (watchId === undefined || this.stopped) return;
    this.schedulePoll();
    const socket = io(`/${watchId}`, {
      path: '/socket.io',
      transports: ['websocket'],
      reconnection: false,
      forceNew: true,
      auth: (cb) => cb(this.session.impersonating === undefined ? { token: this.session.accessToken } : { token: this.session.accessToken, impersonate: this.session.impersonating.id }),
    });
    this.socket = socket;
    socket.on('connect', () => {
      if (this.stopped) return;
      clearTimeout(this.pollTimer);
      this.pollTimer = undefined;
      this.setMode('push');
      this.renewTimer = setInterval(() => void this.renew(), RENEW_MS);
    });
    socket.on('pointData', (row: Row) => {
      this.batch.push(row);
      this.batchTimer ??= setTimeout(() => {
        this.batchTimer = undefined;
        const rows = this.batch;
        this.batch = [];
        if (!this.stopped) this.onRows(rows);
      }, BATCH_MS);
    });
    const lost = (): void => {
      if (this.socket !== socket) return;
      this.socket = undefined;
      socket.removeAllListeners();
      socket.close();
      clearInterval(this.renewTimer);
      if (this.stopped) return;
      this.setMode('poll');
      // Polling fills the gap (it also finds out whether the watch is still known); the socket is tried again later.
      this.poll();
      this.retryTimer = setTimeout(() => this.connect(), RETRY_MS);
    };
    socket.on('connect_error', lost);
    socket.on('disconnect', lost);
  }

  private schedulePoll(): void {
    clearTimeout(this.pollTimer);
    this.pollTimer = setTimeout(() => this.poll(), POLL_MS);
  }

  /** One watchPoll, then the next in POLL_MS unless the socket connected meanwhile. */
  private poll(): void {
    const watchId = this.watchId;
    if (this.stopped || watchId === undefined) return;
    clearTimeout(this.pollTimer);
    this.pollTimer = undefined;
    this.session.op('watchPoll', grid([], { watchId: `s:${watchId}` })).then(
      (g) => {
        if (this.stopped) return;
        if (g.rows.length > 0) this.onRows(g.rows);
        if (this.mode === 'poll' && this.watchId === watchId) this.schedulePoll();
      },
      (e: unknown) => this.reopen(e),
    );
  }

  /** While pushed to, the lease is renewed by a watchSub of no points. */
  private async renew(): Promise<void> {
    const watchId = this.watchId;
    if (this.stopped || watchId === undefined) return;
    try {
      await this.session.op('watchSub', grid([], { watchId: `s:${watchId}` }));
    } catch (e) {
      this.reopen(e);
    }
  }

  /** The watch is gone (the server restarted, or the lease ran out): open a new one. */
  private reopen(e: unknown): void {
    if (this.stopped) return;
    this.onError(e);
    this.shut();
    this.watchId = undefined;
    this.pollTimer = setTimeout(() => void this.start(), POLL_MS);
  }

  private shut(): void {
    clearTimeout(this.pollTimer);
    clearTimeout(this.retryTimer);
    clearTimeout(this.batchTimer);
    clearInterval(this.renewTimer);
    const s = this.socket;
    this.socket = undefined;
    if (s !== undefined) {
      s.removeAllListeners();
      s.close();
    }
    this.setMode('poll');
  }

  stop(): void {
    this.stopped = true;
    this.shut();
    this.close();
  }

  private close(): void {
    if (this.watchId === undefined || !this.session.loggedIn) return;
    const id = this.watchId;
    this.watchId = undefined;
    void this.session.op('watchUnsub', grid([], { watchId: `s:${id}`, close: 'm:' })).catch(() => undefined);
  }
}
