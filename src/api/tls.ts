/**
 * TLS for the LAN: the certificate and key the HTTPS server serves, from the config (`tlsCert`,
 * `tlsKey`: PEM files) or, when none is given, a self-signed certificate made on the first start
 * and kept in the data folder, so HTTPS works out of the box. Clients pin it by the SHA-256
 * fingerprint printed at start. The files are watched: a renewed certificate is served to new
 * connections without a restart (setSecureContext), and one that does not load is logged and the
 * old one kept.
 */
import { execFile } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, unwatchFile, watchFile, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createSecureContext } from 'node:tls';
import { promisify } from 'node:util';
import { ErrorCodes, HayloftError } from '../lib/errors.js';
import type { Logger } from '../lib/log.js';

export interface TlsFiles {
  cert: string;
  key: string;
  /** Where they were read from. */
  certPath: string;
  keyPath: string;
  /** SHA-256 fingerprint of the certificate, `AB:CD:...`. */
  fingerprint: string;
  /** True when this start made the self-signed certificate. */
  generated: boolean;
}

function fingerprintOf(cert: string): string {
  return new X509Certificate(cert).fingerprint256;
}

/** Loads the pair, checking that it makes a TLS context (a key that does not match the cert fails here). */
function readPair(certPath: string, keyPath: string): { cert: string; key: string; fingerprint: string } {
  const cert = readFileSync(certPath, 'utf8');
  const key = readFileSync(keyPath, 'utf8');
  createSecureContext({ cert, key });
  return { cert, key, fingerprint: fingerprintOf(cert) };
}

/**
 * The certificate to serve: the configured files, or the self-signed pair in `<dataDir>/tls/`,
 * made now when it does not exist yet. Throws HL_BAD_CONFIG when configured files cannot be read
 * or do not match.
 */
export async function tlsFiles(opts: { dataDir: string; certFile: string | null; keyFile: string | null; hostname?: string }): Promise<TlsFiles> {
  if ((opts.certFile === null) !== (opts.keyFile === null)) {
    throw new HayloftError(ErrorCodes.BAD_CONFIG, 'tlsCert and tlsKey go together: give both PEM files, or neither for a self-signed certificate');
  }
  if (opts.certFile !== null && opts.keyFile !== null) {
    try {
      return { ...readPair(opts.certFile, opts.keyFile), certPath: opts.certFile, keyPath: opts.keyFile, generated: false };
    } catch (e) {
      throw new HayloftError(ErrorCodes.BAD_CONFIG, `tlsCert ${opts.certFile} and tlsKey ${opts.keyFile} cannot be used: ${(e as Error).message}`, { cause: e });
    }
  }
  const dir = path.join(opts.dataDir, 'tls');
  const certPath = path.join(dir, 'cert.pem');
  const keyPath = path.join(dir, 'key.pem');
  if (existsSync(certPath) && existsSync(keyPath)) return { ...readPair(certPath, keyPath), certPath, keyPath, generated: false };
  const host = opts.hostname ?? os.hostname();
  const pems = await selfSigned(host);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  writeFileSync(keyPath, pems.key, { mode: 0o600 });
  writeFileSync(certPath, pems.cert, { mode: 0o644 });
  return { ...readPair(certPath, keyPath), certPath, keyPath, generated: true };
}

/** Watches the pair's files; `apply` gets each new pair that loads. Returns the stop function. */
export function watchTls(files: TlsFiles, apply: (pair: { cert: string; key: string; fingerprint: string }) => void, log: Logger, intervalMs = 5000): () => void {
  let last = files.fingerprint;
  const check = (): void => {
    let pair;
    try {
      pair = readPair(files.certPath, files.keyPath);
    } catch (e) {
      // Mid-renewal (the cert written, the key not yet) or a bad file: keep serving the old pair.
      log.warn({ err: e, cert: files.certPath }, 'TLS certificate changed but does not load: still serving the previous one');
      return;
    }
    if (pair.fingerprint === last) return;
    last = pair.fingerprint;
    apply(pair);
    log.info({ fingerprint: pair.fingerprint, cert: files.certPath }, 'TLS certificate reloaded');
  };
  watchFile(files.certPath, { interval: intervalMs, persistent: false }, check);
  watchFile(files.keyPath, { interval: intervalMs, persistent: false }, check);
  return () => {
    unwatchFile(files.certPath, check);
    unwatchFile(files.keyPath, check);
  };
}

/**
 * A self-signed P-256 certificate for this host, valid 10 years (a device is not renewed by hand).
 * Made by the `selfsigned` library in a short-lived child process: the library and its X.509
 * stack (about 4 MiB resident, issue 19) are needed once in a device's life and would otherwise
 * stay loaded in the daemon for as long as it runs.
 */
async function selfSigned(host: string): Promise<{ cert: string; key: string }> {
  const request = JSON.stringify(certRequest(host));
  try {
    const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', MAKE_CERT, import.meta.resolve('selfsigned'), request], {
      encoding: 'utf8',
      timeout: 60_000,
      env: { PATH: process.env.PATH ?? '' },
    });
    return JSON.parse(stdout) as { cert: string; key: string };
  } catch {
    // Where this process cannot start Node again (under qemu-user without binfmt, say), made
    // here: the library then stays loaded, which is better than no HTTPS.
    const { generate } = (await import('selfsigned')) as unknown as { generate: (a: unknown, o: unknown) => Promise<{ cert: string; private: string }> };
    const [attrs, opts] = certRequest(host);
    const pems = await generate(attrs, { ...opts, notBeforeDate: new Date(opts.notBeforeDate), notAfterDate: new Date(opts.notAfterDate) });
    return { cert: pems.cert, key: pems.private };
  }
}

/** What is asked of `selfsigned`, as JSON (the dates in ms: the child makes them Dates). */
function certRequest(host: string): [{ name: string; value: string }[], { notBeforeDate: number; notAfterDate: number } & Record<string, unknown>] {
  const now = Date.now();
  return [
    [{ name: 'commonName', value: host }],
    {
      keyType: 'ec',
      curve: 'P-256',
      algorithm: 'sha256',
      notBeforeDate: now - 60_000,
      notAfterDate: now + 10 * 365 * 86_400_000,
      extensions: [
        { name: 'basicConstraints', cA: false },
        { name: 'keyUsage', digitalSignature: true },
        { name: 'extKeyUsage', serverAuth: true },
        {
          name: 'subjectAltName',
          altNames: [
            { type: 2, value: host },
            { type: 2, value: 'localhost' },
            { type: 7, ip: '127.0.0.1' },
            { type: 7, ip: '::1' },
          ],
        },
      ],
    },
  ];
}

/** The child's program: argv[1] is the library's URL, argv[2] certRequest's JSON; prints the PEM pair as JSON. */
const MAKE_CERT = `
const [url, request] = process.argv.slice(1);
const { generate } = await import(url);
const [attrs, opts] = JSON.parse(request);
const pems = await generate(attrs, { ...opts, notBeforeDate: new Date(opts.notBeforeDate), notAfterDate: new Date(opts.notAfterDate) });
process.stdout.write(JSON.stringify({ cert: pems.cert, key: pems.private }));
`;
