/** `GET /api/backup` (USER_ADMIN over everything): the bytes of a backup file, read from one snapshot. */
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { ErrorCodes, HayloftError } from '../../lib/errors.js';
import type { RouteGroup } from '../routes.js';

export function backupRoutes(backup: (() => Promise<Readable>) | undefined): RouteGroup {
  return {
    routes(kit) {
      const { route, respond, log } = kit;
      route(
        'GET',
        '/api/backup',
        async (req, res) => {
          const x = respond.exchangeOf(req);
          try {
            if (backup === undefined) throw new HayloftError(ErrorCodes.UNKNOWN_OP, 'backups are not enabled on this server');
            // A backup holds everything, users and password hashes included: USER_ADMIN over all.
            const gate = await kit.gate(req);
            gate.requireAll('USER_ADMIN', 'a backup');
            const p = gate.principal;
            // Always logged: who copied the whole store, users and password hashes included.
            log.info({ reqId: x.id, user: p.username, ...(p.impersonatedBy === undefined ? {} : { impersonatedBy: p.impersonatedBy }) }, 'backup requested');
            const stream = await backup();
            const stamp = new Date().toISOString().replace(/[:.]/g, '-');
            const headers: Record<string, string> = {
              'Content-Type': 'application/gzip',
              'Content-Disposition': `attachment; filename="hayloft-${stamp}.backup.gz"`,
              'Cache-Control': 'no-store',
            };
            if (respond.closing) headers.Connection = 'close';
            res.writeHead(200, headers);
            await pipeline(stream, res);
            log.info({ reqId: x.id, ms: Math.round(performance.now() - x.started) }, 'backup sent');
          } catch (e) {
            if (!res.headersSent) throw e;
            // Cut mid-way (the client went away, or reading failed): the file has no end line, so
            // a restore refuses it.
            log.warn({ err: e, reqId: x.id }, 'backup not completed: connection cut');
            res.destroy();
          }
        },
        'backup',
      );
    },
  };
}
