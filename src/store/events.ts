/**
 * The events the store layer emits on the bus (lib/events.ts; docs/design/README.md "Parts and events" lists them all).
 */
import type { Store } from './db.js';
import type { HisKind, HisValue } from './his-codec.js';

/**
 * Told after each commit: the samples a write committed (time order, one per timestamp), or null
 * when samples of the point were deleted. Called synchronously; must be cheap (the MQTT edge node
 * keeps recent samples in memory with it instead of reading each one back).
 */
export type HisListener = (
  pointId: string,
  kind: HisKind,
  written: { readonly ts: readonly number[]; readonly val: readonly HisValue[] } | null,
  /**
   * Polled samples appended to the point's tail (readable now, on disk with the next flush,
   * historyFlushMs), told at the pace of polling; false for hisWrite's synced writes and deletes.
   */
  polled: boolean,
) => void;

/**
 * Called inside a write for each point written, before the write's batch is committed, with the
 * point's oldest and newest sample in it and its newest sample before the write (-Infinity when it
 * had none): lets another owner of the data folder put its own keys into the same atomic batch (an
 * uplink's mark of samples older than what it already sent, see SyncState).
 * Must not throw, and must be quick: it runs under the written points' locks.
 */
export type HisPlanHook = (pointId: string, first: number, last: number, before: number, batch: HisBatch) => void;

/** A LevelDB batch of the store's database (puts name their sublevel). */
export type HisBatch = ReturnType<Store['db']['batch']>;

export type StoreEvents = {
  /**
   * In a history write's own LevelDB batch, once per point written, before the commit: a listener
   * adds its keys to the same batch (the uplink's mark of late samples). Runs under the points'
   * locks: quick, and throwing aborts the write.
   */
  'his.plan': HisPlanHook;
  /** After a history write or delete committed, or polled samples appended: the samples, or null for a delete. */
  'his.written': HisListener;
};
