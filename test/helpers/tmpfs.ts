/**
 * A small tmpfs of its own for tests that fill a disk (docs/design/README.md "Tests": tests may make
 * their own file systems and must remove them). Needs root (CI runs as root): elsewhere, or when
 * mounting fails, `tmpfsMissing` says why and the test is skipped with that reason. Unmounted (lazily, should something still
 * hold it) and removed at teardown; filler files take the room a test wants gone.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, statfsSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Test } from 'tap';

export interface Tmpfs {
  dir: string;
  /** Bytes free on it now. */
  free(): number;
  /** Writes a file of zeroes taking all but `leave` bytes of the free space; returns its path. */
  fill(name: string, leave: number): string;
}

/**
 * Why tmpfs tests must be skipped here (not root, or mounting fails: a container without the
 * right), or false when they can run: tried once with a 1 MiB mount, for `{ skip }`.
 */
export function tmpfsMissing(): string | false {
  if (process.getuid?.() !== 0) return 'needs root to mount a tmpfs (CI runs as root)';
  const dir = mkdtempSync(path.join(os.tmpdir(), 'hayloft-tmpfs-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', dir], { stdio: 'pipe' });
    execFileSync('umount', [dir], { stdio: 'pipe' });
    return false;
  } catch (err) {
    return `cannot mount a tmpfs: ${String((err as { stderr?: Buffer }).stderr ?? (err as Error).message).trim()}`;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Mounts a tmpfs of `mib` MiB, unmounted and removed at the test's teardown. */
export function mountTmpfs(t: Test, mib: number): Tmpfs {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'hayloft-tmpfs-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${mib}m,mode=0700`, 'tmpfs', dir], { stdio: 'pipe' });
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  t.teardown(() => {
    try {
      execFileSync('umount', [dir], { stdio: 'pipe' });
    } catch {
      // Still held (a daemon not yet stopped): detached now, gone once released.
      execFileSync('umount', ['-l', dir], { stdio: 'pipe' });
    }
    rmSync(dir, { recursive: true, force: true });
  });
  const free = (): number => {
    const s = statfsSync(dir);
    return s.bavail * s.bsize;
  };
  return {
    dir,
    free,
    fill(name, leave) {
      const file = path.join(dir, name);
      const size = Math.max(0, free() - leave);
      writeFileSync(file, Buffer.alloc(size));
      return file;
    },
  };
}
