/**
 * The live tags of points and connectors: what the server keeps in memory and shows on read,
 * never stored, never set by clients (createRec/updateRec refuse them with HL_LIVE_TAG). Their
 * one writer is point state (point-state.ts); the model only holds them. Kept apart from
 * point-state.ts so the model can refuse them without importing their owner.
 */

/** A driver's reading: `curVal`, `curStatus`, `curErr` (or a hisWrite sample of a point without a driver). */
export const CUR_TAGS: readonly string[] = ['curVal', 'curStatus', 'curErr'];
/** What the history store holds of a point. */
export const HIS_TAGS: readonly string[] = ['hisSize', 'hisStart', 'hisEnd'];
/** A connector's link, and when it was last polled (`connLastPoll`) and last answered (`connLastOk`). */
export const CONN_TAGS: readonly string[] = ['connStatus', 'connErr', 'connLastPoll', 'connLastOk'];
/** The effective value of a writable point's priority array and how writing it to the device went. */
export const WRITE_TAGS: readonly string[] = ['writeVal', 'writeLevel', 'writeStatus', 'writeErr'];
/** The uplink's progress with a point. */
export const SYNC_TAGS: readonly string[] = ['syncStatus', 'syncErr', 'syncLast'];

/** Commissioning: why change of value fell back to polling (a point), how far a learn got (a connector). */
export const COMMISSION_TAGS: readonly string[] = ['covErr', 'learnProgress'];

/**
 * Alarms (alarm/engine.ts): a point's or connector's worst open alarm (`alarmStatus`: active,
 * unacked, acked, shelved), and an alarm condition's count of active alarms (`alarmActive`).
 */
export const ALARM_TAGS: readonly string[] = ['alarmStatus', 'alarmActive'];

export const LIVE_TAGS: ReadonlySet<string> = new Set([...CUR_TAGS, ...HIS_TAGS, ...CONN_TAGS, ...WRITE_TAGS, ...SYNC_TAGS, ...COMMISSION_TAGS, ...ALARM_TAGS]);
