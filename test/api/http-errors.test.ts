import t from 'tap';
import { errorGrid, errorHeaders, statusOf } from '../../src/api/http-errors.js';
import { MARKER } from '../../src/haystack/values.js';
import { type ErrorCode, ErrorCodes, HayloftError } from '../../src/lib/errors.js';

const err = (code: ErrorCode, opts?: { retryAfter?: number }): HayloftError => new HayloftError(code, `message of ${code}`, opts);

t.test('codes map to statuses in one table', async (t) => {
  const expected: [ErrorCode, number][] = [
    [ErrorCodes.BAD_VALUE, 400],
    [ErrorCodes.BAD_GRID, 400],
    [ErrorCodes.BAD_ZINC, 400],
    [ErrorCodes.BAD_FILTER, 400],
    [ErrorCodes.BAD_RANGE, 400],
    [ErrorCodes.BAD_OFFSET, 400],
    [ErrorCodes.BAD_REQUEST, 400],
    [ErrorCodes.UNKNOWN_TZ, 400],
    [ErrorCodes.INVALID_RECORD, 400],
    [ErrorCodes.CONFLICT, 400],
    [ErrorCodes.REFERENCED, 400],
    [ErrorCodes.NOT_FOUND, 400],
    [ErrorCodes.UNAUTHORIZED, 401],
    [ErrorCodes.INVALID_CLIENT, 401],
    [ErrorCodes.FORBIDDEN, 403],
    [ErrorCodes.CANNOT_IMPERSONATE, 400],
    [ErrorCodes.INVALID_GRANT, 400],
    [ErrorCodes.UNSUPPORTED_GRANT, 400],
    [ErrorCodes.INVALID_TOKEN_REQUEST, 400],
    [ErrorCodes.WEAK_PASSWORD, 400],
    [ErrorCodes.LOCKED_OUT, 429],
    [ErrorCodes.UNKNOWN_OP, 404],
    [ErrorCodes.METHOD_NOT_ALLOWED, 405],
    [ErrorCodes.NOT_ACCEPTABLE, 406],
    [ErrorCodes.CANNOT_ENCODE, 406],
    [ErrorCodes.TOO_LARGE, 413],
    [ErrorCodes.UNSUPPORTED_MEDIA_TYPE, 415],
    [ErrorCodes.BAD_CONFIG, 500],
    [ErrorCodes.STORE_UNAVAILABLE, 500],
    [ErrorCodes.STORE_LOCKED, 500],
    [ErrorCodes.LISTEN_FAILED, 500],
    [ErrorCodes.INTERNAL, 500],
  ];
  for (const [code, status] of expected) t.equal(statusOf(err(code)), status, `${code} -> ${status}`);
  t.equal(statusOf(new HayloftError('HL_BAD_SOMETHING_NEW' as ErrorCode, 'x')), 400, 'a future HL_BAD_* code is 400');
  t.equal(statusOf(new HayloftError('HL_SOMETHING_NEW' as ErrorCode, 'x')), 500, 'any other unknown code is 500');
  t.equal(statusOf(new Error('plain')), 500);
  t.equal(statusOf('a string'), 500);
});

t.test('headers for 401 and 429', async (t) => {
  t.same(errorHeaders(err(ErrorCodes.UNAUTHORIZED)), { 'WWW-Authenticate': 'Bearer' });
  t.same(errorHeaders(err(ErrorCodes.INVALID_CLIENT)), { 'WWW-Authenticate': 'Basic' });
  t.same(errorHeaders(err(ErrorCodes.LOCKED_OUT, { retryAfter: 2.2 })), { 'Retry-After': '3' });
  t.same(errorHeaders(err(ErrorCodes.NOT_FOUND)), {});
  t.same(errorHeaders(new Error('x')), {});
});

t.test('error grids', async (t) => {
  const g = errorGrid(err(ErrorCodes.CONFLICT), { debug: false });
  t.same(g.colNames(), ['empty']);
  t.equal(g.size, 0);
  t.equal(g.meta.get('err'), MARKER);
  t.equal(g.meta.get('dis'), 'message of HL_CONFLICT');
  t.equal(g.meta.get('errCode'), 'HL_CONFLICT');
  t.notOk(g.meta.has('errTrace'));
  t.match(errorGrid(err(ErrorCodes.CONFLICT), { debug: true }).meta.get('errTrace'), /^HayloftError: message of HL_CONFLICT\n/);

  const internal = errorGrid(new HayloftError(ErrorCodes.STORE_UNAVAILABLE, '/var/lib/hayloft: EIO'), { debug: false, reqId: 7 });
  t.equal(internal.meta.get('dis'), 'unexpected server error (request 7): the server log has the details', 'a 5xx shows no internals');
  t.equal(internal.meta.get('errCode'), 'HL_STORE_UNAVAILABLE');
  const thrown = errorGrid('not an Error', { debug: true });
  t.equal(thrown.meta.get('errCode'), 'HL_INTERNAL');
  t.equal(thrown.meta.get('errTrace'), 'not an Error');
});
