/**
 * Errors on the wire (docs/spec/wire-notes.md §2): the one place where error codes become HTTP statuses, and
 * the error grid every failed request answers with: meta `err` (Marker), `dis` (a message a
 * person can act on), `errCode` (the stable HL_ code, so clients and tests need not parse `dis`)
 * and, only when debugging is on, `errTrace` (the stack).
 */
import { HDict, HGrid, MARKER } from '../haystack/values.js';
import { type ErrorCode, ErrorCodes, isHayloftError } from '../lib/errors.js';
import { cutMessage } from '../lib/quote.js';

const STATUS: Partial<Record<ErrorCode, number>> = {
  [ErrorCodes.BAD_VALUE]: 400,
  [ErrorCodes.BAD_GRID]: 400,
  [ErrorCodes.BAD_ZINC]: 400,
  [ErrorCodes.BAD_FILTER]: 400,
  [ErrorCodes.BAD_RANGE]: 400,
  [ErrorCodes.BAD_OFFSET]: 400,
  [ErrorCodes.BAD_REQUEST]: 400,
  // A zone name in a request (a range, a DateTime) that does not exist is the client's mistake.
  [ErrorCodes.UNKNOWN_TZ]: 400,
  [ErrorCodes.INVALID_RECORD]: 400,
  [ErrorCodes.LIVE_TAG]: 400,
  [ErrorCodes.NOT_WRITABLE]: 400,
  [ErrorCodes.OUT_OF_RANGE]: 400,
  [ErrorCodes.CONFLICT]: 400,
  [ErrorCodes.REFERENCED]: 400,
  // 400, not 404: docs/spec/wire-notes.md §2 answers an unknown point of a his op with 400, and 404 is kept
  // for an unknown op so a client can tell "wrong URL" from "wrong id".
  [ErrorCodes.NOT_FOUND]: 400,
  // An unknown or expired watch is answered like an unknown point: the client's cue to call
  // watchSub again (docs/spec/wire-notes.md §6), not a wrong URL.
  [ErrorCodes.WATCH_NOT_FOUND]: 400,
  [ErrorCodes.WATCH_LIMIT]: 400,
  [ErrorCodes.BAD_LEASE]: 400,
  // Writing samples of another kind than a point's history holds is the client's to fix
  // (docs/errors.md: 400); without this line the code fell through to 500 and hid its message.
  [ErrorCodes.HIS_KIND]: 400,
  [ErrorCodes.HIS_BEFORE_FLOOR]: 400,
  [ErrorCodes.CLOCK_UNTRUSTED]: 503,
  // Auth (docs/spec/wire-notes.md §2 and §3). The token endpoint's OAuth JSON body and impersonation's bare
  // `Cannot impersonate` text are written by their handlers; the statuses are decided here.
  [ErrorCodes.UNAUTHORIZED]: 401,
  [ErrorCodes.INVALID_CLIENT]: 401,
  [ErrorCodes.FORBIDDEN]: 403,
  [ErrorCodes.CANNOT_IMPERSONATE]: 400,
  [ErrorCodes.INVALID_GRANT]: 400,
  [ErrorCodes.UNSUPPORTED_GRANT]: 400,
  [ErrorCodes.INVALID_TOKEN_REQUEST]: 400,
  [ErrorCodes.WEAK_PASSWORD]: 400,
  [ErrorCodes.LOCKED_OUT]: 429,
  // The Haystack auth spec answers a failed SCRAM proof with 403 (docs/haystack4.md).
  [ErrorCodes.AUTH_FAILED]: 403,
  // Commissioning (discover, learn) talks to devices during the request: a connector configured
  // wrongly is the client's to fix; a device that does not answer or refuses is a gateway's error.
  [ErrorCodes.CANNOT_LEARN]: 400,
  [ErrorCodes.BAD_REG_MAP]: 400,
  [ErrorCodes.DRIVER_CONFIG]: 400,
  [ErrorCodes.DRIVER_DOWN]: 504,
  [ErrorCodes.DRIVER_REFUSED]: 502,
  [ErrorCodes.UNKNOWN_OP]: 404,
  [ErrorCodes.METHOD_NOT_ALLOWED]: 405,
  [ErrorCodes.NOT_ACCEPTABLE]: 406,
  // The chosen format cannot hold the answer (a Grid in a CSV cell): the client may ask for another.
  [ErrorCodes.CANNOT_ENCODE]: 406,
  [ErrorCodes.TOO_LARGE]: 413,
  [ErrorCodes.LIMIT]: 400,
  // History refused below the free-space floor (config historyMinFreeBytes): 507 Insufficient
  // Storage (RFC 4918 §11.5) says the server cannot store what was sent, while the request was
  // fine and other writes still work; a 5xx, so clients that retry history keep it and retry.
  [ErrorCodes.STORAGE_FULL]: 507,
  // The server is busy reading other bodies: the client retries after Retry-After.
  [ErrorCodes.BUSY]: 503,
  // A GraphQL query over its depth, field or history-point bounds: the client's to narrow.
  [ErrorCodes.GRAPHQL_LIMIT]: 400,
  [ErrorCodes.UNSUPPORTED_MEDIA_TYPE]: 415,
  // A configuration problem surfacing during a request is the server's fault, not the client's.
  [ErrorCodes.BAD_CONFIG]: 500,
  [ErrorCodes.INTERNAL]: 500,
};

/** The HTTP status of an error: by code; other HL_BAD_* codes are 400; anything else is 500. */
export function statusOf(e: unknown): number {
  if (!isHayloftError(e)) return 500;
  const s = STATUS[e.code];
  if (s !== undefined) return s;
  return (e.code as string).startsWith('HL_BAD_') ? 400 : 500;
}

/** Headers an error's status calls for: the challenge of a 401, when to retry a 429. */
export function errorHeaders(e: unknown): Record<string, string> {
  if (!isHayloftError(e)) return {};
  const h: Record<string, string> = {};
  // RFC 6750 §3 for bearer tokens; RFC 6749 §5.2 asks for the scheme the client authenticated with.
  if (e.code === ErrorCodes.UNAUTHORIZED) h['WWW-Authenticate'] = 'Bearer';
  if (e.code === ErrorCodes.INVALID_CLIENT) h['WWW-Authenticate'] = 'Basic';
  if (e.retryAfter !== undefined) h['Retry-After'] = String(Math.max(0, Math.ceil(e.retryAfter)));
  return h;
}

export interface ErrorGridOptions {
  /** Include `errTrace`. */
  debug: boolean;
  /** Shown in the message of an unexpected error, so an operator can find it in the log. */
  reqId?: number;
}

/** The error grid for an error; unexpected errors get a message that reveals no internals. */
export function errorGrid(e: unknown, opts: ErrorGridOptions): HGrid {
  const status = statusOf(e);
  // 502 and 504 (a device refused or did not answer a commissioning request) say what happened.
  const expected = isHayloftError(e) && status !== 500;
  // cutMessage: a message quoting input without quoteInput still stays short (lib/quote.ts).
  const dis = expected
    ? cutMessage(e.message)
    : `unexpected server error${opts.reqId === undefined ? '' : ` (request ${opts.reqId})`}: the server log has the details`;
  const meta: Record<string, string | typeof MARKER> = {
    err: MARKER,
    dis,
    errCode: isHayloftError(e) ? e.code : ErrorCodes.INTERNAL,
  };
  if (opts.debug) meta.errTrace = e instanceof Error ? (e.stack ?? `${e.name}: ${e.message}`) : String(e);
  return HGrid.empty(HDict.of(meta));
}
