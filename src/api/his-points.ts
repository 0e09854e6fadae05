/**
 * What every history request of the API checks of a point, for the REST ops (ops/his.ts:
 * hisRead, hisWrite, hisDelete) and GraphQL's `history` (graphql/resolvers.ts) alike, so that
 * both refuse the same points with the same errors: the caller's permissions (asked of its gate),
 * the `point` and `his` markers, a kind history holds, and stored samples of that kind.
 */
import type { Gate } from '../auth/gate.js';
import type { HDict } from '../haystack/values.js';
import { ErrorCodes, HayloftError } from '../lib/errors.js';
import { POINT_KINDS_TEXT, describeKind, pointKind } from '../model/point-state.js';
import type { HisColumns, HisKind, HistoryStore } from '../store/history.js';

/**
 * The kind of a point whose history the caller asks for; throws otherwise: HL_NOT_FOUND when the
 * record is missing or the caller may not read it (its existence is not revealed), HL_FORBIDDEN
 * without `perm` on it, HL_BAD_REQUEST when it is not a historized point, HL_INVALID_RECORD when
 * its kind is none history holds. `named` is how the request named the point, `where` where
 * (both for messages), `op` what asks ("hisRead", "the history").
 */
export function historizedKind(gate: Gate, rec: HDict | undefined, named: string, perm: 'HIS_READ' | 'HIS_WRITE', where: string, op: string): HisKind {
  if (rec === undefined || !gate.readable(rec)) throw new HayloftError(ErrorCodes.NOT_FOUND, `${where}: unknown point @${named}`);
  gate.require(perm, `${op} of @${named}`, rec);
  if (!rec.has('point') || !rec.has('his')) throw new HayloftError(ErrorCodes.BAD_REQUEST, `${where}: @${named} is not a historized point (it needs the point and his markers)`);
  const kind = pointKind(rec);
  if (kind === undefined) {
    throw new HayloftError(ErrorCodes.INVALID_RECORD, `${where}: @${named} has ${describeKind(rec)}; history holds points of kind ${POINT_KINDS_TEXT}`);
  }
  return kind;
}

/** A point's samples in [start, end); HL_HIS_KIND when the store holds samples of another kind than the point's. */
export async function readHistory(history: HistoryStore, id: string, kind: HisKind, start: number, end: number): Promise<HisColumns> {
  const cols = await history.read(id, start, end);
  if (cols.kind !== null && cols.kind !== kind) {
    throw new HayloftError(ErrorCodes.HIS_KIND, `@${id} is of kind ${kind} but its history holds ${cols.kind} samples`);
  }
  return cols;
}
