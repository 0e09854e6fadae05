/**
 * A driver with devices the test controls, for poller tests that must not wait on real devices:
 * values by address, a device that is down, refuses addresses, or hangs until released.
 * Tags: connector `fakeConn` + `uri` (the device name; "bad..." is a configuration error),
 * point `fakeConnRef` + `fakeCur` (the address; "bad..." is a configuration error).
 */
import {
  type ConnSpec,
  type Driver,
  type DriverConn,
  type PointRead,
  type PointSpec,
  type PreparedPoint,
  type RawValue,
  configError,
  downError,
  refusedError,
} from '../../src/drivers/driver.js';

export class FakeDevice {
  readonly values = new Map<string, RawValue>();
  readonly refuse = new Set<string>();
  down = false;
  /** Reads wait until release() (or fail as down with `down`). */
  hang = false;
  private waiting: (() => void)[] = [];
  /** Every read: the addresses asked, in order. */
  readonly reads: string[][] = [];

  constructor(readonly name: string) {}

  set(values: Record<string, RawValue>): void {
    for (const [k, v] of Object.entries(values)) this.values.set(k, v);
  }

  /** Lets hanging reads go on. */
  release(): void {
    const w = this.waiting;
    this.waiting = [];
    for (const f of w) f();
  }

  get hanging(): number {
    return this.waiting.length;
  }

  async read(addrs: readonly string[]): Promise<PointRead[]> {
    this.reads.push([...addrs]);
    if (this.hang) await new Promise<void>((resolve) => this.waiting.push(resolve));
    if (this.down) throw downError(`device ${this.name} does not answer`);
    return addrs.map((a) => {
      if (this.refuse.has(a)) return { err: refusedError(`device ${this.name} has no ${a}`) };
      const v = this.values.get(a);
      return v === undefined ? { err: refusedError(`device ${this.name} has no ${a}`) } : { val: v };
    });
  }
}

interface FakePoint extends PreparedPoint {
  addr: string;
}

export class FakeDriver implements Driver {
  readonly name = 'fake';
  readonly connTag = 'fakeConn';
  readonly refTag = 'fakeConnRef';
  readonly curTag = 'fakeCur';
  readonly devices = new Map<string, FakeDevice>();
  opened = 0;
  closed = 0;

  device(name: string): FakeDevice {
    let d = this.devices.get(name);
    if (d === undefined) this.devices.set(name, (d = new FakeDevice(name)));
    return d;
  }

  open(conn: ConnSpec): DriverConn {
    const uri = conn.tags.get('uri');
    if (typeof uri !== 'string' || uri.startsWith('bad')) throw configError(`uri ${String(uri)} names no fake device`);
    const dev = this.device(uri);
    this.opened++;
    let closed = false;
    return {
      prepare: (p: PointSpec): FakePoint => {
        const cur = p.tags.get('fakeCur');
        if (typeof cur !== 'string' || cur.startsWith('bad')) throw configError(`fakeCur ${String(cur)} is not an address`);
        return { id: p.id, addr: cur };
      },
      read: async (points: readonly PreparedPoint[]): Promise<PointRead[]> => {
        if (closed) throw downError('closed');
        return dev.read(points.map((p) => (p as FakePoint).addr));
      },
      close: async (): Promise<void> => {
        if (!closed) this.closed++;
        closed = true;
      },
    };
  }

  async close(): Promise<void> {}
}
