/**
 * The gateway itself: health (ok, degraded or unavailable, and why), the clock (whether it can date
 * history: docs/clock.md), version, the last `hayloft update` (docs/updates.md: its result and when
 * from /api/health, its versions and why from `about`), uptime, store size and uplink backlog (from /api/health,
 * about and /metrics), a backup download and the users and roles (for administrators, as the
 * server allows), impersonation, and changing one's own password.
 */
import { useEffect, useState } from 'preact/hooks';
import { type Row, type Session, field, refDis, refId, show, str } from '../api.js';
import { Status } from './status.js';

interface Health {
  ok: boolean;
  /** `ok`, `degraded` (works partly: still 200) or `unavailable`. */
  status: string;
  uptimeSeconds: number;
  storage: { status: string; sizeBytes?: number };
  /** What is wrong, one line per part (a degraded or unavailable gateway). */
  reasons?: string[];
  /** Absent on servers from before the clock was watched. */
  clockStatus?: string;
  /** Each part's detail: the clock's says whether it is trusted and why not. */
  parts?: { clock?: { trusted?: boolean; reason?: string }; update?: { lastUpdate?: { result: string; at: string } | null } };
}

/**
 * An update's result in words: `ok`, `rolled-back` (the new version failed its health check),
 * `recovered` (an interrupted update undone or finished), `refused` (the artifact was refused:
 * nothing changed).
 */
const UPDATE_RESULT: Record<string, string> = { ok: 'updated', 'rolled-back': 'rolled back', recovered: 'recovered', refused: 'refused' };

/**
 * The last update: the result and when from /api/health (which answers anyone, so says no
 * versions), the versions and why from `about` (logged in). Servers without the update part show nothing.
 */
function LastUpdate({ health, about }: { health: Health | undefined; about: Row | undefined }) {
  const h = health?.parts?.update;
  if (h === undefined) return null;
  const last = h.lastUpdate;
  const result = about?.updateResult !== undefined ? str(about.updateResult) : last?.result;
  return (
    <>
      <dt>Last update</dt>
      <dd class="last-update" data-result={result ?? 'none'}>
        {result === undefined ? (
          <span class="muted">none since this release was installed</span>
        ) : (
          <>
            <span class={`status s-update-${result}`}>{UPDATE_RESULT[result] ?? result}</span>
            {about?.updateFrom !== undefined && str(about.updateTo) !== '' && (
              <span class="update-versions">
                {' '}
                {str(about.updateFrom)} → {str(about.updateTo)}
              </span>
            )}
            <span class="update-at muted">{about?.updateAt !== undefined ? show(about.updateAt) : last !== null && last !== undefined ? new Date(last.at).toLocaleString() : ''}</span>
            {about?.updateMessage !== undefined && <span class="update-message">{str(about.updateMessage)}</span>}
          </>
        )}
      </dd>
    </>
  );
}

/** A clock status as the Status badge shows it: trusted ones look ok, the others stale (history is held). */
function clockBadge(s: string, trusted: boolean | undefined): string {
  return s === 'ok' ? 'ok' : trusted === true ? 'stepped' : 'untrusted';
}

function duration(s: number): string {
  const d = Math.floor(s / 86400);
  const h = Math.floor((s % 86400) / 3600);
  const m = Math.floor((s % 3600) / 60);
  return d > 0 ? `${d} d ${h} h` : h > 0 ? `${h} h ${m} min` : `${m} min ${s % 60} s`;
}

function bytes(n: number): string {
  return n >= 1 << 20 ? `${(n / (1 << 20)).toFixed(1)} MB` : `${(n / 1024).toFixed(0)} KB`;
}

/** A gauge's value from the Prometheus text, summed over its labels; undefined when absent. */
function metric(text: string, name: string): number | undefined {
  let sum: number | undefined;
  for (const line of text.split('\n')) {
    if (line.startsWith(`${name}{`) || line.startsWith(`${name} `)) sum = (sum ?? 0) + Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return sum;
}

export function System({ session, onImpersonate }: { session: Session; onImpersonate: () => void }) {
  const [health, setHealth] = useState<Health | undefined>(undefined);
  const [about, setAbout] = useState<Row | undefined>(undefined);
  const [backlog, setBacklog] = useState<number | undefined | null>(null);
  const [users, setUsers] = useState<Row[] | string | undefined>(undefined);
  const [roles, setRoles] = useState<Row[]>([]);
  const [msg, setMsg] = useState('');
  const [err, setErr] = useState('');

  useEffect(() => {
    void fetch('/api/health')
      .then((r) => r.json() as Promise<Health>)
      .then(setHealth)
      .catch((e: unknown) => setErr(String(e)));
    void session
      .get('about')
      .then((g) => setAbout(g.rows[0]))
      .catch((e: unknown) => setErr(e instanceof Error ? e.message : String(e)));
    void session
      .fetch('/metrics')
      .then((r) => r.text())
      .then((t) => setBacklog(metric(t, 'hayloft_uplink_backlog_samples')))
      .catch(() => setBacklog(undefined));
    void Promise.all([session.read('user'), session.read('role')])
      .then(([u, r]) => {
        setUsers(u);
        setRoles(r);
      })
      .catch((e: unknown) => setUsers(e instanceof Error ? e.message : String(e)));
  }, [session, session.impersonating]);

  async function backup(): Promise<void> {
    setErr('');
    try {
      const res = await session.fetch('/api/backup', { headers: { Accept: 'application/gzip' } });
      const name = /filename="([^"]+)"/.exec(res.headers.get('Content-Disposition') ?? '')?.[1] ?? 'hayloft.backup.gz';
      const url = URL.createObjectURL(await res.blob());
      const a = document.createElement('a');
      a.href = url;
      a.download = name;
      a.click();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
    } catch (e) {
      setErr(e instanceof Error ? e.message : String(e));
    }
  }

  async function password(e: Event): Promise<void> {
    e.preventDefault();
    const form = e.currentTarget as HTMLFormElement;
    const f = new FormData(form);
    setMsg('');
    setErr('');
    if (f.get('p1') !== f.get('p2')) {
      setErr('The two passwords differ.');
      return;
    }
    try {
      const res = await session.fetch('/api/updatePassword', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Accept: 'text/plain' },
        body: JSON.stringify({ newPassword: field(f, 'p1') }),
      });
      setMsg((await res.text()) || 'Password changed.');
      form.reset();
    } catch (x) {
      setErr(x instanceof Error ? x.message : String(x));
    }
  }

  const roleName = (ref: unknown): string => {
    const r = roles.find((x) => refId(x.id) === refId(ref as string));
    return r !== undefined ? str(r.dis) || str(r.name) : refDis(ref as string);
  };

  return (
    <section class="system">
      <h1>System</h1>
      {err !== '' && (
        <p class="error" role="alert">
          {err}
        </p>
      )}
      {msg !== '' && <p class="ok-text">{msg}</p>}
      <div class="card">
        <h2>Health</h2>
        <dl class="facts">
          <dt>Status</dt>
          <dd class="health-status" data-status={health?.status}>
            {health === undefined ? (
              '…'
            ) : (
              <>
                {/* ok, degraded (working, partly: still 200) or unavailable, each in its own colour. */}
                <Status status={health.status} tone={!health.ok ? 'down' : health.status === 'ok' ? 'ok' : 'stale'} />
                {health.reasons !== undefined && health.reasons.length > 0 && (
                  <ul class="health-reasons">
                    {health.reasons.map((r) => (
                      <li>{r}</li>
                    ))}
                  </ul>
                )}
              </>
            )}
          </dd>
          <dt>Clock</dt>
          <dd class="clock" data-clock={health?.clockStatus}>
            {health?.clockStatus === undefined ? (
              '…'
            ) : (
              <>
                <span class={`status s-${clockBadge(health.clockStatus, health.parts?.clock?.trusted)}`} title={health.parts?.clock?.reason}>
                  {health.clockStatus}
                </span>
                {about !== undefined && <span class="clock-time muted">server time {show(about.serverTime)}</span>}
                {health.parts?.clock?.reason !== undefined && (
                  <span class="clock-reason">
                    {health.parts.clock.reason}
                    {health.parts.clock.trusted === false ? ': history is held until the clock is set' : ''}
                  </span>
                )}
              </>
            )}
          </dd>
          <dt>Version</dt>
          <dd>{about === undefined ? '…' : `${str(about.productName)} ${str(about.productVersion)}`}</dd>
          <LastUpdate health={health} about={about} />
          <dt>Server</dt>
          <dd>{about === undefined ? '…' : `${str(about.serverName)} (${str(about.tz)})`}</dd>
          <dt>Uptime</dt>
          <dd>{health === undefined ? '…' : duration(health.uptimeSeconds)}</dd>
          <dt>Store</dt>
          <dd>{health?.storage.sizeBytes === undefined ? (health?.storage.status ?? '…') : `${bytes(health.storage.sizeBytes)} (${health.storage.status})`}</dd>
          <dt>Uplink backlog</dt>
          <dd>{backlog === null ? '…' : backlog === undefined ? 'no uplink configured' : `${backlog} samples`}</dd>
        </dl>
        <button type="button" onClick={() => void backup()}>
          Download a backup
        </button>
      </div>
      <div class="card">
        <h2>Users and roles</h2>
        {session.impersonating !== undefined && (
          <p class="notice">
            Acting as {session.impersonating.name}.{' '}
            <button
              type="button"
              onClick={() => {
                session.impersonating = undefined;
                onImpersonate();
              }}
            >
              Stop
            </button>
          </p>
        )}
        {users === undefined ? (
          <p class="muted">Loading…</p>
        ) : typeof users === 'string' ? (
          <p class="muted">Not shown: {users}</p>
        ) : (
          <table class="grid">
            <thead>
              <tr>
                <th>User</th>
                <th>Role</th>
                <th />
              </tr>
            </thead>
            <tbody>
              {users.map((u) => (
                <tr>
                  <td>{str(u.username) || show(u.id)}</td>
                  <td>{u.roleRef != null ? roleName(u.roleRef) : ''}</td>
                  <td>
                    {str(u.username) !== session.username && session.impersonating === undefined && (
                      <button
                        type="button"
                        class="small"
                        onClick={() => {
                          session.impersonating = { id: refId(u.id), name: str(u.username) || refId(u.id) };
                          onImpersonate();
                        }}
                      >
                        Act as
                      </button>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </div>
      <div class="card">
        <h2>Change my password</h2>
        <form class="stack" onSubmit={(e) => void password(e)}>
          <label>
            New password
            <input name="p1" type="password" autocomplete="new-password" required minLength={8} />
          </label>
          <label>
            Again
            <input name="p2" type="password" autocomplete="new-password" required minLength={8} />
          </label>
          <button type="submit">Change password</button>
        </form>
      </div>
    </section>
  );
}
