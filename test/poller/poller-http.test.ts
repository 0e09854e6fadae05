/**
 * Issue 7 end to end: a real Hayloft (HTTP on 127.0.0.1) and a real Modbus TCP slave (Debian's
 * python3-pymodbus). A connector and points are created with createRec and picked up without a
 * restart; curVal/curStatus/curErr are read back, watched as they change (value, device silent,
 * device back), and their collected history is read with hisRead.
 */
import t from 'tap';
import { type HDict, HNumber, HRef, HUri, type HVal, MARKER } from '../../src/haystack/values.js';
import { encodeRegisters, parseModbusCur } from '../../src/drivers/modbus/address.js';
import { startApp } from '../helpers/app.js';
import { hisClient, hisStats, ok } from '../helpers/his.js';
import { ModbusSlave, peersMissing } from '../helpers/modbus-slave.js';

const skip = peersMissing();
if (skip !== null) {
  t.comment(`SKIP Modbus end-to-end tests: ${skip}`);
  t.pass('skipped: ' + skip);
} else {
  const f32 = (v: number): number[] => encodeRegisters(parseModbusCur('holding:0:float32'), v);

  async function until<T>(what: string, f: () => Promise<T | undefined>, ms = 10_000): Promise<T> {
    const end = Date.now() + ms;
    for (;;) {
      const v = await f();
      if (v !== undefined) return v;
      if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  const text = (v: HVal | undefined): string | undefined => (v === undefined ? undefined : v instanceof HNumber ? `${v.val}${v.unit ?? ''}` : String(v));

  t.test('connector and points over HTTP: values, status, watches, history', async (t) => {
    const slave = await ModbusSlave.tcp({ units: [1], size: 100, hr: { 0: f32(21.5), 2: [100] }, co: { 0: [1] } });
    t.teardown(() => slave.kill());
    const r = await startApp(t);
    const admin = hisClient(r);
    const pt = (name: string, cur: string, extra: Record<string, HVal> = {}): Record<string, HVal> => ({
      id: HRef.of(name),
      point: MARKER,
      cur: MARKER,
      name,
      kind: 'Number',
      equipRef: HRef.of('ahu'),
      modbusConnRef: HRef.of('plc'),
      modbusCur: cur,
      ...extra,
    });
    ok(
      t,
      await admin.post('createRec', [
        { id: HRef.of('ahu'), equip: MARKER, name: 'ahu' },
        {
          id: HRef.of('plc'),
          modbusConn: MARKER,
          name: 'plc',
          uri: new HUri(`modbus-tcp://127.0.0.1:${slave.port}`),
          modbusSlave: new HNumber(1),
          pollTime: new HNumber(250, 'ms'),
          timeout: new HNumber(300, 'ms'),
        },
        pt('temp', 'holding:0:float32', { unit: '°C', his: MARKER, hisCollectCov: MARKER }),
        pt('flow', 'holding:2', { unit: 'L/s', modbusScale: new HNumber(0.1), his: MARKER, hisCollectInterval: new HNumber(1, 's') }),
        pt('fan', 'coil:0', { kind: 'Bool' }),
        pt('gone', 'holding:500'),
        pt('typo', 'holding:two'),
      ]),
      'createRec of a connector and its points',
    );

    const rec = (id: string): Promise<HDict> => admin.rec(id);
    await until('temp ok', async () => ((await rec('temp')).get('curStatus') === 'ok' ? true : undefined));
    const temp = await rec('temp');
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
    const sub = ok(t, await admin.post('watchSub', [{ id: HRef.of('temp') }, { id: HRef.of('fan') }], { watchDis: 'e2e', lease: new HNumber(1, 'min') }), 'watchSub');
    const watchId = sub.meta.get('watchId') as string;
    t.same(
      sub.rows.map((x) => [(x.get('id') as HRef).id, text(x.get('curVal')), x.get('curStatus')]),
      [
        ['temp', '21.5°C', 'ok'],
        ['fan', 'true', 'ok'],
      ],
      'watchSub rows',
    );
    const poll = async (): Promise<Map<string, HDict>> => {
      const g = ok(t, await admin.post('watchPoll', [], { watchId }), 'watchPoll');
      return new Map(g.rows.map((x) => [(x.get('id') as HRef).id, x]));
    };
    await slave.set('hr', 0, f32(23.25));
    await slave.set('co', 0, [0]);
    const changed = new Map<string, HDict>();
    await until('both changes in watchPoll', async () => {
      for (const [k, v] of await poll()) changed.set(k, v);
      return changed.size === 2 ? true : undefined;
    });
    t.equal(text(changed.get('temp')?.get('curVal')), '23.25°C', 'the new temperature, through watchPoll');
    t.equal(changed.get('fan')?.get('curVal'), false, 'the fan, through watchPoll');

    // The device stops answering: down with curErr, seen by the watch; then it answers again.
    await slave.mute(1);
    const down = await until('down in watchPoll', async () => {
      const row = (await poll()).get('temp');
      return row?.get('curStatus') === 'down' ? row : undefined;
    });
    t.match(down.get('curErr'), /no answer from unit 1/, 'curErr says why');
    t.equal(down.get('curVal'), undefined, 'no curVal while down');
    const plc = await rec('plc');
    t.equal(plc.get('connStatus'), 'down', 'connector down');
    t.match(plc.get('connErr'), /no answer/);
    await slave.unmute(1);
    const back = await until('ok again in watchPoll', async () => {
      const row = (await poll()).get('temp');
      return row?.get('curStatus') === 'ok' ? row : undefined;
    });
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
    const seconds = flowHis.map(([ts]) => Date.parse(ts.split(' ')[0] as string) / 1000);
    t.ok(seconds.every((s, i) => i === 0 || Math.floor(s) > Math.floor(seconds[i - 1] as number)), 'one flow sample per second at most');
    const a = await admin.read('temp', '2000-01-01,2100-01-01');
    ok(t, a, 'hisRead');
    t.equal(a.grid?.rows.length, 2, 'hisRead has both samples');
    t.equal(hisStats(await rec('temp')).size, '2', 'hisSize follows collection');

    // Deleting the connector and its points stops polling of them.
    ok(t, await admin.post('deleteRec', [{ id: HRef.of('temp') }, { id: HRef.of('flow') }, { id: HRef.of('fan') }, { id: HRef.of('gone') }, { id: HRef.of('typo') }, { id: HRef.of('plc') }]), 'deleteRec');
    t.same(r.app.poller?.stats().connectors, 0, 'nothing left to poll');
  });
}
