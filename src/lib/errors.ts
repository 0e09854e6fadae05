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
  /** The data folder is held by another process (LevelDB lock). */
  STORE_LOCKED: 'HL_STORE_LOCKED',
  /** The data folder cannot be created, read or opened. */
  STORE_UNAVAILABLE: 'HL_STORE_UNAVAILABLE',
  /**
   * A history write refused because the data folder's disk is below its free-space floor (config
   * historyMinFreeBytes): free space and retry. Other writes (logins, records) still work.
   */
  STORAGE_FULL: 'HL_STORAGE_FULL',
  /** The data folder was written by a newer Hayloft (format version too high). */
  STORE_VERSION: 'HL_STORE_VERSION',
  /** A history write whose kind differs from the kind of the samples the point already holds. */
  HIS_KIND: 'HL_HIS_KIND',
  /** A hisWrite sample dated before 2000, from a writer whose clock is not set (1970): docs/clock.md. */
  HIS_BEFORE_FLOOR: 'HL_HIS_BEFORE_FLOOR',
  /** Something that needs a set clock (a timed override) asked while it cannot be trusted: docs/clock.md. */
  CLOCK_UNTRUSTED: 'HL_CLOCK_UNTRUSTED',
  /** A request is malformed in a way that is not about one value (missing column, bad shape). */
  BAD_REQUEST: 'HL_BAD_REQUEST',
  /** A record or point named by id or fully qualified name does not exist. */
  NOT_FOUND: 'HL_NOT_FOUND',
  /** watchPoll/watchSub of a watch that is unknown, closed, expired or another user's: subscribe again. */
  WATCH_NOT_FOUND: 'HL_WATCH_NOT_FOUND',
  /** Too many open watches for one user, or too many points on one watch (config limits). */
  WATCH_LIMIT: 'HL_WATCH_LIMIT',
  /** A watch lease that is not a positive Number with a time unit (s, sec, min, h, hr, day). */
  BAD_LEASE: 'HL_BAD_LEASE',
  /** A record is not valid (no primary marker, bad name, dangling ref, changed id ...). */
  INVALID_RECORD: 'HL_INVALID_RECORD',
  /**
   * createRec/updateRec of a live tag the server keeps (cur*, his*, conn*, write*, sync*):
   * readings come from drivers and hisWrite, writes go through pointWrite.
   */
  LIVE_TAG: 'HL_LIVE_TAG',
  /** pointWrite of a record that is not a point with the `writable` marker. */
  NOT_WRITABLE: 'HL_NOT_WRITABLE',
  /** pointWrite of a Number outside the point's `minVal`/`maxVal`. */
  OUT_OF_RANGE: 'HL_OUT_OF_RANGE',
  /** `name` already used by a sibling, or a supplied id already exists. */
  CONFLICT: 'HL_CONFLICT',
  /** deleteRec of an entity that others reference. */
  REFERENCED: 'HL_REFERENCED',
  /** The configuration is invalid (every problem is listed). */
  BAD_CONFIG: 'HL_BAD_CONFIG',
  /**
   * A request is over a limit on its shape (nesting depth, length of a value, columns, length of
   * a filter or range); the message names the limit and its value (docs/configuration.md).
   */
  LIMIT: 'HL_LIMIT',
  /** Too many request bodies being read at once: retry after the time given (503, Retry-After). */
  BUSY: 'HL_BUSY',
  /** The request body is larger than the configured limit. */
  TOO_LARGE: 'HL_TOO_LARGE',
  /** No supported format among those the request accepts, or an unsupported body type. */
  NOT_ACCEPTABLE: 'HL_NOT_ACCEPTABLE',
  UNSUPPORTED_MEDIA_TYPE: 'HL_UNSUPPORTED_MEDIA_TYPE',
  /** Unknown operation or path. */
  UNKNOWN_OP: 'HL_UNKNOWN_OP',
  /** The operation exists but not with this HTTP method. */
  METHOD_NOT_ALLOWED: 'HL_METHOD_NOT_ALLOWED',
  /** Missing, invalid, expired or revoked access token (401 with WWW-Authenticate: Bearer). */
  UNAUTHORIZED: 'HL_UNAUTHORIZED',
  /** Authenticated, but a permission is missing (403). */
  FORBIDDEN: 'HL_FORBIDDEN',
  /** X-IMPERSONATE refused: 400 with the body `Cannot impersonate`, deliberately brief. */
  CANNOT_IMPERSONATE: 'HL_CANNOT_IMPERSONATE',
  /** OAuth2: unknown client or wrong client secret (RFC 6749 invalid_client). */
  INVALID_CLIENT: 'HL_INVALID_CLIENT',
  /** OAuth2: wrong user credentials, or an unknown, expired or revoked refresh token (invalid_grant). */
  INVALID_GRANT: 'HL_INVALID_GRANT',
  /** OAuth2: grant_type other than password and refresh_token (unsupported_grant_type). */
  UNSUPPORTED_GRANT: 'HL_UNSUPPORTED_GRANT',
  /** OAuth2: a malformed token request (invalid_request). */
  INVALID_TOKEN_REQUEST: 'HL_INVALID_TOKEN_REQUEST',
  /** Too many failed logins for this user or address: retry after the time given (429). */
  LOCKED_OUT: 'HL_LOCKED_OUT',
  /** Haystack 4 SCRAM: the proof does not match (wrong password, unknown user, tampered message): 403. */
  AUTH_FAILED: 'HL_AUTH_FAILED',
  /** A new password does not meet the password policy. */
  WEAK_PASSWORD: 'HL_WEAK_PASSWORD',
  /** The HTTP server cannot listen on its address (port in use, no permission, no such address). */
  LISTEN_FAILED: 'HL_LISTEN_FAILED',
  /**
   * Drivers: a connector or point is configured wrongly (uri, modbusCur, bacnetCur, unit, kind):
   * the point's curStatus is `fault` with this message as curErr.
   */
  DRIVER_CONFIG: 'HL_DRIVER_CONFIG',
  /** Drivers: the device does not answer or the link is lost: curStatus `down`, retried with backoff. */
  DRIVER_DOWN: 'HL_DRIVER_DOWN',
  /** Drivers: the device answered but refused the read (no such register or object): curStatus `fault`. */
  DRIVER_REFUSED: 'HL_DRIVER_REFUSED',
  /** Uplink: the upstream service cannot be reached, timed out or answered 5xx/429; retried with backoff. */
  UPLINK_UNREACHABLE: 'HL_UPLINK_UNREACHABLE',
  /** Uplink: the upstream refused the configured credentials (client, user or refresh token). */
  UPLINK_AUTH: 'HL_UPLINK_AUTH',
  /** Uplink: the upstream refused a request (an error grid); the message carries its code and text. */
  UPLINK_REJECTED: 'HL_UPLINK_REJECTED',
  /** A Modbus register map (CSV) with bad rows: every one is listed with its line number. */
  BAD_REG_MAP: 'HL_BAD_REG_MAP',
  /** discover or learn: the network or device cannot be used for it (no such driver, not a connector of a learnable kind). */
  CANNOT_LEARN: 'HL_CANNOT_LEARN',
  /** MQTT edge node: the broker cannot be reached, refused the connection or dropped it; retried with backoff, samples kept. */
  MQTT_UNREACHABLE: 'HL_MQTT_UNREACHABLE',
  /** MQTT edge node: a DCMD (write from a host application) was refused and logged; nothing was written. */
  MQTT_COMMAND_REFUSED: 'HL_MQTT_COMMAND_REFUSED',
  /** BACnet: the foreign-device registration with the configured BBMD failed (refused, or no answer); retried with backoff, `/api/health` degraded meanwhile. */
  BBMD_UNREGISTERED: 'HL_BBMD_UNREGISTERED',
  /** A backup file that is not one, is damaged or truncated, or is from a newer Hayloft. */
  BAD_BACKUP: 'HL_BAD_BACKUP',
  /** `hayloft restore` into a data folder that is not empty. */
  RESTORE_NOT_EMPTY: 'HL_RESTORE_NOT_EMPTY',
  /** GraphQL: a query deeper, wider or with more history data points than the limits allow. */
  GRAPHQL_LIMIT: 'HL_GRAPHQL_LIMIT',
  /** `hayloft update`: the artifact is unsigned, badly signed, not a release, or the install cannot take it; nothing was changed. */
  UPDATE_REFUSED: 'HL_UPDATE_REFUSED',
  /** `hayloft update`: the new version did not come up healthy in time; the previous code and data are back. */
  UPDATE_ROLLED_BACK: 'HL_UPDATE_ROLLED_BACK',
  /** Anything unexpected: logged, answered with 500, the server keeps serving. */
  INTERNAL: 'HL_INTERNAL',
} as const;

export type ErrorCode = (typeof ErrorCodes)[keyof typeof ErrorCodes];

export class HayloftError extends Error {
  readonly code: ErrorCode;
  /** Seconds a client should wait before retrying (LOCKED_OUT); the API sends Retry-After. */
  readonly retryAfter: number | undefined;

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown; retryAfter?: number }) {
    super(message, options);
    this.name = 'HayloftError';
    this.code = code;
    this.retryAfter = options?.retryAfter;
  }
}

export function isHayloftError(e: unknown, code?: ErrorCode): e is HayloftError {
  return e instanceof HayloftError && (code === undefined || e.code === code);
}
