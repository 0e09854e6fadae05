/**
 * Sites, equips and points, filtered by a Haystack filter (on the server) and by text (here),
 * each point with its live value and status. The list renders only the rows in view (fixed row
 * height), so thousands of points scroll as smoothly as ten.
 */
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { type Cell, type Row, type Session, refDis, refId, show, str } from '../api.js';
import { type LiveMode, LiveWatch } from '../live.js';
import { LiveNote, Status } from './status.js';

const ROW_H = 52;
const OVERSCAN = 8;

interface Item {
  kind: 'site' | 'equip' | 'point';
  id: string;
  dis: string;
  sub: string;
  unit: string;
  cur: boolean;
  /** Lower-case text the search box matches. */
  text: string;
}

export interface Live {
  curVal?: Cell;
  curStatus?: string;
  curErr?: string;
}

function disOf(r: Row): string {
  return str(r.dis) || str(r.name) || refId(r.id);
}

/** Sites, their equips and their points, in order; points with no parent at the end. */
function arrange(sites: Row[], equips: Row[], points: Row[]): Item[] {
  const out: Item[] = [];
  const byParent = new Map<string, Row[]>();
  for (const p of points) {
    const parent = p.equipRef != null ? refId(p.equipRef) : p.siteRef != null ? refId(p.siteRef) : '';
    const list = byParent.get(parent) ?? [];
    list.push(p);
    byParent.set(parent, list);
  }
  const byDis = (a: Row, b: Row): number => disOf(a).localeCompare(disOf(b));
  const pointItems = (parent: string, path: string): void => {
    for (const p of (byParent.get(parent) ?? []).sort(byDis)) {
      const dis = disOf(p);
      out.push({ kind: 'point', id: refId(p.id), dis, sub: `${path}${str(p.name)}`, unit: str(p.unit), cur: p.cur != null, text: `${dis} ${str(p.name)} ${path}`.toLowerCase() });
    }
    byParent.delete(parent);
  };
  for (const s of [...sites].sort(byDis)) {
    const sid = refId(s.id);
    const sname = str(s.name);
    out.push({ kind: 'site', id: sid, dis: disOf(s), sub: sname, unit: '', cur: false, text: '' });
    pointItems(sid, `${sname}.`);
    for (const e of equips.filter((e) => refId(e.siteRef) === sid).sort(byDis)) {
      const eid = refId(e.id);
      out.push({ kind: 'equip', id: eid, dis: disOf(e), sub: `${sname}.${str(e.name)}`, unit: '', cur: false, text: '' });
      pointItems(eid, `${sname}.${str(e.name)}.`);
    }
  }
  // Points under an equip without a site, or with no parent at all.
  for (const [parent, list] of [...byParent]) {
    const e = equips.find((x) => refId(x.id) === parent);
    out.push({ kind: 'equip', id: parent, dis: e !== undefined ? disOf(e) : parent === '' ? 'No site or equip' : refDis(list[0]?.equipRef ?? list[0]?.siteRef), sub: '', unit: '', cur: false, text: '' });
    pointItems(parent, '');
  }
  return out;
}

/** Text search keeps matching points and the headers above them. */
function search(items: Item[], q: string): Item[] {
  const words = q.toLowerCase().split(/\s+/).filter((w) => w !== '');
  if (words.length === 0) return items;
  const out: Item[] = [];
  let site: Item | undefined;
  let equip: Item | undefined;
  for (const it of items) {
    if (it.kind === 'site') [site, equip] = [it, undefined];
    else if (it.kind === 'equip') equip = it;
    else if (words.every((w) => it.text.includes(w))) {
      if (site !== undefined) out.push(site);
      if (equip !== undefined) out.push(equip);
      [site, equip] = [undefined, undefined];
      out.push(it);
    }
  }
  return out;
}

export function Tree({ session }: { session: Session }) {
  const saved = sessionStorage.getItem('hayloft.filter') ?? 'point';
  const [filter, setFilter] = useState(saved);
  const [draft, setDraft] = useState(saved);
  const [text, setText] = useState('');
  const [items, setItems] = useState<Item[] | undefined>(undefined);
  const [err, setErr] = useState('');
  const [live, setLive] = useState<Map<string, Live>>(new Map());
  const [mode, setMode] = useState<LiveMode | undefined>(undefined);
  const [scroll, setScroll] = useState(0);
  const [height, setHeight] = useState(600);
  const box = useRef<HTMLDivElement>(null);

  useEffect(() => {
    let watch: LiveWatch | undefined;
    let gone = false;
    setErr('');
    setItems(undefined);
    void (async () => {
      try {
        const [sites, equips, points] = await Promise.all([session.read('site'), session.read('equip'), session.read(`point and (${filter})`)]);
        if (gone) return;
        const arranged = arrange(sites, equips, points);
        setItems(arranged);
        const map = new Map<string, Live>();
        for (const p of points) map.set(refId(p.id), { curVal: p.curVal, curStatus: str(p.curStatus), curErr: str(p.curErr) });
        setLive(map);
        watch = new LiveWatch(
          session,
          arranged.filter((i) => i.kind === 'point' && i.cur).map((i) => i.id),
          (rows) => {
            // Values flow again (after a lost watch was opened anew): an old error no longer holds.
            setErr('');
            setLive((old) => {
              const next = new Map(old);
              for (const r of rows) next.set(refId(r.id), { curVal: r.curVal, curStatus: str(r.curStatus), curErr: str(r.curErr) });
              return next;
            });
          },
          (e) => setErr(e instanceof Error ? e.message : String(e)),
        );
        watch.onMode = setMode;
        setMode(watch.mode);
        await watch.start();
      } catch (e) {
        if (!gone) setErr(e instanceof Error ? e.message : String(e));
      }
    })();
    return () => {
      gone = true;
      watch?.stop();
    };
  }, [session, filter]);

  useEffect(() => {
    const el = box.current;
    if (el === null) return;
    const measure = (): void => setHeight(el.clientHeight);
    measure();
    const ro = new ResizeObserver(measure);
    ro.observe(el);
    return () => ro.disconnect();
  }, [items !== undefined]);

  const shown = useMemo(() => (items === undefined ? [] : search(items, text)), [items, text]);
  const first = Math.max(0, Math.floor(scroll / ROW_H) - OVERSCAN);
  const last = Math.min(shown.length, Math.ceil((scroll + height) / ROW_H) + OVERSCAN);
  const points = shown.filter((i) => i.kind === 'point').length;

  return (
    <section class="tree">
      <form
        class="filters"
        onSubmit={(e) => {
          e.preventDefault();
          sessionStorage.setItem('hayloft.filter', draft);
          setFilter(draft.trim() === '' ? 'point' : draft);
        }}
      >
        <label>
          Haystack filter
          <span class="row">
            <input name="filter" value={draft} onInput={(e) => setDraft(e.currentTarget.value)} spellcheck={false} autocapitalize="off" />
            <button type="submit">Apply</button>
          </span>
        </label>
        <label>
          Search
          <input name="search" type="search" value={text} placeholder="name, equip, site…" onInput={(e) => setText(e.currentTarget.value)} />
        </label>
      </form>
      {err !== '' && (
        <p class="error" role="alert">
          {err}
        </p>
      )}
      <p class="muted count-line">
        <span class="count">{items === undefined ? 'Loading…' : `${points} point${points === 1 ? '' : 's'}`}</span>
        {mode !== undefined && <LiveNote mode={mode} />}
      </p>
      <div class="vlist" ref={box} onScroll={(e) => setScroll(e.currentTarget.scrollTop)} >
        <div style={{ height: `${shown.length * ROW_H}px`, position: 'relative' }}>
          {shown.slice(first, last).map((it, k) => {
            const top = (first + k) * ROW_H;
            if (it.kind !== 'point') {
              return (
                <div class={`vrow head ${it.kind}`} style={{ top: `${top}px` }} key={`${it.kind}:${it.id}`} role="listitem">
                  <span class="dis">{it.dis}</span>
                  <span class="sub">{it.kind}</span>
                </div>
              );
            }
            const l = live.get(it.id) ?? {};
            const st = l.curStatus || (it.cur ? 'unknown' : '');
            return (
              <a class={`vrow point st-${st}`} style={{ top: `${top}px` }} href={`#/point/${encodeURIComponent(it.id)}`} key={it.id} data-point={it.sub} title={l.curErr || undefined}>
                <span class="names">
                  <span class="dis">{it.dis}</span>
                  <span class="sub">{l.curErr ? l.curErr : it.sub}</span>
                </span>
                <span class="val" data-val>
                  {l.curVal !== undefined && l.curVal !== null ? show(l.curVal) : ''}
                </span>
                {st !== '' && <Status status={st} />}
              </a>
            );
          })}
        </div>
      </div>
    </section>
  );
}
