/**
 * BACnet: this gateway as a BACnet/IP device (docs/bacnet-device.md) and its registrations with a
 * BBMD. The device's objects as a front-end sees them (the `bacnetObjects` op: type, instance,
 * objectName, present value, status flags, the priority in effect) with a search, and the BBMD
 * registration of the device side (the `bacnet-device` part of /api/health) and of the client
 * side that polls devices (`bacnet-bbmd`). Read again every five seconds.
 */
import { useEffect, useState } from 'preact/hooks';
import { ApiError, type Grid, type Row, type Session, ago, num, refId, show, str } from '../api.js';
import { NotAvailable, Status } from './status.js';

const REFRESH_MS = 5000;
/** Rows drawn at once: a device may have thousands of objects; the search narrows them. */
const SHOWN = 200;

interface Registration {
  bbmd?: string;
  bbmdTtl?: number;
  bbmdState?: string;
  bbmdRegisteredAt?: string | null;
  bbmdError?: string | null;
}

interface Health {
  parts?: { 'bacnet-device'?: Registration & { instance?: number }; 'bacnet-bbmd'?: Registration };
}

/** A registration state in the Status badge's colours: registered is ok, failed is down. */
const TONE: Record<string, string> = { registered: 'ok', registering: 'stale', failed: 'down', idle: 'unknown', stopped: 'disabled' };

function RegistrationFacts({ r, idle }: { r: Registration; idle: string }) {
  const state = r.bbmdState ?? 'idle';
  const at = r.bbmdRegisteredAt == null ? undefined : Date.parse(r.bbmdRegisteredAt);
  return (
    <>
      <dt>BBMD</dt>
      <dd class="bbmd-state" data-state={state}>
        <Status status={state} tone={TONE[state] ?? 'unknown'} /> <code>{r.bbmd}</code>
        {state === 'idle' && <span class="muted"> {idle}</span>}
      </dd>
      {r.bbmdTtl !== undefined && (
        <>
          <dt>Time-to-live</dt>
          <dd>{r.bbmdTtl} s (renewed at half)</dd>
        </>
      )}
      {state !== 'idle' && (
        <>
          <dt>Last registered</dt>
          <dd>
            {at === undefined || Number.isNaN(at) ? (
              'never'
            ) : (
              <time dateTime={new Date(at).toISOString()} title={new Date(at).toLocaleString()}>
                {new Date(at).toLocaleString()} ({ago(at)})
              </time>
            )}
          </dd>
        </>
      )}
      {r.bbmdError != null && r.bbmdError !== '' && (
        <>
          <dt>Last attempt</dt>
          <dd class="err-text">{r.bbmdError}</dd>
        </>
      )}
    </>
  );
}

/** presentValue as a front-end shows it: a number in its unit, active/inactive, a state and its text. */
function presentValue(o: Row): string {
  const type = str(o.objectType);
  if (o.presentValue == null) return 'NULL';
  if (type.startsWith('binary')) return num(o.presentValue)?.val === 1 ? 'active' : 'inactive';
  if (type.startsWith('multi-state')) return `${str(o.stateText) || '?'} (${show(o.presentValue)})`;
  return show(o.presentValue);
}

function Flags({ o }: { o: Row }) {
  const flags: [string, string][] = [];
  if (o.fault === true) flags.push(['fault', 'fault']);
  if (o.outOfService === true) flags.push(['out of service', 'disabled']);
  if (o.overridden === true) flags.push([`overridden at ${show(o.priority)}`, 'stale']);
  if (flags.length === 0) return <span class="muted">normal</span>;
  return (
    <>
      {flags.map(([word, tone]) => (
        <Status status={word} tone={tone} />
      ))}
    </>
  );
}

export function Bacnet({ session }: { session: Session }) {
  const [objects, setObjects] = useState<Grid | undefined | 'absent'>(undefined);
  const [health, setHealth] = useState<Health | undefined>(undefined);
  const [err, setErr] = useState('');
  const [q, setQ] = useState('');

  useEffect(() => {
    let gone = false;
    const load = async (): Promise<void> => {
      try {
        const [g, h] = await Promise.all([
          session.get('bacnetObjects').catch((e: unknown) => {
            if (e instanceof ApiError && e.notAvailable) return 'absent' as const;
            throw e;
          }),
          fetch('/api/health').then((r) => r.json() as Promise<Health>),
        ]);
        if (gone) return;
        setObjects(g);
        setHealth(h);
        setErr('');
      } catch (e) {
        if (!gone) setErr(e instanceof Error ? e.message : String(e));
      }
    };
    void load();
    const timer = setInterval(() => void load(), REFRESH_MS);
    return () => {
      gone = true;
      clearInterval(timer);
    };
  }, [session, session.impersonating]);

  const meta = typeof objects === 'object' ? objects.meta : undefined;
  const enabled = meta?.enabled === true;
  const device = health?.parts?.['bacnet-device'];
  const client = health?.parts?.['bacnet-bbmd'];
  const words = q.trim().toLowerCase().split(/\s+/).filter((w) => w !== '');
  const rows = typeof objects === 'object' ? objects.rows.filter((o) => words.every((w) => `${str(o.objectType)} ${show(o.objectInstance)} ${str(o.objectName)}`.toLowerCase().includes(w))) : [];

  return (
    <section class="bacnet">
      <h1>BACnet</h1>
      {err !== '' && (
        <p class="error" role="alert">
          {err}
        </p>
      )}
      {objects === 'absent' && <NotAvailable what="The BACnet device's object list" />}
      <div class="card device">
        <h2>This gateway as a BACnet device</h2>
        {objects === undefined ? (
          <p class="muted">Loading…</p>
        ) : !enabled ? (
          <p class="muted">Off: no bacnetDevice section is configured, so building front-ends cannot find this gateway over BACnet.</p>
        ) : (
          <dl class="facts">
            <dt>Device</dt>
            <dd>
              {show(meta?.deviceInstance)} <span class="muted">·</span> {str(meta?.deviceName)}
            </dd>
            <dt>Address</dt>
            <dd>
              <code>
                {str(meta?.interface)}:{show(meta?.port)}
              </code>
            </dd>
            <dt>Objects</dt>
            <dd>
              {show(meta?.objects)}
              {num(meta?.skipped)?.val ? (
                <span class="muted">
                  {' '}
                  · {show(meta?.skipped)} matching {num(meta?.skipped)?.val === 1 ? 'point' : 'points'} not exported (a Str point without an enum)
                </span>
              ) : null}
            </dd>
            {device?.bbmd !== undefined ? <RegistrationFacts r={device} idle="" /> : (
              <>
                <dt>BBMD</dt>
                <dd class="muted">none configured (on the front-end's subnet)</dd>
              </>
            )}
          </dl>
        )}
      </div>
      <div class="card client">
        <h2>Polling BACnet devices</h2>
        {health === undefined ? (
          <p class="muted">Loading…</p>
        ) : client?.bbmd === undefined ? (
          <p class="muted">No BBMD configured (bacnetBbmd): devices are found on this gateway's own subnet.</p>
        ) : (
          <dl class="facts">
            <RegistrationFacts r={client} idle="registers while BACnet connectors exist or a discover runs" />
          </dl>
        )}
      </div>
      {enabled && typeof objects === 'object' && (
        <div class="card">
          <h2>Objects</h2>
          <label class="search">
            Search objects
            <input type="search" value={q} placeholder="type, instance or name" onInput={(e) => setQ(e.currentTarget.value)} />
          </label>
          {objects.rows.length === 0 ? (
            <p class="muted">No objects: mark points bacnetExport (or widen the section's filter) to show them.</p>
          ) : (
            <>
              <p class="muted count">
                {rows.length === objects.rows.length ? `${rows.length} objects` : `${rows.length} of ${objects.rows.length} objects`}
                {rows.length > SHOWN && `, the first ${SHOWN} shown: narrow the search`}
              </p>
              <table class="grid bacnet-objects">
                <thead>
                  <tr>
                    <th>Object</th>
                    <th>Name</th>
                    <th>Present value</th>
                    <th>Status flags</th>
                    <th>Point</th>
                  </tr>
                </thead>
                <tbody>
                  {rows.slice(0, SHOWN).map((o) => (
                    <tr data-object={`${str(o.objectType)}:${show(o.objectInstance)}`}>
                      <td data-label="Object">
                        {str(o.objectType)} {show(o.objectInstance)}
                        {o.commandable === true && <span class="muted"> · commandable</span>}
                      </td>
                      <td data-label="Name">
                        <a href={`#/point/${encodeURIComponent(refId(o.id))}`}>{str(o.objectName)}</a>
                      </td>
                      <td data-label="Present value" class="pv">
                        {presentValue(o)}
                      </td>
                      <td data-label="Status flags">
                        <Flags o={o} />
                      </td>
                      <td data-label="Point">{o.curStatus != null ? <Status status={str(o.curStatus)} /> : <span class="muted">no status</span>}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </>
          )}
        </div>
      )}
    </section>
  );
}
