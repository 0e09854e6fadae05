/**
 * src/drivers: the driver contract (driver.ts), the registry of drivers a running Hayloft knows,
 * and one folder per protocol (modbus/, bacnet/), each with its kind (kind.ts: tags, features,
 * record checks, commissioning) registered in kinds.ts. Drivers import only haystack and lib: the
 * poller hands them connector and point tags and maps what they read to the model.
 */
export * from './driver.js';
export { DriverRegistry } from './registry.js';
export { ModbusDriver, type ModbusDriverOptions } from './modbus/modbus-driver.js';
export { BacnetDriver, type BacnetDriverOptions } from './bacnet/bacnet-driver.js';
export { builtinDriverKinds, type DriverKind, type BuiltinDriverOptions } from './kinds.js';
export { modbusKind, type ModbusKindOptions } from './modbus/kind.js';
export { bacnetKind, type BacnetKindOptions } from './bacnet/kind.js';
