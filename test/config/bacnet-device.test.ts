/**
 * The `bacnetDevice` section (src/config/bacnet-device.ts): off until configured, defaults,
 * every bad key reported at once, the environment over the file.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { loadConfig } from '../../src/config/load.js';
import { ErrorCodes, HayloftError } from '../../src/lib/errors.js';
import { tempDir } from '../helpers/tmp.js';

const base = { zones: { host: () => 'UTC', known: (n: string) => n === 'UTC' }, hostname: () => 'gw1' };

t.test('off until configured; defaults; the environment over the file', async (t) => {
  t.equal(loadConfig({ ...base, env: {} }).bacnetDevice, null, 'off by default');
  const c = loadConfig({ ...base, env: { HAYLOFT_BACNET_DEVICE_INSTANCE: '1234' } });
  t.same(c.bacnetDevice, { instance: 1234, name: null, interface: '0.0.0.0', port: 47808, broadcast: '', filter: 'point and bacnetExport', writeAs: null, maxSubscriptions: 1000, bbmd: null, bbmdTtl: 600 }, 'defaults');
  const f = path.join(tempDir(t), 'hayloft.json');
  writeFileSync(f, JSON.stringify({ bacnetDevice: { instance: 7, name: 'Plant', port: 47809, filter: 'point and his', writeAs: 'bms' } }));
  const d = loadConfig({ ...base, env: { HAYLOFT_CONFIG: f, HAYLOFT_BACNET_DEVICE_PORT: '47810' } }).bacnetDevice;
  t.match(d, { instance: 7, name: 'Plant', port: 47810, filter: 'point and his', writeAs: 'bms' }, 'file, then environment');
});

t.test('bad keys, all reported at once, nothing loaded', async (t) => {
  const f = path.join(tempDir(t), 'hayloft.json');
  writeFileSync(f, JSON.stringify({ bacnetDevice: { instance: 4194303, interface: 'eth0', port: 0, colour: 'red' } }));
  let err: unknown;
  try {
    loadConfig({ ...base, env: { HAYLOFT_CONFIG: f } });
  } catch (e) {
    err = e;
  }
  t.ok(err instanceof HayloftError && err.code === ErrorCodes.BAD_CONFIG, 'HL_BAD_CONFIG');
  const text = (err as Error).message;
  for (const k of ['bacnetDevice.instance', 'bacnetDevice.interface', 'bacnetDevice.port', 'bacnetDevice.colour']) t.match(text, k, k);
  let missing: unknown;
  try {
    loadConfig({ ...base, env: { HAYLOFT_BACNET_DEVICE_PORT: '47809' } });
  } catch (e) {
    missing = e;
  }
  t.match((missing as Error).message, /bacnetDevice\.instance.*required; or set HAYLOFT_BACNET_DEVICE_INSTANCE/, 'the instance is required once anything is set');
});
