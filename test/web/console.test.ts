/**
 * The console end to end in a real browser: Debian's chromium driven by playwright-core, against
 * `hayloft serve --demo` as its own process. Logs in, sees the demo's live values change, opens a
 * trend, sees a dead device shown as down, and does the same at phone width. Any browser console
 * error, page error, failed request or unexpected 4xx/5xx answer fails the test. Screenshots of
 * every page at laptop and phone widths go to screenshots/ (docs/console.md keeps the best).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import { type Browser, type BrowserContext, type Page } from 'playwright-core';
import t from 'tap';
import { EngineeringUnits, ObjectType, PropertyIdentifier } from '@bacnet-js/client';
import { ADMIN } from '../helpers/app.js';
import { BacnetDevice, enumerated, freeUdpPort, real, text } from '../helpers/bacnet-device.js';
import { CHROMIUM, jsonApi, jsonGrid, launchChromium } from '../helpers/browser.js';
import { serveChild } from '../helpers/serve-child.js';
import { tempDir } from '../helpers/tmp.js';

const ROOT = new URL('../../', import.meta.url).pathname;
const SHOTS = join(ROOT, 'screenshots');

const skip = existsSync(CHROMIUM) ? false : `no ${CHROMIUM}: run scripts/test-deps.sh (as root) to install Debian's chromium`;
t.test('the console in a browser', { timeout: 150_000, skip }, async (t) => {
  // The console's files come from `npm run build` (dist/web); build them if missing or old.
  execFileSync(process.execPath, ['scripts/build-if-needed.mjs'], { cwd: ROOT, stdio: 'inherit' });
  mkdirSync(SHOTS, { recursive: true });
  // A BACnet device for the discovery page (the simulator answers on a loopback address of its own).
  const device = new BacnetDevice({ address: '127.0.0.2', port: await freeUdpPort('127.0.0.2'), deviceInstance: 1001 });
  device.set(ObjectType.ANALOG_INPUT, 1, real(21.5));
  device.set(ObjectType.ANALOG_INPUT, 1, text('Zone Temp'), PropertyIdentifier.OBJECT_NAME);
  device.set(ObjectType.ANALOG_INPUT, 1, enumerated(EngineeringUnits.DEGREES_CELSIUS), PropertyIdentifier.UNITS);
  device.set(ObjectType.ANALOG_INPUT, 2, real(45));
  device.set(ObjectType.ANALOG_INPUT, 2, text('Zone Humidity'), PropertyIdentifier.OBJECT_NAME);
  device.set(ObjectType.ANALOG_INPUT, 2, enumerated(EngineeringUnits.PERCENT_RELATIVE_HUMIDITY), PropertyIdentifier.UNITS);
  device.set(ObjectType.BINARY_VALUE, 3, enumerated(1));
  device.set(ObjectType.BINARY_VALUE, 3, text('Occupied'), PropertyIdentifier.OBJECT_NAME);
  device.describe('VAV-3 controller', 'Acme Controls', 'AC-100');
  await device.start();
  t.teardown(() => device.stop());
  const bacnetHost = '127.0.0.3';
  const s = await serveChild(t, tempDir(t), { HAYLOFT_BACNET_INTERFACE: bacnetHost, HAYLOFT_BACNET_PORT: String(await freeUdpPort(bacnetHost)) }, ['--demo']);
  const api = jsonApi(s);
  const grid = jsonGrid;

  // A device nobody answers for: a port that was free a moment ago.
  const deadPort = await new Promise<number>((resolve) => {
    const srv = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
  const [dead] = (await api('createRec', grid([{ modbusConn: 'm:', name: 'deadPlc', dis: 'Boiler PLC (unplugged)', uri: `u:modbus-tcp://127.0.0.1:${deadPort}`, modbusSlave: 'n:1', pollTime: 'n:1 s' }]))).rows;
  const [site] = (await api('read', grid([{ id: 'r:demo' }]))).rows;
  await api('createRec', grid([{ equip: 'm:', name: 'boiler', dis: 'Boiler', siteRef: site?.id }]));
  const [boiler] = (await api('read', grid([{ id: 'r:demo.boiler' }]))).rows;
  await api(
    'createRec',
    grid([{ point: 'm:', cur: 'm:', name: 'flowTemp', dis: 'Boiler flow temperature', kind: 's:Number', unit: 's:°C', siteRef: site?.id, equipRef: boiler?.id, modbusConnRef: dead?.id, modbusCur: 's:input:0:int16' }]),
  );
  // Two thousand more points on another site, for the list that renders only what is in view.
  const [wh] = (await api('createRec', grid([{ site: 'm:', name: 'warehouse', dis: 'Warehouse', tz: 's:UTC' }]))).rows;
  const [bulk] = (await api('createRec', grid([{ equip: 'm:', name: 'bulk', dis: 'Bulk sensors', siteRef: wh?.id }]))).rows;
  await api(
    'createRec',
    grid(Array.from({ length: 2000 }, (_, i) => ({ point: 'm:', cur: 'm:', name: `p${String(i).padStart(4, '0')}`, dis: `Sensor ${String(i).padStart(4, '0')}`, kind: 's:Number', siteRef: wh?.id, equipRef: bulk?.id }))),
  );
  // Three hours of one-minute history for the trend (today, in the server's zone: UTC).
  const now = Date.now();
  const start = Math.max(now - 3 * 3_600_000, new Date(new Date(now).toISOString().slice(0, 10)).getTime());
  const rows: Record<string, unknown>[] = [];
  for (let ts = start; ts < now - 60_000; ts += 60_000) rows.push({ ts: `t:${new Date(ts).toISOString().slice(0, 19)}Z UTC`, val: `n:${(22 + 1.5 * Math.sin(ts / 1_800_000)).toFixed(2)} °C` });
  if (rows.length > 0) await api('hisWrite', grid(rows, { id: 'r:demo.ahu1.returnTemp' }));

  // launch() gives chromium a fresh temporary profile (user-data-dir) of its own each time.
  const browser: Browser = await launchChromium();
  t.teardown(() => browser.close());

  /** Problems seen in the page; `allow` names answers a step expects (a validation error). */
  const problems: string[] = [];
  const allow = new Set<string>();
  /** Requests per API path (`/api/watchPoll`: 12), over every page. */
  const requests = new Map<string, number>();
  const count = (path: string): number => requests.get(path) ?? 0;
  /** Console errors a step expects (the refused WebSocket of the fallback step). */
  const allowConsole: RegExp[] = [];
  const watch = (page: Page): void => {
    page.on('console', (m) => {
      // A failed HTTP answer is also logged by chromium; the response handler judges those.
      if (m.type() === 'error' && !m.text().startsWith('Failed to load resource: the server responded') && !allowConsole.some((re) => re.test(m.text()))) problems.push(`console: ${m.text()}`);
    });
    page.on('request', (r) => {
      const path = new URL(r.url()).pathname;
      requests.set(path, count(path) + 1);
    });
    page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
    page.on('requestfailed', (r) => {
      // A watchUnsub cut off by the page closing is not a failure of the console.
      if (!page.isClosed()) problems.push(`request failed: ${r.method()} ${r.url()} ${r.failure()?.errorText ?? ''}`);
    });
    page.on('response', (r) => {
      const path = new URL(r.url()).pathname;
      if (!r.url().startsWith(s.base) && !(s.httpsBase !== undefined && r.url().startsWith(s.httpsBase))) problems.push(`request to another host: ${r.url()}`);
      if (r.status() >= 400 && !allow.has(path)) problems.push(`HTTP ${r.status()}: ${r.request().method()} ${path}`);
    });
  };

  const open = async (width: number, height: number, more: { timezoneId?: string; hasTouch?: boolean; ignoreHTTPSErrors?: boolean } = {}): Promise<{ ctx: BrowserContext; page: Page }> => {
    const ctx = await browser.newContext({ viewport: { width, height }, deviceScaleFactor: 1, ...more });
    const page = await ctx.newPage();
    watch(page);
    return { ctx, page };
  };
  const shot = (page: Page, name: string): Promise<Buffer> => page.screenshot({ path: join(SHOTS, `${name}.png`) });

  /**
   * Logs in as a person does on a fresh profile: the user and password printed at first start,
   * nothing else (the console is a public client: no client id or secret to type or keep).
   */
  const login = async (page: Page, name: string, base = s.base): Promise<void> => {
    const res = await page.goto(`${base}/`);
    t.equal(res?.status(), 200, `the console answers at ${base}/`);
    t.match(res?.headers()['content-security-policy'] ?? '', /script-src 'self'/, 'with a strict CSP');
    t.same(
      await page.locator('form input').evaluateAll((els) => els.map((e) => (e as unknown as { name: string }).name)),
      ['username', 'password'],
      'the login form asks for a user and a password only',
    );
    await page.getByLabel('User').fill(ADMIN.username);
    await page.getByLabel('Password').fill(`${ADMIN.password}-typo`);
    allow.add('/oauth2/token');
    await page.getByRole('button', { name: 'Log in' }).click();
    t.match(await page.getByRole('alert').innerText(), /wrong user name or password/, 'a wrong password is said so');
    allow.delete('/oauth2/token');
    await page.getByLabel('Password').fill(ADMIN.password);
    await shot(page, `${name}-login`);
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.getByRole('link', { name: 'Points' }).waitFor();
    t.same(await page.evaluate('Object.keys(localStorage)'), [], 'nothing kept in the browser beyond the tab');
  };

  // ---- laptop ----
  // Far from the building's zone (UTC): the trend's days must still be the building's.
  const { page } = await open(1280, 800, { timezoneId: 'Pacific/Auckland' });
  const hisReadRanges: string[] = [];
  page.on('request', (r) => {
    if (new URL(r.url()).pathname !== '/api/hisRead') return;
    const range = (JSON.parse(r.postData() ?? '{}') as { rows?: { range?: string }[] }).rows?.[0]?.range;
    if (range !== undefined) hisReadRanges.push(range);
  });
  // The push socket: its URL (no token in it) and the pointData frames it brings.
  const sockets: string[] = [];
  let pushed = 0;
  page.on('websocket', (ws) => {
    sockets.push(ws.url());
    ws.on('framereceived', (f) => {
      if (typeof f.payload === 'string' && f.payload.includes('"pointData"')) pushed++;
    });
  });
  await login(page, 'laptop');
  const supply = page.locator('[data-point="demo.ahu1.supplyTemp"]');
  await supply.locator('.status', { hasText: 'ok' }).waitFor({ timeout: 20_000 });
  await page.locator('[data-live="push"]').waitFor({ timeout: 20_000 });
  const pollsBefore = count('/api/watchPoll');
  const pushedBefore = pushed;
  const first = await supply.locator('[data-val]').innerText();
  t.match(first, /°C$/, `supply temperature shown with its unit: ${first}`);
  // Poll the page (not a timing assertion): the demo device moves its values every read. Wait for
  // a frame after `first` too: one that came just before it may be drawn just after it (the page
  // draws pushed rows in batches), which is a change without a frame counted since.
  let later = first;
  for (let i = 0; i < 40 && (later === first || pushed === pushedBefore); i++) {
    await page.waitForTimeout(500);
    later = await supply.locator('[data-val]').innerText();
  }
  t.not(later, first, `${first} became ${later}`);
  t.pass('the live value changes without reloading');
  t.ok(pushed > pushedBefore, `the change came by push: ${pushed - pushedBefore} pointData frames on the socket`);
  t.equal(count('/api/watchPoll'), pollsBefore, 'no watchPoll while the socket is connected');
  t.ok(sockets.length > 0 && sockets.every((u) => /\/socket\.io\/\?EIO=4&transport=websocket$/.test(new URL(u).pathname + new URL(u).search)), `a WebSocket on /socket.io, no token in its URL: ${sockets.join(' ')}`);
  const flow = page.locator('[data-point="demo.boiler.flowTemp"]');
  await flow.locator('.status', { hasText: 'down' }).waitFor({ timeout: 20_000 });
  t.pass('the point of the dead device shows down');
  t.match(await flow.getAttribute('title'), /./, 'with its curErr on hover');
  await shot(page, 'laptop-points');
  await page.locator('.count', { hasText: '2007 points' }).waitFor();
  const rendered = await page.locator('.vrow').count();
  t.ok(rendered < 100, `of 2,013 rows only those in view are in the page (${rendered})`);
  await page.locator('.vlist').evaluate((el: { scrollTop: number; scrollHeight: number }) => {
    el.scrollTop = el.scrollHeight;
  });
  await page.locator('[data-point="warehouse.bulk.p1999"]').waitFor();
  t.pass('scrolled to the end, the last point is drawn');
  await page.locator('.vlist').evaluate((el: { scrollTop: number }) => {
    el.scrollTop = 0;
  });

  await page.getByLabel('Search').fill('fan');
  // The list draws on the next frame (and after the scroll back to the top lands): wait for it to
  // settle before counting, then count once more so an overshoot still fails.
  for (let i = 0; i < 50 && (await page.locator('a.vrow').count()) !== 3; i++) await page.waitForTimeout(200);
  t.equal(await page.locator('a.vrow').count(), 3, 'text search keeps the three fan points');
  await page.getByLabel('Search').fill('');
  await page.getByLabel('Haystack filter').fill('point and temp');
  await page.getByRole('button', { name: 'Apply' }).click();
  await page.locator('.count', { hasText: '2 points' }).waitFor();
  t.pass('a Haystack filter narrows the list on the server');
  await page.getByLabel('Haystack filter').fill('point');
  await page.getByRole('button', { name: 'Apply' }).click();
  await page.locator('.count', { hasText: '2007 points' }).waitFor();

  await page.locator('[data-point="demo.ahu1.returnTemp"]').click();
  await page.getByRole('heading', { name: 'Return air temperature' }).waitFor();
  await page.locator('.uplot canvas').first().waitFor();
  await page.locator('[data-trend]').waitFor();
  t.match(await page.locator('[data-trend]').innerText(), /^\d+ (samples|averages of 5 min)/, 'the trend of today: raw samples, or 5-minute averages past 12 hours');
  await shot(page, 'laptop-point');
  // Zoomed out over a week: the store's aggregates (GraphQL), not the raw samples.
  const [graphqlBefore, hisReadBefore] = [count('/graphql'), count('/api/hisRead')];
  await page.getByRole('button', { name: 'Last 7 days' }).click();
  await page.locator('[data-trend="aggregate"]', { hasText: 'averages of 30 min with their min and max' }).waitFor();
  const buckets = Number(/^(\d+)/.exec(await page.locator('[data-trend]').innerText())?.[1]);
  t.ok(buckets > 0 && buckets <= 8, `a week as 30-minute buckets: the three hours of samples make ${buckets}`);
  t.ok(count('/graphql') > graphqlBefore && count('/api/hisRead') === hisReadBefore, 'read as aggregates over GraphQL, no raw hisRead');
  await page.locator('.uplot canvas').first().waitFor();
  // Drag across the last few hours of the week (the right edge of the plot): raw samples again.
  const over = await page.locator('.uplot .u-over').boundingBox();
  if (over === null) throw new Error('no plot area');
  await page.mouse.move(over.x + over.width - 50, over.y + over.height / 2);
  await page.mouse.down();
  await page.mouse.move(over.x + over.width - 25, over.y + over.height / 2, { steps: 4 });
  await page.mouse.move(over.x + over.width - 1, over.y + over.height / 2, { steps: 4 });
  await page.mouse.up();
  await page.locator('[data-trend="raw"]', { hasText: 'zoomed in' }).waitFor();
  t.match(await page.locator('[data-trend]').innerText(), /^[1-9]\d* samples/, 'zoomed in to hours: the raw samples');
  t.ok(count('/api/hisRead') > hisReadBefore, 'read with hisRead');
  await shot(page, 'laptop-point-zoom');
  await page.getByRole('button', { name: 'Zoom out' }).click();
  await page.locator('[data-trend="aggregate"]').waitFor();
  t.pass('zoom out: the week in aggregates again');
  // Keyboard: the range buttons are reachable and work with Enter.
  await page.getByRole('button', { name: 'Yesterday' }).focus();
  await page.keyboard.press('Enter');
  await page.getByRole('button', { name: 'Yesterday', pressed: true }).waitFor();
  t.match(await page.locator('[data-zone]').innerText(), /^Days and times in the point's zone: UTC$/, 'the trend says its zone: the point\'s, not the browser\'s (Auckland)');
  const download = page.waitForEvent('download');
  await page.getByRole('button', { name: 'Download CSV' }).click();
  t.match((await download).suggestedFilename(), /^returnTemp-yesterday\.csv$/, 'CSV download');
  const utcMidnight = new Date(new Date().toISOString().slice(0, 10)).getTime();
  const day = (ms: number): string => `${new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z')} UTC`;
  t.equal(hisReadRanges.at(-1), `s:${day(utcMidnight - 86_400_000)},${day(utcMidnight)}`, 'yesterday is the point\'s yesterday (UTC midnight to midnight), not Auckland\'s');

  await page.getByRole('link', { name: 'Connectors' }).click();
  const deadCard = page.locator('[data-conn="deadPlc"]');
  await deadCard.locator('.status', { hasText: 'down' }).first().waitFor({ timeout: 20_000 });
  await page.locator('[data-conn="demoPlc"] .status', { hasText: 'ok' }).first().waitFor();
  t.match(await deadCard.locator('p.err-text').innerText(), /./, 'the dead connector says why');
  await deadCard.locator('.polled', { hasText: 'never answered' }).waitFor();
  t.match(await deadCard.locator('.polled').innerText(), /^Last polled \d+ s ago · never answered$/, 'when it was last polled, and that it never answered');
  const demoPolled = page.locator('[data-conn="demoPlc"] .polled');
  t.match(await demoPolled.innerText(), /^Last polled \d+ s ago$/, 'a connector that answers: its last poll only');
  const lastPoll = Date.parse((await demoPolled.getAttribute('data-last-poll')) ?? '');
  t.ok(Date.now() - lastPoll < 60_000 && lastPoll <= Date.now() + 1000, 'the last poll time is recent');
  await shot(page, 'laptop-connectors');

  await page.getByRole('link', { name: 'System' }).click();
  await page.getByText(/^hayloft \d/i).waitFor();
  await page.locator('.facts dd', { hasText: 'KB' }).or(page.locator('.facts dd', { hasText: 'MB' })).first().waitFor();
  await page.getByRole('cell', { name: ADMIN.username }).waitFor();
  // The clock's state (docs/clock.md), as /api/health says it, with the server's time from about.
  const clockRow = page.locator('.facts dd.clock');
  await clockRow.locator('.status').waitFor();
  const clockHealth = (await (await fetch(`${s.base}/api/health`)).json()) as { clockStatus: string };
  t.equal(await clockRow.getAttribute('data-clock'), clockHealth.clockStatus, 'the System page shows the clock status of /api/health');
  t.match(await clockRow.innerText(), new RegExp(`^${clockHealth.clockStatus}\\s+server time .*\\d{4}`), 'with the server time');
  await shot(page, 'laptop-system');

  await page.getByRole('link', { name: 'Edit' }).click();
  await page.getByLabel('What').selectOption('equip');
  await page.getByLabel('Name', { exact: true }).fill('bad name!');
  allow.add('/api/createRec');
  await page.getByRole('button', { name: 'Create' }).click();
  await page.locator('.field-error').waitFor();
  t.pass('a validation message from the server shows next to the field');
  await shot(page, 'laptop-edit');
  allow.delete('/api/createRec');

  // Override the demo's fan speed: the simulated device follows (its holding register is read
  // back as curVal), and goes back to the default level's value on release.
  await api('pointWrite', grid([{ id: 'r:demo.ahu1.fanSpeed', level: 'n:17', val: 'n:65 %', who: 's:commissioning default' }]));
  await page.getByRole('link', { name: 'Points' }).click();
  await page.locator('[data-point="demo.ahu1.fanSpeed"]').click();
  await page.getByRole('heading', { name: 'Fan speed command' }).waitFor();
  const fanVal = page.locator('.now [data-val]');
  await fanVal.filter({ hasText: '65 %' }).waitFor({ timeout: 20_000 });
  await page.getByLabel(/^Value/).fill('42');
  await page.locator('select[name=level]').selectOption('8');
  await page.getByLabel(/^Duration in minutes/).fill('30');
  await page.getByRole('button', { name: 'Override' }).click();
  await page.locator('tr[data-level="8"]', { hasText: '42 %' }).waitFor();
  t.pass('the priority array shows the override at level 8');
  t.match(await page.locator('tr[data-level="8"]').innerText(), /console/, 'with who wrote it and when it expires');
  await fanVal.filter({ hasText: '42 %' }).waitFor({ timeout: 20_000 });
  t.pass('the simulated device follows the override: curVal 42 %');
  await page.locator('.audit tr', { hasText: '42 %' }).first().waitFor();
  t.pass('the write audit shows it');
  await page.getByLabel(/^Value/).fill('150');
  allow.add('/api/pointWrite');
  await page.getByRole('button', { name: 'Override' }).click();
  const valError = page.locator('label', { hasText: 'Value' }).locator('.field-error');
  await valError.waitFor();
  t.match(await valError.innerText(), /^150% is above the maxVal of demo\.ahu1\.fanSpeed \(100%\)$/, "a value out of range shows the server's message next to the value, naming the point as people know it");
  await page.locator('.audit tr', { hasText: 'HL_OUT_OF_RANGE' }).first().waitFor();
  allow.delete('/api/pointWrite');
  // The whole card: the form with the refused value, the priority array and the audit.
  await page.locator('.writes').screenshot({ path: join(SHOTS, 'laptop-override.png') });
  await page.getByRole('button', { name: 'Release level 8' }).click();
  await page.locator('tr[data-level="8"]', { hasText: '42 %' }).waitFor({ state: 'detached' });
  await fanVal.filter({ hasText: '65 %' }).waitFor({ timeout: 20_000 });
  t.pass('released: the device goes back to the default level, 65 %');

  // Discovery: find the BACnet device, add its connector, learn it, drill into a group, create
  // the ticked objects under the demo's AHU; they appear in the points list with their values.
  await page.getByRole('link', { name: 'Discovery' }).click();
  await page.getByLabel(/^Address/).fill(`127.0.0.2:${device.opts.port}`);
  await page.getByLabel('Wait (s)').fill('1');
  await page.getByRole('button', { name: 'Discover' }).click();
  const found = page.locator('[data-device="1001"]');
  await found.waitFor({ timeout: 20_000 });
  t.match(await found.innerText(), /VAV-3 controller[\s\S]*Acme Controls AC-100/, 'discover lists the device with vendor and model');
  await found.getByRole('button', { name: 'Add connector' }).click();
  await page.getByRole('button', { name: /^Analog inputs/ }).click({ timeout: 20_000 });
  await page.locator('[data-proposal="zoneHumidity"]').waitFor({ timeout: 20_000 });
  t.pass('learn, then a drill into the analog inputs, lists their proposals');
  await page.getByLabel('Create zoneHumidity').uncheck();
  await page.locator('select[name=site]').selectOption({ label: 'Demo Building' });
  await page.locator('select[name=equip]').selectOption({ label: 'AHU 1' });
  await shot(page, 'laptop-discovery');
  await page.getByRole('button', { name: 'Create 1 point', exact: true }).click();
  await page.getByText('Created 1 point: zoneTemp.').waitFor();
  await page.locator('[data-proposal="zoneTemp"] a', { hasText: 'exists' }).waitFor();
  t.pass('the ticked object is created; learn now shows it as existing');
  t.equal(await page.getByLabel('Create zoneHumidity').isChecked(), true, 'the unticked one is still offered');

  // A Modbus register map onto the demo's connector: a bad file lists its bad rows and changes
  // nothing; a good one is learnt at once and its new register created.
  await page.locator('select[name=mapConn]').selectOption({ label: 'Demo PLC (simulated)' });
  await page.locator('input[name=map]').setInputFiles({ name: 'bad.csv', mimeType: 'text/csv', buffer: Buffer.from('name,dis,address\nBad Name,x,holding:0\nspare,Spare,holding:70000\n') });
  allow.add('/api/updateRec');
  await page.getByRole('button', { name: 'Import' }).click();
  await page.locator('.problems li').nth(1).waitFor();
  t.match(await page.locator('.problems').innerText(), /line 2: name "Bad Name"[\s\S]*line 3: /, "the server's bad rows, each with its line");
  allow.delete('/api/updateRec');
  await page.locator('.problems').scrollIntoViewIfNeeded();
  await shot(page, 'laptop-regmap');
  await page.locator('input[name=map]').setInputFiles({ name: 'ahu.csv', mimeType: 'text/csv', buffer: Buffer.from('name,dis,address,kind,unit\nsupplyRaw,Supply raw,input:0:int16,Number,\nspareInput,Spare input,input:5:int16,Number,\n') });
  await page.getByRole('button', { name: 'Import' }).click();
  await page.getByText('ahu.csv attached').waitFor();
  await page.locator('[data-proposal="spareInput"]').waitFor();
  await page.locator('[data-proposal="supplyRaw"] a', { hasText: 'exists' }).waitFor();
  t.pass('the imported map is learnt: a register already polled shows as existing');
  await page.locator('select[name=equip]').selectOption({ label: 'AHU 1' });
  await page.getByRole('button', { name: 'Create 1 point', exact: true }).click();
  await page.getByText('Created 1 point: spareInput.').waitFor();
  await page.getByRole('link', { name: 'See them in the points list' }).click();
  await page.locator('[data-point="demo.ahu1.zoneTemp"] .status', { hasText: 'ok' }).waitFor({ timeout: 20_000 });
  t.match(await page.locator('[data-point="demo.ahu1.zoneTemp"] [data-val]').innerText(), /^21\.50? °C$/, 'the BACnet point shows its value in the tree');
  await page.locator('[data-point="demo.ahu1.spareInput"] .status', { hasText: 'ok' }).waitFor({ timeout: 20_000 });
  t.pass('and the Modbus register too');

  // ---- phone, where the network lets no WebSocket through: values come by watchPoll ----
  // Over HTTPS (the self-signed certificate accepted, as a technician does once): the console's
  // origin there is https://, which the token endpoint must recognise as its own.
  const phone = await open(360, 740, { hasTouch: true, ignoreHTTPSErrors: true });
  allowConsole.push(/WebSocket connection to .*socket\.io.* failed/);
  await phone.ctx.routeWebSocket(/\/socket\.io\//, (ws) => ws.close({ code: 1011, reason: 'blocked by the test' }));
  if (s.httpsBase === undefined) throw new Error('the server did not say its HTTPS port');
  await login(phone.page, 'phone', s.httpsBase);
  const phoneSupply = phone.page.locator('[data-point="demo.ahu1.supplyTemp"]');
  await phoneSupply.locator('.status', { hasText: 'ok' }).waitFor({ timeout: 20_000 });
  await phone.page.locator('[data-live="poll"]').waitFor();
  const polls = count('/api/watchPoll');
  const firstPhone = await phoneSupply.locator('[data-val]').innerText();
  let laterPhone = firstPhone;
  for (let i = 0; i < 40 && laterPhone === firstPhone; i++) {
    await phone.page.waitForTimeout(500);
    laterPhone = await phoneSupply.locator('[data-val]').innerText();
  }
  t.not(laterPhone, firstPhone, `without a socket the value still changes: ${firstPhone} became ${laterPhone}`);
  t.ok(count('/api/watchPoll') > polls, 'by watchPoll');
  await phone.page.locator('[data-point="demo.boiler.flowTemp"] .status', { hasText: 'down' }).waitFor({ timeout: 20_000 });
  /** Every page at phone width: nothing wider than the screen, and its screenshot. */
  const phoneShot = async (name: string): Promise<void> => {
    const overflow = await phone.page.evaluate<number>('document.documentElement.scrollWidth - document.documentElement.clientWidth');
    // What sticks out, named in the failure.
    const wide = await phone.page.evaluate<string[]>(
      "[...document.querySelectorAll('body *')].filter((e) => e.getBoundingClientRect().right > document.documentElement.clientWidth + 1).slice(-5).map((e) => e.tagName + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right))",
    );
    t.equal(overflow, 0, `${name}: nothing wider than a 360 px phone ${wide.join(', ')}`);
    await shot(phone.page, `phone-${name}`);
  };
  await phoneShot('points');
  await phone.page.locator('[data-point="demo.ahu1.returnTemp"]').click();
  await phone.page.locator('[data-trend]').waitFor();
  await phone.page.locator('.uplot canvas').first().waitFor();
  await phone.page.getByRole('heading', { name: 'Trend' }).evaluate((el: { scrollIntoView(o: unknown): void }) => el.scrollIntoView({ block: 'start' }));
  await phoneShot('point');
  // A finger dragged sideways across the trend zooms in, as a mouse drag does.
  const plotArea = await phone.page.locator('.uplot .u-over').boundingBox();
  if (plotArea === null) throw new Error('no plot area on the phone');
  const touch = await phone.ctx.newCDPSession(phone.page);
  const y = plotArea.y + plotArea.height / 2;
  const finger = (x: number): { x: number; y: number }[] => [{ x, y }];
  const hisReadsBefore = count('/api/hisRead');
  // Wait for the stretch's own hisRead, not just for "zoomed in": before noon (UTC, the server's
  // zone) today is short enough to be drawn raw already, so the page says "raw … zoomed in" the
  // moment the drag ends, over the day's samples, before the stretch is even asked for.
  const reread = phone.page.waitForResponse((r) => new URL(r.url()).pathname === '/api/hisRead' && r.request().method() === 'POST');
  await touch.send('Input.dispatchTouchEvent', { type: 'touchStart', touchPoints: finger(plotArea.x + plotArea.width - 60) });
  for (const dx of [50, 40, 30, 20, 10, 2]) await touch.send('Input.dispatchTouchEvent', { type: 'touchMove', touchPoints: finger(plotArea.x + plotArea.width - dx) });
  await touch.send('Input.dispatchTouchEvent', { type: 'touchEnd', touchPoints: [] });
  const res = await reread;
  t.ok(count('/api/hisRead') > hisReadsBefore, 'a touch drag zooms in: the stretch read again, sample by sample');
  // The stretch asked for lies in today (the trend's window) and is only part of it.
  const range = (JSON.parse(res.request().postData() ?? '{}') as { rows?: { range?: string }[] }).rows?.[0]?.range ?? '';
  const [a, b] = range.replace(/^s:/, '').split(',').map((d) => Date.parse(d.replace(/ UTC$/, '')));
  const midnight = b === undefined ? NaN : Date.parse(new Date(b).toISOString().slice(0, 10));
  t.ok(a !== undefined && b !== undefined && midnight <= a && a < b && b <= Date.now() && b - a < (Date.now() - midnight) / 2, `the stretch dragged across, inside today: ${range}`);
  // And the page draws what that read answered.
  const samples = ((await res.json()) as { rows: unknown[] }).rows.length;
  await phone.page.locator('[data-trend="raw"]', { hasText: new RegExp(`^${samples} samples · zoomed in`) }).waitFor();
  t.pass(`the page shows the stretch: ${samples} samples, zoomed in`);
  await phoneShot('point-zoom');
  await phone.page.getByRole('navigation').getByRole('link', { name: 'Points' }).click();
  await phone.page.locator('[data-point="demo.ahu1.fanSpeed"]').click();
  await phone.page.locator('tr[data-level="17"]', { hasText: '65 %' }).waitFor();
  await phone.page.getByRole('heading', { name: 'Override' }).evaluate((el: { scrollIntoView(o: unknown): void }) => el.scrollIntoView({ block: 'start' }));
  await phoneShot('override');
  await phone.page.getByRole('link', { name: 'Connectors' }).click();
  await phone.page.locator('[data-conn="deadPlc"] .status', { hasText: 'down' }).first().waitFor({ timeout: 20_000 });
  await phone.page.locator('[data-conn="deadPlc"] .polled').waitFor();
  await phoneShot('connectors');
  await phone.page.getByRole('link', { name: 'Discovery' }).click();
  await phone.page.getByLabel(/^Address/).fill(`127.0.0.2:${device.opts.port}`);
  await phone.page.getByLabel('Wait (s)').fill('1');
  await phone.page.getByRole('button', { name: 'Discover' }).click();
  await phone.page.locator('[data-device="1001"]').getByRole('button', { name: 'Learn its points' }).click({ timeout: 20_000 });
  await phone.page.getByRole('button', { name: /^Analog inputs/ }).click({ timeout: 20_000 });
  await phone.page.locator('[data-proposal="zoneHumidity"]').waitFor({ timeout: 20_000 });
  await phone.page.getByRole('heading', { name: /^2\. Learn/ }).evaluate((el: { scrollIntoView(o: unknown): void }) => el.scrollIntoView({ block: 'start' }));
  await phoneShot('discovery');
  await phone.page.getByRole('link', { name: 'Edit' }).click();
  await phone.page.getByLabel('Name', { exact: true }).waitFor();
  await phoneShot('edit');
  await phone.page.getByRole('link', { name: 'System' }).click();
  await phone.page.getByRole('cell', { name: ADMIN.username }).waitFor();
  await phoneShot('system');

  // Logout revokes the token: the page goes back to the login form.
  await phone.page.getByRole('button', { name: 'Log out' }).click();
  await phone.page.getByRole('button', { name: 'Log in' }).waitFor();
  t.pass('logout returns to the login form');

  t.same(problems, [], 'no console error, failed request or unexpected error answer');
});
