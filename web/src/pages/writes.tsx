/**
 * A writable point's priority array (pointWrite with only `id`), an override (value, level,
 * duration for level 8) and a release (pointWrite without `val`), what the gateway wrote to the
 * device (the live tags writeVal, writeLevel, writeStatus, writeErr), and the point's write audit
 * (pointWriteAudit). The server checks every write (docs/point-writes.md); its message is shown
 * next to the field it is about. On a server without these ops, says so instead of showing
 * anything made up.
 */
import { useEffect, useState } from 'preact/hooks';
import { ApiError, type Row, type Session, field, grid, num, show, str } from '../api.js';
import { NotAvailable, Status } from './status.js';

const MANUAL = 8;

type Field = 'val' | 'level' | 'duration';

/** The field a refused write is about: the value (its kind, range, unit), the level or the duration. */
function fieldOf(e: unknown): Field | undefined {
  if (!(e instanceof ApiError)) return undefined;
  if (e.errCode === 'HL_BAD_VALUE' || e.errCode === 'HL_OUT_OF_RANGE') return 'val';
  if (/^duration\b/.test(e.message)) return 'duration';
  if (/\blevel\b/.test(e.message)) return 'level';
  return undefined;
}

/** A form value as the Haystack JSON the point's kind needs (Number in the point's unit, Bool, Str). */
function encode(kind: string, text: string, unit: string): string {
  if (kind === 'Bool') return text;
  if (kind === 'Str') return `s:${text}`;
  return `n:${text.trim()}${unit === '' ? '' : ` ${unit}`}`;
}

/** A duration as a person reads it: `30 min`, `2 h`, else as the server gave it. */
function duration(v: Row[string]): string {
  const n = num(v);
  if (n === undefined || n.unit !== 's') return show(v);
  if (n.val % 3600 === 0) return `${n.val / 3600} h`;
  if (n.val % 60 === 0) return `${n.val / 60} min`;
  return show(v);
}

function FieldError({ err, name }: { err: { field: Field | undefined; text: string } | undefined; name: Field }) {
  if (err?.field !== name) return null;
  return (
    <span class="field-error" role="alert">
      {err.text}
    </span>
  );
}

export function Writes({ session, id, rec }: { session: Session; id: string; rec: Row }) {
  const unit = str(rec.unit);
  const kind = str(rec.kind) || 'Number';
  const enums = str(rec.enum)
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  const [levels, setLevels] = useState<Row[] | undefined>(undefined);
  const [audit, setAudit] = useState<Row[] | 'n/a' | undefined>(undefined);
  const [written, setWritten] = useState<Row | undefined>(undefined);
  const [missing, setMissing] = useState(false);
  const [err, setErr] = useState<{ field: Field | undefined; text: string } | undefined>(undefined);
  const [level, setLevel] = useState(MANUAL);
  const [tick, setTick] = useState(0);

  useEffect(() => {
    void session
      .op('pointWrite', grid([{ id: `r:${id}` }]))
      .then((g) => setLevels(g.rows))
      .catch((e: unknown) => (e instanceof ApiError && e.notAvailable ? setMissing(true) : setErr({ field: undefined, text: e instanceof Error ? e.message : String(e) })));
    void session
      .op('pointWriteAudit', grid([{ id: `r:${id}`, limit: 'n:20' }]))
      .then((g) => setAudit(g.rows))
      .catch(() => setAudit('n/a'));
    void session
      .readById([id])
      .then((rows) => setWritten(rows[0]))
      .catch(() => undefined);
  }, [session, id, tick]);

  // What reaches the device follows the write a moment later (the next poll): read it again.
  useEffect(() => {
    if (written === undefined || str(written.writeStatus) !== 'pending') return;
    const timer = setTimeout(() => setTick((n) => n + 1), 1000);
    return () => clearTimeout(timer);
  }, [written]);

  async function write(e: Event, release: boolean): Promise<void> {
    e.preventDefault();
    const form = (e.currentTarget as HTMLElement).closest('form') as HTMLFormElement;
    const f = new FormData(form);
    const row: Record<string, string> = { id: `r:${id}`, level: `n:${level}`, who: `s:console ${session.username}` };
    if (!release) {
      row.val = encode(kind, field(f, 'val'), unit);
      const minutes = field(f, 'duration').trim();
      if (level === MANUAL && minutes !== '' && Number(minutes) !== 0) row.duration = `n:${minutes} min`;
    }
    setErr(undefined);
    try {
      await session.op('pointWrite', grid([row]));
      setTick((n) => n + 1);
    } catch (x) {
      setErr({ field: fieldOf(x), text: x instanceof Error ? x.message : String(x) });
      // A refused write is audited too.
      setTick((n) => n + 1);
    }
  }

  if (missing) return <NotAvailable what="Writing points (pointWrite)" />;
  const wStatus = str(written?.writeStatus);
  return (
    <div class="card writes">
      <h2>Override</h2>
      {written !== undefined && (
        <p class="written">
          To the device: <strong data-write-val>{written.writeVal != null ? show(written.writeVal) : 'nothing'}</strong>
          {written.writeLevel != null && ` (level ${show(written.writeLevel)})`} {wStatus !== '' && <Status status={wStatus} title={str(written.writeErr) || undefined} />}
          {written.writeErr != null && <span class="err-text"> {str(written.writeErr)}</span>}
        </p>
      )}
      <form class="override" onSubmit={(e) => void write(e, false)} noValidate>
        <label>
          Value{unit !== '' && ` (${unit})`}
          {kind === 'Bool' ? (
            <select name="val">
              <option value="true">true</option>
              <option value="false">false</option>
            </select>
          ) : kind === 'Str' && enums.length > 0 ? (
            <select name="val">
              {enums.map((v) => (
                <option value={v}>{v}</option>
              ))}
            </select>
          ) : (
            <input name="val" inputMode={kind === 'Number' ? 'decimal' : 'text'} autocomplete="off" aria-invalid={err?.field === 'val'} />
          )}
          <FieldError err={err} name="val" />
        </label>
        <label>
          Level
          <select name="level" value={String(level)} onChange={(e) => setLevel(Number(e.currentTarget.value))} aria-invalid={err?.field === 'level'}>
            {(levels ?? Array.from({ length: 17 }, (_, i) => ({ level: `n:${i + 1}`, levelDis: `s:${i + 1}` }))).map((r) => (
              <option value={show(r.level)}>{str(r.levelDis) || show(r.level)}</option>
            ))}
          </select>
          <FieldError err={err} name="level" />
        </label>
        <label>
          Duration in minutes (level 8 only; empty: until released)
          <input name="duration" inputMode="numeric" defaultValue="60" disabled={level !== MANUAL} aria-invalid={err?.field === 'duration'} />
          <FieldError err={err} name="duration" />
        </label>
        <div class="row">
          <button type="submit">Override</button>
          <button type="button" class="secondary" onClick={(e) => void write(e, true)}>
            Release level {level}
          </button>
        </div>
      </form>
      {err !== undefined && err.field === undefined && (
        <p class="error" role="alert">
          {err.text}
        </p>
      )}
      {levels !== undefined && (
        <>
          <h2>Priority array</h2>
          <div class="scroll-x">
          <table class="grid levels">
            <thead>
              <tr>
                <th>Level</th>
                <th>Value</th>
                <th>Who</th>
                <th>Expires</th>
              </tr>
            </thead>
            <tbody>
              {levels
                .filter((r) => r.val != null || [1, MANUAL, 16, 17].includes(Number(show(r.level))))
                .map((r) => (
                  <tr class={r.val != null ? 'set' : ''} data-level={show(r.level)}>
                    <td>{str(r.levelDis) || show(r.level)}</td>
                    <td>{r.val != null ? show(r.val) : '—'}</td>
                    <td>{show(r.who)}</td>
                    <td>{show(r.expires)}</td>
                  </tr>
                ))}
            </tbody>
          </table>
          </div>
          <p class="muted small">Unset levels other than 1, 8, 16 and 17 are not shown.</p>
        </>
      )}
      <h2>Write audit</h2>
      {audit === 'n/a' ? (
        <NotAvailable what="The write audit" />
      ) : audit === undefined ? null : audit.length === 0 ? (
        <p class="muted">No writes yet.</p>
      ) : (
        <div class="scroll-x">
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
                  <td>{duration(r.duration)}</td>
                  <td class={str(r.result) === 'ok' ? 'ok-text' : 'err-text'} title={str(r.err) || undefined}>
                    {str(r.result)}
                    {r.err != null && `: ${str(r.err)}`}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </div>
  );
}

