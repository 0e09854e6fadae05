/**
 * Modbus register maps: the CSV a Modbus integrator keeps per device model, one row per
 * register, turned into point proposals (learn) for a connector that carries it (`modbusRegMap`,
 * the CSV text) or had it imported (`hayloft modbus-map import`).
 *
 *   name,dis,address,kind,unit,access,scale,offset
 *   supplyTemp,Supply temperature,holding:0:float32,Number,°C,r,,
 *   setpoint,Setpoint,holding:10:int16,Number,°C,rw,0.1,0
 *
 * The first row names the columns (any order, any case; `access` may also be headed `rw`,
 * `read/write` or `mode`); `name` and `address` are required, the rest optional. `address` is a
 * `modbusCur` (address.ts); `kind` defaults to Bool for bits and Number otherwise; `access` is `r`
 * (default) or `rw`/`w` (written with `modbusWrite`); `scale`/`offset` become `modbusScale` and
 * `modbusOffset`. Lines starting with `#` are comments.
 *
 * A map is all or nothing: every bad row is reported, with its line number, in one error, and
 * nothing is proposed from a map with errors.
 */
import { createRequire } from 'node:module';
import type { parse as Parse } from 'csv-parse/sync';
import { HNumber } from '../../haystack/values.js';
import { ErrorCodes, HayloftError, isHayloftError } from '../../lib/errors.js';
import { parseModbusCur } from './address.js';

/**
 * csv-parse, loaded on the first map read: createRec and updateRec check every map they are given
 * (records op), and a gateway without Modbus maps need not carry the parser (issue 19). Its
 * CommonJS build, as the check is synchronous.
 */
let csvParse: typeof Parse | undefined;
function parser(): typeof Parse {
  csvParse ??= (createRequire(import.meta.url)('csv-parse/sync') as { parse: typeof Parse }).parse;
  return csvParse;
}

export interface RegEntry {
  /** Line of the CSV the entry came from. */
  readonly line: number;
  readonly name: string;
  readonly dis: string;
  /** The `modbusCur` address, as written (trimmed). */
  readonly cur: string;
  readonly kind: 'Number' | 'Bool';
  readonly unit: string | undefined;
  readonly writable: boolean;
  readonly scale: number | undefined;
  readonly offset: number | undefined;
}

const COLUMNS: Readonly<Record<string, string>> = {
  name: 'name',
  dis: 'dis',
  address: 'address',
  modbuscur: 'address',
  kind: 'kind',
  unit: 'unit',
  access: 'access',
  rw: 'access',
  'read/write': 'access',
  mode: 'access',
  scale: 'scale',
  offset: 'offset',
};
const NAME = /^[a-z][A-Za-z0-9_]*$/;
/** Rows a map may hold: a Modbus device has at most 4 × 65,536 addresses; a map beyond is a mistake. */
export const MAX_REG_ROWS = 10_000;

function mapError(problems: readonly string[]): HayloftError {
  const shown = problems.slice(0, 50);
  const more = problems.length > shown.length ? `\n(and ${problems.length - shown.length} more)` : '';
  return new HayloftError(ErrorCodes.BAD_REG_MAP, `the Modbus register map has ${problems.length} error${problems.length === 1 ? '' : 's'}:\n${shown.join('\n')}${more}`);
}

/** Parses and checks a register map. Throws HL_BAD_REG_MAP listing every bad row. */
export function parseRegMap(csv: string): RegEntry[] {
  let rows: { record: string[]; info: { lines: number } }[];
  try {
    rows = parser()(csv, { info: true, skip_empty_lines: true, trim: true, relax_column_count: true, comment: '#', bom: true }) as unknown as typeof rows;
  } catch (e) {
    const line = (e as { lines?: number }).lines;
    throw mapError([`line ${line ?? '?'}: ${e instanceof Error ? e.message : String(e)}`]);
  }
  const [header, ...body] = rows;
  if (header === undefined) throw mapError(['the map is empty: the first line must name the columns (name,dis,address,kind,unit,access,scale,offset)']);
  const problems: string[] = [];
  const col = new Map<string, number>();
  header.record.forEach((h, i) => {
    const c = COLUMNS[h.toLowerCase()];
    if (c === undefined) problems.push(`line ${header.info.lines}: unknown column "${h}" (known: name, dis, address, kind, unit, access, scale, offset)`);
    else if (col.has(c)) problems.push(`line ${header.info.lines}: column "${h}" given twice`);
    else col.set(c, i);
  });
  for (const c of ['name', 'address']) if (!col.has(c)) problems.push(`line ${header.info.lines}: the header has no "${c}" column`);
  if (problems.length > 0) throw mapError(problems);
  if (body.length > MAX_REG_ROWS) throw mapError([`the map has ${body.length} rows; at most ${MAX_REG_ROWS}`]);

  const out: RegEntry[] = [];
  const names = new Map<string, number>();
  for (const { record, info } of body) {
    const line = info.lines;
    const get = (c: string): string => {
      const i = col.get(c);
      return i === undefined ? '' : (record[i] ?? '');
    };
    const bad = (m: string): void => void problems.push(`line ${line}: ${m}`);
    const before = problems.length;
    const name = get('name');
    if (!NAME.test(name)) bad(`name "${name}" is not a tag-like name (a lower-case letter, then letters, digits or _)`);
    else if (names.has(name)) bad(`name "${name}" is already used on line ${names.get(name)}`);
    else names.set(name, line);
    const cur = get('address');
    let bits = false;
    let readOnlyTable = false;
    try {
      const a = parseModbusCur(cur);
      bits = a.type === 'bool';
      readOnlyTable = a.table === 'input' || a.table === 'discrete';
    } catch (e) {
      if (!isHayloftError(e)) throw e;
      bad(e.message.replace(/^modbusCur /, 'address '));
    }
    const k = get('kind');
    let kind: 'Number' | 'Bool' = bits ? 'Bool' : 'Number';
    if (k !== '') {
      if (k !== 'Number' && k !== 'Bool') bad(`kind "${k}" is not Number or Bool`);
      else kind = k;
    }
    const unit = get('unit');
    if (unit !== '') {
      if (kind !== 'Number') bad(`unit "${unit}" on a ${kind} register`);
      else {
        try {
          new HNumber(0, unit);
        } catch {
          bad(`unit "${unit}" is not a unit`);
        }
      }
    }
    const access = get('access').toLowerCase();
    let writable = false;
    if (access === 'rw' || access === 'w' || access === 'read/write' || access === 'write') writable = true;
    else if (access !== '' && access !== 'r' && access !== 'ro' && access !== 'read') bad(`access "${get('access')}" is not r or rw`);
    if (writable && readOnlyTable) bad(`access rw on ${cur}: input registers and discrete inputs cannot be written`);
    const num = (c: string): number | undefined => {
      const t = get(c);
      if (t === '') return undefined;
      const v = Number(t);
      if (!Number.isFinite(v)) {
        bad(`${c} "${t}" is not a number`);
        return undefined;
      }
      if (bits) bad(`${c} applies to numeric registers, not to bits`);
      return v;
    };
    const scale = num('scale');
    const offset = num('offset');
    if (problems.length > before) continue;
    out.push({ line, name, dis: get('dis') === '' ? name : get('dis'), cur: cur.trim(), kind, unit: unit === '' ? undefined : unit, writable, scale, offset });
  }
  if (problems.length > 0) throw mapError(problems);
  return out;
}
