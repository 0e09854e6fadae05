/**
 * Demo mode end to end: the simulated device, polled by the real Modbus driver and poller, shows
 * changing current values and growing history through HTTP.
 */
import t from 'tap';
import { DemoDevice, seedDemo } from '../src/demo.js';
import { HDict, HNumber, HRef } from '../src/haystack/values.js';
import { systemClock } from '../src/lib/clock.js';
import { startApp } from './helpers/app.js';
import { getGrid, gridOf, postGrid } from './helpers/http.js';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

t.test('the demo site polls its simulated device: curVal changes, history grows', async (t) => {
  const s = await startApp(t);
  const device = await DemoDevice.start(systemClock);
  t.teardown(() => device.stop());
  await seedDemo(s.app.model, device, { tz: 'Sydney', pollTime: new HNumber(300, 'ms'), collect: new HNumber(1, 's') });
  const read = async (name: string): Promise<HDict> => {
    const a = await getGrid(s.base, 'read', { id: new HRef(`demo.ahu1.${name}`) }, { headers: s.auth });
    return a.grid?.first() ?? HDict.EMPTY;
  };
  let supply = await read('supplyTemp');
  for (let i = 0; i < 50 && supply.get('curStatus') !== 'ok'; i++) {
    await sleep(100);
    supply = await read('supplyTemp');
  }
  t.equal(supply.get('curStatus'), 'ok', 'the point reads ok');
  const v1 = supply.get('curVal') as HNumber;
  t.equal(v1.unit, '°C');
  t.ok(v1.val > 10 && v1.val < 22, `a plausible supply temperature: ${v1.val}`);
  const fan = await read('fanRunning');
  t.equal(fan.get('curVal'), true, 'a coil reads as Bool');
  t.ok((await read('fanPower')).get('curVal') instanceof HNumber, 'a float32 reads');
  const values = new Set<number>();
  for (let i = 0; i < 40 && values.size < 2; i++) {
    await sleep(150);
    values.add(((await read('supplyTemp')).get('curVal') as HNumber).val);
  }
  t.ok(values.size >= 2, 'curVal changes');
  let size = 0;
  for (let i = 0; i < 60 && size < 2; i++) {
    await sleep(200);
    const h = await getGrid(s.base, 'hisRead', { id: new HRef('demo.ahu1.supplyTemp'), range: 'today' }, { headers: s.auth });
    size = h.grid?.size ?? 0;
  }
  t.ok(size >= 2, `history grows (${size} samples)`);
  // The fan speed command is writable: a pointWrite moves the simulated fan, read back by polling.
  const w = await postGrid(s.base, 'pointWrite', gridOf({ id: new HRef('demo.ahu1.fanSpeed'), level: new HNumber(8), val: new HNumber(40, '%'), who: 'demo test' }), { headers: s.auth });
  t.equal(w.status, 200, 'pointWrite of fanSpeed');
  let speed = await read('fanSpeed');
  for (let i = 0; i < 60 && !((speed.get('curVal') as HNumber | undefined)?.val === 40 && speed.get('writeStatus') === 'ok'); i++) {
    await sleep(200);
    speed = await read('fanSpeed');
  }
  t.same(speed.get('curVal'), new HNumber(40, '%'), 'the device took 40 % and reads it back');
  t.equal(speed.get('writeStatus'), 'ok');
  t.same(speed.get('writeLevel'), new HNumber(8));
  // /metrics counts reads, failures and read time per connector.
  const m = await fetch(`${s.base}/metrics`, { headers: s.auth });
  const text = await m.text();
  t.equal(m.status, 200);
  const reads = /hayloft_connector_reads_total\{connector="demoPlc"\} (\d+)/.exec(text);
  t.ok(reads !== null && Number(reads[1]) > 0, 'reads per connector');
  t.match(text, /hayloft_connector_read_failures_total\{connector="demoPlc"\} 0/, 'failures per connector');
  const secs = /hayloft_connector_read_seconds_total\{connector="demoPlc"\} ([\d.e-]+)/.exec(text);
  t.ok(secs !== null && Number(secs[1]) > 0, 'read time per connector');
  t.match(text, /^hayloft_connectors\{connStatus="ok"\} 1$/m, 'connectors by connStatus: the one polled is ok');
  // A second --demo start keeps the site and points the connector at the new port.
  const again = await DemoDevice.start(systemClock);
  t.teardown(() => again.stop());
  await seedDemo(s.app.model, again, { tz: 'Sydney' });
  t.equal(s.app.model.query('site').length, 1, 'the site is not created twice');
  t.match(String(s.app.model.get('demoPlc')?.get('uri')), `:${again.port}`, 'the connector follows the device');
});
