/**
 * HisCollector when history cannot be stored: polled samples are dropped and counted (the history
 * store's hayloft_history_refused_samples_total), logged once when it starts and once when it
 * ends, not once per poll cycle.
 */
import type { Writable } from 'node:stream';
import t from 'tap';
import { createLogger } from '../../src/lib/log.js';
import { type Collecting, HisCollector } from '../../src/poller/his-collector.js';
import { Store } from '../../src/store/db.js';
import { HistoryStore } from '../../src/store/history.js';
import { DiskSpace, type SpaceReading } from '../../src/store/space.js';
import { tempDir } from '../helpers/tmp.js';

const MIB = 1024 * 1024;

t.test('below the floor: samples counted, one line when refused, one when stored again', async (t) => {
  const store = await Store.open(tempDir(t));
  t.teardown(() => store.close());
  const logs: string[] = [];
  const log = createLogger({ level: 'info', destination: { write: (s: string) => void logs.push(s) } as unknown as Writable });
  let free = 100 * MIB;
  const space = new DiskSpace({ dir: store.dir, floorBytes: 64 * MIB, log, refreshMs: 3_600_000, statfs: async (): Promise<SpaceReading> => ({ free, total: 1000 * MIB }) });
  const history = new HistoryStore(store, { space });
  await history.start();
  const written: string[] = [];
  history.events.on('his.written', written, (id) => written.push(id));
  const collector = new HisCollector({ history, log });
  const c: Collecting = { id: 'p', kind: 'Number', plan: { intervalMs: undefined, cov: 0 }, lastSlot: -Infinity, lastVal: undefined };
  let ts = 0;
  const cycle = async (): Promise<void> => {
    collector.offer(c, ts, (ts += 1000));
    await collector.idle();
  };

  await space.refresh();
  await cycle();
  t.equal(history.stats('p').size, 1, 'stored while there is room');

  free = 10 * MIB;
  await space.refresh();
  for (let i = 0; i < 5; i++) await cycle();
  t.equal(history.stats('p').size, 1, 'nothing stored below the floor');
  t.equal(history.samplesRefused.floor, 5, 'each refused sample counted');
  t.equal(logs.filter((l) => l.includes('cannot store collected history')).length, 1, 'one line for five refused cycles');
  t.match(logs.find((l) => l.includes('cannot store collected history')), /HL_STORAGE_FULL/, 'naming the code');

  free = 100 * MIB;
  await space.refresh();
  await cycle();
  await cycle();
  t.equal(history.stats('p').size, 3, 'stored again');
  t.equal(logs.filter((l) => l.includes('collected history is stored again')).length, 1, 'one line when it ends');
  t.equal(written.length, 3, 'the bus hears of the writes that landed only');
});
