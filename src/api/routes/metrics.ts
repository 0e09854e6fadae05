/** `GET /metrics`: Prometheus text, for any authenticated user unless the config opens it to all. */
import { ErrorCodes, HayloftError } from '../../lib/errors.js';
import type { Metrics } from '../../lib/metrics.js';
import type { RouteGroup } from '../routes.js';

export function metricsRoutes(metrics: Metrics | undefined, open: boolean): RouteGroup {
  return {
    routes(kit) {
      const { route, respond } = kit;
      route(
        'GET',
        '/metrics',
        async (req, res) => {
          if (metrics === undefined) throw new HayloftError(ErrorCodes.UNKNOWN_OP, 'metrics are not enabled on this server');
          // Any authenticated caller: the gate of the token is the check (it throws without one).
          if (!open) await kit.gate(req);
          respond.sendJson(res, 200, await metrics.text(), metrics.contentType);
        },
        'metrics',
      );
    },
  };
}
