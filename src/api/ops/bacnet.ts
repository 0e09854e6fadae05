/**
 * The `bacnetObjects` op (docs/bacnet-device.md "In the console"): Hayloft's BACnet device and
 * the objects it shows, each with its point, object type and instance, objectName, presentValue
 * and status flags now, and for commandable objects the priority in effect. The caller sees the
 * objects of the points it may read. Without a `bacnetDevice` section: no rows, `enabled` false.
 */
import { HDict, HGrid, HNumber, HRef, newRecord } from '../../haystack/values.js';
import { ErrorCodes, HayloftError } from '../../lib/errors.js';
import type { BacnetObjectListing, Op, OpRequest } from '../op.js';

const COLS = ['id', 'objectType', 'objectInstance', 'objectName', 'commandable', 'presentValue', 'stateText', 'fault', 'outOfService', 'overridden', 'priority', 'curStatus'];

function row(req: OpRequest, o: BacnetObjectListing): HDict {
  const m = req.ctx.model;
  const d = newRecord();
  d.id = new HRef(o.pointId, m.displayOf(o.pointId));
  d.objectType = o.objectType;
  d.objectInstance = new HNumber(o.instance);
  d.objectName = o.name;
  d.commandable = o.commandable;
  if (o.presentValue !== null) d.presentValue = o.objectType.startsWith('analog') ? new HNumber(o.presentValue, o.unit) : new HNumber(o.presentValue);
  if (o.stateText !== null) d.stateText = o.stateText;
  d.fault = o.fault;
  d.outOfService = o.outOfService;
  d.overridden = o.overridden;
  if (o.priority !== null) d.priority = new HNumber(o.priority);
  const st = m.liveTags(o.pointId)?.curStatus;
  if (typeof st === 'string') d.curStatus = st;
  return HDict.adopt(d);
}

export const bacnetObjectsOp: Op = {
  name: 'bacnetObjects',
  summary: "Hayloft's BACnet device: its objects with type, instance, name, present value and status flags",
  methods: ['GET', 'POST'],
  permission: 'MODEL_READ',
  run(req) {
    const get = req.ctx.bacnetDevice;
    if (get === undefined) throw new HayloftError(ErrorCodes.UNKNOWN_OP, 'this server has no BACnet device');
    const dev = get();
    if (dev === null) return HGrid.fromRows([], HDict.of({ enabled: false }), COLS);
    const rows: HDict[] = [];
    for (const o of dev.objects) {
      const rec = req.ctx.model.get(o.pointId);
      if (rec !== undefined && req.gate.readable(rec)) rows.push(row(req, o));
    }
    const meta = HDict.of({
      enabled: true,
      deviceInstance: new HNumber(dev.instance),
      deviceName: dev.name,
      interface: dev.interface,
      port: new HNumber(dev.port),
      objects: new HNumber(dev.objects.length),
      skipped: new HNumber(dev.skipped),
    });
    return HGrid.fromRows(rows, meta, COLS);
  },
};

export const bacnetOps: readonly Op[] = [bacnetObjectsOp];
