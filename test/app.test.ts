/**
 * The app as a list of parts on one bus (src/app.ts): every reaction the design lists is wired
 * (docs/design/README.md, "Parts and events"), the wiring is logged at start, and a stopped app
 * leaves nothing on the bus.
 */
import t from 'tap';
import { startApp } from './helpers/app.js';

t.test('the parts start, listen on the bus, and leave it when they stop', async (t) => {
  const r = await startApp(t);
  const wiring = r.app.wiring();
  t.match(wiring, {
    'records.batch': ['auth', 'writer', 'alarms', 'schedules', 'alarm-notifier'],
    'records.committed': ['auth', 'history-follows-points', 'writer', 'alarms', 'watches', 'driver-loader', 'poller', 'schedules', 'alarm-notifier'],
    'live.changed': ['alarms', 'watches'],
    'write.effective': ['WriteQueue'],
  });
  t.ok(wiring['his.written']?.includes('PointState') === true || wiring['his.written']?.includes('points') === true, 'point state hears history writes itself');
  const started = r.logs.map((l) => JSON.parse(l) as { msg?: string; parts?: string[] }).find((l) => l.msg === 'parts started, and who listens to what');
  const order = started?.parts ?? [];
  t.equal(order[0], 'store', 'the start order is logged: the store first');
  const before = (a: string, b: string): boolean => order.indexOf(a) >= 0 && order.indexOf(a) < order.indexOf(b);
  t.ok(before('clock', 'auth') && before('clock', 'history'), 'the clock\'s trust before anything dates what it stores');
  t.ok(before('history', 'points') && before('points', 'poller') && before('poller', 'http'), `in dependency order: ${order.join(', ')}`);
  await r.stop();
  t.same(r.app.wiring(), {}, 'every part left the bus');
});
