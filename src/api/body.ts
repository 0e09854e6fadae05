/**
 * Reading a request body under a size limit. The limit is checked against Content-Length before
 * anything is read and again on every chunk while streaming, so a body over the limit is refused
 * as soon as it crosses it and is never held whole in memory (a device has little to spare).
 * The bytes read are also taken from the server's budget of bodies in flight (guard.ts).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { ErrorCodes, HayloftError } from '../lib/errors.js';
import type { BodyBudget } from './guard.js';
import { groupThousands } from '../lib/quote.js';


function tooLarge(maxBytes: number, limitName: string): HayloftError {
  return new HayloftError(
    ErrorCodes.TOO_LARGE,
    `the request body is larger than the limit of ${groupThousands(maxBytes)} bytes (${limitName}): send the data in smaller batches`,
  );
}

export interface BodyOptions {
  /** The config key of the limit, named in the 413's message. */
  limitName?: string;
  /** Bytes held are taken from it while reading (HL_BUSY when it has none left). */
  budget?: BodyBudget;
}

/** True when the request announces a body (a length above zero, or a transfer coding). */
export function hasBody(req: IncomingMessage): boolean {
  if (req.headers['transfer-encoding'] !== undefined) return true;
  const len = req.headers['content-length'];
  return len !== undefined && len.trim() !== '0';
}

/** The largest body taken whole as Node's parser delivers it (ExchangeRequest.takeBody). */
export const WHOLE_BODY_MAX = 64 * 1024;

/**
 * The length of a body small enough to be taken whole as it is parsed: announced by
 * Content-Length, not chunked, 1 to WHOLE_BODY_MAX bytes; else undefined.
 */
export function wholeBodyLength(req: IncomingMessage): number | undefined {
  const len = req.headers['content-length'];
  if (len === undefined || req.headers['transfer-encoding'] !== undefined) return undefined;
  const n = Number(len);
  return n > 0 && n <= WHOLE_BODY_MAX ? n : undefined;
}

/** Throws HL_TOO_LARGE when Content-Length already says the body is over the limit. */
export function checkLength(req: IncomingMessage, maxBytes: number, limitName = 'maxBodyBytes'): void {
  const len = req.headers['content-length'];
  if (len !== undefined && Number(len) > maxBytes) throw tooLarge(maxBytes, limitName);
}

/** How long the rest of a refused body is read and dropped after the answer went out. */
const DRAIN_MS = 5000;

/**
 * After answering a request whose body was not read (refused before or while reading it): the
 * answer goes out on a connection that stays open, the rest of the body is read and dropped (no
 * memory), and the connection is cut only if the body has not ended DRAIN_MS after the answer
 * was flushed. Closing at once, with the upload still arriving, made the kernel reset the
 * connection, and a client still sending saw EPIPE instead of the 413.
 */
export function drainRefused(req: IncomingMessage, res: ServerResponse): void {
  req.resume();
  res.once('finish', () => {
    if (req.complete) return;
    const socket = req.socket;
    // Each listener goes with the timer: on a kept connection a listener left on the socket per
    // refused request piled up for the connection's life.
    const done = (): void => {
      clearTimeout(timer);
      socket.off('close', done);
      req.off('end', done);
    };
    const timer = setTimeout(() => {
      done();
      if (!req.complete) socket.destroy();
    }, DRAIN_MS);
    timer.unref();
    socket.once('close', done);
    req.once('end', done);
  });
}

const UTF8 = new TextDecoder('utf-8', { fatal: true });

/** A body's bytes as text; HL_BAD_REQUEST when they are not UTF-8. */
export function bodyText(bytes: Uint8Array): string {
  try {
    return UTF8.decode(bytes);
  } catch (e) {
    throw new HayloftError(ErrorCodes.BAD_REQUEST, 'the request body is not valid UTF-8 text', { cause: e });
  }
}

/**
 * The whole body as UTF-8 text when it has already arrived, else undefined (read it with
 * readBodyText). A small request (a read, a watch poll: most of them) comes in one packet with
 * its headers; Node's parser has buffered its body in the request stream by the time the handler
 * has awaited once, so it is taken in one synchronous read: no listeners, no promise, no copy.
 * Throws HL_TOO_LARGE over the limit and HL_BAD_REQUEST when it is not UTF-8. The budget of
 * bodies in flight is not involved: the bytes are already held by the stream.
 */
export function bufferedBodyText(req: IncomingMessage, maxBytes: number, limitName = 'maxBodyBytes'): string | undefined {
  const bytes = bufferedBody(req, maxBytes, limitName);
  return bytes === undefined ? undefined : bodyText(bytes);
}

/** bufferedBodyText's bytes, not yet decoded (bodyText decodes them). */
export function bufferedBody(req: IncomingMessage, maxBytes: number, limitName = 'maxBodyBytes'): Buffer | undefined {
  const len = req.headers['content-length'];
  if (len === undefined || req.readableFlowing === true) return undefined;
  const announced = Number(len);
  if (announced > maxBytes) throw tooLarge(maxBytes, limitName);
  if (!(announced > 0) || req.readableLength !== announced) return undefined;
  return req.read() as Buffer;
}

/**
 * The body as UTF-8 text. Rejects with HL_TOO_LARGE past the limit (and stops reading: the caller
 * answers 413 and closes the connection), HL_BAD_REQUEST when the body is not UTF-8 or the client
 * went away before sending all of it.
 */
export async function readBodyText(req: IncomingMessage, maxBytes: number, opts: BodyOptions = {}): Promise<string> {
  return bodyText(await readBody(req, maxBytes, opts));
}

/** readBodyText's bytes, not yet decoded (bodyText decodes them). */
export function readBody(req: IncomingMessage, maxBytes: number, opts: BodyOptions = {}): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const limitName = opts.limitName ?? 'maxBodyBytes';
    checkLength(req, maxBytes, limitName);
    const budget = opts.budget;
    // With a Content-Length the whole body is taken at once, before reading; else chunk by chunk.
    const announced = Number(req.headers['content-length'] ?? NaN);
    let taken = 0;
    if (budget !== undefined && announced > 0) {
      budget.take(announced);
      taken = announced;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;

    const cleanup = (): void => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('close', onClose);
      // The text decoded from the chunks is the caller's now; the budget counts bodies being read.
      budget?.give(taken);
      taken = 0;
    };
    const fail = (e: HayloftError): void => {
      if (settled) return;
      settled = true;
      cleanup();
      chunks.length = 0;
      reject(e);
    };
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > maxBytes) {
        req.pause();
        fail(tooLarge(maxBytes, limitName));
        return;
      }
      if (budget !== undefined && size > taken) {
        try {
          budget.take(size - taken);
          taken = size;
        } catch (e) {
          req.pause();
          fail(e as HayloftError);
          return;
        }
      }
      chunks.push(chunk);
    };
    const onEnd = (): void => {
      if (settled) return;
      settled = true;
      cleanup();
      resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, size));
    };
    const aborted = (cause?: unknown): void =>
      fail(new HayloftError(ErrorCodes.BAD_REQUEST, 'the request body ended before it was complete (client went away)', { cause }));
    const onError = (e: Error): void => aborted(e);
    const onClose = (): void => {
      if (!req.complete) aborted();
    };

    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('close', onClose);
  });
}
