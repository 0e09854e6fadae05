/**
 * The Haystack tokenizer shared by the Zinc reader and the filter parser, so a literal means the
 * same in a grid and in a filter (`5kW`, `@id`, `2024-03-10T03:00:00-04:00 New_York`, `"a\"b"`).
 *
 * Tokens:
 * - `id`: identifiers and keywords: tag names, `ver`, `T`, `F`, `N`, `M`, `R`, `NA`, `NaN`, `INF`,
 *   XStr types, `C`, `Bin`, `true`, `false`, `and`, `or`, `not`. Parsers give them meaning.
 * - `val`: literal scalars: Number (with unit; also `-INF`), Str, Ref (`@id "dis"` is one Ref with
 *   its display), Uri, Date, Time (`hh:mm` too), DateTime (zone name optional after `Z`/offset).
 * - `sym`: punctuation; two-char symbols are `== != <= >= -> =~ << >>`.
 * - `regex`: the `/.../` following `=~`, `text` being the pattern with `\/` unescaped.
 * - `nl`: a newline (only with `newlines: true`, for Zinc); `eof`.
 */
import { type ErrorCode, ErrorCodes, HayloftError } from '../lib/errors.js';
import { parseDate, parseDateTime, parseTime } from './datetime.js';
import { HNumber, HRef, HUri, isUnitText, type HVal } from './values.js';

export type TokenType = 'id' | 'val' | 'sym' | 'regex' | 'nl' | 'eof';

export interface Token {
  type: TokenType;
  /** Source text of the token (for `regex`, the pattern; for `val`, the literal as written). */
  text: string;
  val: HVal | undefined;
  /** 1-based position of the token's first character. */
  line: number;
  col: number;
}

export interface TokenizerOptions {
  /** Emit `nl` tokens (Zinc) instead of skipping newlines as whitespace (filters). */
  newlines?: boolean;
  /** How errors are reported: Zinc errors give line and column, filter errors the column. */
  kind?: 'zinc' | 'filter';
}

const TWO_CHAR_SYMS = new Set(['==', '!=', '<=', '>=', '->', '=~', '<<', '>>']);
const ONE_CHAR_SYMS = ',:;()[]{}<>=!/$&|+*?^#-.';

function isDigit(c: number): boolean {
  return c >= 48 && c <= 57;
}
function isAlpha(c: number): boolean {
  return (c >= 97 && c <= 122) || (c >= 65 && c <= 90);
}
function isIdChar(c: number): boolean {
  return isAlpha(c) || isDigit(c) || c === 95;
}
function isRefChar(c: number): boolean {
  return isIdChar(c) || c === 58 || c === 45 || c === 46 || c === 126;
}
function isUnitChar(c: number): boolean {
  return isAlpha(c) || c === 37 || c === 95 || c === 47 || c === 36 || c > 127;
}
function isTzChar(c: number): boolean {
  return isIdChar(c) || c === 45 || c === 43;
}

export class Tokenizer {
  private readonly src: string;
  private readonly newlines: boolean;
  private readonly kind: 'zinc' | 'filter';
  private pos = 0;
  private line = 1;
  private lineStart = 0;
  private peeked: Token | undefined;
  private prevSym = '';

  constructor(src: string, opts: TokenizerOptions = {}) {
    this.src = src;
    this.newlines = opts.newlines ?? false;
    this.kind = opts.kind ?? (this.newlines ? 'zinc' : 'filter');
  }

  peek(): Token {
    if (this.peeked === undefined) this.peeked = this.read();
    return this.peeked;
  }

  next(): Token {
    const t = this.peek();
    this.peeked = undefined;
    return t;
  }

  /** An error at a token (or at the current position), in the style of this tokenizer's kind. */
  error(message: string, at?: { line: number; col: number }): HayloftError {
    const line = at?.line ?? this.line;
    const col = at?.col ?? this.pos - this.lineStart + 1;
    if (this.kind === 'filter') return new HayloftError(ErrorCodes.BAD_FILTER, `filter: ${message} at column ${col}`);
    return new HayloftError(ErrorCodes.BAD_ZINC, `zinc: ${message} at line ${line}, column ${col}`);
  }

  private code(): ErrorCode {
    return this.kind === 'filter' ? ErrorCodes.BAD_FILTER : ErrorCodes.BAD_ZINC;
  }

  private c(offset = 0): number {
    return this.src.charCodeAt(this.pos + offset);
  }

  private read(): Token {
    const s = this.src;
    // Whitespace; newlines are tokens in Zinc.
    while (this.pos < s.length) {
      const c = this.c();
      if (c === 32 || c === 9 || c === 0xa0) this.pos++;
      else if (c === 13 && this.c(1) === 10 && !this.newlines) this.pos++;
      else if ((c === 10 || c === 13) && !this.newlines) {
        this.pos++;
        this.line++;
        this.lineStart = this.pos;
      } else break;
    }
    const line = this.line;
    const col = this.pos - this.lineStart + 1;
    const start = this.pos;
    const tok = (type: TokenType, val?: HVal): Token => ({ type, text: s.slice(start, this.pos), val, line, col });

    if (this.pos >= s.length) return { type: 'eof', text: '', val: undefined, line, col };
    const c = this.c();

    if (c === 10 || c === 13) {
      this.pos += c === 13 && this.c(1) === 10 ? 2 : 1;
      this.line++;
      this.lineStart = this.pos;
      this.prevSym = '';
      return { type: 'nl', text: '\n', val: undefined, line, col };
    }

    if (this.prevSym === '=~' && c === 47) {
      this.prevSym = '';
      return this.readRegex(line, col);
    }
    this.prevSym = '';

    if (isAlpha(c) || c === 95) {
      while (this.pos < s.length && isIdChar(this.c())) this.pos++;
      return tok('id');
    }
    if (isDigit(c)) return this.readNumberLike(line, col);
    if (c === 45) {
      if (isDigit(this.c(1))) return this.readNumberLike(line, col);
      if (s.startsWith('-INF', this.pos) && !isIdChar(this.c(4))) {
        this.pos += 4;
        return tok('val', new HNumber(-Infinity));
      }
    }
    if (c === 34) return tok('val', this.readStr(line, col));
    if (c === 64) {
      this.pos++;
      while (this.pos < s.length && isRefChar(this.c())) this.pos++;
      const id = s.slice(start + 1, this.pos);
      if (id.length === 0) throw this.error('expected a Ref id after "@"', { line, col });
      let dis: string | null = null;
      if (this.c() === 32 && this.c(1) === 34) {
        this.pos++;
        dis = this.readStr(line, col);
      }
      return tok('val', new HRef(id, dis));
    }
    if (c === 96) return tok('val', this.readUri(line, col));

    const two = s.slice(this.pos, this.pos + 2);
    if (TWO_CHAR_SYMS.has(two)) {
      this.pos += 2;
      this.prevSym = two;
      return tok('sym');
    }
    if (ONE_CHAR_SYMS.includes(s[this.pos] as string)) {
      this.pos++;
      return tok('sym');
    }
    throw this.error(`unexpected character ${JSON.stringify(s[this.pos])}`, { line, col });
  }

  private readRegex(line: number, col: number): Token {
    const s = this.src;
    this.pos++;
    let pattern = '';
    while (true) {
      if (this.pos >= s.length || this.c() === 10) throw this.error('unterminated regex', { line, col });
      const c = this.c();
      if (c === 47) break;
      if (c === 92 && this.c(1) === 47) {
        pattern += '/';
        this.pos += 2;
        continue;
      }
      if (c === 92 && this.pos + 1 < s.length) {
        pattern += s.slice(this.pos, this.pos + 2);
        this.pos += 2;
        continue;
      }
      pattern += s[this.pos];
      this.pos++;
    }
    this.pos++;
    return { type: 'regex', text: pattern, val: undefined, line, col };
  }

  private readEscape(line: number, col: number): string {
    // At the backslash.
    const e = this.src[this.pos + 1];
    this.pos += 2;
    switch (e) {
      case 'b':
        return '\b';
      case 'f':
        return '\f';
      case 'n':
        return '\n';
      case 'r':
        return '\r';
      case 't':
        return '\t';
      case '"':
        return '"';
      case '\\':
        return '\\';
      case '$':
        return '$';
      case '`':
        return '`';
      case 'u': {
        const hex = this.src.slice(this.pos, this.pos + 4);
        if (!/^[0-9a-fA-F]{4}$/.test(hex)) throw this.error('bad \\u escape (expected 4 hex digits)', { line, col });
        this.pos += 4;
        return String.fromCharCode(parseInt(hex, 16));
      }
      default:
        throw this.error(`bad escape "\\${e ?? ''}" in string`, { line, col: this.pos - 2 - this.lineStart + 1 });
    }
  }

  private readStr(line: number, col: number): string {
    const s = this.src;
    this.pos++;
    let out = '';
    let runStart = this.pos;
    while (true) {
      if (this.pos >= s.length) throw this.error('unterminated string', { line, col });
      const c = this.c();
      if (c === 34) break;
      if (c === 10 || c === 13) throw this.error('unterminated string (newline inside)', { line, col });
      if (c === 92) {
        out += s.slice(runStart, this.pos) + this.readEscape(line, col);
        runStart = this.pos;
        continue;
      }
      this.pos++;
    }
    out += s.slice(runStart, this.pos);
    this.pos++;
    return out;
  }

  private readUri(line: number, col: number): HUri {
    const s = this.src;
    this.pos++;
    let out = '';
    while (true) {
      if (this.pos >= s.length || this.c() === 10) throw this.error('unterminated Uri', { line, col });
      const c = this.c();
      if (c === 96) break;
      if (c === 92) {
        const e = s[this.pos + 1];
        // Uri escapes: \` and \\; other escapes of the string kind; anything else is kept verbatim
        // (Uris are full of backslash-free text, but `\:` in older Zinc writers must survive).
        if (e === '`' || e === '\\') {
          out += e;
          this.pos += 2;
        } else if (e !== undefined && 'bfnrtu"$'.includes(e)) {
          out += this.readEscape(line, col);
        } else {
          out += '\\' + (e ?? '');
          this.pos += 2;
        }
        continue;
      }
      out += s[this.pos];
      this.pos++;
    }
    this.pos++;
    return new HUri(out);
  }

  /** Numbers (with unit), Dates, Times and DateTimes all start with digits. */
  private readNumberLike(line: number, col: number): Token {
    const s = this.src;
    const start = this.pos;
    const neg = this.c() === 45;
    if (neg) this.pos++;
    const digitsStart = this.pos;
    // Hex integer.
    if (!neg && this.c() === 48 && this.c(1) === 120) {
      this.pos += 2;
      while (/[0-9a-fA-F_]/.test(s[this.pos] ?? '')) this.pos++;
      const hex = s.slice(start + 2, this.pos).replace(/_/g, '');
      if (hex.length === 0) throw this.error('bad hex number', { line, col });
      return { type: 'val', text: s.slice(start, this.pos), val: new HNumber(parseInt(hex, 16)), line, col };
    }
    while (isDigit(this.c()) || this.c() === 95) this.pos++;
    const nDigits = this.pos - digitsStart;
    // Date and DateTime: YYYY-MM-DD[T...]
    if (!neg && nDigits === 4 && this.c() === 45 && isDigit(this.c(1))) {
      this.pos = start + 10;
      if (this.c() === 84 && isDigit(this.c(1))) return this.readDateTime(start, line, col);
      const text = s.slice(start, this.pos);
      return { type: 'val', text, val: this.wrap(() => parseDate(text), line, col), line, col };
    }
    // Time: hh:mm[:ss[.fff]]
    if (!neg && nDigits === 2 && this.c() === 58 && isDigit(this.c(1))) {
      this.pos += 3;
      if (this.c() === 58) {
        this.pos += 3;
        if (this.c() === 46) {
          this.pos++;
          while (isDigit(this.c())) this.pos++;
        }
      }
      const text = s.slice(start, this.pos);
      return { type: 'val', text, val: this.wrap(() => parseTime(text), line, col), line, col };
    }
    if (this.c() === 46 && isDigit(this.c(1))) {
      this.pos++;
      while (isDigit(this.c()) || this.c() === 95) this.pos++;
    }
    if ((this.c() === 101 || this.c() === 69) && (isDigit(this.c(1)) || ((this.c(1) === 43 || this.c(1) === 45) && isDigit(this.c(2))))) {
      this.pos += 2;
      while (isDigit(this.c())) this.pos++;
    }
    const numText = s.slice(start, this.pos).replace(/_/g, '');
    const unitStart = this.pos;
    while (this.pos < s.length && isUnitChar(this.c())) this.pos++;
    const unit = this.pos > unitStart ? s.slice(unitStart, this.pos) : null;
    const v = Number(numText);
    if (numText.endsWith('.') || Number.isNaN(v)) throw this.error(`"${numText}" is not a number`, { line, col });
    if (unit !== null && !isUnitText(unit)) throw this.error(`"${unit}" is not a valid unit`, { line, col });
    return { type: 'val', text: s.slice(start, this.pos), val: new HNumber(v, unit), line, col };
  }

  private readDateTime(start: number, line: number, col: number): Token {
    const s = this.src;
    // At the 'T': scan time, then the offset, then an optional " Zone" (zone names start with
    // an uppercase letter, which keeps `... Z and x` in a filter from reading `and` as a zone).
    this.pos++;
    while (isDigit(this.c()) || this.c() === 58 || this.c() === 46) this.pos++;
    if (this.c() === 90) this.pos++;
    else if (this.c() === 43 || this.c() === 45) {
      this.pos++;
      while (isDigit(this.c()) || this.c() === 58) this.pos++;
    }
    if (this.c() === 32 && this.c(1) >= 65 && this.c(1) <= 90) {
      this.pos++;
      while (this.pos < s.length && isTzChar(this.c())) this.pos++;
    }
    const text = s.slice(start, this.pos);
    return { type: 'val', text, val: this.wrap(() => parseDateTime(text), line, col), line, col };
  }

  /** Value errors inside a literal keep their message but say where the literal is. */
  private wrap<T>(f: () => T, line: number, col: number): T {
    try {
      return f();
    } catch (e) {
      if (e instanceof HayloftError) {
        const where = this.kind === 'filter' ? `at column ${col}` : `at line ${line}, column ${col}`;
        throw new HayloftError(this.code(), `${this.kind}: ${e.message} ${where}`, { cause: e });
      }
      throw e;
    }
  }
}
