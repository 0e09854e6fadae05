/**
 * The decoded grids of small requests seen before (src/api/grid-cache.ts): unit tests of the
 * cache's bounds, then end to end through HTTP against the real App on LevelDB: a body or query
 * sent again gets the same answer as the first time, after the data changed too; the same bytes
 * under another Content-Type are decoded in that format; a body that failed fails again.
 */
import t from 'tap';
import { GRID_CACHE_LIMITS, GridCache } from '../../src/api/grid-cache.js';
import { readJsonGrid } from '../../src/haystack/json.js';
import { HGrid, HRef } from '../../src/haystack/values.js';
import { startApp } from '../helpers/app.js';
import { request } from '../helpers/http.js';

/** A JSON decoder that counts its calls. */
function counting(): { decode: (_f: string, b: Buffer) => HGrid; readonly calls: number } {
  let calls = 0;
  return {
    decode: (_f, b) => {
      calls++;
      return readJsonGrid(b.toString('utf8'));
    },
    get calls() {
      return calls;
    },
  };
}

const body = (id: string): Buffer => Buffer.from(JSON.stringify({ meta: { ver: '3.0' }, cols: [{ name: 'id' }], rows: [{ id: `r:${id}` }] }));

t.test('a body seen before is not decoded again, and gets the grid of the first time', async (t) => {
  const cache = new GridCache();
  let decoded = 0;
  const decode = (_f: string, b: Buffer): HGrid => {
    decoded++;
    return readJsonGrid(b.toString('utf8'));
  };
  const a = cache.grid('json', body('a'), decode);
  const again = cache.grid('json', body('a'), decode);
  t.equal(decoded, 1, 'decoded once');
  t.equal(again, a, 'the same grid');
  t.same(a.rows[0]?.get('id'), new HRef('a'));
  cache.grid('json', body('b'), decode);
  t.equal(decoded, 2, 'other bytes are decoded');
  cache.grid('zinc', body('a'), () => {
    decoded++;
    return HGrid.empty();
  });
  t.equal(decoded, 3, 'the same bytes in another format are decoded in that format');
  t.equal(cache.grid('zinc', body('a'), decode).rows.length, 0, 'and kept apart');
  t.equal(
    cache.grid('query', '?id=@a', () => {
      decoded++;
      return HGrid.fromRows([]);
    }).rows.length,
    0,
    'a query string is an input too',
  );
  cache.grid('query', '?id=@a', decode as never);
  t.equal(decoded, 4, 'decoded once');
});

t.test('the last body: equal bytes in a new buffer are its grid; the same bytes in another format are not', async (t) => {
  const cache = new GridCache();
  let decoded = 0;
  const decode = (f: string, b: Buffer): HGrid => {
    decoded++;
    return f === 'json' ? readJsonGrid(b.toString('utf8')) : HGrid.empty();
  };
  const a = cache.grid('json', body('a'), decode);
  t.equal(cache.grid('json', Buffer.from(body('a')), decode), a, 'equal bytes in another Buffer: the same grid');
  const other = cache.grid('zinc', body('a'), decode);
  t.not(other, a, 'the same bytes in another format: its own grid');
  t.equal(decoded, 2, 'decoded once per format');
  t.equal(cache.grid('json', body('a'), decode), a, 'and back to the first format: its grid, from the cache');
  const b = cache.grid('json', body('b'), decode);
  t.not(b, a, 'other bytes of the same length: another grid');
  t.equal(((b.rows[0]?.get('id')) as HRef).id, 'b');
  t.throws(() => cache.grid('json', Buffer.from('{"meta":'), decode), 'a body that fails');
  t.equal(cache.grid('json', body('b'), decode), b, 'is not kept as the last body');
});

t.test('a body that fails to decode is decoded (and fails) again', async (t) => {
  const cache = new GridCache();
  const c = counting();
  const bad = Buffer.from('{"meta":');
  t.throws(() => cache.grid('json', bad, c.decode), { code: 'HL_BAD_GRID' });
  t.throws(() => cache.grid('json', bad, c.decode), { code: 'HL_BAD_GRID' });
  t.equal(c.calls, 2);
  t.equal(cache.size, 0, 'nothing kept');
});

t.test('the cache is bounded: large inputs are never kept, and it holds at most maxEntries per format', async (t) => {
  const cache = new GridCache();
  const c = counting();
  const decode = c.decode;
  const large = Buffer.from(JSON.stringify({ meta: { ver: '3.0' }, cols: [{ name: 'dis' }], rows: [{ dis: 'x'.repeat(GRID_CACHE_LIMITS.maxBytes) }] }));
  cache.grid('json', large, decode);
  cache.grid('json', large, decode);
  t.equal(c.calls, 2, 'a body over maxBytes is decoded every time');
  t.equal(cache.size, 0, 'and not kept');
  for (let i = 0; i < GRID_CACHE_LIMITS.maxEntries * 3 + 5; i++) {
    cache.grid('json', body(`p${i}`), decode);
    if (cache.size > GRID_CACHE_LIMITS.maxEntries) t.fail(`more than ${GRID_CACHE_LIMITS.maxEntries} kept: ${cache.size}`);
  }
  t.ok(cache.size > 0);
});

t.test('over HTTP: the same request twice answers alike, and follows changes to the data', async (t) => {
  const r = await startApp(t);
  const json = { ...r.auth, 'Content-Type': 'application/json', Accept: 'application/json' };
  const created = await request(r.base, '/api/createRec', {
    method: 'POST',
    headers: json,
    body: JSON.stringify({ meta: { ver: '3.0' }, cols: [{ name: 'dis' }, { name: 'site' }], rows: [{ dis: 's:Before', site: 'm:' }] }),
  });
  t.equal(created.status, 200, created.text);
  const id = (created.grid?.rows[0]?.get('id') as HRef).id;
  const read = JSON.stringify({ meta: { ver: '3.0' }, cols: [{ name: 'id' }], rows: [{ id: `r:${id}` }] });
  const dis = async (): Promise<unknown> => {
    const a = await request(r.base, '/api/read', { method: 'POST', headers: json, body: read });
    t.equal(a.status, 200, a.text);
    return a.grid?.rows[0]?.get('dis');
  };
  const disByGet = async (): Promise<unknown> => {
    const a = await request(r.base, `/api/read?id=@${id}`, { headers: r.auth });
    t.equal(a.status, 200, a.text);
    return a.grid?.rows[0]?.get('dis');
  };
  t.equal(await dis(), 'Before');
  t.equal(await dis(), 'Before', 'the same body again');
  t.equal(await disByGet(), 'Before');
  t.equal(await disByGet(), 'Before', 'the same query again');
  const mod = created.grid?.rows[0]?.get('mod');
  const upd = await request(r.base, '/api/updateRec', {
    method: 'POST',
    headers: json,
    body: JSON.stringify({ meta: { ver: '3.0' }, cols: [{ name: 'id' }, { name: 'mod' }, { name: 'dis' }], rows: [{ id: `r:${id}`, mod: `t:${String(mod)}`, dis: 's:After' }] }),
  });
  t.equal(upd.status, 200, upd.text);
  t.equal(await dis(), 'After', 'the same body reads the changed record');
  t.equal(await disByGet(), 'After', 'so does the same query');

  // The same bytes as Zinc and as JSON: each decoded in its own format.
  const zincBody = `ver:"3.0"\nid\n@${id}\n`;
  const asZinc = await request(r.base, '/api/read', { method: 'POST', headers: { ...r.auth, 'Content-Type': 'text/zinc', Accept: 'application/json' }, body: zincBody });
  t.equal(asZinc.status, 200, asZinc.text);
  t.equal(asZinc.grid?.rows[0]?.get('dis'), 'After');
  for (let i = 0; i < 2; i++) {
    const asJson = await request(r.base, '/api/read', { method: 'POST', headers: json, body: zincBody });
    t.equal(asJson.status, 400, `Zinc bytes sent as JSON are refused (${i === 0 ? 'first' : 'second'} time)`);
    t.match(asJson.text, /not valid JSON/);
  }
});
