/**
 * src/watch: watches (docs/spec/interface.md watchSub/watchPoll/watchUnsub, docs/spec/wire-notes.md §6): leases,
 * changed-since-last-poll tracking fed by the model's transient-value notifications, deleted-point
 * status, per-user and per-watch limits. Knows nothing of HTTP or permissions: the api layer
 * passes the owner and a visibility predicate.
 */
export { DEFAULT_LEASE, LEASE_DEFAULT_MS, LEASE_MAX_MS, LEASE_MIN_MS, LEASE_UNITS, type Lease, parseLease } from './lease.js';
export {
  DEFAULT_HOUSEKEEPING_MS,
  DEFAULT_WATCH_LIMITS,
  type SubscribeRequest,
  type Visible,
  WATCH_COLS,
  type WatchAnswer,
  type WatchLimits,
  WatchManager,
  type WatchManagerOptions,
} from './watch-manager.js';
