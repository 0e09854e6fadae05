/**
 * Hayloft as a device of other protocols: the model's points shown as BACnet objects
 * (bacnet-export.ts, over the BACnet device of drivers/bacnet/device.ts). Loaded by app.ts only
 * when a `bacnetDevice` section is configured.
 */
export { BacnetExport, type BacnetExportOptions, type ExportWrite } from './bacnet-export.js';
