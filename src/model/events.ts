/**
 * The events the model layer emits on the bus, with the store's below them (lib/events.ts;
 * docs/design/README.md "Parts and events" lists every event, its emitter and its listeners).
 */
import type { HDict, HVal } from '../haystack/values.js';
import type { StoreEvents } from '../store/events.js';
import type { BatchOps } from '../store/records.js';

export interface ModelChange {
  created: readonly HDict[];
  updated: readonly HDict[];
  /** The records as they were before deletion. */
  deleted: readonly HDict[];
}

export type ModelListener = (change: ModelChange) => void;

/**
 * Called while a commit's batch is built, with the records it writes and deletes: a hook adds
 * its own writes to the same batch, so they land atomically with the records (or not at all).
 */
export type CommitHook = (change: { puts: readonly HDict[]; deleted: readonly HDict[] }, ops: BatchOps) => void;

/** Told the id of a record whose transient tags just changed, and the names of those that did. */
export type TransientListener = (id: string, changed: readonly string[]) => void;

/** A writable point's effective value: its set level of highest priority. */
export interface Effective {
  val: HVal | null;
  level: number;
}

export type EffectiveListener = (id: string, eff: Effective) => void;

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
