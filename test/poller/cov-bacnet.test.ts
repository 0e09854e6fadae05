/**
 * BACnet change of value end to end over HTTP (issue 14): points marked `bacnetCov` (on the
 * point or on its connector) subscribed on a simulated device (127.0.0.2 / 127.0.0.4 / 127.0.0.5;
 * Hayloft on 127.0.0.3), values and history fed by notifications while polling leaves them
 * alone; renewals; a subscription whose notifications stop (polling takes over, covErr says why,
 * curStatus stays ok, COV comes back); a device that restarts and announces itself; a device that
 * refuses SubscribeCOV.
 */
import { EngineeringUnits, ObjectType, PropertyIdentifier } from '@bacnet-js/client';
import { type ChildProcess, spawn } from 'node:child_process';
import t from 'tap';
import { HNumber, HRef, HUri, MARKER, type HDict, type HVal } from '../../src/haystack/values.js';
import { BacnetDevice, freeUdpPort, real, text as str } from '../helpers/bacnet-device.js';
import { startApp } from '../helpers/app.js';
import { connClient, text, until } from '../helpers/conn-http.js';
import { ok } from '../helpers/his.js';

const HAYLOFT_HOST = '127.0.0.3';
const { ANALOG_INPUT: AI, ANALOG_VALUE: AV } = ObjectType;

async function hayloft(t: { teardown(f: () => unknown): void }): Promise<{ admin: ReturnType<typeof connClient>; port: number }> {
  const port = await freeUdpPort(HAYLOFT_HOST);
  const r = await startApp(t, { env: { HAYLOFT_BACNET_INTERFACE: HAYLOFT_HOST, HAYLOFT_BACNET_PORT: String(port) } });
  return { admin: connClient(r), port };
}

t.test('discover, learn, create with bacnetCov on the connector: values by notification; lapse, fallback, return', async (t) => {
  const dev = new BacnetDevice({ address: '127.0.0.2', port: await freeUdpPort('127.0.0.2'), deviceInstance: 501 });
  dev.set(AI, 1, real(20));
  dev.set(AI, 1, str('Space Temp'), PropertyIdentifier.OBJECT_NAME);
  dev.set(AI, 1, { type: 9, value: EngineeringUnits.DEGREES_CELSIUS }, PropertyIdentifier.UNITS);
  dev.describe('VAV-7');
  await dev.start();
  t.teardown(() => dev.stop());
  const { admin } = await hayloft(t);

  const found = ok(t, await admin.post('discover', { proto: 'bacnet', address: `127.0.0.2:${dev.opts.port}`, timeout: new HNumber(500, 'ms') }), 'discover').rows[0] as HDict;
  ok(
    t,
    await admin.post('createRec', [
      { id: HRef.of('vav'), equip: MARKER, name: 'vav' },
      // Every point of the connector by change of value, renewed every 1.5 s.
      { id: HRef.of('vavConn'), bacnetConn: MARKER, name: 'vavConn', uri: found.get('uri') as HVal, bacnetCov: MARKER, bacnetCovLifetime: new HNumber(2, 's'), pollTime: new HNumber(300, 'ms'), timeout: new HNumber(2, 's') },
    ]),
    'a connector from the discovered uri, marked bacnetCov',
  );
  const groups = ok(t, await admin.post('learn', { connId: HRef.of('vavConn') }), 'learn').rows;
  const props = ok(t, await admin.post('learn', { connId: HRef.of('vavConn'), arg: groups[0]?.get('learn') as string }), 'drill in').rows;
  ok(t, await admin.post('createRec', props.map((p) => Object.fromEntries(p.with({ equipRef: HRef.of('vav'), hisCollectCov: MARKER })))), 'createRec of the proposal, collecting history by change');

  await until('subscribed', async () => (dev.subscriptions.size > 0 ? true : undefined));
  t.equal(text((await admin.when('vav.spaceTemp', 'curStatus', 'ok')).get('curVal')), '20°C', 'curVal');
  const polls = (): number => dev.seen.rp + dev.seen.rpm;
  dev.set(AI, 1, real(20.5));
  await until('20.5 by notification', async () => (text((await admin.rec('vav.spaceTemp')).get('curVal')) === '20.5°C' ? true : undefined));
  const before = polls();
  dev.set(AI, 1, real(21));
  await until('21 by notification', async () => (text((await admin.rec('vav.spaceTemp')).get('curVal')) === '21°C' ? true : undefined));
  t.equal(polls(), before, 'no poll while the point is pushed by its device');
  t.ok(dev.seen.notified >= 2, 'notifications did it');
  const subs = dev.seen.subscribe;
  await until('a renewal', async () => (dev.seen.subscribe > subs ? true : undefined));
  t.equal((await admin.rec('vav.spaceTemp')).get('covErr'), undefined, 'no covErr while notifications arrive');
  const his = (await admin.all('vav.spaceTemp')).map(([, v]) => v);
  t.same(his.slice(-2), ['20.5°C', '21°C'], 'hisCollectCov fed by notifications');

  // The device goes quiet (subscriptions renewed, no notification): polling takes over.
  dev.covMuted = true;
  const lapsed = await until('covErr after the lapse', async () => {
    const rec = await admin.rec('vav.spaceTemp');
    return typeof rec.get('covErr') === 'string' ? rec : undefined;
  });
  t.match(lapsed.get('covErr'), /no notification for \d+ s, longer than the subscription lifetime \(2 s\); polling until COV works again/, 'covErr says why');
  t.equal(lapsed.get('curStatus'), 'ok', 'curStatus stays ok');
  dev.set(AI, 1, real(19));
  await until('19 by polling', async () => (text((await admin.rec('vav.spaceTemp')).get('curVal')) === '19°C' ? true : undefined));
  t.ok(polls() > before, 'read by polling');

  // Notifications again: COV is tried again and takes over.
  dev.covMuted = false;
  await until('covErr cleared', async () => ((await admin.rec('vav.spaceTemp')).get('covErr') === undefined ? true : undefined));
  const back = polls();
  dev.set(AI, 1, real(18));
  await until('18 by notification', async () => (text((await admin.rec('vav.spaceTemp')).get('curVal')) === '18°C' ? true : undefined));
  t.equal(polls(), back, 'pushed again, not polled');
});

t.test('a device restart: subscribed again when it announces itself', async (t) => {
  const dev = new BacnetDevice({ address: '127.0.0.4', port: await freeUdpPort('127.0.0.4'), deviceInstance: 502 });
  dev.set(AV, 3, real(1));
  await dev.start();
  t.teardown(() => dev.stop());
  const { admin, port } = await hayloft(t);
  ok(
    t,
    await admin.post('createRec', [
      // A lifetime long enough that no renewal happens during the test.
      { id: HRef.of('c'), bacnetConn: MARKER, name: 'c', uri: new HUri(`bacnet://127.0.0.4:${dev.opts.port}/502`), pollTime: new HNumber(1, 'h') },
      { id: HRef.of('p'), point: MARKER, cur: MARKER, kind: 'Number', name: 'p', bacnetConnRef: HRef.of('c'), bacnetCur: 'AV3', bacnetCov: MARKER, bacnetCovLifetime: new HNumber(10, 'min') },
    ]),
    'a point marked bacnetCov on a connector polled hourly',
  );
  await until('subscribed', async () => (dev.subscriptions.size > 0 ? true : undefined));
  dev.set(AV, 3, real(2));
  await until('2 by notification', async () => (text((await admin.rec('p')).get('curVal')) === '2' ? true : undefined));

  dev.stop();
  await dev.start();
  t.equal(dev.subscriptions.size, 0, 'the restarted device forgot its subscriptions');
  dev.announce(`${HAYLOFT_HOST}:${port}`);
  await until('subscribed again', async () => (dev.subscriptions.size > 0 ? true : undefined));
  dev.set(AV, 3, real(3));
  await until('3 by notification', async () => (text((await admin.rec('p')).get('curVal')) === '3' ? true : undefined));
  t.equal((await admin.rec('p')).get('covErr'), undefined, 'no covErr');
});

t.test('a device that refuses SubscribeCOV: polled, covErr says why', async (t) => {
  const dev = new BacnetDevice({ address: '127.0.0.5', port: await freeUdpPort('127.0.0.5'), deviceInstance: 503, cov: 'refuse' });
  dev.set(AV, 1, real(7));
  await dev.start();
  t.teardown(() => dev.stop());
  const { admin } = await hayloft(t);
  ok(
    t,
    await admin.post('createRec', [
      { id: HRef.of('c'), bacnetConn: MARKER, name: 'c', uri: new HUri(`bacnet://127.0.0.5:${dev.opts.port}/503`), pollTime: new HNumber(300, 'ms') },
      { id: HRef.of('p'), point: MARKER, cur: MARKER, kind: 'Number', name: 'p', bacnetConnRef: HRef.of('c'), bacnetCur: 'AV1', bacnetCov: MARKER },
    ]),
    'a point marked bacnetCov',
  );
  const refused = await until('covErr', async () => {
    const rec = await admin.rec('p');
    return typeof rec.get('covErr') === 'string' ? rec : undefined;
  });
  t.match(refused.get('covErr'), /subscribing failed: device 503 refused SubscribeCOV of AV1 .*; polling until COV works again/, 'covErr: refused');
  t.equal(text((await admin.when('p', 'curStatus', 'ok')).get('curVal')), '7', 'curStatus ok by polling');
  dev.set(AV, 1, real(8));
  await until('8 by polling', async () => (text((await admin.rec('p')).get('curVal')) === '8' ? true : undefined));
  t.equal((await admin.rec('p')).get('curStatus'), 'ok', 'still ok');
});

/** The simulator in a process of its own (bacnet-device-child.ts): it can be paused and killed. */
async function deviceProcess(t: { teardown(f: () => unknown): void }, args: string[]): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', new URL('../helpers/bacnet-device-child.ts', import.meta.url).pathname, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGCONT');
      child.kill('SIGKILL');
    }
  });
  await new Promise<void>((resolve, reject) => {
    child.stdout.on('data', (b: Buffer) => /ready/.test(b.toString()) && resolve());
    child.once('exit', (code) => reject(new Error(`the device process ended (${String(code)})`)));
  });
  return child;
}

t.test('a device paused, then restarted while a retry is in flight: pushed points are ok again with the polled ones', async (t) => {
  const host = '127.0.0.7';
  const devPort = await freeUdpPort(host);
  const args = (pv1: number, pv3: number, announce?: string): string[] => [host, String(devPort), '504', `${AV}:1=${pv1}`, `${AV}:3=${pv3}`, ...(announce === undefined ? [] : ['--announce', announce])];
  let dev = await deviceProcess(t, args(1, 10));
  const { admin, port } = await hayloft(t);
  ok(
    t,
    await admin.post('createRec', [
      { id: HRef.of('c'), bacnetConn: MARKER, name: 'c', uri: new HUri(`bacnet://${host}:${devPort}/504`), pollTime: new HNumber(300, 'ms'), timeout: new HNumber(300, 'ms') },
      { id: HRef.of('polled'), point: MARKER, cur: MARKER, kind: 'Number', name: 'polled', bacnetConnRef: HRef.of('c'), bacnetCur: 'AV1' },
      // A lifetime long enough that no renewal happens during the test: only the fix brings it back.
      { id: HRef.of('pushed'), point: MARKER, cur: MARKER, kind: 'Number', name: 'pushed', bacnetConnRef: HRef.of('c'), bacnetCur: 'AV3', bacnetCov: MARKER, bacnetCovLifetime: new HNumber(10, 'min') },
    ]),
    'a polled point and a pushed one on one connector',
  );
  t.equal(text((await admin.when('pushed', 'curStatus', 'ok')).get('curVal')), '10', 'pushed: ok');
  t.equal(text((await admin.when('polled', 'curStatus', 'ok')).get('curVal')), '1', 'polled: ok');

  // Paused: both down; resumed: both ok, the pushed one without a value change or a renewal.
  dev.kill('SIGSTOP');
  await admin.when('polled', 'curStatus', 'down');
  t.match((await admin.when('pushed', 'curStatus', 'down')).get('curErr'), /no answer from device 504/, 'the pushed point went down with its connector');
  dev.kill('SIGCONT');
  await admin.when('polled', 'curStatus', 'ok');
  const back = await admin.when('pushed', 'curStatus', 'ok');
  t.equal(text(back.get('curVal')), '10', 'the pushed point is ok again after the pause');
  t.equal(back.get('curErr'), undefined, 'no stale curErr');

  // Paused again until a retry is in flight, then killed and started anew (other values, an I-Am).
  dev.kill('SIGSTOP');
  await admin.when('pushed', 'curStatus', 'down');
  dev.kill('SIGKILL');
  await new Promise((r) => dev.once('exit', r));
  dev = await deviceProcess(t, args(2, 20, `${HAYLOFT_HOST}:${port}`));
  t.equal(text((await admin.when('polled', 'curStatus', 'ok')).get('curVal')), '2', 'polled: the restarted device');
  const restarted = await until('pushed ok with the restarted device', async () => {
    const rec = await admin.rec('pushed');
    return rec.get('curStatus') === 'ok' && text(rec.get('curVal')) === '20' ? rec : undefined;
  });
  t.equal(restarted.get('curErr'), undefined, 'no stale curErr after the restart');
  t.equal(restarted.get('covErr'), undefined, 'subscribed again');
});
