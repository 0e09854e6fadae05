/**
 * The Modbus driver kind (kinds.ts): its tags and features, the check of a connector's register
 * map (`modbusRegMap`) that createRec and updateRec run, learn (the registers of that map as
 * point proposals), and the driver, loaded with modbus-serial when the first Modbus record exists.
 *
 * Nothing here loads modbus-serial: the record check runs at every write of a record, and the
 * register map's parser (reg-map.ts) loads csv-parse only for the first map it reads (issue 19).
 */
import { HDict, HNumber, HRef, MARKER, type HVal } from '../../haystack/values.js';
import { ErrorCodes, HayloftError } from '../../lib/errors.js';
import type { DriverKind, LearnContext } from '../driver.js';
import { MODBUS_FEATURES, MODBUS_TAGS } from './info.js';
import type { ModbusDriverOptions } from './modbus-driver.js';
import { parseRegMap } from './reg-map.js';

export type ModbusKindOptions = ModbusDriverOptions;

/** The register map a connector carries (`modbusRegMap`): undefined without one. */
function regMapOf(rec: HDict): string | undefined {
  const map = rec.get('modbusRegMap');
  if (map === undefined) return undefined;
  if (typeof map !== 'string') throw new HayloftError(ErrorCodes.BAD_REG_MAP, 'modbusRegMap must be a Str holding the CSV text of the register map');
  return map;
}

/**
 * Checks a record's `modbusRegMap` as createRec and updateRec store it, so a map with errors is
 * refused at once (every bad row with its line, HL_BAD_REG_MAP) and changes nothing, rather than
 * being stored and failing at the next learn. Only a changed map is checked on update: a
 * connector stored before this check stays editable.
 */
export function checkModbusRecord(rec: HDict, old: HDict | undefined): void {
  if (old !== undefined && rec.get('modbusRegMap') === old.get('modbusRegMap') && rec.has(MODBUS_TAGS.connTag) === old.has(MODBUS_TAGS.connTag)) return;
  const map = regMapOf(rec);
  if (map === undefined) return;
  if (!rec.has(MODBUS_TAGS.connTag)) throw new HayloftError(ErrorCodes.BAD_REG_MAP, 'modbusRegMap belongs on a Modbus connector (a record with modbusConn)');
  parseRegMap(map);
}

/** The registers of the connector's map as point proposals; a register already bound to a point carries its id. */
export function learnModbus(ctx: LearnContext): HDict[] {
  if (ctx.arg !== undefined) throw new HayloftError(ErrorCodes.BAD_REQUEST, 'a Modbus connector has no groups to drill into: learn it without arg');
  const map = regMapOf(ctx.conn.tags);
  if (map === undefined) return [];
  const entries = parseRegMap(map);
  const bound = new Map<string, string>();
  for (const p of ctx.points()) {
    const cur = p.tags.get(MODBUS_TAGS.curTag);
    if (typeof cur === 'string') bound.set(cur.trim(), p.id);
  }
  const connRef = new HRef(ctx.conn.id, ctx.displayOf(ctx.conn.id));
  return entries.map((e) => {
    const row: Record<string, HVal> = { dis: e.dis, name: e.name, point: MARKER, cur: MARKER, kind: e.kind };
    if (e.unit !== undefined) row.unit = e.unit;
    row.modbusConnRef = connRef;
    row.modbusCur = e.cur;
    if (e.scale !== undefined) row.modbusScale = new HNumber(e.scale);
    if (e.offset !== undefined) row.modbusOffset = new HNumber(e.offset);
    if (e.writable) {
      row.writable = MARKER;
      row.modbusWrite = e.cur;
    }
    const id = bound.get(e.cur);
    if (id !== undefined) row.id = new HRef(id, ctx.displayOf(id));
    return HDict.of(row);
  });
}

export function modbusKind(opts: ModbusKindOptions = {}): DriverKind {
  return {
    ...MODBUS_TAGS,
    dis: 'Modbus',
    features: MODBUS_FEATURES,
    checkRecord: checkModbusRecord,
    // Reads the map only: modbus-serial is not needed to learn.
    learn: (ctx) => Promise.resolve(learnModbus(ctx)),
    load: async () => new (await import('./modbus-driver.js')).ModbusDriver(opts),
  };
}
