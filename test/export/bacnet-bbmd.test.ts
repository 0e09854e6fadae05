/**
 * Foreign-device registration of the BACnet device side (drivers/bacnet/foreign.ts): Hayloft on
 * 127.0.0.12 registers with a BBMD (test/helpers/bbmd.ts, its own BVLL code) on 127.0.0.13 and
 * renews before the TTL ends; a front-end registered with the same BBMD (127.0.0.14) finds
 * Hayloft with a Who-Is through the BBMD (Distribute-Broadcast-To-Network), and Hayloft's I-Am
 * comes back through it; /api/health shows the registration, and a BBMD that refuses it.
 * Loopback addresses stand for the subnets: the BBMD forwards by address as it would across them.
 */
import bacnet from '@bacnet-js/client';
import t from 'tap';
import { startApp } from '../helpers/app.js';
import { freeUdpPort } from '../helpers/bacnet-device.js';
import { TestBbmd } from '../helpers/bbmd.js';
import { until } from '../helpers/conn-http.js';

const DEVICE = '127.0.0.12';
const BBMD = '127.0.0.13';
const FRONT_END = '127.0.0.14';
const INSTANCE = 260003;

t.test('registered with a BBMD, renewed, found through it; health shows it; a refusal shows too', async (t) => {
  const bbmd = new TestBbmd(BBMD, await freeUdpPort(BBMD));
  await bbmd.start();
  t.teardown(() => bbmd.stop());
  const port = await freeUdpPort(DEVICE);
  const r = await startApp(t, {
    env: {
      HAYLOFT_BACNET_DEVICE_INSTANCE: String(INSTANCE),
      HAYLOFT_BACNET_DEVICE_INTERFACE: DEVICE,
      HAYLOFT_BACNET_DEVICE_PORT: String(port),
      HAYLOFT_BACNET_DEVICE_BBMD: `${BBMD}:${bbmd.port}`,
      HAYLOFT_BACNET_DEVICE_BBMD_TTL: '2',
    },
  });
  const me = `${DEVICE}:${port}`;
  await until('registered', async () => (bbmd.fdt.has(me) ? true : undefined));
  t.equal(bbmd.registrations.find((x) => x.from === me)?.ttl, 2, 'with the configured TTL');
  await until('renewed before the TTL ends', async () => (bbmd.registrations.filter((x) => x.from === me).length >= 3 ? true : undefined));
  const health = async (): Promise<Record<string, unknown>> => {
    const res = await fetch(`${r.base}/api/health`, { headers: r.auth });
    const body = (await res.json()) as { parts?: Record<string, Record<string, unknown>> };
    return body.parts?.['bacnet-device'] ?? {};
  };
  t.match(await health(), { bbmd: `${BBMD}:${bbmd.port}`, bbmdTtl: 2, bbmdState: 'registered', bbmdError: null }, 'health: registered');

  // A front-end on another subnet, registered with the same BBMD, finds Hayloft through it.
  const fe = new bacnet.default({ interface: FRONT_END, port: await freeUdpPort(FRONT_END), apduTimeout: 2000 });
  fe.on('error', () => undefined);
  t.teardown(() => fe.close());
  await new Promise<void>((resolve) => fe.once('listening', () => resolve()));
  await fe.registerForeignDevice({ address: `${BBMD}:${bbmd.port}` }, 60);
  const viaBbmd = new Promise<{ forwardedFrom: unknown }>((resolve) =>
    fe.on('iAm', (m) => {
      const s = m.header?.sender as { forwardedFrom?: unknown } | undefined;
      if ((m.payload as { deviceId: number }).deviceId === INSTANCE && s?.forwardedFrom) resolve({ forwardedFrom: s.forwardedFrom });
    }),
  );
  fe.whoIsThroughBBMD({ address: `${BBMD}:${bbmd.port}` }, { lowLimit: INSTANCE, highLimit: INSTANCE });
  t.match(await viaBbmd, { forwardedFrom: new RegExp(`^${DEVICE.replace(/\./g, '\\.')}`) }, 'I-Am forwarded by the BBMD from Hayloft');
  t.ok(bbmd.forwarded >= 2, 'the Who-Is and the I-Am went through the BBMD');

  // The BBMD refuses from now on: health says so.
  bbmd.refuse = true;
  await until('refused', async () => ((await health()).bbmdState === 'failed' ? true : undefined));
  t.match((await health()).bbmdError, /refused the registration/, 'health: why');
});
