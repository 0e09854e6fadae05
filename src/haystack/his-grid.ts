/**
 * A history grid held as columns (timestamps, values) instead of a dict per row: hisRead of a
 * point-year is 525,600 samples, and a dict, a DateTime and a Number per sample would cost more
 * than reading them from LevelDB. The JSON and Zinc writers write it straight from the columns;
 * anything else (CSV, tests) gets ordinary rows, built on first use.
 */
import type { TimeZone } from './tz.js';
import { HDateTime, HDict, HGrid, HNumber, type HVal, newRecord } from './values.js';

export type HisValues =
  | { readonly kind: 'Number'; readonly val: Float64Array | readonly number[]; readonly unit: string | null }
  | { readonly kind: 'Bool'; readonly val: readonly boolean[] }
  | { readonly kind: 'Str'; readonly val: readonly string[] };

export class HisGrid extends HGrid {
  /** Epoch ms, ascending. */
  readonly ts: Float64Array | readonly number[];
  /** The zone timestamps are written in. */
  readonly tz: TimeZone;
  readonly values: HisValues;

  constructor(meta: HDict, ts: Float64Array | readonly number[], tz: TimeZone, values: HisValues) {
    super(
      meta,
      [
        { name: 'ts', meta: HDict.EMPTY },
        { name: 'val', meta: HDict.EMPTY },
      ],
      undefined,
    );
    if (ts.length !== values.val.length) throw new RangeError('his grid: as many values as timestamps');
    this.ts = ts;
    this.tz = tz;
    this.values = values;
  }

  override get size(): number {
    return this.ts.length;
  }

  /** The value of row i as a Haystack value. */
  valueAt(i: number): HVal {
    const v = this.values;
    if (v.kind === 'Number') return new HNumber(v.val[i] as number, v.unit);
    return v.val[i] as HVal;
  }

  protected override buildRows(): readonly HDict[] {
    const out = new Array<HDict>(this.ts.length);
    for (let i = 0; i < out.length; i++) {
      const rec = newRecord();
      rec.ts = new HDateTime(this.ts[i] as number, this.tz);
      rec.val = this.valueAt(i);
      out[i] = HDict.adopt(rec);
    }
    return out;
  }
}

/**
 * The texts of rows 0..n-1 in chunks of at most `per` rows and about CHUNK_CHARS characters, each
 * chunk one flat string joined with `sep` (and starting with `sep` after the first). Encoders
 * stream grids this way: each chunk is built, flattened and handed on while young, instead of
 * half a million small strings living until one final join, which the garbage collector made
 * three times slower. The character bound keeps chunks of wide rows (records of a dozen tags,
 * 300-400 characters each) out of V8's large-object space, where every string is a fresh mapping
 * that only a full collection gives back.
 */
export function* rowChunks(n: number, row: (i: number) => string, sep: string, per = 2048): Generator<string> {
  let parts: string[] = [];
  let chars = 0;
  let first = true;
  for (let i = 0; i < n; i++) {
    const text = row(i);
    parts.push(text);
    chars += text.length;
    if (parts.length >= per || chars >= CHUNK_CHARS) {
      yield (first ? '' : sep) + parts.join(sep);
      first = false;
      parts = [];
      chars = 0;
    }
  }
  if (parts.length > 0) yield (first ? '' : sep) + parts.join(sep);
}

/**
 * About how many characters a chunk of rowChunks holds: 96 KiB even at two bytes a character, under
 * V8's large-object size (128 KiB); about 780 rows of history, 130 of points.
 */
export const CHUNK_CHARS = 48 * 1024;

/** Rows from which an answer is streamed in chunks (see rowChunks) rather than encoded whole. */
export const STREAMED_ROWS = 256;

/**
 * Whether a grid's answer goes out in chunks: history, and grids of many rows. Encoded whole, a
 * read of 10,000 records was one string of 3.5 MB and a Buffer of as much, each a fresh mapping
 * of its own, and the collections they forced marked the whole heap: 10 times the rows took 20
 * to 25 times as long (docs/performance.md).
 */
export function streamed(g: HGrid): boolean {
  return g instanceof HisGrid || g.size >= STREAMED_ROWS;
}
