/**
 * Limits on the shape of what the decoders accept (docs/configuration.md). Hostile grids nested
 * 10,000 deep overflowed the stack of the recursive decoders (every op answered 500), and a 5 MB
 * Ref or a 100,000-column grid costs memory and time out of all proportion to any real request.
 * Each limit refused is an HL_LIMIT error naming the limit, answered 400.
 */
import { ErrorCodes, HayloftError } from '../lib/errors.js';
import { groupThousands } from '../lib/quote.js';

export interface ShapeLimits {
  /**
   * Lists, dicts and grids inside one another, counted from a grid's cell or meta (a list in a
   * cell is level 1). Real data goes a few levels deep; the decoders recurse once per level.
   */
  readonly maxDepth: number;
  /** Characters of one Str, Ref, Uri, XStr or other scalar text, and of a tag or column name. */
  readonly maxValueChars: number;
  /** Columns of one grid (a multi-point hisRead or hisWrite has one per point). */
  readonly maxCols: number;
}

/** Nesting accepted in requests; fixed, as nothing real needs more. */
export const MAX_DEPTH = 32;

/** Request defaults; `maxValueChars` and `maxCols` are configurable (Config). */
export const DEFAULT_SHAPE_LIMITS: ShapeLimits = Object.freeze({ maxDepth: MAX_DEPTH, maxValueChars: 65_536, maxCols: 1_000 });

/**
 * For what this server wrote itself (records in the store): limits lowered in the config must
 * not make existing records unreadable. The depth is still bounded, for the stack's sake.
 */
export const STORED_SHAPE_LIMITS: ShapeLimits = Object.freeze({ maxDepth: 256, maxValueChars: Infinity, maxCols: Infinity });


/**
 * HL_LIMIT: at `place` (a path such as `rows[3].dis`, or ''), `what` is above the limit named
 * `name`, `at` saying where in a text: `rows[3].dis: a text of 100,002 chars is above the
 * limit of 65,536 (maxValueChars)`, `zinc: ... (maxDepth) at line 3, column 33`.
 */
export function limitError(place: string, what: string, limit: number, name: string, at = ''): HayloftError {
  return new HayloftError(ErrorCodes.LIMIT, `${place === '' ? '' : `${place}: `}${what} is above the limit of ${groupThousands(limit)} (${name})${at}`);
}

/** `a text of 100,002 chars`. */
export function charsOf(text: string): string {
  return `a text of ${groupThousands(text.length)} chars`;
}
