/**
 * The build as it runs installed: `npm run build` bundles the daemon (scripts/build-server.mjs:
 * our code and the libraries every start loads in one file and chunks; the rest of node_modules
 * loaded at run time), and bin/hayloft runs it. The rest of the suite runs src/ through tsx, so
 * this file is where a bundle that cannot find a library, a native binding or a file of its own
 * shows up: every part that loads something on first use is asked for once, through HTTP, and the
 * daemon must answer each and log no error.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { HDateTime, type HDict, HNumber, HRef, HUri, MARKER } from '../src/haystack/values.js';
import { UTC } from '../src/haystack/tz.js';
import { nodeFlags } from '../src/lib/runtime.js';
import { until } from './helpers/conn-http.js';
import { expectOk, getGrid, gridOf, postGrid } from './helpers/http.js';
import { serveChild } from './helpers/serve-child.js';
import { tempDir } from './helpers/tmp.js';

const ROOT = new URL('../', import.meta.url).pathname;

t.test('npm run build makes one bundle of the daemon; bin/hayloft runs it and every part loads', async (t) => {
  execFileSync(process.execPath, ['scripts/build-if-needed.mjs'], { cwd: ROOT, stdio: 'inherit' });
  const dist = path.join(ROOT, 'dist');
  t.ok(existsSync(path.join(dist, 'cli.js')), 'dist/cli.js');
  t.same(
    readdirSync(dist).filter((f) => f.endsWith('.js')),
    ['cli.js'],
    'the entry alone at the top of dist/ (tsc no longer writes a module tree there); its chunks in dist/chunks',
  );

  const dir = tempDir(t);
  const s = await serveChild(t, path.join(dir, 'data'), { HAYLOFT_LOG_FORMAT: 'json', HAYLOFT_METRICS_OPEN: 'true' }, ['--demo'], [], true);
  let log = '';
  s.proc.stdout.on('data', (d: Buffer) => (log += d.toString()));
  s.proc.stderr.on('data', (d: Buffer) => (log += d.toString()));
  const headers = { headers: s.auth };

  // Polling (Modbus, bundled into the chunk the first connector loads) into the model.
  const read = async (id: string): Promise<HDict> => expectOk(t, await getGrid(s.base, 'read', { id: HRef.of(id) }, headers), `read ${id}`).rows[0] as HDict;
  const cur = await until('a polled value', async () => {
    const v = (await read('demo.ahu1.supplyTemp')).get('curVal');
    return v instanceof HNumber ? v : undefined;
  });
  t.ok(cur instanceof HNumber, 'the demo point polls its device (modbus-serial in the bundle)');

  // History (LevelDB: classic-level bundled, its native binding from node_modules).
  const id = expectOk(t, await postGrid(s.base, 'createRec', gridOf({ dis: 'built', point: MARKER, his: MARKER, kind: 'Number', tz: 'UTC' }), headers), 'createRec').rows[0]?.get('id') as HRef;
  expectOk(t, await postGrid(s.base, 'hisWrite', gridOf({ ts: new HDateTime(Date.UTC(2026, 0, 1), UTC), val: new HNumber(1) }, { id }), headers), 'hisWrite');
  const hr = expectOk(t, await getGrid(s.base, 'hisRead', { id, range: '2026-01-01' }, headers), 'hisRead');
  t.same(hr.rows.map((r) => (r.get('val') as HNumber).val), [1], 'hisRead reads it back');

  // Parts that load a library of node_modules on first use.
  const gq = await fetch(`${s.base}/graphql`, { method: 'POST', headers: { ...s.auth, 'content-type': 'application/json' }, body: JSON.stringify({ query: '{ __typename }' }) });
  t.equal(gq.status, 200, 'GraphQL (graphql-js, loaded by the first query)');
  const push = await fetch(`${s.base}/socket.io/?EIO=4&transport=polling`, { headers: s.auth });
  t.equal(push.status, 200, 'the push endpoint (socket.io, loaded by the first request)');
  const metrics = await fetch(`${s.base}/metrics`);
  t.match(await metrics.text(), /hayloft_info\{version="/, '/metrics (prom-client, bundled)');
  const page = await fetch(`${s.base}/`, { headers: { accept: 'text/html' } });
  t.equal(page.status, 200, 'the console (dist/web, found beside the bundle)');
  // A Modbus RTU connector on a serial port that is not there: serialport's native binding loads
  // from node_modules and says what is wrong, as a point's fault.
  const rtu = gridOf({ modbusConn: MARKER, name: 'rtu', dis: 'rtu', uri: new HUri('modbus-rtu:/dev/hayloft-no-such-port'), modbusSlave: new HNumber(1), pollTime: new HNumber(200, 'ms') });
  const rtuId = expectOk(t, await postGrid(s.base, 'createRec', rtu, headers), 'a Modbus RTU connector').rows[0]?.get('id') as HRef;
  expectOk(t, await postGrid(s.base, 'createRec', gridOf({ dis: 'rtu point', point: MARKER, cur: MARKER, kind: 'Number', modbusConnRef: rtuId, modbusCur: 'holding:0' }), headers), 'its point');
  const err = await until('the serial connector\'s fault', async () => (await read(rtuId.id)).get('connErr'));
  t.match(String(err), /no-such-port|No such file|ENOENT|cannot open/i, 'a serial connector reports the missing port (serialport and its binding load)');
  // BACnet (its library from node_modules, loaded with the first BACnet connector).
  const bac = gridOf({ bacnetConn: MARKER, name: 'bac', dis: 'bac', uri: new HUri('bacnet://127.0.0.1:47999/1234'), pollTime: new HNumber(250, 'ms') });
  const bacId = expectOk(t, await postGrid(s.base, 'createRec', bac, headers), 'a BACnet connector').rows[0]?.get('id') as HRef;
  expectOk(t, await postGrid(s.base, 'createRec', gridOf({ dis: 'bac point', point: MARKER, cur: MARKER, kind: 'Number', bacnetConnRef: bacId, bacnetCur: 'AI1' }), headers), 'its point');
  const status = await until('the BACnet connector\'s status', async () => {
    const v = (await read(bacId.id)).get('connStatus');
    return v === 'pending' ? undefined : v;
  });
  t.ok(typeof status === 'string' && status !== 'pending', `the BACnet connector runs (@bacnet-js/client loads): ${String(status)}`);

  t.equal(s.proc.exitCode, null, 'still serving');
  const cmdline = readFileSync(`/proc/${s.pid}/cmdline`, 'utf8').split('\0');
  const script = cmdline.findIndex((a) => a.endsWith('dist/cli.js'));
  t.ok(script > 0, `the process runs the bundle (${cmdline.join(' ')})`);
  t.same(
    cmdline.slice(1, script),
    [...nodeFlags()],
    'with the runtime settings of its Node',
  );
  s.proc.kill('SIGTERM');
  t.equal(await s.exited, 0, 'stops cleanly');
  const errors = log
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { level: number; msg: string; err?: { message?: string } })
    .filter((l) => l.level >= 50 || /Dynamic require|is not defined|Cannot find module|ERR_MODULE_NOT_FOUND/.test(JSON.stringify(l)));
  t.same(errors, [], 'no error logged, and no module the bundle could not find');
});
