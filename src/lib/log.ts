/**
 * Logging: pino to stdout (journald keeps it; no log files on the SD card). The logger is created
 * once by the composition root and passed down; nothing logs through a module-level singleton.
 * Never log secrets: the redact list covers the usual places they could hide.
 *
 * Two looks (setting `logFormat`): JSON, one object a line, for journald and programs reading a
 * pipe; and for a person at a terminal, pino-pretty's one line of time, level, message and the
 * line's own fields. `auto` (the default) picks pretty when stdout is a terminal. pino-pretty is
 * used as a stream in this thread (not a transport, which would start a worker thread and its
 * heap) and loaded only when chosen, so a service logging JSON does not carry it.
 */
import { createRequire } from 'node:module';
import { pino, type Logger, type DestinationStream } from 'pino';

export type { Logger };

export interface LogOptions {
  level?: string;
  /** `auto`: pretty when stdout is a terminal (`isTTY`), JSON otherwise. Default: json. */
  format?: 'auto' | 'pretty' | 'json';
  /** Where to write; stdout by default (tests pass a stream to inspect lines). */
  destination?: DestinationStream;
  /** Colours in pretty lines; default: when stdout is a terminal. */
  colorize?: boolean;
}

/** Whether a logger with this format writes pretty lines (stdout a terminal for `auto`). */
export function prettyChosen(format: LogOptions['format'], isTTY = process.stdout.isTTY === true): boolean {
  return format === 'pretty' || (format === 'auto' && isTTY);
}

type PrettyFactory = (opts: Record<string, unknown>) => DestinationStream;

/** pino-pretty's one-line form: local time, level, message, then the line's fields. */
function prettyStream(destination: DestinationStream | undefined, colorize: boolean): DestinationStream {
  const require = createRequire(import.meta.url);
  const pretty = require('pino-pretty') as PrettyFactory;
  return pretty({
    colorize,
    translateTime: 'SYS:yyyy-mm-dd HH:MM:ss',
    // The same on every line (the process, the host, the program's name), and the start line's
    // runtime report, which is for programs and tests.
    ignore: 'pid,hostname,name,runtime',
    singleLine: true,
    destination: destination ?? 1,
    // A person's terminal: lines in the order they were logged, before the first-start message.
    sync: true,
  });
}

export const REDACT_PATHS = [
  'password',
  'newPassword',
  'secret',
  'clientSecret',
  'token',
  'access_token',
  'refresh_token',
  'authorization',
  'req.headers.authorization',
  '*.password',
  '*.newPassword',
  '*.clientSecret',
  '*.access_token',
  '*.refresh_token',
];

export function createLogger(opts: LogOptions = {}): Logger {
  return pino(
    {
      level: opts.level ?? 'info',
      base: { name: 'hayloft' },
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    },
    prettyChosen(opts.format)
      ? prettyStream(opts.destination, opts.colorize ?? process.stdout.isTTY === true)
      : (opts.destination ?? pino.destination({ fd: 1, sync: false })),
  );
}

/** A logger that drops everything (tests that do not inspect logs). */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
