/**
 * systemd's notify protocol (sd_notify(3)) for a `Type=notify` unit: READY=1 once serving,
 * STOPPING=1 when a stop begins, and WATCHDOG=1 keep-alives at half of `WatchdogSec` (systemd
 * passes it as $WATCHDOG_USEC) so that a hung daemon is restarted. Outside systemd
 * ($NOTIFY_SOCKET unset) every call does nothing.
 *
 * How the datagrams are sent: the protocol is a unix datagram socket, and node:dgram has only
 * UDP. The npm wrappers (`sd-notify`, `unix-dgram`) are native addons compiled by node-gyp at
 * install, `sd-notify` also against libsystemd's headers: a compiler and -dev packages on the
 * device or a failed install. So each message is handed to `systemd-notify(1)`, which ships with
 * systemd itself and so is present wherever the protocol is in use. It costs a short-lived
 * process per message: a handful at start and stop and one per half watchdog period. Since
 * systemd 246 the helper waits until the manager has processed the message (BARRIER=1), so it
 * exiting at once cannot leave the message unattributed. The sender being a child rather than
 * the main process, the unit needs `NotifyAccess=all`; `--pid` names the main process with the
 * READY message.
 */
import { execFile } from 'node:child_process';
import type { Logger } from './log.js';

/** Sends one notification (a list of VAR=value assignments); rejects when it could not. */
export type NotifySender = (assignments: readonly string[], env: Readonly<Record<string, string | undefined>>) => Promise<void>;

/** The default sender: `systemd-notify [--pid=<pid>] VAR=value ...`, five seconds at most. */
export const systemdNotifySender: NotifySender = (assignments, env) =>
  new Promise((resolve, reject) => {
    execFile('systemd-notify', [...assignments], { env, timeout: 5000 }, (err, _stdout, stderr) => {
      if (err === null) resolve();
      else reject(Object.assign(err as Error, { stderr: String(stderr).trim() }));
    });
  });

export interface SystemdNotifierOptions {
  log: Logger;
  /** The environment systemd set ($NOTIFY_SOCKET, $WATCHDOG_USEC, $WATCHDOG_PID). */
  env: Readonly<Record<string, string | undefined>>;
  /** This process's id (tests pass their own). */
  pid?: number;
  sender?: NotifySender;
  /**
   * Asked before each keep-alive: false skips it, so that systemd's watchdog restarts a daemon
   * that a restart would cure even though its event loop still turns (the app answers false only
   * then: not for a full disk, which a restart does not fix; src/app.ts `watchdogOk`).
   */
  healthy?: () => boolean | Promise<boolean>;
}

export class SystemdNotifier {
  /** True when started by systemd with a notify socket. */
  readonly enabled: boolean;
  /** The keep-alive period in ms (half of WatchdogSec), or null without a watchdog. */
  readonly watchdogMs: number | null;
  private readonly log: Logger;
  private readonly env: Readonly<Record<string, string | undefined>>;
  private readonly pid: number;
  private readonly sender: NotifySender;
  private readonly healthy: () => boolean | Promise<boolean>;
  private timer: NodeJS.Timeout | undefined;
  /** Messages go out one after another, so STOPPING never overtakes READY. */
  private queue: Promise<void> = Promise.resolve();
  private warned = false;

  constructor(opts: SystemdNotifierOptions) {
    this.log = opts.log;
    this.env = opts.env;
    this.pid = opts.pid ?? process.pid;
    this.sender = opts.sender ?? systemdNotifySender;
    this.healthy = opts.healthy ?? (() => true);
    const socket = opts.env.NOTIFY_SOCKET;
    this.enabled = socket !== undefined && socket !== '';
    this.watchdogMs = this.enabled ? watchdogPeriod(opts.env, this.pid) : null;
  }

  /** READY=1 (with a STATUS line), then keep-alives when systemd asked for them. */
  ready(status = 'serving'): Promise<void> {
    if (!this.enabled) return Promise.resolve();
    const sent = this.send([`--pid=${this.pid}`, 'READY=1', `STATUS=${status}`]);
    if (this.watchdogMs !== null && this.timer === undefined) {
      this.timer = setInterval(() => {
        void Promise.resolve()
          .then(() => this.healthy())
          .catch(() => false)
          .then((ok) => {
            if (this.timer === undefined) return;
            if (ok) void this.send(['WATCHDOG=1']);
            else this.log.warn('watchdog keep-alive withheld: a part of Hayloft reports that a restart would cure it');
          });
      }, this.watchdogMs);
      // The server keeps the process alive; the keep-alive timer must not hold an exit.
      this.timer.unref();
    }
    return sent;
  }

  /** STOPPING=1; ends the keep-alives. */
  stopping(status = 'stopping'): Promise<void> {
    this.stop();
    if (!this.enabled) return Promise.resolve();
    return this.send(['STOPPING=1', `STATUS=${status}`]);
  }

  /** Ends the keep-alives (idempotent). */
  stop(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Resolves once every message queued so far has been handed over (or failed). */
  flushed(): Promise<void> {
    return this.queue;
  }

  private send(assignments: string[]): Promise<void> {
    this.queue = this.queue.then(() =>
      this.sender(assignments, this.env).catch((err: unknown) => {
        // Said once: a missing helper would otherwise repeat every keep-alive.
        if (this.warned) return;
        this.warned = true;
        const missing = (err as NodeJS.ErrnoException).code === 'ENOENT';
        this.log.error(
          { err, ...(missing ? {} : { stderr: (err as { stderr?: string }).stderr }) },
          missing
            ? 'systemd expects notifications (NOTIFY_SOCKET is set) but systemd-notify is not installed: systemd will treat the start as failed'
            : 'cannot notify systemd',
        );
      }),
    );
    return this.queue;
  }
}

/**
 * Half of $WATCHDOG_USEC in ms, as sd_watchdog_enabled(3) recommends; null when unset, invalid,
 * or meant for another process ($WATCHDOG_PID).
 */
export function watchdogPeriod(env: Readonly<Record<string, string | undefined>>, pid: number): number | null {
  const usec = env.WATCHDOG_USEC;
  if (usec === undefined || !/^\d+$/.test(usec) || Number(usec) === 0) return null;
  const forPid = env.WATCHDOG_PID;
  if (forPid !== undefined && forPid !== '' && Number(forPid) !== pid) return null;
  return Math.max(1, Math.floor(Number(usec) / 2000));
}
