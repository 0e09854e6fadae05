/**
 * A status word in its colour (ok, stale, down, fault, disabled, unknown): the same everywhere.
 * `tone` colours another word as one of those (`registered` as ok, `degraded` as stale).
 */
export function Status({ status, title, tone }: { status: string; title?: string | undefined; tone?: string | undefined }) {
  return (
    <span class={`status s-${tone ?? status}`} title={title}>
      {status}
    </span>
  );
}

/** "not available on this server": what a page shows when the op it needs answers 404. */
export function NotAvailable({ what }: { what: string }) {
  return (
    <p class="notice" role="status">
      {what} is not available on this server (its operation is not installed).
    </p>
  );
}

/** How live values reach the page: pushed as they change, or asked for every two seconds (no socket). */
export function LiveNote({ mode }: { mode: 'push' | 'poll' }) {
  return (
    <span class={`live live-${mode}`} data-live={mode}>
      {mode === 'push' ? ' · live: pushed as they change' : ' · live: every 2 s'}
    </span>
  );
}
