/**
 * lib/tick-shape.ts: the object of a `process.nextTick` is held, so the hidden class that every
 * tick object is built with survives full garbage collections run while no tick is queued (after
 * those, V8 would build new classes, its cache for nextTick's literal would go megamorphic for
 * good, and every tick would cost about 1 us more: docs/performance.md). Checked in a child Node
 * with V8's test functions: after three full collections, a new tick object has the held one's
 * hidden class.
 */
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import t from 'tap';
import { tempDir } from '../helpers/tmp.js';

const MODULE = pathToFileURL(new URL('../../src/lib/tick-shape.ts', import.meta.url).pathname).href;

t.test('a tick object made after full collections has the shape of the one held', async (t) => {
  const dir = tempDir(t);
  const script = path.join(dir, 'child.mts');
  writeFileSync(
    script,
    `import { executionAsyncResource } from 'node:async_hooks';
import { keepTickObjectShape, keptTickObject } from ${JSON.stringify(MODULE)};
const sameMap = new Function('a', 'b', 'return %HaveSameMap(a, b)');
const nextTickObject = () => new Promise((resolve) => process.nextTick(() => resolve(executionAsyncResource())));
keepTickObjectShape();
await new Promise((resolve) => setImmediate(resolve));
const kept = keptTickObject();
// Compared now and not held: only the kept object may keep the shape alive through the collections.
const sameBefore = kept !== undefined && sameMap(kept, await nextTickObject());
await new Promise((resolve) => setImmediate(resolve));
for (let i = 0; i < 3; i++) globalThis.gc();
const after = await nextTickObject();
console.log(JSON.stringify({
  kept: kept !== undefined,
  isTick: kept !== undefined && typeof kept.callback === 'function' && Object.getOwnPropertySymbols(kept).length >= 2,
  sameBefore,
  sameAfter: kept !== undefined && sameMap(kept, after),
}));
`,
  );
  const r = spawnSync(process.execPath, ['--import', 'tsx', '--allow-natives-syntax', '--expose-gc', script], { encoding: 'utf8', timeout: 60_000 });
  t.equal(r.status, 0, `the child ran (${r.stderr.slice(0, 500)})`);
  const got = JSON.parse(r.stdout.trim().split('\n').pop() ?? '{}') as Record<string, boolean>;
  t.ok(got.kept, 'a tick object is held');
  t.ok(got.isTick, 'and it is a tick object (its callback and async id symbols)');
  t.ok(got.sameBefore, 'new tick objects have its hidden class');
  t.ok(got.sameAfter, 'and still do after three full garbage collections');
});
