/**
 * Issue 3, end to end: the record ops (read, createRec, updateRec, deleteRec) and the info ops
 * through real HTTP against the real App on LevelDB (test/helpers/app.ts). Nothing here reaches
 * into the server's internals: every record is created, read, changed and deleted over the wire,
 * and every effect (or the absence of one, for all-or-nothing) is checked by reading back.
 */
import t, { type Test } from 'tap';
import { HDict, type HGrid, HNumber, HRef, type HVal, MARKER, REMOVE } from '../../src/haystack/values.js';
import { readZinc, zincVal } from '../../src/haystack/zinc.js';
import { ErrorCodes } from '../../src/lib/errors.js';
import { type Running, startApp } from '../helpers/app.js';
import { type Answer, type CallOptions, errOf, getGrid, gridOf, postGrid, request } from '../helpers/http.js';

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

type Rows = Readonly<Record<string, HVal>> | readonly Readonly<Record<string, HVal>>[];

/** Asserts a 200 answer with a grid and returns the grid. */
function ok(t: Tap, a: Answer, what: string): HGrid {
  t.equal(a.status, 200, `${what}: 200${a.status === 200 ? '' : ` (got ${a.status}: ${a.text.slice(0, 300)})`}`);
  t.ok(a.grid, `${what}: a grid`);
  return a.grid as HGrid;
}

type Tap = Test;

/**
 * Asserts an error answer: the status, an error grid (meta err + dis) with the code, and a
 * message matching `dis` when given.
 */
function failed(t: Tap, a: Answer, status: number, code: string, dis?: RegExp, what = ''): void {
  const p = what === '' ? '' : `${what}: `;
  t.equal(a.status, status, `${p}status ${status}`);
  const e = errOf(a);
  t.ok(e, `${p}an error grid (meta err)`);
  t.equal(a.grid?.meta.get('err'), MARKER, `${p}err is a Marker`);
  t.equal(e?.code, code, `${p}errCode ${code}`);
  t.ok((e?.dis.length ?? 0) > 10, `${p}a message a person can read: ${e?.dis ?? ''}`);
  if (dis !== undefined) t.match(e?.dis, dis, `${p}the message says what is wrong`);
  t.equal(a.grid?.size, 0, `${p}no rows`);
}

function idOf(row: HDict | undefined): string {
  const r = row?.get('id');
  if (!(r instanceof HRef)) throw new Error(`row has no id: ${String(row)}`);
  return r.id;
}

/** A small session over one running app: every call carries the admin's token. */
function client(r: Running) {
  const opts = (o: CallOptions = {}): CallOptions => ({ ...o, headers: { ...r.auth, ...(o.headers ?? {}) } });
  return {
    post: (op: string, rows: Rows, o: CallOptions = {}, meta: Readonly<Record<string, HVal>> = {}) => postGrid(r.base, op, gridOf(rows, meta), opts(o)),
    postGrid: (op: string, g: HGrid, o: CallOptions = {}) => postGrid(r.base, op, g, opts(o)),
    get: (op: string, params: Readonly<Record<string, HVal>> = {}, o: CallOptions = {}) => getGrid(r.base, op, params, opts(o)),
    raw: (path: string, init: { method?: string; headers?: Record<string, string>; body?: string | Uint8Array } = {}) =>
      request(r.base, path, { ...init, headers: { ...r.auth, ...(init.headers ?? {}) } }),
    /** Records matching a filter, read back over HTTP. */
    async find(filter: string): Promise<HDict[]> {
      const a = await postGrid(r.base, 'read', gridOf({ filter }), opts());
      if (a.status !== 200 || a.grid === undefined) throw new Error(`read ${filter}: ${a.status} ${a.text}`);
      return [...a.grid.rows];
    },
    /** One record by id or fully qualified name; undefined when read gives a null row. */
    async byId(id: string): Promise<HDict | undefined> {
      const a = await postGrid(r.base, 'read', gridOf({ id: HRef.of(id) }), opts());
      if (a.status !== 200 || a.grid === undefined) throw new Error(`read @${id}: ${a.status} ${a.text}`);
      const row = a.grid.first();
      return row === undefined || row.isEmpty() ? undefined : row;
    },
  };
}

type Client = ReturnType<typeof client>;

/** A site with two equips and points under them, created in one request through fqnames. */
async function seed(t: Tap, c: Client): Promise<Record<string, string>> {
  const a = await c.post('createRec', [
    { site: MARKER, name: 'hq', dis: 'Head office', area: HNumber.of(1200, 'm²'), tz: 'UTC' },
    { site: MARKER, name: 'depot', dis: 'Depot', area: HNumber.of(300, 'm²') },
    { equip: MARKER, name: 'ahu1', dis: 'AHU 1', siteRef: HRef.of('hq') },
    { equip: MARKER, name: 'ahu2', dis: 'AHU 2', siteRef: HRef.of('hq') },
    { point: MARKER, name: 'sat', dis: 'Supply air temp', his: MARKER, kind: 'Number', siteRef: HRef.of('hq'), equipRef: HRef.of('hq.ahu1') },
    { point: MARKER, name: 'rat', dis: 'Return air temp', kind: 'Number', siteRef: HRef.of('hq'), equipRef: HRef.of('hq.ahu1') },
    { point: MARKER, name: 'sat', dis: 'Supply air temp 2', kind: 'Number', siteRef: HRef.of('hq'), equipRef: HRef.of('hq.ahu2') },
  ]);
  const g = ok(t, a, 'seed createRec');
  const names = ['hq', 'depot', 'hq.ahu1', 'hq.ahu2', 'hq.ahu1.sat', 'hq.ahu1.rat', 'hq.ahu2.sat'];
  const out: Record<string, string> = {};
  names.forEach((n, i) => (out[n] = idOf(g.rows[i])));
  return out;
}

t.test('about, ops and formats: authenticated, and answering', async (t) => {
  const r = await startApp(t);
  const c = client(r);
  for (const op of ['about', 'ops', 'formats']) {
    const anon = await getGrid(r.base, op);
    failed(t, anon, 401, ErrorCodes.UNAUTHORIZED, /Authorization: Bearer/, `${op} without a token`);
    t.equal(anon.headers.get('www-authenticate'), 'Bearer', `${op}: 401 challenges with Bearer`);
  }
  const about = ok(t, await c.get('about'), 'about').first() as HDict;
  t.equal(about.get('productName'), 'Hayloft');
  t.equal(about.get('tz'), 'UTC');
  t.ok(about.has('serverTime') && about.has('serverBootTime') && about.has('productVersion'));

  const ops = ok(t, await c.get('ops'), 'ops');
  t.same(ops.colNames(), ['name', 'summary']);
  const names = ops.rows.map((x) => x.get('name'));
  for (const n of ['about', 'ops', 'formats', 'read', 'createRec', 'updateRec', 'deleteRec']) t.ok(names.includes(n), `ops lists ${n}`);
  t.ok(ops.rows.every((x) => typeof x.get('summary') === 'string' && (x.get('summary') as string).length > 0), 'every op has a summary');

  const formats = ok(t, await c.get('formats'), 'formats');
  const byMime = new Map(formats.rows.map((x) => [x.get('mime'), x]));
  for (const m of ['text/plain', 'text/zinc', 'application/json']) {
    t.equal(byMime.get(m)?.get('read'), MARKER, `${m} is read`);
    t.equal(byMime.get(m)?.get('write'), MARKER, `${m} is written`);
  }
  t.equal(byMime.get('text/csv')?.get('write'), MARKER, 'CSV is written');
  t.notOk(byMime.get('text/csv')?.has('read'), 'CSV is not read');
});

t.test('createRec', async (t) => {
  const r = await startApp(t);
  const c = client(r);

  t.test('generated UUIDs, returned Refs carry the name, rows in request order', async (t) => {
    const g = ok(t, await c.post('createRec', [{ site: MARKER, name: 'alpha', dis: 'Alpha site' }, { site: MARKER, dis: 'No name' }]), 'create');
    t.equal(g.size, 2);
    t.equal(g.colNames()[0], 'id', 'id comes first');
    const [a, b] = g.rows;
    const ra = a?.get('id') as HRef;
    t.match(ra.id, UUID_V4, 'a generated UUID v4');
    t.equal(ra.dis, 'alpha', 'the returned Ref carries the name as display');
    t.equal(a?.get('dis'), 'Alpha site');
    t.equal(a?.get('site'), MARKER);
    const rb = b?.get('id') as HRef;
    t.match(rb.id, UUID_V4);
    t.not(rb.id, ra.id, 'ids differ');
    t.equal(rb.dis, 'No name', 'without a name the Ref shows dis');
    t.ok(a?.has('mod'), 'mod is set');
    // Read back: the same record.
    const back = await c.byId(ra.id);
    t.equal(back?.get('dis'), 'Alpha site');
    t.equal((back?.get('id') as HRef).dis, 'alpha');
  });

  t.test('supplied ids are kept', async (t) => {
    const g = ok(t, await c.post('createRec', { id: HRef.of('my-site-01'), site: MARKER, name: 'beta' }), 'create');
    t.equal(idOf(g.first()), 'my-site-01');
    t.equal((g.first()?.get('id') as HRef).dis, 'beta');
    t.equal((await c.byId('my-site-01'))?.get('name'), 'beta');
    // The same id again: a conflict, and nothing is created.
    const again = await c.post('createRec', { id: HRef.of('my-site-01'), site: MARKER, name: 'gamma' });
    failed(t, again, 400, ErrorCodes.CONFLICT, /my-site-01.*already exists/);
    t.same(await c.find('name=="gamma"'), []);
  });

  t.test('refs by fully qualified name, rows referencing earlier rows of the same request', async (t) => {
    const ids = await seed(t, c);
    const ahu1 = await c.byId(ids['hq.ahu1'] as string);
    const siteRef = ahu1?.get('siteRef') as HRef;
    t.equal(siteRef.id, ids.hq, 'siteRef given as @hq is stored as the site id');
    t.equal(siteRef.dis, 'hq', 'and shown with the site name');
    const sat = await c.byId('hq.ahu1.sat');
    t.equal(idOf(sat), ids['hq.ahu1.sat'], 'the point is found by its fully qualified name');
    t.equal((sat?.get('equipRef') as HRef).id, ids['hq.ahu1']);
    t.equal((sat?.get('equipRef') as HRef).dis, 'ahu1');
    t.equal(idOf(await c.byId('hq.ahu2.sat')), ids['hq.ahu2.sat'], 'same name under another parent is another record');
    // A ref to a record created later in the same request does not resolve yet: refused whole.
    const fwd = await c.post('createRec', [
      { equip: MARKER, name: 'early', siteRef: HRef.of('later') },
      { site: MARKER, name: 'later' },
    ]);
    failed(t, fwd, 400, ErrorCodes.INVALID_RECORD, /row 0: siteRef @later does not exist/);
    t.same(await c.find('name=="later" or name=="early"'), [], 'nothing of it was created');
    // Supplied ids referenced by later rows.
    const g = ok(
      t,
      await c.post('createRec', [
        { id: HRef.of('s-x'), site: MARKER, name: 'sx' },
        { id: HRef.of('e-x'), equip: MARKER, siteRef: HRef.of('s-x'), name: 'ex' },
        { point: MARKER, equipRef: HRef.of('e-x'), siteRef: HRef.of('sx'), name: 'px' },
      ]),
      'create by supplied ids',
    );
    t.equal((g.rows[1]?.get('siteRef') as HRef).dis, 'sx', 'the new site shows its name in the Ref');
    t.equal(idOf(await c.byId('sx.ex.px')), idOf(g.rows[2]));
  });

  t.test('errors: status, error grid, code, and nothing created', async (t) => {
    const before = (await c.find('id')).length;
    const cases: [string, Rows, string, RegExp][] = [
      ['no primary marker', { dis: 'nothing' }, ErrorCodes.INVALID_RECORD, /primary marker.*none given/],
      ['two primary markers', { site: MARKER, equip: MARKER }, ErrorCodes.INVALID_RECORD, /exactly one primary marker.*site, equip/],
      ['a primary marker that is not a Marker', { site: 'yes' }, ErrorCodes.INVALID_RECORD, /"site" must be a Marker/],
      ['a name with a dot', { site: MARKER, name: 'a.b' }, ErrorCodes.INVALID_RECORD, /name "a\.b".*no dots/],
      ['a name with a space', { site: MARKER, name: 'a b' }, ErrorCodes.INVALID_RECORD, /name "a b"/],
      ['a name that is not a Str', { site: MARKER, name: HNumber.of(3) }, ErrorCodes.INVALID_RECORD, /name must be a Str/],
      ['a dangling ref', { equip: MARKER, siteRef: HRef.of('nowhere') }, ErrorCodes.INVALID_RECORD, /siteRef @nowhere does not exist/],
      ['siteRef to a non-site', { equip: MARKER, siteRef: HRef.of('hq.ahu1') }, ErrorCodes.INVALID_RECORD, /siteRef .* is not a site/],
      ['a name taken by a sibling', { site: MARKER, name: 'hq' }, ErrorCodes.CONFLICT, /name "hq" is already used at the top level/],
      ['id not a Ref', { id: 'text', site: MARKER }, ErrorCodes.INVALID_RECORD, /id must be a Ref/],
      ['no rows', [], ErrorCodes.BAD_REQUEST, /createRec needs at least one row/],
      // The bad row is the last: the good rows before it must not be kept.
      [
        'good rows then a bad one',
        [
          { site: MARKER, name: 'keep-not-1' },
          { equip: MARKER, name: 'keep-not-2', siteRef: HRef.of('keep-not-1') },
          { equip: MARKER, name: 'x', siteRef: HRef.of('missing') },
        ],
        ErrorCodes.INVALID_RECORD,
        /row 2: siteRef @missing does not exist/,
      ],
      [
        'two rows with the same name',
        [
          { site: MARKER, name: 'twin' },
          { site: MARKER, name: 'twin' },
        ],
        ErrorCodes.CONFLICT,
        /row 1: name "twin" is already used/,
      ],
    ];
    for (const [what, rows, code, dis] of cases) failed(t, await c.post('createRec', rows), 400, code, dis, what);
    t.equal((await c.find('id')).length, before, 'no record was created by any failed request');
    t.same(await c.find('name=="keep-not-1" or name=="keep-not-2" or name=="twin"'), []);
  });
});

t.test('read', async (t) => {
  const r = await startApp(t);
  const c = client(r);
  const ids = await seed(t, c);

  t.test('by filter, with limit; limit 0 or absent is no limit', async (t) => {
    t.equal(ok(t, await c.post('read', { filter: 'point' }), 'all points').size, 3);
    t.equal(ok(t, await c.post('read', { filter: 'point', limit: HNumber.of(2) }), 'limit 2').size, 2);
    t.equal(ok(t, await c.post('read', { filter: 'point', limit: HNumber.of(0) }), 'limit n:0').size, 3, 'n:0 (the WideSky default) is no limit');
    t.equal(ok(t, await c.post('read', { filter: 'point', limit: HNumber.of(50) }), 'limit 50').size, 3);
    const raw = await c.raw('/api/read', {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify({ meta: { ver: '3.0' }, cols: [{ name: 'filter' }, { name: 'limit' }], rows: [{ filter: 's:point and his', limit: 'n:0' }] }),
    });
    t.equal(ok(t, raw, 'as WideSky sends it').size, 1);
    const sites = ok(t, await c.post('read', { filter: 'site and area > 1000m²' }), 'compare with unit');
    t.same(sites.rows.map((x) => x.get('name')), ['hq']);
    const re = ok(t, await c.post('read', { filter: 'dis =~ /^AHU/' }), 'regex');
    t.same(re.rows.map((x) => x.get('name')).sort(), ['ahu1', 'ahu2']);
    const path = ok(t, await c.post('read', { filter: 'point and equipRef->dis == "AHU 2"' }), 'path through a ref');
    t.same(path.rows.map(idOf), [ids['hq.ahu2.sat']]);
    const byIdFilter = ok(t, await c.post('read', { filter: `id==@${ids.hq as string}` }), 'id == @x');
    t.same(byIdFilter.rows.map(idOf), [ids.hq], 'a filter on id finds the record itself');
    t.same(ok(t, await c.post('read', { filter: `site and id==@${ids.depot as string}` }), 'site and id == @x').rows.map(idOf), [ids.depot]);
    t.equal(ok(t, await c.post('read', { filter: 'id==@no-such' }), 'id == unknown').size, 0);
    const refEq = ok(t, await c.post('read', { filter: `equipRef==@${ids['hq.ahu1'] as string}` }), 'equipRef == @x');
    t.same(refEq.rows.map(idOf).sort(), [ids['hq.ahu1.sat'], ids['hq.ahu1.rat']].sort());
    const none = ok(t, await c.post('read', { filter: 'weatherStation' }), 'nothing matches');
    t.equal(none.size, 0);
    t.same(none.colNames(), ['empty'], 'an empty grid');
    const row = (await c.byId(ids['hq.ahu1.sat'] as string)) as HDict;
    t.equal((row.get('siteRef') as HRef).dis, 'hq', 'read answers Refs with the target name');
  });

  t.test('by id: rows in request order; unknown id gives an all-null row', async (t) => {
    const g = ok(
      t,
      await c.post('read', [{ id: HRef.of(ids['hq.ahu2'] as string) }, { id: HRef.of('no-such-id') }, { id: HRef.of(ids.hq as string) }, { id: HRef.of('hq.ahu1.sat') }]),
      'by id',
    );
    t.equal(g.size, 4);
    t.equal(g.colNames()[0], 'id');
    t.equal(idOf(g.rows[0]), ids['hq.ahu2']);
    t.ok(g.rows[1]?.isEmpty(), 'the unknown id is an all-null row');
    t.equal(idOf(g.rows[2]), ids.hq);
    t.equal(idOf(g.rows[3]), ids['hq.ahu1.sat'], 'a fully qualified name reads the record, answering its real id');
    // Only unknown ids: one null row each, still a grid with an id column.
    const u = ok(t, await c.post('read', [{ id: HRef.of('nope1') }, { id: HRef.of('hq.nope') }]), 'unknown ids');
    t.equal(u.size, 2);
    t.ok(u.rows.every((x) => x.isEmpty()));
    t.ok(u.hasCol('id'));
  });

  t.test('GET with Zinc-encoded query parameters', async (t) => {
    const byId = ok(t, await c.get('read', { id: HRef.of(ids.depot as string) }), 'read?id=@uuid');
    t.equal(byId.first()?.get('name'), 'depot');
    const byName = ok(t, await c.raw('/api/read?id=@hq.ahu1.rat'), 'read?id=@hq.ahu1.rat');
    t.equal(idOf(byName.first()), ids['hq.ahu1.rat']);
    const bare = ok(t, await c.raw('/api/read?filter=point+and+his&limit=0'), '+ is a space, bare filter');
    t.same(bare.rows.map(idOf), [ids['hq.ahu1.sat']]);
    const quoted = ok(t, await c.raw(`/api/read?filter=${encodeURIComponent(zincVal('point and equipRef==@' + (ids['hq.ahu2'] as string)))}&limit=10`), 'quoted Str filter');
    t.same(quoted.rows.map(idOf), [ids['hq.ahu2.sat']]);
    const lim = ok(t, await c.raw('/api/read?filter=point&limit=1'), 'limit=1');
    t.equal(lim.size, 1);
    const pct = ok(t, await c.raw('/api/read?filter=site%20and%20area%3E1000m%C2%B2'), 'percent-encoded');
    t.same(pct.rows.map((x) => x.get('name')), ['hq']);
    failed(t, await c.raw('/api/read?filter=point&limit=-1'), 400, ErrorCodes.BAD_REQUEST, /limit/, 'negative limit');
    failed(t, await c.raw('/api/read?filter=point+and'), 400, ErrorCodes.BAD_FILTER, undefined, 'bad filter');
    failed(t, await c.raw('/api/read'), 400, ErrorCodes.BAD_REQUEST, /filter column.*or an id column/, 'no parameters');
  });

  t.test('errors', async (t) => {
    failed(t, await c.post('read', { filter: 'point and' }), 400, ErrorCodes.BAD_FILTER, undefined, 'incomplete filter');
    failed(t, await c.post('read', { filter: 'dis =~ /(/' }), 400, ErrorCodes.BAD_FILTER, undefined, 'bad regex');
    failed(t, await c.post('read', { filter: HNumber.of(1) }), 400, ErrorCodes.BAD_REQUEST, /filter must be a Str/, 'filter not a Str');
    failed(t, await c.post('read', { filter: 'point', limit: 'ten' }), 400, ErrorCodes.BAD_REQUEST, /limit must be a whole Number/, 'limit a Str');
    failed(t, await c.post('read', { filter: 'point', limit: HNumber.of(1.5) }), 400, ErrorCodes.BAD_REQUEST, /limit/, 'limit not whole');
    failed(t, await c.post('read', { id: 'hq' }), 400, ErrorCodes.BAD_REQUEST, /rows\[0\]\.id must be a Ref/, 'id a Str');
    failed(t, await c.post('read', { other: MARKER }), 400, ErrorCodes.BAD_REQUEST, /filter column.*id column/, 'neither filter nor id');
    failed(t, await c.post('read', []), 400, ErrorCodes.BAD_REQUEST, undefined, 'empty grid');
  });
});

t.test('a read of many records comes in chunks: every row, as created, in JSON and Zinc', async (t) => {
  const r = await startApp(t);
  const c = client(r);
  // Wide rows (as points are), text beyond Latin-1, a list and a dict: enough rows to be streamed.
  const rows = Array.from({ length: 700 }, (_, i) => ({
    point: MARKER,
    his: MARKER,
    kind: 'Number',
    unit: '°C',
    name: `p${i}`,
    dis: `Zone ${i} “north” temp – ${'x'.repeat(i % 50)}`,
    ...(i === 3 ? { modes: ['a', HNumber.of(2)] } : {}),
    ...(i === 699 ? { spec: HDict.of({ rated: HNumber.of(5, 'kW') }) } : {}),
  }));
  const made = ok(t, await c.post('createRec', rows), 'createRec of 700 points');
  const ids = made.rows.map(idOf);
  for (const [accept, what] of [['json', 'JSON'], ['zinc', 'Zinc']] as const) {
    const a = await c.post('read', { filter: 'point' }, { accept });
    const g = ok(t, a, `read in ${what}`);
    t.equal(g.size, 700, `${what}: every record`);
    const byId = new Map(g.rows.map((row) => [idOf(row), row]));
    t.ok(ids.every((id, i) => byId.get(id)?.get('dis') === rows[i]?.dis && byId.get(id)?.get('name') === `p${i}`), `${what}: each as created`);
    t.same(byId.get(ids[3] as string)?.get('modes'), ['a', HNumber.of(2)], `${what}: a list`);
    t.same((byId.get(ids[699] as string)?.get('spec') as HDict | undefined)?.get('rated'), HNumber.of(5, 'kW'), `${what}: a dict`);
    // A grid of many rows is streamed (no length ahead), in Zinc too: its version line from the cells, looked at first.
    t.equal(a.headers.get('transfer-encoding'), 'chunked', `${what}: streamed`);
    if (accept === 'zinc') t.match(a.text, /^ver:"3\.0"/, 'Zinc: version 3.0, for the list and the dict');
    t.equal((await c.post('read', { filter: 'point' }, { accept })).text, a.text, `${what}: read again, the same answer`);
  }
  const head = await c.raw(`/api/read?filter=point`, { method: 'HEAD' });
  t.equal(head.status, 200, 'HEAD of a streamed read');
  t.equal(head.text, '', 'no body');
});

t.test('updateRec', async (t) => {
  const r = await startApp(t);
  const c = client(r);
  const ids = await seed(t, c);

  t.test('change, add, remove (with -: and with x:), id by fully qualified name', async (t) => {
    const g = ok(
      t,
      await c.post('updateRec', [
        { id: HRef.of(ids['hq.ahu1'] as string), dis: 'AHU one', elec: MARKER, capacity: HNumber.of(12, 'kW') },
        { id: HRef.of('hq.ahu1.sat'), his: REMOVE, unit: '°C' },
      ]),
      'update',
    );
    t.equal(g.size, 2);
    const a = g.rows[0] as HDict;
    t.equal(idOf(a), ids['hq.ahu1']);
    t.equal(a.get('dis'), 'AHU one', 'changed');
    t.equal(a.get('elec'), MARKER, 'added');
    t.same(a.get('capacity'), HNumber.of(12, 'kW'));
    t.equal(a.get('name'), 'ahu1', 'untouched tags stay');
    const p = g.rows[1] as HDict;
    t.equal(idOf(p), ids['hq.ahu1.sat'], 'a row naming the record by fqname answers its id');
    t.notOk(p.has('his'), 'removed with -:');
    t.equal(p.get('unit'), '°C');
    // Read back over HTTP.
    const back = (await c.byId('hq.ahu1.sat')) as HDict;
    t.notOk(back.has('his'));
    t.equal(back.get('unit'), '°C');
    t.equal((await c.byId('hq.ahu1'))?.get('capacity')?.toString(), HNumber.of(12, 'kW').toString());

    // x: (an empty XStr, the WideSky 2.0 habit) also removes; sent as raw JSON.
    const x = await c.raw('/api/updateRec', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ meta: { ver: '2.0' }, cols: [{ name: 'id' }, { name: 'unit' }, { name: 'elec' }], rows: [{ id: 'r:hq.ahu1.sat', unit: 'x:' }, { id: `r:${ids['hq.ahu1'] as string}`, elec: '-:' }] }),
    });
    const xg = ok(t, x, 'remove with x:');
    t.notOk(xg.rows[0]?.has('unit'), 'x: removed unit');
    t.notOk(xg.rows[1]?.has('elec'), '-: removed elec');
    t.notOk((await c.byId('hq.ahu1.sat'))?.has('unit'));
    // Removing a tag the record does not have is fine and changes nothing.
    ok(t, await c.post('updateRec', { id: HRef.of('hq.ahu1.sat'), nothingHere: REMOVE }), 'remove absent tag');
  });

  t.test('renames move fully qualified names; the old one stops working', async (t) => {
    ok(t, await c.post('updateRec', { id: HRef.of('hq.ahu2'), name: 'ahu2b' }), 'rename');
    t.equal(idOf(await c.byId('hq.ahu2b.sat')), ids['hq.ahu2.sat'], 'the child is found under the new name');
    t.equal(await c.byId('hq.ahu2.sat'), undefined, 'the old fqname gives a null row');
    const sat = (await c.byId('hq.ahu2b.sat')) as HDict;
    t.equal((sat.get('equipRef') as HRef).dis, 'ahu2b', 'Refs show the new name');
  });

  t.test('id and the primary marker cannot change; errors change nothing', async (t) => {
    const hq = ids.hq as string;
    const before = (await c.byId(hq)) as HDict;
    const cases: [string, Rows, string, RegExp][] = [
      ['remove the primary marker', { id: HRef.of(hq), site: REMOVE }, ErrorCodes.INVALID_RECORD, /primary marker "site".*cannot be removed/],
      ['add another primary marker', { id: HRef.of(hq), equip: MARKER }, ErrorCodes.INVALID_RECORD, /primary marker "equip".*cannot be added/],
      ['primary marker to a Str', { id: HRef.of(hq), site: 'no' }, ErrorCodes.INVALID_RECORD, /"site" must be a Marker/],
      ['unknown id', { id: HRef.of('no-such'), dis: 'x' }, ErrorCodes.NOT_FOUND, /no record @no-such/],
      ['unknown fqname', { id: HRef.of('hq.nothing'), dis: 'x' }, ErrorCodes.NOT_FOUND, /no record @hq\.nothing/],
      ['no id', { dis: 'x' }, ErrorCodes.BAD_REQUEST, /needs an id/],
      ['id not a Ref', { id: hq, dis: 'x' }, ErrorCodes.BAD_REQUEST, /needs an id \(a Ref/],
      ['name taken by a sibling', { id: HRef.of('depot'), name: 'hq' }, ErrorCodes.CONFLICT, /name "hq" is already used/],
      ['bad name', { id: HRef.of(hq), name: 'h q' }, ErrorCodes.INVALID_RECORD, /name "h q"/],
      ['dangling ref', { id: HRef.of('hq.ahu1'), siteRef: HRef.of('gone') }, ErrorCodes.INVALID_RECORD, /siteRef @gone does not exist/],
      ['own ancestor', { id: HRef.of('hq.ahu1'), equipRef: HRef.of('hq.ahu1.sat') }, ErrorCodes.INVALID_RECORD, /equipRef .* is not a equip/],
      ['no rows', [], ErrorCodes.BAD_REQUEST, /at least one row/],
      [
        'a good row, then a bad one',
        [
          { id: HRef.of(hq), dis: 'CHANGED', extra: MARKER },
          { id: HRef.of('depot'), depot: MARKER, site: REMOVE },
        ],
        ErrorCodes.INVALID_RECORD,
        /row 1: .*cannot be removed/,
      ],
    ];
    for (const [what, rows, code, dis] of cases) failed(t, await c.post('updateRec', rows), 400, code, dis, what);
    const after = (await c.byId(hq)) as HDict;
    t.same(after.names().sort(), before.names().sort(), 'the site kept its tags');
    t.equal(after.get('dis'), before.get('dis'));
    t.notOk(after.has('extra'), 'the good row of the refused request was not applied');
    t.equal(idOf(after), hq, 'the id is the same');
    t.equal((await c.byId('depot'))?.get('site'), MARKER);
    t.ok((await c.byId('hq.ahu1'))?.has('siteRef'), 'ahu1 kept its siteRef');
  });

  t.test('an equip cannot be moved under a non-equip, nor made its own ancestor', async (t) => {
    ok(t, await c.post('createRec', { equip: MARKER, name: 'sub', equipRef: HRef.of('hq.ahu1'), siteRef: HRef.of('hq') }), 'sub-equip');
    failed(t, await c.post('updateRec', { id: HRef.of('hq.ahu1'), equipRef: HRef.of('hq.ahu1.sub') }), 400, ErrorCodes.INVALID_RECORD, /own ancestor/, 'cycle');
    t.notOk((await c.byId('hq.ahu1'))?.has('equipRef'), 'no cycle stored');
  });
});

t.test('deleteRec', async (t) => {
  const r = await startApp(t);
  const c = client(r);
  const ids = await seed(t, c);

  t.test('refused when referenced: the error names the referrers; nothing deleted', async (t) => {
    const a = await c.post('deleteRec', { id: HRef.of('hq.ahu1') });
    failed(t, a, 400, ErrorCodes.REFERENCED, /cannot delete/);
    const dis = errOf(a)?.dis ?? '';
    t.match(dis, ids['hq.ahu1.sat'], 'names the first referrer by id');
    t.match(dis, ids['hq.ahu1.rat'], 'and the second');
    t.match(dis, /\(sat\) via equipRef/, 'with its name and the tag that refers');
    t.match(dis, /Delete or update the referrers first/, 'and what to do');
    t.ok(await c.byId('hq.ahu1'), 'still there');
    // Several ids with one referenced: none of them is deleted.
    const b = await c.post('deleteRec', [{ id: HRef.of('depot') }, { id: HRef.of('hq') }]);
    failed(t, b, 400, ErrorCodes.REFERENCED, /hq.*referenced by/);
    t.ok(await c.byId('depot'), 'depot was not deleted either');
    // Unknown id with good ones: nothing deleted.
    failed(t, await c.post('deleteRec', [{ id: HRef.of('depot') }, { id: HRef.of('nope') }]), 400, ErrorCodes.NOT_FOUND, /no record @nope/);
    t.ok(await c.byId('depot'), 'depot still there');
    failed(t, await c.post('deleteRec', { id: 'depot' }), 400, ErrorCodes.BAD_REQUEST, /must be a Ref/, 'id not a Ref');
    failed(t, await c.post('deleteRec', { other: MARKER }), 400, ErrorCodes.BAD_REQUEST, /id column or a filter column/, 'no id, no filter');
    failed(t, await c.post('deleteRec', { filter: 'site and' }), 400, ErrorCodes.BAD_FILTER, undefined, 'bad filter');
    // A filter over referenced records: refused, whole.
    failed(t, await c.post('deleteRec', { filter: 'site' }), 400, ErrorCodes.REFERENCED, undefined, 'filter matching a referenced site');
    t.equal((await c.find('site')).length, 2, 'both sites still there');
  });

  t.test('by id, by name, with referrers in the same request', async (t) => {
    const g = ok(t, await c.post('deleteRec', [{ id: HRef.of(ids['hq.ahu2.sat'] as string) }, { id: HRef.of('hq.ahu2') }]), 'point and its equip');
    t.same(g.rows.map(idOf), [ids['hq.ahu2.sat'], ids['hq.ahu2']], 'the deleted records, in request order');
    t.equal(g.rows[1]?.get('name'), 'ahu2', 'answering the records as they were');
    t.equal(await c.byId(ids['hq.ahu2'] as string), undefined, 'gone by id');
    t.equal(await c.byId('hq.ahu2'), undefined, 'gone by name');
    // A referrer deleted with its target (target first in the request).
    ok(t, await c.post('deleteRec', [{ id: HRef.of('hq.ahu1') }, { id: HRef.of('hq.ahu1.sat') }, { id: HRef.of('hq.ahu1.rat') }]), 'equip before its points');
    t.same(await c.find('equip or point'), []);
    // The same record twice: deleted once.
    const twice = ok(t, await c.post('deleteRec', [{ id: HRef.of('depot') }, { id: HRef.of(ids.depot as string) }]), 'same record twice');
    t.equal(twice.size, 1);
  });

  t.test('by filter with limit; nothing matched is an empty grid; GET', async (t) => {
    const made = ok(t, await c.post('createRec', [1, 2, 3, 4, 5].map((i) => ({ site: MARKER, name: `tmp${i}`, temp: MARKER }))), 'five temp sites');
    t.equal(made.size, 5);
    const two = ok(t, await c.post('deleteRec', { filter: 'temp', limit: HNumber.of(2) }), 'filter limit 2');
    t.equal(two.size, 2);
    t.equal((await c.find('temp')).length, 3);
    const none = ok(t, await c.post('deleteRec', { filter: 'nonesuch' }), 'nothing matches');
    t.equal(none.size, 0);
    t.same(none.colNames(), ['empty']);
    const one = ok(t, await c.get('deleteRec', { id: HRef.of('tmp5') }), 'GET deleteRec?id=@tmp5');
    t.equal(one.first()?.get('name'), 'tmp5');
    t.equal(await c.byId('tmp5'), undefined);
    const rest = ok(t, await c.raw('/api/deleteRec?filter=temp&limit=0'), 'GET by filter, limit 0 = all');
    t.equal(rest.size, 2);
    t.same(await c.find('temp'), []);
    t.equal((await c.find('site')).length, 1, 'only hq is left');
  });
});

t.test('concurrent requests: one name, one winner', async (t) => {
  const r = await startApp(t);
  const c = client(r);
  const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => c.post('createRec', { site: MARKER, name: 'contested', n: HNumber.of(i) })));
  t.equal(answers.filter((a) => a.status === 200).length, 1, 'exactly one create succeeds');
  for (const a of answers.filter((x) => x.status !== 200)) failed(t, a, 400, ErrorCodes.CONFLICT, /name "contested" is already used/);
  t.equal((await c.find('name=="contested"')).length, 1);
  // Concurrent updates and deletes of one record: each either applies whole or is refused.
  const id = idOf(await c.byId('contested'));
  const mixed = await Promise.all([
    c.post('updateRec', { id: HRef.of(id), a: MARKER }),
    c.post('updateRec', { id: HRef.of('contested'), b: MARKER }),
    c.post('deleteRec', { id: HRef.of(id) }),
    c.post('updateRec', { id: HRef.of(id), c: MARKER }),
  ]);
  t.equal(mixed[2]?.status, 200, 'the delete succeeds');
  for (const [i, a] of mixed.entries()) if (a.status !== 200) failed(t, a, 400, ErrorCodes.NOT_FOUND, undefined, `request ${i} after the delete`);
  t.equal(await c.byId(id), undefined, 'deleted in the end');
});

t.test('all-or-nothing across restart: refused requests leave no trace on disk', async (t) => {
  const r = await startApp(t);
  const c = client(r);
  await seed(t, c);
  failed(t, await c.post('createRec', [{ site: MARKER, name: 'ghost' }, { dis: 'no primary marker' }]), 400, ErrorCodes.INVALID_RECORD);
  failed(t, await c.post('updateRec', [{ id: HRef.of('hq'), dis: 'ghost' }, { id: HRef.of('nope') }]), 400, ErrorCodes.NOT_FOUND);
  failed(t, await c.post('deleteRec', [{ id: HRef.of('depot') }, { id: HRef.of('hq') }]), 400, ErrorCodes.REFERENCED);
  await r.restart();
  const c2 = client(r);
  t.same(await c2.find('name=="ghost" or dis=="ghost"'), []);
  t.equal((await c2.byId('hq'))?.get('dis'), 'Head office');
  t.ok(await c2.byId('depot'));
});

t.test('request bodies in JSON and Zinc; answers by Accept', async (t) => {
  const r = await startApp(t);
  const c = client(r);
  const ids = await seed(t, c);

  t.test('Zinc request bodies', async (t) => {
    const made = ok(t, await c.post('createRec', { site: MARKER, name: 'zsite', dis: 'Zinc "quoted" site', area: HNumber.of(42, 'ft²') }, { as: 'zinc' }), 'createRec in Zinc');
    const id = idOf(made.first());
    const rawZinc = await c.raw('/api/read', {
      method: 'POST',
      headers: { 'content-type': 'text/zinc; charset=utf-8', accept: 'application/json' },
      body: `ver:"3.0"\nid\n@zsite\n@${id}\n@nope\n`,
    });
    const g = ok(t, rawZinc, 'read in Zinc');
    t.equal(g.size, 3);
    t.equal(g.rows[0]?.get('dis'), 'Zinc "quoted" site');
    t.same(g.rows[0]?.get('area'), HNumber.of(42, 'ft²'));
    t.equal(idOf(g.rows[1]), id);
    t.ok(g.rows[2]?.isEmpty());
    const upd = await c.raw('/api/updateRec', {
      method: 'POST',
      headers: { 'content-type': 'text/plain' },
      body: `ver:"3.0"\nid,dis,area\n@zsite,"Renamed",R\n`,
    });
    const u = ok(t, upd, 'updateRec in Zinc (text/plain is Zinc), R removes');
    t.equal(u.first()?.get('dis'), 'Renamed');
    t.notOk(u.first()?.has('area'));
    const del = ok(t, await c.post('deleteRec', { id: HRef.of('zsite') }, { as: 'zinc' }), 'deleteRec in Zinc');
    t.equal(idOf(del.first()), id);
  });

  t.test('Accept negotiation', async (t) => {
    const body = { filter: 'site' };
    const j = await c.post('read', body);
    t.equal(j.headers.get('content-type'), 'application/json', 'JSON by default');
    t.equal(j.grid?.size, 2);
    const parsed = JSON.parse(j.text) as { meta: { ver: string }; rows: Record<string, string>[] };
    t.equal(parsed.meta.ver, '2.0', 'ver 2.0 on the wire');
    t.match(parsed.rows[0]?.id, /^r:\S+ \S+/, 'the Ref carries the display on the wire');
    const none = await c.raw('/api/read?filter=site', { headers: {} });
    t.equal(none.headers.get('content-type'), 'application/json', 'no Accept: JSON');
    const any = await c.post('read', body, { headers: { accept: '*/*' } });
    t.equal(any.headers.get('content-type'), 'application/json', '*/*: JSON');
    const z = await c.post('read', body, { accept: 'zinc' });
    t.equal(z.headers.get('content-type'), 'text/zinc; charset=utf-8', 'Zinc');
    t.match(z.text, /^ver:"3\.0"|^ver:"2\.0"/);
    t.equal(z.grid?.size, 2);
    t.same(
      z.grid?.rows.map((x) => x.get('name')).sort(),
      j.grid?.rows.map((x) => x.get('name')).sort(),
      'the same rows as JSON',
    );
    const both = await c.post('read', body, { headers: { accept: 'text/zinc,application/vnd.haystack+json' } });
    t.equal(both.headers.get('content-type'), 'text/zinc; charset=utf-8', 'text/zinc,application/vnd.haystack+json gets Zinc');
    t.equal(readZinc(both.text).size, 2);
    const csv = await c.post('read', { filter: 'point and his' }, { headers: { accept: 'text/csv' } });
    t.equal(csv.status, 200);
    t.equal(csv.headers.get('content-type'), 'text/csv; charset=utf-8', 'CSV');
    const lines = csv.text.trim().split(/\r?\n/);
    t.equal(lines.length, 2, 'a header and one row');
    t.match(lines[0], /^id,/, 'header starts with id');
    t.match(lines[1], new RegExp(`^@${ids['hq.ahu1.sat'] as string} sat,`), 'Ref as @id dis');
    t.match(lines[1], /✓/, 'Markers as ✓');
    // Errors under CSV come back as JSON error grids (CSV has no meta).
    const csvErr = await c.post('read', { filter: 'point and' }, { headers: { accept: 'text/csv' } });
    failed(t, csvErr, 400, ErrorCodes.BAD_FILTER, undefined, 'error while CSV asked');
    t.equal(csvErr.headers.get('content-type'), 'application/json');
    // Errors under Zinc are Zinc error grids.
    const zErr = await c.post('read', { filter: 'point and' }, { accept: 'zinc' });
    failed(t, zErr, 400, ErrorCodes.BAD_FILTER, undefined, 'error while Zinc asked');
    t.equal(zErr.headers.get('content-type'), 'text/zinc; charset=utf-8');
    const bad = await c.post('read', body, { headers: { accept: 'application/xml' } });
    failed(t, bad, 406, ErrorCodes.NOT_ACCEPTABLE, /ask for one of/, 'nothing acceptable');
    const media = await c.raw('/api/read', { method: 'POST', headers: { 'content-type': 'application/xml' }, body: '<grid/>' });
    failed(t, media, 415, ErrorCodes.UNSUPPORTED_MEDIA_TYPE, /not accepted: send one of/, 'unsupported body type');
  });
});

t.test('a body over the size limit gives 413; the server keeps serving', async (t) => {
  // The configured minimum is 1024 bytes.
  const r = await startApp(t, { env: { HAYLOFT_MAX_BODY_BYTES: '2048', HAYLOFT_MAX_REQUEST_BODY_BYTES: '2048' } });
  const c = client(r);
  const big = await c.post('createRec', { site: MARKER, name: 'big', dis: 'x'.repeat(5000) });
  failed(t, big, 413, ErrorCodes.TOO_LARGE, /larger than the limit of 2,048 bytes \(maxBodyBytes\)/, 'over the limit');
  // Chunked (no Content-Length): refused while streaming.
  const chunks = new ReadableStream<Uint8Array>({
    start(ctl) {
      for (let i = 0; i < 10; i++) ctl.enqueue(new TextEncoder().encode(' '.repeat(500)));
      ctl.close();
    },
  });
  const res = await fetch(`${r.base}/api/read`, { method: 'POST', headers: { ...r.auth, 'content-type': 'application/json' }, body: chunks, duplex: 'half' });
  t.equal(res.status, 413, 'a chunked body over the limit too');
  await res.text();
  t.same(await c.find('name=="big"'), [], 'nothing created');
  const small = ok(t, await c.post('createRec', { site: MARKER, name: 'small', dis: 'x'.repeat(500) }), 'under the limit');
  t.equal(small.size, 1);
});

t.test('the server keeps serving after bad requests', async (t) => {
  const r = await startApp(t);
  const c = client(r);
  const json = { 'content-type': 'application/json' };
  const cases: [string, Promise<Answer>, number, string, RegExp | undefined][] = [
    ['malformed JSON', c.raw('/api/read', { method: 'POST', headers: json, body: '{"meta": {"ver":"3.0"}, "cols": [' }), 400, ErrorCodes.BAD_GRID, /not valid JSON/],
    ['JSON that is not a grid', c.raw('/api/read', { method: 'POST', headers: json, body: '[1,2,3]' }), 400, ErrorCodes.BAD_GRID, /grid must be a JSON object/],
    ['a bad value', c.raw('/api/read', { method: 'POST', headers: json, body: '{"meta":{"ver":"3.0"},"cols":[{"name":"id"}],"rows":[{"id":"r:bad/id"}]}' }), 400, ErrorCodes.BAD_VALUE, /rows\[0\]\.id/],
    ['unknown ver', c.raw('/api/read', { method: 'POST', headers: json, body: '{"meta":{"ver":"9"},"cols":[{"name":"id"}],"rows":[]}' }), 400, ErrorCodes.BAD_GRID, /version/],
    ['garbage Zinc', c.raw('/api/read', { method: 'POST', headers: { 'content-type': 'text/zinc' }, body: 'this is ) not zinc {{{' }), 400, ErrorCodes.BAD_ZINC, undefined],
    ['bad filter', c.post('read', { filter: '((site' }), 400, ErrorCodes.BAD_FILTER, undefined],
    ['unknown op', c.post('frobnicate', { x: MARKER }), 404, ErrorCodes.UNKNOWN_OP, /there is no op "frobnicate".*GET \/api\/ops/],
    ['unknown path', c.raw('/nothing/here'), 404, ErrorCodes.UNKNOWN_OP, /ops are at \/api\/<op>/],
    ['GET of a POST-only op', c.get('createRec', { site: MARKER }), 405, ErrorCodes.METHOD_NOT_ALLOWED, /createRec does not accept GET: use POST/],
    ['bad query parameter name', c.raw('/api/read?Filter=site'), 400, ErrorCodes.BAD_REQUEST, /query parameter "Filter"/],
    ['non-UTF-8 body', c.raw('/api/read', { method: 'POST', headers: json, body: new Uint8Array([0x7b, 0xff, 0xfe, 0x7d]) }), 400, ErrorCodes.BAD_REQUEST, /not valid UTF-8/],
  ];
  for (const [what, p, status, code, dis] of cases) {
    const a = await p;
    failed(t, a, status, code, dis, what);
    if (status === 405) t.equal(a.headers.get('allow'), 'POST', 'Allow names the method to use');
    const about = await c.get('about');
    t.equal(about.status, 200, `still serving after: ${what}`);
  }
  // Many bad requests at once, then a good one.
  const storm = await Promise.all(Array.from({ length: 30 }, (_, i) => c.raw('/api/read', { method: 'POST', headers: json, body: `{"broken": ${i}` })));
  t.ok(storm.every((a) => a.status === 400), 'thirty malformed bodies, thirty 400s');
  ok(t, await c.post('createRec', { site: MARKER, name: 'after' }), 'create after all that');
  t.equal((await c.byId('after'))?.get('name'), 'after');
  t.notOk(r.logs.some((l) => /"level":50/.test(l)), 'no unexpected (500) error was logged');
});

t.test('restart: everything is still there, fully qualified names included', async (t) => {
  const r = await startApp(t);
  let c = client(r);
  const ids = await seed(t, c);
  ok(t, await c.post('updateRec', { id: HRef.of('hq.ahu2'), name: 'ahu9', dis: 'AHU nine' }), 'rename before restart');
  ok(t, await c.post('deleteRec', { id: HRef.of('hq.ahu1.rat') }), 'delete before restart');
  ok(t, await c.post('createRec', { id: HRef.of('given-id'), site: MARKER, name: 'annex' }), 'supplied id');
  await r.restart();
  c = client(r);
  t.equal((await c.find('id')).length, (await c.find('site or equip or point or user or role or actionPolicy')).length);
  t.equal((await c.find('site')).length, 3);
  t.equal((await c.find('point')).length, 2);
  t.equal(idOf(await c.byId('hq.ahu1.sat')), ids['hq.ahu1.sat'], 'fqname after restart');
  t.equal(idOf(await c.byId('hq.ahu9.sat')), ids['hq.ahu2.sat'], 'renamed parent after restart');
  t.equal(await c.byId('hq.ahu2.sat'), undefined, 'old fqname still gone');
  t.equal(await c.byId('hq.ahu1.rat'), undefined, 'deleted stays deleted');
  t.equal(await c.byId(ids['hq.ahu1.rat'] as string), undefined);
  t.equal(idOf(await c.byId('annex')), 'given-id');
  const sat = (await c.byId('hq.ahu9.sat')) as HDict;
  t.equal((sat.get('equipRef') as HRef).dis, 'ahu9', 'Ref display after restart');
  t.same(sat.get('kind'), 'Number');
  t.same((await c.byId('hq'))?.get('area'), HNumber.of(1200, 'm²'), 'numbers with units survive');
  // The reference index is rebuilt: deleting a referenced record is still refused.
  failed(t, await c.post('deleteRec', { id: HRef.of('hq.ahu1') }), 400, ErrorCodes.REFERENCED, /\(sat\) via equipRef/);
  // Names are still unique among siblings.
  failed(t, await c.post('createRec', { equip: MARKER, name: 'ahu1', siteRef: HRef.of('hq') }), 400, ErrorCodes.CONFLICT);
  // And writes still work.
  ok(t, await c.post('createRec', { point: MARKER, name: 'rat', equipRef: HRef.of('hq.ahu1'), siteRef: HRef.of('hq') }), 'create after restart');
  t.ok(await c.byId('hq.ahu1.rat'));
});
