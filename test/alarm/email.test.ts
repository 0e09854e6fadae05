/**
 * Alarm notifications by e-mail (src/alarm/email.ts, docs/alarms.md "E-mail"), on the real App
 * with a real SMTP server (smtp-server) on 127.0.0.1 that requires STARTTLS and a login: a server
 * that is away, then refuses the login, then takes mail, gets every transition once, in order
 * (nothing lost, nothing twice, also across a restart); the message is for a person (subject with
 * state, priority and point; body with the value and the time in the point's zone); the password
 * is in no log and in no health report; e-mail routes are refused without an smtp section.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import t from 'tap';
import { SMTPServer } from 'smtp-server';
import { HNumber, HRef, type HVal, MARKER } from '../../src/haystack/values.js';
import { ManualClock } from '../../src/lib/clock.js';
import { ErrorCodes } from '../../src/lib/errors.js';
import { type Running, startApp } from '../helpers/app.js';
import { expectError, expectOk, gridOf, postGrid } from '../helpers/http.js';
import { freePort, makeCerts } from '../helpers/mosquitto.js';
import { tempDir } from '../helpers/tmp.js';

const T0 = Date.UTC(2024, 0, 15, 9, 0, 0);
const MIN = 60_000;
const USER = 'alarms@plant.example.com';
const PASSWORD = 'smtp-secret-pass-77';

interface Mail {
  secure: boolean;
  user: string | undefined;
  from: string;
  to: string[];
  subject: string;
  messageId: string;
  notificationId: string;
  text: string;
}

function missing(): string | null {
  try {
    execFileSync('openssl', ['version'], { stdio: 'ignore' });
    return null;
  } catch {
    return 'openssl is not installed (it makes the test certificates)';
  }
}

/** Headers (unfolded) and the text body of a raw message, quoted-printable decoded. */
function parse(raw: string): { headers: Map<string, string>; text: string } {
  const cut = raw.indexOf('\r\n\r\n');
  const headers = new Map<string, string>();
  for (const line of raw.slice(0, cut).replace(/\r\n[ \t]+/g, ' ').split('\r\n')) {
    const i = line.indexOf(':');
    headers.set(line.slice(0, i).toLowerCase(), line.slice(i + 1).trim());
  }
  let body = raw.slice(cut + 4);
  if (/quoted-printable/i.test(headers.get('content-transfer-encoding') ?? '')) {
    body = Buffer.from(body.replace(/=\r\n/g, '').replace(/=([0-9A-F]{2})/g, (_, h: string) => String.fromCharCode(parseInt(h, 16))), 'latin1').toString('utf8');
  }
  return { headers, text: body.replace(/\r\n/g, '\n') };
}

/** An SMTP server on a fixed port that can be stopped, started again, and made to refuse logins. */
function mailServer(t: { teardown(f: () => unknown): void }, port: number, tls: { cert: string; key: string }) {
  const got: Mail[] = [];
  let server: SMTPServer | null = null;
  let acceptLogin = true;
  const start = async (): Promise<void> => {
    const s = new SMTPServer({
      secure: false,
      key: readFileSync(tls.key),
      cert: readFileSync(tls.cert),
      authMethods: ['PLAIN', 'LOGIN'],
      logger: false,
      onAuth(auth, _session, cb) {
        if (acceptLogin && auth.username === USER && auth.password === PASSWORD) cb(null, { user: auth.username });
        else cb(new Error('Invalid username or password'));
      },
      onData(stream, session, cb) {
        const chunks: Buffer[] = [];
        stream.on('data', (c: Buffer) => chunks.push(c));
        stream.on('end', () => {
          const { headers, text } = parse(Buffer.concat(chunks).toString('latin1'));
          got.push({
            secure: session.secure,
            user: session.user as string | undefined,
            from: session.envelope.mailFrom === false ? '' : session.envelope.mailFrom.address,
            to: session.envelope.rcptTo.map((r) => r.address),
            subject: headers.get('subject') ?? '',
            messageId: headers.get('message-id') ?? '',
            notificationId: headers.get('x-hayloft-notification-id') ?? '',
            text,
          });
          cb();
        });
      },
    });
    await new Promise<void>((ok, fail) => {
      s.once('error', fail);
      s.listen(port, '127.0.0.1', () => ok());
    });
    server = s;
  };
  const stop = async (): Promise<void> => {
    const s = server;
    server = null;
    if (s !== null) await new Promise<void>((ok) => s.close(() => ok()));
  };
  t.teardown(stop);
  return { got, start, stop, refuseLogin: (r: boolean) => (acceptLogin = !r) };
}

function post(r: Running, op: string, rows: Readonly<Record<string, HVal>> | readonly Readonly<Record<string, HVal>>[]) {
  return postGrid(r.base, op, gridOf(rows), { headers: { authorization: `Bearer ${r.token}` } });
}

const n = (v: number, unit?: string): HNumber => HNumber.of(v, unit);

t.test('e-mail over STARTTLS with a login: a server away, then refusing, then back gets every transition once, in order, readable', { skip: missing() ?? false }, async (t) => {
  const certs = makeCerts(tempDir(t));
  const port = await freePort();
  const mx = mailServer(t, port, certs);
  const clock = new ManualClock(T0);
  const env = { HAYLOFT_SMTP_URL: `smtp://127.0.0.1:${port}`, HAYLOFT_SMTP_FROM: 'hayloft@plant.example.com', HAYLOFT_SMTP_USERNAME: USER, HAYLOFT_SMTP_PASSWORD: PASSWORD, HAYLOFT_SMTP_CA_FILE: certs.ca };
  const r = await startApp(t, { clock, env });
  expectOk(
    t,
    await post(r, 'createRec', [
      { id: HRef.of('s1'), site: MARKER, name: 'hq', tz: 'Sydney' },
      { id: HRef.of('p1'), point: MARKER, cur: MARKER, kind: 'Number', name: 'zat', dis: 'Zone air temp', unit: '°C', tz: 'Sydney', siteRef: HRef.of('s1') },
      { id: HRef.of('p2'), point: MARKER, cur: MARKER, kind: 'Number', name: 'rat', unit: '°C', tz: 'Sydney', siteRef: HRef.of('s1') },
      { id: HRef.of('hot'), alarmCond: MARKER, name: 'hot', dis: 'Zone too hot', alarmOn: 'limit', filter: 'point', hiLimit: n(26, '°C'), priority: n(20) },
      { id: HRef.of('route'), notifyRoute: MARKER, name: 'oncall', email: 'ops@example.com, oncall@example.com' },
    ]),
    'points, a condition, an e-mail route',
  );
  expectError(t, await post(r, 'createRec', { notifyRoute: MARKER, name: 'bad', email: 'ops at example' }), 400, ErrorCodes.INVALID_RECORD, /e-mail addresses/, 'a route with no address');
  expectError(t, await post(r, 'createRec', { notifyRoute: MARKER, name: 'two', email: 'a@example.com', webhook: 'http://127.0.0.1:1/' }), 400, ErrorCodes.INVALID_RECORD, /exactly one/, 'a route with two receivers');
  const set = async (id: string, v: number): Promise<void> => {
    r.app.points.setCur(id, { curVal: n(v, '°C'), curStatus: 'ok' });
    await r.app.alarms.settled();
  };

  await set('p1', 27.5);
  await r.app.notifier.tick();
  t.same(mx.got, [], 'the mail server is away: nothing taken');
  const health = JSON.stringify(await r.app.health());
  t.match(health, /email ops@example.com/, 'health names the failing route');
  await set('p1', 22);
  expectOk(t, await post(r, 'alarmAck', { alarmId: 'hot|p1', note: 'door was open' }), 'ack p1');

  await mx.start();
  mx.refuseLogin(true);
  clock.advance(10 * MIN);
  await r.app.notifier.tick();
  t.same(mx.got, [], 'the login refused: nothing taken');

  mx.refuseLogin(false);
  clock.advance(10 * MIN);
  await r.app.notifier.tick();
  t.same(
    mx.got.map((m) => m.subject),
    ['[Hayloft] ALARM: P20 hq.zat: Zone too hot', '[Hayloft] back to normal: P20 hq.zat: Zone too hot', '[Hayloft] acknowledged: P20 hq.zat: Zone too hot'],
    'every transition, in order, once the server takes mail',
  );
  const first = mx.got[0] as Mail;
  t.ok(first.secure, 'the session was upgraded with STARTTLS');
  t.equal(first.user, USER, 'logged in');
  t.equal(first.from, 'hayloft@plant.example.com');
  t.same(first.to, ['ops@example.com', 'oncall@example.com'], 'one message to both recipients');
  t.match(first.text, /Point: +hq\.zat \(Zone air temp\)/, 'the point, by name and display');
  t.match(first.text, /Value: +27\.5°C/, 'the value with its unit');
  t.match(first.text, /Priority: +20/);
  t.match(first.text, /Time: +2024-01-15 20:00:00 .*\(2024-01-15T09:00:00\.000Z\)/, 'the time in the point\'s zone (Sydney, UTC+11) and in UTC');
  const ack = mx.got[2] as Mail;
  t.match(ack.text, /By: +admin@example\.com/, 'who acknowledged');
  t.match(ack.text, /Note: +door was open/, 'and why');
  t.match(ack.text, /Time: +2024-01-15 20:00:00/, 'when');
  t.equal(new Set(mx.got.map((m) => m.messageId)).size, 3, 'a Message-ID each');
  t.equal(new Set(mx.got.map((m) => m.notificationId)).size, 3, 'a notification id each');

  await r.app.notifier.tick();
  t.equal(mx.got.length, 3, 'nothing sent twice');
  await r.restart();
  await r.app.notifier.tick();
  t.equal(mx.got.length, 3, 'nor after a restart');

  await mx.stop();
  await set('p2', 30);
  await r.app.notifier.tick();
  await mx.start();
  clock.advance(10 * MIN);
  await r.app.notifier.tick();
  t.same(mx.got.slice(3).map((m) => m.subject), ['[Hayloft] ALARM: P20 hq.rat: Zone too hot'], 'the alarm raised while the server was away, after it is back');

  const all = r.logs.join('');
  t.match(all, /alarm email: the receiver did not take a notification/, 'the failures were logged');
  t.notOk(all.includes(PASSWORD), 'the password is in no log');
  t.notOk(JSON.stringify(await r.app.health()).includes(PASSWORD), 'nor in health');
});

t.test('e-mail routes need an smtp section', async (t) => {
  const r = await startApp(t);
  expectError(t, await post(r, 'createRec', { notifyRoute: MARKER, name: 'mail', email: 'ops@example.com' }), 400, ErrorCodes.INVALID_RECORD, /smtp section/, 'refused, saying what is missing');
});
