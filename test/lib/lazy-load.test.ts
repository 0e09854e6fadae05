/**
 * What `hayloft serve` loads at start (issue 19: a Pi's memory). The libraries that only some
 * gateways use are loaded on first use: the protocol libraries with the first record of their
 * kind, graphql-js with the first /graphql request, socket.io with the first push request, re2js
 * with the first `=~` filter, csv-parse with the first Modbus register map, selfsigned in a child
 * process. One static import of the wrong module brings one back into every start (a records op
 * importing commissioning loaded the BACnet library that way), which no other test notices.
 *
 * The same for ICU's data: the first Intl formatter (a DateTimeFormat, a NumberFormat) pages in
 * about 8 MiB of it for the life of the process. Offsets come from the system's zone files
 * (src/haystack/tzif.ts), so a gateway in a named zone creates none, at start or writing and
 * reading history.
 *
 * The daemon runs as a child with a module `load` hook that lists every package it loads in a file,
 * and with Intl's formatters wrapped to list their creation in the same file.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import t from 'tap';
import { hasZoneFile } from '../../src/haystack/tzif.js';
import { serveChild } from '../helpers/serve-child.js';
import { tempDir } from '../helpers/tmp.js';

const LAZY = ['@bacnet-js/client', 'modbus-serial', 'serialport', 'graphql', 'socket.io', 'engine.io', 're2js', 'csv-parse', 'selfsigned', 'yaml'];

t.test('serve loads none of the on-demand libraries at start; GraphQL loads graphql-js when asked', async (t) => {
  const dir = tempDir(t);
  const list = path.join(dir, 'loaded.txt');
  writeFileSync(list, '');
  const hooks = path.join(dir, 'hooks.mjs');
  writeFileSync(
    hooks,
    `import { appendFileSync } from 'node:fs';
export async function load(url, ctx, next) {
  const m = /node_modules\\/((?:@[^/]+\\/)?[^/]+)\\//.exec(url);
  if (m !== null) appendFileSync(${JSON.stringify(list)}, m[1] + '\\n');
  return next(url, ctx);
}
`,
  );
  const register = path.join(dir, 'register.mjs');
  writeFileSync(
    register,
    `import { register } from 'node:module';
import { appendFileSync } from 'node:fs';
register(${JSON.stringify(pathToFileURL(hooks).href)});
for (const k of ['DateTimeFormat', 'NumberFormat', 'Collator', 'PluralRules', 'RelativeTimeFormat', 'ListFormat', 'DisplayNames', 'Segmenter']) {
  const Original = Intl[k];
  const Wrapped = function (...args) {
    appendFileSync(${JSON.stringify(list)}, 'Intl.' + k + '\\n');
    return new Original(...args);
  };
  Wrapped.prototype = Original.prototype;
  Wrapped.supportedLocalesOf = Original.supportedLocalesOf;
  Intl[k] = Wrapped;
}
// Node's own modules the daemon loaded, for those that only a wrong import brings in.
process.on('exit', () => {
  for (const m of process.moduleLoadList) if (m.startsWith('NativeModule ')) appendFileSync(${JSON.stringify(list)}, 'node:' + m.slice(13) + '\\n');
});
`,
  );
  // One process (no relaunch with the runtime settings): the hook sees what serves. A named zone,
  // as a site has.
  const child = await serveChild(t, path.join(dir, 'data'), { HAYLOFT_RELAUNCHED: '1', HAYLOFT_TZ: 'Sydney' }, [], ['--import', register]);
  const loaded = (): Set<string> => new Set(readFileSync(list, 'utf8').split('\n').filter((x) => x !== ''));
  // A request every client makes, on the paths loaded at start (serveChild has logged in).
  const read = await fetch(`${child.base}/api/read?filter=point`, { headers: { ...child.auth, accept: 'application/json' } });
  t.equal(read.status, 200, 'a read answers');
  const atStart = loaded();
  t.ok(atStart.has('pino') && atStart.has('classic-level'), `the hook sees what is loaded (${[...atStart].sort().join(', ')})`);
  for (const lib of LAZY) t.notOk(atStart.has(lib), `${lib} is not loaded at start`);
  const intl = (): string[] => [...loaded()].filter((x) => x.startsWith('Intl.'));
  t.same(intl(), [], 'no Intl formatter is created at start');

  if (hasZoneFile('Australia/Sydney')) {
    const post = async (op: string, body: object): Promise<Record<string, unknown>> => {
      const r = await fetch(`${child.base}/api/${op}`, { method: 'POST', headers: { ...child.auth, 'content-type': 'application/json', accept: 'application/json' }, body: JSON.stringify(body) });
      t.equal(r.status, 200, `${op} answers`);
      return (await r.json()) as Record<string, unknown>;
    };
    const created = await post('createRec', { meta: { ver: '3.0' }, cols: [{ name: 'dis' }, { name: 'point' }, { name: 'his' }, { name: 'kind' }, { name: 'tz' }], rows: [{ dis: 'p', point: 'm:', his: 'm:', kind: 'Number', tz: 'Sydney' }] });
    const id = ((created.rows as { id: string }[])[0] as { id: string }).id;
    // Either side of the end of daylight time in 2024 (7 April, 03:00 AEDT = 16:00 UTC on the 6th).
    await post('hisWrite', { meta: { ver: '3.0', id }, cols: [{ name: 'ts' }, { name: 'val' }], rows: [{ ts: 't:2024-04-07T02:30:00+11:00 Sydney', val: 'n:1' }, { ts: 't:2024-04-07T02:30:00+10:00 Sydney', val: 'n:2' }] });
    const read = await post('hisRead', { meta: { ver: '3.0' }, cols: [{ name: 'id' }, { name: 'range' }], rows: [{ id, range: 's:2024-04-07' }] });
    t.same((read.rows as { ts: string }[]).map((r) => r.ts), ['t:2024-04-07T02:30:00+11:00 Sydney', 't:2024-04-07T02:30:00+10:00 Sydney'], 'history in Sydney, both 02:30s of the repeated hour');
    t.same(intl(), [], 'writing and reading history in a named zone creates no Intl formatter');
  }

  const gq = await fetch(`${child.base}/graphql`, {
    method: 'POST',
    headers: { ...child.auth, 'content-type': 'application/json' },
    body: JSON.stringify({ query: '{ __typename }' }),
  });
  t.equal(gq.status, 200, 'a GraphQL query answers');
  t.ok(loaded().has('graphql'), 'graphql-js is loaded by the first GraphQL request');
  child.proc.kill('SIGTERM');
  await child.exited;
  // An ES import of node:http (ours or polka's ES build) reads its lazy exports on Node 22+, which
  // load undici and http2 for good (3 MiB on Node 24): src/api/node-http.ts requires both instead.
  const builtins = [...loaded()].filter((x) => x.startsWith('node:'));
  t.ok(builtins.includes('node:http'), 'the list of Node modules is written at exit');
  t.notOk(builtins.includes('node:internal/deps/undici/undici'), 'undici is not loaded (no fetch, WebSocket or ES facade of node:http)');
  t.notOk(builtins.includes('node:http2'), 'http2 is not loaded');
  // Loaded by the first compressed console file, backup or restore, not by a start.
  for (const m of ['node:zlib', 'node:readline']) t.notOk(builtins.includes(m), `${m} is not loaded`);
});
