/**
 * `ops` (docs/spec/interface.md, GET /api/ops): one row per op the server was given. The list reaches the
 * op through its context: the server hands ops a copy of the OpContext it was given with `ops`
 * added (withOpList), so the listing is whatever the app composed, record ops included, without
 * a registry living in a module.
 */
import { HDict, HGrid } from '../../haystack/values.js';
import { ErrorCodes, HayloftError } from '../../lib/errors.js';
import type { Op, OpContext } from '../op.js';

/** What the listing needs of each op. */
export type OpListing = Pick<Op, 'name' | 'summary' | 'methods'>;

/** The context the server passes to ops: the given one plus the server's op list. */
export interface ServedOpContext extends OpContext {
  readonly ops: readonly OpListing[];
}

/**
 * The context with the op list added. A shallow copy: OpContext is plain data (services and
 * info), and a copy keeps the caller's object untouched.
 */
export function withOpList(ctx: OpContext, ops: readonly Op[]): ServedOpContext {
  return Object.freeze({ ...ctx, ops: Object.freeze(ops.map((o) => ({ name: o.name, summary: o.summary, methods: o.methods }))) });
}

export const opsOp: Op = {
  name: 'ops',
  summary: 'Operations the server supports',
  methods: ['GET', 'POST'],
  run({ ctx }) {
    const list = (ctx as Partial<ServedOpContext>).ops;
    if (list === undefined) throw new HayloftError(ErrorCodes.INTERNAL, 'ops: the server did not pass its op list (use createApiServer)');
    return HGrid.fromRows(
      list.map((o) => HDict.of({ name: o.name, summary: o.summary })),
      HDict.EMPTY,
      ['name', 'summary'],
    );
  },
};
