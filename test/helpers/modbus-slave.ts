/**
 * A real Modbus slave for tests: Debian's python3-pymodbus running test/fixtures/modbus-slave.py,
 * over TCP on 127.0.0.1 or over RTU across a socat virtual serial cable. scripts/test-deps.sh
 * installs both; `peersMissing()` says why a test must skip when they could not be installed.
 *
 * Debian's python3 is used by path: the first `python3` on PATH may be another build that does
 * not see Debian's packages (shared/notes/dependencies.md).
 */
import { type ChildProcess, execFile, spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { createInterface } from 'node:readline';

export const DEBIAN_PYTHON = '/usr/bin/python3';
const SCRIPT = new URL('../fixtures/modbus-slave.py', import.meta.url).pathname;

let missing: string | null | undefined;

/** Why the Modbus peers cannot run here, or null when they can. */
export function peersMissing(): string | null {
  if (missing !== undefined) return missing;
  const py = spawnSync(DEBIAN_PYTHON, ['-c', 'import pymodbus.server.async_io'], { encoding: 'utf8' });
  if (py.status !== 0) {
    missing = `Debian's python3-pymodbus (with python3-serial-asyncio) is not installed and scripts/test-deps.sh could not install it: ${(py.stderr || String(py.error ?? '')).trim().split('\n').pop() ?? ''}`;
  } else if (spawnSync('socat', ['-V']).status !== 0) {
    missing = 'socat is not installed and scripts/test-deps.sh could not install it';
  } else missing = null;
  return missing;
}

/** A free TCP port on 127.0.0.1 (closed again at once: a small race, acceptable in tests). */
export async function freePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, host, () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

export interface SlaveData {
  units?: number[];
  /** Entries per table from address 0: a read past it is refused with exception 2. */
  size?: number;
  /** Values by start address: registers as 16-bit words, bits as 0/1. */
  hr?: Record<number, number[]>;
  ir?: Record<number, number[]>;
  co?: Record<number, number[]>;
  di?: Record<number, number[]>;
}

export type SlaveTable = 'hr' | 'ir' | 'co' | 'di';

export class ModbusSlave {
  private proc: ChildProcess | undefined;
  private waiting: (() => void)[] = [];
  private stderr = '';

  private constructor(
    readonly mode: 'tcp' | 'rtu',
    /** TCP: the port; RTU: the pty path the slave opens. */
    readonly where: string | number,
    readonly data: SlaveData,
  ) {}

  static async tcp(data: SlaveData, port?: number): Promise<ModbusSlave> {
    const s = new ModbusSlave('tcp', port ?? (await freePort()), data);
    await s.start();
    return s;
  }

  static async rtu(devicePath: string, data: SlaveData): Promise<ModbusSlave> {
    const s = new ModbusSlave('rtu', devicePath, data);
    await s.start();
    return s;
  }

  get port(): number {
    return this.where as number;
  }

  /** Starts (or starts again, after kill) with the initial data. */
  async start(): Promise<void> {
    const args = this.mode === 'tcp' ? [SCRIPT, 'tcp', '127.0.0.1', String(this.where)] : [SCRIPT, 'rtu', String(this.where)];
    const proc = spawn(DEBIAN_PYTHON, [...args, JSON.stringify(this.data)], { stdio: ['pipe', 'pipe', 'pipe'] });
    this.proc = proc;
    this.stderr = '';
    proc.stderr.on('data', (b: Buffer) => {
      this.stderr = (this.stderr + b.toString()).slice(-4000);
    });
    const lines = createInterface({ input: proc.stdout });
    let ready: () => void = () => undefined;
    const isReady = new Promise<void>((resolve) => (ready = resolve));
    lines.on('line', (l) => {
      if (l === 'ready') ready();
      else if (l === 'ok') this.waiting.shift()?.();
    });
    const exited = new Promise<never>((_, reject) =>
      proc.once('exit', (code) => reject(new Error(`modbus slave exited (${code}) before it was ready: ${this.stderr}`))),
    );
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`modbus slave not ready after 10 s: ${this.stderr}`)), 10_000);
    });
    try {
      await Promise.race([isReady, exited, late]);
    } finally {
      clearTimeout(timer);
      exited.catch(() => undefined);
    }
  }

  private command(line: string): Promise<void> {
    const p = this.proc;
    if (p?.stdin === null || p === undefined) throw new Error('modbus slave is not running');
    return new Promise((resolve) => {
      this.waiting.push(resolve);
      p.stdin?.write(line + '\n');
    });
  }

  /** Sets registers (16-bit words) or bits (0/1) from `address` on. */
  set(table: SlaveTable, address: number, values: readonly number[]): Promise<void> {
    return this.command(`set ${table} ${address} ${values.join(' ')}`);
  }

  /**
   * Reads holding registers or coils back with pymodbus' own TCP client in a process of its own:
   * a client independent of the driver under test, so a write is checked by someone else.
   * Asynchronous: a Hayloft running in the test's process keeps serving meanwhile (a blocking
   * spawn would stall its timers past their request timeouts on a loaded machine).
   */
  async readBack(table: 'hr' | 'co', address: number, count: number, unit = 1): Promise<number[]> {
    if (this.mode !== 'tcp') throw new Error('readBack needs a TCP slave');
    const call = table === 'hr' ? 'read_holding_registers' : 'read_coils';
    const field = table === 'hr' ? 'registers' : 'bits';
    const code = [
      'import json, sys',
      'from pymodbus.client import ModbusTcpClient',
      `c = ModbusTcpClient("127.0.0.1", port=${this.port})`,
      'c.connect()',
      `r = c.${call}(${address}, ${count}, slave=${unit})`,
      'c.close()',
      `print(json.dumps([int(x) for x in r.${field}[:${count}]]))`,
    ].join('\n');
    const out = await new Promise<string>((resolve, reject) => {
      execFile(DEBIAN_PYTHON, ['-c', code], { encoding: 'utf8', timeout: 60_000 }, (err, stdout, stderr) => {
        if (err !== null) reject(new Error(`pymodbus client failed: ${stderr || err.message}`));
        else resolve(stdout);
      });
    });
    return JSON.parse(out.trim()) as number[];
  }

  /** The unit stops answering (the link stays up). */
  mute(unit = 1): Promise<void> {
    return this.command(`mute ${unit}`);
  }

  unmute(unit = 1): Promise<void> {
    return this.command(`unmute ${unit}`);
  }

  /** Stops the slave process (the link is lost); start() brings it back. */
  async kill(): Promise<void> {
    const p = this.proc;
    this.proc = undefined;
    this.waiting = [];
    if (p === undefined || p.exitCode !== null) return;
    const gone = new Promise<void>((resolve) => p.once('exit', () => resolve()));
    p.kill('SIGKILL');
    await gone;
  }
}

/** A socat virtual serial cable: two linked ptys, `a` for the master, `b` for the slave. */
export class SerialCable {
  private constructor(
    private readonly proc: ChildProcess,
    readonly a: string,
    readonly b: string,
  ) {}

  static async open(dir: string): Promise<SerialCable> {
    const a = path.join(dir, 'ttyA');
    const b = path.join(dir, 'ttyB');
    const proc = spawn('socat', [`pty,raw,echo=0,link=${a}`, `pty,raw,echo=0,link=${b}`], { stdio: 'ignore' });
    const t0 = Date.now();
    while (!(existsSync(a) && existsSync(b))) {
      if (proc.exitCode !== null) throw new Error(`socat exited (${proc.exitCode})`);
      if (Date.now() - t0 > 5000) throw new Error('socat made no ptys within 5 s');
      await new Promise((r) => setTimeout(r, 20));
    }
    return new SerialCable(proc, a, b);
  }

  async close(): Promise<void> {
    if (this.proc.exitCode !== null) return;
    const gone = new Promise<void>((resolve) => this.proc.once('exit', () => resolve()));
    this.proc.kill('SIGTERM');
    await gone;
  }
}
