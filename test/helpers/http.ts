/**
 * HTTP helpers for tests that talk to a running Hayloft over the wire. They know nothing of how
 * the server was built: give them a base URL (`http://127.0.0.1:<port>`). Each call returns the
 * status, headers, raw text and, when the answer is JSON or Zinc, the decoded grid, so tests can
 * assert on all of them; `errOf` reads an error grid's meta.
 *
 *   const a = await postGrid(base, 'read', gridOf({ filter: 'site' }));
 *   t.equal(a.status, 200); t.equal(a.grid?.size, 2);
 */
import type { Test } from 'tap';
import { readJsonGrid, writeJsonGrid } from '../../src/haystack/json.js';
import { HDict, HGrid, type HVal } from '../../src/haystack/values.js';
import { readZinc, writeZinc, zincVal } from '../../src/haystack/zinc.js';

export type Format = 'json' | 'zinc';

const MIME: Record<Format, string> = { json: 'application/json', zinc: 'text/zinc' };

export interface Answer {
  status: number;
  headers: Headers;
  /** The body as text. */
  text: string;
  /** The body decoded by its Content-Type (JSON, Zinc or text/plain); undefined otherwise or if it does not decode. */
  grid: HGrid | undefined;
}

export interface CallOptions {
  /** Format of the request body (POST): default json. */
  as?: Format;
  /** Sets Accept to this format's type; default json. Overridden by headers.accept. */
  accept?: Format;
  /** Extra or replacing headers (Authorization, X-IMPERSONATE, a raw Accept ...). */
  headers?: Record<string, string>;
}

function url(base: string, op: string): string {
  return `${base.replace(/\/+$/, '')}/api/${op}`;
}

function headersOf(opts: CallOptions, body?: Format): Record<string, string> {
  const h: Record<string, string> = { accept: MIME[opts.accept ?? 'json'] };
  if (body !== undefined) h['content-type'] = MIME[body];
  for (const [k, v] of Object.entries(opts.headers ?? {})) h[k.toLowerCase()] = v;
  return h;
}

/** Decodes an answer's body by its Content-Type. */
export function decodeAnswer(contentType: string | null, text: string): HGrid | undefined {
  const mime = (contentType ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
  try {
    if (mime === 'application/json' || mime === 'application/vnd.haystack+json') return readJsonGrid(text);
    if (mime === 'text/zinc' || mime === 'text/plain') return readZinc(text);
  } catch {
    return undefined;
  }
  return undefined;
}

async function answer(res: Response): Promise<Answer> {
  const text = await res.text();
  return { status: res.status, headers: res.headers, text, grid: decodeAnswer(res.headers.get('content-type'), text) };
}

/**
 * Sends any request (raw body, any method) and decodes the answer. fetch adds
 * `Content-Type: text/plain` to a string body: pass a Uint8Array to send a body without one.
 */
export async function request(
  base: string,
  path: string,
  init: { method?: string; headers?: Record<string, string>; body?: string | Uint8Array } = {},
): Promise<Answer> {
  const res = await fetch(`${base.replace(/\/+$/, '')}${path}`, {
    method: init.method ?? 'GET',
    headers: init.headers ?? {},
    ...(init.body === undefined ? {} : { body: init.body }),
  });
  return answer(res);
}

/** Encodes a grid as a request body. */
export function encodeGrid(grid: HGrid, as: Format = 'json'): string {
  return as === 'json' ? writeJsonGrid(grid) : writeZinc(grid);
}

/** POSTs a grid to /api/<op>, encoded as JSON (default) or Zinc. */
export async function postGrid(base: string, op: string, grid: HGrid, opts: CallOptions = {}): Promise<Answer> {
  const as = opts.as ?? 'json';
  const res = await fetch(url(base, op), { method: 'POST', headers: headersOf(opts, as), body: encodeGrid(grid, as) });
  return answer(res);
}

/**
 * GETs /api/<op> with query parameters. A JS string is sent as typed (so `filter: 'point and
 * his'` or `range: 'today'` go bare, as clients send them); any other value is sent in its Zinc
 * form (`HRef.of('abc')` as `@abc`, a Number as `10`). Use `zincVal('text')` for a quoted Str.
 */
export async function getGrid(
  base: string,
  op: string,
  params: Readonly<Record<string, HVal>> = {},
  opts: CallOptions = {},
): Promise<Answer> {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) q.append(k, typeof v === 'string' ? v : zincVal(v));
  const qs = q.toString();
  const res = await fetch(url(base, op) + (qs === '' ? '' : `?${qs}`), { headers: headersOf(opts) });
  return answer(res);
}

/** A grid from rows of plain tags (columns in first-seen order); meta optional. */
export function gridOf(rows: Readonly<Record<string, HVal>> | readonly Readonly<Record<string, HVal>>[], meta: Readonly<Record<string, HVal>> = {}): HGrid {
  const list = Array.isArray(rows) ? (rows as readonly Readonly<Record<string, HVal>>[]) : [rows as Readonly<Record<string, HVal>>];
  return HGrid.fromRows(
    list.map((r) => HDict.of(r)),
    HDict.of(meta),
  );
}

export interface ErrInfo {
  dis: string;
  /** The HL_ code (meta `errCode`). */
  code: string | undefined;
  /** Present only when the server runs with debug on. */
  trace: string | undefined;
}

/** The error of an error grid (meta `err`), or undefined when the answer is not one. */
export function errOf(a: Answer | HGrid | undefined): ErrInfo | undefined {
  const g = a instanceof HGrid ? a : a?.grid;
  if (g === undefined || !g.meta.has('err')) return undefined;
  return { dis: g.meta.str('dis') ?? '', code: g.meta.str('errCode'), trace: g.meta.str('errTrace') };
}

/** Asserts a 200 answer (the message shows what came instead) and returns its grid. */
export function expectOk(t: Test, a: Answer, what: string): HGrid {
  t.equal(a.status, 200, `${what}: 200${a.status === 200 ? '' : ` (got ${a.status}: ${a.text.slice(0, 300)})`}`);
  return a.grid as HGrid;
}

/** Asserts an error answer: status, an error grid with this errCode, and a `dis` matching. */
export function expectError(t: Test, a: Answer, status: number, code: string, dis?: RegExp, what = ''): void {
  const p = what === '' ? '' : `${what}: `;
  t.equal(a.status, status, `${p}status ${status}${a.status === status ? '' : ` (got ${a.status}: ${a.text.slice(0, 300)})`}`);
  const e = errOf(a);
  t.ok(e, `${p}an error grid`);
  t.equal(e?.code, code, `${p}errCode ${code}`);
  if (dis !== undefined) t.match(e?.dis, dis, `${p}the message says why: ${e?.dis ?? ''}`);
}
