/**
 * Logging: pino to stdout (journald keeps it; no log files on the SD card). The logger is created
 * once by the composition root and passed down; nothing logs through a module-level singleton.
 * Never log secrets: the redact list covers the usual places they could hide.
 */
import { pino, type Logger, type DestinationStream } from 'pino';

export type { Logger };

export interface LogOptions {
  level?: string;
  /** Where to write; stdout by default (tests pass a stream to inspect lines). */
  destination?: DestinationStream;
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
    opts.destination ?? pino.destination({ fd: 1, sync: false }),
  );
}

/** A logger that drops everything (tests that do not inspect logs). */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
