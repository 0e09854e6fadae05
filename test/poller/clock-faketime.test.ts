/**
 * Clock steps end to end (issue 28, "Clock"; docs/clock.md): `hayloft serve` as its own process
 * under libfaketime (Debian's `faketime`), its wall clock read from a file the test rewrites while
 * it runs (FAKETIME_TIMESTAMP_FILE, FAKETIME_NO_CACHE); the monotonic clock is left alone
 * (FAKETIME_DONT_FAKE_MONOTONIC), as NTP leaves it. It polls a real Modbus slave (pymodbus).
 *
 * 1. Booted in 1970 (a Pi without RTC): polling and curVal go on, nothing is stored in 1970,
 *    /api/health says behind-floor.
 * 2. NTP sets the clock: the step is seen, the clock is trusted, the held samples are stored
 *    with their right dates (now, less the time since each was read).
 * 3. The clock steps back an hour: polling goes on (curVal follows the device); the clock is
 *    behind the last good time, so history is held again rather than filed an hour back.
 */
import { existsSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { type HDateTime, type HDict, HNumber, HRef, HUri, MARKER } from '../../src/haystack/values.js';
import { ADMIN, CLIENT, basic, tokenRequest } from '../helpers/app.js';
import { recordMaker, until } from '../helpers/conn-http.js';
import { gridOf, postGrid } from '../helpers/http.js';
import { ModbusSlave, peersMissing } from '../helpers/modbus-slave.js';
import { serveChild } from '../helpers/serve-child.js';
import { tempDir } from '../helpers/tmp.js';

/** Debian's libfaketime (the thread-safe build: Node has threads), in the host's multiarch folder. */
function faketimeLib(): string | undefined {
  const dirs = existsSync('/usr/lib') ? readdirSync('/usr/lib').filter((d) => d.endsWith('-linux-gnu')) : [];
  return [...dirs.map((d) => `/usr/lib/${d}/faketime/libfaketimeMT.so.1`), '/usr/lib/faketime/libfaketimeMT.so.1'].find((f) => existsSync(f));
}
const FAKETIME_LIB = faketimeLib();
const HOUR = 3_600_000;

const skip = FAKETIME_LIB === undefined ? "no libfaketimeMT.so.1: run scripts/test-deps.sh (as root) to install Debian's faketime" : peersMissing();

t.test('a daemon booted in 1970, then set by NTP, then stepped back an hour', { timeout: 120_000, skip: skip ?? false }, async (t) => {
  const slave = await ModbusSlave.tcp({ units: [1], size: 10, hr: { 0: [10] } });
  t.teardown(() => slave.kill());
  const dir = tempDir(t);
  const spec = join(tempDir(t), 'faketime');
  writeFileSync(spec, '@1970-01-02 00:00:00\n');
  const child = await serveChild(t, dir, {
    LD_PRELOAD: FAKETIME_LIB as string,
    FAKETIME_TIMESTAMP_FILE: spec,
    FAKETIME_NO_CACHE: '1',
    FAKETIME_DONT_FAKE_MONOTONIC: '1',
    NO_FAKE_STAT: '1',
    HAYLOFT_CLOCK_SYNC: 'none',
  });
  let auth = child.auth;
  const relogin = async (): Promise<void> => {
    const a = await tokenRequest(child.base, { grant_type: 'password', username: ADMIN.username, password: ADMIN.password }, basic(CLIENT.id, CLIENT.secret));
    t.equal(a.status, 200, 'logged in again');
    auth = { authorization: `Bearer ${String(a.body.access_token)}` };
  };
  type Clock = { trusted: boolean; lastStep?: { ms: number } };
  const health = async (): Promise<{ clockStatus: string; clock: Clock }> => {
    const body = (await (await fetch(`${child.base}/api/health`)).json()) as { clockStatus: string; parts: { clock: Clock } };
    return { clockStatus: body.clockStatus, clock: body.parts.clock };
  };
  const post = async (op: string, rows: Record<string, unknown>[] | Record<string, unknown>, meta = {}): Promise<readonly HDict[]> => {
    const a = await postGrid(child.base, op, gridOf(rows as never, meta), { headers: auth });
    if (a.status !== 200) throw new Error(`${op}: ${a.status} ${a.text}`);
    return a.grid?.rows ?? [];
  };
  const curVal = async (): Promise<number | undefined> => {
    const v = (await post('read', { id: HRef.of('temp') }))[0]?.get('curVal');
    return v instanceof HNumber ? v.val : undefined;
  };
  const follows = async (v: number, what: string): Promise<void> => {
    await slave.set('hr', 0, [v]);
    await until(`curVal ${v} (${what})`, async () => ((await curVal()) === v ? true : undefined));
    t.pass(`curVal follows the device to ${v} (${what})`);
  };
  const history = async (): Promise<{ ts: number; val: number }[]> =>
    (await post('hisRead', { id: HRef.of('temp'), range: '1970-01-01,2100-01-01' })).map((r) => ({ ts: (r.get('ts') as HDateTime).epochMs, val: (r.get('val') as HNumber).val }));

  // 1. Booted in 1970.
  t.equal((await health()).clockStatus, 'behind-floor', 'a clock in 1970 is behind the release: not trusted');
  const recs = recordMaker('modbus', 'ahu', 'plc');
  await post('createRec', [
    ...recs.equipAndConn({ uri: new HUri(`modbus-tcp://127.0.0.1:${slave.port}`), modbusSlave: new HNumber(1), pollTime: new HNumber(250, 'ms') }),
    recs.point('temp', 'holding:0', { his: MARKER, hisCollectCov: MARKER }),
  ]);
  await follows(10, 'in 1970');
  await follows(20, 'in 1970');
  await follows(30, 'in 1970');
  t.same(await history(), [], 'nothing stored while the clock says 1970');

  // 2. NTP sets the clock.
  const before = Date.now();
  writeFileSync(spec, '+0\n');
  await until('the clock trusted', async () => ((await health()).clock.trusted ? true : undefined));
  const h = await health();
  t.equal(h.clockStatus, 'stepped', 'trusted, the step shown');
  t.ok((h.clock.lastStep?.ms ?? 0) > 50 * 365 * 24 * HOUR, `the step logged with its size (${h.clock.lastStep?.ms} ms)`);
  await relogin(); // the token issued in 1970 expired with the step
  await follows(40, 'after NTP');
  const his = await until('the held samples stored', async () => {
    const s = await history();
    return s.length >= 4 ? s : undefined;
  });
  t.same(his.map((s) => s.val), [10, 20, 30, 40], 'every value, in order');
  const after = Date.now();
  t.ok(his.every((s) => s.ts > before - 10 * 60_000 && s.ts <= after + 1000), 'all dated on the set clock (minutes ago at most), none in 1970');
  t.ok(his.every((s, i) => i === 0 || s.ts > (his[i - 1]?.ts ?? 0)), 'in time order: re-dated by the monotonic time since each read');

  // 3. The clock steps back an hour.
  writeFileSync(spec, '-1h\n');
  await until('the step back seen', async () => ((await health()).clock.lastStep?.ms ?? 0) < -HOUR + 60_000 ? true : undefined);
  const back = await health();
  // Behind the last good time; in a checkout edited within the hour, behind the floor as well (its mtime).
  t.notOk(back.clock.trusted, `an hour behind the last good time: not trusted (${back.clockStatus})`);
  t.match(back.clockStatus, /^behind-(last-good|floor)$/);
  await follows(50, 'an hour back');
  await follows(60, 'an hour back');
  t.same((await history()).map((s) => s.val), [10, 20, 30, 40], 'nothing filed an hour back: held');
  const metrics = await (await fetch(`${child.base}/metrics`, { headers: auth })).text();
  t.match(metrics, /hayloft_history_held_samples [1-9]/, 'the held samples are counted');

  child.proc.kill('SIGTERM');
  await child.exited;
});
