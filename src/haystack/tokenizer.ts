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
 *
 * Numbers: `_` is a digit separator only when a digit follows it (`1_000` is 1000), as in the
 * Haystack reference tokenizer; otherwise it starts the unit, so `5_x` is 5 in unit `_x`, which
 * is what the Zinc writer writes for that number.
 *
 * Two ways to read tokens. `peek()`/`next()` return a Token object, which is what the filter
 * parser and error messages use. The Zinc reader's per-cell path instead reads the current token
 * from the tokenizer's own fields (`peekType()`, `val`, `sym`, then `skip()`), because a
 * 100,000-row history grid is 400,000 tokens and an object, a closure and a text slice for each
 * was most of the time spent reading it. Either way a token is lexed only when first looked at,
 * so a malformed token is reported only once the parser gets to it.
 */
import { limitError } from './limits.js';
import { type ErrorCode, ErrorCodes, HayloftError } from '../lib/errors.js';
import { parseDate, parseDateTime, parseTime } from './datetime.js';
import { HNumber, HRef, HUri, isUnitText, type HVal } from './values.js';
import { groupThousands } from '../lib/quote.js';

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
  /** Longest token (a value or a name as written), refused with HL_LIMIT past it (maxValueChars). */
  maxTokenChars?: number;
}

/** The `sym` code of a symbol's text: its char code, or first * 256 + second for two chars. */
export function symCode(text: string): number {
  return text.length === 2 ? text.charCodeAt(0) * 256 + text.charCodeAt(1) : text.charCodeAt(0);
}

export const SYM_COMMA = 44;
export const SYM_CLOSE_GRID = symCode('>>');
const SYM_MATCH = symCode('=~');

/** One-char symbols by char code: `,:;()[]{}<>=!/$&|+*?^#-.` */
const ONE_CHAR_SYM = new Uint8Array(128);
for (const ch of ',:;()[]{}<>=!/$&|+*?^#-.') ONE_CHAR_SYM[ch.charCodeAt(0)] = 1;

/** `== != <= >= -> =~ << >>` */
function isTwoCharSym(c: number, c2: number): boolean {
  switch (c) {
    case 61: // =
      return c2 === 61 || c2 === 126;
    case 33: // !
      return c2 === 61;
    case 60: // <
      return c2 === 61 || c2 === 60;
    case 62: // >
      return c2 === 61 || c2 === 62;
    case 45: // -
      return c2 === 62;
  }
  return false;
}

/** 10^0 .. 10^22: the powers of ten a double holds exactly. */
const POW10 = Array.from({ length: 23 }, (_, i) => Number('1e' + i));

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
function isHexDigit(c: number): boolean {
  return isDigit(c) || (c >= 97 && c <= 102) || (c >= 65 && c <= 70) || c === 95;
}

/** `s[start, end)` without its `_` digit separators. */
function withoutSeparators(s: string, start: number, end: number): string {
  let out = '';
  let run = start;
  for (let i = start; i < end; i++) {
    if (s.charCodeAt(i) !== 95) continue;
    out += s.slice(run, i);
    run = i + 1;
  }
  return out + s.slice(run, end);
}


export class Tokenizer {
  private readonly src: string;
  private readonly newlines: boolean;
  private readonly kind: 'zinc' | 'filter';
  private readonly maxTokenChars: number;
  private pos = 0;
  private line = 1;
  private lineStart = 0;
  /** The previous token was `=~`, so a `/` starts a regex. */
  private afterMatch = false;
  // The unit of the previous Number: history grids repeat one unit on every row.
  private lastUnit = '';

  // The current token. `lexed` is false once it has been consumed: the next look lexes another.
  private lexed = false;
  private snapshot: Token | undefined;
  private type: TokenType = 'eof';
  private curVal: HVal | undefined = undefined;
  private curSym = 0;
  /** Offsets of the current token's text in the source. */
  private start = 0;
  private end = 0;
  /** 1-based position of the current token's first character. */
  private tokLine = 1;
  private tokCol = 1;
  private regexText = '';

  constructor(src: string, opts: TokenizerOptions = {}) {
    this.src = src;
    this.newlines = opts.newlines ?? false;
    this.kind = opts.kind ?? (this.newlines ? 'zinc' : 'filter');
    this.maxTokenChars = opts.maxTokenChars ?? Infinity;
  }

  /** Type of the current token, lexing it if needed; its fields are then valid until `skip()`. */
  peekType(): TokenType {
    if (!this.lexed) this.lex();
    return this.type;
  }

  /** Consumes the current token (which must have been looked at). */
  skip(): void {
    this.lexed = false;
  }

  /** Value of the current token when it is a `val`. */
  get val(): HVal | undefined {
    return this.curVal;
  }

  /** `symCode` of the current token when it is a `sym`. */
  get sym(): number {
    return this.curSym;
  }

  /** Source text of the current token, as in `Token.text`. */
  private text(): string {
    switch (this.type) {
      case 'regex':
        return this.regexText;
      case 'nl':
        return '\n';
      case 'eof':
        return '';
    }
    return this.src.slice(this.start, this.end);
  }

  /** The current token as an object (the same object until it is consumed). */
  peek(): Token {
    if (!this.lexed) this.lex();
    this.snapshot ??= { type: this.type, text: this.text(), val: this.curVal, line: this.tokLine, col: this.tokCol };
    return this.snapshot;
  }

  next(): Token {
    const t = this.peek();
    this.lexed = false;
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

  /** Completes the current token, which ends at `pos`. */
  private setToken(type: TokenType, val: HVal | undefined): void {
    if (this.pos - this.start > this.maxTokenChars) {
      const at = this.kind === 'filter' ? ` at column ${this.tokCol}` : ` at line ${this.tokLine}, column ${this.tokCol}`;
      throw limitError(this.kind, `a token of ${groupThousands(this.pos - this.start)} chars`, this.maxTokenChars, 'maxValueChars', at);
    }
    this.lexed = true;
    this.type = type;
    this.curVal = val;
    this.end = this.pos;
  }

  private lex(): void {
    const s = this.src;
    const n = s.length;
    let pos = this.pos;
    // Whitespace; newlines are tokens in Zinc.
    while (pos < n) {
      const c = s.charCodeAt(pos);
      if (c === 32 || c === 9 || c === 0xa0) pos++;
      else if (this.newlines || (c !== 10 && c !== 13)) break;
      else if (c === 13 && s.charCodeAt(pos + 1) === 10) pos++;
      else {
        pos++;
        this.line++;
        this.lineStart = pos;
      }
    }
    this.pos = pos;
    this.snapshot = undefined;
    this.start = pos;
    this.tokLine = this.line;
    this.tokCol = pos - this.lineStart + 1;

    if (pos >= n) {
      this.setToken('eof', undefined);
      return;
    }
    const c = s.charCodeAt(pos);

    if (c === 10 || c === 13) {
      this.pos = pos + (c === 13 && s.charCodeAt(pos + 1) === 10 ? 2 : 1);
      this.line++;
      this.lineStart = this.pos;
      this.afterMatch = false;
      this.setToken('nl', undefined);
      return;
    }

    if (this.afterMatch) {
      this.afterMatch = false;
      if (c === 47) {
        this.readRegex();
        return;
      }
    }

    if (isAlpha(c) || c === 95) {
      pos++;
      while (pos < n && isIdChar(s.charCodeAt(pos))) pos++;
      this.pos = pos;
      this.setToken('id', undefined);
      return;
    }
    if (isDigit(c)) {
      this.readNumberLike();
      return;
    }
    if (c === 45) {
      if (isDigit(s.charCodeAt(pos + 1))) {
        this.readNumberLike();
        return;
      }
      if (s.startsWith('-INF', pos) && !isIdChar(s.charCodeAt(pos + 4))) {
        this.pos = pos + 4;
        this.setToken('val', new HNumber(-Infinity));
        return;
      }
    }
    if (c === 34) {
      const str = this.readStr();
      this.setToken('val', str);
      return;
    }
    if (c === 64) {
      pos++;
      while (pos < n && isRefChar(s.charCodeAt(pos))) pos++;
      this.pos = pos;
      const id = s.slice(this.start + 1, pos);
      if (id.length === 0) throw this.error('expected a Ref id after "@"', this.tokenAt());
      let dis: string | null = null;
      if (s.charCodeAt(pos) === 32 && s.charCodeAt(pos + 1) === 34) {
        this.pos++;
        dis = this.readStr();
      }
      this.setToken('val', new HRef(id, dis));
      return;
    }
    if (c === 96) {
      const uri = this.readUri();
      this.setToken('val', uri);
      return;
    }

    const c2 = s.charCodeAt(pos + 1);
    if (isTwoCharSym(c, c2)) {
      this.pos = pos + 2;
      this.curSym = c * 256 + c2;
      this.afterMatch = this.curSym === SYM_MATCH;
      this.setToken('sym', undefined);
      return;
    }
    if (c < 128 && ONE_CHAR_SYM[c] === 1) {
      this.pos = pos + 1;
      this.curSym = c;
      this.setToken('sym', undefined);
      return;
    }
    throw this.error(`unexpected character ${JSON.stringify(s[pos])}`, this.tokenAt());
  }

  /** Position of the token being lexed, for errors. */
  private tokenAt(): { line: number; col: number } {
    return { line: this.tokLine, col: this.tokCol };
  }

  private readRegex(): void {
    const s = this.src;
    this.pos++;
    let pattern = '';
    while (true) {
      if (this.pos >= s.length || s.charCodeAt(this.pos) === 10) throw this.error('unterminated regex', this.tokenAt());
      const c = s.charCodeAt(this.pos);
      if (c === 47) break;
      if (c === 92 && s.charCodeAt(this.pos + 1) === 47) {
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
    this.regexText = pattern;
    this.setToken('regex', undefined);
  }

  private readEscape(): string {
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
        if (!/^[0-9a-fA-F]{4}$/.test(hex)) throw this.error('bad \\u escape (expected 4 hex digits)', this.tokenAt());
        this.pos += 4;
        return String.fromCharCode(parseInt(hex, 16));
      }
      default:
        throw this.error(`bad escape "\\${e ?? ''}" in string`, { line: this.tokLine, col: this.pos - 2 - this.lineStart + 1 });
    }
  }

  /** A quoted Str, at its opening quote. */
  private readStr(): string {
    const s = this.src;
    let pos = this.pos + 1;
    let out = '';
    let runStart = pos;
    while (true) {
      if (pos >= s.length) {
        this.pos = pos;
        throw this.error('unterminated string', this.tokenAt());
      }
      const c = s.charCodeAt(pos);
      if (c === 34) break;
      if (c === 10 || c === 13) {
        this.pos = pos;
        throw this.error('unterminated string (newline inside)', this.tokenAt());
      }
      if (c === 92) {
        this.pos = pos;
        out += s.slice(runStart, pos) + this.readEscape();
        pos = runStart = this.pos;
        continue;
      }
      pos++;
    }
    out += s.slice(runStart, pos);
    this.pos = pos + 1;
    return out;
  }

  private readUri(): HUri {
    const s = this.src;
    this.pos++;
    let out = '';
    while (true) {
      if (this.pos >= s.length || s.charCodeAt(this.pos) === 10) throw this.error('unterminated Uri', this.tokenAt());
      const c = s.charCodeAt(this.pos);
      if (c === 96) break;
      if (c === 92) {
        const e = s[this.pos + 1];
        // Uri escapes: \` and \\; other escapes of the string kind; anything else is kept verbatim
        // (Uris are full of backslash-free text, but `\:` in older Zinc writers must survive).
        if (e === '`' || e === '\\') {
          out += e;
          this.pos += 2;
        } else if (e !== undefined && 'bfnrtu"$'.includes(e)) {
          out += this.readEscape();
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

  /**
   * Numbers (with unit), Dates, Times and DateTimes all start with digits. The number's value is
   * accumulated while scanning: a mantissa below 2^53 scaled by at most 10^22 is exact before one
   * correctly rounded multiply or divide, so it equals `Number(text)` without slicing the text.
   * Anything else (long mantissas, large exponents) goes through `Number` on the text.
   */
  private readNumberLike(): void {
    const s = this.src;
    const start = this.pos;
    let pos = start;
    const neg = s.charCodeAt(pos) === 45;
    if (neg) pos++;
    const digitsStart = pos;
    // Hex integer.
    if (!neg && s.charCodeAt(pos) === 48 && s.charCodeAt(pos + 1) === 120) {
      pos += 2;
      while (isHexDigit(s.charCodeAt(pos))) pos++;
      this.pos = pos;
      const hex = withoutSeparators(s, start + 2, pos);
      if (hex.length === 0) throw this.error('bad hex number', this.tokenAt());
      this.setToken('val', new HNumber(parseInt(hex, 16)));
      return;
    }
    let mant = 0;
    let separators = false;
    let c = s.charCodeAt(pos);
    while (true) {
      if (isDigit(c)) mant = mant * 10 + (c - 48);
      else if (c === 95 && isDigit(s.charCodeAt(pos + 1))) separators = true;
      else break;
      c = s.charCodeAt(++pos);
    }
    const nDigits = pos - digitsStart;
    // Date and DateTime: YYYY-MM-DD[T...]
    if (!neg && nDigits === 4 && c === 45 && isDigit(s.charCodeAt(pos + 1))) {
      this.pos = start + 10;
      if (s.charCodeAt(this.pos) === 84 && isDigit(s.charCodeAt(this.pos + 1))) {
        this.readDateTime(start);
        return;
      }
      const text = s.slice(start, this.pos);
      let date: HVal;
      try {
        date = parseDate(text);
      } catch (e) {
        throw this.valueError(e);
      }
      this.setToken('val', date);
      return;
    }
    // Time: hh:mm[:ss[.fff]]
    if (!neg && nDigits === 2 && c === 58 && isDigit(s.charCodeAt(pos + 1))) {
      pos += 3;
      if (s.charCodeAt(pos) === 58) {
        pos += 3;
        if (s.charCodeAt(pos) === 46) {
          pos++;
          while (isDigit(s.charCodeAt(pos))) pos++;
        }
      }
      this.pos = pos;
      const text = s.slice(start, pos);
      let time: HVal;
      try {
        time = parseTime(text);
      } catch (e) {
        throw this.valueError(e);
      }
      this.setToken('val', time);
      return;
    }
    let scale = 0;
    if (c === 46 && isDigit(s.charCodeAt(pos + 1))) {
      c = s.charCodeAt(++pos);
      while (true) {
        if (isDigit(c)) {
          mant = mant * 10 + (c - 48);
          scale--;
        } else if (c === 95 && isDigit(s.charCodeAt(pos + 1))) separators = true;
        else break;
        c = s.charCodeAt(++pos);
      }
    }
    if (c === 101 || c === 69) {
      const c1 = s.charCodeAt(pos + 1);
      const signed = c1 === 43 || c1 === 45;
      if (isDigit(c1) || (signed && isDigit(s.charCodeAt(pos + 2)))) {
        pos += 2;
        let exp = signed ? 0 : c1 - 48;
        while (isDigit((c = s.charCodeAt(pos)))) {
          // Capped: past 10^22 the slow path decides anyway, and the cap keeps it an integer.
          if (exp < 1000) exp = exp * 10 + (c - 48);
          pos++;
        }
        scale += c1 === 45 ? -exp : exp;
      }
    }
    const numEnd = pos;
    while (pos < s.length && isUnitChar(s.charCodeAt(pos))) pos++;
    this.pos = pos;
    let v: number;
    if (mant <= Number.MAX_SAFE_INTEGER && scale >= -22 && scale <= 22) {
      v = scale < 0 ? mant / (POW10[-scale] as number) : mant * (POW10[scale] as number);
      if (neg) v = -v;
    } else {
      const numText = separators ? withoutSeparators(s, start, numEnd) : s.slice(start, numEnd);
      v = Number(numText);
      if (numText.endsWith('.') || Number.isNaN(v)) throw this.error(`"${numText}" is not a number`, this.tokenAt());
    }
    let unit: string | null = null;
    if (pos > numEnd) {
      const last = this.lastUnit;
      if (pos - numEnd === last.length && s.startsWith(last, numEnd)) unit = last;
      else {
        unit = s.slice(numEnd, pos);
        if (!isUnitText(unit)) throw this.error(`"${unit}" is not a valid unit`, this.tokenAt());
        this.lastUnit = unit;
      }
    }
    this.setToken('val', new HNumber(v, unit));
  }

  private readDateTime(start: number): void {
    const s = this.src;
    // At the 'T': scan time, then the offset, then an optional " Zone" (zone names start with
    // an uppercase letter, which keeps `... Z and x` in a filter from reading `and` as a zone).
    let pos = this.pos + 1;
    let c = s.charCodeAt(pos);
    while (isDigit(c) || c === 58 || c === 46) c = s.charCodeAt(++pos);
    if (c === 90) pos++;
    else if (c === 43 || c === 45) {
      c = s.charCodeAt(++pos);
      while (isDigit(c) || c === 58) c = s.charCodeAt(++pos);
    }
    c = s.charCodeAt(pos + 1);
    if (s.charCodeAt(pos) === 32 && c >= 65 && c <= 90) {
      pos++;
      while (pos < s.length && isTzChar(s.charCodeAt(pos))) pos++;
    }
    this.pos = pos;
    let dt: HVal;
    try {
      dt = parseDateTime(s, start, pos);
    } catch (e) {
      throw this.valueError(e);
    }
    this.setToken('val', dt);
  }

  /** Value errors inside a literal keep their message but say where the literal is. */
  private valueError(e: unknown): unknown {
    if (!(e instanceof HayloftError)) return e;
    const where = this.kind === 'filter' ? `at column ${this.tokCol}` : `at line ${this.tokLine}, column ${this.tokCol}`;
    return new HayloftError(this.code(), `${this.kind}: ${e.message} ${where}`, { cause: e });
  }
}
