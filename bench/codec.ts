/**
 * bench/codec: decode and encode a 100,000-row history grid (ts in New_York at one-minute steps,
 * a Number with a unit) in JSON v3 and in Zinc, in rows/s, beside a bare JSON.parse and
 * JSON.stringify of the same JSON text measured in the same run.
 *
 *   npm run bench -- codec [--rounds N] [--no-record]
 */
import { readJsonGrid, writeJsonGrid } from '../src/haystack/json.js';
import { timeZone } from '../src/haystack/tz.js';
import { readZinc, writeZinc } from '../src/haystack/zinc.js';
import { HDict, HGrid, HNumber, HRef, HDateTime } from '../src/haystack/values.js';
import { fmtRate, hasFlag, machineLine, measure, numberArg, recordSection } from './harness.js';

const ROWS = 100_000;
const rounds = numberArg('--rounds', 9);

function makeGrid(): HGrid {
  const tz = timeZone('New_York');
  const t0 = Date.UTC(2024, 2, 9); // spans the 2024-03-10 DST change
  const rows = new Array<HDict>(ROWS);
  for (let i = 0; i < ROWS; i++) {
    const v = Math.round((21 + 3 * Math.sin(i / 240) + ((i * 7919) % 13) / 20) * 10) / 10;
    rows[i] = HDict.of({ ts: new HDateTime(t0 + i * 60_000, tz), val: new HNumber(v, '°F') });
  }
  return new HGrid(
    HDict.of({ id: new HRef('p1', 'Zone Temp') }),
    [
      { name: 'ts', meta: HDict.EMPTY },
      { name: 'val', meta: HDict.EMPTY },
    ],
    rows,
  );
}

const grid = makeGrid();
const json = writeJsonGrid(grid);
const zinc = writeZinc(grid);
const parsed: unknown = JSON.parse(json);

// Sanity: both codecs read back what they wrote.
const back = readJsonGrid(json);
if (back.rows.length !== ROWS || writeZinc(readZinc(zinc)) !== zinc) throw new Error('codec round trip failed');

const med = measure(
  {
    'JSON.parse (baseline)': () => JSON.parse(json) as unknown,
    'JSON.stringify (baseline)': () => JSON.stringify(parsed),
    'JSON v3 decode': () => readJsonGrid(json),
    'JSON v3 encode': () => writeJsonGrid(grid),
    'Zinc decode': () => readZinc(zinc),
    'Zinc encode': () => writeZinc(grid),
  },
  rounds,
);

const baseParse = med['JSON.parse (baseline)'] as number;
const baseStringify = med['JSON.stringify (baseline)'] as number;
const lines = [
  `Run: \`npm run bench -- codec\` on ${machineLine()}; ${ROWS.toLocaleString('en')} rows, ${rounds} interleaved rounds after 2 warm-ups, medians. JSON text ${(json.length / 1e6).toFixed(1)} MB, Zinc text ${(zinc.length / 1e6).toFixed(1)} MB. Decoding validates every timestamp (offset checked against the zone).`,
  '',
  '| case | median ms | rows/s | vs baseline |',
  '|---|---:|---:|---:|',
];
for (const [name, ms] of Object.entries(med)) {
  const base = name.includes('decode') || name.includes('parse') ? baseParse : baseStringify;
  const ratio = name.includes('baseline') ? '1.00' : (base / ms).toFixed(2);
  lines.push(`| ${name} | ${ms.toFixed(1)} | ${fmtRate((ROWS / ms) * 1000)} | ${ratio} |`);
}
lines.push('', '"vs baseline" is the baseline time divided by the case time (decode against JSON.parse, encode against JSON.stringify): 1.00 means as fast as the bare call.');
const table = lines.join('\n');
console.log(table);
if (!hasFlag('--no-record')) recordSection('codec', table);
