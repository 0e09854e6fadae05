// `npm start` (and the browser tests) helper: builds dist/ when it is missing or older than any
// file under src/, or the console (dist/web) when it is missing or older than any file under web/.
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

function newest(dir) {
  let t = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    t = Math.max(t, e.isDirectory() ? newest(p) : statSync(p).mtimeMs);
  }
  return t;
}

const at = (f) => (existsSync(f) ? statSync(f).mtimeMs : 0);
const server = at('dist/cli.js');
const web = at('dist/web/index.html');
if (server === 0 || newest('src') > server) {
  console.error('hayloft: building (npm run build)...');
  execFileSync('npm', ['run', '--silent', 'build'], { stdio: 'inherit' });
} else if (web === 0 || newest('web') > web) {
  console.error('hayloft: building the console (scripts/build-web.mjs)...');
  execFileSync(process.execPath, ['scripts/build-web.mjs'], { stdio: 'inherit' });
}
