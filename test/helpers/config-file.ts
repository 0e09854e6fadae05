/** A config file written for a test, and the problems loadConfig reports for it (config section tests). */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Test } from 'tap';
import { type ConfigProblem, loadConfig } from '../../src/config/index.js';
import { ErrorCodes, HayloftError } from '../../src/lib/errors.js';
import { tempDir } from './tmp.js';

export function configFile(t: Test, content: unknown, dir = tempDir(t)): string {
  const p = path.join(dir, 'hayloft.json');
  writeFileSync(p, JSON.stringify(content));
  return p;
}

/** The problems by key; a test failure when the config loads. */
export function problemsOf(t: Test, opts: Parameters<typeof loadConfig>[0]): Map<string, ConfigProblem> {
  try {
    loadConfig(opts);
  } catch (e) {
    t.ok(e instanceof HayloftError && e.code === ErrorCodes.BAD_CONFIG, 'HL_BAD_CONFIG');
    return new Map(((e as HayloftError).cause as ConfigProblem[]).map((p) => [p.key, p]));
  }
  t.fail('the config loaded');
  return new Map();
}
