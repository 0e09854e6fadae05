// Builds the daemon (src/cli.ts) into one ES module bundle: `node scripts/build-server.mjs [outdir]`
// (default dist/; scripts/bench.mjs builds dist-bench/dist the same way). `npm run build` runs it
// after tsc has checked the types.
//
// Why a bundle (docs/performance.md, "One bundle, and TurboFan later"): started from ~180 modules
// of ours and ~70 of the libraries', Node's module loader resolved each path, and on Node 24 that
// work made its path functions hot enough for TurboFan, whose code pages of the node binary (about
// 6 MiB) then stayed resident in a gateway that was only idling. With a few dozen files to resolve
// (and bin/hayloft's TurboFan threshold on Node 22+) a start no longer wakes it. Restarts take 0.6
// of the time, and one file opens faster from an SD card.
//
// - Bundled: our code, the libraries every start loads (pino, jose, prom-client, negotiator,
//   abstract-level and classic-level's JavaScript) and Modbus's (modbus-serial and serialport's
//   JavaScript: some 60 CommonJS files when the first Modbus connector starts), with what they
//   import. Modbus's go into the chunk loaded with the first Modbus connector, as before.
// - Left in node_modules (imported at run time, as before): every other dependency, loaded on
//   first use (BACnet, graphql, socket.io, mqtt, nodemailer...; test/lib/lazy-load.test.ts); those
//   some module of ours also loads with createRequire (one copy of a library, not two); native code
//   (classic-level's and serialport's bindings, found by node-gyp-build beside their package); and
//   polka with node:http, which src/api/node-http.ts requires as CommonJS on purpose.
// - Lazy parts of our own (`import()`) become chunks of their own, loaded when first used, as the
//   modules were. Whitespace removed and syntax shortened, names kept (fully minified names saved
//   nothing more): stack traces in the journal keep their function names, and the source maps
//   beside (not loaded at run time) lead back to src/.
import { build } from 'esbuild';
import { existsSync, lstatSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { join, relative } from 'node:path';

const out = process.argv[2] ?? 'dist';
const pkg = JSON.parse(readFileSync('package.json', 'utf8'));
const BUNDLED = new Set(['pino', 'jose', 'prom-client', 'negotiator', 'abstract-level', 'classic-level', 'modbus-serial', 'serialport']);
const external = Object.keys(pkg.dependencies)
  .filter((d) => !BUNDLED.has(d))
  .flatMap((d) => [d, `${d}/*`]);

/**
 * The modules that load native code (node-gyp-build, given their own folder): each stays a
 * run-time require of its file in node_modules, which finds the prebuilt binary beside it.
 */
const NATIVE = [
  { pkg: 'classic-level', request: /^\.\/binding(\.js)?$/, file: 'classic-level/binding.js' },
  { pkg: '@serialport/bindings-cpp', request: /^\.\/serialport-bindings(\.js)?$/, file: '@serialport/bindings-cpp/dist/serialport-bindings.js' },
];
const nativeBinding = {
  name: 'native-bindings',
  setup(b) {
    b.onResolve({ filter: /^\.\// }, (a) => {
      const n = NATIVE.find((x) => x.request.test(a.path) && a.importer.includes(`/node_modules/${x.pkg}/`));
      return n === undefined ? undefined : { path: n.file, external: true };
    });
  },
};

// Built beside dist/ (at the same depth: the source maps' relative paths hold), then moved in: a
// file at a time, each move atomic, the entry last. Chunks are named by their content, so two
// builds of the same sources (test files building at once) write the same files and neither
// removes the other's. (A daemon started from a build of other sources loses the chunks it has not
// loaded yet: restart it after building.)
const tmp = `${out}.build-${process.pid}`;
rmSync(tmp, { recursive: true, force: true });
const result = await build({
  entryPoints: { cli: 'src/cli.ts' },
  bundle: true,
  splitting: true,
  chunkNames: 'chunks/[name]-[hash]',
  format: 'esm',
  platform: 'node',
  target: `node${/\d+/.exec(pkg.engines?.node ?? '20')?.[0] ?? '20'}`,
  outdir: tmp,
  external,
  plugins: [nativeBinding],
  sourcemap: 'linked',
  // CommonJS inside the bundle (pino, prom-client...) calls require(): give every file one, made
  // on its first call (most chunks never call it; each createRequire walks the folders above).
  banner: {
    js: "import { createRequire as __hayloftCreateRequire } from 'node:module';\nlet __hayloftRequire;\nconst require = (id) => (__hayloftRequire ??= __hayloftCreateRequire(import.meta.url))(id);",
  },
  legalComments: 'none',
  minifyWhitespace: true,
  minifySyntax: true,
  logLevel: 'warning',
  metafile: true,
});
const built = Object.keys(result.metafile.outputs).map((f) => relative(tmp, f));
if (existsSync(out) && lstatSync(out).isSymbolicLink()) rmSync(out); // the link bench builds once had
mkdirSync(join(out, 'chunks'), { recursive: true });
const entry = ['cli.js', 'cli.js.map'];
for (const f of [...built.filter((f) => !entry.includes(f)), ...entry]) renameSync(join(tmp, f), join(out, f));
rmSync(tmp, { recursive: true, force: true });
// What an earlier build left goes: tsc's tree of modules (before the bundle), chunks of other
// sources. The console (dist/web, scripts/build-web.mjs) stays.
const keep = new Set(built);
for (const f of readdirSync(out)) if (!['web', 'chunks', ...entry].includes(f)) rmSync(join(out, f), { recursive: true, force: true });
for (const f of readdirSync(join(out, 'chunks'))) if (!keep.has(`chunks/${f}`)) rmSync(join(out, 'chunks', f), { force: true });
const js = built.filter((f) => f.endsWith('.js'));
const bytes = js.reduce((n, f) => n + result.metafile.outputs[join(tmp, f)].bytes, 0);
console.error(`build-server: ${out}/cli.js and ${js.length - 1} chunks built (${(bytes / 1024).toFixed(0)} KB)`);
