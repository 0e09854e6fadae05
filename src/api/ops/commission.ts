/**
 * Commissioning ops (docs/drivers.md, "Commissioning"): `discover` finds devices (BACnet),
 * `learn` lists what a connector's device holds as groups to drill into or point proposals ready
 * for createRec, `drivers` lists the protocol drivers, their tags and what they support (the
 * console learns connector kinds from it). The protocol work is each driver's, reached through
 * the poller layer's Commissioning; this file checks the request row and shapes the answers,
 * whose columns the web console relies on.
 */
import { durationMs } from '../../haystack/duration.js';
import { HDict, HGrid, HNumber, HRef, type HVal, MARKER } from '../../haystack/values.js';
import { ErrorCodes, HayloftError } from '../../lib/errors.js';
import type { Commissioning } from '../../poller/commission.js';
import { type DriverListing, type Op, type OpRequest } from '../op.js';

const DISCOVER_COLS = ['dis', 'uri', 'bacnetDevice', 'vendorName', 'modelName', 'segmentation', 'maxApdu', 'connRef'];
const MAX_INSTANCE = 4194303;
const DEFAULT_TIMEOUT_MS = 3000;
const MAX_TIMEOUT_MS = 60_000;

function bad(message: string): HayloftError {
  return new HayloftError(ErrorCodes.BAD_REQUEST, message);
}

function service(req: OpRequest): Promise<Commissioning> {
  const c = req.ctx.commission;
  if (c === undefined) throw new HayloftError(ErrorCodes.CANNOT_LEARN, `${req.op} needs the drivers, which run only while Hayloft serves`);
  return c();
}

/** The drivers that have a feature, in registration order. */
function having(req: OpRequest, feature: string): readonly DriverListing[] {
  return (req.ctx.drivers ?? []).filter((d) => d.features[feature] === true);
}

function oneRow(req: OpRequest): HDict {
  if (req.grid.rows.length !== 1) throw bad(`${req.op} takes one request row (got ${req.grid.rows.length})`);
  return req.grid.rows[0] as HDict;
}

function instanceOf(row: HDict, tag: string): number | undefined {
  const v = row.get(tag);
  if (v === undefined) return undefined;
  if (!(v instanceof HNumber) || !Number.isInteger(v.val) || v.val < 0 || v.val > MAX_INSTANCE) throw bad(`${tag} must be a device instance, a whole Number from 0 to ${MAX_INSTANCE}`);
  return v.val;
}

/** `host[:port]` as the BACnet library addresses it (`host:port`). */
function addressOf(v: HVal | undefined): string | undefined {
  if (v === undefined) return undefined;
  const m = typeof v === 'string' ? /^([A-Za-z0-9][A-Za-z0-9.-]*)(?::(\d{1,5}))?$/.exec(v.trim()) : null;
  const port = m?.[2] === undefined ? 47808 : Number(m[2]);
  if (m === null || port < 1 || port > 65535) throw bad('address must be a Str host[:port], e.g. "192.168.1.255" or "10.2.0.1:47809"');
  return `${m[1] as string}:${port}`;
}

export const discoverOp: Op = {
  name: 'discover',
  summary: 'Find devices on the network (BACnet Who-Is)',
  methods: ['POST'],
  permission: 'MODEL_CREATE',
  async run(req) {
    const row = oneRow(req);
    const proto = row.get('proto');
    const protos = having(req, 'discover').map((d) => d.name);
    if (typeof proto !== 'string' || !protos.includes(proto)) {
      throw bad(`proto must be the Str ${protos.map((p) => `"${p}"`).join(' or ') || 'of a driver that discovers (this server has none)'}${typeof proto === 'string' ? ` (not "${proto}")` : ''}`);
    }
    const low = instanceOf(row, 'low');
    const high = instanceOf(row, 'high');
    if (low !== undefined && high !== undefined && low > high) throw bad(`low (${low}) is above high (${high})`);
    let timeoutMs = DEFAULT_TIMEOUT_MS;
    if (row.has('timeout')) {
      const ms = durationMs(row.get('timeout'));
      if (typeof ms === 'string') throw bad(`timeout ${ms}`);
      if (ms > MAX_TIMEOUT_MS) throw bad(`timeout is at most ${MAX_TIMEOUT_MS / 1000} s`);
      timeoutMs = ms;
    }
    const address = addressOf(row.get('address'));
    const rows = await (await service(req)).discover(proto, {
      timeoutMs,
      ...(address === undefined ? {} : { address }),
      ...(low === undefined ? {} : { low }),
      ...(high === undefined ? {} : { high }),
    });
    return HGrid.fromRows(rows, HDict.EMPTY, DISCOVER_COLS);
  },
};

export const learnOp: Op = {
  name: 'learn',
  summary: 'List the points a connector\'s device offers, as groups or createRec proposals',
  methods: ['POST'],
  permission: 'MODEL_CREATE',
  async run(req) {
    const row = oneRow(req);
    const ref = row.get('connId');
    if (!(ref instanceof HRef)) throw bad(`connId must be a Ref to a connector (${having(req, 'learn').map((d) => d.connTag).join(' or ')})`);
    const id = req.ctx.model.resolveId(ref.id);
    const rec = id === undefined ? undefined : req.ctx.model.get(id);
    if (id === undefined || rec === undefined) throw new HayloftError(ErrorCodes.NOT_FOUND, `connId @${ref.id}: no such record`);
    req.gate.require('MODEL_READ', `learn of @${ref.id}`, rec);
    const arg = row.get('arg');
    if (arg !== undefined && typeof arg !== 'string') throw bad('arg must be a Str: the `learn` value of a group row');
    const rows = await (await service(req)).learn(id, arg);
    return HGrid.fromRows(rows, HDict.EMPTY, rows.length > 0 && rows[0]?.has('learn') === true ? ['dis', 'learn'] : ['dis', 'name']);
  },
};

const DRIVER_COLS = ['name', 'dis', 'connTag', 'refTag', 'curTag', 'writeTag', 'features'];

export const driversOp: Op = {
  name: 'drivers',
  summary: 'The protocol drivers: their connector and point tags and what they support',
  methods: ['GET', 'POST'],
  run(req) {
    const rows = (req.ctx.drivers ?? []).map((d) => {
      const row: Record<string, HVal> = { name: d.name, dis: d.dis, connTag: d.connTag, refTag: d.refTag, curTag: d.curTag };
      if (d.writeTag !== undefined) row.writeTag = d.writeTag;
      // Markers in a dict, as Haystack says what something supports: `{cur, write, learn}`.
      row.features = HDict.of(Object.fromEntries(Object.entries(d.features).filter(([, on]) => on).map(([f]) => [f, MARKER])));
      return HDict.of(row);
    });
    return HGrid.fromRows(rows, HDict.EMPTY, DRIVER_COLS);
  },
};

export const commissionOps: readonly Op[] = [discoverOp, learnOp, driversOp];
