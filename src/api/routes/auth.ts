/**
 * The token endpoint and password change (their answers are OAuth and plain-text shapes, written
 * by auth-http.ts). The WideSky client posts to /user/updatePassword; the interface names
 * /api/updatePassword: both are served.
 */
import type { RouteGroup } from '../routes.js';

export const authRoutes: RouteGroup = {
  routes({ route, auth }) {
    if (auth === null) return;
    route('POST', '/oauth2/token', (req, res) => auth.token(req, res));
    route('DELETE', '/oauth2/token', (req, res) => auth.logout(req, res));
    route('POST', '/api/updatePassword', (req, res) => auth.updatePassword(req, res));
    route('POST', '/user/updatePassword', (req, res) => auth.updatePassword(req, res));
  },
};
