/**
 * Alarm notifications by webhook (src/alarm/notifier.ts, docs/alarms.md "Notifications"), on the
 * real App with a real HTTP receiver on 127.0.0.1: a receiver that is down for a while and comes
 * back gets every transition once, in order (nothing lost, nothing twice, also across a restart);
 * a route's filter; a delay that swallows a blip; reminders while unacknowledged.
 */
import { type IncomingMessage, type ServerResponse, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { HNumber, HRef, type HVal, MARKER } from '../../src/haystack/values.js';
import { ManualClock } from '../../src/lib/clock.js';
import { ErrorCodes } from '../../src/lib/errors.js';
import { type Running, startApp } from '../helpers/app.js';
import { expectError, expectOk, gridOf, postGrid } from '../helpers/http.js';

const T0 = Date.UTC(2024, 0, 15, 9, 0, 0);
const MIN = 60_000;

interface Got {
  path: string;
  key: string;
  body: { event: string; alarmId: string; user: string | null; source: { name: string | null } };
}

async function receiver(t: { teardown(f: () => unknown): void }): Promise<{ url: string; got: Got[]; setDown(d: boolean): void }> {
  const got: Got[] = [];
  let down = true;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let text = '';
    req.on('data', (c: Buffer) => (text += c.toString()));
    req.on('end', () => {
      if (down) {
        res.writeHead(503).end('away');
        return;
      }
      got.push({ path: req.url ?? '', key: String(req.headers['idempotency-key']), body: JSON.parse(text) as Got['body'] });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  t.teardown(() => new Promise<void>((ok) => server.close(() => ok())));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, got, setDown: (d) => (down = d) };
}

function post(r: Running, op: string, rows: Readonly<Record<string, HVal>> | readonly Readonly<Record<string, HVal>>[]) {
  return postGrid(r.base, op, gridOf(rows), { headers: { authorization: `Bearer ${r.token}` } });
}

const n = (v: number): HNumber => HNumber.of(v);
const seen = (got: Got[], path: string): string[] => got.filter((g) => g.path === path).map((g) => `${g.body.event} ${g.body.source.name ?? ''}`);

t.test('a receiver down for a while: every transition once, in order, after it is back and across a restart; filter; reminders', async (t) => {
  const rx = await receiver(t);
  const clock = new ManualClock(T0);
  const r = await startApp(t, { clock });
  expectOk(
    t,
    await post(r, 'createRec', [
      { id: HRef.of('s1'), site: MARKER, name: 'hq' },
      { id: HRef.of('s2'), site: MARKER, name: 'north' },
      { id: HRef.of('p1'), point: MARKER, cur: MARKER, kind: 'Number', name: 'p1', siteRef: HRef.of('s1') },
      { id: HRef.of('p2'), point: MARKER, cur: MARKER, kind: 'Number', name: 'p2', siteRef: HRef.of('s1') },
      { id: HRef.of('np'), point: MARKER, cur: MARKER, kind: 'Number', name: 'np', siteRef: HRef.of('s2') },
      { id: HRef.of('hi'), alarmCond: MARKER, name: 'hi', alarmOn: 'limit', filter: 'point', hiLimit: n(10) },
      { id: HRef.of('route'), notifyRoute: MARKER, name: 'ops', webhook: `${rx.url}/hq`, filter: 'siteRef==@s1', remind: HNumber.of(30, 'min') },
    ]),
    'points, a condition, a route for hq',
  );
  expectError(t, await post(r, 'createRec', { notifyRoute: MARKER, name: 'bad', webhook: 'ftp://x' }), 400, ErrorCodes.INVALID_RECORD, /http/, 'a route that is not http');
  const set = async (id: string, v: number): Promise<void> => {
    r.app.points.setCur(id, { curVal: n(v), curStatus: 'ok' });
    await r.app.alarms.settled();
  };
  await set('p1', 11);
  await r.app.notifier.tick();
  t.same(rx.got, [], 'the receiver is down: nothing taken');
  await set('p1', 5);
  await set('p2', 12);
  await set('np', 20);
  expectOk(t, await post(r, 'alarmAck', { alarmId: 'hi|p1', note: 'fixed' }), 'ack p1');
  clock.advance(MIN);
  await r.app.notifier.tick();
  t.same(rx.got, [], 'still down');
  rx.setDown(false);
  clock.advance(10 * MIN);
  await r.app.notifier.tick();
  t.same(seen(rx.got, '/hq'), ['active hq.p1', 'normal hq.p1', 'active hq.p2', 'ack hq.p1'], 'everything, in order, once it is back; north\'s np filtered out');
  t.equal(rx.got[3]?.body.user, 'admin@example.com');
  t.equal(new Set(rx.got.map((g) => g.key)).size, rx.got.length, 'an idempotency key each');
  await r.app.notifier.tick();
  t.equal(rx.got.length, 4, 'nothing sent twice');

  await r.restart();
  await r.app.notifier.tick();
  t.equal(rx.got.length, 4, 'nor after a restart');

  clock.advance(29 * MIN);
  await r.app.notifier.tick();
  t.equal(rx.got.length, 4, 'no reminder before 30 minutes');
  clock.advance(2 * MIN);
  await r.app.notifier.tick();
  t.same(seen(rx.got, '/hq').slice(4), ['remind hq.p2'], 'a reminder for p2, active and unacknowledged');
  expectOk(t, await post(r, 'alarmAck', { alarmId: 'hi|p2' }), 'ack p2');
  clock.advance(31 * MIN);
  await r.app.notifier.tick();
  t.same(seen(rx.got, '/hq').slice(5), ['ack hq.p2'], 'no reminder once acknowledged');
});

t.test('a delay: a blip is not announced, an alarm that lasts is, once the delay has passed', async (t) => {
  const rx = await receiver(t);
  rx.setDown(false);
  const clock = new ManualClock(T0);
  const r = await startApp(t, { clock });
  expectOk(
    t,
    await post(r, 'createRec', [
      { id: HRef.of('p1'), point: MARKER, cur: MARKER, kind: 'Number', name: 'p1' },
      { id: HRef.of('hi'), alarmCond: MARKER, name: 'hi', alarmOn: 'limit', pointRef: HRef.of('p1'), hiLimit: n(10) },
      { id: HRef.of('route'), notifyRoute: MARKER, name: 'mail', webhook: `${rx.url}/late`, delay: HNumber.of(5, 'min') },
    ]),
    'a route with a delay',
  );
  const set = async (v: number): Promise<void> => {
    r.app.points.setCur('p1', { curVal: n(v), curStatus: 'ok' });
    await r.app.alarms.settled();
  };
  await set(11);
  clock.advance(2 * MIN);
  await set(5);
  clock.advance(4 * MIN);
  await r.app.notifier.tick();
  t.same(seen(rx.got, '/late'), [], 'active for two minutes: nothing');
  await set(12);
  clock.advance(4 * MIN);
  await r.app.notifier.tick();
  t.same(seen(rx.got, '/late'), [], 'four minutes into the next one: waiting');
  clock.advance(MIN);
  await r.app.notifier.tick();
  t.same(seen(rx.got, '/late'), ['active p1'], 'five minutes: announced');
});
