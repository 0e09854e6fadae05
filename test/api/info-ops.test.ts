import t from 'tap';
import type { Op } from '../../src/api/op.js';
import { PRODUCT_NAME, PROTOCOL_VERSION, aboutOp } from '../../src/api/ops/about.js';
import { formatsOp } from '../../src/api/ops/formats.js';
import { infoOps } from '../../src/api/ops/index.js';
import { opsOp } from '../../src/api/ops/ops.js';
import type { HDict} from '../../src/haystack/values.js';
import { HDateTime, HGrid, HUri, MARKER } from '../../src/haystack/values.js';
import { ErrorCodes } from '../../src/lib/errors.js';
import { silentLogger } from '../../src/lib/log.js';
import { ManualClock } from '../../src/lib/clock.js';
import { errOf, getGrid, postGrid } from '../helpers/http.js';
import { BOOT, NOW, fakeCtx, startServer } from '../helpers/api-fixture.js';
import { Gate } from '../../src/auth/gate.js';

const extra: Op = { name: 'read', summary: 'Read records', methods: ['GET', 'POST'], run: () => HGrid.empty() };

t.test('infoOps holds about, ops and formats', async (t) => {
  t.same(
    infoOps.map((o) => o.name),
    ['about', 'ops', 'formats'],
  );
  for (const o of infoOps) t.ok(o.methods.includes('GET'), `${o.name} answers GET`);
});

t.test('about', async (t) => {
  const s = await startServer(t, [...infoOps]);
  for (const accept of ['json', 'zinc'] as const) {
    const a = await getGrid(s.base, 'about', {}, { accept });
    t.equal(a.status, 200);
    const g = a.grid as HGrid;
    t.equal(g.size, 1);
    t.same(g.colNames(), [
      'protocolVersion',
      'tz',
      'serverName',
      'serverTime',
      'serverBootTime',
      'productName',
      'productUri',
      'productVersion',
      'vendorName',
      'vendorUri',
    ]);
    const r = g.first() as HDict;
    t.equal(r.get('protocolVersion'), PROTOCOL_VERSION);
    t.equal(r.get('protocolVersion'), '3.0');
    t.equal(r.get('tz'), 'New_York');
    t.equal(r.get('serverName'), 'test-box');
    const now = r.get('serverTime');
    t.ok(now instanceof HDateTime && now.epochMs === NOW && now.tz.name === 'New_York', 'serverTime from the clock, in the server zone');
    const boot = r.get('serverBootTime');
    t.ok(boot instanceof HDateTime && boot.epochMs === BOOT && boot.tz.name === 'New_York', 'serverBootTime from info');
    t.equal(r.get('productName'), PRODUCT_NAME);
    t.equal(r.get('productName'), 'Hayloft');
    t.equal(r.get('productVersion'), '9.8.7');
    t.ok(r.get('productUri') instanceof HUri);
    t.ok(r.get('vendorUri') instanceof HUri);
    t.type(r.get('vendorName'), 'string');
  }
  s.clock.advance(5000);
  const later = (await getGrid(s.base, 'about')).grid?.first()?.get('serverTime');
  t.equal(later instanceof HDateTime ? later.epochMs : undefined, NOW + 5000, 'serverTime moves with the clock');
  t.equal((await postGrid(s.base, 'about', HGrid.empty())).status, 200, 'POST is accepted too (Haystack clients may POST every op)');
  t.match((await getGrid(s.base, 'about', {}, { headers: { accept: 'text/csv' } })).text, /^protocolVersion,tz,serverName,/);
});

t.test('ops lists the ops given to the server', async (t) => {
  const s = await startServer(t, [...infoOps, extra]);
  const a = await getGrid(s.base, 'ops');
  t.equal(a.status, 200);
  const g = a.grid as HGrid;
  t.same(g.colNames(), ['name', 'summary']);
  t.same(
    g.rows.map((r) => r.get('name')),
    ['about', 'ops', 'formats', 'read'],
  );
  t.equal(g.rows[3]?.get('summary'), 'Read records');
  for (const r of g.rows) t.ok((r.str('summary') ?? '').length > 0, `${r.str('name')} has a summary`);

  // Outside a server there is no list to report.
  const ctx = fakeCtx(new ManualClock(0), silentLogger());
  t.throws(() => opsOp.run({ op: 'ops', method: 'GET', grid: HGrid.empty(), ctx, gate: Gate.OPEN }), { code: ErrorCodes.INTERNAL });
});

t.test('formats lists what is read and written', async (t) => {
  const s = await startServer(t, [...infoOps]);
  const a = await getGrid(s.base, 'formats', {}, { accept: 'zinc' });
  t.equal(a.status, 200);
  const g = a.grid as HGrid;
  t.same(g.colNames(), ['mime', 'read', 'write']);
  const table = g.rows.map((r) => [r.get('mime'), r.get('read') === MARKER, r.get('write') === MARKER]);
  t.same(table, [
    ['text/plain', true, true],
    ['text/zinc', true, true],
    ['text/csv', false, true],
    ['application/json', true, true],
  ]);
  t.equal(formatsOp.name, 'formats');
  t.equal(aboutOp.name, 'about');
});

t.test('unknown op through the real list', async (t) => {
  const s = await startServer(t, [...infoOps]);
  const a = await getGrid(s.base, 'read');
  t.equal(a.status, 404);
  t.equal(errOf(a)?.code, ErrorCodes.UNKNOWN_OP);
});
