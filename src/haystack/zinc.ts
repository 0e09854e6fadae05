/**
 * Zinc (project-haystack.org "Zinc" page, docs/spec/wire-notes.md §1): grids and single values, both directions.
 *
 * Writing builds the text directly, one string per value with no regex per cell, because history
 * grids of 100,000 rows are written through here. The header says `ver:"2.0"` unless the grid
 * holds something only Zinc 3.0 can say (NA, XStr, List, Dict, nested Grid), so Haystack 2 clients
 * keep reading what they can, and nobody gets a 2.0 header on 3.0 syntax.
 *
 * Reading goes through the tokenizer shared with the filter parser, so a literal means the same in
 * a grid, a filter and a GET query parameter (the filter printer writes its literals with the
 * writer here, for the same reason). Rows, nearly all of a history grid's text, are read from the
 * tokenizer's current-token fields rather than one Token object per token, which is what keeps
 * reading near JSON's speed. Errors name line and column: HL_BAD_ZINC for text
 * that does not follow the grammar (the tokenizer also reports malformed Dates, Times and DateTimes
 * this way), HL_BAD_VALUE for well-formed values out of range (`C(95,0)`, a lowercase XStr type).
 */
import { HisGrid, rowChunks } from './his-grid.js';
import { ZINC_ROWS, numberRows } from './his-rows.js';
import { ErrorCodes, HayloftError } from '../lib/errors.js';
import { quoteInput } from '../lib/quote.js';
import { DEFAULT_SHAPE_LIMITS, type ShapeLimits, limitError } from './limits.js';
import { SYM_CLOSE_GRID, SYM_COMMA, type Token, Tokenizer } from './tokenizer.js';
import {
  HBin,
  HCoord,
  HDate,
  HDateTime,
  HDict,
  HGrid,
  HNumber,
  HRef,
  HTime,
  HUri,
  HXStr,
  type HCol,
  type HList,
  type HVal,
  MARKER,
  NA,
  REMOVE,
  type TagRecord,
  isTagName,
  newRecord,
  numberText,
} from './values.js';

// ---------------------------------------------------------------------------------------------
// Writer

const HEX = '0123456789abcdef';

function uEscape(c: number): string {
  return '\\u' + HEX[(c >> 12) & 15] + HEX[(c >> 8) & 15] + HEX[(c >> 4) & 15] + HEX[c & 15];
}

/** Escape for a char code that must not appear raw in a Str or Uri (control chars). */
function controlEscape(c: number): string {
  switch (c) {
    case 10:
      return '\\n';
    case 13:
      return '\\r';
    case 9:
      return '\\t';
    case 8:
      return '\\b';
    case 12:
      return '\\f';
  }
  return uEscape(c);
}

/**
 * A quoted Zinc Str. Most strings need no escape, so one scan decides and the common case is a
 * plain concatenation. `$` is left alone: `\$` is only needed by Fantom string interpolation.
 */
export function zincStr(s: string): string {
  let i = 0;
  const n = s.length;
  for (; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c < 32 || c === 34 || c === 92) break;
  }
  if (i === n) return '"' + s + '"';
  let out = '"' + s.slice(0, i);
  let run = i;
  for (; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c >= 32 && c !== 34 && c !== 92) continue;
    out += s.slice(run, i) + (c === 34 ? '\\"' : c === 92 ? '\\\\' : controlEscape(c));
    run = i + 1;
  }
  return out + s.slice(run) + '"';
}

/**
 * A Zinc Uri literal. A backslash is written `\\` (the tokenizer reads `\\` as one backslash and
 * keeps other unknown escapes such as `\:` verbatim), a backtick `` \` ``, control chars as escapes.
 */
function zincUri(s: string): string {
  let i = 0;
  const n = s.length;
  for (; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c < 32 || c === 96 || c === 92) break;
  }
  if (i === n) return '`' + s + '`';
  let out = '`' + s.slice(0, i);
  let run = i;
  for (; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c >= 32 && c !== 96 && c !== 92) continue;
    out += s.slice(run, i) + (c === 96 ? '\\`' : c === 92 ? '\\\\' : controlEscape(c));
    run = i + 1;
  }
  return out + s.slice(run) + '`';
}

/** Zinc has no unit on INF, -INF or NaN; dropping it beats failing a whole response over one cell. */
function zincNumber(v: HNumber): string {
  return zincNumberOf(v.val, v.unit);
}

function zincNumberOf(x: number, unit: string | null): string {
  const text = numberText(x);
  // INF, -INF and NaN go without their unit.
  if (unit === null || !Number.isFinite(x)) return text;
  // `0x...` would read back as a hex number: write zero as 0.0 before a unit starting with x.
  return (text === '0' && unit.startsWith('x') ? '0.0' : text) + unit;
}

/** One row of a Bool or Str history grid (with its newline), from its columns: no dict or DateTime per sample; Numbers: numberRows. */
function hisRowZinc(g: HisGrid): (i: number) => string {
  const { ts, tz, values } = g;
  switch (values.kind) {
    case 'Number':
      throw new TypeError('Number history is written by numberRows');
    case 'Bool':
      return (i) => tz.formatInstant(ts[i] as number, 1) + (values.val[i] === true ? ',T\n' : ',F\n');
    case 'Str':
      return (i) => tz.formatInstant(ts[i] as number, 1) + ',' + zincStr(values.val[i] as string) + '\n';
  }
}

function cannotEncode(message: string): HayloftError {
  return new HayloftError(ErrorCodes.CANNOT_ENCODE, `zinc: ${message}`);
}

function checkName(name: string, what: string): void {
  if (!isTagName(name)) throw cannotEncode(`${JSON.stringify(name)} is not a valid ${what} name, so Zinc cannot write it`);
}

class ZincWriter {
  /** Set when a value needs Zinc 3.0 syntax; the top-level header is written last. */
  v3 = false;

  val(v: HVal): string {
    if (v === null) return 'N';
    switch (typeof v) {
      case 'string':
        return zincStr(v);
      case 'boolean':
        return v ? 'T' : 'F';
    }
    // Ordered by how often each kind fills a cell: history numbers and timestamps first.
    if (v instanceof HNumber) return zincNumber(v);
    if (v instanceof HDateTime) return v.tz.formatInstant(v.epochMs, 1);
    if (v === MARKER) return 'M';
    if (v instanceof HRef) return v.dis === null ? '@' + v.id : '@' + v.id + ' ' + zincStr(v.dis);
    if (v instanceof HDate || v instanceof HTime) return v.toString();
    if (v instanceof HUri) return zincUri(v.val);
    if (v === REMOVE) return 'R';
    if (v === NA) {
      this.v3 = true;
      return 'NA';
    }
    if (Array.isArray(v)) return this.list(v as HList);
    if (v instanceof HDict) return this.dict(v);
    if (v instanceof HCoord) return 'C(' + String(v.lat) + ',' + String(v.lng) + ')';
    if (v instanceof HXStr) {
      this.v3 = true;
      return v.type + '(' + zincStr(v.val) + ')';
    }
    if (v instanceof HBin) return 'Bin(' + zincStr(v.mime) + ')';
    if (v instanceof HGrid) {
      this.v3 = true;
      return '<<\n' + this.grid(v, true) + '>>';
    }
    throw cannotEncode(`${String(v)} is not a Haystack value`);
  }

  list(l: HList): string {
    this.v3 = true;
    let out = '[';
    for (let i = 0; i < l.length; i++) out += (i === 0 ? '' : ',') + this.val(l[i] as HVal);
    return out + ']';
  }

  dict(d: HDict): string {
    this.v3 = true;
    return '{' + this.tags(d, 'tag') + '}';
  }

  /** Space-separated `name` (Marker) or `name:val` items: the body of a dict and of meta. */
  tags(d: HDict, what: string): string {
    let out = '';
    for (const [k, v] of d) {
      checkName(k, what);
      if (out !== '') out += ' ';
      out += v === MARKER ? k : k + ':' + this.val(v);
    }
    return out;
  }

  /** The grid's meta and column lines after its `ver` item, and the column names. */
  head(g: HGrid): { out: string; names: string[] } {
    const meta = g.meta.has('ver') ? g.meta.without('ver') : g.meta;
    const metaText = meta.isEmpty() ? '' : ' ' + this.tags(meta, 'grid meta');
    const cols = g.cols;
    if (cols.length === 0) return { out: metaText + '\nempty\n', names: [] };
    const n = cols.length;
    const names = new Array<string>(n);
    let out = metaText + '\n';
    for (let i = 0; i < n; i++) {
      const c = cols[i] as HCol;
      checkName(c.name, 'column');
      names[i] = c.name;
      if (i > 0) out += ',';
      out += c.name;
      if (!c.meta.isEmpty()) out += ' ' + this.tags(c.meta, 'column meta');
    }
    return { out: out + '\n', names };
  }

  /** The grid after its `ver` item: meta, columns, rows, each line ending in a newline. */
  body(g: HGrid): string {
    const { out: head, names } = this.head(g);
    if (names.length === 0) return head;
    if (g instanceof HisGrid && g.values.kind === 'Number') return head + Buffer.concat([...numberRows(g, ZINC_ROWS, '', '')]).toString('utf8');
    return head + [...rowChunks(g.size, this.rowText(g, names), '')].join('');
  }

  /** Row i of a grid as a Zinc line (with its newline); Number history is written by numberRows. */
  rowText(g: HGrid, names: readonly string[]): (r: number) => string {
    if (g instanceof HisGrid) return hisRowZinc(g);
    const n = names.length;
    const rows = g.rows;
    return (r) => {
      const row = rows[r] as HDict;
      let line = '';
      for (let i = 0; i < n; i++) {
        const v = row.get(names[i] as string);
        if (i > 0) line += ',';
        if (v !== undefined && v !== null) line += this.val(v);
      }
      // A one-column row holding null would be a blank line, which readers skip.
      return (line === '' ? 'N' : line) + '\n';
    };
  }

  grid(g: HGrid, nested: boolean): string {
    const body = this.body(g);
    return (nested || this.v3 ? 'ver:"3.0"' : 'ver:"2.0"') + body;
  }
}

/**
 * Zinc text of a grid, ending in a newline. A grid without columns is written as the empty grid
 * (one column `empty`). Throws HL_CANNOT_ENCODE for names Zinc cannot hold.
 */
export function writeZinc(grid: HGrid): string {
  return new ZincWriter().grid(grid, false);
}

/** Whether a value needs Zinc 3.0 syntax (the values ZincWriter.val marks v3; nested ones sit inside one of these). */
function needsV3(v: HVal | undefined): boolean {
  return v === NA || Array.isArray(v) || v instanceof HDict || v instanceof HXStr || v instanceof HGrid;
}

/**
 * Zinc of a grid in pieces that concatenate to writeZinc's text, in chunks of rows (Number
 * history as UTF-8 bytes, see his-rows.ts): for the grids streamed (his-grid.ts `streamed`).
 * Zinc's version line comes first but depends on the values (a list, a dict, NA, an XStr or a
 * grid make it 3.0): history holds none; for rows of records the cells are looked at first,
 * without encoding them, which costs a small part of writing them.
 */
export function* writeZincChunks(grid: HGrid): Generator<string | Buffer> {
  const w = new ZincWriter();
  const { out: head, names } = w.head(grid);
  if (grid instanceof HisGrid) {
    const top = (w.v3 ? 'ver:"3.0"' : 'ver:"2.0"') + head;
    if (grid.values.kind === 'Number') {
      yield* numberRows(grid, ZINC_ROWS, top, '');
      return;
    }
    yield top;
    yield* rowChunks(grid.size, hisRowZinc(grid), '');
    return;
  }
  let v3 = w.v3;
  const rows = grid.rows;
  for (let r = 0; r < rows.length && !v3; r++) {
    const row = rows[r] as HDict;
    for (let i = 0; i < names.length && !v3; i++) v3 = needsV3(row.get(names[i] as string));
  }
  yield (v3 ? 'ver:"3.0"' : 'ver:"2.0"') + head;
  if (names.length > 0) yield* rowChunks(grid.size, w.rowText(grid, names), '');
}

/** Zinc text of one value (a cell, a GET query parameter, a CSV cell): `@id "dis"`, `72.5°F`, `N`. */
export function zincVal(v: HVal): string {
  return new ZincWriter().val(v);
}

// ---------------------------------------------------------------------------------------------
// Reader

function describe(t: Token): string {
  if (t.type === 'eof') return 'end of input';
  if (t.type === 'nl') return 'end of line';
  return JSON.stringify(t.text.length > 40 ? t.text.slice(0, 37) + '...' : t.text);
}

class ZincReader {
  private readonly tk: Tokenizer;
  private readonly lim: ShapeLimits;
  private depth = 0;

  constructor(text: string, lim: ShapeLimits) {
    this.lim = lim;
    // A UTF-8 byte-order mark some editors add is not part of the grid.
    this.tk = new Tokenizer(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text, { newlines: true, kind: 'zinc', maxTokenChars: lim.maxValueChars });
  }

  private err(message: string, at: Token): HayloftError {
    return this.tk.error(message, at);
  }

  private badValue(e: unknown, at: Token): unknown {
    if (!(e instanceof HayloftError)) return e;
    return new HayloftError(ErrorCodes.BAD_VALUE, `zinc: ${e.message} at line ${at.line}, column ${at.col}`, { cause: e });
  }

  private isSym(t: Token, text: string): boolean {
    return t.type === 'sym' && t.text === text;
  }

  private expectSym(text: string, what: string): Token {
    const t = this.tk.next();
    if (!this.isSym(t, text)) throw this.err(`expected "${text}" ${what}, found ${describe(t)}`, t);
    return t;
  }

  private skipNl(): void {
    while (this.tk.peek().type === 'nl') this.tk.next();
  }

  /** Deeper nesting is refused rather than risking a stack overflow on hostile input. */
  private enter(at: Token): void {
    if (++this.depth > this.lim.maxDepth) {
      throw limitError('zinc', 'the nesting of lists, dicts and grids', this.lim.maxDepth, 'maxDepth', ` at line ${at.line}, column ${at.col}`);
    }
  }

  /** Reads a grid; a nested one stops before its closing `>>`. */
  grid(nested: boolean): HGrid {
    this.skipNl();
    const verTok = this.tk.next();
    if (verTok.type !== 'id' || verTok.text !== 'ver') throw this.err(`expected the header ver:"3.0", found ${describe(verTok)}`, verTok);
    this.expectSym(':', 'after "ver"');
    const verVal = this.tk.next();
    if (verVal.type !== 'val' || typeof verVal.val !== 'string') throw this.err(`expected a quoted version after "ver:", found ${describe(verVal)}`, verVal);
    if (verVal.val !== '2.0' && verVal.val !== '3.0') throw this.err(`Zinc version ${quoteInput(verVal.val)} is not supported (use "2.0" or "3.0")`, verVal);
    const meta = this.meta('grid meta');
    const end = this.tk.peek();
    if (end.type === 'eof') {
      if (nested) throw this.err('nested grid ends before its ">>"', end);
      return HGrid.empty(meta);
    }
    if (end.type !== 'nl') throw this.err(`expected a grid meta tag or end of line, found ${describe(end)}`, end);
    this.tk.next();

    const first = this.tk.peek();
    if (first.type !== 'id') {
      // No columns: the empty grid. Only blank lines and the end may follow.
      this.skipNl();
      const after = this.tk.peek();
      if (nested ? this.isSym(after, '>>') : after.type === 'eof') return HGrid.empty(meta);
      if (nested && after.type === 'eof') throw this.err('nested grid ends before its ">>"', after);
      if (first.type === 'nl') throw this.err('a grid without columns cannot have rows', after);
      throw this.err(`expected column names, found ${describe(first)}`, first);
    }
    const cols = this.cols();
    const names = cols.map((c) => c.name);

    // Rows are read from the tokenizer's current-token fields, without a Token object per token.
    const tk = this.tk;
    const rows: HDict[] = [];
    while (true) {
      const type = tk.peekType();
      if (type === 'nl') {
        tk.skip();
        continue;
      }
      if (type === 'eof') {
        if (nested) throw this.err('nested grid ends before its ">>"', tk.peek());
        break;
      }
      if (nested && type === 'sym' && tk.sym === SYM_CLOSE_GRID) break;
      rows.push(this.row(names, nested));
    }
    return new HGrid(meta, cols, rows);
  }

  private cols(): HCol[] {
    const cols: HCol[] = [];
    const seen = new Set<string>();
    while (true) {
      const t = this.tk.next();
      if (t.type !== 'id') throw this.err(`expected a column name, found ${describe(t)}`, t);
      if (!isTagName(t.text)) throw this.err(`${quoteInput(t.text)} is not a valid column name (a lowercase letter, then letters, digits or _)`, t);
      if (cols.length >= this.lim.maxCols) throw limitError('zinc', 'the number of columns', this.lim.maxCols, 'maxCols', ` at line ${t.line}, column ${t.col}`);
      if (seen.has(t.text)) throw this.err(`column ${quoteInput(t.text)} appears twice`, t);
      seen.add(t.text);
      cols.push({ name: t.text, meta: this.meta('column meta') });
      const sep = this.tk.peek();
      if (this.isSym(sep, ',')) {
        this.tk.next();
        continue;
      }
      if (sep.type === 'nl') {
        this.tk.next();
        return cols;
      }
      if (sep.type === 'eof' || this.isSym(sep, '>>')) return cols;
      throw this.err(`expected "," or end of line after column ${quoteInput(t.text)}, found ${describe(sep)}`, sep);
    }
  }

  private row(names: readonly string[], nested: boolean): HDict {
    const tk = this.tk;
    const rec = newRecord();
    const n = names.length;
    for (let i = 0; i < n; i++) {
      let type = tk.peekType();
      if (i > 0) {
        if (type !== 'sym' || tk.sym !== SYM_COMMA) {
          const t = tk.peek();
          if (t.type === 'nl' || t.type === 'eof' || this.isSym(t, '>>')) throw this.err(`row has ${i} cell${i === 1 ? '' : 's'} but the grid has ${n} columns`, t);
          throw this.err(`expected "," or end of line after a cell, found ${describe(t)}`, t);
        }
        tk.skip();
        type = tk.peekType();
      }
      if (type === 'nl' || type === 'eof') continue;
      if (type === 'sym' && (tk.sym === SYM_COMMA || (nested && tk.sym === SYM_CLOSE_GRID))) continue;
      let v: HVal;
      if (type === 'val') {
        v = tk.val as HVal;
        tk.skip();
      } else v = this.val();
      if (v !== null) rec[names[i] as string] = v;
    }
    const type = tk.peekType();
    if (type === 'nl') tk.skip();
    else if (type === 'sym' && tk.sym === SYM_COMMA) throw this.err(`row has more cells than the grid's ${n} columns`, tk.peek());
    else if (type !== 'eof' && !(nested && type === 'sym' && tk.sym === SYM_CLOSE_GRID)) {
      throw this.err(`expected end of line after the last cell, found ${describe(tk.peek())}`, tk.peek());
    }
    return HDict.adopt(rec);
  }

  /** Space-separated `name` / `name:val` items, up to whatever is not a name (the caller checks). */
  private meta(what: string): HDict {
    let rec: TagRecord | undefined;
    while (this.tk.peek().type === 'id') {
      rec ??= newRecord();
      this.tag(rec, what);
    }
    return rec === undefined ? HDict.EMPTY : HDict.adopt(rec);
  }

  /** One `name` or `name:val` item into `rec`; a bare name is a Marker, a null value is absent. */
  private tag(rec: TagRecord, what: string): void {
    const t = this.tk.next();
    if (t.type !== 'id') throw this.err(`expected a tag name, found ${describe(t)}`, t);
    if (!isTagName(t.text)) throw this.err(`${quoteInput(t.text)} is not a valid ${what} name (a lowercase letter, then letters, digits or _)`, t);
    if (t.text in rec) throw this.err(`${what} ${quoteInput(t.text)} appears twice`, t);
    if (!this.isSym(this.tk.peek(), ':')) {
      rec[t.text] = MARKER;
      return;
    }
    this.tk.next();
    const at = this.tk.peek();
    if (at.type === 'nl' || at.type === 'eof') throw this.err(`expected a value after "${t.text}:", found ${describe(at)}`, at);
    const v = this.val();
    if (v !== null) rec[t.text] = v;
  }

  /** One value. */
  val(): HVal {
    const tk = this.tk;
    if (tk.peekType() === 'val') {
      const v = tk.val as HVal;
      tk.skip();
      return v;
    }
    const t = tk.next();
    switch (t.type) {
      case 'id':
        return this.keyword(t);
      case 'sym':
        if (t.text === '[') return this.list(t);
        if (t.text === '{') return this.dict(t);
        if (t.text === '<<') {
          this.enter(t);
          const g = this.grid(true);
          this.expectSym('>>', 'to close the nested grid');
          this.depth--;
          return g;
        }
        break;
    }
    throw this.err(`expected a value, found ${describe(t)}`, t);
  }

  private keyword(t: Token): HVal {
    switch (t.text) {
      case 'N':
        return null;
      case 'M':
        return MARKER;
      case 'R':
        return REMOVE;
      case 'NA':
        return NA;
      case 'T':
        return true;
      case 'F':
        return false;
      case 'NaN':
        return new HNumber(NaN);
      case 'INF':
        return new HNumber(Infinity);
    }
    const c = t.text.charCodeAt(0);
    if (c >= 65 && c <= 90 && this.isSym(this.tk.peek(), '(')) {
      this.tk.next();
      if (t.text === 'C') return this.coord(t);
      const arg = this.tk.next();
      if (arg.type !== 'val' || typeof arg.val !== 'string') throw this.err(`expected a quoted string in ${t.text}(...), found ${describe(arg)}`, arg);
      this.expectSym(')', `to close ${t.text}(...)`);
      // Any identifier with a capital first letter is a valid XStr type, so this cannot throw.
      return t.text === 'Bin' ? new HBin(arg.val) : new HXStr(t.text, arg.val);
    }
    throw this.err(`expected a value, found ${describe(t)} (keywords are N M R NA T F NaN INF; an XStr is Type("..."))`, t);
  }

  private coordPart(what: string): number {
    const t = this.tk.next();
    if (t.type !== 'val' || !(t.val instanceof HNumber) || t.val.unit !== null) throw this.err(`expected the ${what} as a number without unit in C(lat,lng), found ${describe(t)}`, t);
    return t.val.val;
  }

  private coord(at: Token): HCoord {
    const lat = this.coordPart('latitude');
    this.expectSym(',', 'between latitude and longitude in C(lat,lng)');
    const lng = this.coordPart('longitude');
    this.expectSym(')', 'to close C(lat,lng)');
    try {
      return new HCoord(lat, lng);
    } catch (e) {
      throw this.badValue(e, at);
    }
  }

  private list(open: Token): HList {
    this.enter(open);
    const out: HVal[] = [];
    while (true) {
      this.skipNl();
      const t = this.tk.peek();
      if (this.isSym(t, ']')) {
        this.tk.next();
        break;
      }
      if (t.type === 'eof') throw this.err('list is not closed with "]"', open);
      out.push(this.val());
      this.skipNl();
      const sep = this.tk.peek();
      if (sep.type === 'eof') throw this.err('list is not closed with "]"', open);
      if (this.isSym(sep, ',')) this.tk.next();
      else if (!this.isSym(sep, ']')) throw this.err(`expected "," or "]" in list, found ${describe(sep)}`, sep);
    }
    this.depth--;
    return Object.freeze(out);
  }

  private dict(open: Token): HDict {
    this.enter(open);
    const rec = newRecord();
    while (true) {
      this.skipNl();
      const t = this.tk.peek();
      if (this.isSym(t, '}')) {
        this.tk.next();
        break;
      }
      if (t.type === 'eof') throw this.err('dict is not closed with "}"', open);
      if (t.type !== 'id') throw this.err(`expected a tag name or "}" in dict, found ${describe(t)}`, t);
      this.tag(rec, 'dict tag');
      this.skipNl();
      // Zinc 3.0 separates tags with spaces, Haystack 4 writers may use commas.
      if (this.isSym(this.tk.peek(), ',')) this.tk.next();
    }
    this.depth--;
    return HDict.adopt(rec);
  }

  /** A value standing alone, with blank lines around it allowed. */
  single(): HVal {
    this.skipNl();
    const v = this.val();
    this.end();
    return v;
  }

  end(): void {
    this.skipNl();
    const t = this.tk.peek();
    if (t.type !== 'eof') throw this.err(`expected end of input, found ${describe(t)}`, t);
  }
}

/**
 * Parses Zinc text into a grid. Accepts `ver:"2.0"` and `ver:"3.0"`, blank lines between rows,
 * CRLF line ends, and a grid without columns (read as the empty grid). `ver` is not kept in meta.
 */
export function readZinc(text: string, lim: ShapeLimits = DEFAULT_SHAPE_LIMITS): HGrid {
  const r = new ZincReader(text, lim);
  const g = r.grid(false);
  r.end();
  return g;
}

/**
 * Parses one Zinc value (a GET query parameter, a filter operand written alone): `@abc`,
 * `"today"`, `72.5kW`, `2024-03-10`, `[1,2]`. Surrounding whitespace is allowed, nothing else.
 */
export function readZincVal(text: string): HVal {
  // A bare Ref (`id=@abc` in a query, the commonest value read alone) without the tokenizer.
  if (text.charCodeAt(0) === 64 && BARE_REF.test(text)) return new HRef(text.slice(1));
  return new ZincReader(text, DEFAULT_SHAPE_LIMITS).single();
}
const BARE_REF = /^@[A-Za-z0-9_:\-.~]+$/;
