/**
 * Every connector (of every driver the server has: the `drivers` op) with its connStatus and connErr, when it was last polled and
 * last answered (connLastPoll, connLastOk), its points counted by
 * curStatus, and a switch to disable or enable it (the `disabled` marker, through updateRec).
 * Refreshed every five seconds, so a device that goes down shows at a glance.
 */
import { useEffect, useState } from 'preact/hooks';
import { type Row, type Session, ago, grid, refId, str, time } from '../api.js';
import { type DriverKind, connFilter, connOfPoint, driverOf, loadDrivers } from '../drivers.js';
import { Status } from './status.js';

/** When the connector was last polled (connLastPoll) and, when that went unanswered, when the device last answered (connLastOk). */
function Polled({ conn }: { conn: Row }) {
  const poll = time(conn.connLastPoll);
  const okAt = time(conn.connLastOk);
  if (poll === undefined) return <p class="sub">Not polled yet</p>;
  return (
    <p class="sub polled" data-last-poll={new Date(poll).toISOString()}>
      Last polled <time dateTime={new Date(poll).toISOString()} title={new Date(poll).toLocaleString()}>{ago(poll)}</time>
      {okAt !== poll && (
        <>
          {' · '}
          <strong class="err-text">{okAt === undefined ? 'never answered' : <>last answered <time dateTime={new Date(okAt).toISOString()} title={new Date(okAt).toLocaleString()}>{ago(okAt)}</time></>}</strong>
        </>
      )}
    </p>
  );
}

export function Connectors({ session }: { session: Session }) {
  const [conns, setConns] = useState<Row[] | undefined>(undefined);
  const [kinds, setKinds] = useState<DriverKind[]>([]);
  const [counts, setCounts] = useState<Map<string, Record<string, number>>>(new Map());
  const [err, setErr] = useState('');
  const [tick, setTick] = useState(0);

  useEffect(() => {
    let gone = false;
    let drivers: DriverKind[] | undefined;
    const load = async (): Promise<void> => {
      try {
        drivers ??= await loadDrivers(session);
        setKinds(drivers);
        const filter = connFilter(drivers);
        const [c, points] =
          filter === undefined ? [[], []] : await Promise.all([session.read(filter), session.read(`point and (${drivers.map((d) => d.refTag).join(' or ')})`)]);
        if (gone) return;
        const m = new Map<string, Record<string, number>>();
        for (const p of points) {
          const connId = connOfPoint(drivers, p);
          if (connId === undefined) continue;
          const by = m.get(connId) ?? {};
          const st = str(p.curStatus) || 'unknown';
          by[st] = (by[st] ?? 0) + 1;
          m.set(connId, by);
        }
        setConns(c.sort((a, b) => (str(a.dis) || str(a.name)).localeCompare(str(b.dis) || str(b.name))));
        setCounts(m);
        setErr('');
      } catch (e) {
        if (!gone) setErr(e instanceof Error ? e.message : String(e));
      }
    };
    void load();
    const timer = setInterval(() => void load(), 5000);
    return () => {
      gone = true;
      clearInterval(timer);
    };
  }, [session, tick]);

  async function toggle(c: Row): Promise<void> {
    try {
      await session.op('updateRec', grid([{ id: `r:${refId(c.id)}`, disabled: c.disabled != null ? '-:' : 'm:' }]));
      setTick((n) => n + 1);
    } catch (e) {
      setErr(e instanceof Error ? e.message : String(e));
    }
  }

  return (
    <section>
      <h1>Connectors</h1>
      {err !== '' && (
        <p class="error" role="alert">
          {err}
        </p>
      )}
      {conns === undefined ? (
        <p class="muted">Loading…</p>
      ) : conns.length === 0 ? (
        <p class="muted">No connectors yet: add one on the Discovery or Edit page.</p>
      ) : (
        <ul class="cards">
          {conns.map((c) => {
            const st = str(c.connStatus) || (c.disabled != null ? 'disabled' : 'unknown');
            const by = counts.get(refId(c.id)) ?? {};
            return (
              <li class={`card conn st-${st}`} data-conn={str(c.name)}>
                <div class="conn-head">
                  <strong>{str(c.dis) || str(c.name)}</strong>
                  <Status status={st} />
                </div>
                <p class="sub">
                  {driverOf(kinds, c)?.dis} · {str(c.uri) || str(c.bacnetDevice) || refId(c.id)}
                  {c.pollTime != null && ` · every ${str(c.pollTime).replace(/^([\d.]+)\s*/, '$1 ')}`}
                </p>
                {str(c.connErr) !== '' && <p class="err-text">{str(c.connErr)}</p>}
                <Polled conn={c} />
                <p class="counts">
                  {Object.keys(by).length === 0
                    ? 'no points'
                    : Object.entries(by)
                        .sort()
                        .map(([s, n]) => (
                          <span class={`status s-${s}`}>
                            {n} {s}
                          </span>
                        ))}
                </p>
                <button type="button" class="secondary" onClick={() => void toggle(c)}>
                  {c.disabled != null ? 'Enable' : 'Disable'}
                </button>
              </li>
            );
          })}
        </ul>
      )}
    </section>
  );
}
