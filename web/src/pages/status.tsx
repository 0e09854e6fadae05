/** A status word in its colour (ok, stale, down, fault, disabled, unknown): the same everywhere. */
export function Status({ status, title }: { status: string; title?: string | undefined }) {
  return (
    <span class={`status s-${status}`} title={title}>
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
