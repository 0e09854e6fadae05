/**
 * Haystack JSON cells as the console keeps them (encoded: `n:21.5 °C`, docs/spec/wire-notes.md §1) and the
 * helpers that read them for people. No DOM here: tests run these in Node.
 */
import { ianaOf } from './zone.js';

export type Cell = string | number | boolean | null | undefined | Cell[] | { [k: string]: Cell };
export type Row = Record<string, Cell>;
export interface Grid {
  meta: Record<string, Cell>;
  cols: { name: string }[];
  rows: Row[];
}

export function str(v: Cell): string {
  if (typeof v !== 'string') return v == null ? '' : typeof v === 'object' ? JSON.stringify(v) : String(v);
  if (v.length >= 2 && v[1] === ':') return v.slice(2);
  return v;
}

/** A Ref's id (`r:<id> <dis>` -> id). */
export function refId(v: Cell): string {
  const s = str(v);
  const sp = s.indexOf(' ');
  return sp < 0 ? s : s.slice(0, sp);
}

/** A Ref's display name, or its id. */
export function refDis(v: Cell): string {
  const s = str(v);
  const sp = s.indexOf(' ');
  return sp < 0 ? s : s.slice(sp + 1);
}

export function num(v: Cell): { val: number; unit: string } | undefined {
  if (typeof v !== 'string' || !v.startsWith('n:')) return undefined;
  const body = v.slice(2);
  const sp = body.indexOf(' ');
  const n = sp < 0 ? body : body.slice(0, sp);
  const val = n === 'INF' ? Infinity : n === '-INF' ? -Infinity : Number(n);
  return { val, unit: sp < 0 ? '' : body.slice(sp + 1) };
}

/** Epoch ms of a DateTime (`t:2024-03-10T03:00:00-04:00 New_York`). */
export function time(v: Cell): number | undefined {
  if (typeof v !== 'string' || !v.startsWith('t:')) return undefined;
  const body = v.slice(2);
  const sp = body.indexOf(' ');
  const ms = Date.parse(sp < 0 ? body : body.slice(0, sp));
  return Number.isNaN(ms) ? undefined : ms;
}

/** How long ago an instant was, as a person says it: `4 s ago`, `12 min ago`, `3 h ago`, `2 days ago`. */
export function ago(ms: number): string {
  const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
  if (s < 90) return `${s} s ago`;
  if (s < 90 * 60) return `${Math.round(s / 60)} min ago`;
  if (s < 36 * 3600) return `${Math.round(s / 3600)} h ago`;
  return `${Math.round(s / 86400)} days ago`;
}

/** A value as a person reads it. */
export function show(v: Cell): string {
  if (v === true) return 'true';
  if (v === false) return 'false';
  if (v == null) return '';
  if (Array.isArray(v)) return v.map(show).join(', ');
  if (typeof v === 'object') return JSON.stringify(v);
  if (typeof v === 'number') return String(v);
  if (v.length < 2 || v[1] !== ':') return v;
  switch (v[0]) {
    case 'm':
      return '✓';
    case 'n': {
      const n = num(v);
      if (n === undefined) return v;
      const rounded = Number.isInteger(n.val) ? String(n.val) : n.val.toFixed(Math.abs(n.val) >= 100 ? 1 : 2);
      return n.unit === '' ? rounded : `${rounded} ${n.unit}`;
    }
    case 'r':
      return `@${refId(v)}${refDis(v) === refId(v) ? '' : ` ${refDis(v)}`}`;
    case 't': {
      // In the DateTime's own zone (the server gives a point's times in the point's zone).
      const ms = time(v);
      if (ms === undefined) return v.slice(2);
      const iana = ianaOf(v.slice(v.lastIndexOf(' ') + 1));
      return new Date(ms).toLocaleString(undefined, iana === undefined ? undefined : { timeZone: iana });
    }
    default:
      return v.slice(2);
  }
}

/** One grid from rows of already-encoded cells. */
export function grid(rows: Row[], meta: Record<string, Cell> = {}): Grid {
  const names: string[] = [];
  for (const r of rows) for (const k of Object.keys(r)) if (!names.includes(k)) names.push(k);
  return { meta: { ver: '3.0', ...meta }, cols: (names.length === 0 ? ['empty'] : names).map((name) => ({ name })), rows };
}
