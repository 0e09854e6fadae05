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
    'records.batch': ['auth', 'writer'],
    'records.committed': ['auth', 'history-follows-points', 'writer', 'watches', 'driver-loader', 'poller'],
    'live.changed': ['watches'],
    'write.effective': ['WriteQueue'],
  });
  t.ok(wiring['his.written']?.includes('PointState') === true || wiring['his.written']?.includes('points') === true, 'point state hears history writes itself');
  const started = r.logs.map((l) => JSON.parse(l) as { msg?: string; parts?: string[] }).find((l) => l.msg === 'parts started, and who listens to what');
  t.same(started?.parts?.slice(0, 4), ['store', 'clock', 'auth', 'history'], 'the start order is logged');
  await r.stop();
  t.same(r.app.wiring(), {}, 'every part left the bus');
});
