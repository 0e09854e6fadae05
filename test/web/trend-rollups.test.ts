/**
 * The console's trend after retention (issue 28), in Debian's chromium: a point keeping one day of
 * raw samples has three days of history; after a retention run the week view still draws all three
 * days (GraphQL aggregates read the 15-minute rollups), and a few hours two days ago, where no raw
 * sample is left, draws the rollups instead of "No history". Screenshots at laptop and phone widths.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import t from 'tap';
import { HDateTime, HNumber, HRef, MARKER } from '../../src/haystack/values.js';
import { UTC } from '../../src/haystack/tz.js';
import { ADMIN, startApp } from '../helpers/app.js';
import { CHROMIUM, launchChromium, loggedInPage } from '../helpers/browser.js';
import { hisClient, ok } from '../helpers/his.js';

const ROOT = new URL('../../', import.meta.url).pathname;
const SHOTS = join(ROOT, 'screenshots');
const skip = existsSync(CHROMIUM) ? false : `no ${CHROMIUM}: run scripts/test-deps.sh (as root) to install Debian's chromium`;
const MIN = 60_000;
const HOUR = 3_600_000;
const DAY = 86_400_000;

t.test('the trend reads rollups where retention removed the raw samples', { timeout: 120_000, skip }, async (t) => {
  execFileSync(process.execPath, ['scripts/build-if-needed.mjs'], { cwd: ROOT, stdio: 'inherit' });
  mkdirSync(SHOTS, { recursive: true });
  const r = await startApp(t);
  const admin = hisClient(r);
  ok(
    t,
    await admin.post('createRec', [
      { id: HRef.of('site'), site: MARKER, name: 'site', tz: 'UTC' },
      { id: HRef.of('temp'), point: MARKER, his: MARKER, kind: 'Number', name: 'temp', dis: 'Zone temperature', tz: 'UTC', unit: '°C', siteRef: HRef.of('site'), hisRetention: HNumber.of(1, 'day') },
    ]),
    'a point keeping one day of raw samples',
  );
  // Three days of one-minute samples up to now.
  const end = Math.floor(Date.now() / MIN) * MIN;
  const rows = Array.from({ length: 3 * 1440 }, (_, i) => {
    const ts = end - (3 * 1440 - i) * MIN;
    return [new HDateTime(ts, UTC), HNumber.of(Math.round(220 + 15 * Math.sin(ts / (3 * HOUR))) / 10, '°C')] as const;
  });
  ok(t, await admin.write('temp', rows), 'three days of history');
  await r.app.retention?.runOnce();
  const first = r.app.history.stats('temp').start as number;
  t.ok(first >= end - DAY - 15 * MIN, 'only the last day is left raw');

  const browser: Browser = await launchChromium();
  t.teardown(() => browser.close());
  const problems: string[] = [];
  const open = async (width: number, height: number): Promise<Page> => {
    const page = await loggedInPage(browser, r.base, ADMIN, width, height, problems);
    await page.goto(`${r.base}/#/point/temp`);
    await page.getByRole('heading', { name: 'Zone temperature' }).waitFor();
    return page;
  };

  const page = await open(1280, 800);
  await page.getByRole('button', { name: 'Last 7 days' }).click();
  await page.locator('[data-trend="aggregate"]', { hasText: 'averages of 30 min' }).waitFor();
  const buckets = Number(/^(\d+)/.exec(await page.locator('[data-trend]').innerText())?.[1]);
  t.ok(buckets >= 3 * 48 - 2, `the week draws all three days, the two rolled up too (${buckets} buckets of 30 min)`);
  await page.locator('.uplot canvas').first().waitFor();
  await page.screenshot({ path: join(SHOTS, 'laptop-trend-rollups.png') });

  // Zoom into a few hours two days ago: no raw sample is left there, the rollups are drawn.
  const over = await page.locator('.uplot .u-over').boundingBox();
  if (over === null) throw new Error('no plot area');
  // The week ends now: two days ago is 2/7 of the width from the right edge.
  const x = over.x + over.width * (1 - 2 / 7);
  await page.mouse.move(x, over.y + over.height / 2);
  await page.mouse.down();
  await page.mouse.move(x + 10, over.y + over.height / 2, { steps: 4 });
  await page.mouse.move(x + 20, over.y + over.height / 2, { steps: 4 });
  await page.mouse.up();
  await page.locator('[data-trend="aggregate"]', { hasText: 'averages of 15 min' }).waitFor();
  t.match(await page.locator('[data-trend]').innerText(), /^[1-9]\d* averages of 15 min with their min and max · zoomed in/, 'zoomed in where raw samples are gone: the 15-minute rollups');
  t.equal(await page.getByText('No history in this range.').count(), 0, 'not an empty chart');
  await page.screenshot({ path: join(SHOTS, 'laptop-trend-rollups-zoom.png') });

  const phone = await open(390, 844);
  await phone.getByRole('button', { name: 'Last 7 days' }).click();
  await phone.locator('[data-trend="aggregate"]', { hasText: 'averages of 30 min' }).waitFor();
  await phone.locator('.uplot canvas').first().waitFor();
  const wide = await phone.evaluate<number>('document.documentElement.scrollWidth');
  t.ok(wide <= 390, `nothing wider than the phone (${wide})`);
  await phone.screenshot({ path: join(SHOTS, 'phone-trend-rollups.png') });
  t.same(problems, [], 'no page errors, no failed requests');
});
