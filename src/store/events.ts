/**
 * The events the store layer emits on the bus (lib/events.ts; docs/design/README.md "Parts and events" lists them all).
 */
import type { HisListener, HisPlanHook } from './history.js';

export type StoreEvents = {
  /**
   * In a history write's own LevelDB batch, once per point written, before the commit: a listener
   * adds its keys to the same batch (the uplink's mark of late samples). Runs under the points'
   * locks: quick, and throwing aborts the write.
   */
  'his.plan': HisPlanHook;
  /** After a history write or delete committed: the samples written, or null for a delete. */
  'his.written': HisListener;
};
