/**
 * BBMD across real subnets (issue 29): network namespaces the test makes. Subnet A
 * (10.234.N.0/24) holds a field device (instance 7101, answering Who-Is with a broadcast I-Am as
 * field devices do) and a building front-end; subnet B (10.235.N.0/24) holds Hayloft; a router
 * namespace joins them (a veth into each, IP forwarding on) and runs the BBMD
 * (test/helpers/bbmd.ts) on subnet A's side, so broadcasts of one subnet never reach the other
 * but through it. Hayloft's two sides register with it as foreign devices:
 * - the client side: a broadcast `discover` over HTTP finds the device on subnet A (its Who-Is
 *   distributed by the BBMD onto subnet A, the device's broadcast I-Am forwarded back), at its own
 *   address, and a connector made from it polls it there (routed);
 * - the device side: the front-end's local broadcast Who-Is reaches Hayloft only through the BBMD,
 *   Hayloft's I-Am comes back, and the front-end reads Hayloft's Device object and an exported
 *   point's presentValue at Hayloft's address on subnet B.
 * Needs root and iproute2 (`ip netns`); skips with a message otherwise. The namespaces are
 * deleted at the end, whatever happened (their interfaces and processes' sockets go with them).
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { createInterface } from 'node:readline';
import t, { type Test } from 'tap';
import { dropNamespaces, ipSteps, makeNamespaces } from '../helpers/netns.js';

const N = process.pid % 250;
const A = `10.234.${N}`;
const B = `10.235.${N}`;
const TAG = `hb${process.pid % 100000}`;
const NS = { router: `${TAG}r`, a: `${TAG}a`, b: `${TAG}b` };
const REMOTE = 7101;
const HAYLOFT = 260030;
const fixture = (name: string): string => new URL(`../fixtures/${name}.ts`, import.meta.url).pathname;

function setUp(): string | null {
  return (
    makeNamespaces(Object.values(NS)) ??
    ipSteps([
      ['-n', NS.router, 'link', 'add', 'ra', 'type', 'veth', 'peer', 'name', 'a0', 'netns', NS.a],
      ['-n', NS.router, 'link', 'add', 'rb', 'type', 'veth', 'peer', 'name', 'b0', 'netns', NS.b],
      ['-n', NS.router, 'addr', 'add', `${A}.1/24`, 'brd', '+', 'dev', 'ra'],
      ['-n', NS.router, 'addr', 'add', `${B}.1/24`, 'brd', '+', 'dev', 'rb'],
      ['-n', NS.router, 'link', 'set', 'ra', 'up'],
      ['-n', NS.router, 'link', 'set', 'rb', 'up'],
      ['-n', NS.a, 'addr', 'add', `${A}.2/24`, 'brd', '+', 'dev', 'a0'],
      ['-n', NS.a, 'link', 'set', 'a0', 'up'],
      ['-n', NS.a, 'route', 'add', 'default', 'via', `${A}.1`],
      ['-n', NS.b, 'addr', 'add', `${B}.2/24`, 'brd', '+', 'dev', 'b0'],
      ['-n', NS.b, 'link', 'set', 'b0', 'up'],
      ['-n', NS.b, 'route', 'add', 'default', 'via', `${B}.1`],
      ['netns', 'exec', NS.router, 'sysctl', '-qw', 'net.ipv4.ip_forward=1'],
    ])
  );
}

const tearDown = (): void => dropNamespaces(Object.values(NS));

/** A fixture in a namespace; resolves with its process and its JSON lines once it prints `ready`. */
function run(t: Test, ns: string, name: string, args: string[], env: Record<string, string> = {}): Promise<{ proc: ChildProcess; lines: Record<string, unknown>[] }> {
  const proc = spawn('ip', ['netns', 'exec', ns, process.execPath, '--import', 'tsx', fixture(name), ...args], { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, ...env } });
  t.teardown(() => {
    if (proc.exitCode === null) proc.kill('SIGTERM');
  });
  const lines: Record<string, unknown>[] = [];
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name} in ${ns}: not ready in 90 s; printed ${JSON.stringify(lines)}`)), 90_000);
    createInterface({ input: proc.stdout }).on('line', (l) => {
      if (l === 'ready') {
        clearTimeout(timer);
        resolve({ proc, lines });
      } else if (l.startsWith('{')) lines.push(JSON.parse(l) as Record<string, unknown>);
    });
    proc.once('exit', (c) => {
      clearTimeout(timer);
      reject(new Error(`${name} in ${ns} exited (${String(c)}) before it was ready; printed ${JSON.stringify(lines)}`));
    });
  });
}

const problem = setUp();
if (problem !== null) {
  tearDown();
  t.comment(`SKIP BBMD across subnets: ${problem}`);
} else {
  t.teardown(tearDown);
  t.test('through a BBMD between two subnets: Hayloft discovers and polls a device on the other subnet, and a front-end there finds and reads Hayloft', { timeout: 180_000 }, async (t) => {
    const bbmd = await run(t, NS.router, 'netns-bbmd', [`${A}.1`, `${A}.255`]);
    await run(t, NS.a, 'netns-device', [String(REMOTE), 'Remote AHU', `${A}.255`]);
    const hayloft = await run(t, NS.b, 'netns-hayloft', [], {
      REMOTE_INSTANCE: String(REMOTE),
      HAYLOFT_BACNET_INTERFACE: `${B}.2`,
      HAYLOFT_BACNET_PORT: '47809',
      HAYLOFT_BACNET_BROADCAST: `${B}.255`,
      HAYLOFT_BACNET_BBMD: `${A}.1`,
      HAYLOFT_BACNET_BBMD_TTL: '60',
      HAYLOFT_BACNET_DEVICE_INSTANCE: String(HAYLOFT),
      HAYLOFT_BACNET_DEVICE_NAME: 'Hayloft on B',
      HAYLOFT_BACNET_DEVICE_INTERFACE: `${B}.2`,
      HAYLOFT_BACNET_DEVICE_BBMD: `${A}.1`,
      HAYLOFT_BACNET_DEVICE_BBMD_TTL: '60',
    });
    const said = (key: string): unknown => hayloft.lines.find((l) => key in l)?.[key];
    const found = said('found') as { dis: string; uri: string; device: number }[];
    t.same(
      found.find((x) => x.device === REMOTE),
      { dis: 'Remote AHU', uri: `bacnet://${A}.2:47808/${REMOTE}`, device: REMOTE },
      'discover on subnet B found the device on subnet A, at its own address',
    );
    t.equal(said('polled'), REMOTE, 'and a connector polls it there (its AI1 reads its instance)');
    t.match(
      said('registered'),
      { device: { bbmd: `${A}.1:47808`, bbmdState: 'registered', bbmdTtl: 60 }, client: { bbmd: `${A}.1:47808`, bbmdState: 'registered', bbmdTtl: 60 } },
      '/api/health: both sides registered with the BBMD',
    );
    t.same(
      new Set(bbmd.lines.map((l) => l.from)),
      new Set([`${B}.2:47808`, `${B}.2:47809`]),
      'the BBMD saw both sides register from subnet B',
    );

    // The front-end on subnet A: its local broadcast reaches Hayloft only through the BBMD.
    const fe = spawnSync('ip', ['netns', 'exec', NS.a, process.execPath, '--import', 'tsx', fixture('netns-frontend'), `${A}.255`, String(HAYLOFT), '1'], { encoding: 'utf8', timeout: 60_000 });
    t.equal(fe.status, 0, `the front-end run ended well: ${fe.stderr.slice(-500)}`);
    const got = JSON.parse(fe.stdout.trim().split('\n').pop() ?? '{}') as Record<string, unknown>;
    t.match(got, { address: new RegExp(`^${B.replace(/\./g, '\\.')}\\.2`), name: 'Hayloft on B', pv: 21.5 }, "the front-end found Hayloft on subnet B, read its Device object's name and the exported point's presentValue");
  });
}
