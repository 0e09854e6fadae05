/**
 * The last `hayloft update` as the daemon shows it (lib/update.ts writes it): in /api/health
 * (parts.update: the result and when), in `about` for a logged-in client (with the versions and
 * the message: the console's System page), and to a fleet's host in
 * NBIRTH as the `Update/...` figures (versions and message too). Read once at start: an update always restarts the daemon.
 */
import type { NodeFigures, Part, PartHealth } from './part.js';
import { readUpdateState, type UpdateState } from './update.js';

export class UpdateStatus implements Part {
  readonly name = 'update';
  private last: UpdateState | null = null;

  /** `file`: the install's update-state.json; null when not running from an install (a checkout). */
  constructor(private readonly file: string | null) {}

  start(): void {
    this.last = this.file === null ? null : readUpdateState(this.file);
  }

  /** The last update, with its versions and message (`about` shows them to a logged-in client). */
  lastUpdate(): UpdateState | null {
    return this.last;
  }

  health(): PartHealth {
    // Informative only: a rolled-back update leaves the old version serving, which is healthy.
    // The result and when, no versions: /api/health answers anyone and says nothing about the
    // device beyond its state (the versions and the message are in NBIRTH and the state file).
    return { ok: true, lastUpdate: this.last === null ? null : { result: this.last.result, at: this.last.at } };
  }

  nodeFigures(): NodeFigures {
    if (this.last === null) return {};
    return {
      'Update/Result': { type: 'String', value: this.last.result },
      'Update/From': { type: 'String', value: this.last.from },
      'Update/To': { type: 'String', value: this.last.to },
      'Update/At': { type: 'DateTime', value: Date.parse(this.last.at) },
      'Update/Message': { type: 'String', value: this.last.message },
    };
  }
}
