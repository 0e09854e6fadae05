/** `GET /metrics`: Prometheus text, for any authenticated user unless the config opens it to all. */
import { ErrorCodes, HayloftError } from '../../lib/errors.js';
import type { Metrics } from '../../lib/metrics.js';
import type { RouteGroup } from '../routes.js';

export function metricsRoutes(metrics: Metrics | undefined, open: boolean): RouteGroup {
  return {
    routes({ route, auth, respond }) {
      route(
        'GET',
        '/metrics',
        async (req, res) => {
          if (metrics === undefined) throw new HayloftError(ErrorCodes.UNKNOWN_OP, 'metrics are not enabled on this server');
          if (!open && auth !== null) await auth.principal(req);
          respond.sendJson(res, 200, await metrics.text(), metrics.contentType);
        },
        'metrics',
      );
    },
  };
}
