/**
 * The one error class of Hayloft. Every error carries a stable code (`HL_...`): messages may be
 * reworded, codes never change, tests assert codes and the API maps codes to HTTP statuses in one
 * place. docs/errors.md lists every code.
 */

export const ErrorCodes = {
  /** A Haystack value could not be decoded (JSON or Zinc); the message names where. */
  BAD_VALUE: 'HL_BAD_VALUE',
  /** A grid is malformed (missing meta/cols/rows, bad column name, ...). */
  BAD_GRID: 'HL_BAD_GRID',
  /** Zinc text does not follow the grammar; the message gives line and column. */
  BAD_ZINC: 'HL_BAD_ZINC',
  /** A filter does not parse; the message gives the column. */
  BAD_FILTER: 'HL_BAD_FILTER',
  /** A hisRead range does not parse or is empty/inverted. */
  BAD_RANGE: 'HL_BAD_RANGE',
  /** A time-zone name is not known. */
  UNKNOWN_TZ: 'HL_UNKNOWN_TZ',
  /** A DateTime's UTC offset is not the one in force in its zone at that instant. */
  BAD_OFFSET: 'HL_BAD_OFFSET',
  /** A value cannot be represented in the requested encoding (e.g. a Grid in a CSV cell). */
  CANNOT_ENCODE: 'HL_CANNOT_ENCODE',
} as const;

export type ErrorCode = (typeof ErrorCodes)[keyof typeof ErrorCodes];

export class HayloftError extends Error {
  readonly code: ErrorCode;

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'HayloftError';
    this.code = code;
  }
}

export function isHayloftError(e: unknown, code?: ErrorCode): e is HayloftError {
  return e instanceof HayloftError && (code === undefined || e.code === code);
}
