// The dependency direction of docs/design/README.md, enforced in CI (`npm run depcheck`).
// Each layer lists what it may import; anything else under src/ is a violation.
const allowed = {
  lib: [],
  haystack: ['lib'],
  config: ['lib'],
  store: ['haystack', 'lib'],
  model: ['store', 'haystack', 'lib'],
  drivers: ['haystack', 'lib'],
  poller: ['drivers', 'model', 'store', 'haystack', 'lib'],
  watch: ['model', 'haystack', 'lib'],
  auth: ['model', 'store', 'haystack', 'lib'],
  sync: ['model', 'store', 'haystack', 'lib'],
  alarm: ['model', 'store', 'haystack', 'lib'],
  schedule: ['model', 'haystack', 'lib'],
  // Hayloft as a device of other protocols (BACnet): the model's points shown through a driver's protocol code.
  export: ['drivers', 'model', 'store', 'haystack', 'lib'],
  api: ['auth', 'watch', 'alarm', 'schedule', 'model', 'store', 'poller', 'haystack', 'lib'],
};
const layers = Object.keys(allowed);

module.exports = {
  forbidden: [
    ...layers.map((layer) => ({
      name: `${layer}-direction`,
      comment: `src/${layer} may import only: ${allowed[layer].join(', ') || 'nothing else in src'}`,
      severity: 'error',
      from: { path: `^src/${layer}/` },
      to: {
        path: '^src/',
        // Types of config are allowed to every layer (next rule): they vanish at build.
        pathNot: [`^src/${layer}/`, '^src/config/', ...allowed[layer].map((l) => `^src/${l}/`)],
      },
    })),
    {
      name: 'config-types-only',
      comment: 'a layer that may not import config may import its types (a section\'s settings interface), which vanish at build: no setting is written twice',
      severity: 'error',
      from: { path: `^src/(${layers.filter((l) => !allowed[l].includes('config') && l !== 'config').join('|')})/` },
      to: { path: '^src/config/', dependencyTypesNot: ['type-only'] },
    },
    {
      // The console is a client like any other: it reaches the server over HTTP only.
      name: 'web-http-only',
      comment: 'web/ may not import src/ (or Node built-ins): it talks to the server over HTTP',
      severity: 'error',
      from: { path: '^web/' },
      to: { path: '^src/' },
    },
    {
      name: 'web-no-node',
      comment: 'web/ runs in a browser: no Node built-ins',
      severity: 'error',
      from: { path: '^web/' },
      to: { dependencyTypes: ['core'] },
    },
    {
      name: 'src-not-web',
      comment: 'the server does not import the console; it serves its built files (dist/web)',
      severity: 'error',
      from: { path: '^src/' },
      to: { path: '^web/' },
    },
    {
      name: 'no-circular',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    {
      name: 'no-unknown-layer',
      comment: 'every folder under src/ must be a layer named in docs/design/README.md (or app.ts/cli.ts/commands.ts/demo.ts, which compose them)',
      severity: 'error',
      from: { path: '^src/', pathNot: [`^src/(${layers.join('|')})/`, '^src/(app|cli|commands|demo)\\.ts$'] },
      to: {},
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { extensions: ['.ts', '.tsx', '.js'] },
  },
};
