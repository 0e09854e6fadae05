/**
 * The technician's console (web/, built by `npm run build` into dist/web): its files served at `/`.
 *
 * Every file is read once when the server is built and compressed (brotli and gzip) the first time
 * it is asked for, so a start stays quick and a later request costs a map lookup and one write; the console is small (about 100 KB), so memory is not
 * a concern. `index.html` is `no-cache` (a new build must be seen at once); everything under
 * `/assets/` carries a content hash in its name (esbuild's `[name]-[hash]`) and is `immutable` for
 * a year. Every answer carries a strict Content-Security-Policy: scripts, styles, fonts, images
 * and connections only from this server, no inline script or style, no framing. The console has
 * no private door: it uses /oauth2/token and /api/<op> like any other client.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { extname, join } from 'node:path';
import { createRequire } from 'node:module';
import type * as Zlib from 'node:zlib';
import Negotiator from 'negotiator';
import { ErrorCodes, HayloftError } from '../../lib/errors.js';
import type { RouteGroup } from '../routes.js';

/** zlib, loaded with the first compressed answer: a start does not need it (0.2-0.4 MiB on Node 24). */
let zlibModule: typeof Zlib | undefined;
const zlib = (): typeof Zlib => (zlibModule ??= createRequire(import.meta.url)('node:zlib') as typeof Zlib);

/** The console's policy: nothing from any other host, nothing inline. */
export const CONSOLE_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data: blob:",
  "font-src 'self'",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.json': 'application/json',
  '.map': 'application/json',
};

interface ServedFile {
  type: string;
  cache: string;
  identity: Buffer;
  /** Worth compressing (text, over 256 bytes); the encodings are made on first use. */
  squeeze: boolean;
  br?: Buffer;
  gzip?: Buffer;
  etag: string;
}

export interface ConsoleFiles {
  /** Answers a GET or HEAD for `/`, `/index.html` or `/assets/<file>`; false when the path is none of them. */
  serve(req: IncomingMessage, res: ServerResponse, path: string): boolean;
  /** How many files are served (0: the console was not built). */
  readonly size: number;
}

function compressible(type: string): boolean {
  return type.startsWith('text/') || type.includes('json') || type.includes('svg');
}

function load(file: string, cache: string): ServedFile {
  const identity = readFileSync(file);
  const type = TYPES[extname(file)] ?? 'application/octet-stream';
  const squeeze = compressible(type) && identity.length > 256;
  const st = statSync(file);
  return {
    type,
    cache,
    identity,
    squeeze,
    etag: `"${identity.length.toString(16)}-${Math.floor(st.mtimeMs).toString(16)}"`,
  };
}

/**
 * Reads the built console from `dir` (dist/web). A missing folder serves nothing, and `/` then
 * says how to build it rather than answering a bare 404.
 */
export function consoleFiles(dir: string): ConsoleFiles {
  const files = new Map<string, ServedFile>();
  if (existsSync(join(dir, 'index.html'))) {
    files.set('/', load(join(dir, 'index.html'), 'no-cache'));
    const assets = join(dir, 'assets');
    if (existsSync(assets)) {
      for (const name of readdirSync(assets)) {
        if (name.endsWith('.map')) continue;
        files.set(`/assets/${name}`, load(join(assets, name), 'public, max-age=31536000, immutable'));
      }
    }
  }
  return {
    size: files.size,
    serve(req, res, path) {
      const key = path === '/index.html' ? '/' : path;
      if (key !== '/' && !key.startsWith('/assets/')) return false;
      const f = files.get(key);
      res.setHeader('Content-Security-Policy', CONSOLE_CSP);
      res.setHeader('X-Content-Type-Options', 'nosniff');
      res.setHeader('Referrer-Policy', 'no-referrer');
      if (req.method !== 'GET' && req.method !== 'HEAD') {
        res.writeHead(405, { Allow: 'GET, HEAD', 'Content-Type': 'text/plain; charset=utf-8' });
        res.end('method not allowed\n');
        return true;
      }
      if (f === undefined) {
        const msg = key === '/' ? 'The console is not built: run `npm run build`.\n' : 'not found\n';
        res.writeHead(404, { 'Content-Type': 'text/plain; charset=utf-8', 'Cache-Control': 'no-store' });
        res.end(req.method === 'HEAD' ? undefined : msg);
        return true;
      }
      if (req.headers['if-none-match'] === f.etag) {
        res.writeHead(304, { ETag: f.etag, 'Cache-Control': f.cache });
        res.end();
        return true;
      }
      let body = f.identity;
      let encoding: string | undefined;
      if (f.squeeze) {
        const pick = new Negotiator(req).encoding(['br', 'gzip', 'identity']);
        if (pick === 'br') {
          const { brotliCompressSync, constants } = zlib();
          f.br ??= brotliCompressSync(f.identity, { params: { [constants.BROTLI_PARAM_QUALITY]: 11, [constants.BROTLI_PARAM_SIZE_HINT]: f.identity.length } });
          [body, encoding] = [f.br, 'br'];
        } else if (pick === 'gzip') {
          f.gzip ??= zlib().gzipSync(f.identity, { level: 9 });
          [body, encoding] = [f.gzip, 'gzip'];
        }
      }
      const headers: Record<string, string | number> = {
        'Content-Type': f.type,
        'Content-Length': body.length,
        'Cache-Control': f.cache,
        ETag: f.etag,
        Vary: 'Accept-Encoding',
      };
      if (encoding !== undefined) headers['Content-Encoding'] = encoding;
      res.writeHead(200, headers);
      res.end(req.method === 'HEAD' ? undefined : body);
      return true;
    },
  };
}

/** The console's route group: `/`, `/index.html` and `/assets/*`, counted as `console` in the metrics. */
export function consoleRoutes(files: ConsoleFiles): RouteGroup {
  return {
    routes({ route }) {
      const page = (req: IncomingMessage, res: ServerResponse): void => {
        const url = req.url ?? '/';
        const q = url.indexOf('?');
        const path = q < 0 ? url : url.slice(0, q);
        if (!files.serve(req, res, path)) throw new HayloftError(ErrorCodes.UNKNOWN_OP, `nothing at ${path}`);
      };
      for (const path of ['/', '/index.html', '/assets/*']) route('ALL', path, page, 'console');
    },
  };
}
