/**
 * What `hayloft serve` loads at start (issue 19: a Pi's memory). The libraries that only some
 * gateways use are loaded on first use: the protocol libraries with the first record of their
 * kind, graphql-js with the first /graphql request, socket.io with the first push request, re2js
 * with the first `=~` filter, csv-parse with the first Modbus register map, selfsigned in a child
 * process. One static import of the wrong module brings one back into every start (a records op
 * importing commissioning loaded the BACnet library that way), which no other test notices.
 *
 * The daemon runs as a child with a module `load` hook that lists every package it loads in a file.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import t from 'tap';
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
  writeFileSync(register, `import { register } from 'node:module';\nregister(${JSON.stringify(pathToFileURL(hooks).href)});\n`);
  // One process (no relaunch with the runtime settings): the hook sees what serves.
  const child = await serveChild(t, path.join(dir, 'data'), { HAYLOFT_RELAUNCHED: '1' }, [], ['--import', register]);
  const loaded = (): Set<string> => new Set(readFileSync(list, 'utf8').split('\n').filter((x) => x !== ''));
  // A request every client makes, on the paths loaded at start (serveChild has logged in).
  const read = await fetch(`${child.base}/api/read?filter=point`, { headers: { ...child.auth, accept: 'application/json' } });
  t.equal(read.status, 200, 'a read answers');
  const atStart = loaded();
  t.ok(atStart.has('pino') && atStart.has('classic-level'), `the hook sees what is loaded (${[...atStart].sort().join(', ')})`);
  for (const lib of LAZY) t.notOk(atStart.has(lib), `${lib} is not loaded at start`);

  const gq = await fetch(`${child.base}/graphql`, {
    method: 'POST',
    headers: { ...child.auth, 'content-type': 'application/json' },
    body: JSON.stringify({ query: '{ __typename }' }),
  });
  t.equal(gq.status, 200, 'a GraphQL query answers');
  t.ok(loaded().has('graphql'), 'graphql-js is loaded by the first GraphQL request');
  child.proc.kill('SIGTERM');
  await child.exited;
});
