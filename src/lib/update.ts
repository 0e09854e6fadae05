/**
 * `hayloft update <artifact>` and `hayloft update --recover` (docs/updates.md): a signed release
 * artifact (scripts/release.sh) installed beside the running release of an install made by
 * scripts/install.sh, switched to, health-checked, and rolled back (code and data) when the new
 * version does not come up healthy in time.
 *
 *   <prefix>/releases/<version>/     the releases; <prefix>/current links to the one in use
 *   <prefix>/update-journal.json     while an update runs: its phase, written before each step, so
 *                                    `--recover` (ExecStartPre of the unit) finishes or undoes an
 *                                    update whose process died (kill -9, power cut)
 *   <prefix>/update-state.json       the last update's result: read by the daemon (UpdateStatus)
 *                                    for /api/health, the console and NBIRTH
 *   <dataDir>.before-update          the data folder as it was, copied with the service stopped
 *
 * Each step is a rename or is redone from the start when interrupted, so `--recover` can always
 * run again. The tarball is unpacked by the system's `tar` (GNU tar refuses absolute and `..`
 * member names) and folders are copied with `cp -a` (owners and modes kept, as the service user
 * needs them): both are on every Debian; node:fs has no tar reader, and cpSync does not keep owners.
 */
import { spawnSync } from 'node:child_process';
import { createPublicKey, verify, type KeyObject } from 'node:crypto';
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, readlinkSync, renameSync, rmSync, statfsSync, symlinkSync, writeFileSync, openSync, fsyncSync, closeSync } from 'node:fs';
import path from 'node:path';
import { ErrorCodes, HayloftError } from './errors.js';
import type { Logger } from './log.js';

/** The result of the last update, as kept in update-state.json. */
export interface UpdateState {
  /**
   * `ok`: switched and healthy; `rolled-back`: the new version failed and the old one runs again;
   * `recovered`: an interrupted update was finished or undone by --recover; `refused`: the
   * artifact was refused before anything changed (bad signature, not a release, ...).
   */
  result: 'ok' | 'rolled-back' | 'recovered' | 'refused';
  from: string;
  /** The new version; '' for a refused artifact whose version was not read (unverified bytes are not unpacked). */
  to: string;
  /** The version running after the update. */
  running: string;
  at: string;
  message: string;
}

type Phase = 'unpacking' | 'unpacked' | 'backing-up' | 'backed-up' | 'switched' | 'healthy' | 'rolling-back' | 'rolled-back';

interface Journal {
  pid: number;
  phase: Phase;
  /** Versions: the release `current` pointed to, and the new one. */
  from: string;
  to: string;
  dataDir: string;
  /** Whether the data folder existed (a gateway never started has none). */
  dataExisted: boolean;
  startedAt: string;
}

/** Stops and starts the service: systemctl under systemd, commands given by option or environment otherwise. */
export interface ServiceControl {
  stop: string;
  start: string;
}

export interface UpdateOptions {
  artifact: string;
  /** Default: `<artifact>.sig` (base64 Ed25519 signature of the tarball's bytes, scripts/release.sh). */
  signature?: string;
  /** The configured public key: PEM text or the path of a PEM file (updatePublicKey). */
  publicKey: string | null;
  prefix: string;
  dataDir: string;
  healthUrl: string;
  healthTimeoutMs: number;
  service: ServiceControl;
  log: Logger;
}

const refuse = (message: string): never => {
  throw new HayloftError(ErrorCodes.UPDATE_REFUSED, message);
};

/** The install prefix a release folder belongs to (`<prefix>/releases/<version>`), or null outside an install. */
export function installPrefix(releaseDir: string): string | null {
  const parent = path.dirname(path.resolve(releaseDir));
  return path.basename(parent) === 'releases' ? path.dirname(parent) : null;
}

export const journalFile = (prefix: string): string => path.join(prefix, 'update-journal.json');
export const stateFile = (prefix: string): string => path.join(prefix, 'update-state.json');
const backupDir = (dataDir: string): string => `${path.resolve(dataDir)}.before-update`;

/** Written whole and renamed into place: a reader (or --recover) never sees half a file. */
function writeJson(file: string, value: unknown): void {
  const tmp = `${file}.tmp`;
  writeFileSync(tmp, JSON.stringify(value, null, 2) + '\n', { mode: 0o644 });
  const fd = openSync(tmp, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, file);
}

export function readUpdateState(file: string): UpdateState | null {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as UpdateState;
  } catch {
    return null;
  }
}

function loadPublicKey(setting: string | null): KeyObject {
  if (setting === null) return refuse('no public key to check the artifact\'s signature: set updatePublicKey in the configuration (a PEM file or its text) or give --public-key FILE');
  let pem = setting;
  if (!setting.includes('-----BEGIN')) {
    try {
      pem = readFileSync(setting, 'utf8');
    } catch (e) {
      return refuse(`cannot read the public key ${setting}: ${(e as Error).message}`);
    }
  }
  let key: KeyObject;
  try {
    key = createPublicKey(pem);
  } catch (e) {
    return refuse(`the public key is not a PEM public key: ${(e as Error).message}`);
  }
  if (key.asymmetricKeyType !== 'ed25519') refuse(`the public key is ${key.asymmetricKeyType ?? 'not an asymmetric key'}, not Ed25519`);
  return key;
}

/** The artifact's bytes, once their Ed25519 signature is checked: what is unpacked is what was checked. */
export function verifiedArtifact(artifact: string, signature: string | undefined, publicKey: string | null): Buffer {
  const key = loadPublicKey(publicKey);
  let data: Buffer;
  try {
    data = readFileSync(artifact);
  } catch (e) {
    return refuse(`cannot read the artifact ${artifact}: ${(e as Error).message}`);
  }
  const sigFile = signature ?? `${artifact}.sig`;
  if (!existsSync(sigFile)) refuse(`the artifact is not signed: ${sigFile} does not exist (scripts/release.sh --key writes it)`);
  const sig = Buffer.from(readFileSync(sigFile, 'utf8').trim(), 'base64');
  if (sig.length !== 64 || !verify(null, data, key, sig)) refuse(`bad signature: ${sigFile} is not a signature of ${path.basename(artifact)} by the configured key; nothing was changed`);
  return data;
}

function run(cmd: string, what: string): void {
  const r = spawnSync('sh', ['-c', cmd], { stdio: ['ignore', 'inherit', 'inherit'] });
  if (r.status !== 0) throw new Error(`${what} (${cmd}) failed with ${r.status ?? r.signal ?? r.error?.message}`);
}

function copyTree(from: string, to: string): void {
  rmSync(to, { recursive: true, force: true });
  const r = spawnSync('cp', ['-a', from, to], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`cp -a ${from} ${to} failed: ${r.stderr}`);
}

function treeBytes(dir: string): number {
  let n = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    n += e.isDirectory() ? treeBytes(p) : lstatSync(p).size;
  }
  return n;
}

/** The release `current` links to (its version), or null. */
function currentVersion(prefix: string): string | null {
  try {
    return path.basename(readlinkSync(path.join(prefix, 'current')));
  } catch {
    return null;
  }
}

/** `current` to releases/<version>, in one rename. */
function link(prefix: string, version: string): void {
  const tmp = path.join(prefix, 'current.new');
  rmSync(tmp, { force: true });
  symlinkSync(`releases/${version}`, tmp);
  renameSync(tmp, path.join(prefix, 'current'));
}

/** Restores the data folder from the copy made before the switch (redone from the start when interrupted). */
function restoreData(j: Journal): void {
  const data = path.resolve(j.dataDir);
  const restoring = `${data}.restoring`;
  if (j.dataExisted) {
    const backup = backupDir(data);
    if (!existsSync(backup)) throw new Error(`the data backup ${backup} is missing: the data folder cannot be rolled back`);
    copyTree(backup, restoring);
  }
  // The data the failed version wrote is kept aside, one copy, for a look at what went wrong.
  if (existsSync(data)) {
    rmSync(`${data}.failed-update`, { recursive: true, force: true });
    renameSync(data, `${data}.failed-update`);
  }
  if (j.dataExisted) renameSync(restoring, data);
}

/**
 * Waits for /api/health to answer healthy from a daemon started after `since` (performance.now()):
 * its uptimeSeconds says so. /api/health does not say the version (it answers anyone, and says
 * nothing about the device beyond its state); the service was stopped before `current` switched,
 * so a daemon started since runs the release `current` links to.
 */
async function healthy(url: string, since: number, timeoutMs: number): Promise<string | null> {
  const deadline = performance.now() + timeoutMs;
  let last = 'no answer';
  for (;;) {
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(Math.max(1000, Math.min(5000, deadline - performance.now()))) });
      const body = (await res.json().catch(() => ({}))) as { ok?: boolean; uptimeSeconds?: number; status?: string; reasons?: string[] };
      const fresh = typeof body.uptimeSeconds === 'number' && body.uptimeSeconds <= (performance.now() - since) / 1000 + 1;
      if (res.status === 200 && body.ok === true && fresh) return null;
      last = !fresh ? 'the daemon answering was not started by the update (it did not stop?)' : `answers ${res.status} ${body.status ?? ''} ${(body.reasons ?? []).join('; ')}`.trim();
    } catch (e) {
      const code = (e as { cause?: { code?: string } }).cause?.code;
      last = code === 'ECONNREFUSED' ? `no answer from ${url} (ECONNREFUSED): the daemon is not running or not listening (its log says why)` : code ?? (e as Error).message;
    }
    if (performance.now() >= deadline) return last;
    await new Promise((r) => setTimeout(r, 500));
  }
}

function finish(prefix: string, log: Logger, state: UpdateState): UpdateState {
  writeJson(stateFile(prefix), state);
  rmSync(journalFile(prefix), { force: true });
  (state.result === 'ok' ? log.info.bind(log) : log.warn.bind(log))({ update: state }, state.message);
  return state;
}

/** Undoes a switched update: code linked back, data restored, journal kept until both are done. */
function rollBack(prefix: string, j: Journal): void {
  const journal = journalFile(prefix);
  writeJson(journal, { ...j, phase: 'rolling-back' });
  link(prefix, j.from);
  restoreData(j);
  writeJson(journal, { ...j, phase: 'rolled-back' });
  rmSync(backupDir(j.dataDir), { recursive: true, force: true });
}

/**
 * A refused update changes nothing of the install's code or data, but the refusal is kept as the
 * last result (update-state.json: the console and a fleet's host see that an update was tried and
 * why it was refused), unless another update is in progress (its journal: that one's result is
 * the one to keep) or there is no install to keep it in.
 */
export async function update(o: UpdateOptions): Promise<UpdateState> {
  const prefix = path.resolve(o.prefix);
  const seen = { to: '' };
  try {
    return await updateInstall(o, prefix, seen);
  } catch (e) {
    const from = currentVersion(prefix);
    if (e instanceof HayloftError && e.code === ErrorCodes.UPDATE_REFUSED && from !== null && !existsSync(journalFile(prefix))) {
      writeJson(stateFile(prefix), { result: 'refused', from, to: seen.to, running: from, at: new Date().toISOString(), message: `update refused: ${e.message}` } satisfies UpdateState);
    }
    throw e;
  }
}

async function updateInstall(o: UpdateOptions, prefix: string, seen: { to: string }): Promise<UpdateState> {
  const data = verifiedArtifact(o.artifact, o.signature, o.publicKey);
  const from = currentVersion(prefix);
  if (from === null) return refuse(`${prefix}/current does not exist: this is not an install made by scripts/install.sh (give --prefix)`);
  if (existsSync(journalFile(prefix))) refuse(`an update is already in progress or was interrupted (${journalFile(prefix)}): run hayloft update --recover first`);

  // 1. Unpacked beside the running release, under a temporary name, renamed when complete.
  const releases = path.join(prefix, 'releases');
  const unpack = path.join(releases, '.unpack');
  rmSync(unpack, { recursive: true, force: true });
  mkdirSync(unpack);
  const tar = spawnSync('tar', ['-xz', '-C', unpack], { input: data, encoding: 'utf8', maxBuffer: 16 * 1024 * 1024 });
  const top = tar.status === 0 ? readdirSync(unpack).filter((n) => n.startsWith('hayloft-')) : [];
  const root = top.length === 1 ? path.join(unpack, top[0]!) : null;
  let to = '';
  try {
    if (root === null || !existsSync(path.join(root, 'RELEASE.json'))) refuse(`${o.artifact} is signed but is not a release artifact (one hayloft-<version>/ folder with RELEASE.json)${tar.status !== 0 ? `: ${tar.stderr.trim()}` : ''}`);
    const v = (JSON.parse(readFileSync(path.join(root!, 'RELEASE.json'), 'utf8')) as { version?: unknown }).version;
    to = typeof v === 'string' ? v : '';
    if (!/^[0-9A-Za-z.+-]+$/.test(to)) refuse(`${o.artifact}: RELEASE.json has no usable version`);
    seen.to = to;
    if (to === from) refuse(`Hayloft ${to} is already the running release`);
    for (const f of ['bin/hayloft', 'dist/cli.js']) if (!existsSync(path.join(root!, f))) refuse(`${o.artifact}: the release has no ${f}`);
  } catch (e) {
    rmSync(unpack, { recursive: true, force: true });
    throw e instanceof HayloftError ? e : new HayloftError(ErrorCodes.UPDATE_REFUSED, `${o.artifact} is signed but its RELEASE.json cannot be read: ${(e as Error).message}`);
  }
  const j: Journal = { pid: process.pid, phase: 'unpacking', from, to, dataDir: path.resolve(o.dataDir), dataExisted: existsSync(o.dataDir), startedAt: new Date().toISOString() };
  const journal = journalFile(prefix);
  writeJson(journal, j);
  rmSync(path.join(releases, to), { recursive: true, force: true });
  renameSync(root!, path.join(releases, to));
  rmSync(unpack, { recursive: true, force: true });
  writeJson(journal, { ...j, phase: 'unpacked' });
  o.log.info({ from, to }, `update ${from} -> ${to}: signature good, unpacked into ${path.join(releases, to)}`);

  // 2. The data folder copied with the service stopped, so the copy is consistent.
  if (j.dataExisted) {
    const need = treeBytes(j.dataDir);
    const fs = statfsSync(path.dirname(j.dataDir));
    if (fs.bavail * fs.bsize < need * 1.1 + 16 * 1024 * 1024) {
      rmSync(path.join(releases, to), { recursive: true, force: true });
      rmSync(journal, { force: true });
      refuse(`not enough free disk to back the data folder up before the update (${need} bytes needed beside ${j.dataDir}); nothing was changed`);
    }
  }
  writeJson(journal, { ...j, phase: 'backing-up' });
  o.log.info('stopping the service to back the data folder up');
  run(o.service.stop, 'stopping the service');
  if (j.dataExisted) {
    const backup = backupDir(j.dataDir);
    copyTree(j.dataDir, `${backup}.partial`);
    rmSync(backup, { recursive: true, force: true });
    renameSync(`${backup}.partial`, backup);
  }
  writeJson(journal, { ...j, phase: 'backed-up' });

  // 3. Switch, start, health.
  writeJson(journal, { ...j, phase: 'switched' });
  link(prefix, to);
  o.log.info({ to }, `switched to ${to}; starting it and waiting up to ${o.healthTimeoutMs / 1000} s for it to answer healthy`);
  let problem: string | null;
  try {
    const since = performance.now();
    run(o.service.start, 'starting the service');
    problem = await healthy(o.healthUrl, since, o.healthTimeoutMs);
  } catch (e) {
    problem = (e as Error).message;
  }
  if (problem === null) {
    writeJson(journal, { ...j, phase: 'healthy' });
    rmSync(backupDir(j.dataDir), { recursive: true, force: true });
    return finish(prefix, o.log, { result: 'ok', from, to, running: to, at: new Date().toISOString(), message: `updated from ${from} to ${to}: healthy` });
  }

  // 4. Not healthy in time: back to the old code and data, by itself.
  o.log.error({ from, to, problem }, `${to} did not come up healthy (${problem}): rolling back to ${from}`);
  try {
    run(o.service.stop, 'stopping the failed release');
  } catch (e) {
    o.log.warn({ err: e }, 'stopping the failed release failed; rolling back anyway');
  }
  rollBack(prefix, j);
  let back: string | null;
  try {
    const since = performance.now();
    run(o.service.start, `starting ${from} again`);
    back = await healthy(o.healthUrl, since, o.healthTimeoutMs);
  } catch (e) {
    back = (e as Error).message;
  }
  const state = finish(prefix, o.log, {
    result: 'rolled-back',
    from,
    to,
    running: from,
    at: new Date().toISOString(),
    message: `update to ${to} rolled back: ${problem}; ${from} and its data are back${back === null ? ' and healthy' : `, but it is not healthy yet (${back})`}`,
  });
  throw new HayloftError(ErrorCodes.UPDATE_ROLLED_BACK, state.message);
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Finishes or undoes an update whose process died (the unit's ExecStartPre runs this before every
 * start). Before the switch: the new release and the copy are removed, nothing else changed.
 * After it, unless health was confirmed: code linked back and data restored. Returns null when
 * there was nothing to do (or the update is still running: its own start of the service).
 */
export function recover(prefix: string, log: Logger): UpdateState | null {
  const file = journalFile(prefix);
  let j: Journal;
  try {
    j = JSON.parse(readFileSync(file, 'utf8')) as Journal;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    // Written by rename: a journal that does not parse was not written by us; say so, keep it.
    throw new HayloftError(ErrorCodes.UPDATE_REFUSED, `${file} cannot be read (${(e as Error).message}): look at it and remove it by hand`);
  }
  if (j.pid !== process.pid && alive(j.pid)) {
    log.info({ pid: j.pid }, 'an update is in progress (its process is alive): nothing to recover');
    return null;
  }
  const at = new Date().toISOString();
  const releases = path.join(prefix, 'releases');
  switch (j.phase) {
    case 'unpacking':
    case 'unpacked':
    case 'backing-up':
    case 'backed-up':
      link(prefix, j.from);
      rmSync(path.join(releases, '.unpack'), { recursive: true, force: true });
      rmSync(path.join(releases, j.to), { recursive: true, force: true });
      rmSync(`${backupDir(j.dataDir)}.partial`, { recursive: true, force: true });
      rmSync(backupDir(j.dataDir), { recursive: true, force: true });
      return finish(prefix, log, { result: 'recovered', from: j.from, to: j.to, running: j.from, at, message: `the update to ${j.to} was interrupted before the switch (${j.phase}): undone, ${j.from} and its data are unchanged` });
    case 'healthy':
      rmSync(backupDir(j.dataDir), { recursive: true, force: true });
      return finish(prefix, log, { result: 'ok', from: j.from, to: j.to, running: j.to, at, message: `updated from ${j.from} to ${j.to}: healthy (finished by --recover)` });
    case 'rolled-back':
      rmSync(backupDir(j.dataDir), { recursive: true, force: true });
      return finish(prefix, log, { result: 'rolled-back', from: j.from, to: j.to, running: j.from, at, message: `the update to ${j.to} was rolled back: ${j.from} and its data are back` });
    case 'switched':
    case 'rolling-back':
      rollBack(prefix, j);
      return finish(prefix, log, { result: 'recovered', from: j.from, to: j.to, running: j.from, at, message: `the update to ${j.to} was interrupted after the switch, before its health was confirmed: rolled back, ${j.from} and its data are back` });
  }
}
