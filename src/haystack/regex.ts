/**
 * Regular expressions of filters (`tag =~ /pattern/`) run on RE2 semantics (re2js, pure JS):
 * matching takes time linear in the text, whatever the pattern. V8's backtracking engine took
 * more than 10 s on `(a+)+$` against 49 characters, and a read holds the event loop while it
 * runs: no request answered, no device polled. docs/filters.md lists what is accepted.
 *
 * Patterns are written as JavaScript regexes (no flags) and translated to RE2 syntax; what RE2
 * cannot run in linear time (backreferences, lookahead) is refused at parse time with a message
 * naming the feature. Captureless lookbehinds are accepted: re2js runs them in linear time too.
 */
import { createRequire } from 'node:module';
import type { RE2JS as RE2JSClass } from 're2js';
import { ErrorCodes, HayloftError } from '../lib/errors.js';

/** A compiled pattern: `test` is unanchored (as `RegExp.test`) and keeps no state. */
export interface FilterRegex {
  test(text: string): boolean;
}

/**
 * Instructions one compiled pattern may hold. RE2 bounds each repeat count at 1,000, but
 * `[a-z]{1000}` repeated in a long pattern still makes a program costly to build and to run on
 * every entity; 5,000 leaves room for any pattern a person writes.
 */
export const MAX_REGEX_PROGRAM = 5000;

/**
 * re2js, loaded on the first filter with `=~` (about 1.3 MiB resident that most gateways, whose
 * filters never use a regex, need not carry; issue 19). Its CommonJS build, as compiling a filter
 * is synchronous.
 */
let engine: typeof RE2JSClass | undefined;
function re2(): typeof RE2JSClass {
  engine ??= (createRequire(import.meta.url)('re2js') as { RE2JS: typeof RE2JSClass }).RE2JS;
  return engine;
}

const BACKREFERENCES = 'backreferences (\\1, \\k<name>) are not supported';

/**
 * True when the pattern holds a backreference by name (`\k<name>`). The translation to RE2
 * syntax would turn it silently into the letters `k<name>`, a different pattern, so it is
 * looked for first. (`\1`..`\9` are refused by RE2 itself.)
 */
function hasNamedBackreference(pattern: string): boolean {
  for (let i = 0; i < pattern.length - 2; i++) {
    if (pattern.charCodeAt(i) !== 92) continue;
    if (pattern[i + 1] === 'k' && pattern[i + 2] === '<') return true;
    i++; // an escaped character, perhaps a backslash: never the start of an escape
  }
  return false;
}

/** Features RE2 refuses, worded for the person who wrote the filter. */
const UNSUPPORTED: readonly [RegExp, string][] = [
  [/invalid escape sequence: `\\[1-9]/, BACKREFERENCES],
  [/unsupported Perl syntax: `\(\?[=!]/, 'lookahead ((?=...), (?!...)) is not supported'],
  [/invalid capture in lookbehind/, 'a lookbehind may not hold a capturing group: use (?:...) inside it'],
  [/invalid repeat count/, 'a repeat count is above 1000'],
];

function refuse(why: string, cause?: unknown): HayloftError {
  return new HayloftError(ErrorCodes.BAD_FILTER, `${why}; filters take linear-time RE2 patterns, see docs/filters.md`, { cause });
}

/**
 * Compiles a filter's pattern; throws HL_BAD_FILTER whose message says what is wrong or not
 * accepted (the caller adds the pattern and where it is).
 */
export function compileFilterRegex(pattern: string): FilterRegex {
  if (hasNamedBackreference(pattern)) throw refuse(BACKREFERENCES);
  const RE2JS = re2();
  let re: RE2JSClass;
  try {
    re = RE2JS.compile(RE2JS.translateRegExp(pattern), RE2JS.LOOKBEHINDS);
  } catch (e) {
    const raw = e instanceof Error ? e.message.replace(/^error parsing regexp: /, '') : String(e);
    const known = UNSUPPORTED.find(([m]) => m.test(raw));
    throw refuse(known === undefined ? raw : known[1], e);
  }
  if (re.programSize() > MAX_REGEX_PROGRAM) {
    throw refuse(`the pattern compiles to ${re.programSize()} instructions, above the limit of ${MAX_REGEX_PROGRAM}`);
  }
  return { test: (text) => re.test(text) };
}
