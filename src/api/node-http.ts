/**
 * `node:http` and polka for the server, loaded with `require` rather than an ES `import`.
 *
 * On Node 22 and later the first ES import of `node:http` builds the module's ES facade, which
 * reads every one of its exports, the lazy ones too: `http.WebSocket`, `CloseEvent` and
 * `MessageEvent` load undici, and undici loads `http2`, web streams, `File` and more. None of them
 * is used here, and they stay resident: 3.2 MiB of an idle daemon on Node 24 (docs/performance.md,
 * "Memory as users run it"). `require` returns the same module object without reading its
 * exports. polka's ES build imports `node:http` itself, so polka comes through `require` too (its
 * CommonJS build, the same code). Every other module takes `http` and polka from here (a static
 * `import ... from 'node:http'` or `'polka'` elsewhere brings the cost back: eslint's
 * no-restricted-imports says so, and test/lib/lazy-load.test.ts fails on Node 22+).
 */
import { createRequire } from 'node:module';
import type * as Http from 'node:http';
import type Polka from 'polka';

const require = createRequire(import.meta.url);

export const http = require('node:http') as typeof Http;
export const polka = require('polka') as typeof Polka;
