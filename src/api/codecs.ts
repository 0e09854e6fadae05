/**
 * The wire formats of docs/spec/wire-notes.md §1 in one table: which media types are read (request bodies) and
 * written (responses). Negotiation, the body reader and the `formats` op all read this table, so
 * a format added here is accepted, answered and advertised together.
 */
import { writeCsv } from '../haystack/csv.js';
import { streamed } from '../haystack/his-grid.js';
import { readJsonGrid, writeJsonBytes, writeJsonChunks, writeJsonGrid } from '../haystack/json.js';
import { readJsonHisBytes } from '../haystack/json-his.js';
import type { ShapeLimits } from '../haystack/limits.js';
import type { HGrid } from '../haystack/values.js';
import { readZinc, writeZinc, writeZincChunks } from '../haystack/zinc.js';
import { readHayson, writeHayson, writeHaysonChunks } from '../haystack/hayson.js';

export interface Codec {
  /** `type/subtype`, lower case, no parameters. */
  readonly mime: string;
  /** The Content-Type header sent with a response in this format. */
  readonly contentType: string;
  /** Decodes a request body; `lim` bounds its shape (HL_LIMIT past it). */
  readonly read?: (text: string, lim?: ShapeLimits) => HGrid;
  /**
   * A fast path from a body's bytes for the bodies it knows (large history writes); undefined for
   * any other body, which is then decoded as text with `read`.
   */
  readonly readBytes?: (bytes: Buffer, lim?: ShapeLimits) => HGrid | undefined;
  readonly write?: (grid: HGrid) => string;
  /** `write` as UTF-8 bytes, where the format can keep them for grids answered again. */
  readonly bytes?: (grid: HGrid) => Buffer;
  /**
   * The answer in pieces (text or UTF-8 bytes) for a grid this format streams (history; in JSON,
   * any grid of many rows: his-grid.ts `streamed`), concatenated equal to `write`; undefined for a
   * grid sent whole.
   */
  readonly chunks?: (grid: HGrid) => Iterable<string | Uint8Array> | undefined;
  /** Whether the format carries grid meta, so an error grid (meta `err`, `dis`) survives it. */
  readonly carriesMeta: boolean;
  /** Listed by the `formats` op; false for aliases of a listed format. */
  readonly listed: boolean;
  /**
   * A media-type parameter that tells this format from another of the same type (`version=3`:
   * JSON v3 beside Hayson at /haystack/): asked for in Accept, and matched in Content-Type.
   */
  readonly param?: string;
}

function jsonChunks(g: HGrid): Iterable<string | Uint8Array> | undefined {
  return streamed(g) ? writeJsonChunks(g) : undefined;
}

function zincChunks(g: HGrid): Iterable<string | Uint8Array> | undefined {
  return streamed(g) ? writeZincChunks(g) : undefined;
}

export const JSON_CODEC: Codec = {
  mime: 'application/json',
  // JSON is UTF-8 by definition (RFC 8259) and the type has no charset parameter.
  contentType: 'application/json',
  read: readJsonGrid,
  readBytes: readJsonHisBytes,
  write: writeJsonGrid,
  bytes: writeJsonBytes,
  chunks: jsonChunks,
  carriesMeta: true,
  listed: true,
};

const ZINC: Codec = { mime: 'text/zinc', contentType: 'text/zinc; charset=utf-8', read: readZinc, write: writeZinc, chunks: zincChunks, carriesMeta: true, listed: true };
const PLAIN_ZINC: Codec = { mime: 'text/plain', contentType: 'text/plain; charset=utf-8', read: readZinc, write: writeZinc, chunks: zincChunks, carriesMeta: true, listed: true };
const CSV: Codec = { mime: 'text/csv', contentType: 'text/csv; charset=utf-8', write: writeCsv, carriesMeta: false, listed: true };
const VND_JSON: Codec = { ...JSON_CODEC, mime: 'application/vnd.haystack+json', contentType: 'application/vnd.haystack+json', listed: false };

/**
 * Order matters: for a wildcard (`*\/*`, `application/*`, `text/*`) negotiation picks the first
 * format of this list that matches, so JSON is the default and `text/*` gets Zinc.
 */
export const CODECS: readonly Codec[] = [
  JSON_CODEC,
  VND_JSON,
  ZINC,
  // text/plain is Zinc too (docs/spec/wire-notes.md §1).
  PLAIN_ZINC,
  CSV,
];

/** Hayson (Haystack 4's JSON), what `application/json` means at /haystack/ (docs/haystack4.md). */
export const HAYSON_CODEC: Codec = {
  mime: 'application/json',
  contentType: 'application/json',
  read: readHayson,
  write: writeHayson,
  chunks: (g) => (streamed(g) ? writeHaysonChunks(g) : undefined),
  carriesMeta: true,
  listed: true,
};

/**
 * The formats of the Haystack 4 API at /haystack/ (docs/haystack4.md): Zinc first, so no Accept
 * (Haxall's connector sends none) and wildcards get Zinc; `application/json` (and J2's
 * `application/vnd.haystack+json`) is Hayson; JSON v3 is there for clients that ask for it by
 * `application/json; version=3`.
 */
export const H4_CODECS: readonly Codec[] = [
  ZINC,
  HAYSON_CODEC,
  // J2's haystack-core and haystack-nclient name Hayson `application/vnd.haystack+json`.
  { ...HAYSON_CODEC, mime: 'application/vnd.haystack+json', contentType: 'application/vnd.haystack+json', listed: false },
  { ...JSON_CODEC, param: 'version=3', listed: false },
  PLAIN_ZINC,
  CSV,
];

/** The formats op's order: the one of docs/spec/interface.md's sample. */
const LISTING_ORDER = ['text/plain', 'text/zinc', 'text/csv', 'application/json'];

export function listedCodecs(): Codec[] {
  const rank = (c: Codec): number => {
    const i = LISTING_ORDER.indexOf(c.mime);
    return i < 0 ? LISTING_ORDER.length : i;
  };
  return CODECS.filter((c) => c.listed).sort((a, b) => rank(a) - rank(b));
}
