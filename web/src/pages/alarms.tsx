/**
 * The alarms (docs/alarms.md): the open ones as the `alarms` op answers them (active first, then
 * by priority, then newest), each with its acknowledgement (alarmAck, with a note) and shelving
 * (alarmShelve for a duration, or unshelve); the server's refusal is shown on the alarm it is
 * about. The log (alarmHistory, newest first) below. Read again every five seconds and at once
 * after an action. The banner on every page (AlarmBanner) reads the same op.
 */
import { useEffect, useState } from 'preact/hooks';
import { ApiError, type Row, type Session, field, grid, refDis, refId, show, str } from '../api.js';
import { NotAvailable } from './status.js';

const REFRESH_MS = 5000;
const SHELVE_FOR = [
  ['15min', '15 min'],
  ['1h', '1 hour'],
  ['4h', '4 hours'],
  ['8h', '8 hours (a shift)'],
  ['24h', '24 hours'],
] as const;

/** What an alarm watches, in words: `high limit`, `state`, `status`, `connector down`. */
function condition(a: Row): string {
  const d = str(a.detail);
  return d === 'high' ? 'above high limit' : d === 'low' ? 'below low limit' : d === 'connDown' ? 'connector down' : d === 'status' ? 'point status' : d === 'state' ? 'alarm state' : d;
}

function AlarmStatus({ status }: { status: string }) {
  return <span class={`status a-${status}`}>{status}</span>;
}

/** The link to a source: a point's page, a connector's list. */
function Source({ a }: { a: Row }) {
  const id = refId(a.sourceRef);
  const dis = refDis(a.sourceRef);
  return a.alarmOn === 'connDown' || str(a.detail) === 'connDown' ? <a href="#/connectors">{dis}</a> : <a href={`#/point/${encodeURIComponent(id)}`}>{dis}</a>;
}

function message(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

function AlarmCard({ a, session, onDone }: { a: Row; session: Session; onDone: () => void }) {
  const [err, setErr] = useState('');
  const [busy, setBusy] = useState(false);
  const id = str(a.alarmId);
  const st = str(a.status);

  async function run(op: string, row: Row): Promise<void> {
    setBusy(true);
    setErr('');
    try {
      await session.op(op, grid([{ alarmId: `s:${id}`, ...row }]));
      onDone();
    } catch (e) {
      // The request names one alarm, so the server's `row 0: ` adds nothing; an alarm that closed
      // since the list was read is said in words rather than by its ids.
      setErr(e instanceof ApiError && e.errCode === 'HL_NOT_FOUND' ? 'This alarm is no longer open: it closed since the list was read (see the history below).' : message(e).replace(/^row 0: /, ''));
    } finally {
      setBusy(false);
    }
  }

  function ack(e: Event): void {
    e.preventDefault();
    const note = field(new FormData(e.currentTarget as HTMLFormElement), 'note').trim();
    void run('alarmAck', note === '' ? {} : { note: `s:${note}` });
  }

  function shelve(e: Event): void {
    e.preventDefault();
    const f = new FormData(e.currentTarget as HTMLFormElement);
    const note = field(f, 'note').trim();
    void run('alarmShelve', { duration: `n:${field(f, 'duration').replace(/^(\d+)/, '$1 ')}`, ...(note === '' ? {} : { note: `s:${note}` }) });
  }

  return (
    <li class={`card alarm al-${st}${a.active === true ? ' is-active' : ''}`} data-alarm={id}>
      <div class="alarm-head">
        <span class="prio" title="priority: 1 is the most urgent">
          P{show(a.priority)}
        </span>
        <strong class="alarm-dis">{str(a.dis)}</strong>
        <AlarmStatus status={st} />
      </div>
      <p class="sub">
        <Source a={a} /> · {condition(a)}
        {a.val != null && (
          <>
            {' · '}
            <span class="alarm-val">{show(a.val)}</span>
          </>
        )}
      </p>
      <p class="sub">
        {a.active === true ? 'Active since ' : 'Was active at '}
        {a.activeAt != null ? show(a.activeAt) : 'a time not yet dated (clock untrusted)'}
        {a.active !== true && a.normalAt != null && <> · normal since {show(a.normalAt)}</>}
      </p>
      {a.acked === true && (
        <p class="sub">
          Acknowledged by {str(a.ackBy)}
          {a.ackAt != null && <> at {show(a.ackAt)}</>}
          {str(a.ackNote) !== '' && <>: “{str(a.ackNote)}”</>}
        </p>
      )}
      {a.shelvedUntil != null && (
        <p class="sub">
          Shelved by {str(a.shelvedBy)} until {show(a.shelvedUntil)}
        </p>
      )}
      {err !== '' && (
        <p class="error" role="alert">
          {err}
        </p>
      )}
      <div class="alarm-actions">
        {a.acked !== true && (
          <form class="row" onSubmit={ack} aria-label={`Acknowledge ${str(a.dis)}`}>
            <label class="grow">
              Note
              <input name="note" maxLength={1000} placeholder="optional" />
            </label>
            <button type="submit" disabled={busy}>
              Acknowledge
            </button>
          </form>
        )}
        {a.shelvedUntil != null ? (
          <button type="button" class="secondary" disabled={busy} onClick={() => void run('alarmShelve', { unshelve: 'm:' })}>
            Unshelve
          </button>
        ) : (
          <form class="row" onSubmit={shelve} aria-label={`Shelve ${str(a.dis)}`}>
            <label>
              Shelve for
              <select name="duration">
                {SHELVE_FOR.map(([v, label]) => (
                  <option value={v}>{label}</option>
                ))}
              </select>
            </label>
            <button type="submit" class="secondary" disabled={busy}>
              Shelve
            </button>
          </form>
        )}
      </div>
    </li>
  );
}

export function Alarms({ session }: { session: Session }) {
  const [alarms, setAlarms] = useState<Row[] | undefined>(undefined);
  const [history, setHistory] = useState<Row[]>([]);
  /** Conditions' display names by id, for the history (its condRef carries the record's name). */
  const [conds, setConds] = useState<Map<string, string>>(new Map());
  const [err, setErr] = useState('');
  const [na, setNa] = useState(false);
  const [tick, setTick] = useState(0);

  useEffect(() => {
    let gone = false;
    const load = async (): Promise<void> => {
      try {
        const [a, h, c] = await Promise.all([session.get('alarms'), session.op('alarmHistory', grid([{ limit: 'n:50' }])), session.read('alarmCond')]);
        if (gone) return;
        setAlarms(a.rows);
        setConds(new Map(c.map((x) => [refId(x.id), str(x.dis) || str(x.name)])));
        setHistory(h.rows);
        setErr('');
      } catch (e) {
        if (gone) return;
        if (e instanceof ApiError && e.notAvailable) setNa(true);
        else setErr(message(e));
      }
    };
    void load();
    const timer = setInterval(() => void load(), REFRESH_MS);
    return () => {
      gone = true;
      clearInterval(timer);
    };
  }, [session, tick]);

  if (na) return <NotAvailable what="Alarms" />;
  const active = alarms?.filter((a) => a.active === true).length ?? 0;
  return (
    <section class="alarms">
      <h1>Alarms</h1>
      {err !== '' && (
        <p class="error" role="alert">
          {err}
        </p>
      )}
      {alarms === undefined ? (
        <p class="muted">Loading…</p>
      ) : alarms.length === 0 ? (
        <p class="ok-text" data-no-alarms>
          No open alarms.
        </p>
      ) : (
        <>
          <p class="count-line">
            {alarms.length} open, {active} active · most urgent first
          </p>
          <ul class="alarm-list">
            {alarms.map((a) => (
              <AlarmCard a={a} session={session} key={str(a.alarmId)} onDone={() => setTick((n) => n + 1)} />
            ))}
          </ul>
        </>
      )}
      <h2>History</h2>
      {history.length === 0 ? (
        <p class="muted">Nothing yet.</p>
      ) : (
        <div>
          <table class="grid history" data-history>
            <thead>
              <tr>
                <th>Time</th>
                <th>Event</th>
                <th>Alarm</th>
                <th>Point</th>
                <th>Value</th>
                <th>By</th>
                <th>Note</th>
              </tr>
            </thead>
            <tbody>
              {history.map((h) => (
                // On a phone each row stacks (style.css): the cells' data-label names them.
                <tr class={`ev-${str(h.event)}`}>
                  <td data-label="Time">{h.ts != null ? show(h.ts) : 'not yet dated'}</td>
                  <td data-label="Event">
                    {str(h.event)}
                    {h.until != null && <> until {show(h.until)}</>}
                  </td>
                  <td data-label="Alarm">
                    {conds.get(refId(h.condRef)) ?? (refDis(h.condRef) === refId(h.condRef) ? 'a deleted condition' : refDis(h.condRef))} <span class="muted">P{show(h.priority)}</span>
                  </td>
                  <td data-label="Point">{refDis(h.sourceRef)}</td>
                  <td data-label="Value">{show(h.val)}</td>
                  <td data-label="By">{str(h.user)}</td>
                  <td data-label="Note">{str(h.note)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

/**
 * On every page while an alarm is active (or open and unacknowledged): how many, and a link to
 * the alarms page. Reads `alarms` every five seconds; says nothing on a server without alarms
 * or for a user who may not read them.
 */
export function useAlarmCounts(session: Session): { active: number; unacked: number } | undefined {
  const [counts, setCounts] = useState<{ active: number; unacked: number } | undefined>(undefined);
  useEffect(() => {
    let gone = false;
    let stopped = false;
    const load = async (): Promise<void> => {
      try {
        const rows = (await session.get('alarms')).rows;
        if (!gone) setCounts({ active: rows.filter((a) => a.active === true).length, unacked: rows.filter((a) => a.acked !== true).length });
      } catch (e) {
        // No alarms on this server (404) or not for this user (403): no banner, no more asking.
        if (e instanceof ApiError && (e.status === 404 || e.status === 403)) stopped = true;
        if (!gone) setCounts(undefined);
      }
    };
    void load();
    const timer = setInterval(() => {
      if (!stopped) void load();
    }, REFRESH_MS);
    return () => {
      gone = true;
      clearInterval(timer);
    };
  }, [session, session.impersonating?.id]);
  return counts;
}

export function AlarmBanner({ counts }: { counts: { active: number; unacked: number } | undefined }) {
  if (counts === undefined || (counts.active === 0 && counts.unacked === 0)) return null;
  return (
    <div role="status">
      <a class={`alarm-banner${counts.active > 0 ? ' on' : ''}`} href="#/alarms" data-alarm-banner>
        <span aria-hidden="true">⚠</span>{' '}
        {counts.active > 0 ? `${counts.active} alarm${counts.active === 1 ? '' : 's'} active` : 'No alarm active'}
        {counts.unacked > 0 && `, ${counts.unacked} unacknowledged`} · see Alarms
      </a>
    </div>
  );
}
