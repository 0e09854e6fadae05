/**
 * One physical Modbus link (a TCP connection to a device or gateway, or a serial port with its bus)
 * and its request queue. Modbus masters must send one request at a time on a link: an RTU bus is
 * half-duplex, and many TCP gateways and cheap devices mix up pipelined requests. Connectors for
 * several slaves of one link share it, and so its queue.
 *
 * The link opens on the first request and is dropped (closed) after any failure other than a
 * Modbus exception: a timeout, a refused or reset connection, a serial error. The next request
 * opens it again. Dropping after a timeout matters: a late answer to the old request would
 * otherwise be taken for the answer to the next one.
 *
 * Every request settles within its timeout, whatever the library or the device does: the timer
 * here does not rely on modbus-serial's own (which destroy() cancels without settling).
 */
import ModbusRTU from 'modbus-serial';
import { ErrorCodes, HayloftError } from '../../lib/errors.js';
import { downError } from '../driver.js';
import { type LinkSpec, describeLink } from './uri.js';

/** Modbus function codes this driver reads with. */
export type ReadFunction = 1 | 2 | 3 | 4;

/** A write: one coil (FC 5), coils (FC 15), one register (FC 6) or registers (FC 16). */
export type WriteRequest = { fc: 5; addr: number; value: boolean } | { fc: 15; addr: number; values: boolean[] } | { fc: 6; addr: number; value: number } | { fc: 16; addr: number; values: number[] };

export interface ReadAnswer {
  /** Bits as booleans (FC 1, 2; padded to whole bytes) or registers as numbers (FC 3, 4). */
  data: readonly (boolean | number)[];
  /** Register bytes as sent (FC 3, 4). */
  buffer: Uint8Array;
}

/** A Modbus exception answer: the device is there and says no. */
export class ModbusException extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
    this.name = 'ModbusException';
  }
}

type LibError = Error & { modbusCode?: number; code?: string; errno?: string };
type Callback = (err: LibError | null, res?: ReadAnswer) => void;
type WriteCallback = (err: LibError | null, res?: unknown) => void;

interface Client {
  isOpen: boolean;
  writeFC1(unit: number, addr: number, len: number, next: Callback): void;
  writeFC2(unit: number, addr: number, len: number, next: Callback): void;
  writeFC3(unit: number, addr: number, len: number, next: Callback): void;
  writeFC4(unit: number, addr: number, len: number, next: Callback): void;
  writeFC5(unit: number, addr: number, state: boolean, next: WriteCallback): void;
  writeFC6(unit: number, addr: number, value: number, next: WriteCallback): void;
  writeFC15(unit: number, addr: number, states: boolean[], next: WriteCallback): void;
  writeFC16(unit: number, addr: number, values: number[], next: WriteCallback): void;
  connectTCP(host: string, opts: { port: number }): Promise<void>;
  connectRTUBuffered(path: string, opts: Record<string, unknown>): Promise<void>;
  close(cb: () => void): void;
  destroy(cb: () => void): void;
  on(event: 'error' | 'close', f: (e?: unknown) => void): unknown;
}

/**
 * modbus-serial keeps every transaction (its callback, and through it the answer) in a table
 * keyed by transaction id that it never clears: 256 per TCP client, so 100 devices polled each
 * second held some 50 MB of old answers. One request at a time per link means nothing else is
 * pending when one settles: the table is emptied then (a late answer to a timed-out request finds
 * no transaction and is ignored, as it should be).
 */
function forget(c: Client): void {
  (c as unknown as { _transactions: Record<number, unknown> })._transactions = {};
}

function errText(e: unknown): string {
  if (e instanceof Error) {
    const code = (e as { code?: unknown }).code;
    return typeof code === 'string' && !e.message.includes(code) ? `${code}: ${e.message}` : e.message;
  }
  return String(e);
}

export class ModbusLink {
  /** Connections using this link; the driver closes it when the last one goes. */
  users = 0;
  private client: Client | undefined;
  private opening: Promise<Client> | undefined;
  private closing: Promise<void> = Promise.resolve();
  private queue: Promise<unknown> = Promise.resolve();
  private closed = false;

  constructor(readonly spec: LinkSpec) {}

  get description(): string {
    return describeLink(this.spec);
  }

  /** Reads `len` bits or registers from `unit`, after the requests queued before it. */
  read(unit: number, fc: ReadFunction, addr: number, len: number, timeoutMs: number): Promise<ReadAnswer> {
    return this.enqueue(() =>
      this.send<ReadAnswer>(unit, timeoutMs, (client, done) => {
        if (fc === 1) client.writeFC1(unit, addr, len, done);
        else if (fc === 2) client.writeFC2(unit, addr, len, done);
        else if (fc === 3) client.writeFC3(unit, addr, len, done);
        else client.writeFC4(unit, addr, len, done);
      }),
    );
  }

  /** Writes coils or registers of `unit` in one request, in the same queue as reads. */
  write(unit: number, w: WriteRequest, timeoutMs: number): Promise<void> {
    return this.enqueue(async () => {
      await this.send<unknown>(unit, timeoutMs, (client, done) => {
        if (w.fc === 5) client.writeFC5(unit, w.addr, w.value, done);
        else if (w.fc === 6) client.writeFC6(unit, w.addr, w.value, done);
        else if (w.fc === 15) client.writeFC15(unit, w.addr, w.values, done);
        else client.writeFC16(unit, w.addr, w.values, done);
      });
    });
  }

  private enqueue<T>(f: () => Promise<T>): Promise<T> {
    const run = this.queue.then(f);
    this.queue = run.catch(() => undefined);
    return run;
  }

  /** Closes the link; queued requests fail as down. */
  async close(): Promise<void> {
    this.closed = true;
    this.drop();
    await this.closing;
  }

  /** One request: `issue` sends it with `done` as the library's callback. */
  private async send<T>(unit: number, timeoutMs: number, issue: (client: Client, done: (err: LibError | null, res?: T) => void) => void): Promise<T> {
    if (this.closed) throw downError(`link ${this.description} is closed`);
    const deadline = Date.now() + timeoutMs;
    const client = await this.connected(timeoutMs);
    const left = Math.max(1, deadline - Date.now());
    return new Promise<T>((resolve, reject) => {
      let settled = false;
      const timer = setTimeout(() => {
        if (settled) return;
        settled = true;
        forget(client);
        this.drop();
        reject(downError(`no answer from unit ${unit} on ${this.description} within ${timeoutMs} ms`));
      }, left);
      const done = (err: LibError | null, res?: T): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        forget(client);
        if (err === null || err === undefined) {
          if (res === undefined) reject(downError(`empty answer from unit ${unit} on ${this.description}`));
          else resolve(res);
        } else if (typeof err.modbusCode === 'number') {
          reject(new ModbusException(err.modbusCode, err.message));
        } else {
          this.drop();
          reject(downError(`unit ${unit} on ${this.description}: ${errText(err)}`, err));
        }
      };
      try {
        issue(client, done);
      } catch (e) {
        done(e instanceof Error ? e : new Error(String(e)));
      }
    });
  }

  private async connected(timeoutMs: number): Promise<Client> {
    if (this.client?.isOpen === true) return this.client;
    if (this.client !== undefined) this.drop();
    this.opening ??= this.open(timeoutMs).finally(() => {
      this.opening = undefined;
    });
    return this.opening;
  }

  private async open(timeoutMs: number): Promise<Client> {
    await this.closing;
    const client = new (ModbusRTU as unknown as new () => Client)();
    // The library emits 'error' for serial and socket errors; unheard, Node would crash the daemon.
    client.on('error', () => undefined);
    const spec = this.spec;
    const connecting =
      spec.kind === 'tcp'
        ? client.connectTCP(spec.host, { port: spec.port })
        : client.connectRTUBuffered(spec.path, { baudRate: spec.baudRate, parity: spec.parity, dataBits: spec.dataBits, stopBits: spec.stopBits });
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(downError(`cannot open ${this.description}: no connection within ${timeoutMs} ms`)), timeoutMs);
    });
    try {
      await Promise.race([connecting, timeout]);
    } catch (e) {
      this.dispose(client);
      if (e instanceof HayloftError && e.code === ErrorCodes.DRIVER_DOWN) throw e;
      throw downError(`cannot open ${this.description}: ${errText(e)}`, e);
    } finally {
      clearTimeout(timer);
      // A connect that fails after the timeout won: nothing listens for it any more.
      connecting.catch(() => undefined);
    }
    if (this.closed) {
      this.dispose(client);
      throw downError(`link ${this.description} is closed`);
    }
    this.client = client;
    client.on('close', () => {
      if (this.client === client) this.client = undefined;
    });
    return client;
  }

  private drop(): void {
    const c = this.client;
    this.client = undefined;
    if (c !== undefined) this.dispose(c);
  }

  private dispose(c: Client): void {
    const prev = this.closing;
    this.closing = new Promise<void>((resolve) => {
      const done = (): void => resolve();
      // A close whose callback never comes must not wedge the link for good.
      setTimeout(done, 1000).unref();
      try {
        // TCP sockets are destroyed at once; a serial port must be closed (it has no destroy),
        // and reopening it waits for that.
        if (this.spec.kind === 'tcp') c.destroy(done);
        else if (c.isOpen) c.close(done);
        else done();
      } catch {
        done();
      }
    }).then(() => prev);
  }
}
