/**
 * scripts/install.sh into a temporary root (never the real system: every run passes --root), and
 * systemd/hayloft.service as installed, checked by `systemd-analyze verify` where it exists.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, cpSync, existsSync, mkdirSync, readFileSync, readlinkSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { tempDir } from '../helpers/tmp.js';

const REPO = new URL('../..', import.meta.url).pathname;
const INSTALL = path.join(REPO, 'scripts/install.sh');
const PKG = JSON.parse(readFileSync(path.join(REPO, 'package.json'), 'utf8')) as { scripts: Record<string, string>; bin: Record<string, string> };

t.test('the daemon\'s Node flags are given by its command alone (bin/hayloft; test/lib/runtime.test.ts checks it against src/lib/runtime.ts)', async (t) => {
  t.match(PKG.scripts.start, /bin\/hayloft serve --demo/, 'npm start runs the command');
  t.equal(PKG.bin.hayloft, 'bin/hayloft', 'the npm bin is the command');
  t.notMatch(PKG.scripts.start, /--max-semi-space-size|--heap-growing-percent/, 'npm start passes none of its own');
  t.notMatch(readFileSync(INSTALL, 'utf8'), /--max-semi-space-size|nodeFlags/, 'install.sh passes none of its own');
  t.match(readFileSync(path.join(REPO, 'scripts/bench.mjs'), 'utf8'), /nodeFlags\(\)/, 'benchmarks take them from src/lib/runtime.ts');
});

/** A built release without the build: package.json, the unit and a stub dist/cli.js. */
function release(dir: string, version: string): string {
  const rel = path.join(dir, `release-${version}`);
  mkdirSync(path.join(rel, 'dist'), { recursive: true });
  const pkg = JSON.parse(readFileSync(path.join(REPO, 'package.json'), 'utf8')) as Record<string, unknown>;
  writeFileSync(path.join(rel, 'package.json'), JSON.stringify({ ...pkg, version }, null, 2));
  cpSync(path.join(REPO, 'systemd'), path.join(rel, 'systemd'), { recursive: true });
  cpSync(path.join(REPO, 'bin'), path.join(rel, 'bin'), { recursive: true });
  writeFileSync(path.join(rel, 'dist/cli.js'), `console.log('hayloft ${version} stub', process.argv.slice(2).join(' '));\n`);
  return rel;
}

function install(args: string[]): { status: number | null; out: string } {
  const r = spawnSync('bash', [INSTALL, ...args], { encoding: 'utf8', timeout: 60_000 });
  return { status: r.status, out: r.stdout + r.stderr };
}

t.test('install.sh into a temporary root, then an upgrade', async (t) => {
  const dir = tempDir(t);
  const root = path.join(dir, 'root');
  mkdirSync(root);
  const first = install(['--root', root, '--from', release(dir, '1.2.3'), '--no-deps', '--node', process.execPath]);
  t.equal(first.status, 0, first.out);
  t.match(first.out, /skipped creating the user, changing owners and systemctl/);

  const prefix = path.join(root, 'opt/hayloft');
  t.equal(readlinkSync(path.join(prefix, 'current')), 'releases/1.2.3', 'current points at the release');
  t.ok(existsSync(path.join(prefix, 'releases/1.2.3/dist/cli.js')));
  t.ok(existsSync(path.join(prefix, 'releases/1.2.3/systemd/hayloft.service')));
  const bin = readFileSync(path.join(prefix, 'bin/hayloft'), 'utf8');
  t.match(bin, `HAYLOFT_NODE="${process.execPath}"`, 'the command runs the chosen node');
  t.match(bin, `exec "/opt/hayloft/current/bin/hayloft" "$@"`, "through the current release's own command");
  t.equal(statSync(path.join(prefix, 'bin/hayloft')).mode & 0o777, 0o755);
  t.equal(readlinkSync(path.join(root, 'usr/local/bin/hayloft')), '/opt/hayloft/bin/hayloft');
  // The wrapper's paths are the device's; run it with the temp root's release to see it works.
  const ran = spawnSync('sh', ['-c', bin.replaceAll('/opt/hayloft/current', path.join(prefix, 'current')), 'hayloft', 'version'], { encoding: 'utf8' });
  t.equal(ran.stdout.trim(), 'hayloft 1.2.3 stub version');

  const yaml = path.join(root, 'etc/hayloft/hayloft.yaml');
  t.match(readFileSync(yaml, 'utf8'), /^dataDir: \/var\/lib\/hayloft$/m);
  t.equal(statSync(yaml).mode & 0o777, 0o640, 'the config is not world-readable');
  t.equal(statSync(path.join(root, 'var/lib/hayloft')).mode & 0o777, 0o700, 'the data folder is closed to others');

  const unit = readFileSync(path.join(root, 'etc/systemd/system/hayloft.service'), 'utf8');
  for (const line of [
    'Type=notify',
    'NotifyAccess=all',
    'ExecStart=/opt/hayloft/bin/hayloft serve --config /etc/hayloft/hayloft.yaml',
    'Restart=on-failure',
    'User=hayloft',
    'StateDirectory=hayloft',
    'WatchdogSec=30s',
    'NoNewPrivileges=yes',
    'ProtectSystem=strict',
    'ProtectHome=yes',
    'PrivateTmp=yes',
    'WantedBy=multi-user.target',
  ]) {
    t.match(unit, new RegExp(`^${line.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}$`, 'm'), line);
  }
  t.notMatch(unit, /^MemoryDenyWriteExecute=yes/m, 'V8 needs W^X off');

  // An upgrade: a new release, the operator's config kept, current switched, the old release
  // kept for a rollback.
  writeFileSync(yaml, 'dataDir: /var/lib/hayloft\nport: 9000\n');
  const second = install(['--root', root, '--from', release(dir, '1.3.0'), '--no-deps', '--node', process.execPath]);
  t.equal(second.status, 0, second.out);
  t.match(second.out, /kept \/etc\/hayloft\/hayloft\.yaml/);
  t.equal(readFileSync(yaml, 'utf8'), 'dataDir: /var/lib/hayloft\nport: 9000\n', 'the config is never overwritten');
  t.equal(readlinkSync(path.join(prefix, 'current')), 'releases/1.3.0');
  t.ok(existsSync(path.join(prefix, 'releases/1.2.3/dist/cli.js')), 'the previous release stays');

  // Another prefix is carried into the unit and the command.
  const root2 = path.join(dir, 'root2');
  mkdirSync(root2);
  t.equal(install(['--root', root2, '--prefix', '/srv/hl', '--from', release(dir, '1.3.0'), '--no-deps', '--node', process.execPath]).status, 0);
  t.match(readFileSync(path.join(root2, 'etc/systemd/system/hayloft.service'), 'utf8'), /^ExecStart=\/srv\/hl\/bin\/hayloft serve/m);
});

t.test('install.sh refuses what it cannot install', async (t) => {
  const dir = tempDir(t);
  const root = path.join(dir, 'root');
  mkdirSync(root);
  const unbuilt = path.join(dir, 'unbuilt');
  mkdirSync(unbuilt);
  writeFileSync(path.join(unbuilt, 'package.json'), '{"name":"hayloft","version":"1.0.0"}');
  const r = install(['--root', root, '--from', unbuilt, '--no-deps']);
  t.equal(r.status, 1);
  t.match(r.out, /is not built: run npm ci && npm run build/);
  t.match(install(['--root', root, '--prefix', 'relative', '--from', release(dir, '1.0.0'), '--no-deps']).out, /--prefix must be an absolute path/);
  t.match(install(['--root', root, '--frobnicate']).out, /unknown option --frobnicate/);
  t.match(install(['--root', path.join(dir, 'nope'), '--from', release(dir, '1.0.0')]).out, /--root folder does not exist/);
});

const analyze = spawnSync('systemd-analyze', ['--version'], { encoding: 'utf8' });
t.test('the unit passes systemd-analyze verify', { skip: analyze.status === 0 ? false : 'systemd-analyze is not installed' }, async (t) => {
  // verify checks that ExecStart is executable: point it at a stand-in in a temp folder.
  const dir = tempDir(t);
  const bin = path.join(dir, 'opt/hayloft/bin/hayloft');
  mkdirSync(path.dirname(bin), { recursive: true });
  writeFileSync(bin, '#!/bin/sh\nexit 0\n');
  chmodSync(bin, 0o755);
  const unit = path.join(dir, 'hayloft.service');
  writeFileSync(unit, readFileSync(path.join(REPO, 'systemd/hayloft.service'), 'utf8').replaceAll('/opt/hayloft', path.join(dir, 'opt/hayloft')));
  const r = spawnSync('systemd-analyze', ['verify', unit], { encoding: 'utf8' });
  // Without systemd as PID 1 (containers, CI) verify cannot load the default dependencies and
  // says so; anything else it says is about the unit.
  const complaints = r.stderr
    .split('\n')
    .filter((l) => l.trim() !== '' && !/Unit (sysinit|basic|shutdown|network-online|multi-user)\.target not found|Failed to create .*\/start: Unit .*\.target not found/.test(l));
  t.same(complaints, [], r.stderr);
  // A broken unit is caught (the check above would see it).
  writeFileSync(unit, '[Service]\nType=notify\nExecStart=relative/path\nFrobnicate=yes\n');
  const bad = spawnSync('systemd-analyze', ['verify', unit], { encoding: 'utf8' });
  t.match(bad.stderr, /Frobnicate|relative|absolute/);
});
