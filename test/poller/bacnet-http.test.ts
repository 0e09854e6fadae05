/**
 * Issue 7 end to end over BACnet/IP: a real Hayloft whose BACnet socket is bound by its config
 * (HAYLOFT_BACNET_INTERFACE, HAYLOFT_BACNET_PORT) to 127.0.0.3, and a device simulator on
 * 127.0.0.2 (the library drops requests from exactly 127.0.0.1). Both take ports of their own, so
 * this runs beside test/drivers/bacnet.test.ts, which uses the standard port 47808.
 *
 * Through HTTP only: a connector and points created with createRec; curVal/curStatus read back;
 * a change on the device seen through a watch; history collected by change and by interval read
 * with hisRead; the device disappearing (down, with curErr and connStatus) and coming back; an
 * object the device does not have and a malformed address (fault, with curErr); a connector
 * without a `timeout` tag waiting HAYLOFT_BACNET_TIMEOUT_MS.
 */
import { ObjectType } from '@bacnet-js/client';
import t from 'tap';
import { HNumber, HRef, HUri, MARKER } from '../../src/haystack/values.js';
import { BacnetDevice, enumerated, freeUdpPort, real, unsigned } from '../helpers/bacnet-device.js';
import { startApp } from '../helpers/app.js';
import { atMostOnePerSecond, connClient, curRows, recordMaker, text, until } from '../helpers/conn-http.js';
import { hisStats, ok } from '../helpers/his.js';

const DEVICE_HOST = '127.0.0.2';
const HAYLOFT_HOST = '127.0.0.3';
const INSTANCE = 1234;
const { ANALOG_INPUT: AI, ANALOG_VALUE: AV, BINARY_VALUE: BV, MULTI_STATE_VALUE: MSV } = ObjectType;

t.test('BACnet connector and points over HTTP: values, status, watches, history', async (t) => {
  const device = new BacnetDevice({ address: DEVICE_HOST, port: await freeUdpPort(DEVICE_HOST), deviceInstance: INSTANCE });
  device.set(AI, 1, real(21.5));
  device.set(AV, 3, real(-4.25));
  device.set(BV, 2, enumerated(1));
  device.set(MSV, 4, unsigned(3));
  await device.start();
  t.teardown(() => device.stop());

  const bacnetPort = await freeUdpPort(HAYLOFT_HOST);
  const r = await startApp(t, { env: { HAYLOFT_BACNET_INTERFACE: HAYLOFT_HOST, HAYLOFT_BACNET_PORT: String(bacnetPort), HAYLOFT_BACNET_TIMEOUT_MS: '700' } });
  t.match(r.app.config, { bacnetInterface: HAYLOFT_HOST, bacnetPort, bacnetTimeoutMs: 700 }, 'the BACnet settings came through the config');
  const admin = connClient(r);
  const recs = recordMaker('bacnet', 'vav', 'dev');
  const pt = recs.point;
  ok(
    t,
    await admin.post('createRec', [
      ...recs.equipAndConn({
        uri: new HUri(`bacnet://${DEVICE_HOST}:${device.opts.port}/${INSTANCE}`),
        pollTime: new HNumber(250, 'ms'),
        // Long enough that a stalled event loop on a busy machine does not look like an outage.
        timeout: new HNumber(2, 's'),
      }),
      pt('temp', 'AI1', { unit: '°C', his: MARKER, hisCollectCov: MARKER }),
      pt('press', 'AV3', { unit: 'kPa', his: MARKER, hisCollectInterval: new HNumber(1, 's') }),
      pt('occ', 'BV2', { kind: 'Bool' }),
      pt('mode', 'MSV4'),
      pt('gone', 'AI99'),
      pt('typo', 'XY1'),
      // A device that never answers, on a connector without a timeout tag: the configured one applies.
      { id: HRef.of('ghost'), bacnetConn: MARKER, name: 'ghost', uri: new HUri(`bacnet://${DEVICE_HOST}:${await freeUdpPort(DEVICE_HOST)}/99`), pollTime: new HNumber(250, 'ms') },
      recordMaker('bacnet', 'vav', 'ghost').point('lost', 'AI1'),
    ]),
    'createRec of a BACnet connector and its points',
  );

  const curVal = async (id: string): Promise<string | undefined> => text((await admin.when(id, 'curStatus', 'ok')).get('curVal'));
  t.equal(await curVal('temp'), '21.5°C', 'AI1: curVal with the point unit');
  t.equal(await curVal('press'), '-4.25kPa', 'AV3');
  t.equal(await curVal('occ'), 'true', 'BV2 (active) in a Bool point');
  t.equal(await curVal('mode'), '3', 'MSV4: the state number');
  const gone = await admin.when('gone', 'curStatus', 'fault');
  t.match(gone.get('curErr'), new RegExp(`AI99 of device ${INSTANCE}: the device refused it .*no such object`), 'an object the device lacks: curErr says so');
  t.equal(gone.get('curVal'), undefined, 'no curVal on a fault');
  const typo = await admin.when('typo', 'curStatus', 'fault');
  t.match(typo.get('curErr'), /bacnetCur "XY1": object type "XY"/, 'a malformed address: curErr names it');
  t.equal((await admin.rec('dev')).get('connStatus'), 'ok', 'connector ok: bad points do not make it down');
  t.match((await admin.when('lost', 'curStatus', 'down')).get('curErr'), /no answer from device 99 at .* within 700 ms/, 'bacnetTimeoutMs is the default timeout');
  t.same([...device.senders], [`${HAYLOFT_HOST}:${bacnetPort}`], 'every request came from the configured address and port');

  // A change on the device, seen through a watch.
  const watch = await admin.watch(['temp', 'occ'], 'bacnet e2e');
  t.same(
    curRows(watch.rows),
    [
      ['temp', '21.5°C', 'ok'],
      ['occ', 'true', 'ok'],
    ],
    'watchSub rows',
  );
  device.set(AI, 1, real(22.75));
  device.set(BV, 2, enumerated(0));
  const changed = await watch.collect('both changes in watchPoll', (seen) => text(seen.get('temp')?.get('curVal')) === '22.75°C' && seen.get('occ')?.get('curVal') === false);
  t.same(curRows([...changed.values()]).sort(), [
    ['occ', 'false', 'ok'],
    ['temp', '22.75°C', 'ok'],
  ], 'the new values, through watchPoll');

  // The device disappears: down with curErr, on the points (seen by the watch) and the connector.
  device.stop();
  const down = await watch.until('temp down in watchPoll', 'temp', (row) => row.get('curStatus') === 'down');
  t.match(down.get('curErr'), new RegExp(`no answer from device ${INSTANCE} at ${DEVICE_HOST}:${device.opts.port}`), 'curErr says why');
  t.equal(down.get('curVal'), undefined, 'no curVal while down');
  t.match((await admin.when('dev', 'connStatus', 'down')).get('connErr'), /no answer from device/, 'connector down: connErr says why');
  t.equal((await admin.when('mode', 'curStatus', 'down')).get('curVal'), undefined, 'every point of the device is down');

  // It comes back on the same address: ok again by itself.
  await device.start();
  const back = await watch.until('temp ok again in watchPoll', 'temp', (row) => row.get('curStatus') === 'ok');
  t.equal(text(back.get('curVal')), '22.75°C', 'ok again with the current value');
  await admin.when('dev', 'connStatus', 'ok');
  t.match((await admin.when('gone', 'curStatus', 'fault')).get('curErr'), /no such object/, 'the missing object is a fault again, not down');

  // History collected by change (temp) and by interval (press), read back with hisRead.
  await until('press history', async () => ((await admin.all('press')).length >= 3 ? true : undefined));
  t.same(
    (await admin.all('temp')).map(([, v]) => v),
    ['21.5°C', '22.75°C'],
    'temp history: each change once (the outage left no samples)',
  );
  const pressHis = await admin.all('press');
  t.ok(pressHis.every(([, v]) => v === '-4.25kPa'), 'press history: the value with its unit');
  t.ok(atMostOnePerSecond(pressHis), 'one press sample per second at most');
  const a = await admin.read('temp', '2000-01-01,2100-01-01');
  ok(t, a, 'hisRead');
  t.equal(a.grid?.rows.length, 2, 'hisRead has both samples');
  // Polled samples show in hisSize within the history flush interval (historyFlushMs).
  await until('hisSize follows collection', async () => (hisStats(await admin.rec('temp')).size === '2' ? true : undefined));

  ok(t, await admin.post('watchUnsub', [], { watchId: watch.watchId, close: MARKER }), 'watchUnsub');
});
