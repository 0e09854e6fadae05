/**
 * The last `hayloft update` as the daemon shows it (lib/update.ts writes it): in /api/health
 * (parts.update: the result and when), in `about` for a logged-in client (with the versions and
 * the message: the console's System page), and to a fleet's host in
 * NBIRTH as the `Update/...` figures (versions and message too). Read at start and again whenever
 * the file changes: `hayloft update` writes the result after the new version answered healthy (or
 * after the old one is back), so the daemon that should show it is already running (the edge node
 * rebirths when the figures appear).
 */
import { statSync } from 'node:fs';
import type { NodeFigures, Part, PartHealth } from './part.js';
import { readUpdateState, type UpdateState } from './update.js';

export class UpdateStatus implements Part {
  readonly name = 'update';
  private last: UpdateState | null = null;
  /** The file's mtime and size when last read ('' when absent): read again only when they change. */
  private seen = '';

  /** `file`: the install's update-state.json; null when not running from an install (a checkout). */
  constructor(private readonly file: string | null) {}

  start(): void {
    this.read();
  }

  /** One stat per look (health, about, the edge node's figures), the file read only when it changed. */
  private read(): UpdateState | null {
    if (this.file === null) return null;
    let stamp = '';
    try {
      const st = statSync(this.file);
      stamp = `${st.mtimeMs} ${st.size}`;
    } catch {
      // absent: no update yet
    }
    if (stamp !== this.seen) {
      this.seen = stamp;
      this.last = stamp === '' ? null : readUpdateState(this.file);
    }
    return this.last;
  }

  /** The last update, with its versions and message (`about` shows them to a logged-in client). */
  lastUpdate(): UpdateState | null {
    return this.read();
  }

  health(): PartHealth {
    // Informative only: a rolled-back update leaves the old version serving, which is healthy.
    // The result and when, no versions: /api/health answers anyone and says nothing about the
    // device beyond its state (the versions and the message are in NBIRTH and the state file).
    const last = this.read();
    return { ok: true, lastUpdate: last === null ? null : { result: last.result, at: last.at } };
  }

  nodeFigures(): NodeFigures {
    const last = this.read();
    if (last === null) return {};
    return {
      'Update/Result': { type: 'String', value: last.result },
      'Update/From': { type: 'String', value: last.from },
      'Update/To': { type: 'String', value: last.to },
      'Update/At': { type: 'DateTime', value: Date.parse(last.at) },
      'Update/Message': { type: 'String', value: last.message },
    };
  }
}
