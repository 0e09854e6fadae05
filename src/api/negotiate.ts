/**
 * Content negotiation. The response format follows the whole Accept header as HTTP defines it
 * (RFC 9110 §12.5.1: media ranges, q-values, wildcards, q=0 excluding), parsed by `negotiator`
 * (the jshttp library Express uses) rather than by hand: its quoting, specificity and tie rules
 * are what clients are tested against. The request body format follows Content-Type.
 */
import Negotiator from 'negotiator';
import { ErrorCodes, HayloftError } from '../lib/errors.js';
import { CODECS, type Codec, H4_CODECS } from './codecs.js';

/** A table of formats with its defaults: the WideSky API's (JSON first) or the Haystack 4 API's (Zinc first). */
export interface Formats {
  readonly writable: readonly Codec[];
  readonly readable: readonly Codec[];
  /**
   * Offered with `charset=utf-8` because negotiator drops a type whose Accept entry carries a
   * parameter the offer lacks: `Accept: text/plain; charset=utf-8` must still get text/plain, while
   * a request for another charset (which Hayloft never writes) is not matched. A codec's own
   * `param` (version=3) is offered too, so only a client naming it gets that format.
   */
  readonly offers: readonly string[];
  /** The answer's format with no Accept; and a body's with no Content-Type. */
  readonly fallback: Codec;
}

export function formatsOf(codecs: readonly Codec[]): Formats {
  const writable = codecs.filter((c) => c.write !== undefined);
  return {
    writable,
    readable: codecs.filter((c) => c.read !== undefined),
    offers: writable.map((c) => `${c.mime};charset=utf-8${c.param === undefined ? '' : ';' + c.param}`),
    fallback: codecs[0] as Codec,
  };
}

/** docs/spec/interface.md's API at /api/: JSON v3 by default. */
export const WIDESKY_FORMATS: Formats = formatsOf(CODECS);
/** The Haystack 4 API at /haystack/ (docs/haystack4.md): Zinc by default, Hayson for application/json. */
export const H4_FORMATS: Formats = formatsOf(H4_CODECS);

function supportedList(codecs: readonly Codec[]): string {
  return [...new Set(codecs.map((c) => (c.param === undefined ? c.mime : `${c.mime}; ${c.param}`)))].join(', ');
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
export function responseCodec(accept: string | undefined, cache?: NegotiationCache, formats: Formats = WIDESKY_FORMATS): Codec {
  // No header, or an empty one, means any type (RFC 9110: "no Accept implies any").
  if (accept === undefined) return formats.fallback;
  const hit = cache?.get(accept);
  if (hit !== undefined) return hit;
  const codec = negotiate(accept, formats);
  // Only short headers are kept: a client sending 16 KiB headers must not make the cache 1 MB.
  if (cache !== undefined && accept.length <= NEGOTIATED_MAX_CHARS) {
    if (cache.size >= NEGOTIATED_MAX) cache.clear();
    cache.set(accept, codec);
  }
  return codec;
}

function negotiate(accept: string, formats: Formats): Codec {
  const { offers, writable } = formats;
  if (accept.trim() === '') return formats.fallback;
  let best: string | undefined;
  try {
    best = new Negotiator({ headers: { accept } }).mediaType(offers);
  } catch {
    best = undefined;
  }
  const i = best === undefined ? -1 : offers.indexOf(best);
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
export function requestCodec(contentType: string | undefined, formats: Formats = WIDESKY_FORMATS): Codec {
  const { readable } = formats;
  if (contentType === undefined || contentType.trim() === '') return formats.fallback;
  const mime = mediaTypeOf(contentType);
  // A codec named by a parameter (application/json; version=3) before the plain one of its type.
  const params = contentType.toLowerCase().split(';').slice(1).map((p) => p.replace(/\s+/g, ''));
  const codec = readable.find((c) => c.mime === mime && c.param !== undefined && params.includes(c.param)) ?? readable.find((c) => c.mime === mime && c.param === undefined);
  if (codec === undefined) {
    throw new HayloftError(
      ErrorCodes.UNSUPPORTED_MEDIA_TYPE,
      `request bodies of type ${mime || '(blank)'} are not accepted: send one of ${supportedList(readable)}`,
    );
  }
  return codec;
}
