/**
 * InFlight (src/api/exchange.ts): the list of requests being answered that the server drains at
 * close and the stall watch walks, threaded through the exchanges. End-to-end use is covered by
 * server.test.ts (close waits for requests in flight) and hostile.test.ts (stalled clients cut).
 */
import type { ServerResponse } from 'node:http';
import t from 'tap';
import { type Exchange, InFlight } from '../../src/api/exchange.js';
import { JSON_CODEC } from '../../src/api/codecs.js';

const exchange = (id: number): Exchange => ({ id, started: 0, codec: JSON_CODEC, op: 'read', bodyRead: false, res: undefined, prev: undefined, next: undefined });
const response = (name: string): ServerResponse => ({ name }) as unknown as ServerResponse;
const names = (l: InFlight): string[] => [...l].map((r) => (r as unknown as { name: string }).name);

t.test('adds, removes from anywhere, counts and lists newest first', async (t) => {
  const l = new InFlight();
  const xs = [1, 2, 3, 4].map(exchange);
  xs.forEach((x, i) => l.add(x, response(`r${i + 1}`)));
  t.equal(l.size, 4);
  t.same(names(l), ['r4', 'r3', 'r2', 'r1']);
  l.delete(xs[1] as Exchange);
  t.same(names(l), ['r4', 'r3', 'r1'], 'from the middle');
  l.delete(xs[3] as Exchange);
  t.same(names(l), ['r3', 'r1'], 'the newest');
  l.delete(xs[0] as Exchange);
  t.same(names(l), ['r3'], 'the oldest');
  l.delete(xs[0] as Exchange);
  t.equal(l.size, 1, 'removing one not in the list changes nothing');
  l.add(xs[2] as Exchange, response('again'));
  t.same(names(l), ['r3'], 'adding one already in the list changes nothing');
  l.delete(xs[2] as Exchange);
  t.equal(l.size, 0);
  t.same(names(l), []);
  l.add(xs[1] as Exchange, response('back'));
  t.same(names(l), ['back'], 'a removed exchange can be added again');
});

t.test('removing the current one while walking the list', async (t) => {
  const l = new InFlight();
  const xs = [1, 2, 3].map(exchange);
  xs.forEach((x, i) => l.add(x, response(`r${i + 1}`)));
  const seen: string[] = [];
  let i = 2;
  for (const r of l) {
    seen.push((r as unknown as { name: string }).name);
    l.delete(xs[i--] as Exchange);
  }
  t.same(seen, ['r3', 'r2', 'r1'], 'every one is visited');
  t.equal(l.size, 0);
});
