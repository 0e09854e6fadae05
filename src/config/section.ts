/**
 * Nested sections of the configuration (`uplink`, `mqtt`): each brings its own table of keys,
 * read here the same way: file value, else environment override (for the keys that have one),
 * else the default; every key checked, unknown keys refused, every problem named
 * `<section>.<key>` and returned with the others so the caller reports them all at once.
 * Checks that involve several keys stay with the section (its crossCheck).
 */
import { isIPv4 } from 'node:net';

import { accessSync, constants } from 'node:fs';

/** A parser returns the typed value, or a string saying what was expected. */
export type Parsed<T> = { ok: T } | { expected: string };

export interface SectionContext {
  /** Says what is wrong with a filter, or null when it parses (config may not import haystack). */
  checkFilter?: (text: string) => string | null;
}

export interface SubKey<T> {
  /** Environment variable overriding the file, if any. */
  env?: string;
  /** undefined: the key is required (or checked together with others, see crossCheck). */
  default: T | undefined;
  /** Secrets are never shown back in problem reports. */
  secret?: boolean;
  parse: (raw: unknown, ctx: SectionContext) => Parsed<T>;
}

export type SectionKeys<C> = { readonly [K in keyof C]: SubKey<C[K]> };

export interface SectionProblem {
  key: string;
  source: string;
  expected: string;
  got?: string;
}

export function text(raw: unknown, what: string): Parsed<string> {
  if (typeof raw !== 'string' || raw.trim() === '') return { expected: what };
  return { ok: raw.trim() };
}

/** Integers come as JSON numbers from the file and as digit strings from the environment. */
export function integer(raw: unknown, min: number, max: number): Parsed<number> {
  const expected = `an integer from ${min} to ${max}`;
  let n: number;
  if (typeof raw === 'number') n = raw;
  else if (typeof raw === 'string' && /^\s*\d+\s*$/.test(raw)) n = Number(raw);
  else return { expected };
  if (!Number.isInteger(n) || n < min || n > max) return { expected };
  return { ok: n };
}

/** A non-negative number (fractions allowed), from JSON or text. */
export function decimal(raw: unknown, max: number): Parsed<number> {
  const expected = `a number from 0 to ${max}`;
  let n: number;
  if (typeof raw === 'number') n = raw;
  else if (typeof raw === 'string' && /^\s*\d+(\.\d+)?\s*$/.test(raw)) n = Number(raw);
  else return { expected };
  if (!Number.isFinite(n) || n < 0 || n > max) return { expected };
  return { ok: n };
}

/** A BBMD's address, `host[:port]` with an IPv4 host, as `host:port` (47808 by default); '' when `empty` allows none. */
export function bbmdAddress(raw: unknown, empty: boolean): Parsed<string> {
  const expected = `the BBMD as an IPv4 host[:port], such as 10.1.2.3 or 10.1.2.3:47808${empty ? ' (empty: none)' : ''}`;
  if (empty && typeof raw === 'string' && raw.trim() === '') return { ok: '' };
  const m = typeof raw === 'string' ? /^(\d+\.\d+\.\d+\.\d+)(?::(\d{1,5}))?$/.exec(raw.trim()) : null;
  if (m === null || !isIPv4(m[1] as string) || (m[2] !== undefined && (Number(m[2]) < 1 || Number(m[2]) > 65535))) return { expected };
  return { ok: `${m[1] as string}:${m[2] ?? '47808'}` };
}

export function bool(raw: unknown): Parsed<boolean> {
  if (typeof raw === 'boolean') return { ok: raw };
  const v = typeof raw === 'string' ? raw.trim().toLowerCase() : '';
  if (['true', '1', 'yes', 'on'].includes(v)) return { ok: true };
  if (['false', '0', 'no', 'off'].includes(v)) return { ok: false };
  return { expected: 'true or false' };
}

/** A Haystack filter, checked by the caller's parser when one is given. */
export function filter(raw: unknown, ctx: SectionContext, example: string): Parsed<string> {
  const r = text(raw, `a Haystack filter such as ${example}`);
  if (!('ok' in r) || ctx.checkFilter === undefined) return r;
  const why = ctx.checkFilter(r.ok);
  return why === null ? r : { expected: `a Haystack filter that parses (${why})` };
}

export function show(raw: unknown, secret: boolean): string {
  if (secret) return '(hidden)';
  const s = JSON.stringify(raw) ?? String(raw);
  return s.length > 80 ? s.slice(0, 77) + '...' : s;
}

/**
 * Reads a section from the file's value (`raw`, undefined when the file has none) and the
 * environment. `value` is null when neither sets anything; otherwise the keys that parsed (the
 * caller checks them together and freezes the result), with `problems` for each key that is
 * wrong, missing or unknown. `what` names the section's keys in the message for a non-object.
 */
export function loadSection<C>(
  section: string,
  keys: SectionKeys<C>,
  what: string,
  raw: unknown,
  file: string | null,
  env: Readonly<Record<string, string | undefined>>,
  ctx: SectionContext,
): { value: Record<string, unknown> | null; problems: SectionProblem[]; source: string } {
  const names = Object.keys(keys) as (keyof C & string)[];
  const problems: SectionProblem[] = [];
  const source = file ?? 'config';
  let fromFile: Record<string, unknown> = {};
  if (raw !== undefined && raw !== null) {
    if (typeof raw !== 'object' || Array.isArray(raw)) {
      return { value: null, problems: [{ key: section, source, expected: `an object of ${section} settings (${what})`, got: show(raw, false) }], source };
    }
    fromFile = raw as Record<string, unknown>;
    for (const k of Object.keys(fromFile)) {
      if (!(names as string[]).includes(k)) problems.push({ key: `${section}.${k}`, source, expected: `a known ${section} key (${names.join(', ')})` });
    }
  }
  const spec = (k: keyof C & string): SubKey<unknown> => keys[k];
  const envSet = (name: string | undefined): boolean => name !== undefined && env[name] !== undefined && env[name] !== '';
  // No section in the file: off unless the environment configures one.
  if ((raw === undefined || raw === null) && !names.some((k) => envSet(spec(k).env))) return { value: null, problems, source };
  const out: Record<string, unknown> = {};
  const missing: (keyof C & string)[] = [];
  for (const key of names) {
    const s = spec(key);
    let value: unknown;
    let from: string;
    if (envSet(s.env)) {
      value = env[s.env as string];
      from = s.env as string;
    } else if (Object.prototype.hasOwnProperty.call(fromFile, key) && fromFile[key] !== null) {
      value = fromFile[key];
      from = source;
    } else {
      if (s.default === undefined) missing.push(key);
      else out[key] = s.default;
      continue;
    }
    const r = s.parse(value, ctx);
    if ('ok' in r) out[key] = r.ok;
    else problems.push({ key: `${section}.${key}`, source: from, expected: r.expected, got: show(value, s.secret === true) });
  }
  for (const key of missing) {
    const e = spec(key).env;
    problems.push({ key: `${section}.${key}`, source, expected: `a value (required${e === undefined ? '' : `; or set ${e}`})` });
  }
  return { value: out, problems, source };
}

/** A section with its secrets masked, for printing (check-config) and logs. */
export function redactSection<C extends object>(keys: SectionKeys<C>, value: C): Record<string, unknown> {
  const out: Record<string, unknown> = { ...(value as Record<string, unknown>) };
  for (const k of Object.keys(keys) as (keyof C & string)[]) if ((keys[k] as SubKey<unknown>).secret === true && out[k] !== null) out[k] = '(hidden)';
  return out;
}

/**
 * A server's address (uplink, mqtt, smtp): a URL of one of `schemes` (`https:`), without a query,
 * a fragment or credentials (those are keys of their own, kept out of what is shown).
 */
export function serverUrl(raw: unknown, schemes: readonly string[], expected: string, credentials: string): { url: URL } | { expected: string } {
  if (typeof raw !== 'string') return { expected };
  let u: URL;
  try {
    u = new URL(raw.trim());
  } catch {
    return { expected };
  }
  if (!schemes.includes(u.protocol) || u.hostname === '' || u.search !== '' || u.hash !== '') return { expected };
  if (u.username !== '' || u.password !== '') return { expected: `${expected}, without credentials (use ${credentials})` };
  return { url: u };
}

/** The path of a file the daemon must read (TLS material), checked readable now so check-config finds a wrong path. */
export function readableFile(raw: unknown, what: string): Parsed<string> {
  const r = text(raw, `the path of ${what}`);
  if (!('ok' in r)) return r;
  try {
    accessSync(r.ok, constants.R_OK);
  } catch (e) {
    return { expected: `a readable file with ${what} (${(e as NodeJS.ErrnoException).code ?? 'unreadable'})` };
  }
  return r;
}
