/**
 * The configuration schema: every key with its type, default and check, in one table. Values
 * arrive as JSON (from the config file) or as text (from the environment); each key's parser
 * takes either and says what it expected, so validation can list every problem at once instead
 * of making an operator fix a device's config one restart at a time.
 */
import { isIPv4 } from 'node:net';
import os from 'node:os';
import type { BacnetDeviceConfig } from './bacnet-device.js';
import type { MqttConfig } from './mqtt.js';
import type { SmtpConfig } from './smtp.js';
import type { UplinkConfig } from './uplink.js';
// The value parsers every section shares (the uplink and mqtt sections read them too).
import { bbmdAddress, bool as boolean, integer, text } from './section.js';

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export interface Config {
  /** Folder of the LevelDB store (absolute: resolved against the working folder). */
  readonly dataDir: string;
  /** LevelDB's block cache, in bytes (uncompressed blocks recently read). */
  readonly storeCacheBytes: number;
  /** LevelDB's write buffer (memtable), in bytes: writes gathered before they go to a sorted file. */
  readonly storeWriteBufferBytes: number;
  /**
   * LevelDB's open files (max_open_files): its sorted tables are kept open, and mapped into the
   * daemon's memory, up to this many less 10; the rest are opened when read.
   */
  readonly storeOpenFiles: number;
  /** LevelDB's table size (max_file_size), in bytes: the size of the sorted files compactions write. */
  readonly storeFileBytes: number;
  /**
   * Free bytes the data folder's file system keeps: below it history writes (hisWrite and polled
   * samples) are refused with HL_STORAGE_FULL, before LevelDB runs out of space; 0 turns it off.
   */
  readonly historyMinFreeBytes: number;
  /** Days raw history samples are kept by default (a point's hisRetention wins); 0: no age bound. */
  readonly historyRetentionDays: number;
  /** Days the 15-minute rollups of removed samples are kept (a point's hisRollupRetention wins); 0: no age bound. */
  readonly historyRollupRetentionDays: number;
  /** Bytes the store may take on disk: past it the oldest history goes first; 0: no bound. */
  readonly historyMaxBytes: number;
  /**
   * Ms between flushes of polled samples: they are written together, one synced batch per flush;
   * what a power cut can lose of them. 0 writes each poll cycle's samples at once. hisWrite is
   * always acknowledged only once on disk.
   */
  readonly historyFlushMs: number;
  /** Samples the open tails of all points may hold in memory before the biggest are sealed early. */
  readonly historyTailSamples: number;
  /** Address the HTTP server binds to. */
  readonly host: string;
  /** Plain HTTP port; 0 picks a free one (tests); null: no plain HTTP (`off`). */
  readonly port: number | null;
  /** HTTPS port (TLS 1.2 and later); 0 picks a free one; null: no HTTPS (`off`). */
  readonly httpsPort: number | null;
  /** PEM file of the certificate HTTPS serves; null: a self-signed one kept in the data folder. */
  readonly tlsCert: string | null;
  /** PEM file of the certificate's private key (with tlsCert). */
  readonly tlsKey: string | null;
  /** Ed25519 public key (PEM file, or its text) that `hayloft update` checks release artifacts against; none: updates are refused. */
  readonly updatePublicKey: string | null;
  /** Largest request body of the ops that write in bulk (hisWrite, createRec, updateRec), in bytes. */
  readonly maxBodyBytes: number;
  /** Largest request body of every other op (reads, watches, deletes), in bytes. */
  readonly maxRequestBodyBytes: number;
  /** Bytes of request bodies being read at once, all clients together; past it: 503 with Retry-After. */
  readonly maxBodyBytesInFlight: number;
  /** Characters of one Str, Ref, Uri (or any value text, or a tag name) in a request. */
  readonly maxValueChars: number;
  /** Columns of one grid in a request. */
  readonly maxCols: number;
  /** Open connections from one client address (HTTP and HTTPS each); past it new ones are closed. */
  readonly maxConnectionsPerAddress: number;
  /** Time a client has to send a request's headers, in ms. */
  readonly headersTimeoutMs: number;
  /** Time a client has to send a whole request (headers and body), in ms. */
  readonly requestTimeoutMs: number;
  /** An idle keep-alive connection is closed after this many ms. */
  readonly keepAliveTimeoutMs: number;
  /** What `about` reports as serverName. */
  readonly serverName: string;
  /** The server's default zone, a Haystack zone name (`New_York`, `UTC`). */
  readonly tz: string;
  readonly logLevel: LogLevel;
  /**
   * How log lines look: `pretty` (time, level, message and fields on one line, for a person at a
   * terminal), `json` (one JSON object a line, for journald and programs), or `auto`: pretty when
   * standard output is a terminal, JSON otherwise.
   */
  readonly logFormat: 'auto' | 'pretty' | 'json';
  /** When true, error grids carry `errTrace` (a stack): never on a device on an open network. */
  readonly debug: boolean;
  /** Open watches one user may hold at once (watchSub past it is refused with HL_WATCH_LIMIT). */
  readonly watchMaxPerUser: number;
  /** Points one watch may hold. */
  readonly watchMaxPoints: number;
  /** `GET /metrics` answers without authentication (for a Prometheus on a trusted network). */
  readonly metricsOpen: boolean;
  /**
   * How the clock is known to be set (docs/clock.md): `auto` waits for systemd-timesyncd's flag
   * when timesyncd runs on the host; `systemd` always waits for it; `none`: no NTP at the site,
   * the clock is trusted as set (still never before the floor nor behind the last good time).
   */
  readonly clockSync: 'auto' | 'systemd' | 'none';
  /** Local IPv4 address the BACnet/IP socket binds to; `0.0.0.0` for all interfaces. */
  readonly bacnetInterface: string;
  /** Local UDP port of the BACnet/IP socket. */
  readonly bacnetPort: number;
  /** BACnet request timeout in ms for connectors without a `timeout` tag. */
  readonly bacnetTimeoutMs: number;
  /** Where a broadcast Who-Is (discover) goes; empty: the library's 255.255.255.255. */
  readonly bacnetBroadcast: string;
  /** A BBMD (`host:port`) the client side registers with as a foreign device; empty: none. */
  readonly bacnetBbmd: string;
  /** That registration's time-to-live in s. */
  readonly bacnetBbmdTtl: number;
  /** The uplink to an upstream service (src/config/uplink.ts), or null when none is configured. */
  readonly uplink: UplinkConfig | null;
  /** The Sparkplug B edge node (src/config/mqtt.ts), or null when none is configured. */
  readonly mqtt: MqttConfig | null;
  /** Hayloft as a BACnet/IP device (src/config/bacnet-device.ts), or null when not configured. */
  readonly bacnetDevice: BacnetDeviceConfig | null;
  /** The mail server of e-mail alarm notifications (src/config/smtp.ts), or null when none is configured. */
  readonly smtp: SmtpConfig | null;
  /** The config file read, or null when none was. */
  readonly configFile: string | null;
}

/** The top-level scalar keys a config file or the environment may set (sections have their own tables). */
export type ConfigKey = Exclude<keyof Config, 'configFile' | 'uplink' | 'mqtt' | 'bacnetDevice' | 'smtp'>;

/** Nested sections of the config file, each an object with its own keys. */
export const CONFIG_SECTIONS = ['uplink', 'mqtt', 'bacnetDevice', 'smtp'] as const;

/**
 * Time zones live in src/haystack, which config may not import (docs/design/README.md dependency
 * direction), so the caller hands in the two questions config needs answered.
 */
export interface ZoneLookup {
  /** The host's zone as a Haystack name (the default of `tz`). */
  host(): string;
  /** True when the name is a known Haystack zone. */
  known(name: string): boolean;
}

export interface SchemaContext {
  zones: ZoneLookup;
  /** Defaults to os.hostname(). */
  hostname?: () => string;
}

/** A parser returns the typed value, or a string saying what was expected. */
type Parse<T> = (raw: unknown, ctx: SchemaContext) => { ok: T } | { expected: string };

interface KeySpec<T> {
  /** Environment variable that overrides the file. */
  env: string;
  default: (ctx: SchemaContext) => T;
  parse: Parse<T>;
}

const MIB = 1024 * 1024;

/** A port, or `off` (also false) for none. */
function portOrOff(raw: unknown): { ok: number | null } | { expected: string } {
  if (raw === false || (typeof raw === 'string' && /^\s*(off|false|no)\s*$/i.test(raw))) return { ok: null };
  const r = integer(raw, 0, 65535);
  return 'ok' in r ? r : { expected: 'an integer from 0 to 65535, or off' };
}

export const SCHEMA: { readonly [K in ConfigKey]: KeySpec<Config[K]> } = {
  dataDir: {
    env: 'HAYLOFT_DATA_DIR',
    default: () => './data',
    parse: (raw) => text(raw, 'a folder path'),
  },
  // Sized for a Raspberry Pi (LevelDB's own defaults are 8 and 4 MiB): both are resident once
  // filled, and history reads decode whole compressed chunks, which need little block caching.
  storeCacheBytes: {
    env: 'HAYLOFT_STORE_CACHE_BYTES',
    default: () => 2 * MIB,
    parse: (raw) => integer(raw, 0, 1024 * MIB),
  },
  storeWriteBufferBytes: {
    env: 'HAYLOFT_STORE_WRITE_BUFFER_BYTES',
    default: () => 2 * MIB,
    parse: (raw) => integer(raw, 64 * 1024, 1024 * MIB),
  },
  // LevelDB maps every table it holds open into the process (64-bit builds), and the pages reads
  // and compactions touch stay counted in its RSS; with LevelDB's defaults (1,000 files of 2 MiB)
  // that is up to 2 GiB as history grows over the years, and up to 1,000 file descriptors of a
  // systemd service's 1,024. 74 files (LevelDB's least: 64 tables) of 1 MiB (LevelDB's least)
  // bound it to 64 MiB and 74 descriptors. docs/configuration.md "LevelDB's files".
  storeOpenFiles: {
    env: 'HAYLOFT_STORE_OPEN_FILES',
    default: () => 74,
    parse: (raw) => integer(raw, 74, 50_000),
  },
  storeFileBytes: {
    env: 'HAYLOFT_STORE_FILE_BYTES',
    default: () => MIB,
    parse: (raw) => integer(raw, MIB, 1024 * MIB),
  },
  // 512 MiB: 1.6-3 % of a 16-32 GB card. What stays free serves logins, records, point writes,
  // watches and LevelDB's compactions (which need room for the files they rewrite), and the
  // system sharing the card (journald, package updates). docs/configuration.md "Disk space".
  historyMinFreeBytes: {
    env: 'HAYLOFT_HISTORY_MIN_FREE_BYTES',
    default: () => 512 * MIB,
    parse: (raw) => integer(raw, 0, 1024 * 1024 * MIB),
  },
  // Sized for a 16-32 GB card (docs/history.md "Sizing"): two years of raw samples, ten of
  // 15-minute rollups, and the store bounded at 4 GiB (a quarter of a 16 GB card) whatever
  // the points and their rates; the oldest raw samples go first when it is reached.
  historyRetentionDays: {
    env: 'HAYLOFT_HISTORY_RETENTION_DAYS',
    default: () => 730,
    parse: (raw) => integer(raw, 0, 100_000),
  },
  historyRollupRetentionDays: {
    env: 'HAYLOFT_HISTORY_ROLLUP_RETENTION_DAYS',
    default: () => 3650,
    parse: (raw) => integer(raw, 0, 100_000),
  },
  historyMaxBytes: {
    env: 'HAYLOFT_HISTORY_MAX_BYTES',
    default: () => 4096 * MIB,
    parse: (raw) => integer(raw, 0, 1024 * 1024 * MIB),
  },
  // 5 s: 0.2 fsyncs a second for any number of points, and samples reach the flash in batches
  // (docs/performance.md "Flash wear"); a power cut loses at most the last 5 s of polled samples.
  historyFlushMs: {
    env: 'HAYLOFT_HISTORY_FLUSH_MS',
    default: () => 5000,
    parse: (raw) => integer(raw, 0, 600_000),
  },
  // 1,000,000 samples: 16 MB at most in memory, whole chunks of 1,024 for up to about 1,000 points
  // polled every second; with more points chunks get smaller rather than memory bigger.
  historyTailSamples: {
    env: 'HAYLOFT_HISTORY_TAIL_SAMPLES',
    default: () => 1_000_000,
    parse: (raw) => integer(raw, 1000, 100_000_000),
  },
  host: {
    env: 'HAYLOFT_HOST',
    default: () => '0.0.0.0',
    parse: (raw) => {
      const r = text(raw, 'an IP address or host name to listen on');
      return 'ok' in r && /\s/.test(r.ok) ? { expected: 'an IP address or host name to listen on (no spaces)' } : r;
    },
  },
  port: {
    env: 'HAYLOFT_PORT',
    default: () => 8080,
    parse: (raw) => portOrOff(raw),
  },
  // HTTPS by default: passwords and bearer tokens must not cross the building network in clear.
  httpsPort: {
    env: 'HAYLOFT_HTTPS_PORT',
    default: () => 8443,
    parse: (raw) => portOrOff(raw),
  },
  tlsCert: {
    env: 'HAYLOFT_TLS_CERT',
    default: () => null,
    parse: (raw) => text(raw, 'the path of a PEM certificate file'),
  },
  tlsKey: {
    env: 'HAYLOFT_TLS_KEY',
    default: () => null,
    parse: (raw) => text(raw, 'the path of a PEM private key file'),
  },
  updatePublicKey: {
    env: 'HAYLOFT_UPDATE_PUBLIC_KEY',
    default: () => null,
    parse: (raw) => text(raw, 'the path of an Ed25519 public key PEM file, or its PEM text'),
  },
  maxBodyBytes: {
    env: 'HAYLOFT_MAX_BODY_BYTES',
    // A 100,000-row hisWrite is about 6.5 MB of JSON: leave room for bigger batches from an
    // uplink catching up, while still bounding what one request can make the device hold.
    default: () => 64 * MIB,
    parse: (raw) => integer(raw, 1024, 1024 * MIB),
  },
  // Reads, watches and deletes by id need little: 1 MiB holds some 25,000 ids. Answered 413
  // from Content-Length before anything is read.
  maxRequestBodyBytes: {
    env: 'HAYLOFT_MAX_REQUEST_BODY_BYTES',
    default: () => MIB,
    parse: (raw) => integer(raw, 1024, 1024 * MIB),
  },
  // Two full-size uploads at once, bounded whatever the number of clients: a 1 GB device keeps
  // its memory for the model and the history.
  maxBodyBytesInFlight: {
    env: 'HAYLOFT_MAX_BODY_BYTES_IN_FLIGHT',
    default: () => 128 * MIB,
    parse: (raw) => integer(raw, 1024, 16 * 1024 * MIB),
  },
  maxValueChars: {
    env: 'HAYLOFT_MAX_VALUE_CHARS',
    default: () => 65_536,
    parse: (raw) => integer(raw, 256, 64 * MIB),
  },
  maxCols: {
    env: 'HAYLOFT_MAX_COLS',
    default: () => 1_000,
    parse: (raw) => integer(raw, 10, 1_000_000),
  },
  // A dashboard or supervisor opens a handful; a runaway client or a slowloris opens hundreds.
  maxConnectionsPerAddress: {
    env: 'HAYLOFT_MAX_CONNECTIONS_PER_ADDRESS',
    default: () => 64,
    parse: (raw) => integer(raw, 1, 100_000),
  },
  headersTimeoutMs: {
    env: 'HAYLOFT_HEADERS_TIMEOUT_MS',
    default: () => 10_000,
    parse: (raw) => integer(raw, 1000, 600_000),
  },
  // Long enough for a full-size upload over a slow building network (64 MiB at 4 Mbit/s).
  requestTimeoutMs: {
    env: 'HAYLOFT_REQUEST_TIMEOUT_MS',
    default: () => 300_000,
    parse: (raw) => integer(raw, 1000, 3_600_000),
  },
  keepAliveTimeoutMs: {
    env: 'HAYLOFT_KEEP_ALIVE_TIMEOUT_MS',
    default: () => 5_000,
    parse: (raw) => integer(raw, 100, 600_000),
  },
  serverName: {
    env: 'HAYLOFT_SERVER_NAME',
    default: (ctx) => (ctx.hostname ?? os.hostname)(),
    parse: (raw) => text(raw, 'a non-empty name'),
  },
  tz: {
    env: 'HAYLOFT_TZ',
    default: (ctx) => ctx.zones.host(),
    parse: (raw, ctx) => {
      const r = text(raw, 'a Haystack time-zone name such as New_York or UTC');
      if ('ok' in r && !ctx.zones.known(r.ok)) return { expected: 'a known Haystack time-zone name such as New_York or UTC' };
      return r;
    },
  },
  logLevel: {
    env: 'HAYLOFT_LOG_LEVEL',
    default: () => 'info',
    parse: (raw) => {
      const v = typeof raw === 'string' ? raw.trim().toLowerCase() : raw;
      return LOG_LEVELS.includes(v as LogLevel) ? { ok: v as LogLevel } : { expected: `one of ${LOG_LEVELS.join(', ')}` };
    },
  },
  logFormat: {
    env: 'HAYLOFT_LOG_FORMAT',
    default: () => 'auto',
    parse: (raw) => {
      const v = typeof raw === 'string' ? raw.trim().toLowerCase() : raw;
      return v === 'auto' || v === 'pretty' || v === 'json' ? { ok: v } : { expected: 'auto, pretty or json' };
    },
  },
  debug: {
    env: 'HAYLOFT_DEBUG',
    default: () => false,
    parse: (raw) => boolean(raw),
  },
  // Defaults as src/watch DEFAULT_WATCH_LIMITS (config may not import watch): generous for
  // supervisory clients, yet bounding what a client leaking watches makes a small device hold.
  watchMaxPerUser: {
    env: 'HAYLOFT_WATCH_MAX_PER_USER',
    default: () => 50,
    parse: (raw) => integer(raw, 1, 100_000),
  },
  watchMaxPoints: {
    env: 'HAYLOFT_WATCH_MAX_POINTS',
    default: () => 10_000,
    parse: (raw) => integer(raw, 1, 1_000_000),
  },
  // Closed by default: metrics tell an outsider which points exist and how busy the device is.
  metricsOpen: {
    env: 'HAYLOFT_METRICS_OPEN',
    default: () => false,
    parse: (raw) => boolean(raw),
  },
  clockSync: {
    env: 'HAYLOFT_CLOCK_SYNC',
    default: () => 'auto',
    parse: (raw) => {
      const v = typeof raw === 'string' ? raw.trim().toLowerCase() : raw;
      return v === 'auto' || v === 'systemd' || v === 'none' ? { ok: v } : { expected: 'auto, systemd or none' };
    },
  },
  // BACnet/IP: one UDP socket serves every device (src/drivers/bacnet). It is IPv4 only, so the
  // address is an IPv4 address of this host: not a host name, nor an interface name like eth0.
  bacnetInterface: {
    env: 'HAYLOFT_BACNET_INTERFACE',
    default: () => '0.0.0.0',
    parse: (raw) => {
      const expected = 'an IPv4 address of this host for BACnet/IP, such as 192.168.1.20 (0.0.0.0: all interfaces)';
      const r = text(raw, expected);
      return 'ok' in r && !isIPv4(r.ok) ? { expected } : r;
    },
  },
  // From 1: the BACnet library binds its standard port 47808 when given 0, so 0 cannot mean "a
  // free port" here as it does for the HTTP port.
  bacnetPort: {
    env: 'HAYLOFT_BACNET_PORT',
    default: () => 47808,
    parse: (raw) => integer(raw, 1, 65535),
  },
  // Default as BACNET_DEFAULT_TIMEOUT_MS in src/drivers/bacnet (config may not import drivers).
  bacnetTimeoutMs: {
    env: 'HAYLOFT_BACNET_TIMEOUT_MS',
    default: () => 3000,
    parse: (raw) => integer(raw, 100, 60_000),
  },
  // Devices on other subnets, through a BBMD (Annex J): a foreign-device registration.
  bacnetBbmd: {
    env: 'HAYLOFT_BACNET_BBMD',
    default: () => '',
    parse: (raw) => bbmdAddress(raw, true),
  },
  bacnetBbmdTtl: {
    env: 'HAYLOFT_BACNET_BBMD_TTL',
    default: () => 600,
    parse: (raw) => integer(raw, 2, 65535),
  },
  // The subnet's broadcast address (192.168.1.255) when the limited broadcast 255.255.255.255
  // does not reach the devices: a host with several networks sends that one out of its default route.
  bacnetBroadcast: {
    env: 'HAYLOFT_BACNET_BROADCAST',
    default: () => '',
    parse: (raw) => {
      const expected = 'an IPv4 broadcast address such as 192.168.1.255 (empty: 255.255.255.255)';
      if (typeof raw === 'string' && raw.trim() === '') return { ok: '' };
      const r = text(raw, expected);
      return 'ok' in r && !isIPv4(r.ok) ? { expected } : r;
    },
  },
};

export const CONFIG_KEYS = Object.keys(SCHEMA) as ConfigKey[];
