/**
 * Shared benchmark plumbing: interleaved rounds with medians (this machine is shared and noisy,
 * so a single run means little), and writing a figure section into docs/performance.md between
 * `<!-- bench:NAME:start -->` and `<!-- bench:NAME:end -->` markers.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
}

/**
 * Runs each case `rounds` times, interleaved (A B C A B C ...) so drift in machine load hits all
 * cases alike; returns the median milliseconds per case. `warmup` rounds are run and discarded.
 */
export function measure(cases: Record<string, () => unknown>, rounds: number, warmup = 2): Record<string, number> {
  const times: Record<string, number[]> = {};
  for (const name of Object.keys(cases)) times[name] = [];
  for (let r = 0; r < warmup + rounds; r++) {
    for (const [name, f] of Object.entries(cases)) {
      const t0 = performance.now();
      const out = f();
      const dt = performance.now() - t0;
      if (out === undefined) throw new Error(`case ${name} returned nothing: a benchmark must use its result`);
      if (r >= warmup) (times[name] as number[]).push(dt);
    }
  }
  const med: Record<string, number> = {};
  for (const [name, xs] of Object.entries(times)) med[name] = median(xs);
  return med;
}

export function machineLine(): string {
  const cpus = os.cpus();
  return `${cpus.length} × ${cpus[0]?.model ?? 'unknown CPU'}, Node ${process.version}, ${new Date().toISOString().slice(0, 10)}`;
}

export function fmtRate(perSec: number): string {
  if (perSec >= 1e6) return `${(perSec / 1e6).toFixed(2)} M`;
  if (perSec >= 1e3) return `${(perSec / 1e3).toFixed(1)} k`;
  return perSec.toFixed(0);
}

/** Replaces (or appends) the section of docs/performance.md between this benchmark's markers. */
export function recordSection(name: string, markdown: string, file = 'docs/performance.md'): void {
  const start = `<!-- bench:${name}:start -->`;
  const end = `<!-- bench:${name}:end -->`;
  let doc = readFileSync(file, 'utf8');
  const block = `${start}\n${markdown.trim()}\n${end}`;
  const i = doc.indexOf(start);
  const j = doc.indexOf(end);
  if (i >= 0 && j > i) doc = doc.slice(0, i) + block + doc.slice(j + end.length);
  else doc = doc.trimEnd() + '\n\n' + block + '\n';
  writeFileSync(file, doc);
}

/** The number after `--name` on the command line, or `def` when the option is absent. */
export function numberArg(name: string, def: number): number {
  const args = process.argv.slice(2);
  const i = args.indexOf(name);
  if (i < 0) return def;
  const n = Number(args[i + 1]);
  if (!Number.isFinite(n)) throw new Error(`${name} needs a number`);
  return n;
}

/** Whether `--name` is on the command line. */
export function hasFlag(name: string): boolean {
  return process.argv.slice(2).includes(name);
}

/**
 * The pid of the server itself, given the pid of the `hayloft serve` process a bench started:
 * on Node 20 that process stays as a small launcher and the server runs as its only child
 * (src/lib/runtime.ts; on Node 22.15+ it replaces itself, same pid). CPU and memory figures must
 * be read from the server, not from the launcher.
 */
export function serverPid(pid: number): number {
  try {
    const kids = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter((x) => x !== '');
    return kids.length === 1 ? Number(kids[0]) : pid;
  } catch {
    return pid;
  }
}
