/**
 * Commissioning ops (docs/drivers.md, "Commissioning"): `discover` finds BACnet devices,
 * `learn` lists what a connector's device holds as groups to drill into or point proposals ready
 * for createRec. The protocol work is the poller layer's Commissioning; this file checks the
 * request row and shapes the answers, whose columns the web console relies on.
 */
import { durationMs } from '../../haystack/duration.js';
import { HDict, HGrid, HNumber, HRef, type HVal } from '../../haystack/values.js';
import { ErrorCodes, HayloftError } from '../../lib/errors.js';
import type { Commissioning } from '../../poller/commission.js';
import { type Op, type OpRequest } from '../op.js';

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
    if (proto !== 'bacnet') throw bad(`proto must be the Str "bacnet"${typeof proto === 'string' ? ` (not "${proto}")` : ''}`);
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
    const rows = await (await service(req)).discover({
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
    if (!(ref instanceof HRef)) throw bad('connId must be a Ref to a connector (bacnetConn or modbusConn)');
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

export const commissionOps: readonly Op[] = [discoverOp, learnOp];
