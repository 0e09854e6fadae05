/**
 * src/api/ops: one file per op (or per family of ops). Each exports Op objects; the lists below
 * are what the app hands to createApiServer. Add a family by exporting its list here and
 * spreading it into the server's ops.
 */
import type { Op } from '../op.js';
import { aboutOp } from './about.js';
import { formatsOp } from './formats.js';
import { opsOp } from './ops.js';
import { hisOps } from './his.js';
import { recordOps } from './records.js';
import { watchOps } from './watch.js';
import { pointWriteOps } from './point-write.js';
import { commissionOps } from './commission.js';
import { alarmOps } from './alarms.js';
import { scheduleOps } from './schedules.js';
import { bacnetOps } from './bacnet.js';

export { aboutOp } from './about.js';
export { formatsOp } from './formats.js';
export { opsOp } from './ops.js';
export { createRecOp, deleteRecOp, readOp, recordOps, updateRecOp } from './records.js';
export { watchOps, watchPollOp, watchSubOp, watchUnsubOp } from './watch.js';
export { hisDeleteOp, hisOps, hisReadOp, hisWriteOp } from './his.js';
export { pointWriteAuditOp, pointWriteOp, pointWriteOps } from './point-write.js';
export { commissionOps, discoverOp, driversOp, learnOp } from './commission.js';
export { alarmAckOp, alarmHistoryOp, alarmOps, alarmShelveOp, alarmsOp } from './alarms.js';
export { scheduleOps, schedulesOp } from './schedules.js';
export { bacnetObjectsOp, bacnetOps } from './bacnet.js';

/** The server-information ops of docs/spec/interface.md: about, ops, formats. */
export const infoOps: readonly Op[] = [aboutOp, opsOp, formatsOp];

/** Every op Hayloft serves, in the order `ops` lists them. */
export const allOps: readonly Op[] = [...infoOps, ...recordOps, ...hisOps, ...watchOps, ...pointWriteOps, ...commissionOps, ...alarmOps, ...scheduleOps, ...bacnetOps];
