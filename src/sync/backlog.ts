/**
 * The backlog of each connector (the REST uplink, the MQTT edge node), counted exactly from the
 * store (for `hayloft sync status`, run on the data folder while the server is stopped): per
 * point, the samples newer than its cursor and the late ones before it (see SyncState), read in
 * bounded runs so a large backlog does not have to fit in memory.
 */
import type { UplinkSettings } from './settings.js';
import type { HRef } from '../haystack/values.js';
import type { Model } from '../model/model.js';
import type { Store } from '../store/db.js';
import type { HistoryStore } from '../store/history.js';
import { groupThousands } from '../lib/quote.js';
import { readAfter } from './his-batch.js';
import { SyncState } from './state.js';

/** A connector of the configuration: the REST uplink or the MQTT edge node. */
export interface ConfiguredConnector {
  name: string;
  url: string;
  filter: string;
  /** mqtt: a point without a cursor starts at its newest sample (nothing behind); rest: at its first. */
  kind: 'rest' | 'mqtt';
}

export interface PointBacklog {
  id: string;
  /** Fully qualified name, when the point has one. */
  fqname: string | undefined;
  samples: number;
  /** Oldest sample not yet acknowledged upstream (epoch ms), or null. */
  oldest: number | null;
  /** Newest sample acknowledged upstream, or null. */
  cursor: number | null;
}

export interface ConnectorBacklog {
  name: string;
  /** The connector of the config file (false: only its cursors are left in the data folder). */
  configured: boolean;
  kind: 'rest' | 'mqtt' | null;
  url: string | null;
  /** Points considered: selected by the filter (configured), or having a cursor. */
  points: number;
  /** Points found or created upstream (null for MQTT, which maps nothing). */
  mapped: number | null;
  /** Points with samples not yet acknowledged. */
  behind: number;
  samples: number;
  oldest: number | null;
  lastAck: number | null;
  lastError: string | null;
  perPoint: PointBacklog[];
}

const RUN = 100_000;

async function pointBacklog(history: HistoryStore, model: Model, state: SyncState, id: string, kind: 'rest' | 'mqtt' | null): Promise<PointBacklog> {
  const cursor = state.cursor(id);
  if (kind === 'mqtt' && cursor === -Infinity) return { id, fqname: model.fqname(id), samples: 0, oldest: null, cursor: null };
  let samples = 0;
  let oldest: number | null = null;
  const count = async (after: number, through: number): Promise<void> => {
    for (;;) {
      const run = await readAfter(history, id, after, RUN, through);
      if (run === null || run.ts.length === 0) return;
      oldest = Math.min(oldest ?? Infinity, run.ts[0] as number);
      samples += run.ts.length;
      after = run.ts[run.ts.length - 1] as number;
    }
  };
  // Late samples (written at or before the cursor, not yet sent again), then those after it.
  for (const [from, to] of state.lateSpans(id)) await count(from - 1, Math.min(to, cursor));
  await count(cursor, Infinity);
  return { id, fqname: model.fqname(id), samples, oldest, cursor: cursor === -Infinity ? null : cursor };
}

export async function backlogReport(opts: { store: Store; model: Model; history: HistoryStore; config: UplinkSettings | null; mqtt?: Omit<ConfiguredConnector, 'kind'> | null }): Promise<ConnectorBacklog[]> {
  const { store, model, history } = opts;
  const configs = new Map<string, ConfiguredConnector>();
  if (opts.config !== null) configs.set(opts.config.name, { name: opts.config.name, url: opts.config.url, filter: opts.config.filter, kind: 'rest' });
  if (opts.mqtt !== undefined && opts.mqtt !== null) configs.set(opts.mqtt.name, { ...opts.mqtt, kind: 'mqtt' });
  const names = new Set(await SyncState.connectors(store));
  for (const n of configs.keys()) names.add(n);
  const out: ConnectorBacklog[] = [];
  for (const name of [...names].sort()) {
    const state = new SyncState(store, name);
    await state.load();
    const config = configs.get(name);
    const configured = config !== undefined;
    let ids: string[];
    if (config !== undefined) {
      let matched: ReturnType<Model['query']> = [];
      try {
        matched = model.query(config.filter);
      } catch {
        matched = [];
      }
      ids = matched.filter((r) => r.has('point') && r.has('his')).map((r) => (r.get('id') as HRef).id);
    } else {
      ids = state.cursorIds().filter((id) => model.stored(id) !== undefined);
    }
    const perPoint: PointBacklog[] = [];
    for (const id of ids) perPoint.push(await pointBacklog(history, model, state, id, config?.kind ?? null));
    let samples = 0;
    let behind = 0;
    let oldest: number | null = null;
    for (const p of perPoint) {
      samples += p.samples;
      if (p.samples > 0) behind++;
      if (p.oldest !== null && (oldest === null || p.oldest < oldest)) oldest = p.oldest;
    }
    out.push({
      name,
      configured,
      kind: config?.kind ?? null,
      url: config?.url ?? null,
      points: ids.length,
      mapped: config?.kind === 'mqtt' ? null : ids.filter((id) => state.mapping(id) !== undefined).length,
      behind,
      samples,
      oldest,
      lastAck: state.info.lastAck,
      lastError: state.info.lastError,
      perPoint,
    });
  }
  return out;
}

function when(ms: number | null): string {
  return ms === null ? 'never' : new Date(ms).toISOString().replace('.000Z', 'Z');
}

/** The report as text for an operator: one block per connector, optionally a line per point behind. */
export function formatBacklog(report: readonly ConnectorBacklog[], perPoint = false): string {
  if (report.length === 0) return 'no uplink is configured (see the uplink and mqtt sections of the configuration) and none has left anything in the data folder\n';
  const n = groupThousands;
  const lines: string[] = [];
  for (const c of report) {
    lines.push(c.configured ? `connector ${c.name} -> ${c.url ?? ''}` : `connector ${c.name} (not in the configuration: only its cursors are left in the data folder)`);
    const mapped = c.mapped === null ? '' : `, ${n(c.mapped)} found upstream`;
    lines.push(`  points:   ${n(c.points)} ${c.configured ? (c.kind === 'mqtt' ? 'selected with history' : 'selected') : 'with a cursor'}${mapped}, ${n(c.behind)} behind`);
    lines.push(`  backlog:  ${n(c.samples)} samples${c.oldest === null ? '' : `; oldest not yet acknowledged ${when(c.oldest)}`}`);
    lines.push(`  last acknowledged ${c.kind === 'mqtt' ? 'by the broker' : 'batch'}: ${when(c.lastAck)}`);
    if (c.lastError !== null) lines.push(`  last error: ${c.lastError}`);
    if (perPoint) {
      for (const p of c.perPoint) {
        if (p.samples === 0) continue;
        lines.push(`    ${p.fqname ?? '@' + p.id}\t${n(p.samples)} samples from ${when(p.oldest)}; acknowledged up to ${when(p.cursor)}`);
      }
    }
  }
  return lines.join('\n') + '\n';
}
