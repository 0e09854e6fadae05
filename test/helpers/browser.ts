/**
 * What the console's browser tests share (test/web/*.test.ts): Debian's chromium launched headless
 * by playwright-core, and a JSON client of the server's ops to set things up and read them back.
 */
import { type Browser, type Page, chromium } from 'playwright-core';
import type { Child } from './serve-child.js';

export const CHROMIUM = '/usr/bin/chromium';

/** chromium with a fresh temporary profile (launch() gives each its own user-data-dir). */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
}

/** A page at `width` x `height` in a fresh context, logged in; page errors and 4xx/5xx answers go to `problems`. */
export async function loggedInPage(browser: Browser, base: string, user: { username: string; password: string }, width: number, height: number, problems: string[]): Promise<Page> {
  const ctx = await browser.newContext({ viewport: { width, height }, deviceScaleFactor: 1 });
  const page = await ctx.newPage();
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('response', (res) => {
    if (res.status() >= 400) problems.push(`HTTP ${res.status()}: ${new URL(res.url()).pathname}`);
  });
  await logIn(page, base, user);
  return page;
}

/** A grid in Haystack JSON from rows of already-encoded cells. */
export function jsonGrid(rows: Record<string, unknown>[], meta: Record<string, unknown> = {}): unknown {
  return {
    meta: { ver: '3.0', ...meta },
    cols: [...new Set(rows.flatMap((r) => Object.keys(r)))].map((name) => ({ name })),
    rows,
  };
}

/** POSTs a grid to /api/<op> as the server's administrator; throws on any error answer. */
export function jsonApi(s: Pick<Child, 'base' | 'auth'>): (op: string, body: unknown) => Promise<{ rows: Record<string, unknown>[] }> {
  return async (op, body) => {
    const res = await fetch(`${s.base}/api/${op}`, { method: 'POST', headers: { ...s.auth, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    if (!res.ok) throw new Error(`${op}: ${res.status} ${await res.text()}`);
    return (await res.json()) as { rows: Record<string, unknown>[] };
  };
}

/** Logs into the console as a person does: user and password only (the page holds no client secret). */
export async function logIn(page: Page, base: string, user: { username: string; password: string }): Promise<void> {
  await page.goto(`${base}/`);
  await page.getByLabel('User').fill(user.username);
  await page.getByLabel('Password').fill(user.password);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.getByRole('link', { name: 'Points' }).waitFor();
}
