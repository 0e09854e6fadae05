/**
 * Commissioning (docs/drivers.md, "Commissioning"), the way a technician brings a device in:
 * 1. Find BACnet devices (`discover`: a broadcast Who-Is, or directed at one address) and add a
 *    connector for one (createRec of a bacnetConn from the answered `uri`): one such card per
 *    driver that discovers.
 * 2. Learn a connector (`learn`): BACnet answers groups (object types) to drill into, then point
 *    proposals; a Modbus connector answers the registers of its map. Tick the proposals wanted,
 *    choose the site and equip, and create them all in one createRec.
 * 3. Import a Modbus register map (a CSV file) onto a Modbus connector: updateRec of its
 *    `modbusRegMap`, which the server checks; its list of bad rows is shown line by line.
 * The server does all the checking; this page only shows what it answers. The connector kinds
 * and their tags come from the server too (the `drivers` op).
 */
import { useEffect, useState } from 'preact/hooks';
import { ApiError, type Row, type Session, grid, refId, show, str } from '../api.js';
import { type DriverKind, connFilter, driverOf, loadDrivers } from '../drivers.js';
import { NotAvailable } from './status.js';

/**
 * The driver whose connectors take a register map (card 3., a Modbus map's CSV format); the card
 * shows when the server has it.
 */
const MAP_DRIVER = 'modbus';

/** Whether a connector is one of the map driver's. */
function takesMap(kinds: readonly DriverKind[], conn: Row | undefined): boolean {
  return conn !== undefined && driverOf(kinds, conn)?.name === MAP_DRIVER;
}

const errText = (e: unknown): string => (e instanceof Error ? e.message : String(e));

/** A server message, its lines (a register map's bad rows) as a list. */
function Problem({ text }: { text: string }) {
  if (text === '') return null;
  const [head, ...lines] = text.split('\n');
  return (
    <div class="error" role="alert">
      <p>{head}</p>
      {lines.length > 0 && (
        <ul class="problems">
          {lines.map((l) => (
            <li>{l}</li>
          ))}
        </ul>
      )}
    </div>
  );
}

/** A connector name from a device's name: letters and digits, else `bacnet<instance>`. */
function connName(dev: Row): string {
  const words = str(dev.dis)
    .replace(/[^A-Za-z0-9]+/g, ' ')
    .trim()
    .split(' ')
    .filter((w) => w !== '');
  const base = words.map((w, i) => (i === 0 ? w.toLowerCase() : w[0]?.toUpperCase() + w.slice(1).toLowerCase())).join('');
  return /^[a-z]/.test(base) ? `${base}Conn` : `bacnet${show(dev.bacnetDevice)}`;
}

function DiscoverDevices({ session, kind, onConnector }: { session: Session; kind: DriverKind; onConnector: (id: string) => void }) {
  const [devices, setDevices] = useState<Row[] | undefined>(undefined);
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState('');

  async function run(e: Event): Promise<void> {
    e.preventDefault();
    const f = new FormData(e.currentTarget as HTMLFormElement);
    const v = (k: string): string => {
      const x = f.get(k);
      return typeof x === 'string' ? x.trim() : '';
    };
    const row: Record<string, string> = { proto: `s:${kind.name}`, timeout: `n:${v('timeout') || '3'} s` };
    if (v('address') !== '') row.address = `s:${v('address')}`;
    if (v('low') !== '') row.low = `n:${v('low')}`;
    if (v('high') !== '') row.high = `n:${v('high')}`;
    setBusy(true);
    setErr('');
    try {
      setDevices((await session.op('discover', grid([row]))).rows);
    } catch (x) {
      setErr(errText(x));
    } finally {
      setBusy(false);
    }
  }

  async function add(dev: Row): Promise<void> {
    setErr('');
    try {
      const [made] = (await session.op('createRec', grid([{ [kind.connTag]: 'm:', name: `s:${connName(dev)}`, dis: `s:${str(dev.dis) || connName(dev)}`, uri: dev.uri ?? null }]))).rows;
      if (made === undefined) return;
      setDevices((list) => list?.map((d) => (d === dev ? { ...d, connRef: made.id } : d)));
      onConnector(refId(made.id));
    } catch (x) {
      setErr(errText(x));
    }
  }

  return (
    <div class="card">
      <h2>1. Find {kind.dis} devices</h2>
      <form class="discover" onSubmit={(e) => void run(e)}>
        <label>
          Address (host[:port]; empty: broadcast)
          <input name="address" placeholder="192.168.1.255" autocomplete="off" spellcheck={false} />
        </label>
        <label>
          Instances from
          <input name="low" inputMode="numeric" />
        </label>
        <label>
          to
          <input name="high" inputMode="numeric" />
        </label>
        <label>
          Wait (s)
          <input name="timeout" inputMode="numeric" defaultValue="3" />
        </label>
        <button type="submit" disabled={busy}>
          {busy ? 'Listening…' : 'Discover'}
        </button>
      </form>
      <Problem text={err} />
      {devices !== undefined &&
        (devices.length === 0 ? (
          <p class="muted">No device answered.</p>
        ) : (
          <ul class="devices">
            {devices.map((d) => (
              <li data-device={show(d.bacnetDevice)}>
                <span class="names">
                  <strong>{str(d.dis) || `Device ${show(d.bacnetDevice)}`}</strong>
                  <span class="sub">
                    #{show(d.bacnetDevice)} · {[str(d.vendorName), str(d.modelName)].filter((x) => x !== '').join(' ')} · {str(d.uri)}
                  </span>
                </span>
                {d.connRef != null ? (
                  <button type="button" class="secondary" onClick={() => onConnector(refId(d.connRef))}>
                    Learn its points
                  </button>
                ) : (
                  <button type="button" onClick={() => void add(d)}>
                    Add connector
                  </button>
                )}
              </li>
            ))}
          </ul>
        ))}
    </div>
  );
}

function Learn({ session, kinds, conns, connId, setConnId, nonce }: { session: Session; kinds: readonly DriverKind[]; conns: Row[]; connId: string; setConnId: (id: string) => void; nonce: number }) {
  /** The drill-down: learn args from the top (empty: the top). */
  const [path, setPath] = useState<{ arg: string; dis: string }[]>([]);
  const [rows, setRows] = useState<Row[] | undefined>(undefined);
  const [ticked, setTicked] = useState<Set<number>>(new Set());
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState('');
  const [places, setPlaces] = useState<Row[]>([]);
  const [siteId, setSiteId] = useState('');
  const [equipId, setEquipId] = useState('');
  const [made, setMade] = useState<Row[] | undefined>(undefined);

  useEffect(() => {
    void session
      .read('site or equip')
      .then((r) => {
        setPlaces(r);
        const first = r.find((x) => x.site != null);
        if (first !== undefined) setSiteId((s) => s || refId(first.id));
      })
      .catch(() => undefined);
  }, [session]);

  async function learn(id: string, next: { arg: string; dis: string }[]): Promise<void> {
    if (id === '') return;
    setBusy(true);
    setErr('');
    setMade(undefined);
    const arg = next[next.length - 1]?.arg;
    try {
      const g = await session.op('learn', grid([arg === undefined ? { connId: `r:${id}` } : { connId: `r:${id}`, arg: `s:${arg}` }]));
      setPath(next);
      setRows(g.rows);
      // New proposals start ticked; ones already bound to a point cannot be.
      setTicked(new Set(g.rows.flatMap((r, i) => (r.learn == null && r.id == null ? [i] : []))));
    } catch (x) {
      setErr(errText(x));
    } finally {
      setBusy(false);
    }
  }

  // A connector chosen elsewhere on the page (added from discover, or a map imported) is learnt at once.
  useEffect(() => {
    if (nonce > 0) void learn(connId, []);
  }, [nonce]);

  async function create(): Promise<void> {
    if (rows === undefined) return;
    const chosen = rows.filter((_, i) => ticked.has(i));
    const place: Record<string, string> = {};
    if (siteId !== '') place.siteRef = `r:${siteId}`;
    if (equipId !== '') place.equipRef = `r:${equipId}`;
    setErr('');
    try {
      const g = await session.op('createRec', grid(chosen.map((r) => ({ ...Object.fromEntries(Object.entries(r).filter(([k]) => k !== 'id' && k !== 'learn')), ...place }))));
      setMade(g.rows);
      await learn(connId, path);
      setMade(g.rows);
    } catch (x) {
      setErr(errText(x));
    }
  }

  const groups = rows?.filter((r) => r.learn != null) ?? [];
  const proposals = rows?.filter((r) => r.learn == null) ?? [];
  const sites = places.filter((p) => p.site != null);
  const equips = places.filter((p) => p.equip != null && refId(p.siteRef) === siteId);
  return (
    <div class="card">
      <h2>2. Learn a connector's points</h2>
      <div class="row">
        <label class="grow">
          Connector
          <select name="learnConn" value={connId} onChange={(e) => setConnId(e.currentTarget.value)}>
            <option value="">Choose…</option>
            {conns.map((c) => (
              <option value={refId(c.id)}>
                {str(c.dis) || str(c.name)} ({driverOf(kinds, c)?.dis})
              </option>
            ))}
          </select>
        </label>
        <button type="button" disabled={connId === '' || busy} onClick={() => void learn(connId, [])}>
          {busy ? 'Learning…' : 'Learn'}
        </button>
      </div>
      <Problem text={err} />
      {rows !== undefined && (
        <nav class="crumbs" aria-label="Learn path">
          <button type="button" class="link" onClick={() => void learn(connId, [])}>
            All
          </button>
          {path.map((p, i) => (
            <span>
              {' › '}
              {i === path.length - 1 ? (
                p.dis
              ) : (
                <button type="button" class="link" onClick={() => void learn(connId, path.slice(0, i + 1))}>
                  {p.dis}
                </button>
              )}
            </span>
          ))}
        </nav>
      )}
      {groups.length > 0 && (
        <ul class="groups">
          {groups.map((g) => (
            <li>
              <button type="button" class="secondary" onClick={() => void learn(connId, [...path, { arg: str(g.learn), dis: str(g.dis) }])}>
                {str(g.dis)} ›
              </button>
            </li>
          ))}
        </ul>
      )}
      {rows !== undefined && rows.length === 0 && <p class="muted">Nothing to learn on this connector{takesMap(kinds, conns.find((c) => refId(c.id) === connId)) ? ': import a register map first (3.)' : ''}.</p>}
      {proposals.length > 0 && (
        <>
          <div class="scroll-x">
            <table class="grid proposals">
              <thead>
                <tr>
                  <th>
                    <input
                      type="checkbox"
                      aria-label="Tick all"
                      checked={proposals.every((r) => r.id != null || ticked.has(rows?.indexOf(r) ?? -1))}
                      onChange={(e) => {
                        const on = e.currentTarget.checked;
                        setTicked(new Set(on ? (rows ?? []).flatMap((r, i) => (r.learn == null && r.id == null ? [i] : [])) : []));
                      }}
                    />
                  </th>
                  <th>Name</th>
                  <th>Kind</th>
                  <th>Address</th>
                </tr>
              </thead>
              <tbody>
                {proposals.map((r) => {
                  const i = rows?.indexOf(r) ?? -1;
                  const exists = r.id != null;
                  const addr = kinds.map((k) => str(r[k.curTag])).find((x) => x !== '') ?? '';
                  return (
                    <tr data-proposal={str(r.name)} class={exists ? 'exists' : ''}>
                      <td>
                        <input
                          type="checkbox"
                          aria-label={`Create ${str(r.name)}`}
                          disabled={exists}
                          checked={!exists && ticked.has(i)}
                          onChange={(e) => {
                            const next = new Set(ticked);
                            if (e.currentTarget.checked) next.add(i);
                            else next.delete(i);
                            setTicked(next);
                          }}
                        />
                      </td>
                      <td>
                        <span class="pname">{str(r.name)}</span>
                        {exists && (
                          <>
                            {' '}
                            <a href={`#/point/${encodeURIComponent(refId(r.id))}`}>(exists)</a>
                          </>
                        )}
                        <span class="sub">{str(r.dis)}</span>
                      </td>
                      <td>
                        {str(r.kind)}
                        {r.unit != null && ` ${str(r.unit)}`}
                        {r.writable != null && ' · writable'}
                      </td>
                      <td>
                        <code>{addr}</code>
                      </td>
                    </tr>
                  );
                })}
              </tbody>
            </table>
          </div>
          <div class="row place">
            <label>
              Site
              <select
                name="site"
                value={siteId}
                onChange={(e) => {
                  setSiteId(e.currentTarget.value);
                  setEquipId('');
                }}
              >
                {sites.map((s) => (
                  <option value={refId(s.id)}>{str(s.dis) || str(s.name)}</option>
                ))}
              </select>
            </label>
            <label>
              Equip
              <select name="equip" value={equipId} onChange={(e) => setEquipId(e.currentTarget.value)}>
                <option value="">— none (on the site) —</option>
                {equips.map((q) => (
                  <option value={refId(q.id)}>{str(q.dis) || str(q.name)}</option>
                ))}
              </select>
            </label>
            <button type="button" disabled={ticked.size === 0 || siteId === ''} onClick={() => void create()}>
              Create {ticked.size} point{ticked.size === 1 ? '' : 's'}
            </button>
          </div>
        </>
      )}
      {made !== undefined && (
        <p class="ok-text" role="status">
          Created {made.length} point{made.length === 1 ? '' : 's'}: {made.map((m) => str(m.name)).join(', ')}.{' '}
          <a href="#/points">See them in the points list</a>
        </p>
      )}
    </div>
  );
}

function ImportMap({ session, kinds, conns, onImported }: { session: Session; kinds: readonly DriverKind[]; conns: Row[]; onImported: (id: string) => void }) {
  const modbus = conns.filter((c) => takesMap(kinds, c));
  const [connId, setConnId] = useState('');
  const [err, setErr] = useState('');
  const [done, setDone] = useState('');

  async function submit(e: Event): Promise<void> {
    e.preventDefault();
    const form = e.currentTarget as HTMLFormElement;
    const file = (form.elements.namedItem('map') as HTMLInputElement).files?.[0];
    setErr('');
    setDone('');
    if (connId === '' || file === undefined) {
      setErr('Choose a Modbus connector and a register map file (CSV).');
      return;
    }
    try {
      await session.op('updateRec', grid([{ id: `r:${connId}`, modbusRegMap: `s:${await file.text()}` }]));
      setDone(`${file.name} attached; its registers are listed in 2. above.`);
      onImported(connId);
    } catch (x) {
      setErr(x instanceof ApiError ? x.message : errText(x));
    }
  }

  return (
    <div class="card">
      <h2>3. Import a Modbus register map</h2>
      <p class="muted small">
        A CSV with a header naming the columns <code>name,dis,address,kind,unit,access,scale,offset</code> (docs/drivers.md). A map with errors changes nothing;
        every bad row is listed.
      </p>
      <form class="row" onSubmit={(e) => void submit(e)}>
        <label>
          Modbus connector
          <select name="mapConn" value={connId} onChange={(e) => setConnId(e.currentTarget.value)}>
            <option value="">Choose…</option>
            {modbus.map((c) => (
              <option value={refId(c.id)}>{str(c.dis) || str(c.name)}</option>
            ))}
          </select>
        </label>
        <label>
          Register map file
          <input name="map" type="file" accept=".csv,text/csv,text/plain" />
        </label>
        <button type="submit">Import</button>
      </form>
      <Problem text={err} />
      {done !== '' && (
        <p class="ok-text" role="status">
          {done}
        </p>
      )}
    </div>
  );
}

export function Discovery({ session }: { session: Session }) {
  const [ops, setOps] = useState<string[] | undefined>(undefined);
  const [kinds, setKinds] = useState<DriverKind[] | undefined>(undefined);
  const [conns, setConns] = useState<Row[]>([]);
  const [connId, setConnId] = useState('');
  /** Bumped to make the learn panel learn `connId` now. */
  const [nonce, setNonce] = useState(0);
  const [err, setErr] = useState('');
  const [tick, setTick] = useState(0);

  useEffect(() => {
    void session
      .get('ops')
      .then((g) => setOps(g.rows.map((r) => str(r.name))))
      .catch((e: unknown) => setErr(errText(e)));
  }, [session]);
  useEffect(() => {
    void loadDrivers(session)
      .then(setKinds)
      .catch((e: unknown) => setErr(errText(e)));
  }, [session]);
  useEffect(() => {
    // The connectors of the drivers that learn.
    const filter = kinds === undefined ? undefined : connFilter(kinds.filter((k) => k.features.has('learn')));
    if (filter === undefined) return;
    void session
      .read(filter)
      .then((c) => setConns(c.sort((a, b) => (str(a.dis) || str(a.name)).localeCompare(str(b.dis) || str(b.name)))))
      .catch((e: unknown) => setErr(errText(e)));
  }, [session, kinds, tick]);

  const pick = (id: string): void => {
    setConnId(id);
    setTick((n) => n + 1);
    setNonce((n) => n + 1);
  };
  return (
    <section class="discovery">
      <h1>Discovery</h1>
      <Problem text={err} />
      {ops !== undefined && !ops.includes('discover') && <NotAvailable what="Device discovery (discover and learn)" />}
      {ops !== undefined && ops.includes('discover') && kinds !== undefined && (
        <>
          {kinds
            .filter((k) => k.features.has('discover'))
            .map((k) => (
              <DiscoverDevices session={session} kind={k} onConnector={pick} />
            ))}
          <Learn session={session} kinds={kinds} conns={conns} connId={connId} setConnId={setConnId} nonce={nonce} />
          {kinds.some((k) => k.name === MAP_DRIVER) && <ImportMap session={session} kinds={kinds} conns={conns} onImported={pick} />}
        </>
      )}
    </section>
  );
}
