/**
 * What an operator of fifty gateways sees of each from the Sparkplug host (issue 32): the node
 * figures the MQTT edge node publishes in its NBIRTH and, as they change, in NDATA. Gathered from
 * what the daemon already knows (its health report, the model, history's index) and from every
 * part that offers figures of its own (Part.nodeFigures: the seam for active alarms).
 *
 * Names are `Folder/Name`, as Ignition shows them as folders. Figures that move all the time are
 * coarsened so that NDATA goes when something an operator cares about changed: uptime in whole
 * minutes, bytes in whole MiB.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { NodeFigures, Part } from '../../lib/part.js';
import type { Model } from '../../model/model.js';
import type { HistoryStore } from '../../store/history.js';

/** What `/api/health` answers (App.health), as far as the figures read it. */
export interface HealthReport {
  ok: boolean;
  [detail: string]: unknown;
}

const MIB = 1024 * 1024;

/**
 * SHA-256 of the config file as read at start (the first 16 hex digits): gateways of a fleet that
 * share a config file show the same checksum, and one that drifted shows another. `none` without
 * a file (settings from the environment only).
 */
export function configChecksum(file: string | null): string {
  if (file === null) return 'none';
  try {
    return createHash('sha256').update(readFileSync(file)).digest('hex').slice(0, 16);
  } catch {
    return 'unreadable';
  }
}

export interface NodeFigureSources {
  version: string;
  checksum: string;
  health: () => Promise<HealthReport>;
  model: Model;
  history: HistoryStore;
  parts: () => readonly Part[];
}

function part(report: HealthReport, name: string): Record<string, unknown> {
  const parts = report.parts as Record<string, Record<string, unknown>> | undefined;
  return parts?.[name] ?? {};
}

/** The figures, as the edge node publishes them (it adds its own: backlog). */
export async function nodeFigures(s: NodeFigureSources): Promise<NodeFigures> {
  const h = await s.health();
  let down = 0;
  let fault = 0;
  for (const id of s.model.idsWithTag('point')) {
    const st = s.model.get(id)?.get('curStatus');
    if (st === 'down') down++;
    else if (st === 'fault') fault++;
  }
  let samples = 0;
  for (const id of s.history.points()) samples += s.history.stats(id).size;
  const free = part(h, 'disk').freeBytes;
  const storeBytes = (h.storage as Record<string, unknown> | undefined)?.sizeBytes;
  const out: NodeFigures = {
    'Properties/Version': { type: 'String', value: s.version },
    'Properties/Config Checksum': { type: 'String', value: s.checksum },
    'Status/Health': { type: 'String', value: typeof h.status === 'string' ? h.status : h.ok ? 'ok' : 'unavailable' },
    'Status/Uptime': { type: 'Int64', value: Math.floor(Number(h.uptimeSeconds ?? 0) / 60) * 60 },
    'Status/Clock': { type: 'String', value: typeof h.clockStatus === 'string' ? h.clockStatus : 'unknown' },
    'Storage/Free Bytes': { type: 'Int64', value: typeof free === 'number' ? Math.floor(free / MIB) * MIB : -1 },
    'Storage/Store Bytes': { type: 'Int64', value: typeof storeBytes === 'number' ? Math.floor(storeBytes / MIB) * MIB : -1 },
    'Storage/History Samples': { type: 'Int64', value: samples },
    'Points/Down': { type: 'Int64', value: down },
    'Points/Fault': { type: 'Int64', value: fault },
  };
  for (const p of s.parts()) if (p.nodeFigures !== undefined) Object.assign(out, p.nodeFigures());
  return out;
}
