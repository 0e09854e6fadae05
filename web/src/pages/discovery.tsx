/**
 * Discovery (discover, learn, create) and Modbus register-map import. Built against the
 * commissioning ops of issue 14; until the server has them, the page says so (the ops list
 * names no `discover`) instead of showing anything made up.
 */
import { useEffect, useState } from 'preact/hooks';
import { type Session, str } from '../api.js';
import { NotAvailable } from './status.js';

export function Discovery({ session }: { session: Session }) {
  const [ops, setOps] = useState<string[] | undefined>(undefined);
  const [err, setErr] = useState('');
  useEffect(() => {
    void session
      .get('ops')
      .then((g) => setOps(g.rows.map((r) => str(r.name))))
      .catch((e: unknown) => setErr(e instanceof Error ? e.message : String(e)));
  }, [session]);
  return (
    <section>
      <h1>Discovery</h1>
      {err !== '' && (
        <p class="error" role="alert">
          {err}
        </p>
      )}
      {ops !== undefined && !ops.includes('discover') && <NotAvailable what="Device discovery (discover and learn)" />}
      {ops !== undefined && ops.includes('discover') && <p class="muted">This server can discover devices; the console's discovery page is not built yet.</p>}
    </section>
  );
}
