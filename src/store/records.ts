/**
 * Entity records on disk: key = id, value = the dict as Haystack JSON v3 text. JSON keeps the
 * records readable with any LevelDB tool and reuses the strict codec on load. Writes of one
 * request go in one batch, synced, so they are all-or-nothing and durable once acknowledged.
 */
import { decodeVal, writeJsonVal } from '../haystack/json.js';
import { STORED_SHAPE_LIMITS } from '../haystack/limits.js';
import { HDict } from '../haystack/values.js';
import { ErrorCodes, HayloftError } from '../lib/errors.js';
import type { Store, Sublevel } from './db.js';

/** Extra writes other parts add to a record commit, so they land in the same atomic batch. */
export interface BatchOps {
  put(sublevel: Sublevel, key: string, value: string): void;
  del(sublevel: Sublevel, key: string): void;
}

export class RecordStore {
  private readonly store: Store;

  constructor(store: Store) {
    this.store = store;
  }

  /** Every stored record, in key order. */
  async loadAll(): Promise<HDict[]> {
    const out: HDict[] = [];
    for await (const [key, value] of this.store.rec.iterator()) {
      let d: unknown;
      try {
        d = decodeVal(JSON.parse(value), `record ${key}`, STORED_SHAPE_LIMITS);
      } catch (e) {
        throw new HayloftError(ErrorCodes.STORE_UNAVAILABLE, `record ${key} in the data folder is corrupt: ${(e as Error).message}`, { cause: e });
      }
      if (!(d instanceof HDict)) throw new HayloftError(ErrorCodes.STORE_UNAVAILABLE, `record ${key} in the data folder is not a dict`);
      out.push(d);
    }
    return out;
  }

  /**
   * Writes and deletes records in one synced batch: all of it lands or none does. `extra` adds
   * other writes (an auth cleanup, say) to the same batch.
   */
  async write(puts: readonly { id: string; rec: HDict }[], dels: readonly string[], extra?: (ops: BatchOps) => void): Promise<void> {
    const batch = this.store.db.batch();
    for (const { id, rec } of puts) batch.put(id, writeJsonVal(rec), { sublevel: this.store.rec });
    for (const id of dels) batch.del(id, { sublevel: this.store.rec });
    extra?.({
      put: (sublevel, key, value) => batch.put(key, value, { sublevel }),
      del: (sublevel, key) => batch.del(key, { sublevel }),
    });
    // `sync` is a classic-level option missing from abstract-level's types.
    await batch.write({ sync: true } as object);
  }
}
