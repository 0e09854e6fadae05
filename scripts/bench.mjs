// `npm run bench -- <name> [args]`: runs bench/<name>.ts (every benchmark when no name is given).
// Benchmarks are never part of the test suite; they record their figures in docs/performance.md.
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';

const [name, ...rest] = process.argv.slice(2);
const all = readdirSync('bench').filter((f) => f.endsWith('.ts') && f !== 'harness.ts').map((f) => f.slice(0, -3));
const which = name === undefined ? all : [name];
for (const b of which) {
  if (!all.includes(b)) {
    console.error(`no benchmark "${b}"; there are: ${all.join(', ')}`);
    process.exit(2);
  }
  console.log(`== bench/${b}`);
  const r = spawnSync(process.execPath, ['--import', 'tsx', `bench/${b}.ts`, ...rest], { stdio: 'inherit' });
  if (r.status !== 0) process.exit(r.status ?? 1);
}
