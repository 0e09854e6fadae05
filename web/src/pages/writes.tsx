/**
 * A writable point's priority array (pointWrite with only `id`), an override (value, level,
 * duration) and a release (pointWrite without `val`), and the point's write audit (pointWriteAudit).
 * On a server without these ops, says so instead of showing anything made up.
 */
import { useEffect, useState } from 'preact/hooks';
import { ApiError, type Row, type Session, field, grid, show, str } from '../api.js';
import { NotAvailable } from './status.js';

export function Writes({ session, id, unit }: { session: Session; id: string; unit: string }) {
  const [levels, setLevels] = useState<Row[] | undefined>(undefined);
  const [audit, setAudit] = useState<Row[] | 'n/a' | undefined>(undefined);
  const [missing, setMissing] = useState(false);
  const [err, setErr] = useState('');
  const [tick, setTick] = useState(0);

  useEffect(() => {
    void session
      .op('pointWrite', grid([{ id: `r:${id}` }]))
      .then((g) => setLevels(g.rows))
      .catch((e: unknown) => (e instanceof ApiError && e.notAvailable ? setMissing(true) : setErr(e instanceof Error ? e.message : String(e))));
    void session
      .op('pointWriteAudit', grid([{ id: `r:${id}`, limit: 'n:20' }]))
      .then((g) => setAudit(g.rows))
      .catch(() => setAudit('n/a'));
  }, [session, id, tick]);

  async function write(e: Event, release: boolean): Promise<void> {
    e.preventDefault();
    const form = (e.currentTarget as HTMLElement).closest('form') as HTMLFormElement;
    const f = new FormData(form);
    const level = Number(f.get('level'));
    const row: Record<string, string> = { id: `r:${id}`, level: `n:${level}`, who: `s:console ${session.username}` };
    if (!release) {
      row.val = `n:${field(f, 'val')}${unit === '' ? '' : ` ${unit}`}`;
      const minutes = Number(f.get('duration'));
      if (level === 8 && minutes > 0) row.duration = `n:${minutes} min`;
    }
    setErr('');
    try {
      await session.op('pointWrite', grid([row]));
      setTick((n) => n + 1);
    } catch (x) {
      setErr(x instanceof Error ? x.message : String(x));
    }
  }

  if (missing) return <NotAvailable what="Writing points (pointWrite)" />;
  return (
    <div class="card">
      <h2>Override</h2>
      <form class="row override" onSubmit={(e) => void write(e, false)}>
        <label>
          Value
          <input name="val" type="number" step="any" required />
        </label>
        <label>
          Level
          <select name="level" defaultValue="8">
            {Array.from({ length: 16 }, (_, i) => (
              <option value={String(i + 1)}>{i + 1}</option>
            ))}
          </select>
        </label>
        <label>
          Minutes (level 8)
          <input name="duration" type="number" min="0" step="1" defaultValue="60" />
        </label>
        <button type="submit">Override</button>
        <button type="button" onClick={(e) => void write(e, true)}>
          Release level
        </button>
      </form>
      {err !== '' && (
        <p class="error" role="alert">
          {err}
        </p>
      )}
      {levels !== undefined && (
        <table class="grid">
          <thead>
            <tr>
              <th>Level</th>
              <th>Value</th>
              <th>Who</th>
              <th>Expires</th>
            </tr>
          </thead>
          <tbody>
            {levels.map((r) => (
              <tr class={r.val != null ? 'set' : ''}>
                <td>{str(r.levelDis) || show(r.level)}</td>
                <td>{show(r.val)}</td>
                <td>{show(r.who)}</td>
                <td>{show(r.expires)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <h2>Write audit</h2>
      {audit === 'n/a' ? (
        <NotAvailable what="The write audit" />
      ) : audit === undefined ? null : audit.length === 0 ? (
        <p class="muted">No writes yet.</p>
      ) : (
        <table class="grid audit">
          <thead>
            <tr>
              <th>Time</th>
              <th>User</th>
              <th>Level</th>
              <th>Value</th>
              <th>For</th>
              <th>Result</th>
            </tr>
          </thead>
          <tbody>
            {audit.map((r) => (
              <tr>
                <td>{show(r.ts)}</td>
                <td>
                  {str(r.user)}
                  {r.impersonatedBy != null && ` (by ${str(r.impersonatedBy)})`}
                </td>
                <td>{show(r.level)}</td>
                <td>{r.val == null ? 'release' : show(r.val)}</td>
                <td>{show(r.duration)}</td>
                <td title={str(r.err) || undefined}>
                  {str(r.result)}
                  {r.err != null && `: ${str(r.err)}`}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  );
}
