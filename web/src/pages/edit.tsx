/**
 * Create, edit and delete sites, equips and points (createRec, updateRec, deleteRec). The
 * server validates; its message is shown next to the field it names (a tag name in quotes or
 * after "tag"), else above the form.
 */
import { useEffect, useState } from 'preact/hooks';
import { type Row, type Session, field, grid, refId, str } from '../api.js';

type Kind = 'site' | 'equip' | 'point';

const FIELDS: Record<Kind, string[]> = {
  site: ['name', 'dis', 'tz'],
  equip: ['name', 'dis', 'parent'],
  point: ['name', 'dis', 'parent', 'kind', 'unit'],
};

/** The field a server message is about, if it names one. */
function fieldOf(message: string, fields: string[]): string | undefined {
  for (const f of fields) {
    const tag = f === 'parent' ? '(siteRef|equipRef)' : f;
    if (new RegExp(`(["'\`]${tag}["'\`]|\\b${tag}\\b)`).test(message)) return f;
  }
  return undefined;
}

export function Edit({ session, id }: { session: Session; id: string }) {
  const [rec, setRec] = useState<Row | undefined>(undefined);
  const [kind, setKind] = useState<Kind>('point');
  const [parents, setParents] = useState<Row[]>([]);
  const [err, setErr] = useState<{ field: string | undefined; text: string } | undefined>(undefined);
  const [done, setDone] = useState('');

  useEffect(() => {
    setErr(undefined);
    setDone('');
    void session
      .read('site or equip')
      .then(setParents)
      .catch(() => undefined);
    if (id === '') {
      setRec(undefined);
      return;
    }
    void session
      .readById([id])
      .then((rows) => {
        const r = rows[0];
        setRec(r);
        if (r !== undefined) setKind(r.site != null ? 'site' : r.equip != null ? 'equip' : 'point');
      })
      .catch((e: unknown) => setErr({ field: undefined, text: e instanceof Error ? e.message : String(e) }));
  }, [session, id]);

  const fields = FIELDS[kind];

  async function submit(e: Event): Promise<void> {
    e.preventDefault();
    const f = new FormData(e.currentTarget as HTMLFormElement);
    const v = (k: string): string => field(f, k).trim();
    const row: Record<string, string> = {};
    if (rec !== undefined) row.id = `r:${refId(rec.id)}`;
    else row[kind] = 'm:';
    for (const k of ['name', 'dis', 'tz', 'kind', 'unit']) {
      if (!fields.includes(k)) continue;
      if (v(k) !== '') row[k] = `s:${v(k)}`;
      else if (rec !== undefined && rec[k] != null) row[k] = '-:';
    }
    if (fields.includes('parent') && v('parent') !== '') {
      const p = parents.find((x) => refId(x.id) === v('parent'));
      if (p?.site != null) row.siteRef = `r:${refId(p.id)}`;
      else if (p !== undefined) {
        row.equipRef = `r:${refId(p.id)}`;
        if (p.siteRef != null) row.siteRef = `r:${refId(p.siteRef)}`;
      }
    }
    if (kind === 'point' && rec === undefined) {
      if (f.get('cur') !== null) row.cur = 'm:';
      if (f.get('his') !== null) row.his = 'm:';
    }
    setErr(undefined);
    setDone('');
    try {
      const g = await session.op(rec === undefined ? 'createRec' : 'updateRec', grid([row]));
      const out = g.rows[0];
      setDone(rec === undefined ? `Created ${str(out?.id)}.` : 'Saved.');
      if (out !== undefined && rec !== undefined) setRec(out);
      if (rec === undefined) (e.currentTarget as HTMLFormElement | null)?.reset();
    } catch (x) {
      const text = x instanceof Error ? x.message : String(x);
      setErr({ field: fieldOf(text, fields), text });
    }
  }

  async function remove(): Promise<void> {
    if (rec === undefined || !confirm(`Delete ${str(rec.dis) || str(rec.name)}?`)) return;
    try {
      await session.op('deleteRec', grid([{ id: `r:${refId(rec.id)}` }]));
      location.hash = '#/points';
    } catch (x) {
      setErr({ field: undefined, text: x instanceof Error ? x.message : String(x) });
    }
  }

  const fieldErr = (name: string) =>
    err?.field === name ? (
      <span class="field-error" role="alert">
        {err.text}
      </span>
    ) : null;
  const val = (k: string): string => (rec === undefined ? '' : k === 'parent' ? refId(rec.equipRef ?? rec.siteRef) : str(rec[k]));

  return (
    <section class="edit">
      <h1>{rec === undefined ? 'Add' : `Edit ${str(rec.dis) || str(rec.name)}`}</h1>
      {rec !== undefined && (
        <p>
          <a href="#/edit">Add something new instead</a>
        </p>
      )}
      {err !== undefined && err.field === undefined && (
        <p class="error" role="alert">
          {err.text}
        </p>
      )}
      {done !== '' && <p class="ok-text">{done}</p>}
      <form class="stack card" onSubmit={(e) => void submit(e)} key={`${id}:${kind}`}>
        {rec === undefined && (
          <label>
            What
            <select name="what" value={kind} onChange={(e) => setKind(e.currentTarget.value as Kind)}>
              <option value="site">Site</option>
              <option value="equip">Equip</option>
              <option value="point">Point</option>
            </select>
          </label>
        )}
        {fields.map((k) =>
          k === 'parent' ? (
            <label>
              Parent
              <select name="parent" defaultValue={val('parent')}>
                <option value="">(none)</option>
                {parents
                  .filter((p) => kind === 'point' || p.site != null)
                  .map((p) => (
                    <option value={refId(p.id)}>
                      {p.site != null ? 'Site' : 'Equip'}: {str(p.dis) || str(p.name)}
                    </option>
                  ))}
              </select>
              {fieldErr('parent')}
            </label>
          ) : k === 'kind' ? (
            <label>
              Kind
              <select name="kind" defaultValue={val('kind') || 'Number'}>
                <option>Number</option>
                <option>Bool</option>
                <option>Str</option>
              </select>
              {fieldErr('kind')}
            </label>
          ) : (
            <label>
              {k === 'dis' ? 'Display name' : k === 'tz' ? 'Time zone' : k === 'name' ? 'Name' : 'Unit'}
              <input name={k} defaultValue={val(k)} autocapitalize="off" spellcheck={false} aria-invalid={err?.field === k} />
              {fieldErr(k)}
            </label>
          ),
        )}
        {kind === 'point' && rec === undefined && (
          <p class="row">
            <label class="check">
              <input type="checkbox" name="cur" defaultChecked /> live value (cur)
            </label>
            <label class="check">
              <input type="checkbox" name="his" defaultChecked /> history (his)
            </label>
          </p>
        )}
        <p class="row">
          <button type="submit">{rec === undefined ? 'Create' : 'Save'}</button>
          {rec !== undefined && (
            <button type="button" class="danger" onClick={() => void remove()}>
              Delete
            </button>
          )}
        </p>
      </form>
    </section>
  );
}
