/**
 * The check of a connector's Modbus register map that createRec and updateRec run, apart from
 * commission.ts: the records op needs only this, and importing commission.ts would load the
 * BACnet library and the rest of commissioning at every start (issue 19).
 */
import type { HDict } from '../haystack/values.js';
import { ErrorCodes, HayloftError } from '../lib/errors.js';
import { parseRegMap } from '../drivers/modbus/reg-map.js';

/**
 * Checks a record's `modbusRegMap` as createRec and updateRec store it, so a map with errors is
 * refused at once (every bad row with its line, HL_BAD_REG_MAP) and changes nothing, rather than
 * being stored and failing at the next learn. Returns the number of registers (0 without a map).
 */
export function checkRegMap(rec: HDict): number {
  const map = rec.get('modbusRegMap');
  if (map === undefined) return 0;
  if (typeof map !== 'string') throw new HayloftError(ErrorCodes.BAD_REG_MAP, 'modbusRegMap must be a Str holding the CSV text of the register map');
  if (!rec.has('modbusConn')) throw new HayloftError(ErrorCodes.BAD_REG_MAP, 'modbusRegMap belongs on a Modbus connector (a record with modbusConn)');
  return parseRegMap(map).length;
}
