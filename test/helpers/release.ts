/**
 * The release artifact of this checkout, built by scripts/release.sh (signed with a key made here)
 * once per test file that needs it: test/scripts/release.test.ts, update-artifact.test.ts and
 * arm64.test.ts. Building runs `npm run build` and `npm ci --omit=dev`: about a minute.
 */
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { tempDir } from './tmp.js';

export const REPO = new URL('../..', import.meta.url).pathname;
export const VERSION = (JSON.parse(readFileSync(path.join(REPO, 'package.json'), 'utf8')) as { version: string }).version;

export interface Release {
  /** The folder of the key files and of `out/`; removed at teardown. */
  work: string;
  /** release.sh's run (status 0 when built). */
  built: SpawnSyncReturns<string>;
  /** `<work>/out/hayloft-<VERSION>-linux.tar.gz`, its `.sig` beside it. */
  tarball: string;
  privateKey: KeyObject;
  publicKey: KeyObject;
  /** The public key as a PEM file (what updatePublicKey names on a gateway). */
  publicKeyFile: string;
}

export function buildRelease(t: { teardown(f: () => void): void }): Release {
  const work = tempDir(t);
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  const keyFile = path.join(work, 'release-key.pem');
  writeFileSync(keyFile, privateKey.export({ type: 'pkcs8', format: 'pem' }));
  const publicKeyFile = path.join(work, 'update-key.pub.pem');
  writeFileSync(publicKeyFile, publicKey.export({ type: 'spki', format: 'pem' }));
  const out = path.join(work, 'out');
  const built = spawnSync('bash', [path.join(REPO, 'scripts/release.sh'), '--out', out, '--key', keyFile], { cwd: REPO, encoding: 'utf8', timeout: 480_000 });
  return { work, built, tarball: path.join(out, `hayloft-${VERSION}-linux.tar.gz`), privateKey, publicKey, publicKeyFile };
}
