/**
 * Reading a request body under a size limit. The limit is checked against Content-Length before
 * anything is read and again on every chunk while streaming, so a body over the limit is refused
 * as soon as it crosses it and is never held whole in memory (a device has little to spare).
 */
import type { IncomingMessage } from 'node:http';
import { ErrorCodes, HayloftError } from '../lib/errors.js';

function tooLarge(maxBytes: number): HayloftError {
  return new HayloftError(
    ErrorCodes.TOO_LARGE,
    `the request body is larger than the limit of ${maxBytes} bytes (maxBodyBytes): send the data in smaller batches`,
  );
}

/** True when the request announces a body (a length above zero, or a transfer coding). */
export function hasBody(req: IncomingMessage): boolean {
  if (req.headers['transfer-encoding'] !== undefined) return true;
  const len = req.headers['content-length'];
  return len !== undefined && len.trim() !== '0';
}

/** Throws HL_TOO_LARGE when Content-Length already says the body is over the limit. */
export function checkLength(req: IncomingMessage, maxBytes: number): void {
  const len = req.headers['content-length'];
  if (len !== undefined && Number(len) > maxBytes) throw tooLarge(maxBytes);
}

/**
 * The body as UTF-8 text. Rejects with HL_TOO_LARGE past the limit (and stops reading: the caller
 * answers 413 and closes the connection), HL_BAD_REQUEST when the body is not UTF-8 or the client
 * went away before sending all of it.
 */
export function readBodyText(req: IncomingMessage, maxBytes: number): Promise<string> {
  return new Promise((resolve, reject) => {
    checkLength(req, maxBytes);
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;

    const cleanup = (): void => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('close', onClose);
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
        fail(tooLarge(maxBytes));
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = (): void => {
      if (settled) return;
      settled = true;
      cleanup();
      try {
        resolve(new TextDecoder('utf-8', { fatal: true }).decode(Buffer.concat(chunks, size)));
      } catch (e) {
        reject(new HayloftError(ErrorCodes.BAD_REQUEST, 'the request body is not valid UTF-8 text', { cause: e }));
      }
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
