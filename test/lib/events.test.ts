/**
 * The event bus (src/lib/events.ts) and the parts runner (src/lib/part.ts): calling order, leaving
 * by owner, a listener added or removed while an emit runs, describe(), and parts stopped in
 * reverse even when one fails to start or to stop.
 */
import t from 'tap';
import { EventBus } from '../../src/lib/events.js';
import { type Part, Parts } from '../../src/lib/part.js';

type Events = {
  a: (n: number) => void;
  b: (s: string, k: readonly string[]) => void;
};

t.test('listeners run in subscription order with the emitted arguments', async (t) => {
  const bus = new EventBus<Events>();
  const seen: string[] = [];
  const one = { name: 'one' };
  class Two {}
  const two = new Two();
  bus.on('a', one, (n) => seen.push(`one:${n}`));
  bus.on('a', two, (n) => seen.push(`two:${n}`));
  bus.on('b', one, (s, k) => seen.push(`one:${s}:${k.join('+')}`));
  bus.emit('a', 1);
  bus.emit('b', 'x', ['p', 'q']);
  t.same(seen, ['one:1', 'two:1', 'one:x:p+q']);
  t.same(bus.describe(), { a: ['one', 'Two'], b: ['one'] }, 'named by name, else by class');
  t.ok(bus.has('a'));
});

t.test('off(owner) leaves every event of that owner, and only those', async (t) => {
  const bus = new EventBus<Events>();
  const seen: string[] = [];
  const one = {};
  const two = {};
  bus.on('a', one, () => seen.push('one'));
  bus.on('b', one, () => seen.push('one-b'));
  bus.on('a', two, () => seen.push('two'));
  bus.off(one);
  bus.emit('a', 0);
  bus.emit('b', '', []);
  t.same(seen, ['two']);
  t.notOk(bus.has('b'), 'an event nobody hears is gone');
  bus.off(two);
  t.same(bus.describe(), {});
  bus.emit('a', 0);
  t.same(seen, ['two'], 'emitting with no listener does nothing');
});

t.test('a listener added or removed during an emit takes effect from the next emit', async (t) => {
  const bus = new EventBus<Events>();
  const seen: string[] = [];
  const first = {};
  const late = {};
  const gone = {};
  bus.on('a', first, (n) => {
    seen.push(`first:${n}`);
    if (n === 1) {
      bus.on('a', late, (m) => seen.push(`late:${m}`));
      bus.off(gone);
    }
  });
  bus.on('a', gone, (n) => seen.push(`gone:${n}`));
  bus.emit('a', 1);
  bus.emit('a', 2);
  t.same(seen, ['first:1', 'gone:1', 'first:2', 'late:2']);
});

t.test('a listener that throws stops the emit (in-batch events abort their write)', async (t) => {
  const bus = new EventBus<Events>();
  const seen: string[] = [];
  bus.on('a', {}, () => {
    throw new Error('refused');
  });
  bus.on('a', {}, () => seen.push('after'));
  t.throws(() => bus.emit('a', 1), /refused/);
  t.same(seen, []);
});

t.test('Parts: started in order, stopped in reverse, metrics before start', async (t) => {
  const seen: string[] = [];
  const part = (name: string, fail?: 'start' | 'stop'): Part => ({
    name,
    metrics: () => seen.push(`metrics ${name}`),
    start: () => {
      seen.push(`start ${name}`);
      if (fail === 'start') throw new Error(`${name} cannot start`);
    },
    stop: () => {
      seen.push(`stop ${name}`);
      if (fail === 'stop') throw new Error(`${name} cannot stop`);
    },
  });
  const failed: string[] = [];
  const parts = new Parts((p, err) => failed.push(`${p.name}: ${(err as Error).message}`));
  const metrics = {} as never;
  await parts.start(part('store'), metrics);
  await parts.start(part('history', 'stop'));
  await t.rejects(parts.start(part('poller', 'start'), metrics), /poller cannot start/);
  t.same(
    parts.list().map((p) => p.name),
    ['store', 'history', 'poller'],
    'a part that failed to start is still stopped (it may have started half-way)',
  );
  await parts.stopAll();
  t.same(seen, ['metrics store', 'start store', 'start history', 'metrics poller', 'start poller', 'stop poller', 'stop history', 'stop store']);
  t.same(failed, ['history: history cannot stop'], 'a failed stop is reported and the others still stop');
  t.same(parts.list(), []);
});
