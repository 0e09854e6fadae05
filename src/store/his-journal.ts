/**
 * Journal entries: what makes the open tails (his-tail.ts) durable between seals. One LevelDB
 * entry per flush holds the new samples of every point written since the last one, so a poll
 * cycle's samples cost a few bytes each instead of an entry, a metadata rewrite and a tombstone
 * per sample (docs/performance.md, "Flash wear").
 *
 * Layout (after the version byte): varint count of parts; each part is one point's samples:
 *
 *   varint ref | u8 kind | varint n | f64 first ts | (varint ts delta)^(n-1) | values
 *
 * `ref` is the point's number in its history metadata (history.ts), so an id is not repeated in
 * every entry. Timestamps are strictly increasing within a part (the deltas are positive whole
 * milliseconds). Values: Number as u8 d + zigzag varint of v × 10^d when v is a decimal with at
 * most 6 fractional digits (what sensors send), else u8 0xff + f64; Bool as one byte; Str as
 * varint length + UTF-8.
 */
import { fractionDigits, pow10 } from '../lib/decimal.js';
import { corrupt, Reader, Writer, type HisKind, type HisValue } from './his-codec.js';

const VERSION = 1;
const KIND_CODE: Record<HisKind, number> = { Number: 1, Bool: 2, Str: 3 };
const CODE_KIND: (HisKind | undefined)[] = [undefined, 'Number', 'Bool', 'Str'];
const RAW = 0xff;
const MAX_DIGITS = 6;
const utf8Enc = new TextEncoder();
const utf8Dec = new TextDecoder('utf-8', { fatal: true });

export interface JournalPart {
  ref: number;
  kind: HisKind;
  ts: ArrayLike<number>;
  val: ArrayLike<HisValue>;
  from: number;
  to: number;
}

function zigzag(k: number): number {
  return k >= 0 ? 2 * k : -2 * k - 1;
}

function unzigzag(z: number): number {
  return z % 2 === 0 ? z / 2 : -(z + 1) / 2;
}

export function encodeJournal(parts: readonly JournalPart[]): Uint8Array {
  let guess = 16;
  for (const p of parts) guess += 16 + (p.to - p.from) * 6;
  const w = new Writer(guess);
  w.byte(VERSION);
  w.varint(parts.length);
  for (const p of parts) {
    const n = p.to - p.from;
    w.varint(p.ref);
    w.byte(KIND_CODE[p.kind]);
    w.varint(n);
    w.f64(p.ts[p.from] as number);
    for (let i = p.from + 1; i < p.to; i++) w.varint((p.ts[i] as number) - (p.ts[i - 1] as number));
    switch (p.kind) {
      case 'Number':
        for (let i = p.from; i < p.to; i++) {
          const v = p.val[i] as number;
          const d = Object.is(v, -0) ? -1 : fractionDigits(v, MAX_DIGITS);
          const k = d < 0 ? 0 : Math.round(v * pow10(d));
          if (d < 0 || Math.abs(k) > 2 ** 52) {
            w.byte(RAW);
            w.f64(v);
          } else {
            w.byte(d);
            w.varint(zigzag(k));
          }
        }
        break;
      case 'Bool':
        for (let i = p.from; i < p.to; i++) w.byte(p.val[i] === true ? 1 : 0);
        break;
      case 'Str':
        for (let i = p.from; i < p.to; i++) {
          const b = utf8Enc.encode(p.val[i] as string);
          w.varint(b.length);
          w.bytes(b);
        }
    }
  }
  return w.finish();
}

/** Calls `each` with every part of an entry, its samples as columns. */
export function decodeJournal(buf: Uint8Array, each: (ref: number, kind: HisKind, ts: Float64Array, val: Float64Array | HisValue[]) => void): void {
  const r = new Reader(buf, 0);
  if (r.byte() !== VERSION) throw corrupt('a journal entry of an unknown version');
  const parts = r.varint();
  for (let p = 0; p < parts; p++) {
    const ref = r.varint();
    const kind = CODE_KIND[r.byte()];
    if (kind === undefined) throw corrupt('a journal entry of an unknown kind');
    const n = r.varint();
    if (n < 1 || n > buf.length) throw corrupt('a journal entry with a bad count');
    const ts = new Float64Array(n);
    let t = r.f64();
    r.align();
    ts[0] = t;
    for (let i = 1; i < n; i++) {
      t += r.varint();
      ts[i] = t;
    }
    let val: Float64Array | HisValue[];
    if (kind === 'Number') {
      const v = new Float64Array(n);
      for (let i = 0; i < n; i++) {
        const d = r.byte();
        if (d === RAW) {
          v[i] = r.f64();
          r.align();
        } else if (d <= MAX_DIGITS) v[i] = unzigzag(r.varint()) / pow10(d);
        else throw corrupt('a journal Number with a bad scale');
      }
      val = v;
    } else if (kind === 'Bool') {
      val = new Array<HisValue>(n);
      for (let i = 0; i < n; i++) val[i] = r.byte() === 1;
    } else {
      val = new Array<HisValue>(n);
      for (let i = 0; i < n; i++) {
        try {
          val[i] = utf8Dec.decode(r.bytes(r.varint()));
        } catch (e) {
          throw (e as { code?: string }).code !== undefined ? e : corrupt('bad UTF-8 in a journal Str');
        }
      }
    }
    each(ref, kind, ts, val);
  }
  r.checkEnd();
}
