/**
 * The ops of the standard Haystack 4 API at /haystack/ (docs/haystack4.md). Most are the WideSky
 * API's own op objects (read, hisRead, hisWrite, pointWrite, ops): the same model, gate, history
 * and writer code. What differs here is only what Haystack 4 answers differently:
 *
 * - `about` adds `haystackVersion`;
 * - `nav` (absent from WideSky): sites, then a site's equips and points, then an equip's points;
 * - watchSub/watchPoll answer whole records (in request order for watchSub) unless the request has
 *   `curValSub`, when they answer the WideSky rows (id, curVal, curStatus, curErr) as Haxall's
 *   connector asks; watchUnsub of an unknown watch is no error (Haxall does the same);
 * - `filetypes` and a minimal `defs`, for clients that probe for them;
 * - `close` ends the session of the request's authToken.
 */
import { HDict, HGrid, HRef, type HVal, MARKER } from '../../haystack/values.js';
import { ErrorCodes, HayloftError, isHayloftError } from '../../lib/errors.js';
import { quoteInput } from '../../lib/quote.js';
import type { Codec } from '../codecs.js';
import type { Op, OpRequest } from '../op.js';
import { aboutOp } from './about.js';
import { hisReadOp, hisWriteOp } from './his.js';
import { opsOp } from './ops.js';
import { pointWriteOp } from './point-write.js';
import { readOp } from './records.js';
import { watchPollOp, watchSubOp, watchUnsubOp } from './watch.js';

export const HAYSTACK_VERSION = '4.0';

/** `ver` of Haystack 4 grids is 3.0; the row adds the Haystack version to WideSky's about. */
export const about4Op: Op = {
  ...aboutOp,
  run(req) {
    const g = aboutOp.run(req) as HGrid;
    const row = (g.rows[0] as HDict).with({ haystackVersion: HAYSTACK_VERSION });
    return HGrid.fromRows([row], HDict.EMPTY, ['haystackVersion']);
  },
};

function bad(message: string): HayloftError {
  return new HayloftError(ErrorCodes.BAD_REQUEST, message);
}

/** Each record with `navId` (its id) when it has children to navigate to. */
function navRows(rows: readonly HDict[], withNavId: (rec: HDict) => boolean): HDict[] {
  return rows.map((r) => (withNavId(r) ? r.with({ navId: r.get('id') }) : r));
}

/**
 * `nav`: without navId, the sites (and equips and points that belong to no site); with a site's
 * navId its equips that are in no other equip, and its points in no equip; with an equip's, its
 * sub-equips and its points. Points are leaves (no navId) and carry their own tags (`point`,
 * `cur`, `his`, `writable`, `kind`, `unit`, `tz`), which is what Haxall's connector learns from.
 */
export const navOp: Op = {
  name: 'nav',
  summary: 'Navigate the site, equip and point tree (navId)',
  methods: ['GET', 'POST'],
  permission: 'MODEL_READ',
  run(req) {
    const { model } = req.ctx;
    const gate = req.gate;
    const nav = req.grid.rows[0]?.get('navId');
    const read = (filter: string): HDict[] => gate.read(model, filter, 0);
    let rows: HDict[];
    if (nav === undefined || nav === null) {
      rows = [...read('site'), ...read('equip and not siteRef and not equipRef'), ...read('point and not siteRef and not equipRef')];
    } else {
      const text = nav instanceof HRef ? nav.id : typeof nav === 'string' ? nav.replace(/^@/, '') : undefined;
      if (text === undefined) throw bad('navId must be a Ref or a Str, as a nav row gave it');
      const id = model.resolveId(text);
      const rec = id === undefined ? undefined : model.get(id);
      if (id === undefined || rec === undefined || !gate.readable(rec)) throw new HayloftError(ErrorCodes.NOT_FOUND, `nav: unknown navId ${quoteInput(text)}`);
      if (rec.has('site')) rows = [...read(`equip and siteRef == @${id} and not equipRef`), ...read(`point and siteRef == @${id} and not equipRef`)];
      else if (rec.has('equip')) rows = [...read(`equip and equipRef == @${id}`), ...read(`point and equipRef == @${id}`)];
      else rows = [];
    }
    return HGrid.fromRows(navRows(rows, (r) => r.has('site') || r.has('equip')), HDict.EMPTY, ['id', 'navId', 'dis']);
  },
};

/** A marker flag in meta: present and not false. */
function flag(meta: HDict, name: string): boolean {
  const v = meta.get(name);
  return v !== undefined && v !== false;
}

/** The watch rows as whole records: the record the caller may read, with the watch's cur tags. */
function wholeRecords(req: OpRequest, answer: HGrid, order: readonly (HVal | undefined)[] | undefined): HGrid {
  const { model } = req.ctx;
  const byId = new Map<string, HDict>();
  for (const r of answer.rows) byId.set((r.get('id') as HRef).id, r);
  const full = (id: string, watchRow: HDict | undefined): HDict => {
    const rec = model.get(id);
    if (rec === undefined || !req.gate.readable(rec)) return HDict.EMPTY;
    if (watchRow === undefined) return rec;
    return rec.with({ curVal: watchRow.get('curVal'), curStatus: watchRow.get('curStatus'), curErr: watchRow.get('curErr') });
  };
  let rows: HDict[];
  if (order === undefined) rows = answer.rows.map((r) => full((r.get('id') as HRef).id, r));
  else {
    rows = order.map((v) => {
      if (!(v instanceof HRef)) return HDict.EMPTY;
      const id = model.resolveId(v.id) ?? v.id;
      return full(id, byId.get(id) ?? byId.get(v.id));
    });
  }
  return HGrid.fromRows(rows, answer.meta, ['id']);
}

export const watchSub4Op: Op = {
  ...watchSubOp,
  run(req) {
    const answer = watchSubOp.run(req) as HGrid;
    if (flag(req.grid.meta, 'curValSub')) return answer;
    return wholeRecords(req, answer, req.grid.rows.map((r) => r.get('id')));
  },
};

export const watchPoll4Op: Op = {
  ...watchPollOp,
  run(req) {
    const answer = watchPollOp.run(req) as HGrid;
    if (flag(req.grid.meta, 'curValSub')) return answer;
    return wholeRecords(req, answer, undefined);
  },
};

export const watchUnsub4Op: Op = {
  ...watchUnsubOp,
  run(req) {
    try {
      return watchUnsubOp.run(req);
    } catch (e) {
      // Closing a watch that is gone already is what the client wanted.
      if (isHayloftError(e, ErrorCodes.WATCH_NOT_FOUND)) return HGrid.empty();
      throw e;
    }
  },
};

/**
 * `filetypes`: the formats of /haystack/. Hayloft's values have no Symbol, so `def` is the
 * symbol's name as a Str (docs/haystack4.md, "Limits").
 */
export function filetypesOp(codecs: readonly Codec[]): Op {
  const names: Record<string, string> = { 'text/zinc': 'zinc', 'application/json': 'json', 'text/csv': 'csv' };
  return {
    name: 'filetypes',
    summary: 'File types (formats) the server reads and writes',
    methods: ['GET', 'POST'],
    run() {
      const rows = codecs
        .filter((c) => c.listed && names[c.mime] !== undefined)
        .map((c) =>
          HDict.of({
            def: `filetype:${names[c.mime] as string}`,
            filetype: MARKER,
            mime: c.mime,
            read: c.read === undefined ? null : MARKER,
            write: c.write === undefined ? null : MARKER,
          }),
        );
      return HGrid.fromRows(rows, HDict.EMPTY, ['def', 'mime']);
    },
  };
}

/** `defs`, minimal: a lib, the ops served and the filetypes, so clients that probe get an answer. */
export function defsOp(filetypes: Op): Op {
  return {
    name: 'defs',
    summary: 'The definitions the server knows (minimal: its lib, ops and filetypes)',
    methods: ['GET', 'POST'],
    run(req) {
      const ops = opsOp.run(req) as HGrid;
      const rows = [
        HDict.of({ def: 'lib:hayloft', lib: MARKER, doc: 'Hayloft edge server' }),
        ...ops.rows.map((r) => HDict.of({ def: `op:${String(r.get('name'))}`, is: Object.freeze(['op']), doc: r.get('summary') ?? null })),
        ...(filetypes.run(req) as HGrid).rows.map((r) => HDict.of({ def: r.get('def'), is: Object.freeze(['filetype']), mime: r.get('mime') })),
      ];
      return HGrid.fromRows(rows, HDict.EMPTY, ['def']);
    },
  };
}

/** `close`: ends the session of the request's authToken (the Haystack 4 logout). */
export function closeOp(endSession: (sid: string) => Promise<void>): Op {
  return {
    name: 'close',
    summary: 'Log out: the authToken of this request stops working',
    methods: ['GET', 'POST'],
    async run(req) {
      const sid = req.gate.principal.sid;
      if (sid !== '') await endSession(sid);
      return HGrid.empty();
    },
  };
}

/** The ops of /haystack/, in the order `ops` lists them. */
export function haystack4Ops(codecs: readonly Codec[], endSession: (sid: string) => Promise<void>): Op[] {
  const filetypes = filetypesOp(codecs);
  return [
    about4Op,
    opsOp,
    filetypes,
    defsOp(filetypes),
    readOp,
    navOp,
    watchSub4Op,
    watchUnsub4Op,
    watchPoll4Op,
    pointWriteOp,
    hisReadOp,
    hisWriteOp,
    closeOp(endSession),
  ];
}
