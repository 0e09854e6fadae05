/**
 * The `mqtt` section of the configuration: Hayloft as a Sparkplug B edge node publishing to an
 * MQTT broker (src/sync/mqtt). Read like the `uplink` section (src/config/section.ts): every key
 * checked, unknown keys refused, every problem reported with the others as `mqtt.<key>`.
 *
 * Environment overrides exist for what differs between the devices of one fleet (the broker
 * address, the edge node's id, the client id) and for the secrets (password, key passphrase), which
 * an operator keeps out of a config file. TLS material is given as file paths, checked readable
 * here so `hayloft check-config` finds a wrong path before the daemon does.
 */
import { type Parsed, type SectionContext, type SectionKeys, type SectionProblem, bool, decimal, filter, integer, loadSection, readableFile, redactSection, serverUrl, text } from './section.js';

export const DEVICE_BY = ['equip', 'site', 'none'] as const;
export type DeviceBy = (typeof DEVICE_BY)[number];

export interface MqttConfig {
  /** Name of the connector: the key of its cursors in the data folder and its label in status and metrics. */
  readonly name: string;
  /** False pauses publishing without forgetting the cursors. */
  readonly enabled: boolean;
  /** Broker address: mqtt://, mqtts:// (TLS), ws:// or wss:// (websocket, TLS), with a port and, for websockets, a path. */
  readonly url: string;
  readonly username: string | null;
  readonly password: string | null;
  /** MQTT client id; null: `hayloft-<groupId>-<edgeNodeId>`. */
  readonly clientId: string | null;
  /** PEM files for TLS: the CA to trust (null: the system's), and a client certificate with its key. */
  readonly caFile: string | null;
  readonly certFile: string | null;
  readonly keyFile: string | null;
  readonly keyPassphrase: string | null;
  /** False accepts any broker certificate (a test bench only: it gives up what TLS is for). */
  readonly rejectUnauthorized: boolean;
  /** Sparkplug group and edge node ids: topic levels `spBv1.0/<groupId>/<type>/<edgeNodeId>[/<device>]`. */
  readonly groupId: string;
  readonly edgeNodeId: string;
  /** Which points to publish (Haystack filter). */
  readonly filter: string;
  /** How points group into Sparkplug devices: by their equip, their site, or none (one device named after the edge node). */
  readonly deviceBy: DeviceBy;
  /** How often changes (and new history samples) are gathered into DDATA messages, in ms. */
  readonly publishIntervalMs: number;
  /** A Number value is reported when it moved by more than this since the last report (0: any change). */
  readonly deadband: number;
  /** Sparkplug host application whose STATE must be online before anything is published; null: publish at once. */
  readonly primaryHostId: string | null;
  /** MQTT keepalive, in s: how soon a dead link is noticed (the broker sends NDEATH after 1.5x). */
  readonly keepaliveS: number;
  /** First reconnect delay after a failure, doubled per failure up to retryMaxMs, with jitter. */
  readonly retryMinMs: number;
  readonly retryMaxMs: number;
  /** Most historical samples in one DDATA message while draining the backlog. */
  readonly batchSamples: number;
  /** Priority level (1-17) DCMD writes take; null: DCMD writes are refused. */
  readonly writeLevel: number | null;
  /** The Hayloft user whose permissions a DCMD write is checked against (and who is named with the host). */
  readonly writeAs: string | null;
}

export type MqttContext = SectionContext;

const SCHEMES = ['mqtt:', 'mqtts:', 'ws:', 'wss:'];

function url(raw: unknown): Parsed<string> {
  const expected = 'an mqtt://, mqtts://, ws:// or wss:// address of the broker, such as mqtts://broker.example.com:8883';
  const r = serverUrl(raw, SCHEMES, expected, 'username and password');
  if (!('url' in r)) return r;
  const u = r.url;
  if ((u.protocol === 'mqtt:' || u.protocol === 'mqtts:') && u.pathname !== '' && u.pathname !== '/') return { expected: `${expected} (a path only for ws:// and wss://)` };
  return { ok: u.protocol.startsWith('mqtt') ? `${u.protocol}//${u.host}` : u.href };
}

/** Sparkplug ids are topic levels: no `/`, `+` or `#` (and no spaces here, for the operator's sake). */
function sparkplugId(raw: unknown, what: string): Parsed<string> {
  const expected = `${what}: a name without /, +, # or spaces (at most 64 characters)`;
  if (typeof raw !== 'string' || !/^[^/+#\s]{1,64}$/.test(raw.trim())) return { expected };
  return { ok: raw.trim() };
}

const readable = readableFile;

const MINUTE = 60_000;
const DAY = 24 * 60 * MINUTE;

const KEYS: SectionKeys<MqttConfig> = {
  name: {
    default: 'mqtt',
    parse: (raw) => (typeof raw === 'string' && /^[A-Za-z0-9_-]{1,40}$/.test(raw) ? { ok: raw } : { expected: 'a short name of letters, digits, _ or - (at most 40)' }),
  },
  enabled: { default: true, parse: bool },
  url: { env: 'HAYLOFT_MQTT_URL', default: undefined, parse: url },
  username: { env: 'HAYLOFT_MQTT_USERNAME', default: null, parse: (raw) => text(raw, 'the broker user name') },
  password: { env: 'HAYLOFT_MQTT_PASSWORD', default: null, secret: true, parse: (raw) => (typeof raw === 'string' && raw !== '' ? { ok: raw } : { expected: 'the broker password' }) },
  clientId: { env: 'HAYLOFT_MQTT_CLIENT_ID', default: null, parse: (raw) => (typeof raw === 'string' && /^\S{1,64}$/.test(raw.trim()) ? { ok: raw.trim() } : { expected: 'an MQTT client id without spaces (at most 64 characters)' }) },
  caFile: { env: 'HAYLOFT_MQTT_CA_FILE', default: null, parse: (raw) => readable(raw, 'the CA certificates (PEM) the broker is checked against') },
  certFile: { env: 'HAYLOFT_MQTT_CERT_FILE', default: null, parse: (raw) => readable(raw, 'the client certificate (PEM)') },
  keyFile: { env: 'HAYLOFT_MQTT_KEY_FILE', default: null, parse: (raw) => readable(raw, 'the client private key (PEM)') },
  keyPassphrase: { env: 'HAYLOFT_MQTT_KEY_PASSPHRASE', default: null, secret: true, parse: (raw) => (typeof raw === 'string' && raw !== '' ? { ok: raw } : { expected: 'the passphrase of the client key' }) },
  rejectUnauthorized: { default: true, parse: bool },
  groupId: { env: 'HAYLOFT_MQTT_GROUP_ID', default: undefined, parse: (raw) => sparkplugId(raw, 'the Sparkplug group id') },
  edgeNodeId: { env: 'HAYLOFT_MQTT_EDGE_NODE_ID', default: undefined, parse: (raw) => sparkplugId(raw, 'the Sparkplug edge node id') },
  filter: { default: 'point', parse: (raw, ctx) => filter(raw, ctx, 'point or point and siteRef->dis=="HQ"') },
  deviceBy: {
    default: 'equip',
    parse: (raw) => (typeof raw === 'string' && (DEVICE_BY as readonly string[]).includes(raw.trim()) ? { ok: raw.trim() as DeviceBy } : { expected: `one of ${DEVICE_BY.join(', ')}` }),
  },
  publishIntervalMs: { default: 1000, parse: (raw) => integer(raw, 10, DAY) },
  deadband: { default: 0, parse: (raw) => decimal(raw, 1e12) },
  primaryHostId: { env: 'HAYLOFT_MQTT_PRIMARY_HOST_ID', default: null, parse: (raw) => sparkplugId(raw, 'the Sparkplug host id of the primary host application') },
  keepaliveS: { default: 30, parse: (raw) => integer(raw, 1, 3600) },
  retryMinMs: { default: 1000, parse: (raw) => integer(raw, 1, DAY) },
  retryMaxMs: { default: MINUTE, parse: (raw) => integer(raw, 1, DAY) },
  // 1,000 metrics of a Double are about 20 KB: far under any broker's message limit (mosquitto's
  // default is 256 MB, AWS IoT's 128 KB), and few enough that live data is never long behind.
  batchSamples: { default: 1000, parse: (raw) => integer(raw, 1, 100_000) },
  writeLevel: { default: null, parse: (raw) => integer(raw, 1, 17) },
  writeAs: { default: null, parse: (raw) => text(raw, 'the Hayloft user name DCMD writes are checked against') },
};

export const MQTT_KEYS = Object.keys(KEYS) as (keyof MqttConfig)[];

/** The environment variables of the section (for documentation and tests). */
export const MQTT_ENV: readonly string[] = MQTT_KEYS.map((k) => KEYS[k].env).filter((e): e is string => e !== undefined);

/**
 * Reads the section from the file's value and the environment: null when neither sets anything;
 * otherwise every key checked, alone and with the others, or the problems found.
 */
export function loadMqtt(
  raw: unknown,
  file: string | null,
  env: Readonly<Record<string, string | undefined>>,
  ctx: MqttContext = {},
): { value: MqttConfig | null; problems: SectionProblem[] } {
  const section = loadSection('mqtt', KEYS, 'url, groupId, edgeNodeId, ...', raw, file, env, ctx);
  const { problems, source } = section;
  if (section.value === null) return { value: null, problems };
  const out = section.value;
  const has = (k: keyof MqttConfig): boolean => out[k] !== undefined && out[k] !== null;
  const bad = (k: keyof MqttConfig): boolean => problems.some((p) => p.key === `mqtt.${k}`);
  if (!bad('username') && !bad('password') && has('username') !== has('password')) {
    problems.push({ key: has('username') ? 'mqtt.password' : 'mqtt.username', source, expected: 'username and password given together' });
  }
  if (!bad('certFile') && !bad('keyFile') && has('certFile') !== has('keyFile')) {
    problems.push({ key: has('certFile') ? 'mqtt.keyFile' : 'mqtt.certFile', source, expected: 'certFile and keyFile given together (a client certificate and its key)' });
  }
  if (has('keyPassphrase') && !has('keyFile') && !bad('keyFile')) problems.push({ key: 'mqtt.keyPassphrase', source, expected: 'a keyFile it unlocks' });
  if (typeof out.url === 'string' && !/^(mqtts|wss):/.test(out.url)) {
    for (const k of ['caFile', 'certFile', 'keyFile'] as const) {
      if (has(k)) problems.push({ key: `mqtt.${k}`, source, expected: `no TLS files for a plain ${out.url.split(':')[0] ?? ''}:// address (use mqtts:// or wss://)` });
    }
  }
  if (has('writeAs') !== has('writeLevel') && !bad('writeAs') && !bad('writeLevel')) {
    problems.push({ key: has('writeAs') ? 'mqtt.writeLevel' : 'mqtt.writeAs', source, expected: 'writeLevel and writeAs given together (DCMD writes need both; leave both out to refuse them)' });
  }
  if (typeof out.retryMinMs === 'number' && typeof out.retryMaxMs === 'number' && out.retryMaxMs < out.retryMinMs) {
    problems.push({ key: 'mqtt.retryMaxMs', source, expected: `at least retryMinMs (${out.retryMinMs})`, got: String(out.retryMaxMs) });
  }
  if (problems.length > 0) return { value: null, problems };
  return { value: Object.freeze(out as unknown as MqttConfig), problems };
}

/** The section with its secrets masked, for printing (check-config) and logs. */
export function redactMqtt(m: MqttConfig): Record<string, unknown> {
  return redactSection(KEYS, m);
}
