/**
 * The events the model layer emits on the bus, with the store's below them (lib/events.ts;
 * docs/design/README.md "Parts and events" lists every event, its emitter and its listeners).
 */
import type { StoreEvents } from '../store/events.js';
import type { CommitHook, ModelListener, TransientListener } from './model.js';
import type { EffectiveListener } from './point-writer.js';

export type ModelEvents = StoreEvents & {
  /**
   * In a records commit's own LevelDB batch, before it is written: a listener adds its own writes
   * (a deleted point's priority array, a deleted user's secrets) so they land with the records or
   * not at all. Throwing aborts the commit.
   */
  'records.batch': CommitHook;
  /** After a records commit, once memory holds it: created, updated and deleted records. */
  'records.committed': ModelListener;
  /**
   * A record's live tags changed (a reading, a status, his stats, a write's state): its id and the
   * names of the tags that changed. The poll path: listeners must be cheap (note the id, read later).
   */
  'live.changed': TransientListener;
  /** A writable point's effective value (highest priority level) changed: the poller writes it out. */
  'write.effective': EffectiveListener;
};
