/**
 * The console's BACnet page in a real browser (Debian's chromium through playwright-core) against
 * `hayloft serve` as its own process with a BACnet device section, both sides registered with a
 * BBMD (test/helpers/bbmd.ts, on loopback addresses): the device, its objects (type, instance,
 * name, present value, status flags, the priority in effect) and a search; each side's BBMD
 * registration (address, TTL, state, last success); a BBMD that starts refusing shown as failed
 * with why, and the System page's status `degraded` with the reason. At 1280 and 390 px;
 * screenshots go to screenshots/. Any console error, page error, failed request or 4xx/5xx
 * answer fails the test.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import t from 'tap';
import { ADMIN } from '../helpers/app.js';
import { freeUdpPort } from '../helpers/bacnet-device.js';
import { TestBbmd } from '../helpers/bbmd.js';
import { CHROMIUM, jsonApi, jsonGrid, launchChromium, logIn } from '../helpers/browser.js';
import { serveChild } from '../helpers/serve-child.js';
import { tempDir } from '../helpers/tmp.js';

const ROOT = new URL('../../', import.meta.url).pathname;
const SHOTS = join(ROOT, 'screenshots');
const BBMD = '127.0.0.20';
const DEVICE = '127.0.0.21';
const CLIENT = '127.0.0.22';

const skip = existsSync(CHROMIUM) ? false : `no ${CHROMIUM}: run scripts/test-deps.sh (as root) to install Debian's chromium`;
t.test('the BACnet page: device, objects, BBMD registrations; a refused registration degrades the System status', { timeout: 150_000, skip }, async (t) => {
  execFileSync(process.execPath, ['scripts/build-if-needed.mjs'], { cwd: ROOT, stdio: 'inherit' });
  mkdirSync(SHOTS, { recursive: true });
  const bbmd = new TestBbmd(BBMD, await freeUdpPort(BBMD));
  await bbmd.start();
  t.teardown(() => bbmd.stop());
  const bbmdAt = `${BBMD}:${bbmd.port}`;
  const port = await freeUdpPort(DEVICE);
  const s = await serveChild(t, tempDir(t), {
    HAYLOFT_BACNET_DEVICE_INSTANCE: '260020',
    HAYLOFT_BACNET_DEVICE_NAME: 'Plant room gateway',
    HAYLOFT_BACNET_DEVICE_INTERFACE: DEVICE,
    HAYLOFT_BACNET_DEVICE_PORT: String(port),
    HAYLOFT_BACNET_DEVICE_BBMD: bbmdAt,
    HAYLOFT_BACNET_DEVICE_BBMD_TTL: '2',
    HAYLOFT_BACNET_INTERFACE: CLIENT,
    HAYLOFT_BACNET_PORT: String(await freeUdpPort(CLIENT)),
    HAYLOFT_BACNET_BBMD: bbmdAt,
    HAYLOFT_BACNET_BBMD_TTL: '60',
  });
  const api = jsonApi(s);
  const grid = jsonGrid;
  const pt = (name: string, tags: Record<string, unknown>): Record<string, unknown> => ({ point: 'm:', name, equipRef: 'r:ahu', siteRef: 'r:site', bacnetExport: 'm:', ...tags });
  await api(
    'createRec',
    grid([
      { id: 'r:site', site: 'm:', name: 'plant', dis: 'Plant room' },
      { id: 'r:ahu', equip: 'm:', name: 'ahu1', siteRef: 'r:site' },
      pt('supplyTemp', { id: 'r:temp', sensor: 'm:', kind: 's:Number', unit: 's:°C' }),
      pt('setpoint', { id: 'r:sp', writable: 'm:', kind: 's:Number', unit: 's:°C' }),
      pt('fanCmd', { id: 'r:fan', writable: 'm:', cmd: 'm:', kind: 's:Bool' }),
      pt('mode', { id: 'r:mode', writable: 'm:', kind: 's:Str', enum: 's:off,low,high' }),
      pt('note', { id: 'r:note', kind: 's:Str' }),
      ...Array.from({ length: 8 }, (_, i) => pt(`meter${i + 1}`, { id: `r:m${i + 1}`, kind: 's:Number', unit: 's:kW' })),
      // A connector keeps the client side's socket open, and so its registration.
      { id: 'r:conn', bacnetConn: 'm:', name: 'remoteVav', uri: 'u:bacnet://127.0.0.23:47808/4401', pollTime: 'n:5 s' },
      { id: 'r:vav', point: 'm:', cur: 'm:', kind: 's:Number', name: 'vavFlow', bacnetConnRef: 'r:conn', bacnetCur: 's:AV1' },
    ]),
  );
  await api('pointWrite', grid([{ id: 'r:sp', level: 'n:8', val: 'n:21.5 °C', who: 's:test' }]));
  await api('pointWrite', grid([{ id: 'r:fan', level: 'n:16', val: true, who: 's:test' }]));
  await api('pointWrite', grid([{ id: 'r:mode', level: 'n:17', val: 's:low', who: 's:test' }]));
  for (let i = 0; i < 100 && !(bbmd.fdt.has(`${DEVICE}:${port}`) && bbmd.registrations.some((x) => x.from.startsWith(`${CLIENT}:`))); i++) await new Promise((r) => setTimeout(r, 200));
  t.ok(bbmd.fdt.has(`${DEVICE}:${port}`), 'the device side registered with the BBMD');

  const browser = await launchChromium();
  t.teardown(() => browser.close());
  const problems: string[] = [];
  const open = async (width: number, height: number): Promise<Page> => {
    const ctx = await browser.newContext({ viewport: { width, height }, deviceScaleFactor: 1 });
    const page = await ctx.newPage();
    page.on('console', (m) => {
      if (m.type() === 'error') problems.push(`console: ${m.text()}`);
    });
    page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
    page.on('requestfailed', (r) => {
      if (!page.isClosed()) problems.push(`request failed: ${r.method()} ${r.url()} ${r.failure()?.errorText ?? ''}`);
    });
    page.on('response', (r) => {
      if (r.status() >= 400) problems.push(`HTTP ${r.status()}: ${r.request().method()} ${new URL(r.url()).pathname}`);
    });
    await logIn(page, s.base, ADMIN);
    return page;
  };
  const fits = async (page: Page, name: string): Promise<void> => {
    const over = await page.evaluate<string[]>(
      '[...document.querySelectorAll("body *")].filter((e) => e.getBoundingClientRect().right > document.documentElement.clientWidth + 1).slice(0, 5).map((e) => e.tagName + "." + e.className)',
    );
    t.same(over, [], `${name}: nothing sticks out of the screen`);
    await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
  };

  // ---- laptop ----
  const page = await open(1280, 800);
  await page.locator('.bar nav a[href="#/bacnet"]').click();
  const objects = page.locator('.bacnet-objects tbody tr');
  await objects.first().waitFor();
  t.equal(await objects.count(), 12, 'one row per exported object (the Str point without an enum left out)');
  const device = page.locator('.card.device');
  t.match(await device.innerText(), /260020\s*·\s*Plant room gateway/, 'the device instance and name');
  t.match(await device.innerText(), new RegExp(`${DEVICE.replace(/\./g, '\\.')}:${port}`), 'its address');
  t.match(await device.innerText(), /12\s*·\s*1 matching point not exported/, 'the object count and the point left out');
  await device.locator('.bbmd-state[data-state="registered"]').waitFor();
  t.match(await device.innerText(), new RegExp(`registered\\s+${bbmdAt.replace(/\./g, '\\.')}`), 'device side: registered with the BBMD, its address');
  t.match(await device.innerText(), /Time-to-live\s+2 s/, 'the TTL');
  t.match(await device.innerText(), /Last registered\s+.*\(\d+ s ago\)/, 'when it last registered');
  const client = page.locator('.card.client');
  await client.locator('.bbmd-state[data-state="registered"]').waitFor();
  t.match(await client.innerText(), /Time-to-live\s+60 s/, 'client side: registered, its TTL');

  const row = (type: string) => page.locator(`.bacnet-objects tr:has(a:text-is("${type}"))`);
  t.match(await row('plant.ahu1.setpoint').innerText(), /analog-value \d+\s*·\s*commandable\s+plant\.ahu1\.setpoint\s+21\.50? °C\s+overridden at 8/, 'a setpoint: type, instance, name, value in its unit, overridden at priority 8');
  t.match(await row('plant.ahu1.fanCmd').innerText(), /binary-output \d+.*active\s+overridden at 16/s, 'a command: active, at 16');
  t.match(await row('plant.ahu1.mode').innerText(), /multi-state-value \d+.*low \(2\)\s+normal/s, 'a mode: its state text and number, at the relinquish default');
  t.match(await row('plant.ahu1.supplyTemp').innerText(), /analog-input \d+\s+plant\.ahu1\.supplyTemp\s+NULL/, 'an input not read yet: NULL');
  await fits(page, 'laptop-bacnet');

  await page.getByLabel('Search objects').fill('meter');
  t.equal(await objects.count(), 8, 'the search narrows the list');
  t.match(await page.locator('.bacnet .count').innerText(), /8 of 12 objects/, 'and says so');
  await row('plant.ahu1.meter3').locator('a').click();
  await page.waitForURL(/#\/point\/m3$/);
  t.pass('a name opens its point');

  // ---- the BBMD refuses: failed with why; the System page says degraded ----
  bbmd.refuse = true;
  await page.locator('.bar nav a[href="#/bacnet"]').click();
  await page.locator('.card.device .bbmd-state[data-state="failed"]').waitFor({ timeout: 20_000 });
  t.match(await page.locator('.card.device').innerText(), /Last attempt\s+the BBMD at .* refused the registration/, 'the reason');
  await page.locator('.bar nav a[href="#/system"]').click();
  const status = page.locator('.health-status[data-status="degraded"]');
  await status.waitFor();
  t.match(await status.innerText(), /degraded\s+bacnet-device: HL_BBMD_UNREGISTERED: the BBMD at .* refused the registration/, 'System: degraded, not ok, with the reason');
  t.equal(await status.locator('.status').getAttribute('class'), 'status s-stale', 'in the colour of a warning');
  await fits(page, 'laptop-system-degraded');

  // ---- phone ----
  const phone = await open(390, 844);
  await phone.locator('.bar nav a[href="#/bacnet"]').click();
  await phone.locator('.bacnet-objects tbody tr').first().waitFor();
  await fits(phone, 'phone-bacnet');
  await phone.screenshot({ path: join(SHOTS, 'phone-bacnet-top.png') });
  await phone.locator('.bar nav a[href="#/system"]').click();
  await phone.locator('.health-status[data-status="degraded"]').waitFor();
  await fits(phone, 'phone-system-degraded');

  t.same(problems, [], 'no console errors, failed requests or error answers');
});
