/**
 * The protocol drivers Hayloft ships, known by their tags before their libraries are loaded.
 * A protocol library is a large share of the daemon's memory (@bacnet-js/client about 8 MiB
 * resident, modbus-serial with serialport about 6 MiB), and most controllers speak one protocol
 * or none: a driver's module is imported when the first connector or point of its kind exists
 * (DriverRegistry.loadFor), not at start.
 */
import type { Driver } from './driver.js';
import type { BacnetDriverOptions } from './bacnet/bacnet-driver.js';
import type { ModbusDriverOptions } from './modbus/modbus-driver.js';

/** A driver by its tags, with how to load it. The tags must equal those of the loaded driver. */
export interface DriverKind {
  readonly name: string;
  readonly connTag: string;
  readonly refTag: string;
  readonly curTag: string;
  /** The tag holding the address it writes to, for drivers that write. */
  readonly writeTag?: string;
  load(): Promise<Driver>;
}

export interface BuiltinDriverOptions {
  modbus?: ModbusDriverOptions;
  bacnet?: BacnetDriverOptions;
  /** Told of the BACnet driver's batch-size changes (the app logs them). */
  bacnetLog?: (message: string) => void;
}

/** Modbus (TCP and RTU) and BACnet/IP. */
export function builtinDriverKinds(opts: BuiltinDriverOptions = {}): DriverKind[] {
  return [
    {
      name: 'modbus',
      connTag: 'modbusConn',
      refTag: 'modbusConnRef',
      curTag: 'modbusCur',
      writeTag: 'modbusWrite',
      load: async () => new (await import('./modbus/modbus-driver.js')).ModbusDriver(opts.modbus),
    },
    {
      name: 'bacnet',
      connTag: 'bacnetConn',
      refTag: 'bacnetConnRef',
      curTag: 'bacnetCur',
      writeTag: 'bacnetWrite',
      load: async () => {
        const driver = new (await import('./bacnet/bacnet-driver.js')).BacnetDriver(opts.bacnet);
        driver.log = opts.bacnetLog;
        return driver;
      },
    },
  ];
}
