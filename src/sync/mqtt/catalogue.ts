/**
 * What the edge node publishes, built from the model: the selected points grouped into Sparkplug
 * devices (by equip, by site, or one device), each point a metric with a name unique in its
 * device, an alias unique in the edge node, a datatype and its properties.
 *
 * Aliases are kept for the life of the process (a point keeps its alias across rebirths): hosts
 * re-learn them from every birth anyway, but stable numbers make captures easier to read.
 */
import type { DeviceBy } from '../../config/mqtt.js';
import { HRef, type HDict } from '../../haystack/values.js';
import type { Model } from '../../model/model.js';
import { type SparkplugType, datatypeOf, deviceIdOf } from './sparkplug.js';

export interface MetricDef {
  pointId: string;
  /** Metric name, unique in its device. */
  name: string;
  alias: number;
  type: SparkplugType;
  unit: string | null;
  dis: string | null;
  writable: boolean;
  /** Samples come from the history store (store and forward). */
  his: boolean;
  /**
   * Live data is the point's curVal as it changes (report by exception): points without `his`,
   * and points a driver feeds (their history is sampled from curVal, so the live stream carries
   * curVal and history fills outages). Points with `his` and no driver (fed by hisWrite) publish
   * their samples as written instead.
   */
  live: boolean;
  device: string;
}

export interface Device {
  id: string;
  metrics: MetricDef[];
}

export interface Catalogue {
  devices: Map<string, Device>;
  byPoint: Map<string, MetricDef>;
  /** Points the filter selected that cannot be published, with why (logged once per build). */
  skipped: { id: string; why: string }[];
}

const UNGROUPED = 'ungrouped';

function label(rec: HDict | undefined, id: string): string {
  const n = rec?.get('name') ?? rec?.get('navName') ?? rec?.get('dis');
  return typeof n === 'string' && n !== '' ? n : id;
}

/** Builds the catalogue; `aliases` (point id -> alias) is kept and extended across builds. */
export function buildCatalogue(opts: { model: Model; filter: string; deviceBy: DeviceBy; edgeNodeId: string; aliases: Map<string, number>; fedByDriver?: (rec: HDict) => boolean }): Catalogue {
  const { model, aliases } = opts;
  const devices = new Map<string, Device>();
  const byPoint = new Map<string, MetricDef>();
  const skipped: { id: string; why: string }[] = [];
  // The record a device stands for (equip or site id, or '' for none) -> its Sparkplug id.
  const deviceOfRef = new Map<string, string>();
  const taken = new Set<string>();
  let nextAlias = 1;
  for (const a of aliases.values()) if (a >= nextAlias) nextAlias = a + 1;
  const recs = model.query(opts.filter).filter((r) => r.has('point'));
  // Stable order: devices and metrics come out the same at every build.
  recs.sort((a, b) => ((a.get('id') as HRef).id < (b.get('id') as HRef).id ? -1 : 1));
  for (const view of recs) {
    const id = (view.get('id') as HRef).id;
    const rec = model.stored(id);
    if (rec === undefined) continue;
    const type = datatypeOf(rec.get('kind'));
    if (type === undefined) {
      skipped.push({ id, why: 'kind is not Number, Bool or Str' });
      continue;
    }
    let ref = '';
    if (opts.deviceBy !== 'none') {
      const r = rec.get(opts.deviceBy === 'equip' ? 'equipRef' : 'siteRef');
      ref = r instanceof HRef ? r.id : UNGROUPED;
    }
    let device = deviceOfRef.get(ref);
    if (device === undefined) {
      const base = ref === '' ? deviceIdOf(opts.edgeNodeId) : ref === UNGROUPED ? UNGROUPED : deviceIdOf(label(model.stored(ref), ref));
      device = taken.has(base) ? `${base}_${deviceIdOf(ref)}` : base;
      taken.add(device);
      deviceOfRef.set(ref, device);
      devices.set(device, { id: device, metrics: [] });
    }
    const d = devices.get(device) as Device;
    let name = label(rec, id);
    if (d.metrics.some((m) => m.name === name)) name = `${name}~${id}`;
    let alias = aliases.get(id);
    if (alias === undefined) aliases.set(id, (alias = nextAlias++));
    const unit = rec.get('unit');
    const dis = rec.get('dis');
    const m: MetricDef = {
      pointId: id,
      name,
      alias,
      type,
      unit: typeof unit === 'string' ? unit : null,
      dis: typeof dis === 'string' ? dis : null,
      writable: rec.has('writable'),
      his: rec.has('his'),
      live: !rec.has('his') || opts.fedByDriver?.(rec) === true,
      device,
    };
    d.metrics.push(m);
    byPoint.set(id, m);
  }
  return { devices, byPoint, skipped };
}
