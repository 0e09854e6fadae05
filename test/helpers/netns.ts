/**
 * Network namespaces for tests (iproute2; CI runs as root): `ip` runs one command and says what
 * went wrong, `makeNamespaces` adds namespaces with their loopback up, `dropNamespaces` deletes
 * them (their interfaces go with them). Tests skip with the message when setting up fails.
 */
import { spawnSync } from 'node:child_process';

/** Runs `ip <args>`: null when it worked, else the command and its error. */
export function ip(...args: string[]): string | null {
  const r = spawnSync('ip', args, { encoding: 'utf8' });
  return r.status === 0 ? null : `ip ${args.join(' ')}: ${(r.stderr || String(r.error ?? '')).trim()}`;
}

/** Adds each namespace with its loopback up: null when done, else why not (not root, no iproute2). */
export function makeNamespaces(names: readonly string[]): string | null {
  if (process.getuid?.() !== 0) return 'network namespaces need root';
  for (const ns of names) {
    const e = ip('netns', 'add', ns) ?? ip('-n', ns, 'link', 'set', 'lo', 'up');
    if (e !== null) return e;
  }
  return null;
}

/** Runs each `ip` command in order: null when all worked, else the first error. */
export function ipSteps(steps: readonly string[][]): string | null {
  for (const s of steps) {
    const e = ip(...s);
    if (e !== null) return e;
  }
  return null;
}

export function dropNamespaces(names: readonly string[]): void {
  for (const ns of names) ip('netns', 'del', ns);
}
