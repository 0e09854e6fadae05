/**
 * One point: its live value, every tag, a trend of its history (uPlot: drag to zoom, double-click
 * to zoom out), the history as CSV, and for writable points the priority array with override and
 * release (pointWrite) and the write audit.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { ApiError, type Row, type Session, grid, num, refDis, refId, show, str, time } from '../api.js';
import { LiveWatch } from '../live.js';
import { type Live } from './tree.js';
import { Status } from './status.js';
import { Writes } from './writes.js';

type RangeKey = 'today' | 'yesterday' | 'week' | 'custom';

function isoDate(d: Date): string {
  return `${d.getFullYear()}-${String(d.getMonth() + 1).padStart(2, '0')}-${String(d.getDate()).padStart(2, '0')}`;
}

/** The hisRead range text of a choice (wire: interface.md range grammar). */
function rangeOf(key: RangeKey, from: string, to: string): string {
  switch (key) {
    case 'today':
    case 'yesterday':
      return key;
    case 'week': {
      const start = new Date(Date.now() - 7 * 86_400_000);
      return `${start.toISOString().slice(0, 19)}Z UTC`;
    }
    case 'custom':
      return `${from},${to}`;
  }
}

function Chart({ data, unit, label, span }: { data: [number[], number[]]; unit: string; label: string; span: [number, number] | undefined }) {
  const el = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const host = el.current;
    if (host === null) return;
    const width = (): number => Math.max(280, host.clientWidth);
    const plot = new uPlot(
      {
        width: width(),
        height: 260,
        // The x axis spans the range asked for (hisStart to hisEnd), not just the samples: one
        // sample alone would otherwise stretch the axis over years.
        scales: { x: span === undefined ? { time: true } : { time: true, range: (_u, min, max) => (min === max || min < span[0] || max > span[1] ? span : [min, max]) } },
        axes: [{ stroke: '#222', grid: { stroke: '#ddd' }, space: 90 }, { stroke: '#222', grid: { stroke: '#ddd' }, size: 60, values: (_u, vals) => vals.map((v) => `${v}${unit === '' ? '' : ` ${unit}`}`) }],
        series: [{}, { label, stroke: '#0a58ca', width: 2, points: { show: false } }],
        cursor: { drag: { x: true, y: false } },
        legend: { show: true },
      },
      data,
      host,
    );
    const ro = new ResizeObserver(() => plot.setSize({ width: width(), height: 260 }));
    ro.observe(host);
    return () => {
      ro.disconnect();
      plot.destroy();
    };
  }, [data, unit, label, span]);
  return <div class="chart" ref={el} />;
}

export function PointPage({ session, id }: { session: Session; id: string }) {
  const [rec, setRec] = useState<Row | undefined>(undefined);
  const [err, setErr] = useState('');
  const [live, setLive] = useState<Live>({});
  const [range, setRange] = useState<RangeKey>('today');
  const today = isoDate(new Date());
  const [from, setFrom] = useState(isoDate(new Date(Date.now() - 2 * 86_400_000)));
  const [to, setTo] = useState(today);
  const [his, setHis] = useState<{ data: [number[], number[]]; count: number; span: [number, number] | undefined } | undefined>(undefined);
  const [hisErr, setHisErr] = useState('');

  useEffect(() => {
    let watch: LiveWatch | undefined;
    void session
      .readById([id])
      .then((rows) => {
        const r = rows[0];
        if (r === undefined || r.id == null) throw new Error(`no point ${id}`);
        setRec(r);
        setLive({ curVal: r.curVal, curStatus: str(r.curStatus), curErr: str(r.curErr) });
        if (r.cur != null) {
          watch = new LiveWatch(session, [refId(r.id)], (rows) => {
            const x = rows[0];
            if (x !== undefined) setLive({ curVal: x.curVal, curStatus: str(x.curStatus), curErr: str(x.curErr) });
          }, () => undefined);
          void watch.start();
        }
      })
      .catch((e: unknown) => setErr(e instanceof Error ? e.message : String(e)));
    return () => watch?.stop();
  }, [session, id]);

  const rangeText = rangeOf(range, from, to);
  useEffect(() => {
    if (rec === undefined || rec.his == null) return;
    let gone = false;
    setHisErr('');
    void session
      .op('hisRead', grid([{ id: `r:${refId(rec.id)}`, range: `s:${rangeText}` }]))
      .then((g) => {
        if (gone) return;
        const xs: number[] = [];
        const ys: number[] = [];
        for (const r of g.rows) {
          const t = time(r.ts);
          const v = r.val === true ? 1 : r.val === false ? 0 : num(r.val)?.val;
          if (t === undefined || v === undefined) continue;
          xs.push(t / 1000);
          ys.push(v);
        }
        const start = time(g.meta.hisStart);
        const end = time(g.meta.hisEnd);
        const span: [number, number] | undefined = start !== undefined && end !== undefined ? [start / 1000, Math.min(end, Date.now()) / 1000] : undefined;
        setHis({ data: [xs, ys], count: xs.length, span });
      })
      .catch((e: unknown) => !gone && setHisErr(e instanceof Error ? e.message : String(e)));
    return () => {
      gone = true;
    };
  }, [session, rec, rangeText]);

  async function csv(): Promise<void> {
    if (rec === undefined) return;
    try {
      const res = await session.fetch('/api/hisRead', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Accept: 'text/csv' },
        body: JSON.stringify(grid([{ id: `r:${refId(rec.id)}`, range: `s:${rangeText}` }])),
      });
      const url = URL.createObjectURL(await res.blob());
      const a = document.createElement('a');
      a.href = url;
      a.download = `${str(rec.name) || 'point'}-${range}.csv`;
      a.click();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
    } catch (e) {
      setHisErr(e instanceof ApiError || e instanceof Error ? e.message : String(e));
    }
  }

  if (err !== '')
    return (
      <p class="error" role="alert">
        {err}
      </p>
    );
  if (rec === undefined) return <p class="muted">Loading…</p>;
  const unit = str(rec.unit);
  const st = live.curStatus || '';
  const tags = Object.entries(rec)
    .filter(([k]) => !['curVal', 'curStatus', 'curErr'].includes(k))
    .sort(([a], [b]) => a.localeCompare(b));
  return (
    <section class="point">
      <p class="crumbs">
        <a href="#/points">Points</a>
        {rec.siteRef != null && ` › ${refDis(rec.siteRef)}`}
        {rec.equipRef != null && ` › ${refDis(rec.equipRef)}`} › {str(rec.name) || refId(rec.id)}
      </p>
      <h1>{str(rec.dis) || str(rec.name)}</h1>
      <div class="now">
        <span class="big" data-val>
          {live.curVal != null ? show(live.curVal) : '—'}
        </span>
        {st !== '' && <Status status={st} />}
        {live.curErr !== undefined && live.curErr !== '' && <span class="err-text">{live.curErr}</span>}
      </div>
      <p>
        <a href={`#/edit/${encodeURIComponent(refId(rec.id))}`}>Edit this point</a>
      </p>
      {rec.his != null && (
        <div class="card">
          <h2>Trend</h2>
          <div class="ranges" role="group" aria-label="Range">
            {(
              [
                ['today', 'Today'],
                ['yesterday', 'Yesterday'],
                ['week', 'Last 7 days'],
                ['custom', 'Custom'],
              ] as const
            ).map(([k, label]) => (
              <button type="button" class={range === k ? 'on' : ''} aria-pressed={range === k} onClick={() => setRange(k)}>
                {label}
              </button>
            ))}
            <button type="button" onClick={() => void csv()}>
              Download CSV
            </button>
          </div>
          {range === 'custom' && (
            <div class="row custom">
              <label>
                From <input type="date" value={from} max={to} onChange={(e) => setFrom(e.currentTarget.value)} />
              </label>
              <label>
                To <input type="date" value={to} min={from} onChange={(e) => setTo(e.currentTarget.value)} />
              </label>
            </div>
          )}
          {hisErr !== '' && (
            <p class="error" role="alert">
              {hisErr}
            </p>
          )}
          {his !== undefined && (
            <>
              <p class="muted">
                {his.count} samples · drag across the chart to zoom, double-click to zoom out
              </p>
              {his.count > 0 ? <Chart data={his.data} unit={unit} label={str(rec.dis) || str(rec.name)} span={his.span} /> : <p class="muted">No history in this range.</p>}
            </>
          )}
        </div>
      )}
      {rec.writable != null && <Writes session={session} id={refId(rec.id)} rec={rec} />}
      <div class="card">
        <h2>Tags</h2>
        <table class="tags">
          <tbody>
            {tags.map(([k, v]) => (
              <tr>
                <th scope="row">{k}</th>
                <td>{show(v)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </section>
  );
}
