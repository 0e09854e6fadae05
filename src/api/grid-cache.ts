/**
 * Decoded request grids of small bodies (by their bytes) and of query strings. A client that polls
 * sends the same small request again and again: the same ids to read, the same watch to poll, the
 * same filter. Decoding a body (UTF-8, JSON.parse, the grid's checks) was the largest part of a
 * POST that a GET does not have; a request seen before is answered with the grid decoded the
 * first time. Grids and their values are immutable, so one grid may serve any number of requests.
 *
 * Bounded twice: only inputs up to MAX_BYTES (bytes of a body, characters of a query) are kept,
 * at most MAX_ENTRIES of them per format (cleared when full, as the negotiation cache is), so a
 * client sending a new body every time costs a few hundred kilobytes at most. Only grids that
 * decoded are kept: a body that failed is decoded again, and fails again with the same error.
 */
import type { HGrid } from '../haystack/values.js';

const MAX_BYTES = 1024;
const MAX_ENTRIES = 128;

export class GridCache {
  /** Per format (the codec): the same bytes are a different grid in Zinc. */
  private readonly byFormat = new Map<unknown, Map<string, HGrid>>();
  /**
   * The last body asked for, its format and grid: a client polling on a kept-alive connection
   * sends the same bytes again, and comparing them (memcmp) costs less than making and hashing
   * their key. The bytes are the request's own (Node's parser copies each body).
   */
  private lastFormat: unknown = undefined;
  private lastBytes: Buffer | undefined;
  private lastGrid: HGrid | undefined;

  /**
   * The grid of `input` (a body's bytes, or a query string) in the format `format` (a codec, or
   * any key naming the format), decoded by `decode` unless the same input was decoded before.
   * What `decode` throws is thrown.
   */
  grid<F, I extends Buffer | string>(format: F, input: I, decode: (format: F, input: I) => HGrid): HGrid {
    if (input.length > MAX_BYTES) return decode(format, input);
    const bytes: Buffer | undefined = typeof input === 'string' ? undefined : input;
    const last = this.lastBytes;
    if (bytes !== undefined && last !== undefined && format === this.lastFormat && bytes.length === last.length && bytes.equals(last)) return this.lastGrid as HGrid;
    let cache = this.byFormat.get(format);
    if (cache === undefined) this.byFormat.set(format, (cache = new Map<string, HGrid>()));
    // Latin-1 maps each byte to one character: a key as exact as the bytes, without the UTF-8
    // check (decode does that, once, for bytes not seen before).
    const key = typeof input === 'string' ? input : input.toString('latin1');
    let grid = cache.get(key);
    if (grid === undefined) {
      grid = decode(format, input);
      if (cache.size >= MAX_ENTRIES) cache.clear();
      cache.set(key, grid);
    }
    if (bytes !== undefined) {
      this.lastFormat = format;
      this.lastBytes = bytes;
      this.lastGrid = grid;
    }
    return grid;
  }

  /** Grids kept (tests). */
  get size(): number {
    let n = 0;
    for (const c of this.byFormat.values()) n += c.size;
    return n;
  }
}

export const GRID_CACHE_LIMITS = Object.freeze({ maxBytes: MAX_BYTES, maxEntries: MAX_ENTRIES });
