/**
 * Log in: the user name and password printed at the gateway's first start (or any user's). The
 * console is the gateway's public OAuth2 client, so a person types nothing else (api.ts).
 */
import { useState } from 'preact/hooks';
import { type Session, field } from '../api.js';

export function Login({ session, onDone }: { session: Session; onDone: () => void }) {
  const [err, setErr] = useState('');
  const [busy, setBusy] = useState(false);

  async function submit(e: Event): Promise<void> {
    e.preventDefault();
    const f = new FormData(e.currentTarget as HTMLFormElement);
    setBusy(true);
    setErr('');
    try {
      await session.login(field(f, 'username').trim(), field(f, 'password'));
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
      <p class="muted">Log in with the user and password printed at the gateway's first start, or your own.</p>
      <form onSubmit={(e) => void submit(e)}>
        <label>
          User
          <input name="username" type="text" autocomplete="username" autocapitalize="none" spellcheck={false} required autofocus placeholder="admin@hayloft.local" />
        </label>
        <label>
          Password
          <input name="password" type="password" autocomplete="current-password" required />
        </label>
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
