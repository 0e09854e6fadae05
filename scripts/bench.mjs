// `npm run bench -- <name> [args]`: compiles the project (src, bench) with tsc into dist-bench/ and
// runs dist-bench/bench/<name>.js, so benchmarks measure the same plain JavaScript the daemon runs
// (no TypeScript loader in the way). Every benchmark when no name is given. Benchmarks are never
// part of the test suite; they record their figures in docs/performance.md.
import { spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, readdirSync } from 'node:fs';

const [name, ...rest] = process.argv.slice(2);
const all = readdirSync('bench').filter((f) => f.endsWith('.ts') && f !== 'harness.ts').map((f) => f.slice(0, -3));
const which = name === undefined ? all : [name];
for (const b of which) {
  if (!all.includes(b)) {
    console.error(`no benchmark "${b}"; there are: ${all.join(', ')}`);
    process.exit(2);
  }
}
const tsc = spawnSync('npx', ['tsc', '-p', 'tsconfig.bench.json'], { stdio: 'inherit' });
if (tsc.status !== 0) process.exit(tsc.status ?? 1);
// The daemon is started as users start it, by the `hayloft` command (bin/hayloft), which runs
// <its folder>/../dist/cli.js, the bundle `npm run build` makes: here dist-bench/bin/hayloft and
// dist-bench/dist, built from src/ by the same script.
mkdirSync('dist-bench/bin', { recursive: true });
copyFileSync('bin/hayloft', 'dist-bench/bin/hayloft');
chmodSync('dist-bench/bin/hayloft', 0o755);
const bundle = spawnSync(process.execPath, ['scripts/build-server.mjs', 'dist-bench/dist'], { stdio: 'inherit' });
if (bundle.status !== 0) process.exit(bundle.status ?? 1);
// Benchmarks that run parts of the daemon in their own process run with the daemon's Node flags
// (src/lib/runtime.ts, which `hayloft serve` applies to itself): memory and speed as deployed.
const { nodeFlags } = await import('../dist-bench/src/lib/runtime.js');
for (const b of which) {
  console.log(`== bench/${b}`);
  const r = spawnSync(process.execPath, [...nodeFlags(), `dist-bench/bench/${b}.js`, ...rest], { stdio: 'inherit' });
  if (r.status !== 0) process.exit(r.status ?? 1);
}
