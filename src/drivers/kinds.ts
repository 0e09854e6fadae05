/**
 * The protocol drivers Hayloft ships, known by their tags before their libraries are loaded.
 * A protocol library is a large share of the daemon's memory (@bacnet-js/client about 8 MiB
 * resident, modbus-serial with serialport about 6 MiB), and most controllers speak one protocol
 * or none: a driver's module is imported when the first connector or point of its kind exists
 * (DriverRegistry.loadFor), not at start.
 *
 * Each driver's folder says what it is (its `kind.ts`: name, tags, features, record checks,
 * commissioning); adding a driver is its folder and one line below.
 */
import type { DriverKind } from './driver.js';
import { type BacnetKindOptions, bacnetKind } from './bacnet/kind.js';
import { type ModbusKindOptions, modbusKind } from './modbus/kind.js';

export type { DriverKind } from './driver.js';

export interface BuiltinDriverOptions {
  modbus?: ModbusKindOptions;
  bacnet?: BacnetKindOptions;
}

/** Modbus (TCP and RTU) and BACnet/IP. */
export function builtinDriverKinds(opts: BuiltinDriverOptions = {}): DriverKind[] {
  return [modbusKind(opts.modbus), bacnetKind(opts.bacnet)];
}
