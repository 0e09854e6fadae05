/**
 * Foreign-device registration of the BACnet device side (drivers/bacnet/foreign.ts): Hayloft on
 * 127.0.0.12 registers with a BBMD (test/helpers/bbmd.ts, its own BVLL code) on 127.0.0.13 and
 * renews before the TTL ends; a front-end registered with the same BBMD (127.0.0.14) finds
 * Hayloft with a Who-Is through the BBMD (Distribute-Broadcast-To-Network), and Hayloft's I-Am
 * comes back through it; /api/health shows the registration, and a BBMD that refuses it. The
 * client side (the driver's socket, 127.0.0.16) registers too: discover finds a device that is a
 * foreign device of the same BBMD (127.0.0.15), and polls it at its own address.
 * Loopback addresses stand for the subnets: the BBMD forwards by address as it would across them.
 */
import bacnet, { ObjectType } from '@bacnet-js/client';
import t from 'tap';
import { HNumber, HRef, HUri, MARKER } from '../../src/haystack/values.js';
import { startApp } from '../helpers/app.js';
import { BacnetDevice, freeUdpPort, real } from '../helpers/bacnet-device.js';
import { TestBbmd } from '../helpers/bbmd.js';
import { connClient, text, until } from '../helpers/conn-http.js';
import { ok } from '../helpers/his.js';

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
  const report = async (): Promise<{ status: string; reasons?: string[] }> => (await fetch(`${r.base}/api/health`)).json() as Promise<{ status: string; reasons?: string[] }>;
  const refused = await report();
  t.equal(refused.status, 'degraded', 'the gateway is degraded while the BBMD refuses');
  t.match(refused.reasons, [new RegExp(`^bacnet-device: HL_BBMD_UNREGISTERED: the BBMD at ${BBMD.replace(/\./g, '\\.')}:${bbmd.port} refused the registration`)], 'naming the part, the code, the BBMD and why');

  // Accepted again: registered, and the gateway ok once more.
  bbmd.refuse = false;
  await until('registered again', async () => ((await health()).bbmdState === 'registered' ? true : undefined));
  t.equal((await report()).status, 'ok', 'ok again once registered');
});

t.test('a BBMD that does not answer: both sides degraded in /api/health, naming it', async (t) => {
  // Nothing listens there: the registration gets no answer.
  const silent = `${BBMD}:${await freeUdpPort(BBMD)}`;
  const port = await freeUdpPort(DEVICE);
  const clientPort = await freeUdpPort('127.0.0.16');
  const r = await startApp(t, {
    env: {
      HAYLOFT_BACNET_DEVICE_INSTANCE: String(INSTANCE),
      HAYLOFT_BACNET_DEVICE_INTERFACE: DEVICE,
      HAYLOFT_BACNET_DEVICE_PORT: String(port),
      HAYLOFT_BACNET_DEVICE_BBMD: silent,
      HAYLOFT_BACNET_DEVICE_BBMD_TTL: '60',
      HAYLOFT_BACNET_INTERFACE: '127.0.0.16',
      HAYLOFT_BACNET_PORT: String(clientPort),
      HAYLOFT_BACNET_BBMD: silent,
    },
  });
  const report = async (): Promise<{ status: string; reasons?: string[]; parts: Record<string, Record<string, unknown>> }> => (await fetch(`${r.base}/api/health`)).json() as Promise<{ status: string; reasons?: string[]; parts: Record<string, Record<string, unknown>> }>;
  await until('device side failed', async () => ((await report()).parts['bacnet-device']?.bbmdState === 'failed' ? true : undefined));
  // The client side registers while its socket is open: a connector keeps it open (its device need not answer).
  const admin = connClient(r);
  ok(t, await admin.post('createRec', [
    { id: HRef.of('c'), bacnetConn: MARKER, name: 'c', uri: new HUri('bacnet://127.0.0.17:47808/1'), pollTime: new HNumber(1, 's') },
    { id: HRef.of('p'), point: MARKER, cur: MARKER, kind: 'Number', name: 'p', bacnetConnRef: HRef.of('c'), bacnetCur: 'AV1' },
  ]), 'a BACnet connector and its point');
  await until('client side failed', async () => ((await report()).parts['bacnet-bbmd']?.bbmdState === 'failed' ? true : undefined));
  const h = await report();
  t.equal(h.status, 'degraded', 'degraded (still serving)');
  t.same([...(h.reasons ?? [])].sort(), [`bacnet-bbmd: HL_BBMD_UNREGISTERED: no answer from the BBMD at ${silent}`, `bacnet-device: HL_BBMD_UNREGISTERED: no answer from the BBMD at ${silent}`], 'each side named, with why');
  t.match(h.parts['bacnet-bbmd'], { bbmd: silent, bbmdRegisteredAt: null, bbmdError: `no answer from the BBMD at ${silent}` }, 'the client side\'s detail');
});

t.test('the client side: registered with a BBMD, discover finds a device on another subnet through it, and polls it', async (t) => {
  const bbmd = new TestBbmd(BBMD, await freeUdpPort(BBMD));
  await bbmd.start();
  t.teardown(() => bbmd.stop());
  const dev = new BacnetDevice({ address: '127.0.0.15', port: await freeUdpPort('127.0.0.15'), deviceInstance: 4401 });
  dev.set(ObjectType.ANALOG_VALUE, 1, real(42));
  dev.describe('Remote VAV');
  await dev.start();
  t.teardown(() => dev.stop());
  await dev.registerForeign(`${BBMD}:${bbmd.port}`);
  const clientPort = await freeUdpPort('127.0.0.16');
  const r = await startApp(t, { env: { HAYLOFT_BACNET_INTERFACE: '127.0.0.16', HAYLOFT_BACNET_PORT: String(clientPort), HAYLOFT_BACNET_BBMD: `${BBMD}:${bbmd.port}`, HAYLOFT_BACNET_BBMD_TTL: '30' } });
  const admin = connClient(r);
  const health = async (): Promise<Record<string, unknown>> => {
    const res = await fetch(`${r.base}/api/health`, { headers: r.auth });
    return ((await res.json()) as { parts?: Record<string, Record<string, unknown>> }).parts?.['bacnet-bbmd'] ?? {};
  };
  t.match(await health(), { bbmd: `${BBMD}:${bbmd.port}`, bbmdState: 'idle' }, 'health: idle while no BACnet socket is open');

  const found = ok(t, await admin.post('discover', { proto: 'bacnet', timeout: new HNumber(1500, 'ms') }), 'discover (broadcast)');
  const row = found.rows.find((x) => (x.get('bacnetDevice') as HNumber | undefined)?.val === 4401);
  t.ok(row !== undefined, 'the device on the other subnet answered through the BBMD');
  t.same(row?.get('uri'), new HUri(`bacnet://127.0.0.15:${dev.opts.port}/4401`), 'its own address, not the BBMD\'s');
  t.equal(row?.get('dis'), 'Remote VAV', 'read directly once found');
  t.ok(bbmd.registrations.some((x) => x.from === `127.0.0.16:${clientPort}` && x.ttl === 30), 'Hayloft registered with the TTL configured');

  ok(t, await admin.post('createRec', [
    { id: HRef.of('c'), bacnetConn: MARKER, name: 'c', uri: row?.get('uri') as HUri, pollTime: new HNumber(300, 'ms') },
    { id: HRef.of('p'), point: MARKER, cur: MARKER, kind: 'Number', name: 'p', bacnetConnRef: HRef.of('c'), bacnetCur: 'AV1' },
  ]), 'a connector to it');
  t.equal(text((await admin.when('p', 'curStatus', 'ok')).get('curVal')), '42', 'polled');
  await until('health: registered', async () => ((await health()).bbmdState === 'registered' ? true : undefined));
});
