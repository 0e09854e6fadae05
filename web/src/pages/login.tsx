/** Log in: the OAuth2 password grant with the first-run (or any) user and client credentials. */
import { useState } from 'preact/hooks';
import { Session, field } from '../api.js';

export function Login({ session, onDone }: { session: Session; onDone: () => void }) {
  const remembered = Session.rememberedClient();
  const [err, setErr] = useState('');
  const [busy, setBusy] = useState(false);
  const [showClient, setShowClient] = useState(remembered === undefined);

  async function submit(e: Event): Promise<void> {
    e.preventDefault();
    const f = new FormData(e.currentTarget as HTMLFormElement);
    const v = (k: string): string => field(f, k);
    setBusy(true);
    setErr('');
    try {
      await session.login(v('clientId') || remembered?.clientId || 'hayloft', v('clientSecret') || remembered?.clientSecret || '', v('username'), v('password'), f.get('remember') !== null);
      onDone();
    } catch (x) {
      setErr(x instanceof Error ? x.message : String(x));
    } finally {
      setBusy(false);
    }
  }

  return (
    <main class="login">
      <h1>Hayloft</h1>
      <p class="muted">Log in with the credentials printed at the gateway's first start.</p>
      <form onSubmit={(e) => void submit(e)}>
        <label>
          User (e-mail)
          <input name="username" type="email" autocomplete="username" required defaultValue="admin@hayloft.local" />
        </label>
        <label>
          Password
          <input name="password" type="password" autocomplete="current-password" required autofocus />
        </label>
        {showClient ? (
          <fieldset>
            <legend>OAuth2 client</legend>
            <label>
              Client id
              <input name="clientId" autocomplete="off" defaultValue={remembered?.clientId ?? 'hayloft'} required />
            </label>
            <label>
              Client secret
              <input name="clientSecret" type="password" autocomplete="off" required defaultValue={remembered?.clientSecret ?? ''} />
            </label>
            <label class="check">
              <input name="remember" type="checkbox" defaultChecked /> Remember the client on this device
            </label>
          </fieldset>
        ) : (
          <p class="muted">
            Client <code>{remembered?.clientId}</code> remembered.{' '}
            <button type="button" class="link" onClick={() => setShowClient(true)}>
              Change
            </button>
            <input type="hidden" name="remember" value="1" />
          </p>
        )}
        {err !== '' && (
          <p class="error" role="alert">
            {err}
          </p>
        )}
        <button type="submit" disabled={busy}>
          {busy ? 'Logging in…' : 'Log in'}
        </button>
      </form>
    </main>
  );
}
