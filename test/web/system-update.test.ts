/**
 * The console's System page in Debian's chromium (issue 32): the last `hayloft update` (its result
 * and when from /api/health, its versions and why from `about`), and the health status as
 * /api/health says it (`degraded` is not `ok`: here the clock is behind the build, so history is
 * held and health is degraded), with its reasons. A refused update, written while the daemon runs,
 * shows on the next look; a gateway that was never updated says so.
 * Screenshots at laptop (1280) and phone (390) widths.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import t from 'tap';
import { ADMIN, startApp } from '../helpers/app.js';
import { CHROMIUM, launchChromium, loggedInPage, logIn } from '../helpers/browser.js';
import { tempDir } from '../helpers/tmp.js';

const ROOT = new URL('../../', import.meta.url).pathname;
const SHOTS = join(ROOT, 'screenshots');
const skip = existsSync(CHROMIUM) ? false : `no ${CHROMIUM}: run scripts/test-deps.sh (as root) to install Debian's chromium`;
const DAY = 86_400_000;

t.test('the System page shows the last update and a degraded health as degraded', { timeout: 120_000, skip }, async (t) => {
  execFileSync(process.execPath, ['scripts/build-if-needed.mjs'], { cwd: ROOT, stdio: 'inherit' });
  mkdirSync(SHOTS, { recursive: true });
  const stateFile = join(tempDir(t), 'update-state.json');
  const last = {
    result: 'rolled-back',
    from: '0.1.0',
    to: '0.2.0',
    running: '0.1.0',
    at: '2026-11-28T05:00:00.000Z',
    message: 'update to 0.2.0 rolled back: answers 503 unavailable history: HL_STORAGE_FULL; 0.1.0 and its data are back and healthy',
  };
  writeFileSync(stateFile, JSON.stringify(last));
  // The clock is a year behind what the build knows to be past: untrusted, so health is degraded.
  const r = await startApp(t, { updateState: stateFile, clockTrust: { floorMs: Date.now() + 365 * DAY } });
  const health = (await (await fetch(`${r.base}/api/health`)).json()) as { ok: boolean; status: string };
  t.match(health, { ok: true, status: 'degraded' }, '/api/health answers degraded');

  const browser: Browser = await launchChromium();
  t.teardown(() => browser.close());
  const problems: string[] = [];
  const open = async (width: number, height: number): Promise<Page> => {
    const page = await loggedInPage(browser, r.base, ADMIN, width, height, problems);
    await page.getByRole('link', { name: 'System' }).click();
    await page.locator('.last-update .update-message').waitFor();
    return page;
  };

  const page = await open(1280, 900);
  const status = page.locator('dd.health-status');
  t.equal(await status.getAttribute('data-status'), 'degraded');
  t.equal((await status.locator('.status').textContent())?.trim(), 'degraded', 'the Status badge says degraded, not ok');
  t.match(await status.textContent(), /clock .*history is held until the clock is set/, 'and why');
  const upd = page.locator('dd.last-update');
  t.equal(await upd.getAttribute('data-result'), 'rolled-back');
  t.equal((await upd.locator('.status').textContent())?.trim(), 'rolled back', 'the result in words');
  t.match(await upd.locator('.update-versions').textContent(), /0\.1\.0 → 0\.2\.0/, 'the versions, from and to');
  t.match(await upd.locator('.update-message').textContent(), /rolled back: answers 503/, 'why');
  const at = await upd.locator('.update-at').textContent();
  t.equal(at, await page.evaluate((ms) => new Date(ms).toLocaleString(undefined, { timeZone: 'UTC' }), Date.parse(last.at)), 'when (in the server zone)');
  await page.locator('section.system').screenshot({ path: join(SHOTS, 'laptop-system-update.png') });

  const phone = await open(390, 844);
  await phone.locator('section.system .card').first().screenshot({ path: join(SHOTS, 'phone-system-update.png') });
  const box = await phone.locator('.last-update .update-message').boundingBox();
  t.ok(box !== null && box.x + box.width <= 390, 'the message wraps inside a phone screen');

  // A refused update, written while the daemon runs (hayloft update does not restart it then).
  writeFileSync(stateFile, JSON.stringify({ result: 'refused', from: '0.1.0', to: '', running: '0.1.0', at: '2026-11-28T06:00:00.000Z', message: 'update refused: bad signature: hayloft-0.3.0-linux.tar.gz.sig is not a signature of hayloft-0.3.0-linux.tar.gz by the configured key; nothing was changed' }));
  await page.reload();
  await page.getByRole('link', { name: 'System' }).click();
  await page.locator('dd.last-update[data-result="refused"] .update-message').waitFor();
  t.equal((await upd.locator('.status').textContent())?.trim(), 'refused', 'a refused update says so');
  t.equal(await upd.locator('.update-versions').count(), 0, 'no versions when the artifact\'s was not read');
  t.match(await upd.locator('.update-message').textContent(), /bad signature/);
  await page.locator('section.system .card').first().screenshot({ path: join(SHOTS, 'laptop-system-update-refused.png') });

  // A gateway never updated: said so, and an ok health is ok.
  writeFileSync(stateFile, 'not json');
  await r.restart();
  t.equal(((await (await fetch(`${r.base}/api/health`)).json()) as { parts: { update: { lastUpdate: unknown } } }).parts.update.lastUpdate, null);
  const fresh = await browser.newPage();
  await logIn(fresh, r.base, ADMIN);
  await fresh.getByRole('link', { name: 'System' }).click();
  await fresh.locator('dd.last-update').waitFor();
  t.equal(await fresh.locator('dd.last-update').getAttribute('data-result'), 'none');
  t.match(await fresh.locator('dd.last-update').textContent(), /none since this release was installed/);
  t.same(problems, [], 'no page errors, no failed requests');
});
