/**
 * Loading: defaults, then the optional config file (JSON or YAML), then environment overrides. The file's
 * path comes from a `--config <path>` argument (the CLI passes its arguments) or HAYLOFT_CONFIG;
 * the argument wins because it is the more explicit of the two. Every problem found, in the file
 * and in the environment, is reported together in one HL_BAD_CONFIG error whose message names
 * each key, where its value came from and what was expected; `cause` holds the same list.
 *
 * YAML goes through the `yaml` package: no dependencies, its own types, YAML 1.2 (so `no` and
 * `on` stay strings, not booleans by surprise: the "Norway problem" of YAML 1.1 parsers such as
 * js-yaml's defaults), and it collects every syntax error with its line and column instead of
 * stopping at the first, which is what an all-problems-at-once report needs.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import type * as Yaml from 'yaml';
import { ErrorCodes, HayloftError } from '../lib/errors.js';
import { CONFIG_KEYS, CONFIG_SECTIONS, type Config, SCHEMA, type SchemaContext, type ZoneLookup } from './schema.js';
import { loadMqtt } from './mqtt.js';
import { loadBacnetDevice } from './bacnet-device.js';
import { loadSmtp } from './smtp.js';
import { loadUplink } from './uplink.js';

export const CONFIG_ENV = 'HAYLOFT_CONFIG';

export interface ConfigProblem {
  /** The key, or `config` for a problem with the file itself. */
  key: string;
  /** Where the value came from: the file path, an environment variable or `--config`. */
  source: string;
  /** What was expected (or what went wrong with the file). */
  expected: string;
  /** The value given, as text; absent when there was none. */
  got?: string;
}

export interface LoadConfigOptions {
  /** The environment to read overrides from (the CLI passes process.env). */
  env: Readonly<Record<string, string | undefined>>;
  /** Command-line arguments (without node and the script); only `--config` is read. */
  argv?: readonly string[];
  /** A config file path, used when neither argv nor env name one. */
  file?: string;
  zones: ZoneLookup;
  /** Relative paths (the file, dataDir) resolve against this; default process.cwd(). */
  cwd?: string;
  hostname?: () => string;
  /** Says what is wrong with a Haystack filter (uplink.filter, mqtt.filter), or null; unchecked when absent. */
  checkFilter?: (text: string) => string | null;
}

/** `--config <path>` or `--config=<path>`; undefined when absent, '' when given without a path. */
function configArg(argv: readonly string[]): string | undefined {
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    if (a === '--config') return argv[i + 1] ?? '';
    if (a.startsWith('--config=')) return a.slice('--config='.length);
  }
  return undefined;
}

function show(raw: unknown): string {
  const s = typeof raw === 'string' ? JSON.stringify(raw) : JSON.stringify(raw) ?? String(raw);
  return s.length > 80 ? s.slice(0, 77) + '...' : s;
}

/** `.json` files are JSON (strict, as before); any other name is read as YAML, a superset of JSON. */
function isJsonFile(file: string): boolean {
  return path.extname(file).toLowerCase() === '.json';
}

function parseJson(textContent: string, file: string, problems: ConfigProblem[]): unknown {
  try {
    return JSON.parse(textContent);
  } catch (e) {
    problems.push({ key: 'config', source: file, expected: `valid JSON (${(e as Error).message})` });
    return undefined;
  }
}

function parseYaml(textContent: string, file: string, problems: ConfigProblem[]): unknown {
  // uniqueKeys (the default) makes a key given twice an error rather than "the last one wins".
  // prettyErrors fills in linePos; its message (with a code excerpt) is trimmed to one line here.
  // yaml (about 1.6 MiB resident once loaded) only when a YAML file is read; required, not
  // imported, since loading the config is synchronous.
  const { parseDocument } = createRequire(import.meta.url)('yaml') as typeof Yaml;
  const doc = parseDocument(textContent, { prettyErrors: true, uniqueKeys: true });
  if (doc.errors.length > 0) {
    for (const err of doc.errors) {
      const at = err.linePos?.[0];
      const where = at === undefined ? '' : ` at line ${at.line}, column ${at.col}`;
      problems.push({ key: 'config', source: file, expected: `valid YAML (${err.message.split(' at line ')[0] ?? err.code}${where})` });
    }
    return undefined;
  }
  const j: unknown = doc.toJS({ maxAliasCount: 100 });
  // A file of comments only is an empty document: no settings, not an error.
  return j === null || j === undefined ? {} : j;
}

function readFile(file: string, problems: ConfigProblem[]): Record<string, unknown> {
  const format = isJsonFile(file) ? 'JSON' : 'YAML';
  let textContent: string;
  try {
    textContent = readFileSync(file, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'the file does not exist' : code === 'EACCES' ? 'permission denied' : code === 'EISDIR' ? 'it is a folder' : (e as Error).message;
    problems.push({ key: 'config', source: file, expected: `a readable config file, JSON or YAML (${why})` });
    return {};
  }
  const j = format === 'JSON' ? parseJson(textContent, file, problems) : parseYaml(textContent, file, problems);
  if (j === undefined) return {};
  if (j === null || typeof j !== 'object' || Array.isArray(j)) {
    problems.push({ key: 'config', source: file, expected: `a ${format} object of settings (key: value)`, got: show(j) });
    return {};
  }
  const obj = j as Record<string, unknown>;
  for (const k of Object.keys(obj)) {
    if (!(CONFIG_KEYS as string[]).includes(k) && !(CONFIG_SECTIONS as readonly string[]).includes(k)) {
      // A misspelt key would otherwise be silently ignored and its default used.
      problems.push({ key: k, source: file, expected: `a known key (${[...CONFIG_KEYS, ...CONFIG_SECTIONS].join(', ')})` });
    }
  }
  return obj;
}

export function formatProblems(problems: readonly ConfigProblem[]): string {
  const lines = problems.map((p) => `  ${p.key} (from ${p.source}): expected ${p.expected}${p.got === undefined ? '' : `, got ${p.got}`}`);
  return `invalid configuration (${problems.length} problem${problems.length === 1 ? '' : 's'}):\n${lines.join('\n')}`;
}

/** Loads, validates and freezes the configuration; throws HL_BAD_CONFIG listing every problem. */
export function loadConfig(opts: LoadConfigOptions): Config {
  const env = opts.env;
  const cwd = opts.cwd ?? process.cwd();
  const problems: ConfigProblem[] = [];
  const ctx: SchemaContext = { zones: opts.zones, ...(opts.hostname ? { hostname: opts.hostname } : {}) };

  let file: string | undefined;
  const arg = configArg(opts.argv ?? []);
  if (arg !== undefined) {
    if (arg === '' || arg.startsWith('--')) problems.push({ key: 'config', source: '--config', expected: 'a file path after --config' });
    else file = arg;
  } else if (env[CONFIG_ENV] !== undefined && env[CONFIG_ENV] !== '') file = env[CONFIG_ENV];
  else file = opts.file;

  const configFile = file === undefined ? null : path.resolve(cwd, file);
  const fromFile = configFile === null ? {} : readFile(configFile, problems);

  const out: Record<string, unknown> = {};
  for (const key of CONFIG_KEYS) {
    const spec = SCHEMA[key];
    const envRaw = env[spec.env];
    let raw: unknown;
    let source: string;
    // An empty variable counts as unset, as in `HAYLOFT_HOST= hayloft serve`.
    if (envRaw !== undefined && envRaw !== '') {
      raw = envRaw;
      source = spec.env;
    } else if (Object.prototype.hasOwnProperty.call(fromFile, key)) {
      raw = fromFile[key];
      source = configFile as string;
    } else {
      out[key] = spec.default(ctx);
      continue;
    }
    const r = spec.parse(raw, ctx);
    if ('ok' in r) out[key] = r.ok;
    else problems.push({ key, source, expected: r.expected, got: show(raw) });
  }
  const uplink = loadUplink(fromFile.uplink, configFile, env, opts.checkFilter ? { checkFilter: opts.checkFilter } : {});
  problems.push(...uplink.problems);
  out.uplink = uplink.value;
  const mqtt = loadMqtt(fromFile.mqtt, configFile, env, opts.checkFilter ? { checkFilter: opts.checkFilter } : {});
  problems.push(...mqtt.problems);
  out.mqtt = mqtt.value;
  const bacnetDevice = loadBacnetDevice(fromFile.bacnetDevice, configFile, env, opts.checkFilter ? { checkFilter: opts.checkFilter } : {});
  problems.push(...bacnetDevice.problems);
  out.bacnetDevice = bacnetDevice.value;
  const smtp = loadSmtp(fromFile.smtp, configFile, env);
  problems.push(...smtp.problems);
  out.smtp = smtp.value;
  // Both keep cursors in the data folder under their name: one name would mix their backlogs.
  if (uplink.value !== null && mqtt.value !== null && uplink.value.name === mqtt.value.name) {
    problems.push({ key: 'mqtt.name', source: configFile ?? 'config', expected: `a name other than the uplink's ("${uplink.value.name}")` });
  }

  if (problems.length > 0) {
    throw new HayloftError(ErrorCodes.BAD_CONFIG, formatProblems(problems), { cause: problems });
  }
  out.dataDir = path.resolve(cwd, out.dataDir as string);
  out.configFile = configFile;
  return Object.freeze(out as unknown as Config);
}
