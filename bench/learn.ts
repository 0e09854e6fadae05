/**
 * bench/learn: how long `learn` takes on a BACnet controller of 3,000 objects, and what it costs
 * the daemon in memory (issue 14: learned in bounded time and memory).
 *
 *   npm run bench -- learn [--objects N] [--rounds N] [--no-record]
 *
 * The daemon is `hayloft serve` as a user starts it (harness.ts startDaemon: its bin,
 * dist-bench/dist/cli.js, the bundle, in its own process, its own runtime settings), with its BACnet socket
 * on 127.0.0.3; the devices are the test simulator (test/helpers/bacnet-device.ts)
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
 * The daemon's resident size and V8 heap are read from its /metrics after every learn: memory a
 * learn keeps shows as a figure that climbs learn after learn instead of levelling off.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { EngineeringUnits, ObjectType, PropertyIdentifier } from '@bacnet-js/client';
import { BacnetDevice, enumerated, freeUdpPort, real, text } from '../test/helpers/bacnet-device.js';
import { hasFlag, jsonGrid, loginDaemon, machineLine, median, numberArg, postOp, recordSection, startDaemon, stopDaemon } from './harness.js';

const args = process.argv.slice(2);
const OBJECTS = numberArg('--objects', 3000);
const ROUNDS = numberArg('--rounds', 5);
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

/** The daemon's resident size and V8 heap in use (MB), from its own /metrics. */
async function memory(base: string, token: string): Promise<{ rss: number; heap: number }> {
  const text = await (await fetch(`${base}/metrics`, { headers: { authorization: `Bearer ${token}` } })).text();
  const metric = (name: string): number => {
    const m = new RegExp(`^${name} (\\S+)`, 'm').exec(text);
    return m === null ? NaN : Number(m[1]) / 1e6;
  };
  return { rss: metric('process_resident_memory_bytes'), heap: metric('nodejs_heap_size_used_bytes') };
}

async function main(): Promise<void> {
  const sim = spawn(process.execPath, [new URL(import.meta.url).pathname, '--simulate', '--objects', String(OBJECTS)], { stdio: ['ignore', 'pipe', 'inherit'] });
  const uris = Object.fromEntries((await lineOf(sim, /=bacnet:/)).split('|').map((kv) => kv.split('=') as [string, string]));
  const daemon = await startDaemon([], { HAYLOFT_BACNET_INTERFACE: HOST, HAYLOFT_BACNET_PORT: String(await freeUdpPort(HOST)) });
  try {
    const token = await loginDaemon(daemon.base);
    const post = (op: string, rows: Record<string, string>[]): Promise<{ rows: Record<string, string>[] }> => postOp(daemon.base, token, op, jsonGrid(rows));
    await post(
      'createRec',
      KINDS.map((k, i) => ({ id: `r:c${i}`, bacnetConn: 'm:', name: `s:c${i}`, uri: `u:${uris[k.key] ?? ''}`, timeout: 'n:5 s' })),
    );
    const before = await memory(daemon.base, token);
    const after: { rss: number; heap: number }[] = [];
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
        after.push(await memory(daemon.base, token));
      }
    }
    const base0 = median(times.get('no segmentation') ?? []);
    const mb = (xs: number[]): string => xs.map((x) => x.toFixed(0)).join(', ');
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
      `Daemon memory (MB, from its /metrics) before the first learn and after each of ${after.length} learns of ${OBJECTS} objects:`,
      '',
      `- resident: ${before.rss.toFixed(0)}; ${mb(after.map((a) => a.rss))}`,
      `- V8 heap in use: ${before.heap.toFixed(0)}; ${mb(after.map((a) => a.heap))}`,
    ];
    console.log(lines.join('\n'));
    if (!hasFlag('--no-record')) recordSection('learn', lines.join('\n'));
  } finally {
    sim.kill('SIGTERM');
    await stopDaemon(daemon);
  }
}

if (args.includes('--simulate')) void simulate();
else await main();
