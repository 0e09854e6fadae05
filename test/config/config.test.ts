import { writeFileSync } from 'node:fs';
import path from 'node:path';
import t, { type Test } from 'tap';
import { type ConfigProblem, loadConfig } from '../../src/config/index.js';
import { findTimeZone } from '../../src/haystack/tz.js';
import { ErrorCodes, HayloftError } from '../../src/lib/errors.js';
import { tempDir } from '../helpers/tmp.js';

const zones = { host: () => 'Sydney', known: (n: string) => findTimeZone(n) !== undefined };
const base = { zones, cwd: '/srv/hayloft', hostname: () => 'pi-42' };

/** The problems of a config that must fail (the test fails if it loads). */
function problemsOf(t: Test, opts: Parameters<typeof loadConfig>[0]): ConfigProblem[] {
  try {
    loadConfig(opts);
  } catch (e) {
    t.ok(e instanceof HayloftError && e.code === ErrorCodes.BAD_CONFIG, 'HL_BAD_CONFIG');
    return (e as HayloftError).cause as ConfigProblem[];
  }
  t.fail('the config loaded');
  return [];
}

function file(t: Test, content: unknown, name = 'hayloft.json'): string {
  const p = path.join(tempDir(t), name);
  writeFileSync(p, typeof content === 'string' ? content : JSON.stringify(content));
  return p;
}

/** The defaults of the keys of issue 18 (request limits, slow clients). */
const GUARD_DEFAULTS = {
  httpsPort: 8443,
  tlsCert: null,
  tlsKey: null,
  updatePublicKey: null,
  maxRequestBodyBytes: 1024 * 1024,
  maxBodyBytesInFlight: 128 * 1024 * 1024,
  maxValueChars: 65_536,
  maxCols: 1000,
  maxConnectionsPerAddress: 64,
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 300_000,
  keepAliveTimeoutMs: 5000,
};

t.test('defaults', async (t) => {
  const c = loadConfig({ ...base, env: {} });
  t.same(c, {
    dataDir: '/srv/hayloft/data',
    storeCacheBytes: 2 * 1024 * 1024,
    storeWriteBufferBytes: 2 * 1024 * 1024,
    storeOpenFiles: 74,
    storeFileBytes: 1024 * 1024,
    historyMinFreeBytes: 512 * 1024 * 1024,
    historyRetentionDays: 730,
    historyRollupRetentionDays: 3650,
    historyMaxBytes: 4096 * 1024 * 1024,
    historyFlushMs: 5000,
    historyTailSamples: 1_000_000,
    host: '0.0.0.0',
    port: 8080,
    maxBodyBytes: 64 * 1024 * 1024,
    serverName: 'pi-42',
    tz: 'Sydney',
    logLevel: 'info',
    logFormat: 'auto',
    debug: false,
    watchMaxPerUser: 50,
    watchMaxPoints: 10_000,
    metricsOpen: false,
    clockSync: 'auto',
    bacnetInterface: '0.0.0.0',
    bacnetPort: 47808,
    bacnetTimeoutMs: 3000,
    ...GUARD_DEFAULTS,
    bacnetBroadcast: '',
    bacnetBbmd: '',
    bacnetBbmdTtl: 600,
    uplink: null,
    mqtt: null,
    bacnetDevice: null,
    smtp: null,
    configFile: null,
  });
  t.ok(Object.isFrozen(c), 'frozen');
  t.throws(() => {
    (c as { port: number }).port = 1;
  });
  // Without injected host name and cwd, the real ones.
  const real = loadConfig({ zones, env: {} });
  t.equal(real.dataDir, path.resolve('data'));
  t.type(real.serverName, 'string');
});

t.test('file, then environment over it, then --config choosing the file', async (t) => {
  const f = file(t, { dataDir: '/var/lib/hayloft', port: 9000, host: '127.0.0.1', maxBodyBytes: 2048, serverName: 'boiler room', tz: 'New_York', logLevel: 'debug', debug: true });
  const fromFile = loadConfig({ ...base, env: { HAYLOFT_CONFIG: f } });
  t.same(fromFile, {
    dataDir: '/var/lib/hayloft',
    storeCacheBytes: 2 * 1024 * 1024,
    storeWriteBufferBytes: 2 * 1024 * 1024,
    storeOpenFiles: 74,
    storeFileBytes: 1024 * 1024,
    historyMinFreeBytes: 512 * 1024 * 1024,
    historyRetentionDays: 730,
    historyRollupRetentionDays: 3650,
    historyMaxBytes: 4096 * 1024 * 1024,
    historyFlushMs: 5000,
    historyTailSamples: 1_000_000,
    host: '127.0.0.1',
    port: 9000,
    maxBodyBytes: 2048,
    serverName: 'boiler room',
    tz: 'New_York',
    logLevel: 'debug',
    logFormat: 'auto',
    debug: true,
    watchMaxPerUser: 50,
    watchMaxPoints: 10_000,
    metricsOpen: false,
    clockSync: 'auto',
    bacnetInterface: '0.0.0.0',
    bacnetPort: 47808,
    bacnetTimeoutMs: 3000,
    ...GUARD_DEFAULTS,
    bacnetBroadcast: '',
    bacnetBbmd: '',
    bacnetBbmdTtl: 600,
    uplink: null,
    mqtt: null,
    bacnetDevice: null,
    smtp: null,
    configFile: f,
  });
  const env = { HAYLOFT_CONFIG: f, HAYLOFT_DATA_DIR: 'd2', HAYLOFT_HOST: '::1', HAYLOFT_PORT: '0', HAYLOFT_DEBUG: 'no', HAYLOFT_LOG_LEVEL: 'WARN' };
  const over = loadConfig({ ...base, env });
  t.equal(over.dataDir, '/srv/hayloft/d2', 'relative dataDir resolves against the working folder');
  t.equal(over.host, '::1');
  t.equal(over.port, 0);
  t.equal(over.debug, false);
  t.equal(over.logLevel, 'warn');
  t.equal(over.serverName, 'boiler room', 'keys not in the environment keep the file value');
  t.equal(loadConfig({ ...base, env: { HAYLOFT_PORT: '' } }).port, 8080, 'an empty variable counts as unset');
  t.equal(loadConfig({ ...base, env: { HAYLOFT_PORT: 'off', HAYLOFT_HTTPS_PORT: 'OFF' } }).port, null, 'plain HTTP can be turned off');
  t.equal(loadConfig({ ...base, env: { HAYLOFT_HTTPS_PORT: 'off' } }).httpsPort, null, 'and HTTPS');

  const g = file(t, { port: 7000 });
  t.equal(loadConfig({ ...base, env: { HAYLOFT_CONFIG: f }, argv: ['serve', '--config', g] }).port, 7000, '--config wins over HAYLOFT_CONFIG');
  t.equal(loadConfig({ ...base, env: {}, argv: [`--config=${g}`] }).port, 7000, '--config=path');
  t.equal(loadConfig({ ...base, env: {}, file: g }).configFile, g, 'a default file from the caller');
});

t.test('every validation error, each named with its source', async (t) => {
  const cases: [string, Record<string, unknown> | null, Record<string, string>, string, RegExp][] = [
    ['port not a number (env)', null, { HAYLOFT_PORT: 'http' }, 'port', /an integer from 0 to 65535.*got "http"/],
    ['port out of range (env)', null, { HAYLOFT_PORT: '70000' }, 'port', /an integer from 0 to 65535/],
    ['httpsPort not a port', { httpsPort: 'https' }, {}, 'httpsPort', /an integer from 0 to 65535, or off/],
    ['port negative (file)', { port: -1 }, {}, 'port', /an integer from 0 to 65535/],
    ['port fractional (file)', { port: 80.5 }, {}, 'port', /an integer/],
    ['maxBodyBytes too small', { maxBodyBytes: 10 }, {}, 'maxBodyBytes', /an integer from 1024/],
    ['storeWriteBufferBytes too small', { storeWriteBufferBytes: 1000 }, {}, 'storeWriteBufferBytes', /an integer from 65536/],
    ['storeOpenFiles below LevelDB\'s least', { storeOpenFiles: 20 }, {}, 'storeOpenFiles', /an integer from 74/],
    ['storeFileBytes below LevelDB\'s least', { storeFileBytes: 65536 }, {}, 'storeFileBytes', /an integer from 1048576/],
    ['maxBodyBytes not a number', { maxBodyBytes: '64MB' }, {}, 'maxBodyBytes', /an integer/],
    ['maxValueChars too small (env)', null, { HAYLOFT_MAX_VALUE_CHARS: '10' }, 'maxValueChars', /an integer from 256/],
    ['maxCols not a number', { maxCols: 'many' }, {}, 'maxCols', /an integer from 10/],
    ['headersTimeoutMs too small', { headersTimeoutMs: 5 }, {}, 'headersTimeoutMs', /an integer from 1000/],
    ['host blank', { host: ' ' }, {}, 'host', /IP address or host name/],
    ['host with a space (env)', null, { HAYLOFT_HOST: 'my host' }, 'host', /no spaces/],
    ['dataDir not a string', { dataDir: 42 }, {}, 'dataDir', /a folder path/],
    ['serverName blank', { serverName: '' }, {}, 'serverName', /a non-empty name/],
    ['tz unknown', { tz: 'Mars' }, {}, 'tz', /known Haystack time-zone name/],
    ['tz an IANA name', { tz: 'America/New_York' }, {}, 'tz', /time-zone name such as New_York/],
    ['logLevel unknown', { logLevel: 'verbose' }, {}, 'logLevel', /one of fatal, error, warn, info, debug, trace, silent/],
    ['debug not a boolean (env)', null, { HAYLOFT_DEBUG: 'maybe' }, 'debug', /true or false/],
    ['debug a number (file)', { debug: 1 }, {}, 'debug', /true or false/],
    ['metricsOpen not a boolean (env)', null, { HAYLOFT_METRICS_OPEN: 'public' }, 'metricsOpen', /true or false/],
    ['clockSync unknown (env)', null, { HAYLOFT_CLOCK_SYNC: 'ntp' }, 'clockSync', /auto, systemd or none/],
    ['bacnetInterface a host name (env)', null, { HAYLOFT_BACNET_INTERFACE: 'controller.local' }, 'bacnetInterface', /an IPv4 address of this host .*got "controller.local"/],
    ['bacnetInterface an interface name (file)', { bacnetInterface: 'eth0' }, {}, 'bacnetInterface', /an IPv4 address .*such as 192\.168\.1\.20/],
    ['bacnetInterface out of range (file)', { bacnetInterface: '192.168.1.300' }, {}, 'bacnetInterface', /an IPv4 address/],
    ['bacnetInterface IPv6 (env)', null, { HAYLOFT_BACNET_INTERFACE: '::1' }, 'bacnetInterface', /an IPv4 address/],
    ['bacnetInterface not a string (file)', { bacnetInterface: 19216812 }, {}, 'bacnetInterface', /an IPv4 address/],
    ['bacnetPort 0 (env)', null, { HAYLOFT_BACNET_PORT: '0' }, 'bacnetPort', /an integer from 1 to 65535, got "0"/],
    ['bacnetPort out of range (file)', { bacnetPort: 65536 }, {}, 'bacnetPort', /an integer from 1 to 65535, got 65536/],
    ['bacnetPort not a number (env)', null, { HAYLOFT_BACNET_PORT: 'bacnet' }, 'bacnetPort', /an integer from 1 to 65535/],
    ['bacnetTimeoutMs too short (file)', { bacnetTimeoutMs: 10 }, {}, 'bacnetTimeoutMs', /an integer from 100 to 60000/],
    ['bacnetTimeoutMs with a unit (env)', null, { HAYLOFT_BACNET_TIMEOUT_MS: '3s' }, 'bacnetTimeoutMs', /an integer from 100 to 60000/],
    ['historyRetentionDays negative (env)', null, { HAYLOFT_HISTORY_RETENTION_DAYS: '-1' }, 'historyRetentionDays', /an integer from 0 to 100000/],
    ['historyMaxBytes with a unit (file)', { historyMaxBytes: '4GB' }, {}, 'historyMaxBytes', /an integer from 0 to/],
    ['an unknown key', { prot: 80 }, {}, 'prot', /a known key \(dataDir, storeCacheBytes, storeWriteBufferBytes, storeOpenFiles, storeFileBytes, historyMinFreeBytes, historyRetentionDays, historyRollupRetentionDays, historyMaxBytes, historyFlushMs, historyTailSamples, host, port/],
  ];
  for (const [name, content, env, key, expected] of cases) {
    t.test(name, async (t) => {
      const f = content === null ? undefined : file(t, content);
      const problems = problemsOf(t, { ...base, env: { ...env, ...(f === undefined ? {} : { HAYLOFT_CONFIG: f }) } });
      t.equal(problems.length, 1, 'one problem');
      t.equal(problems[0]?.key, key);
      t.equal(problems[0]?.source, f ?? Object.keys(env)[0], 'names where the value came from');
      t.match(`expected ${problems[0]?.expected}, got ${problems[0]?.got}`, expected);
    });
  }
});

t.test('BACnet/IP socket: file, then environment over it', async (t) => {
  const yaml = file(t, 'bacnetInterface: 192.168.1.20\nbacnetPort: 47809\nbacnetTimeoutMs: 5000\n', 'hayloft.yaml');
  const fromFile = loadConfig({ ...base, env: { HAYLOFT_CONFIG: yaml } });
  t.match(fromFile, { bacnetInterface: '192.168.1.20', bacnetPort: 47809, bacnetTimeoutMs: 5000 }, 'from a YAML file');
  const over = loadConfig({ ...base, env: { HAYLOFT_CONFIG: yaml, HAYLOFT_BACNET_INTERFACE: ' 127.0.0.3 ', HAYLOFT_BACNET_PORT: '48000', HAYLOFT_BACNET_TIMEOUT_MS: '100' } });
  t.match(over, { bacnetInterface: '127.0.0.3', bacnetPort: 48000, bacnetTimeoutMs: 100 }, 'the environment wins (spaces trimmed)');
  t.match(loadConfig({ ...base, env: { HAYLOFT_BACNET_PORT: '65535', HAYLOFT_BACNET_TIMEOUT_MS: '60000' } }), { bacnetPort: 65535, bacnetTimeoutMs: 60_000 }, 'the upper bounds');
  t.match(loadConfig({ ...base, env: { HAYLOFT_BACNET_BROADCAST: ' 192.168.1.255 ' } }), { bacnetBroadcast: '192.168.1.255' }, 'a broadcast address for discovery');
  t.match(loadConfig({ ...base, env: { HAYLOFT_BACNET_BBMD: '10.1.2.3', HAYLOFT_BACNET_BBMD_TTL: '120' } }), { bacnetBbmd: '10.1.2.3:47808', bacnetBbmdTtl: 120 }, 'a BBMD, port 47808 by default');
  const problems = problemsOf(t, { ...base, env: { HAYLOFT_BACNET_INTERFACE: 'eth0', HAYLOFT_BACNET_PORT: '70000', HAYLOFT_BACNET_TIMEOUT_MS: '0', HAYLOFT_BACNET_BBMD: 'bbmd.local', HAYLOFT_BACNET_BBMD_TTL: '1', HAYLOFT_BACNET_BROADCAST: 'lan' } });
  t.same(
    problems.map((p) => p.key),
    ['bacnetInterface', 'bacnetPort', 'bacnetTimeoutMs', 'bacnetBbmd', 'bacnetBbmdTtl', 'bacnetBroadcast'],
    'every BACnet problem at once',
  );
});

t.test('problems with the file itself', async (t) => {
  const dir = tempDir(t);
  const missing = path.join(dir, 'nope.json');
  t.match(problemsOf(t, { ...base, env: { HAYLOFT_CONFIG: missing } }), [{ key: 'config', source: missing, expected: /does not exist/ }]);
  t.match(problemsOf(t, { ...base, env: { HAYLOFT_CONFIG: file(t, '{"port": 80,') } }), [{ key: 'config', expected: /valid JSON/ }]);
  t.match(problemsOf(t, { ...base, env: { HAYLOFT_CONFIG: file(t, '[1,2]') } }), [{ key: 'config', expected: /a JSON object/ }]);
  t.match(problemsOf(t, { ...base, env: {}, argv: ['serve', '--config'] }), [{ key: 'config', source: '--config', expected: /a file path/ }]);
  t.match(problemsOf(t, { ...base, env: {}, argv: ['--config', '--debug'] }), [{ key: 'config', source: '--config' }]);
  t.match(problemsOf(t, { ...base, env: {}, argv: ['--config='] }), [{ key: 'config', source: '--config' }]);
  t.match(problemsOf(t, { ...base, env: {}, argv: ['--config', dir] }), [{ key: 'config', expected: /a readable config file, JSON or YAML \(it is a folder\)/ }], 'a folder');
});

t.test('every problem is reported at once, in one message', async (t) => {
  const f = file(t, { port: 'x', tz: 'Mars', colour: 'red' });
  let err: unknown;
  try {
    loadConfig({ ...base, env: { HAYLOFT_CONFIG: f, HAYLOFT_HOST: 'a b', HAYLOFT_DEBUG: 'perhaps' } });
  } catch (e) {
    err = e;
  }
  t.ok(err instanceof HayloftError);
  const e = err as HayloftError;
  t.equal(e.code, ErrorCodes.BAD_CONFIG);
  t.equal((e.cause as ConfigProblem[]).length, 5);
  t.match(e.message, /^invalid configuration \(5 problems\):/);
  for (const line of [
    `colour (from ${f}): expected a known key`,
    `host (from HAYLOFT_HOST): expected an IP address or host name to listen on (no spaces), got "a b"`,
    `port (from ${f}): expected an integer from 0 to 65535, or off, got "x"`,
    `tz (from ${f}): expected a known Haystack time-zone name such as New_York or UTC, got "Mars"`,
    `debug (from HAYLOFT_DEBUG): expected true or false, got "perhaps"`,
  ]) {
    t.ok(e.message.includes(line), line);
  }
});

t.test('YAML config files', async (t) => {
  const yaml = [
    '# Level 3 controller',
    'dataDir: /var/lib/hayloft',
    'port: 9000',
    'serverName: "Level 3: plant room"',
    'tz: Sydney',
    'debug: false',
    'logLevel: warn   # quieter on the SD card',
    '',
  ].join('\n');
  for (const name of ['hayloft.yaml', 'hayloft.yml', 'hayloft.conf']) {
    const c = loadConfig({ ...base, env: { HAYLOFT_CONFIG: file(t, yaml, name) } });
    t.match(c, { dataDir: '/var/lib/hayloft', port: 9000, serverName: 'Level 3: plant room', tz: 'Sydney', debug: false, logLevel: 'warn' }, name);
  }
  t.equal(loadConfig({ ...base, env: { HAYLOFT_CONFIG: file(t, '# nothing set yet\n', 'empty.yaml') } }).port, 8080, 'a file of comments only sets nothing');
  t.equal(loadConfig({ ...base, env: { HAYLOFT_CONFIG: file(t, '{"port": 81}', 'flow.yaml') } }).port, 81, 'JSON text is YAML too');

  // YAML 1.2: `no` is a string, so it reaches the key's own check (which accepts it) rather than
  // being turned into false by the parser; a quoted number is a string and is refused as one.
  t.equal(loadConfig({ ...base, env: { HAYLOFT_CONFIG: file(t, 'debug: no\n', 'a.yaml') } }).debug, false);

  const f = file(t, 'port: "eighty"\ntz: Mars\ncolour: red\n', 'bad.yaml');
  const problems = problemsOf(t, { ...base, env: { HAYLOFT_CONFIG: f } });
  t.same(
    problems.map((p) => p.key).sort(),
    ['colour', 'port', 'tz'],
    'every problem of a YAML file at once',
  );
  t.match(problems.find((p) => p.key === 'port'), { source: f, expected: /an integer from 0 to 65535/, got: '"eighty"' });

  const syntax = file(t, 'port: 80\nhost: [unclosed\ntz: UTC\n', 'syntax.yaml');
  const sp = problemsOf(t, { ...base, env: { HAYLOFT_CONFIG: syntax } });
  t.ok(sp.length >= 1);
  t.match(sp[0], { key: 'config', source: syntax, expected: /valid YAML \(.*at line \d+, column \d+\)/ });
  t.match(problemsOf(t, { ...base, env: { HAYLOFT_CONFIG: file(t, 'port: 80\nport: 81\n', 'dup.yaml') } }), [{ key: 'config', expected: /valid YAML \(.*unique.*line 2/i }], 'a key given twice');
  t.match(problemsOf(t, { ...base, env: { HAYLOFT_CONFIG: file(t, '- port: 80\n', 'list.yaml') } }), [{ key: 'config', expected: /a YAML object of settings/ }]);
  t.match(problemsOf(t, { ...base, env: { HAYLOFT_CONFIG: file(t, 'port: 80\n', 'strict.json') } }), [{ key: 'config', expected: /valid JSON/ }], '.json stays strict JSON');
});
