/**
 * Issue 7 end to end: a real Hayloft (HTTP on 127.0.0.1) and a real Modbus TCP slave (Debian's
 * python3-pymodbus). A connector and points are created with createRec and picked up without a
 * restart; curVal/curStatus/curErr are read back, watched as they change (value, device silent,
 * device back), and their collected history is read with hisRead.
 */
import t from 'tap';
import { type HDict, HNumber, HRef, HUri, MARKER } from '../../src/haystack/values.js';
import { encodeRegisters, parseModbusCur } from '../../src/drivers/modbus/address.js';
import { startApp } from '../helpers/app.js';
import { atMostOnePerSecond, connClient, curRows, recordMaker, text, until } from '../helpers/conn-http.js';
import { hisStats, ok } from '../helpers/his.js';
import { ModbusSlave, peersMissing } from '../helpers/modbus-slave.js';

const skip = peersMissing();
if (skip !== null) {
  t.comment(`SKIP Modbus end-to-end tests: ${skip}`);
  t.pass('skipped: ' + skip);
} else {
  const f32 = (v: number): number[] => encodeRegisters(parseModbusCur('holding:0:float32'), v);

  t.test('connector and points over HTTP: values, status, watches, history', async (t) => {
    const slave = await ModbusSlave.tcp({ units: [1], size: 100, hr: { 0: f32(21.5), 2: [100] }, co: { 0: [1] } });
    t.teardown(() => slave.kill());
    const r = await startApp(t);
    const admin = connClient(r);
    const recs = recordMaker('modbus', 'ahu', 'plc');
    const pt = recs.point;
    ok(
      t,
      await admin.post('createRec', [
        ...recs.equipAndConn({
          uri: new HUri(`modbus-tcp://127.0.0.1:${slave.port}`),
          modbusSlave: new HNumber(1),
          pollTime: new HNumber(250, 'ms'),
          timeout: new HNumber(300, 'ms'),
        }),
        pt('temp', 'holding:0:float32', { unit: '°C', his: MARKER, hisCollectCov: MARKER }),
        pt('flow', 'holding:2', { unit: 'L/s', modbusScale: new HNumber(0.1), his: MARKER, hisCollectInterval: new HNumber(1, 's') }),
        pt('fan', 'coil:0', { kind: 'Bool' }),
        pt('gone', 'holding:500'),
        pt('typo', 'holding:two'),
      ]),
      'createRec of a connector and its points',
    );

    const rec = (id: string): Promise<HDict> => admin.rec(id);
    const temp = await admin.when('temp', 'curStatus', 'ok');
    t.equal(text(temp.get('curVal')), '21.5°C', 'temp curVal');
    t.equal(text((await rec('flow')).get('curVal')), '10L/s', 'flow curVal, scaled');
    t.equal((await rec('fan')).get('curVal'), true, 'fan curVal');
    const gone = await rec('gone');
    t.equal(gone.get('curStatus'), 'fault', 'a register the device lacks is fault');
    t.match(gone.get('curErr'), /refused to read holding 500: Modbus exception 2/);
    t.equal(gone.get('curVal'), undefined);
    const typo = await rec('typo');
    t.equal(typo.get('curStatus'), 'fault', 'a malformed address is fault');
    t.match(typo.get('curErr'), /address "two"/);
    t.equal((await rec('plc')).get('connStatus'), 'ok', 'connector ok');

    // Watches see changes as they come.
    const watch = await admin.watch(['temp', 'fan'], 'e2e');
    t.same(
      curRows(watch.rows),
      [
        ['temp', '21.5°C', 'ok'],
        ['fan', 'true', 'ok'],
      ],
      'watchSub rows',
    );
    await slave.set('hr', 0, f32(23.25));
    await slave.set('co', 0, [0]);
    const changed = await watch.collect('both changes in watchPoll', (seen) => seen.size === 2);
    t.equal(text(changed.get('temp')?.get('curVal')), '23.25°C', 'the new temperature, through watchPoll');
    t.equal(changed.get('fan')?.get('curVal'), false, 'the fan, through watchPoll');

    // The device stops answering: down with curErr, seen by the watch; then it answers again.
    await slave.mute(1);
    const down = await watch.until('down in watchPoll', 'temp', (row) => row.get('curStatus') === 'down');
    t.match(down.get('curErr'), /no answer from unit 1/, 'curErr says why');
    t.equal(down.get('curVal'), undefined, 'no curVal while down');
    const plc = await rec('plc');
    t.equal(plc.get('connStatus'), 'down', 'connector down');
    t.match(plc.get('connErr'), /no answer/);
    await slave.unmute(1);
    const back = await watch.until('ok again in watchPoll', 'temp', (row) => row.get('curStatus') === 'ok');
    t.equal(text(back.get('curVal')), '23.25°C', 'ok again by itself');
    t.equal((await rec('plc')).get('connStatus'), 'ok');

    // A change of address is picked up without a restart.
    ok(t, await admin.post('updateRec', [{ id: HRef.of('fan'), modbusCur: 'holding:2', kind: 'Number' }]), 'updateRec');
    await until('fan reads the register', async () => (text((await rec('fan')).get('curVal')) === '100' ? true : undefined));

    // History collected by COV (temp) and by interval (flow), readable with hisRead.
    await until('flow history', async () => ((await admin.all('flow')).length >= 3 ? true : undefined));
    const tempHis = (await admin.all('temp')).map(([, v]) => v);
    t.same(tempHis, ['21.5°C', '23.25°C'], 'temp history: each change once (the outage left no samples)');
    const flowHis = await admin.all('flow');
    t.ok(flowHis.every(([, v]) => v === '10L/s'), 'flow history: the scaled value');
    t.ok(atMostOnePerSecond(flowHis), 'one flow sample per second at most');
    const a = await admin.read('temp', '2000-01-01,2100-01-01');
    ok(t, a, 'hisRead');
    t.equal(a.grid?.rows.length, 2, 'hisRead has both samples');
    // Polled samples show in hisSize within the history flush interval (historyFlushMs).
    await until('hisSize follows collection', async () => (hisStats(await rec('temp')).size === '2' ? true : undefined));

    // Deleting the connector and its points stops polling of them.
    ok(t, await admin.post('deleteRec', [{ id: HRef.of('temp') }, { id: HRef.of('flow') }, { id: HRef.of('fan') }, { id: HRef.of('gone') }, { id: HRef.of('typo') }, { id: HRef.of('plc') }]), 'deleteRec');
    t.same(r.app.poller?.stats().connectors, 0, 'nothing left to poll');
  });
}
