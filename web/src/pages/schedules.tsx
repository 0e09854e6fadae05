/**
 * The schedules (docs/schedules.md): each `schedule` record's week drawn as a grid (a bar per
 * day, midnight to midnight, its value in each stretch), its exceptions, and from the `schedules`
 * op its value now and its next transitions (in its zone), read again every 30 s. **Edit** changes the week's events,
 * the exceptions and the default value through updateRec; the server checks everything and its
 * message is shown under the event, exception or field it names (`weekly[2]`, `exceptions[0]`,
 * `defaultVal`), else above the form.
 */
import { useEffect, useState } from 'preact/hooks';
import { ApiError, type Cell, type Row, type Session, grid, refDis, refId, show, str } from '../api.js';
import { NotAvailable } from './status.js';

const DAYS = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'] as const;
const DAY_NAMES = ['Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday', 'Sunday'];
const DAY_MS = 86_400_000;

type Dict = Record<string, Cell>;

function dicts(v: Cell): Dict[] {
  return Array.isArray(v) ? v.filter((x): x is Dict => x !== null && typeof x === 'object' && !Array.isArray(x)) : [];
}

/** `mon-fri`, `sat,sun`, `mon` as weekday indexes (0 Monday), as the server reads them; [] when it cannot. */
function days(text: string): number[] {
  const out = new Set<number>();
  for (const part of text.split(',').map((s) => s.trim().toLowerCase())) {
    const [a, b] = part.split('-').map((s) => s.trim());
    const i = DAYS.indexOf(a as (typeof DAYS)[number]);
    const j = b === undefined ? i : DAYS.indexOf(b as (typeof DAYS)[number]);
    if (i < 0 || j < 0) return [];
    for (let k = i; ; k = (k + 1) % 7) {
      out.add(k);
      if (k === j) break;
    }
  }
  return [...out];
}

/** A Time cell (`h:07:00:00`) as milliseconds since midnight, or NaN. */
function timeMs(v: Cell): number {
  const m = /^(\d\d):(\d\d)(?::(\d\d))?/.exec(str(v));
  return m === null ? NaN : ((Number(m[1]) * 60 + Number(m[2])) * 60 + Number(m[3] ?? 0)) * 1000;
}

function hhmm(v: Cell): string {
  return str(v).slice(0, 5);
}

interface Stretch {
  from: number;
  to: number;
  val: Cell;
}

/** A day's stretches: defaultVal from midnight, each event's value from its time on. */
function stretches(defaultVal: Cell, events: { at: number; val: Cell }[]): Stretch[] {
  const sorted = events.filter((e) => !Number.isNaN(e.at)).sort((a, b) => a.at - b.at);
  const out: Stretch[] = [];
  let from = 0;
  let val = defaultVal;
  for (const e of sorted) {
    if (e.at > from) out.push({ from, to: e.at, val });
    from = e.at;
    val = e.val;
  }
  out.push({ from, to: DAY_MS, val });
  return out;
}

/** The same value gets the same colour on every day (a class of a small palette). */
function colour(vals: string[], v: Cell): string {
  if (v === true) return 'v-on';
  if (v === false) return 'v-off';
  const s = show(v);
  if (!vals.includes(s)) vals.push(s);
  return `v-${vals.indexOf(s) % 5}`;
}

function DayBar({ label, parts, vals }: { label: string; parts: Stretch[]; vals: string[] }) {
  return (
    <div class="day" data-day={label}>
      <span class="day-name" title={DAY_NAMES[DAYS.indexOf(label as (typeof DAYS)[number])]}>{label}</span>
      <div class="bar-track">
        {parts.map((p) => (
          <span
            class={`seg ${colour(vals, p.val)}`}
            style={{ left: `${(p.from / DAY_MS) * 100}%`, width: `${((p.to - p.from) / DAY_MS) * 100}%` }}
            title={`${fmt(p.from)}–${fmt(p.to)}: ${show(p.val)}`}
          >
            {p.to - p.from >= 2.5 * 3_600_000 ? show(p.val) : ''}
          </span>
        ))}
      </div>
    </div>
  );
}

function fmt(ms: number): string {
  const m = Math.round(ms / 60_000);
  return `${String(Math.floor(m / 60)).padStart(2, '0')}:${String(m % 60).padStart(2, '0')}`;
}

function Week({ rec }: { rec: Row }) {
  const weekly = dicts(rec.weekly);
  const vals: string[] = [];
  return (
    <div class="week" aria-label="The week">
      <div class="day hours" aria-hidden="true">
        <span class="day-name" />
        <div class="bar-track">
          {[0, 6, 12, 18].map((h) => (
            <span class="tick" style={{ left: `${(h / 24) * 100}%` }}>
              {String(h).padStart(2, '0')}:00
            </span>
          ))}
        </div>
      </div>
      {DAYS.map((d, i) => (
        <DayBar
          label={d}
          vals={vals}
          parts={stretches(
            rec.defaultVal,
            weekly.filter((e) => days(str(e.days)).includes(i)).map((e) => ({ at: timeMs(e.time), val: e.val })),
          )}
        />
      ))}
    </div>
  );
}

/** An exception's days in words. */
function when(e: Dict, calendars: Row[]): string {
  if (e.calendarRef != null) {
    const c = calendars.find((x) => refId(x.id) === refId(e.calendarRef));
    return `the dates of ${c !== undefined ? str(c.dis) || str(c.name) : refDis(e.calendarRef)}`;
  }
  if (e.date != null) return str(e.date);
  return `${str(e.start)} to ${str(e.end)}`;
}

function eventsText(e: Dict): string {
  const ev = dicts(e.events);
  return ev.length === 0 ? '' : ev.map((x) => `${hhmm(x.time)} ${show(x.val)}`).join(', ');
}

// ---- editing ----------------------------------------------------------------------------------

interface WeekDraft {
  days: string;
  time: string;
  val: string;
}
interface ExDraft {
  type: 'date' | 'range' | 'calendar';
  date: string;
  start: string;
  end: string;
  cal: string;
  events: string;
}

/** A typed value as the Haystack JSON of the schedule's kind; a string starting `!` says what is wrong. */
function encodeVal(kind: string, text: string): Cell | Error {
  const t = text.trim();
  if (kind === 'Bool') {
    if (/^(true|t|on)$/i.test(t)) return true;
    if (/^(false|f|off)$/i.test(t)) return false;
    return new Error(`"${t}" is not true or false`);
  }
  if (kind === 'Number') {
    const m = /^(-?\d+(?:\.\d+)?)\s*(\S*)$/.exec(t);
    return m === null ? new Error(`"${t}" is not a number (70, or 70 %)`) : `n:${m[1]}${m[2] === '' ? '' : ` ${m[2]}`}`;
  }
  return `s:${t}`;
}

/** `07:00 true, 12:00 false` as event Dicts. */
function parseEvents(kind: string, text: string): Dict[] | Error {
  const out: Dict[] = [];
  for (const part of text.split(',').map((s) => s.trim()).filter((s) => s !== '')) {
    const m = /^(\d{1,2}):(\d\d)\s+(.+)$/.exec(part);
    if (m === null) return new Error(`"${part}" is not "HH:MM value" (07:00 ${kind === 'Bool' ? 'true' : kind === 'Number' ? '21' : 'occupied'})`);
    const val = encodeVal(kind, m[3] ?? '');
    if (val instanceof Error) return val;
    out.push({ time: `h:${(m[1] ?? '').padStart(2, '0')}:${m[2]}:00`, val });
  }
  return out;
}

function valText(v: Cell): string {
  return v === true ? 'true' : v === false ? 'false' : show(v);
}

/** Where a server message belongs: `weekly[2]` -> w2, `exceptions[0]` -> e0, `defaultVal` -> default. */
function placeOf(text: string): string | undefined {
  const w = /\bweekly\[(\d+)\]/.exec(text);
  if (w !== null) return `w${w[1]}`;
  const e = /\bexceptions\[(\d+)\]/.exec(text);
  if (e !== null) return `e${e[1]}`;
  if (/\bdefaultVal\b/.test(text)) return 'default';
  return undefined;
}

function Editor({ session, rec, calendars, onSaved, onCancel }: { session: Session; rec: Row; calendars: Row[]; onSaved: () => void; onCancel: () => void }) {
  const kind = str(rec.kind);
  const [def, setDef] = useState(valText(rec.defaultVal));
  const [week, setWeek] = useState<WeekDraft[]>(dicts(rec.weekly).map((e) => ({ days: str(e.days), time: hhmm(e.time), val: valText(e.val) })));
  const [ex, setEx] = useState<ExDraft[]>(
    dicts(rec.exceptions).map((e) => ({
      type: e.calendarRef != null ? 'calendar' : e.date != null ? 'date' : 'range',
      date: str(e.date),
      start: str(e.start),
      end: str(e.end),
      cal: refId(e.calendarRef),
      events: eventsText(e),
    })),
  );
  const [err, setErr] = useState<{ at: string | undefined; text: string } | undefined>(undefined);
  const [busy, setBusy] = useState(false);

  const setW = (i: number, k: keyof WeekDraft, v: string): void => setWeek(week.map((w, j) => (j === i ? { ...w, [k]: v } : w)));
  const setE = (i: number, k: keyof ExDraft, v: string): void => setEx(ex.map((w, j) => (j === i ? { ...w, [k]: v } : w)));
  const errAt = (at: string) =>
    err?.at === at ? (
      <span class="field-error" role="alert">
        {err.text}
      </span>
    ) : null;

  async function save(e: Event): Promise<void> {
    e.preventDefault();
    setErr(undefined);
    // What the browser can tell before asking: a value that is not of the schedule's kind.
    const defaultVal = encodeVal(kind, def);
    if (defaultVal instanceof Error) return setErr({ at: 'default', text: defaultVal.message });
    const weekly: Dict[] = [];
    for (const [i, w] of week.entries()) {
      const val = encodeVal(kind, w.val);
      if (val instanceof Error) return setErr({ at: `w${i}`, text: val.message });
      weekly.push({ days: `s:${w.days}`, time: w.time === '' ? 's:' : `h:${w.time}:00`, val });
    }
    const exceptions: Dict[] = [];
    for (const [i, x] of ex.entries()) {
      const events = parseEvents(kind, x.events);
      if (events instanceof Error) return setErr({ at: `e${i}`, text: events.message });
      const d: Dict = x.type === 'calendar' ? { calendarRef: `r:${x.cal}` } : x.type === 'date' ? { date: `d:${x.date}` } : { start: `d:${x.start}`, end: `d:${x.end}` };
      exceptions.push({ ...d, events });
    }
    setBusy(true);
    try {
      await session.op('updateRec', grid([{ id: `r:${refId(rec.id)}`, defaultVal, weekly, exceptions }]));
      onSaved();
    } catch (x) {
      const text = x instanceof Error ? x.message : String(x);
      const at = placeOf(text);
      // Under its event or field the place is plain: `schedule @id: weekly[0]: "x" is not a day` -> `"x" is not a day`.
      setErr({ at, text: at === undefined ? text : text.replace(/^schedule @\S*\s*:\s*(weekly\[\d+\]|exceptions\[\d+\](\.events(\[\d+\])?)?)?:?\s*/, '') });
    } finally {
      setBusy(false);
    }
  }

  const valHint = kind === 'Bool' ? 'true or false' : kind === 'Number' ? 'a number' : 'a value';
  return (
    <form class="sched-edit stack" onSubmit={(e) => void save(e)} aria-label={`Edit ${str(rec.dis) || str(rec.name)}`}>
      {err !== undefined && err.at === undefined && (
        <p class="error" role="alert">
          {err.text}
        </p>
      )}
      <label>
        Value at midnight (defaultVal, {valHint})
        <input name="defaultVal" value={def} onInput={(e) => setDef(e.currentTarget.value)} aria-invalid={err?.at === 'default'} />
        {errAt('default')}
      </label>
      <fieldset>
        <legend>The week's events</legend>
        {week.map((w, i) => (
          <div class="event-row" data-event={i}>
            <div class="row">
              <label>
                Days
                <input value={w.days} placeholder="mon-fri" onInput={(e) => setW(i, 'days', e.currentTarget.value)} aria-invalid={err?.at === `w${i}`} />
              </label>
              <label>
                Time
                <input type="time" value={w.time} onInput={(e) => setW(i, 'time', e.currentTarget.value)} />
              </label>
              <label>
                Value
                <input value={w.val} placeholder={valHint} onInput={(e) => setW(i, 'val', e.currentTarget.value)} />
              </label>
              <button type="button" class="secondary small" onClick={() => setWeek(week.filter((_, j) => j !== i))}>
                Remove
              </button>
            </div>
            {errAt(`w${i}`)}
          </div>
        ))}
        <button type="button" class="secondary" onClick={() => setWeek([...week, { days: 'mon-fri', time: '07:00', val: '' }])}>
          Add an event
        </button>
      </fieldset>
      <fieldset>
        <legend>Exceptions (the first that covers a day wins)</legend>
        {ex.map((x, i) => (
          <div class="event-row" data-exception={i}>
            <div class="row">
              <label>
                On
                <select value={x.type} onChange={(e) => setE(i, 'type', e.currentTarget.value)}>
                  <option value="date">a date</option>
                  <option value="range">dates from … to</option>
                  <option value="calendar">a calendar's dates</option>
                </select>
              </label>
              {x.type === 'date' && (
                <label>
                  Date
                  <input type="date" value={x.date} onInput={(e) => setE(i, 'date', e.currentTarget.value)} />
                </label>
              )}
              {x.type === 'range' && (
                <>
                  <label>
                    From
                    <input type="date" value={x.start} onInput={(e) => setE(i, 'start', e.currentTarget.value)} />
                  </label>
                  <label>
                    To
                    <input type="date" value={x.end} onInput={(e) => setE(i, 'end', e.currentTarget.value)} />
                  </label>
                </>
              )}
              {x.type === 'calendar' && (
                <label>
                  Calendar
                  <select value={x.cal} onChange={(e) => setE(i, 'cal', e.currentTarget.value)}>
                    <option value="">choose…</option>
                    {calendars.map((c) => (
                      <option value={refId(c.id)}>{str(c.dis) || str(c.name)}</option>
                    ))}
                  </select>
                </label>
              )}
            </div>
            <div class="row">
              <label class="grow">
                Events (empty: the value at midnight all day)
                <input value={x.events} placeholder={`07:00 ${kind === 'Bool' ? 'true' : '21'}, 12:00 ${kind === 'Bool' ? 'false' : '16'}`} onInput={(e) => setE(i, 'events', e.currentTarget.value)} aria-invalid={err?.at === `e${i}`} />
              </label>
              <button type="button" class="secondary small" onClick={() => setEx(ex.filter((_, j) => j !== i))}>
                Remove
              </button>
            </div>
            {errAt(`e${i}`)}
          </div>
        ))}
        <button type="button" class="secondary" onClick={() => setEx([...ex, { type: 'date', date: '', start: '', end: '', cal: '', events: '' }])}>
          Add an exception
        </button>
      </fieldset>
      <div class="row">
        <button type="submit" disabled={busy}>
          Save
        </button>
        <button type="button" class="secondary" onClick={onCancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}

// ---- the page ---------------------------------------------------------------------------------

function ScheduleCard({ session, rec, state, calendars, onSaved }: { session: Session; rec: Row; state: Row | undefined; calendars: Row[]; onSaved: () => void }) {
  const [editing, setEditing] = useState(false);
  const exceptions = dicts(rec.exceptions);
  const next = dicts(state?.next);
  return (
    <li class="card sched" data-schedule={str(rec.name)}>
      <div class="conn-head">
        <strong>{str(rec.dis) || str(rec.name)}</strong>
        {rec.disabled != null ? <span class="status s-disabled">disabled</span> : state !== undefined && <span class="now-val" data-now>now {show(state.val)}</span>}
      </div>
      <p class="sub">
        {str(rec.kind)} · level {state !== undefined ? show(state.priority) : str(rec.priority) || '16'} · {state !== undefined ? `zone ${str(state.tz)}` : ''}
        {' · '}commands {Array.isArray(rec.pointRefs) && rec.pointRefs.length > 0 ? rec.pointRefs.map((p, i) => (
          <>
            {i > 0 && ', '}
            <a href={`#/point/${encodeURIComponent(refId(p))}`}>{refDis(p)}</a>
          </>
        )) : 'no points'}
      </p>
      {editing ? (
        <Editor
          session={session}
          rec={rec}
          calendars={calendars}
          onCancel={() => setEditing(false)}
          onSaved={() => {
            setEditing(false);
            onSaved();
          }}
        />
      ) : (
        <>
          <Week rec={rec} />
          <h3>Exceptions</h3>
          {exceptions.length === 0 ? (
            <p class="muted">None: every day follows the week.</p>
          ) : (
            <ul class="exceptions">
              {exceptions.map((e) => (
                <li>
                  <strong>{when(e, calendars)}</strong>: {eventsText(e) || `${valText(rec.defaultVal)} all day`}
                </li>
              ))}
            </ul>
          )}
          <h3>Next transitions</h3>
          {next.length === 0 ? (
            <p class="muted">None within a year.</p>
          ) : (
            <ol class="next" data-next>
              {next.map((n) => (
                <li>
                  {show(n.ts)} → <strong>{show(n.val)}</strong>
                </li>
              ))}
            </ol>
          )}
          <button type="button" class="secondary" onClick={() => setEditing(true)}>
            Edit
          </button>
        </>
      )}
    </li>
  );
}

export function Schedules({ session }: { session: Session }) {
  const [recs, setRecs] = useState<Row[] | undefined>(undefined);
  const [states, setStates] = useState<Map<string, Row>>(new Map());
  const [calendars, setCalendars] = useState<Row[]>([]);
  const [err, setErr] = useState('');
  const [na, setNa] = useState(false);
  const [tick, setTick] = useState(0);

  useEffect(() => {
    let gone = false;
    const load = async (): Promise<void> => {
      try {
        const [r, s, c] = await Promise.all([session.read('schedule'), session.op('schedules', grid([{ count: 'n:6' }])), session.read('calendar')]);
        if (gone) return;
        setRecs(r.sort((a, b) => (str(a.dis) || str(a.name)).localeCompare(str(b.dis) || str(b.name))));
        setStates(new Map(s.rows.map((x) => [refId(x.id), x])));
        setCalendars(c);
      } catch (e) {
        if (gone) return;
        if (e instanceof ApiError && e.notAvailable) setNa(true);
        else setErr(e instanceof Error ? e.message : String(e));
      }
    };
    void load();
    // The value now and the next transitions move on by themselves: read them again each half
    // minute (an open editor keeps what is being typed: its state is its own).
    const timer = setInterval(() => void load(), 30_000);
    return () => {
      gone = true;
      clearInterval(timer);
    };
  }, [session, tick]);

  if (na) return <NotAvailable what="Schedules" />;
  return (
    <section class="schedules">
      <h1>Schedules</h1>
      {err !== '' && (
        <p class="error" role="alert">
          {err}
        </p>
      )}
      {recs === undefined ? (
        <p class="muted">Loading…</p>
      ) : recs.length === 0 ? (
        <p class="muted">No schedules yet: a schedule is a record with the schedule marker (docs/schedules.md).</p>
      ) : (
        <ul class="sched-list">
          {recs.map((r) => (
            <ScheduleCard session={session} rec={r} state={states.get(refId(r.id))} calendars={calendars} key={refId(r.id)} onSaved={() => setTick((n) => n + 1)} />
          ))}
        </ul>
      )}
    </section>
  );
}
