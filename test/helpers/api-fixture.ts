/**
 * A server on 127.0.0.1 with an ephemeral port for the API tests, built from fake ops and a
 * minimal context, with its log lines captured so tests can assert on them.
 */
import { createApiServer, type ApiServer, type ApiServerOptions } from '../../src/api/server.js';
import type { Op, OpContext } from '../../src/api/op.js';
import { timeZone } from '../../src/haystack/tz.js';
import { ManualClock } from '../../src/lib/clock.js';
import { createLogger } from '../../src/lib/log.js';
import type { Model } from '../../src/model/model.js';
import type { PointState } from '../../src/model/point-state.js';
import type { PointWriter } from '../../src/model/point-writer.js';
import type { HistoryStore } from '../../src/store/history.js';
import type { WatchManager } from '../../src/watch/index.js';

export const BOOT = Date.UTC(2024, 2, 10, 12, 0, 0);
export const NOW = BOOT + 90_000;

export interface Running {
  base: string;
  port: number;
  server: ApiServer;
  clock: ManualClock;
  /** Every log line written so far, parsed. */
  logs: Record<string, unknown>[];
  /** The raw log text (to check nothing secret was written anywhere in it). */
  logText(): string;
}

export function fakeCtx(clock: ManualClock, log: OpContext['log']): OpContext {
  return {
    // The info ops never touch the model: a bare object stands in for it.
    model: {} as Model,
    clock,
    log,
    info: { serverName: 'test-box', tz: timeZone('New_York'), productVersion: '9.8.7', bootTime: BOOT },
    // Nor the watch manager, nor the history, nor point state.
    watches: {} as WatchManager,
    history: {} as HistoryStore,
    points: {} as PointState,
    writer: {} as PointWriter,
  };
}

export async function startServer(
  t: { teardown(f: () => unknown): void },
  ops: readonly Op[],
  opts: Partial<Pick<ApiServerOptions, 'maxBodyBytes' | 'debug' | 'closeTimeoutMs'>> = {},
): Promise<Running> {
  const raw: string[] = [];
  const log = createLogger({ level: 'debug', destination: { write: (s: string) => void raw.push(s) } });
  const clock = new ManualClock(NOW);
  const server = createApiServer({
    ops,
    auth: null,
    ctx: fakeCtx(clock, log),
    log,
    maxBodyBytes: opts.maxBodyBytes ?? 64 * 1024,
    // One limit for every op here: the fake ops are not bulk writes.
    limits: { maxRequestBodyBytes: opts.maxBodyBytes ?? 64 * 1024 },
    debug: opts.debug ?? false,
    ...(opts.closeTimeoutMs === undefined ? {} : { closeTimeoutMs: opts.closeTimeoutMs }),
  });
  const { port } = await server.listen(0, '127.0.0.1');
  t.teardown(() => server.close());
  const logs: Record<string, unknown>[] = [];
  return {
    base: `http://127.0.0.1:${port}`,
    port,
    server,
    clock,
    get logs() {
      logs.length = 0;
      for (const line of raw.join('').split('\n')) if (line.trim() !== '') logs.push(JSON.parse(line) as Record<string, unknown>);
      return logs;
    },
    logText: () => raw.join(''),
  };
}

/** Waits until `pred` holds (log lines are written after the response is sent). */
export async function until(pred: () => boolean, ms = 2000): Promise<boolean> {
  const end = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > end) return false;
    await new Promise((r) => setTimeout(r, 5));
  }
  return true;
}
