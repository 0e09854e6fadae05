// Builds the technician's console (web/) into dist/web: one JS and one CSS bundle with content
// hashes in their names (served `immutable`), and an index.html that names them (served
// `no-cache`). No inline script or style, so the server's Content-Security-Policy needs no
// 'unsafe-inline'. Prints the compressed size of a first load (brotli, as the server sends it).
import { build } from 'esbuild';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { brotliCompressSync } from 'node:zlib';

const out = 'dist/web';
rmSync(out, { recursive: true, force: true });
mkdirSync(join(out, 'assets'), { recursive: true });
const result = await build({
  entryPoints: ['web/src/main.tsx'],
  bundle: true,
  minify: true,
  format: 'esm',
  target: ['es2022'],
  jsx: 'automatic',
  jsxImportSource: 'preact',
  outdir: join(out, 'assets'),
  entryNames: '[name]-[hash]',
  assetNames: '[name]-[hash]',
  metafile: true,
  legalComments: 'none',
  logLevel: 'warning',
});
const files = Object.keys(result.metafile.outputs).map((f) => basename(f));
const js = files.find((f) => f.endsWith('.js'));
const css = files.find((f) => f.endsWith('.css'));
if (js === undefined || css === undefined) throw new Error(`build-web: expected a .js and a .css bundle, got ${files.join(', ')}`);
const html = readFileSync('web/index.html', 'utf8').replace('%CSS%', `assets/${css}`).replace('%JS%', `assets/${js}`);
writeFileSync(join(out, 'index.html'), html);
let total = 0;
for (const f of ['index.html', `assets/${js}`, `assets/${css}`]) total += brotliCompressSync(readFileSync(join(out, f))).length;
console.error(`build-web: dist/web built (${js}, ${css}); first load ${(total / 1024).toFixed(1)} KB compressed (brotli)`);
