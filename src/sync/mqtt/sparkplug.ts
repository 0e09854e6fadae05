/**
 * Sparkplug B 3.0 vocabulary: topics, payload encoding through Eclipse Tahu's own protobuf schema
 * (`sparkplug-payload`, generated from sparkplug_b.proto; no hand-written encoder), the data
 * types of Haystack kinds, and the quality codes of point statuses.
 *
 * Quality: Sparkplug 3.0 names a metric property `Quality` (Int32) with 192 GOOD, 500 STALE and
 * 0 BAD, as Ignition reads it. Haystack's curStatus maps: ok -> GOOD; stale -> STALE; down,
 * fault, disabled, unknown and any other -> BAD. A point without curStatus (fed by hisWrite, or
 * not polled yet) is GOOD when it has a value.
 */
import sparkplug from 'sparkplug-payload';
import type { UMetric, UPayload } from 'sparkplug-payload/lib/sparkplugbpayload.js';

export type { UMetric, UPayload };

const codec = sparkplug.get('spBv1.0');
if (codec === null) throw new Error('sparkplug-payload has no spBv1.0 codec');
const spB = codec;

export const NAMESPACE = 'spBv1.0';

export type MessageType = 'NBIRTH' | 'NDEATH' | 'DBIRTH' | 'DDEATH' | 'NDATA' | 'DDATA' | 'NCMD' | 'DCMD';

export function topic(group: string, type: MessageType, node: string, device?: string): string {
  return `${NAMESPACE}/${group}/${type}/${node}${device === undefined ? '' : '/' + device}`;
}

export function stateTopic(hostId: string): string {
  return `${NAMESPACE}/STATE/${hostId}`;
}

/** The metric a host sets true in NCMD to ask for NBIRTH and every DBIRTH again. */
export const REBIRTH = 'Node Control/Rebirth';
/** The metric a host sets true in NCMD to restart the daemon (a clean exit; systemd starts it again). */
export const REBOOT = 'Node Control/Reboot';
export const BD_SEQ = 'bdSeq';

export const QUALITY = { GOOD: 192, STALE: 500, BAD: 0 } as const;

export function qualityOf(curStatus: string | undefined, hasValue: boolean): number {
  if (curStatus === undefined) return hasValue ? QUALITY.GOOD : QUALITY.BAD;
  if (curStatus === 'ok') return QUALITY.GOOD;
  if (curStatus === 'stale') return QUALITY.STALE;
  return QUALITY.BAD;
}

export type SparkplugType = 'Double' | 'Boolean' | 'String';

/** Haystack point kind -> Sparkplug datatype; undefined for kinds not published. */
export function datatypeOf(kind: unknown): SparkplugType | undefined {
  if (kind === 'Number') return 'Double';
  if (kind === 'Bool') return 'Boolean';
  if (kind === 'Str') return 'String';
  return undefined;
}

export function encode(payload: UPayload): Uint8Array {
  return spB.encodePayload(payload);
}

export function decode(bytes: Uint8Array): UPayload {
  return spB.decodePayload(bytes);
}

/** A Long (what the decoder gives for 64-bit fields) or number as a number. */
export function num(v: unknown): number {
  if (typeof v === 'number') return v;
  if (v !== null && typeof v === 'object' && 'toNumber' in v && typeof (v).toNumber === 'function') return (v as { toNumber(): number }).toNumber();
  return Number(v);
}

/** The Sparkplug id of a device from a record's name: topic levels may not hold `/`, `+` or `#`. */
export function deviceIdOf(text: string): string {
  const s = text.replace(/[/+#\s]/g, '_');
  return s === '' ? '_' : s;
}
