/**
 * Issue 18: HTTPS on the LAN, with real TLS connections to the real App. By default HTTPS is on
 * with a self-signed certificate made on the first start and kept in the data folder; a
 * configured certificate is served instead; plain HTTP can be turned off; TLS before 1.2 is
 * refused; a certificate renewed on disk is served without a restart.
 */
import { X509Certificate } from 'node:crypto';
import { copyFileSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import tls from 'node:tls';
import t from 'tap';
import { tlsFiles } from '../../src/api/tls.js';
import { App } from '../../src/app.js';
import { loadConfig } from '../../src/config/index.js';
import { findTimeZone } from '../../src/haystack/tz.js';
import { createLogger } from '../../src/lib/log.js';
import { ErrorCodes } from '../../src/lib/errors.js';
import { type Running, basic, CLIENT, ADMIN, startApp } from '../helpers/app.js';
import { tempDir } from '../helpers/tmp.js';
import { until } from '../helpers/api-fixture.js';

/** The served certificate's SHA-256 fingerprint, from a real handshake. */
function servedFingerprint(port: number, opts: tls.ConnectionOptions = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = tls.connect({ host: '127.0.0.1', port, rejectUnauthorized: false, ...opts }, () => {
      const fp = s.getPeerCertificate().fingerprint256;
      s.end();
      resolve(fp);
    });
    s.on('error', reject);
  });
}

/** An HTTPS request trusting exactly `ca`. */
function get(port: number, pathName: string, ca: string, headers: Record<string, string> = {}, method = 'GET', body?: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = https.request({ host: '127.0.0.1', port, path: pathName, method, ca, headers, servername: 'localhost' }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

async function token(r: Running, ca: string): Promise<string> {
  const a = await get(r.app.httpsPort, '/oauth2/token', ca, { authorization: basic(CLIENT.id, CLIENT.secret), 'content-type': 'application/json' }, 'POST', JSON.stringify({ grant_type: 'password', username: ADMIN.username, password: ADMIN.password }));
  t.equal(a.status, 200, 'the token endpoint answers over HTTPS');
  return (JSON.parse(a.text) as { access_token: string }).access_token;
}

t.test('HTTPS by default with a self-signed certificate kept in the data folder', async (t) => {
  const r = await startApp(t);
  t.ok(r.app.httpsPort > 0, 'HTTPS listens');
  t.ok(r.app.port > 0, 'and plain HTTP, as configured');
  const files = r.app.tls;
  t.ok(files?.generated, 'made on the first start');
  t.equal(files?.certPath, path.join(r.dir, 'tls', 'cert.pem'));
  const cert = files?.cert ?? '';
  const fp = new X509Certificate(cert).fingerprint256;
  t.equal(await servedFingerprint(r.app.httpsPort), fp, 'the certificate served is the one kept');
  t.ok(r.logs.some((l) => l.includes(fp) && l.includes('self-signed')), 'its fingerprint is logged');
  const bearer = await token(r, cert);
  const about = await get(r.app.httpsPort, '/api/about', cert, { authorization: `Bearer ${bearer}` });
  t.equal(about.status, 200, 'the same routes as HTTP, with a client that trusts the certificate');
  await t.rejects(servedFingerprint(r.app.httpsPort, { maxVersion: 'TLSv1.1', minVersion: 'TLSv1' }), 'TLS 1.1 is refused');
  t.equal(await servedFingerprint(r.app.httpsPort, { maxVersion: 'TLSv1.2' }), fp, 'TLS 1.2 is accepted');

  await r.restart();
  t.notOk(r.app.tls?.generated, 'a restart keeps the certificate');
  t.equal(await servedFingerprint(r.app.httpsPort), fp);

  // Renewed on disk (certbot, an operator's copy): served to new connections, no restart.
  const other = await tlsFiles({ dataDir: tempDir(t), certFile: null, keyFile: null });
  t.not(other.fingerprint, fp);
  copyFileSync(other.keyPath, path.join(r.dir, 'tls', 'key.pem'));
  copyFileSync(other.certPath, path.join(r.dir, 'tls', 'cert.pem'));
  let now = '';
  t.ok(
    await until(() => {
      servedFingerprint(r.app.httpsPort).then(
        (f) => (now = f),
        () => {},
      );
      return now === other.fingerprint;
    }, 20_000),
    'the new certificate is served without a restart',
  );
  t.ok(r.logs.some((l) => l.includes('TLS certificate reloaded')));
});

t.test('a configured certificate, and plain HTTP turned off', async (t) => {
  const pair = await tlsFiles({ dataDir: tempDir(t), certFile: null, keyFile: null });
  const config = loadConfig({
    env: { HAYLOFT_DATA_DIR: tempDir(t), HAYLOFT_HOST: '127.0.0.1', HAYLOFT_PORT: 'off', HAYLOFT_HTTPS_PORT: '0', HAYLOFT_TZ: 'UTC', HAYLOFT_TLS_CERT: pair.certPath, HAYLOFT_TLS_KEY: pair.keyPath },
    zones: { host: () => 'UTC', known: (n) => findTimeZone(n) !== undefined },
  });
  t.equal(config.port, null, 'port: off');
  const app = await App.start({ config, log: createLogger({ level: 'silent' }), firstRun: { adminUser: ADMIN.username, adminPassword: ADMIN.password, clientId: CLIENT.id, clientSecret: CLIENT.secret } });
  t.teardown(() => app.stop());
  t.equal(app.port, 0, 'no plain HTTP');
  t.equal(await servedFingerprint(app.httpsPort), pair.fingerprint, 'the configured certificate is served');
  t.equal(app.tls?.generated, false);
  const off = loadConfig({ env: { ...{ HAYLOFT_DATA_DIR: tempDir(t), HAYLOFT_PORT: 'off', HAYLOFT_HTTPS_PORT: 'off', HAYLOFT_TZ: 'UTC' } }, zones: { host: () => 'UTC', known: () => true } });
  await t.rejects(App.start({ config: off, log: createLogger({ level: 'silent' }) }), { code: ErrorCodes.BAD_CONFIG, message: /both off/ }, 'both off is refused');
});

t.test('a certificate and key that do not match are a configuration error', async (t) => {
  const a = await tlsFiles({ dataDir: tempDir(t), certFile: null, keyFile: null });
  const b = await tlsFiles({ dataDir: tempDir(t), certFile: null, keyFile: null });
  await t.rejects(tlsFiles({ dataDir: tempDir(t), certFile: a.certPath, keyFile: b.keyPath }), { code: ErrorCodes.BAD_CONFIG, message: /cannot be used/ });
  await t.rejects(tlsFiles({ dataDir: tempDir(t), certFile: a.certPath, keyFile: null }), { code: ErrorCodes.BAD_CONFIG, message: /go together/ });
  const junk = path.join(tempDir(t), 'junk.pem');
  writeFileSync(junk, 'not a certificate');
  await t.rejects(tlsFiles({ dataDir: tempDir(t), certFile: junk, keyFile: a.keyPath }), { code: ErrorCodes.BAD_CONFIG });
});
