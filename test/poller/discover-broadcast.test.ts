/**
 * A broadcast Who-Is reaching several devices (issue 14): broadcast cannot be tested on loopback
 * (a socket bound to one address of 127/8 hears no broadcast), so the test builds a small network
 * of namespaces: one holding a bridge (10.231.N.1/24) where Hayloft runs, and one namespace per
 * device, each joined to the bridge by a veth pair (10.231.N.2, .3). Hayloft (a real App, its
 * BACnet socket bound to the bridge's address, `HAYLOFT_BACNET_BROADCAST` the subnet's
 * broadcast) answers `discover` without an address over HTTP; both devices must be found, each
 * with its own uri. Needs root and iproute2; skips with a message otherwise. The namespaces are
 * deleted at the end (their interfaces go with them).
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { createInterface } from 'node:readline';
import t from 'tap';
import { dropNamespaces, ip, makeNamespaces } from '../helpers/netns.js';

const NET = `10.231.${process.pid % 250}`;
const TAG = `hl${process.pid % 100000}`;
const HUB = `${TAG}h`;
const DEVICES = [
  { ns: `${TAG}a`, addr: `${NET}.2`, instance: 7001, name: 'Boiler plant' },
  { ns: `${TAG}b`, addr: `${NET}.3`, instance: 7002, name: 'Chiller plant' },
];
const DEVICE = new URL('../fixtures/netns-device.ts', import.meta.url).pathname;
const DISCOVER = new URL('../fixtures/netns-discover.ts', import.meta.url).pathname;

function setUp(): string | null {
  const made = makeNamespaces([HUB, ...DEVICES.map((d) => d.ns)]);
  if (made !== null) return made;
  const steps: string[][] = [
    ['-n', HUB, 'link', 'add', 'br0', 'type', 'bridge'],
    ['-n', HUB, 'addr', 'add', `${NET}.1/24`, 'brd', '+', 'dev', 'br0'],
    ['-n', HUB, 'link', 'set', 'br0', 'up'],
  ];
  DEVICES.forEach((d, i) => {
    steps.push(
      ['-n', HUB, 'link', 'add', `vh${i}`, 'type', 'veth', 'peer', 'name', `vd${i}`, 'netns', d.ns],
      ['-n', HUB, 'link', 'set', `vh${i}`, 'master', 'br0', 'up'],
      ['-n', d.ns, 'addr', 'add', `${d.addr}/24`, 'brd', '+', 'dev', `vd${i}`],
      ['-n', d.ns, 'link', 'set', `vd${i}`, 'up'],
    );
  });
  for (const s of steps) {
    const e = ip(...s);
    if (e !== null) return e;
  }
  return null;
}

function tearDown(): void {
  dropNamespaces([HUB, ...DEVICES.map((d) => d.ns)]);
}

const problem = setUp();
if (problem !== null) {
  tearDown();
  t.comment(`SKIP broadcast discovery test: ${problem}`);
} else {
  t.teardown(tearDown);
  t.test('discover without an address: a broadcast Who-Is finds every device on the subnet', async (t) => {
    const procs: ChildProcess[] = [];
    t.teardown(() => {
      for (const p of procs) p.kill('SIGTERM');
    });
    for (const d of DEVICES) {
      const p = spawn('ip', ['netns', 'exec', d.ns, process.execPath, '--import', 'tsx', DEVICE, String(d.instance), d.name], { stdio: ['ignore', 'pipe', 'inherit'] });
      procs.push(p);
      await new Promise<void>((resolve, reject) => {
        createInterface({ input: p.stdout }).on('line', (l) => l === 'ready' && resolve());
        p.once('exit', (c) => reject(new Error(`device ${d.instance} exited (${c})`)));
      });
    }
    const r = spawnSync('ip', ['netns', 'exec', HUB, process.execPath, '--import', 'tsx', DISCOVER], {
      encoding: 'utf8',
      timeout: 60_000,
      env: { ...process.env, HAYLOFT_BACNET_INTERFACE: `${NET}.1`, HAYLOFT_BACNET_BROADCAST: `${NET}.255` },
    });
    t.equal(r.status, 0, `the discover run ended well: ${r.stderr.slice(-500)}`);
    const rows = r.stdout.trim().split('\n').filter((l) => l.startsWith('[')).map((l) => JSON.parse(l) as unknown[]);
    t.same(
      rows,
      DEVICES.map((d) => [d.name, `bacnet://${d.addr}:47808/${d.instance}`, d.instance, 'Netns Vendor']),
      'both devices, each with the uri of its own address',
    );
  });
}
