/**
 * One point: its live value, every tag, a trend of its history (uPlot: drag to zoom, double-click
 * to zoom out), the history as CSV, and for writable points the priority array with override and
 * release (pointWrite) and the write audit.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { ApiError, type Row, type Session, grid, refDis, refId, show, str } from '../api.js';
import { type Series, loadHistory, rangeText } from '../history.js';
import { LiveWatch } from '../live.js';
import { type Live } from './tree.js';
import { Status } from './status.js';
import { Writes } from './writes.js';
import { Zone } from '../zone.js';

type RangeKey = 'today' | 'yesterday' | 'week' | 'custom';

/** The window of a choice, in ms: days are the point's days (its zone's), as the server's are. */
function windowOf(key: RangeKey, from: string, to: string, zone: Zone): [number, number] {
  const now = Date.now();
  const today = zone.midnight(zone.date(now));
  switch (key) {
    case 'today':
      return [today, now];
    case 'yesterday':
      return [zone.midnight(zone.date(today - 12 * 3_600_000)), today];
    case 'week':
      return [now - 7 * 86_400_000, now];
    case 'custom': {
      // The day after `to` begins at its own midnight (a day is not always 24 hours).
      const end = zone.midnight(zone.date(zone.midnight(to) + 36 * 3_600_000));
      return [zone.midnight(from), Math.min(end, now)];
    }
  }
}

interface ChartProps {
  series: Series;
  unit: string;
  label: string;
  /** The x axis spans the window asked for (seconds), not just the samples in it. */
  span: [number, number];
  /** The axis shows the point's wall-clock time. */
  zone: Zone;
  onZoom: (startMs: number, endMs: number) => void;
  onReset: () => void;
}

function Chart({ series, unit, label, span, zone, onZoom, onReset }: ChartProps) {
  const el = useRef<HTMLDivElement>(null);
  // The handlers change every render; the chart is built once per data.
  const handlers = useRef({ onZoom, onReset });
  handlers.current = { onZoom, onReset };
  useEffect(() => {
    const host = el.current;
    if (host === null) return;
    const width = (): number => Math.max(280, host.clientWidth);
    const band = series.lows !== undefined && series.highs !== undefined;
    const fmt = (v: number | null): string => (v == null ? '' : `${Number.isInteger(v) ? v : v.toFixed(2)}${unit === '' ? '' : ` ${unit}`}`);
    const plot = new uPlot(
      {
        width: width(),
        height: 260,
        scales: { x: { time: true, range: () => span } },
        tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), zone.iana),
        axes: [{ stroke: '#222', grid: { stroke: '#ddd' }, space: 90 }, { stroke: '#222', grid: { stroke: '#ddd' }, size: 64, values: (_u, vals) => vals.map((v) => `${v}${unit === '' ? '' : ` ${unit}`}`) }],
        series: [
          {},
          { label: band ? `${label} (mean)` : label, stroke: '#0a58ca', width: 2, points: { show: false }, value: (_u, v) => fmt(v) },
          ...(band
            ? [
                { label: 'min', stroke: '#8fb3ea', width: 1, points: { show: false }, value: (_u: uPlot, v: number | null) => fmt(v) },
                { label: 'max', stroke: '#8fb3ea', width: 1, points: { show: false }, value: (_u: uPlot, v: number | null) => fmt(v) },
              ]
            : []),
        ],
        bands: band ? [{ series: [3, 2], fill: 'rgba(10, 88, 202, 0.12)' }] : [],
        // A drag selects a stretch of time, which is read again (raw once short enough); the
        // chart does not zoom by itself.
        cursor: { drag: { x: true, y: false, setScale: false } },
        hooks: {
          setSelect: [
            (u) => {
              if (u.select.width < 5) return;
              const a = u.posToVal(u.select.left, 'x');
              const b = u.posToVal(u.select.left + u.select.width, 'x');
              u.setSelect({ left: 0, top: 0, width: 0, height: 0 }, false);
              handlers.current.onZoom(a * 1000, b * 1000);
            },
          ],
        },
        legend: { show: true },
      },
      band ? [series.xs, series.ys, series.lows ?? [], series.highs ?? []] : [series.xs, series.ys],
      host,
    );
    const reset = (): void => handlers.current.onReset();
    plot.over.addEventListener('dblclick', reset);
    // Touch: uPlot follows the mouse only. A sideways drag across the plot selects a stretch as a
    // mouse drag does; an upward or downward one scrolls the page (touch-action: pan-y, style.css).
    const over = plot.over;
    let from: number | undefined;
    const at = (e: PointerEvent): number => Math.min(Math.max(e.clientX - over.getBoundingClientRect().left, 0), over.clientWidth);
    const none = { left: 0, top: 0, width: 0, height: 0 };
    const down = (e: PointerEvent): void => {
      if (e.pointerType !== 'touch') return;
      from = at(e);
      over.setPointerCapture(e.pointerId);
    };
    const move = (e: PointerEvent): void => {
      if (from === undefined) return;
      const x = at(e);
      plot.setSelect({ left: Math.min(x, from), width: Math.abs(x - from), top: 0, height: over.clientHeight }, false);
    };
    const up = (e: PointerEvent): void => {
      if (from === undefined) return;
      const x = at(e);
      const [a, b] = [Math.min(x, from), Math.max(x, from)];
      from = undefined;
      plot.setSelect(none, false);
      if (b - a >= 10) handlers.current.onZoom(plot.posToVal(a, 'x') * 1000, plot.posToVal(b, 'x') * 1000);
    };
    const cancel = (): void => {
      from = undefined;
      plot.setSelect(none, false);
    };
    over.addEventListener('pointerdown', down);
    over.addEventListener('pointermove', move);
    over.addEventListener('pointerup', up);
    over.addEventListener('pointercancel', cancel);
    const ro = new ResizeObserver(() => plot.setSize({ width: width(), height: 260 }));
    ro.observe(host);
    return () => {
      ro.disconnect();
      over.removeEventListener('dblclick', reset);
      over.removeEventListener('pointerdown', down);
      over.removeEventListener('pointermove', move);
      over.removeEventListener('pointerup', up);
      over.removeEventListener('pointercancel', cancel);
      plot.destroy();
    };
  }, [series, unit, label, span[0], span[1], zone]);
  return <div class="chart" ref={el} />;
}

export function PointPage({ session, id }: { session: Session; id: string }) {
  const [rec, setRec] = useState<Row | undefined>(undefined);
  const [err, setErr] = useState('');
  const [live, setLive] = useState<Live>({});
  const [range, setRange] = useState<RangeKey>('today');
  /** The point's zone: its `tz`, else the server's (about); known once the point is read. */
  const [zone, setZone] = useState<Zone | undefined>(undefined);
  const [from, setFrom] = useState('');
  const [to, setTo] = useState('');
  /** The range's window, fixed when it is chosen (ms). */
  const [base, setBase] = useState<[number, number]>([0, 0]);
  /** A stretch dragged across the chart, inside the window. */
  const [zoom, setZoom] = useState<[number, number] | undefined>(undefined);
  const [his, setHis] = useState<Series | undefined>(undefined);
  const [hisErr, setHisErr] = useState('');
  const [loading, setLoading] = useState(false);

  useEffect(() => {
    let watch: LiveWatch | undefined;
    void session
      .readById([id])
      .then((rows) => {
        const r = rows[0];
        if (r === undefined || r.id == null) throw new Error(`no point ${id}`);
        setRec(r);
        setLive({ curVal: r.curVal, curStatus: str(r.curStatus), curErr: str(r.curErr) });
        const tz = str(r.tz);
        const z = tz !== '' ? Promise.resolve(tz) : session.get('about').then((g) => str(g.rows[0]?.tz), () => '');
        void z.then((name) => {
          const zn = Zone.of(name === '' ? undefined : name);
          const now = Date.now();
          const [f, t] = [zn.date(now - 2 * 86_400_000), zn.date(now)];
          setZone(zn);
          setFrom(f);
          setTo(t);
          setBase(windowOf('today', f, t, zn));
        });
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

  const choose = (key: RangeKey, f = from, t = to): void => {
    if (zone === undefined) return;
    setRange(key);
    setBase(windowOf(key, f, t, zone));
    setZoom(undefined);
  };
  const [start, end] = zoom ?? base;
  useEffect(() => {
    if (rec === undefined || rec.his == null || zone === undefined) return;
    let gone = false;
    setHisErr('');
    setLoading(true);
    void loadHistory(session, refId(rec.id), str(rec.kind), start, end)
      .then((s) => !gone && setHis(s))
      .catch((e: unknown) => !gone && setHisErr(e instanceof Error ? e.message : String(e)))
      .finally(() => !gone && setLoading(false));
    return () => {
      gone = true;
    };
  }, [session, rec, zone, start, end]);

  async function csv(): Promise<void> {
    if (rec === undefined) return;
    try {
      const res = await session.fetch('/api/hisRead', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Accept: 'text/csv' },
        body: JSON.stringify(grid([{ id: `r:${refId(rec.id)}`, range: `s:${rangeText(start, end)}` }])),
      });
      const url = URL.createObjectURL(await res.blob());
      const a = document.createElement('a');
      a.href = url;
      a.download = `${str(rec.name) || 'point'}-${zoom === undefined ? range : 'zoom'}.csv`;
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
              <button type="button" class={range === k ? 'on' : ''} aria-pressed={range === k} onClick={() => choose(k)}>
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
                From <input type="date" value={from} max={to} onChange={(e) => {
                    setFrom(e.currentTarget.value);
                    choose('custom', e.currentTarget.value, to);
                  }} />
              </label>
              <label>
                To <input type="date" value={to} min={from} onChange={(e) => {
                    setTo(e.currentTarget.value);
                    choose('custom', from, e.currentTarget.value);
                  }} />
              </label>
            </div>
          )}
          {zone !== undefined && (
            <p class="muted zone" data-zone={zone.iana}>
              Days and times in the point's zone: {zone.iana === 'UTC' ? 'UTC' : `${zone.name.replace(/_/g, ' ')} (${zone.offsetText(end)})`}
            </p>
          )}
          {hisErr !== '' && (
            <p class="error" role="alert">
              {hisErr}
            </p>
          )}
          {his !== undefined && zone !== undefined && (
            <>
              <p class="muted" data-trend={his.bucket === 'raw' ? 'raw' : 'aggregate'}>
                {his.bucket === 'raw' ? `${his.xs.length} samples` : `${his.xs.length} averages of ${his.bucket} with their min and max`}
                {zoom !== undefined && (
                  <>
                    {' · zoomed in · '}
                    <button type="button" class="link" onClick={() => setZoom(undefined)}>
                      Zoom out
                    </button>
                  </>
                )}
                {zoom === undefined && ' · drag across the chart to zoom in'}
                {loading && ' · loading…'}
              </p>
              {his.xs.length > 0 ? (
                <Chart series={his} unit={unit} label={str(rec.dis) || str(rec.name)} span={[start / 1000, end / 1000]} zone={zone} onZoom={(a, b) => setZoom([Math.max(a, base[0]), Math.min(b, base[1])])} onReset={() => setZoom(undefined)} />
              ) : (
                <p class="muted">No history in this range.</p>
              )}
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
