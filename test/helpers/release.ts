/**
 * The release artifact of this checkout, built by scripts/release.sh (signed with a key made here)
 * once per test file that needs it: test/scripts/release.test.ts, update-artifact.test.ts and
 * arm64.test.ts. Building runs `npm ci --omit=dev` (and `npm run build` when dist/ is older than
 * src/ or web/, scripts/build-if-needed.mjs): up to a minute. The test files run side by side and
 * build in this one checkout, so the builds take turns under a lock (flock, util-linux).
 */
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { createHash, generateKeyPairSync, type KeyObject } from 'node:crypto';
import { tmpdir } from 'node:os';
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
  const lock = path.join(tmpdir(), `hayloft-release-${createHash('sha256').update(REPO).digest('hex').slice(0, 12)}.lock`);
  const script = 'node scripts/build-if-needed.mjs && bash scripts/release.sh --no-build --out "$1" --key "$2"';
  const built = spawnSync('flock', [lock, 'sh', '-c', script, 'release', out, keyFile], { cwd: REPO, encoding: 'utf8', timeout: 480_000 });
  return { work, built, tarball: path.join(out, `hayloft-${VERSION}-linux.tar.gz`), privateKey, publicKey, publicKeyFile };
}
