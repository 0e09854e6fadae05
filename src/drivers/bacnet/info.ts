/**
 * What BACnet is to the rest of Hayloft, before @bacnet-js/client is loaded: its name, features
 * and tags (driver.ts, driverTags). Shared by the kind (kind.ts) and the loaded driver (bacnet-driver.ts).
 */
import { type DriverFeatures, driverTags } from '../driver.js';

export const BACNET_FEATURES = { cur: true, write: true, his: false, learn: true, discover: true, cov: true } as const satisfies DriverFeatures;

export const BACNET_TAGS = driverTags('bacnet', BACNET_FEATURES);
