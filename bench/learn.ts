/**
 * bench/learn: how long `learn` takes on a BACnet controller of 3,000 objects, and what it costs
 * the daemon in memory (issue 14: learned in bounded time and memory).
 *
 *   npm run bench -- learn [--objects N] [--rounds N] [--no-record]
 *
 * The daemon is `hayloft serve` (its bin, dist-bench/src/cli.js) in its own process, with its
 * BACnet socket on 127.0.0.3; the devices are the test simulator (test/helpers/bacnet-device.ts)
 * in another child process (this file with --simulate) on 127.0.0.4/.5; this process is the
 * HTTP client. One learn is the whole path a technician takes: `learn` (the object list) then
 * `learn AV` (name, units and priority array of every object). Two devices of the same objects:
 *
 * - no segmentation: the object list refused whole above 40 entries, so read element by
 *   element, and ReadPropertyMultiple refused above 24 properties (the baseline);
 * - no ReadPropertyMultiple: everything with ReadProperty, the object list element by element too.
 *
 * A segmenting device is not simulated: the simulator answers with @bacnet-js/client, which
 * cannot send a segmented answer, and a whole object list of 3,000 entries overflows its one-APDU
 * buffer (the simulator crashed on it). The tests cover segmented reads against small lists.
 *
 * Rounds interleave the devices; medians, and each device's ratio to the baseline of the same run.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { EngineeringUnits, ObjectType, PropertyIdentifier } from '@bacnet-js/client';
import { BacnetDevice, enumerated, freeUdpPort, real, text } from '../test/helpers/bacnet-device.js';
import { hasFlag, machineLine, median, numberArg, recordSection } from './harness.js';

const args = process.argv.slice(2);
const OBJECTS = numberArg('objects', 3000);
const ROUNDS = numberArg('rounds', 5);
const HOST = '127.0.0.3';
const KINDS = [
  { key: 'no segmentation', address: '127.0.0.4', instance: 9002, opts: { maxList: 40, rpm: 24 } },
  { key: 'no ReadPropertyMultiple', address: '127.0.0.5', instance: 9003, opts: { maxList: 40, rpm: 'reject' as const } },
];

async function simulate(): Promise<void> {
  const out: string[] = [];
  for (const k of KINDS) {
    const d = new BacnetDevice({ address: k.address, port: await freeUdpPort(k.address), deviceInstance: k.instance, ...k.opts });
    for (let i = 1; i <= OBJECTS; i++) {
      d.set(ObjectType.ANALOG_VALUE, i, real(i));
      d.set(ObjectType.ANALOG_VALUE, i, text(`Zone ${i} temperature`), PropertyIdentifier.OBJECT_NAME);
      d.set(ObjectType.ANALOG_VALUE, i, enumerated(EngineeringUnits.DEGREES_CELSIUS), PropertyIdentifier.UNITS);
    }
    d.describe(k.key);
    await d.start();
    out.push(`${k.key}=bacnet://${k.address}:${d.opts.port}/${k.instance}`);
  }
  console.log(out.join('|'));
}

function lineOf(proc: ChildProcess, match: RegExp): Promise<string> {
  return new Promise((resolve, reject) => {
    const rl = createInterface({ input: proc.stdout as NodeJS.ReadableStream });
    rl.on('line', (l) => {
      if (match.test(l)) resolve(l);
    });
    proc.once('exit', (c) => reject(new Error(`child exited (${c}) before "${match.source}"`)));
  });
}

async function main(): Promise<void> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'hayloft-bench-learn-'));
  const sim = spawn(process.execPath, [new URL(import.meta.url).pathname, '--simulate', '--objects', String(OBJECTS)], { stdio: ['ignore', 'pipe', 'inherit'] });
  const uris = Object.fromEntries((await lineOf(sim, /=bacnet:/)).split('|').map((kv) => kv.split('=') as [string, string]));
  const cli = new URL('../src/cli.js', import.meta.url).pathname;
  const port = 18000 + Math.floor(Math.random() * 2000);
  const daemon = spawn(process.execPath, [...process.execArgv, cli, 'serve'], {
    env: {
      ...process.env,
      HAYLOFT_DATA_DIR: dir,
      HAYLOFT_HOST: '127.0.0.1',
      HAYLOFT_PORT: String(port),
      HAYLOFT_LOG_LEVEL: 'info',
      HAYLOFT_BACNET_INTERFACE: HOST,
      HAYLOFT_BACNET_PORT: String(await freeUdpPort(HOST)),
      HAYLOFT_ADMIN_USER: 'bench@example.com',
      HAYLOFT_ADMIN_PASSWORD: 'bench-password-1',
      HAYLOFT_CLIENT_ID: 'bench',
      HAYLOFT_CLIENT_SECRET: 'bench-secret-0123456789',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  try {
    await lineOf(daemon, /Hayloft is serving/);
    const base = `http://127.0.0.1:${port}`;
    const tok = (await (
      await fetch(`${base}/oauth2/token`, {
        method: 'POST',
        headers: { authorization: 'Basic ' + Buffer.from('bench:bench-secret-0123456789').toString('base64'), 'content-type': 'application/json' },
        body: JSON.stringify({ grant_type: 'password', username: 'bench@example.com', password: 'bench-password-1' }),
      })
    ).json()) as { access_token: string };
    const post = async (op: string, rows: Record<string, string>[]): Promise<{ rows: Record<string, string>[] }> => {
      const res = await fetch(`${base}/api/${op}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${tok.access_token}`, 'content-type': 'application/json', accept: 'application/json' },
        body: JSON.stringify({ meta: { ver: '3.0' }, cols: Object.keys(rows[0] ?? {}).map((name) => ({ name })), rows }),
      });
      const body = (await res.json()) as { rows: Record<string, string>[]; meta: { dis?: string } };
      if (res.status !== 200) throw new Error(`${op}: ${res.status} ${body.meta.dis ?? ''}`);
      return body;
    };
    await post(
      'createRec',
      KINDS.map((k, i) => ({ id: `r:c${i}`, bacnetConn: 'm:', name: `s:c${i}`, uri: `u:${uris[k.key] ?? ''}`, timeout: 'n:5 s' })),
    );
    const rss = async (): Promise<number> => {
      const res = await fetch(`${base}/metrics`, { headers: { authorization: `Bearer ${tok.access_token}` } });
      const m = /^process_resident_memory_bytes (\S+)/m.exec(await res.text());
      return m === null ? NaN : Number(m[1]) / 1e6;
    };
    const rssBefore = await rss();
    const times = new Map<string, number[]>(KINDS.map((k) => [k.key, []]));
    let proposals = 0;
    for (let r = 0; r < ROUNDS; r++) {
      for (let j = 0; j < KINDS.length; j++) {
        const i = (j + r) % KINDS.length;
        const k = KINDS[i] as (typeof KINDS)[number];
        const t0 = performance.now();
        const groups = await post('learn', [{ connId: `r:c${i}` }]);
        const props = await post('learn', [{ connId: `r:c${i}`, arg: groups.rows[0]?.learn ?? '' }]);
        times.get(k.key)?.push((performance.now() - t0) / 1000);
        proposals = props.rows.length;
      }
    }
    const rssAfter = await rss();
    const base0 = median(times.get('no segmentation') ?? []);
    const lines = [
      `Run: \`npm run bench -- learn\` on ${machineLine()}; the daemon (\`hayloft serve\`, its own process), the simulated devices (another process) and this client share the 2 cores; ${OBJECTS} analog values per device, ${ROUNDS} interleaved rounds, medians. One learn = \`learn\` (object list) + \`learn AV\` (${proposals} proposals: name, units, priority array per object).`,
      '',
      '| device | learn (s) | ratio to no segmentation |',
      '|---|---|---|',
      ...KINDS.map((k) => {
        const m = median(times.get(k.key) ?? []);
        return `| ${k.key} | ${m.toFixed(2)} | ${(m / base0).toFixed(2)} |`;
      }),
      '',
      `Daemon resident memory: ${rssBefore.toFixed(0)} MB before the first learn, ${rssAfter.toFixed(0)} MB after ${ROUNDS * KINDS.length} learns of ${OBJECTS} objects.`,
    ];
    console.log(lines.join('\n'));
    if (!hasFlag('no-record')) recordSection('learn', lines.join('\n'));
  } finally {
    daemon.kill('SIGTERM');
    sim.kill('SIGTERM');
    await new Promise((r) => daemon.once('exit', r));
    rmSync(dir, { recursive: true, force: true });
  }
}

if (args.includes('--simulate')) void simulate();
else await main();
