/**
 * Issue 31: J2's haystack-nclient (the published Haystack 4 JavaScript client, unchanged) against
 * the real App's /haystack/ API, in Hayson mode (Accept application/vnd.haystack+json, its Hayson
 * type) and in Zinc mode (Accept text/zinc). nclient posts Zinc and reads what comes back by
 * Content-Type; its login is its host's business (SkySpark's cookie), so the test logs in with
 * the Haystack auth handshake (test/helpers/haystack4.ts) and hands nclient the BEARER header.
 */
import t from 'tap';
import core from 'haystack-core';
import { Client } from 'haystack-nclient';
import { HRef, MARKER } from '../../src/haystack/values.js';
import { ADMIN, startApp } from '../helpers/app.js';
import { h4Login } from '../helpers/haystack4.js';
import { gridOf, postGrid } from '../helpers/http.js';

const MODES = [
  { name: 'Hayson', accept: 'application/vnd.haystack+json', type: /^application\/vnd\.haystack\+json/ },
  { name: 'Zinc', accept: 'text/zinc', type: /^text\/zinc/ },
];

t.test('haystack-nclient reads, navigates, writes and reads history, writes points', async (t) => {
  const r = await startApp(t);
  const create = async (rows: Record<string, unknown>[]): Promise<string[]> => {
    const a = await postGrid(r.base, 'createRec', gridOf(rows as never), { headers: r.auth });
    if (a.status !== 200 || a.grid === undefined) throw new Error(`createRec: ${a.status} ${a.text}`);
    return a.grid.rows.map((x) => (x.get('id') as HRef).id);
  };
  const [site] = await create([{ site: MARKER, name: 'hq', dis: 'HQ', tz: 'UTC' }]);
  const [equip] = await create([{ equip: MARKER, name: 'ahu', dis: 'AHU', siteRef: HRef.of(site as string) }]);
  const [temp, sp] = await create([
    { point: MARKER, name: 'temp', dis: 'Temp', his: MARKER, kind: 'Number', unit: '°C', tz: 'UTC', siteRef: HRef.of(site as string), equipRef: HRef.of(equip as string) },
    { point: MARKER, name: 'sp', dis: 'SP', writable: MARKER, kind: 'Number', unit: '°C', tz: 'UTC', siteRef: HRef.of(site as string), equipRef: HRef.of(equip as string) },
  ]);
  const login = await h4Login(r.base, ADMIN.username, ADMIN.password);
  t.ok(login.authToken, 'logged in');

  for (const mode of MODES) {
    // Every answer's Content-Type, to show the mode really is the one asked for.
    const types: string[] = [];
    const client = new Client({
      base: new URL(r.base),
      project: '',
      options: { headers: { authorization: `BEARER authToken=${login.authToken ?? ''}`, accept: mode.accept } },
      getOpUrl: ({ origin, op }: { origin: string; op: string }) => `${origin}/haystack/${op}`,
      fetch: async (resource: string | URL | Request, init?: RequestInit) => {
        const res = await fetch(resource, init);
        types.push(res.headers.get('content-type') ?? '');
        return res;
      },
    });
    await t.test(mode.name, async (t) => {
      const about = await client.ops.about();
      t.equal(about.first?.get('haystackVersion')?.toString(), '4.0', 'about');
      const ops = await client.ops.ops();
      t.ok(ops.getRows().some((d) => d.get('name')?.toString() === 'nav'), 'ops lists nav');
      const byFilter = await client.ops.read('point and his');
      t.same(byFilter.getRows().map((d) => d.get('dis')?.toString()), ['Temp'], 'read by filter');
      const byId = await client.ops.read([temp as string]);
      t.equal(byId.first?.get('unit')?.toString(), '°C', 'read by id');
      const roots = await client.ops.nav();
      t.equal(roots.first?.get('dis')?.toString(), 'HQ', 'nav: the site');
      const navId = (roots.first?.get('navId') as core.HRef).value;
      const equips = await client.ops.nav(navId);
      t.equal(equips.first?.get('dis')?.toString(), 'AHU', 'nav: the equip');
      const points = await client.ops.nav((equips.first?.get('navId') as core.HRef).value);
      t.same(points.getRows().map((d) => d.get('dis')?.toString()).sort(), ['SP', 'Temp'], 'nav: the points');

      const day = mode.name === 'Hayson' ? '2026-01-01' : '2026-01-02';
      await client.ops.hisWrite(temp as string, [
        core.HDict.make({ ts: core.HDateTime.make(`${day}T10:00:00Z UTC`), val: core.HNum.make(20.5, '°C') }),
        core.HDict.make({ ts: core.HDateTime.make(`${day}T11:00:00Z UTC`), val: core.HNum.make(21, '°C') }),
      ]);
      const his = await client.ops.hisRead(temp as string, day);
      t.same(his.getRows().map((d) => (d.get('val') as core.HNum).value), [20.5, 21], 'hisWrite then hisRead of the day');
      t.equal((his.first?.get('val') as core.HNum).unit?.symbol, '°C', 'with the unit');

      const arr = await client.ops.pointWrite({ id: sp as string, level: 8, val: core.HNum.make(19, '°C'), who: 'nclient' });
      const l8 = arr.getRows().find((d) => (d.get('level') as core.HNum).value === 8);
      t.equal((l8?.get('val') as core.HNum).value, 19, 'pointWrite level 8');
      const read = await client.ops.pointRead(sp as string);
      t.equal(read.getRows().length, 17, 'pointRead: the 17 levels');

      try {
        await client.ops.read('point and (');
        t.fail('a bad filter should be refused');
      } catch (e) {
        t.match((e as Error).message, /filter/i, 'a bad filter: nclient raises the error grid\'s dis');
      }
      t.ok(types.length > 5 && types.every((x) => mode.type.test(x)), `every answer in ${mode.name} (${[...new Set(types)].join(', ')})`);
    });
  }
});
