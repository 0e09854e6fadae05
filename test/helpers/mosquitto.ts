/**
 * A real MQTT broker for tests: Debian's mosquitto (scripts/test-deps.sh installs it) on a free
 * loopback port, with a password file, optionally TLS with a CA and server certificate made here
 * by openssl; it can be stopped and started again on the same port. And a Sparkplug subscriber
 * that decodes every message with Eclipse Tahu's schema (the same package the edge node uses,
 * but through its decoder: what the broker carried, not what the node meant to send).
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import mqtt, { type MqttClient } from 'mqtt';
import type { Test } from 'tap';
import { type UPayload, decode, num } from '../../src/sync/mqtt/sparkplug.js';
import { tempDir } from './tmp.js';

export const MOSQUITTO = '/usr/sbin/mosquitto';
export const BROKER_USER = { username: 'edge', password: 'edge-pass-1' };

/** Why the broker tests cannot run here, or null. */
export function brokerMissing(): string | null {
  if (!existsSync(MOSQUITTO)) return 'mosquitto is not installed (scripts/test-deps.sh installs it)';
  try {
    execFileSync('openssl', ['version'], { stdio: 'ignore' });
  } catch {
    return 'openssl is not installed';
  }
  return null;
}

export async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

export interface TlsFiles {
  ca: string;
  cert: string;
  key: string;
  clientCert: string;
  clientKey: string;
}

/** A CA, a server certificate for 127.0.0.1 and a client certificate, made by openssl. */
export function makeCerts(dir: string): TlsFiles {
  const f = (n: string): string => path.join(dir, n);
  const ssl = (...args: string[]): void => void execFileSync('openssl', args, { stdio: 'ignore' });
  ssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=Hayloft test CA', '-keyout', f('ca.key'), '-out', f('ca.pem'));
  writeFileSync(f('san.cnf'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\n');
  for (const [name, cn] of [['server', '127.0.0.1'], ['client', 'edge']] as const) {
    ssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', `/CN=${cn}`, '-keyout', f(`${name}.key`), '-out', f(`${name}.csr`));
    ssl('x509', '-req', '-in', f(`${name}.csr`), '-CA', f('ca.pem'), '-CAkey', f('ca.key'), '-CAcreateserial', '-days', '2', '-extfile', f('san.cnf'), '-out', f(`${name}.pem`));
  }
  return { ca: f('ca.pem'), cert: f('server.pem'), key: f('server.key'), clientCert: f('client.pem'), clientKey: f('client.key') };
}

export interface Broker {
  port: number;
  url: string;
  tls: TlsFiles | null;
  start(): Promise<void>;
  /** Stops the broker (SIGTERM) and waits for it to exit. */
  stop(): Promise<void>;
}

async function waitPort(port: number, ms = 10_000): Promise<void> {
  const until = Date.now() + ms;
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const s = net.connect(port, '127.0.0.1');
      s.once('connect', () => {
        s.destroy();
        resolve(true);
      });
      s.once('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > until) throw new Error(`mosquitto did not listen on ${port}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Starts mosquitto with a password file (BROKER_USER), and TLS (client certificates required) when asked. */
export async function startBroker(t: Test, opts: { tls?: boolean } = {}): Promise<Broker> {
  const dir = tempDir(t, 'hayloft-mosquitto-');
  const port = await freePort();
  const passwd = path.join(dir, 'passwd');
  writeFileSync(passwd, '');
  execFileSync('mosquitto_passwd', ['-b', passwd, BROKER_USER.username, BROKER_USER.password], { stdio: 'ignore' });
  const tls = opts.tls === true ? makeCerts(dir) : null;
  const lines = [`listener ${port} 127.0.0.1`, 'allow_anonymous false', `password_file ${passwd}`, 'persistence true', `persistence_location ${dir}/`, 'autosave_interval 0', 'max_queued_messages 0', 'log_dest stderr', 'log_type error', 'log_type warning'];
  // Run as root, mosquitto drops to the user `mosquitto`, which cannot read this private folder.
  if (process.getuid?.() === 0) lines.push('user root');
  if (tls !== null) lines.push(`cafile ${tls.ca}`, `certfile ${tls.cert}`, `keyfile ${tls.key}`, 'require_certificate true');
  const conf = path.join(dir, 'mosquitto.conf');
  writeFileSync(conf, lines.join('\n') + '\n');
  let proc: ChildProcess | null = null;
  const b: Broker = {
    port,
    url: `${tls === null ? 'mqtt' : 'mqtts'}://127.0.0.1:${port}`,
    tls,
    async start() {
      if (proc !== null) return;
      const p = spawn(MOSQUITTO, ['-c', conf], { stdio: ['ignore', 'ignore', 'pipe'] });
      proc = p;
      p.stderr?.on('data', () => undefined);
      p.on('exit', () => {
        if (proc === p) proc = null;
      });
      await waitPort(port);
    },
    async stop() {
      const p = proc;
      if (p === null) return;
      proc = null;
      const gone = new Promise((r) => p.once('exit', r));
      p.kill('SIGTERM');
      await gone;
    },
  };
  await b.start();
  t.teardown(() => b.stop());
  return b;
}

export interface Seen {
  topic: string;
  type: string;
  device: string | undefined;
  payload: UPayload;
  /** Receive time (ms). */
  at: number;
}

/** A Sparkplug host-like subscriber: every message on spBv1.0/#, decoded. */
export class SparkplugSubscriber {
  readonly seen: Seen[] = [];
  readonly client: MqttClient;
  /** Topic and bytes of every message taken, to know the broker's redeliveries again. */
  private readonly taken = new Set<string>();
  private constructor(client: MqttClient) {
    this.client = client;
    client.on('message', (topic, payload, packet) => {
      // QoS 1 is at least once: a message whose PUBACK the broker did not get before it stopped is
      // delivered again after its restart, marked DUP. A host application drops those; so does
      // this one (only those: the same bytes published twice by the edge node still count twice).
      const key = `${topic}\0${payload.toString('base64')}`;
      if (packet.dup && this.taken.has(key)) return;
      this.taken.add(key);
      const parts = topic.split('/');
      let decoded: UPayload;
      try {
        decoded = parts[1] === 'STATE' ? (JSON.parse(payload.toString()) as UPayload) : decode(payload);
      } catch (e) {
        decoded = { metrics: [], body: (e as Error).message } as unknown as UPayload;
      }
      this.seen.push({ topic, type: parts[2] ?? '', device: parts[4], payload: decoded, at: Date.now() });
    });
  }

  static async connect(t: Test, broker: Broker, extra: mqtt.IClientOptions = {}): Promise<SparkplugSubscriber> {
    // A persistent session (the broker keeps it across its own restart): messages published while
    // this subscriber is away (the broker back before it) are delivered when it is back, as a
    // host application with a persistent session gets them.
    const opts: mqtt.IClientOptions = { ...BROKER_USER, reconnectPeriod: 200, clean: false, clientId: `sub-${Math.random().toString(36).slice(2)}`, ...extra };
    if (broker.tls !== null) Object.assign(opts, { ca: readFileSync(broker.tls.ca), cert: readFileSync(broker.tls.clientCert), key: readFileSync(broker.tls.clientKey) });
    const client = await mqtt.connectAsync(broker.url, opts);
    const s = new SparkplugSubscriber(client);
    await client.subscribeAsync('spBv1.0/#', { qos: 1 });
    t.teardown(() => client.endAsync(true));
    return s;
  }

  of(type: string): Seen[] {
    return this.seen.filter((m) => m.type === type);
  }

  seq(m: Seen): number | undefined {
    return m.payload.seq === undefined || m.payload.seq === null ? undefined : num(m.payload.seq);
  }
}
