/**
 * The contract between the HTTP layer and the operations. An op receives the request grid
 * (decoded from the body by Content-Type, or built from GET query parameters) and the services
 * it may use, and returns a grid; the server encodes it by Accept. Ops never see HTTP objects:
 * they throw HayloftErrors and the server maps codes to statuses in one place.
 */
import type { TimeZone } from '../haystack/tz.js';
import type { HGrid } from '../haystack/values.js';
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/log.js';
import type { Model } from '../model/model.js';

export type HttpMethod = 'GET' | 'POST';

/** What `about` reports. */
export interface ServerInfo {
  serverName: string;
  /** The server's default zone. */
  tz: TimeZone;
  productVersion: string;
  /** Epoch ms of boot. */
  bootTime: number;
}

/** The services an op may use. Grows as capabilities land (auth, history, watches). */
export interface OpContext {
  model: Model;
  clock: Clock;
  log: Logger;
  info: ServerInfo;
}

export interface OpRequest {
  op: string;
  method: HttpMethod;
  grid: HGrid;
  ctx: OpContext;
}

export interface Op {
  name: string;
  summary: string;
  methods: readonly HttpMethod[];
  run(req: OpRequest): HGrid | Promise<HGrid>;
}
