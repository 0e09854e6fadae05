/**
 * Reading many properties of one device for commissioning (discovery.ts, learn.ts): a share of
 * the driver's socket held for the session, and property reads batched with
 * ReadPropertyMultiple that fall back as the device demands.
 *
 * The fallback follows the driver's polling (bacnet-driver.ts): a device that aborts or rejects
 * a batch (no segmentation, an answer too big) is asked with half as many, down to one; a device
 * that does not know ReadPropertyMultiple at all is read with ReadProperty from then on; a device
 * that refuses a whole batch for one property has that batch read property by property. The
 * batch size a device ended with is kept for the rest of the session.
 */
import type { HayloftError } from '../../lib/errors.js';
import { downError, refusedError } from '../driver.js';
import type { BacnetDriver } from './bacnet-driver.js';
import { type AppValue, CLASS_OBJECT, CLASS_PROPERTY, CODE_DENIED, CODE_UNRECOGNIZED, REJECT_UNRECOGNIZED_SERVICE, TAG_ERROR, classify, errorName, timed } from './wire.js';

/** One property (or one element of an array property) of one object. */
export interface PropRef {
  readonly type: number;
  readonly instance: number;
  readonly property: number;
  /** Array index (0: the array's length); absent: the whole property. */
  readonly index?: number;
}

/** What a device answered for one property: its values, or why it refused. */
export type PropResult = { readonly values: readonly AppValue[] } | { readonly err: HayloftError };

const ARRAY_ALL = 0xffffffff;
type Client = ReturnType<BacnetDriver['acquire']>;

export class DeviceSession {
  /** Properties per ReadPropertyMultiple; 0 once the device is read with ReadProperty only. */
  per: number;
  /** Requests sent (for progress and tests). */
  requests = 0;
  private readonly client: Client;
  private closed = false;

  constructor(
    private readonly driver: BacnetDriver,
    /** `host:port` as the library addresses it. */
    readonly address: string,
    readonly timeoutMs: number,
    per: number = driver.maxPerRequest,
  ) {
    this.client = driver.acquire();
    this.per = per;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.driver.release();
  }

  /** Reads one property with ReadProperty. Rejects with HL_DRIVER_DOWN when the device is silent. */
  async readOne(ref: PropRef): Promise<PropResult> {
    this.requests++;
    try {
      const opts = ref.index === undefined ? {} : { arrayIndex: ref.index };
      const ans = await this.ask(() => this.client.readProperty({ address: this.address }, { type: ref.type, instance: ref.instance }, ref.property, opts));
      return { values: ans.values as unknown as AppValue[] };
    } catch (e) {
      const c = classify(e);
      if (c.kind === 'error' || c.kind === 'abort') return { err: refusedError(`${describe(ref)}: the device refused it (${message(e)})`, e) };
      throw this.down(e);
    }
  }

  /**
   * Reads properties, batched with ReadPropertyMultiple while the device takes it. One result
   * per ref, in order. Rejects with HL_DRIVER_DOWN when the device is silent.
   */
  async readMany(refs: readonly PropRef[]): Promise<PropResult[]> {
    const out = new Array<PropResult>(refs.length);
    let i = 0;
    while (i < refs.length) {
      // The library leaves index 0 out of a ReadPropertyMultiple (asking for the whole array
      // instead): array lengths go by ReadProperty, which encodes it.
      if (this.per <= 1 || refs[i]?.index === 0) {
        // One property per request: ReadProperty is as good and every device has it.
        out[i] = await this.readOne(refs[i] as PropRef);
        i++;
        continue;
      }
      let n = 1;
      while (n < this.per && i + n < refs.length && refs[i + n]?.index !== 0) n++;
      const batch = refs.slice(i, i + n);
      const got = await this.batch(batch);
      if (got === 'retry') continue;
      for (let k = 0; k < n; k++) out[i + k] = got[k] as PropResult;
      i += n;
    }
    return out;
  }

  private async batch(refs: readonly PropRef[]): Promise<PropResult[] | 'retry'> {
    // Properties of one object go in one access specification, objects in request order.
    const specs: { objectId: { type: number; instance: number }; properties: { id: number; index: number }[] }[] = [];
    for (const r of refs) {
      const last = specs[specs.length - 1];
      const prop = { id: r.property, index: r.index ?? ARRAY_ALL };
      if (last !== undefined && last.objectId.type === r.type && last.objectId.instance === r.instance) last.properties.push(prop);
      else specs.push({ objectId: { type: r.type, instance: r.instance }, properties: [prop] });
    }
    this.requests++;
    let ans: { values: { objectId: { type: number; instance: number }; values: { id: number; index?: number; value: AppValue[] }[] }[] };
    try {
      ans = (await timed(this.client.readPropertyMultiple({ address: this.address }, specs as never), this.timeoutMs));
    } catch (e) {
      this.driver.forgetAnswered();
      const c = classify(e);
      if (c.kind === 'timeout' || c.kind === 'other') throw this.down(e);
      if (c.kind === 'error' && (c.cls === CLASS_OBJECT || c.cls === CLASS_PROPERTY)) {
        const out: PropResult[] = [];
        for (const r of refs) out.push(await this.readOne(r));
        return out;
      }
      const unknownService = (c.kind === 'error' && (c.code === CODE_UNRECOGNIZED || c.code === CODE_DENIED)) || (c.kind === 'abort' && c.reason === REJECT_UNRECOGNIZED_SERVICE);
      this.per = refs.length > 1 && !unknownService ? Math.ceil(refs.length / 2) : 0;
      return 'retry';
    }
    this.driver.forgetAnswered();
    const found = new Map<string, AppValue[]>();
    for (const obj of ans.values ?? []) {
      for (const v of obj.values ?? []) {
        const idx = v.index === undefined || v.index === ARRAY_ALL ? '' : String(v.index);
        found.set(`${obj.objectId.type}:${obj.objectId.instance}:${v.id}:${idx}`, v.value);
      }
    }
    return refs.map((r) => {
      const v = found.get(`${r.type}:${r.instance}:${r.property}:${r.index === undefined ? '' : String(r.index)}`);
      if (v === undefined) return { err: refusedError(`${describe(r)}: the device sent no value`) };
      const first = v[0];
      if (first !== undefined && first.type === TAG_ERROR) {
        const x = first.value as { errorClass: number; errorCode: number };
        return { err: refusedError(`${describe(r)}: the device refused it (${errorName(x.errorClass, x.errorCode)})`) };
      }
      return { values: v };
    });
  }

  /**
   * A request, sent once more when it times out: a learn is thousands of UDP requests, and one
   * lost datagram must not fail it. A device that is really gone fails twice.
   */
  private async ask<T>(f: () => Promise<T>): Promise<T> {
    try {
      return await timed(f(), this.timeoutMs);
    } catch (e) {
      if (classify(e).kind !== 'timeout') throw e;
      this.requests++;
      return await timed(f(), this.timeoutMs);
    } finally {
      this.driver.forgetAnswered();
    }
  }

  private down(e: unknown): HayloftError {
    return classify(e).kind === 'timeout'
      ? downError(`no answer from the device at ${this.address} within ${this.timeoutMs} ms`)
      : downError(`the device at ${this.address}: ${message(e)}`, e);
  }
}

function describe(r: PropRef): string {
  return `object ${r.type}:${r.instance} property ${r.property}${r.index === undefined ? '' : `[${r.index}]`}`;
}

function message(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
