/**
 * The console's files through the real server: `/` and hashed assets, compressed by what the
 * browser accepts, index.html no-cache and assets immutable, a strict CSP on every answer, 304 on
 * a matching ETag, 404 for an unknown asset, 405 for a POST, and a helpful 404 when not built.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import t, { type Test } from 'tap';
import { consoleFiles, consoleRoutes } from '../../src/api/routes/console.js';
import { createApiServer } from '../../src/api/server.js';
import { ManualClock } from '../../src/lib/clock.js';
import { silentLogger } from '../../src/lib/log.js';
import { fakeCtx } from '../helpers/api-fixture.js';
import { tempDir } from '../helpers/tmp.js';

async function serve(t: Test, dir: string): Promise<string> {
  const server = createApiServer({ ops: [], ctx: fakeCtx(new ManualClock(0), silentLogger()), auth: null, log: silentLogger(), maxBodyBytes: 1024, debug: false, groups: [consoleRoutes(consoleFiles(dir))] });
  const { port } = await server.listen(0, '127.0.0.1');
  t.teardown(() => server.close());
  return `http://127.0.0.1:${port}`;
}

t.test('serves the built console with caching, compression and a CSP', async (t) => {
  const dir = tempDir(t);
  mkdirSync(join(dir, 'assets'));
  const js = `console.log(${JSON.stringify('x'.repeat(2000))});\n`;
  writeFileSync(join(dir, 'index.html'), '<!doctype html><script type="module" src="assets/main-ABC123.js"></script>');
  writeFileSync(join(dir, 'assets', 'main-ABC123.js'), js);
  const base = await serve(t, dir);

  const index = await fetch(`${base}/`);
  t.equal(index.status, 200);
  t.match(index.headers.get('content-type'), /^text\/html/);
  t.equal(index.headers.get('cache-control'), 'no-cache', 'index.html is revalidated every time');
  const csp = index.headers.get('content-security-policy') ?? '';
  t.match(csp, /default-src 'self'/);
  t.match(csp, /script-src 'self'(;|$)/, 'no inline scripts');
  t.notMatch(csp, /unsafe-inline|unsafe-eval/);
  t.match(await index.text(), /main-ABC123\.js/);

  for (const [enc, decode] of [
    ['br', brotliDecompressSync],
    ['gzip', gunzipSync],
  ] as const) {
    const res = await fetch(`${base}/assets/main-ABC123.js`, { headers: { 'accept-encoding': enc } });
    t.equal(res.status, 200);
    t.equal(res.headers.get('content-encoding'), enc, `${enc} when asked for`);
    t.equal(res.headers.get('cache-control'), 'public, max-age=31536000, immutable', 'hashed assets are immutable');
    const raw = Buffer.from(await new Response(res.body).arrayBuffer());
    // fetch decodes on its own; either way the bytes must come back as the file.
    t.equal(raw.toString() === js ? js : decode(raw).toString(), js);
  }
  const etag = index.headers.get('etag') ?? '';
  t.equal((await fetch(`${base}/`, { headers: { 'if-none-match': etag } })).status, 304, 'a matching ETag gets 304');
  const missing = await fetch(`${base}/assets/nope-123.js`);
  t.equal(missing.status, 404);
  t.match(missing.headers.get('content-security-policy'), /default-src/);
  const post = await fetch(`${base}/`, { method: 'POST', body: 'x' });
  t.equal(post.status, 405);
  t.equal(post.headers.get('allow'), 'GET, HEAD');
  const head = await fetch(`${base}/index.html`, { method: 'HEAD' });
  t.equal(head.status, 200, 'HEAD and /index.html too');
});

t.test('an unbuilt console says how to build it', async (t) => {
  const base = await serve(t, tempDir(t));
  const res = await fetch(`${base}/`);
  t.equal(res.status, 404);
  t.match(await res.text(), /npm run build/);
});
