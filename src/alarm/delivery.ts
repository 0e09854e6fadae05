/**
 * How a notification leaves the gateway (docs/alarms.md "Notifications"): one interface, one
 * implementation per kind of route (`webhook` here, `email` in email.ts, `mqtt` in mqtt-notify.ts).
 * The notifier (notifier.ts) decides what is sent, when, in what order, and keeps the cursor; a
 * delivery only hands one notification to its receiver and resolves once the receiver took it
 * (2xx, SMTP 250, MQTT PUBACK), or throws: the notifier retries with backoff and sends nothing
 * after it meanwhile.
 */

export const ROUTE_KINDS = ['webhook', 'email', 'mqtt'] as const;
export type RouteKind = (typeof ROUTE_KINDS)[number];

/** The JSON a webhook POSTs and an MQTT message carries (documented in docs/alarms.md). */
export interface NoticeBody {
  id: string;
  event: string;
  alarmId: string;
  ts: string | null;
  condition: { id: string; dis: string };
  source: { id: string; name: string | null; dis: string };
  detail: string;
  priority: number;
  /** Haystack JSON (v3). */
  val: unknown;
  user: string | null;
  note: string | null;
  until: string | null;
}

export interface Notice {
  body: NoticeBody;
  /** For people (e-mail): the value as the console shows it (`27.5°C`), or null. */
  valText: string | null;
  /** For people: the IANA zone times are shown in (the source's `tz`, else the server's). */
  tz: string;
  /** The alarm's times as ms since the epoch (null: not known, or held on an untrusted clock). */
  tsMs: number | null;
  untilMs: number | null;
}

export interface Delivery {
  readonly kind: RouteKind;
  /** Hands one notification to the route's receiver (`target`: URL, addresses or topic); resolves once it is taken. */
  send(target: string, notice: Notice): Promise<void>;
  /** Releases connections (at stop). */
  close?(): Promise<void>;
}

/** The recipients of an `email` tag: addresses separated by commas (or semicolons); null when one is not an address. */
export function parseRecipients(raw: string): string[] | null {
  const list = raw
    .split(/[,;]/)
    .map((s) => s.trim())
    .filter((s) => s !== '');
  if (list.length === 0 || list.length > 50) return null;
  return list.every((a) => /^[^\s@<>,;"]+@[^\s@<>,;"]+$/.test(a)) ? list : null;
}

const SEND_TIMEOUT_MS = 10_000;

/** HTTP webhook: the body POSTed as JSON; any 2xx takes it. */
export const webhookDelivery: Delivery = {
  kind: 'webhook',
  async send(url, n) {
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': n.body.id, 'user-agent': 'Hayloft' },
      body: JSON.stringify(n.body),
      signal: AbortSignal.timeout(SEND_TIMEOUT_MS),
    });
    await res.arrayBuffer().catch(() => undefined);
    if (!res.ok) throw new Error(`${url} answered ${res.status}`);
  },
};
