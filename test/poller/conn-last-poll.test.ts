/**
 * A connector's `connLastPoll` (when it was last polled) and `connLastOk` (when the device last
 * answered), read over HTTP from a real Hayloft polling a real Modbus TCP slave (Debian's
 * pymodbus): both move while the device answers; when it falls silent only connLastPoll moves,
 * so a dead device shows when it last answered; clients cannot set them.
 */
import t from 'tap';
import { HDateTime, type HDict, HNumber, HRef, HUri } from '../../src/haystack/values.js';
import { startApp } from '../helpers/app.js';
import { connClient, recordMaker, until } from '../helpers/conn-http.js';
import { failed, ok } from '../helpers/his.js';
import { ModbusSlave, peersMissing } from '../helpers/modbus-slave.js';

const skip = peersMissing();
if (skip !== null) {
  t.comment(`SKIP connector poll times: ${skip}`);
  t.pass('skipped: ' + skip);
} else {
  t.test('connLastPoll and connLastOk over HTTP', async (t) => {
    const slave = await ModbusSlave.tcp({ units: [1], size: 10, hr: { 0: [215] } });
    t.teardown(() => slave.kill());
    const r = await startApp(t);
    const admin = connClient(r);
    const recs = recordMaker('modbus', 'ahu', 'plc');
    ok(
      t,
      await admin.post('createRec', [
        ...recs.equipAndConn({ uri: new HUri(`modbus-tcp://127.0.0.1:${slave.port}`), modbusSlave: new HNumber(1), pollTime: new HNumber(250, 'ms'), timeout: new HNumber(300, 'ms') }),
        recs.point('temp', 'holding:0'),
      ]),
      'a connector and a point',
    );
    const ms = (rec: HDict, tag: string): number => {
      const v = rec.get(tag);
      if (!(v instanceof HDateTime)) throw new Error(`${tag} is not a DateTime: ${String(v)}`);
      return v.epochMs;
    };
    const first = await admin.when('plc', 'connStatus', 'ok');
    t.type(first.get('connLastPoll'), HDateTime, 'connLastPoll is a DateTime');
    t.equal(ms(first, 'connLastOk'), ms(first, 'connLastPoll'), 'while the device answers, both are the last poll');
    const later = await until('a later poll', async () => {
      const x = await admin.rec('plc');
      return ms(x, 'connLastPoll') > ms(first, 'connLastPoll') ? x : undefined;
    });
    t.equal(ms(later, 'connLastOk'), ms(later, 'connLastPoll'), 'both move with every answered poll');

    await slave.mute(1);
    const down = await admin.when('plc', 'connStatus', 'down');
    const lastOk = ms(down, 'connLastOk');
    t.ok(ms(down, 'connLastPoll') > lastOk, 'down: connLastPoll moves on, connLastOk stays at the last answer');
    const still = await until('another poll of the silent device', async () => {
      const x = await admin.rec('plc');
      return ms(x, 'connLastPoll') > ms(down, 'connLastPoll') ? x : undefined;
    });
    t.equal(ms(still, 'connLastOk'), lastOk, 'connLastOk does not move while the device is silent');

    failed(t, await admin.post('updateRec', { id: HRef.of('plc'), connLastOk: down.get('connLastPoll') as HDateTime }), 400, 'HL_LIVE_TAG', /connLastOk/, 'a client cannot set it');
  });
}
