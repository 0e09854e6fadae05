// `npm start` helper: builds dist/ when it is missing or older than any file under src/.
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

const built = existsSync('dist/cli.js') ? statSync('dist/cli.js').mtimeMs : 0;
if (built === 0 || newest('src') > built) {
  console.error('hayloft: building (npm run build)...');
  execFileSync('npm', ['run', '--silent', 'build'], { stdio: 'inherit' });
}
