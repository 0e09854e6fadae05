/**
 * Learning a BACnet device: its object list, then the name, units and commandability of the
 * objects a technician drills into, turned into point proposals (the tags a point needs).
 *
 * Large devices: the object list is read whole first (one answer, segmented by devices that
 * can); a device that cannot send it whole (it aborts: no segmentation, or an answer above its
 * APDU) is read element by element: index 0 for the length, then every index, batched with
 * ReadPropertyMultiple where the device takes it (session.ts). Per-object properties are read in
 * batches too. Work is done in chunks with a progress callback between them, so a controller of
 * thousands of objects shows how far it got and memory stays at a few small records per object.
 */
import { ObjectType, PropertyIdentifier } from '@bacnet-js/client';
import type { DeviceSession, PropRef, PropResult } from './session.js';
import { haystackUnit } from './units.js';

export interface ObjectRef {
  readonly type: number;
  readonly instance: number;
}

export interface LearnedObject extends ObjectRef {
  readonly name: string | undefined;
  readonly units: number | undefined;
  readonly commandable: boolean;
}

/** A point as learned: what the commissioning op turns into a createRec row. */
export interface BacnetProposal {
  readonly dis: string;
  /** Tag-like (camelCase letters and digits), from the object name. */
  readonly name: string;
  readonly kind: 'Number' | 'Bool' | 'Str';
  readonly unit: string | undefined;
  /** The `bacnetCur` address, e.g. `AI1`. */
  readonly cur: string;
  readonly writable: boolean;
  readonly his: boolean;
}

export type Progress = (done: number, total: number) => void;

interface TypeInfo {
  readonly abbr: string;
  readonly plural: string;
  readonly kind: 'Number' | 'Bool' | 'Str';
  /** Has a `units` property. */
  readonly units: boolean;
  /** Always commandable (outputs), or only when it has a priority array (values). */
  readonly command: 'always' | 'ifPriorityArray' | 'never';
  readonly his: boolean;
}

/** The object types learned as points, by BACnet object type, in the order groups are listed. */
const TYPES = new Map<number, TypeInfo>([
  [ObjectType.ANALOG_INPUT, { abbr: 'AI', plural: 'Analog inputs', kind: 'Number', units: true, command: 'never', his: true }],
  [ObjectType.ANALOG_OUTPUT, { abbr: 'AO', plural: 'Analog outputs', kind: 'Number', units: true, command: 'always', his: true }],
  [ObjectType.ANALOG_VALUE, { abbr: 'AV', plural: 'Analog values', kind: 'Number', units: true, command: 'ifPriorityArray', his: true }],
  [ObjectType.BINARY_INPUT, { abbr: 'BI', plural: 'Binary inputs', kind: 'Bool', units: false, command: 'never', his: true }],
  [ObjectType.BINARY_OUTPUT, { abbr: 'BO', plural: 'Binary outputs', kind: 'Bool', units: false, command: 'always', his: true }],
  [ObjectType.BINARY_VALUE, { abbr: 'BV', plural: 'Binary values', kind: 'Bool', units: false, command: 'ifPriorityArray', his: true }],
  [ObjectType.MULTI_STATE_INPUT, { abbr: 'MSI', plural: 'Multi-state inputs', kind: 'Number', units: false, command: 'never', his: false }],
  [ObjectType.MULTI_STATE_OUTPUT, { abbr: 'MSO', plural: 'Multi-state outputs', kind: 'Number', units: false, command: 'always', his: false }],
  [ObjectType.MULTI_STATE_VALUE, { abbr: 'MSV', plural: 'Multi-state values', kind: 'Number', units: false, command: 'ifPriorityArray', his: false }],
  [ObjectType.ACCUMULATOR, { abbr: 'ACC', plural: 'Accumulators', kind: 'Number', units: true, command: 'never', his: false }],
  [ObjectType.INTEGER_VALUE, { abbr: 'IV', plural: 'Integer values', kind: 'Number', units: true, command: 'ifPriorityArray', his: false }],
  [ObjectType.POSITIVE_INTEGER_VALUE, { abbr: 'PIV', plural: 'Positive integer values', kind: 'Number', units: true, command: 'ifPriorityArray', his: false }],
  [ObjectType.LARGE_ANALOG_VALUE, { abbr: 'LAV', plural: 'Large analog values', kind: 'Number', units: true, command: 'ifPriorityArray', his: false }],
  [ObjectType.CHARACTERSTRING_VALUE, { abbr: 'CSV', plural: 'Character string values', kind: 'Str', units: false, command: 'ifPriorityArray', his: false }],
]);

/** Elements or objects per chunk between progress reports. */
const CHUNK = 64;

/** The abbreviation of a learnable object type (`AI`), or undefined for types not learned as points. */
export function typeAbbr(type: number): string | undefined {
  return TYPES.get(type)?.abbr;
}

/** The object type of an abbreviation as learn lists them (`AI`), or undefined. */
export function typeOfAbbr(abbr: string): number | undefined {
  for (const [t, info] of TYPES) if (info.abbr === abbr) return t;
  return undefined;
}

/** Groups of a device's learnable objects, one per object type, in a fixed order. */
export function groupsOf(objects: readonly ObjectRef[]): { abbr: string; dis: string; count: number }[] {
  const counts = new Map<number, number>();
  for (const o of objects) if (TYPES.has(o.type)) counts.set(o.type, (counts.get(o.type) ?? 0) + 1);
  const out: { abbr: string; dis: string; count: number }[] = [];
  for (const [t, info] of TYPES) {
    const n = counts.get(t);
    if (n !== undefined) out.push({ abbr: info.abbr, dis: `${info.plural} (${n})`, count: n });
  }
  return out;
}

function objectIdOf(v: unknown): ObjectRef | undefined {
  if (typeof v !== 'object' || v === null) return undefined;
  const o = v as { type?: unknown; instance?: unknown };
  return typeof o.type === 'number' && typeof o.instance === 'number' ? { type: o.type, instance: o.instance } : undefined;
}

/** The device's object list: whole when the device sends it so, else element by element. */
export async function readObjectList(s: DeviceSession, deviceInstance: number, progress?: Progress): Promise<ObjectRef[]> {
  const ref = { type: ObjectType.DEVICE, instance: deviceInstance, property: PropertyIdentifier.OBJECT_LIST };
  const whole = await s.readOne(ref);
  if ('values' in whole) {
    const out: ObjectRef[] = [];
    for (const v of whole.values) {
      const id = objectIdOf(v.value);
      if (id !== undefined) out.push(id);
    }
    progress?.(out.length, out.length);
    return out;
  }
  const len = await s.readOne({ ...ref, index: 0 });
  const n = 'values' in len ? Number(len.values[0]?.value) : NaN;
  if (!Number.isInteger(n) || n < 0) throw 'err' in len ? len.err : new Error('the object list length is not a number');
  const out: ObjectRef[] = [];
  progress?.(0, n);
  for (let i = 1; i <= n; i += CHUNK) {
    const refs: PropRef[] = [];
    for (let k = i; k < Math.min(n + 1, i + CHUNK); k++) refs.push({ ...ref, index: k });
    const got = await s.readMany(refs);
    for (const r of got) {
      const id = 'values' in r ? objectIdOf(r.values[0]?.value) : undefined;
      if (id !== undefined) out.push(id);
    }
    progress?.(Math.min(n, i + CHUNK - 1), n);
  }
  return out;
}

/** Name, units and commandability of objects (of learnable types), read in batches. */
export async function readObjects(s: DeviceSession, objects: readonly ObjectRef[], progress?: Progress): Promise<LearnedObject[]> {
  const out: LearnedObject[] = [];
  progress?.(0, objects.length);
  for (let i = 0; i < objects.length; i += CHUNK) {
    const chunk = objects.slice(i, i + CHUNK);
    const refs: PropRef[] = [];
    const slots: { name: number; units: number; prio: number }[] = [];
    for (const o of chunk) {
      const info = TYPES.get(o.type);
      const slot = { name: refs.length, units: -1, prio: -1 };
      refs.push({ ...o, property: PropertyIdentifier.OBJECT_NAME });
      if (info?.units === true) {
        slot.units = refs.length;
        refs.push({ ...o, property: PropertyIdentifier.UNITS });
      }
      if (info?.command === 'ifPriorityArray') {
        slot.prio = refs.length;
        // Its first element exists exactly when the object has a priority array (is commandable).
        refs.push({ ...o, property: PropertyIdentifier.PRIORITY_ARRAY, index: 1 });
      }
      slots.push(slot);
    }
    const got = await s.readMany(refs);
    const val = (k: number): unknown => {
      const r: PropResult | undefined = k < 0 ? undefined : got[k];
      return r !== undefined && 'values' in r ? r.values[0]?.value : undefined;
    };
    chunk.forEach((o, k) => {
      const slot = slots[k] as { name: number; units: number; prio: number };
      const name = val(slot.name);
      const units = val(slot.units);
      const command = TYPES.get(o.type)?.command;
      out.push({
        ...o,
        name: typeof name === 'string' ? name : undefined,
        units: typeof units === 'number' ? units : undefined,
        commandable: command === 'always' || (command === 'ifPriorityArray' && val(slot.prio) !== undefined),
      });
    });
    progress?.(Math.min(objects.length, i + CHUNK), objects.length);
  }
  return out;
}

/**
 * A tag-like name from an object name: `Zone Temp 1` -> `zoneTemp1`, `ANALOG INPUT 1` ->
 * `analogInput1`, `AHU1 SAT` -> `ahu1Sat`, `SupplyTemp` -> `supplyTemp`; `ai7` when nothing is
 * left. A word without lower-case letters (a shouted name or an acronym) is taken as one word in
 * lower case; a word in mixed case keeps its inner capitals.
 */
export function tagName(text: string | undefined, fallback: string): string {
  const words = (text ?? '')
    .normalize('NFKD')
    .replace(/[^A-Za-z0-9]+/g, ' ')
    .trim()
    .split(' ')
    .filter((w) => w !== '')
    .map((w) => (/[a-z]/.test(w) ? w : w.toLowerCase()));
  let name = words.map((w, i) => (i === 0 ? w.charAt(0).toLowerCase() + w.slice(1) : w.charAt(0).toUpperCase() + w.slice(1))).join('');
  if (name === '') return fallback;
  if (!/^[a-z]/.test(name)) name = `${fallback.replace(/\d+$/, '')}${name.charAt(0).toUpperCase()}${name.slice(1)}`;
  return name;
}

export function proposalOf(o: LearnedObject): BacnetProposal | undefined {
  const info = TYPES.get(o.type);
  if (info === undefined) return undefined;
  const cur = `${info.abbr}${o.instance}`;
  return {
    dis: o.name ?? cur,
    name: tagName(o.name, cur.toLowerCase()),
    kind: info.kind,
    unit: info.kind === 'Number' && o.units !== undefined ? haystackUnit(o.units) : undefined,
    cur,
    writable: o.commandable,
    his: info.his,
  };
}

