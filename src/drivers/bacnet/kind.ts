/**
 * The BACnet driver kind (kinds.ts): its tags and features, and the driver and its
 * commissioning (discover, learn: commission.ts), both loaded with @bacnet-js/client on first
 * use, so a Hayloft without BACnet records never loads the library.
 */
import type { DriverKind } from '../driver.js';
import type { BacnetDriverOptions } from './bacnet-driver.js';
import type { BacnetCommissioning } from './commission.js';
import { BACNET_FEATURES, BACNET_TAGS } from './info.js';

export interface BacnetKindOptions extends BacnetDriverOptions {
  /** Told of the driver's batch-size changes (the app logs them). */
  log?: (message: string) => void;
}

export function bacnetKind(opts: BacnetKindOptions = {}): DriverKind {
  const { log, ...driverOpts } = opts;
  let commissioning: BacnetCommissioning | undefined;
  const commission = async (): Promise<BacnetCommissioning> => {
    const m = await import('./commission.js');
    // One per kind, however many learns asked at once: it keeps the object lists for drill-ins.
    return (commissioning ??= new m.BacnetCommissioning());
  };
  return {
    ...BACNET_TAGS,
    dis: 'BACnet',
    features: BACNET_FEATURES,
    learn: async (ctx) => (await commission()).learn(ctx),
    discover: async (ctx) => (await commission()).discover(ctx),
    forget: () => commissioning?.forget(),
    load: async () => {
      const driver = new (await import('./bacnet-driver.js')).BacnetDriver(driverOpts);
      driver.log = log;
      return driver;
    },
  };
}
