/**
 * src/poller: the one scheduler that reads points through the drivers into curVal, curStatus
 * and curErr, keeps connectors' connStatus, and collects history (poller.ts, his-collector.ts).
 */
export { Poller, type PollerOptions, type PollerStats, type ConnectorStats, type PointStatus, type ConnStatus, DEFAULT_POLL_MS } from './poller.js';
export { collectPlan, type CollectPlan } from './his-collector.js';
