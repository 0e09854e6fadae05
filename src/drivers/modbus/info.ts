/**
 * What Modbus is to the rest of Hayloft, before modbus-serial is loaded: its name, features and
 * tags (driver.ts, driverTags). Shared by the kind (kind.ts) and the loaded driver (modbus-driver.ts).
 */
import { type DriverFeatures, driverTags } from '../driver.js';

export const MODBUS_FEATURES = { cur: true, write: true, his: false, learn: true, discover: false, cov: false } as const satisfies DriverFeatures;

export const MODBUS_TAGS = driverTags('modbus', MODBUS_FEATURES);
