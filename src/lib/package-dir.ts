/**
 * Where the running Hayloft is: the folder of its package.json, the nearest one above this
 * module whatever the layout (src/ under tsx, dist/ and its chunks after `npm run build`, a bench
 * build, a release under `<prefix>/releases/<version>`), and its version.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

let found: { dir: URL; version: string } | undefined;

function packageDir(): { dir: URL; version: string } {
  if (found !== undefined) return found;
  for (let dir = new URL('.', import.meta.url); ; dir = new URL('..', dir)) {
    try {
      const pkg = JSON.parse(readFileSync(new URL('package.json', dir), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'hayloft') return (found = { dir, version: pkg.version ?? '0.0.0' });
    } catch {
      // not here: look one folder up
    }
    if (dir.pathname === '/') return (found = { dir: new URL('.', import.meta.url), version: '0.0.0' });
  }
}

/** The folder of the running release (its package.json): `<prefix>/releases/<version>` in an install. */
export function packageRoot(): string {
  return fileURLToPath(packageDir().dir);
}

export function productVersion(): string {
  return packageDir().version;
}
