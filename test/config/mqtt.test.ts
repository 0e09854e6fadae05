/**
 * The `mqtt` section of the config file: defaults, every key checked, unknown keys refused, keys
 * checked together (credentials, client certificate and key, TLS files only with TLS, write level
 * and user), environment overrides, secrets never shown, and every problem reported at once.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { loadConfig, redactMqtt } from '../../src/config/index.js';
import { parseFilter } from '../../src/haystack/filter.js';
import { findTimeZone } from '../../src/haystack/tz.js';
import { configFile, problemsOf } from '../helpers/config-file.js';
import { tempDir } from '../helpers/tmp.js';

const zones = { host: () => 'UTC', known: (n: string) => findTimeZone(n) !== undefined };
const checkFilter = (text: string): string | null => {
  try {
    parseFilter(text);
    return null;
  } catch (e) {
    return (e as Error).message;
  }
};
const base = { zones, cwd: '/srv/hayloft', hostname: () => 'pi-42', checkFilter };

const file = configFile;

const minimal = { url: 'mqtt://broker.example.com:1883', groupId: 'Plant1', edgeNodeId: 'pi-42' };

t.test('no section: no edge node', async (t) => {
  t.equal(loadConfig({ ...base, env: {} }).mqtt, null);
});

t.test('a minimal section takes the defaults', async (t) => {
  const c = loadConfig({ ...base, env: { HAYLOFT_CONFIG: file(t, { mqtt: minimal }) } });
  t.same(c.mqtt, {
    name: 'mqtt',
    enabled: true,
    url: 'mqtt://broker.example.com:1883',
    username: null,
    password: null,
    clientId: null,
    caFile: null,
    certFile: null,
    keyFile: null,
    keyPassphrase: null,
    rejectUnauthorized: true,
    groupId: 'Plant1',
    edgeNodeId: 'pi-42',
    filter: 'point',
    deviceBy: 'equip',
    publishIntervalMs: 1000,
    deadband: 0,
    primaryHostId: null,
    keepaliveS: 30,
    retryMinMs: 1000,
    retryMaxMs: 60_000,
    batchSamples: 1000,
    writeLevel: null,
    writeAs: null,
  });
  t.ok(Object.isFrozen(c.mqtt));
});

t.test('TLS files, credentials and secrets from the environment; secrets masked for printing', async (t) => {
  const dir = tempDir(t);
  for (const f of ['ca.pem', 'cert.pem', 'key.pem']) writeFileSync(path.join(dir, f), 'x');
  const f = file(t, { mqtt: { ...minimal, url: 'mqtts://b:8883', caFile: path.join(dir, 'ca.pem'), certFile: path.join(dir, 'cert.pem'), deadband: 0.5, deviceBy: 'site' } }, dir);
  const c = loadConfig({
    ...base,
    env: { HAYLOFT_CONFIG: f, HAYLOFT_MQTT_USERNAME: 'edge', HAYLOFT_MQTT_PASSWORD: 'pw', HAYLOFT_MQTT_KEY_FILE: path.join(dir, 'key.pem'), HAYLOFT_MQTT_KEY_PASSPHRASE: 'pp', HAYLOFT_MQTT_EDGE_NODE_ID: 'pi-43' },
  });
  t.match(c.mqtt, { url: 'mqtts://b:8883', username: 'edge', password: 'pw', keyFile: path.join(dir, 'key.pem'), keyPassphrase: 'pp', edgeNodeId: 'pi-43', deadband: 0.5, deviceBy: 'site' });
  t.match(redactMqtt(c.mqtt!), { password: '(hidden)', keyPassphrase: '(hidden)', username: 'edge' });
});

t.test('websocket addresses keep their path', async (t) => {
  const c = loadConfig({ ...base, env: { HAYLOFT_CONFIG: file(t, { mqtt: { ...minimal, url: 'wss://b.example.com/mqtt' } }) } });
  t.equal(c.mqtt?.url, 'wss://b.example.com/mqtt');
});

t.test('the environment alone can configure it', async (t) => {
  const c = loadConfig({ ...base, env: { HAYLOFT_MQTT_URL: 'mqtt://127.0.0.1:1883', HAYLOFT_MQTT_GROUP_ID: 'G', HAYLOFT_MQTT_EDGE_NODE_ID: 'N' } });
  t.match(c.mqtt, { url: 'mqtt://127.0.0.1:1883', groupId: 'G', edgeNodeId: 'N' });
});

t.test('every problem at once, secrets not shown', async (t) => {
  const p = problemsOf(t, {
    ...base,
    env: {
      HAYLOFT_CONFIG: file(t, {
        mqtt: {
          url: 'http://b',
          groupId: 'a/b',
          edgeNodeId: '#',
          filter: 'point and',
          deviceBy: 'floor',
          publishIntervalMs: 0,
          deadband: -1,
          colour: 'red',
          password: 'hunter2',
          certFile: '/nonexistent/cert.pem',
          retryMinMs: 10,
          retryMaxMs: 5,
          writeLevel: 18,
        },
      }),
    },
  });
  for (const k of ['url', 'groupId', 'edgeNodeId', 'filter', 'deviceBy', 'publishIntervalMs', 'deadband', 'colour', 'username', 'certFile', 'retryMaxMs', 'writeLevel']) t.ok(p.has(`mqtt.${k}`), `mqtt.${k}`);
  t.notOk([...p.values()].some((x) => x.got?.includes('hunter2')), 'the password is not shown');
});

t.test('keys checked together', async (t) => {
  const dir = tempDir(t);
  writeFileSync(path.join(dir, 'ca.pem'), 'x');
  writeFileSync(path.join(dir, 'key.pem'), 'x');
  const p = problemsOf(t, { ...base, env: { HAYLOFT_CONFIG: file(t, { mqtt: { ...minimal, caFile: path.join(dir, 'ca.pem'), keyFile: path.join(dir, 'key.pem'), writeAs: 'ops' } }, dir) } });
  t.match(p.get('mqtt.caFile'), { expected: /no TLS files for a plain mqtt:\/\// });
  t.match(p.get('mqtt.certFile'), { expected: /certFile and keyFile given together/ });
  t.match(p.get('mqtt.writeLevel'), { expected: /writeLevel and writeAs given together/ });
  const q = problemsOf(t, { ...base, env: { HAYLOFT_CONFIG: file(t, { mqtt: {} }) } });
  t.match(q.get('mqtt.url'), { expected: /required; or set HAYLOFT_MQTT_URL/ });
  t.match(q.get('mqtt.groupId'), { expected: /required; or set HAYLOFT_MQTT_GROUP_ID/ });
});

t.test('the uplink and the edge node keep their cursors under different names', async (t) => {
  const up = { url: 'https://c', clientId: 'i', clientSecret: 's', refreshToken: 'r', name: 'mqtt' };
  const p = problemsOf(t, { ...base, env: { HAYLOFT_CONFIG: file(t, { uplink: up, mqtt: minimal }) } });
  t.match(p.get('mqtt.name'), { expected: /other than the uplink's/ });
});
