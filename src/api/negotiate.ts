/**
 * Content negotiation. The response format follows the whole Accept header as HTTP defines it
 * (RFC 9110 §12.5.1: media ranges, q-values, wildcards, q=0 excluding), parsed by `negotiator`
 * (the jshttp library Express uses) rather than by hand: its quoting, specificity and tie rules
 * are what clients are tested against. The request body format follows Content-Type.
 */
import Negotiator from 'negotiator';
import { ErrorCodes, HayloftError } from '../lib/errors.js';
import { CODECS, type Codec, JSON_CODEC } from './codecs.js';

const writable = CODECS.filter((c) => c.write !== undefined);
const readable = CODECS.filter((c) => c.read !== undefined);

/**
 * Offered with `charset=utf-8` because negotiator drops a type whose Accept entry carries a
 * parameter the offer lacks: `Accept: text/plain; charset=utf-8` must still get text/plain, while
 * a request for another charset (which Hayloft never writes) is not matched.
 */
const OFFERS = writable.map((c) => `${c.mime};charset=utf-8`);

function supportedList(codecs: readonly Codec[]): string {
  return codecs.map((c) => c.mime).join(', ');
}

/**
 * Answers per Accept text: a client sends the same header on every request, and negotiating it
 * each time was 7 % of a read by id. Only what negotiates to a format is kept; bounded, cleared
 * when full (a few distinct headers is the normal case).
 */
const NEGOTIATED_MAX = 64;
const NEGOTIATED_MAX_CHARS = 256;

/** Negotiated answers per Accept text: per server, not per module (no shared state between servers). */
export type NegotiationCache = Map<string, Codec>;

/** The format to answer in; throws HL_NOT_ACCEPTABLE when nothing listed is supported. */
export function responseCodec(accept: string | undefined, cache?: NegotiationCache): Codec {
  // No header, or an empty one, means any type (RFC 9110: "no Accept implies any").
  if (accept === undefined) return JSON_CODEC;
  const hit = cache?.get(accept);
  if (hit !== undefined) return hit;
  const codec = negotiate(accept);
  // Only short headers are kept: a client sending 16 KiB headers must not make the cache 1 MB.
  if (cache !== undefined && accept.length <= NEGOTIATED_MAX_CHARS) {
    if (cache.size >= NEGOTIATED_MAX) cache.clear();
    cache.set(accept, codec);
  }
  return codec;
}

function negotiate(accept: string): Codec {
  if (accept.trim() === '') return JSON_CODEC;
  let best: string | undefined;
  try {
    best = new Negotiator({ headers: { accept } }).mediaType(OFFERS);
  } catch {
    best = undefined;
  }
  const i = best === undefined ? -1 : OFFERS.indexOf(best);
  const codec = writable[i];
  if (codec === undefined) {
    throw new HayloftError(
      ErrorCodes.NOT_ACCEPTABLE,
      `none of the formats in Accept (${accept.length > 200 ? accept.slice(0, 200) + '...' : accept}) is supported: ask for one of ${supportedList(writable)}`,
    );
  }
  return codec;
}

/** The media type of a Content-Type header: lower case, parameters (charset...) dropped. */
export function mediaTypeOf(contentType: string): string {
  const semi = contentType.indexOf(';');
  return (semi < 0 ? contentType : contentType.slice(0, semi)).trim().toLowerCase();
}

/**
 * The format to read a request body in. No Content-Type: JSON, the format of docs/spec/interface.md, which
 * clients that forget the header are most likely sending. Throws HL_UNSUPPORTED_MEDIA_TYPE.
 */
export function requestCodec(contentType: string | undefined): Codec {
  if (contentType === undefined || contentType.trim() === '') return JSON_CODEC;
  const mime = mediaTypeOf(contentType);
  const codec = readable.find((c) => c.mime === mime);
  if (codec === undefined) {
    throw new HayloftError(
      ErrorCodes.UNSUPPORTED_MEDIA_TYPE,
      `request bodies of type ${mime || '(blank)'} are not accepted: send one of ${supportedList(readable)}`,
    );
  }
  return codec;
}
