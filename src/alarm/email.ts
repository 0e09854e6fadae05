/**
 * E-mail delivery of alarm notifications over SMTP, with nodemailer (docs/alarms.md "E-mail").
 * The mail server comes from the `smtp` config section (src/config/smtp.ts): smtp:// upgraded
 * with STARTTLS (required unless `requireTls` is false), or smtps:// (TLS from the first byte);
 * the server's certificate is checked (against `caFile` when given). The message is plain text,
 * for a person on call: the subject says the state, priority and point; the body the times (in
 * the point's zone and UTC), the value, who acknowledged and why. Its Message-ID is derived from
 * the notification's id, so a notification sent again after a crash (docs/alarms.md "Store and
 * forward") carries the same Message-ID and mail clients show it once.
 *
 * Nothing is logged by nodemailer (its logger is off): the password is in no log. An error's
 * message (server's reply) is what the notifier logs and shows in health.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import nodemailer from 'nodemailer';
import { type Delivery, type Notice, parseRecipients } from './delivery.js';

/** The `smtp` config section as this module needs it (config/smtp.ts SmtpConfig has this shape). */
export interface SmtpSettings {
  readonly url: string;
  readonly from: string;
  readonly username: string | null;
  readonly password: string | null;
  readonly requireTls: boolean;
  readonly caFile: string | null;
  readonly rejectUnauthorized: boolean;
}

const STATE: Record<string, string> = {
  active: 'ALARM',
  normal: 'back to normal',
  ack: 'acknowledged',
  shelve: 'shelved',
  unshelve: 'unshelved',
  removed: 'removed',
  remind: 'STILL IN ALARM',
};

const DETAIL: Record<string, string> = {
  high: 'above its high limit',
  low: 'below its low limit',
  state: 'in its alarm state',
  status: 'status',
  connDown: 'connector down',
};

function when(ms: number | null, tz: string): string {
  if (ms === null) return 'not known yet (the gateway clock is not trusted)';
  let local: string;
  try {
    local = new Intl.DateTimeFormat('sv-SE', { timeZone: tz, year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit', timeZoneName: 'short' }).format(ms);
  } catch {
    local = new Date(ms).toISOString();
  }
  return `${local} (${new Date(ms).toISOString()})`;
}

/** The subject and text of one notification: what a person on call reads. */
export function compose(n: Notice): { subject: string; text: string } {
  const b = n.body;
  const state = STATE[b.event] ?? b.event;
  const point = b.source.name ?? b.source.dis;
  const subject = `[Hayloft] ${state}: P${b.priority} ${point}: ${b.condition.dis}`;
  const lines = [
    `${b.condition.dis}: ${state}`,
    '',
    `Point:     ${point}${b.source.dis !== point ? ` (${b.source.dis})` : ''}`,
    `Condition: ${b.condition.dis} (${DETAIL[b.detail] ?? b.detail})`,
    `Priority:  ${b.priority} (1 is the most urgent)`,
    `State:     ${state}`,
    `Value:     ${n.valText ?? '-'}`,
    `Time:      ${when(n.tsMs, n.tz)}`,
  ];
  if (b.user !== null) lines.push(`By:        ${b.user}`);
  if (b.note !== null) lines.push(`Note:      ${b.note}`);
  if (n.untilMs !== null) lines.push(`Until:     ${when(n.untilMs, n.tz)}`);
  lines.push('', `Alarm id:        ${b.alarmId}`, `Notification id: ${b.id}`, '', 'Sent by Hayloft. Acknowledge it in the console (Alarms) or with the alarmAck operation.');
  return { subject, text: `${lines.join('\n')}\n` };
}

const TIMEOUT_MS = 10_000;

export function emailDelivery(s: SmtpSettings): Delivery {
  const u = new URL(s.url);
  const secure = u.protocol === 'smtps:';
  const transport = nodemailer.createTransport({
    host: u.hostname.replace(/^\[|\]$/g, ''),
    port: u.port === '' ? (secure ? 465 : 587) : Number(u.port),
    secure,
    requireTLS: !secure && s.requireTls,
    ...(s.username !== null && s.password !== null ? { auth: { user: s.username, pass: s.password } } : {}),
    tls: { rejectUnauthorized: s.rejectUnauthorized, ...(s.caFile !== null ? { ca: readFileSync(s.caFile, 'utf8') } : {}) },
    connectionTimeout: TIMEOUT_MS,
    greetingTimeout: TIMEOUT_MS,
    socketTimeout: 3 * TIMEOUT_MS,
    logger: false,
    debug: false,
  });
  return {
    kind: 'email',
    async send(to, n) {
      const rcpt = parseRecipients(to);
      if (rcpt === null) throw new Error(`not e-mail addresses: ${to}`);
      const { subject, text } = compose(n);
      // A recipient the server refuses while it takes the others is not retried (the others
      // would get it twice); one refusing all of them is an error nodemailer throws (EENVELOPE).
      await transport.sendMail({
        from: s.from,
        to: rcpt,
        subject,
        text,
        messageId: `<${createHash('sha256').update(n.body.id).digest('hex').slice(0, 32)}@hayloft>`,
        headers: { 'X-Hayloft-Notification-Id': n.body.id, 'X-Hayloft-Alarm-Id': n.body.alarmId, 'X-Priority': n.body.priority <= 20 ? '1' : '3' },
      });
    },
    close() {
      transport.close();
      return Promise.resolve();
    },
  };
}
