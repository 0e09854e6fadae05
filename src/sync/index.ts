/**
 * src/sync: the uplink to an upstream Haystack REST service (another Hayloft, or a
 * WideSky-compatible cloud): an OAuth2 client, mapping of entities by fully qualified name,
 * durable per-point cursors in the `sync` sublevel, batched multi-point hisWrite with cursors
 * moved only on acknowledgement, retry with backoff, and the backlog report of `hayloft sync status`.
 * src/sync/mqtt: the same history, cursors and backlog published to an MQTT broker as a Sparkplug B edge node
 * (imported on its own, only when configured: MQTT.js and protobufjs stay out of the CLI's offline commands).
 */
export { type UplinkStats, type SyncStatus, Uplink, type UplinkOptions } from './uplink.js';
export { SyncState } from './state.js';
export type { UplinkSettings } from './settings.js';
export { UpstreamClient, UpstreamError } from './client.js';
export { type ConnectorBacklog, backlogReport, formatBacklog } from './backlog.js';
