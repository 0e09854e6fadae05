/**
 * What `hayloft serve` loads at start (issue 19: a Pi's memory). The libraries that only some
 * gateways use are loaded on first use: the protocol libraries with the first record of their
 * kind, graphql-js with the first /graphql request, socket.io with the first push request, re2js
 * with the first `=~` filter, csv-parse with the first Modbus register map, selfsigned in a child
 * process. One static import of the wrong module brings one back into every start (a records op
 * importing commissioning loaded the BACnet library that way), which no other test notices.
 *
 * The daemon runs as a child with a module `load` hook that reports every package it loads.
 */
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import t from 'tap';
import { ADMIN, CLIENT, tokenRequest } from '../helpers/app.js';
import { tempDir } from '../helpers/tmp.js';

const CLI = new URL('../../src/cli.ts', import.meta.url).pathname;
const LAZY = ['@bacnet-js/client', 'modbus-serial', 'serialport', 'graphql', 'socket.io', 'engine.io', 're2js', 'csv-parse', 'selfsigned', 'yaml'];

t.test('serve loads none of the on-demand libraries at start; GraphQL loads graphql-js when asked', async (t) => {
  const dir = tempDir(t);
  const hooks = path.join(dir, 'hooks.mjs');
  writeFileSync(
    hooks,
    `export async function load(url, ctx, next) {
  const m = /node_modules\\/((?:@[^/]+\\/)?[^/]+)\\//.exec(url);
  if (m !== null) process.stderr.write('LOADED ' + m[1] + '\\n');
  return next(url, ctx);
}
`,
  );
  const register = path.join(dir, 'register.mjs');
  writeFileSync(register, `import { register } from 'node:module';\nregister(${JSON.stringify(pathToFileURL(hooks).href)});\n`);
  const proc = spawn(process.execPath, ['--import', 'tsx', '--import', register, CLI, 'serve'], {
    env: {
      ...process.env,
      // One process (no relaunch with the runtime settings): the hook sees what serves.
      HAYLOFT_RELAUNCHED: '1',
      HAYLOFT_DATA_DIR: path.join(dir, 'data'),
      HAYLOFT_HOST: '127.0.0.1',
      HAYLOFT_PORT: '0',
      HAYLOFT_HTTPS_PORT: '0',
      HAYLOFT_TZ: 'UTC',
      HAYLOFT_LOG_LEVEL: 'info',
      HAYLOFT_ADMIN_USER: ADMIN.username,
      HAYLOFT_ADMIN_PASSWORD: ADMIN.password,
      HAYLOFT_CLIENT_ID: CLIENT.id,
      HAYLOFT_CLIENT_SECRET: CLIENT.secret,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  t.teardown(() => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
  });
  const loaded = new Set<string>();
  let err = '';
  proc.stderr.on('data', (d: Buffer) => {
    err += d.toString();
    for (const m of err.matchAll(/^LOADED (\S+)$/gm)) loaded.add(m[1] as string);
  });
  let out = '';
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`hayloft did not start: ${out}${err.slice(-2000)}`)), 90_000);
    proc.on('exit', (code) => reject(new Error(`hayloft exited (${code}) before serving: ${out}${err.slice(-2000)}`)));
    proc.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /"port":(\d+)[^\n]*"msg":"Hayloft is serving"|"msg":"Hayloft is serving"[^\n]*"port":(\d+)/.exec(out);
      if (m !== null) {
        clearTimeout(timer);
        resolve(Number(m[1] ?? m[2]));
      }
    });
  });
  const base = `http://127.0.0.1:${port}`;
  // A request that every client makes: a login and a read, on the paths loaded at start.
  const login = await tokenRequest(base, { grant_type: 'password', username: ADMIN.username, password: ADMIN.password });
  t.equal(login.status, 200, 'the administrator logs in');
  const token = String(login.body.access_token);
  const read = await fetch(`${base}/api/read?filter=point`, { headers: { authorization: `Bearer ${token}`, accept: 'application/json' } });
  t.equal(read.status, 200, 'a read answers');
  await new Promise((r) => setTimeout(r, 500));
  t.ok(loaded.has('pino') && loaded.has('classic-level'), `the hook sees what is loaded (${[...loaded].sort().join(', ')})`);
  for (const lib of LAZY) t.notOk(loaded.has(lib), `${lib} is not loaded at start`);

  const gq = await fetch(`${base}/graphql`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ query: '{ __typename }' }),
  });
  t.equal(gq.status, 200, 'a GraphQL query answers');
  await new Promise((r) => setTimeout(r, 500));
  t.ok(loaded.has('graphql'), 'graphql-js is loaded by the first GraphQL request');
  proc.kill('SIGTERM');
  await new Promise((r) => proc.once('exit', r));
});
