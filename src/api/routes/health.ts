/** `GET /api/health` (no authentication): liveness and storage state as JSON; 503 when not ok. */
import type { RouteGroup } from '../routes.js';

/** What `GET /api/health` answers, as JSON. */
export interface HealthReport {
  ok: boolean;
  [detail: string]: unknown;
}

export function healthRoutes(health: (() => Promise<HealthReport>) | undefined): RouteGroup {
  return {
    routes({ route, respond }) {
      route(
        'GET',
        '/api/health',
        async (_req, res) => {
          const report = health === undefined ? { ok: true } : await health();
          respond.sendJson(res, report.ok ? 200 : 503, report);
        },
        'health',
      );
    },
  };
}
