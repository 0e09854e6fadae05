/**
 * Alarm conditions (src/alarm/condition.ts): a record to a Condition, and evaluation: limits with
 * deadband and units, a state, statuses, a connector; a reading of a down point judges nothing.
 */
import t from 'tap';
import { evaluate, parseCondition } from '../../src/alarm/condition.js';
import { HDict, HNumber, HRef, type HVal, MARKER } from '../../src/haystack/values.js';

const cond = (tags: Record<string, HVal>) => parseCondition(HDict.of({ id: HRef.of('c'), alarmCond: MARKER, ...tags }));
const n = (v: number, u?: string): HNumber => HNumber.of(v, u);

t.test('a limit: high, low, the deadband holds an active alarm, units converted', async (t) => {
  const c = cond({ alarmOn: 'limit', pointRef: HRef.of('p'), hiLimit: n(80.6, '°F'), loLimit: n(16, '°C'), deadband: n(1.8, '°F') });
  t.equal(c.delayMs, 0);
  t.equal(c.priority, 100, 'default priority');
  const at = (v: number, active: boolean) => evaluate(c, { curVal: n(v, '°C'), curStatus: 'ok' }, '°C', active);
  t.match(at(27.1, false), { alarm: true, detail: 'high' }, '80.6 °F is 27 °C');
  t.match(at(26.9, false), { alarm: false }, 'under it');
  t.match(at(26.5, true), { alarm: true, detail: 'high' }, 'active: held within the deadband (1.8 °F = 1 K)');
  t.match(at(25.9, true), { alarm: false }, 'inside by the deadband: normal');
  t.match(at(15.9, false), { alarm: true, detail: 'low' });
  t.match(at(16.5, true), { alarm: true, detail: 'low' }, 'the deadband on the low side too');
  t.match(at(17.1, true), { alarm: false });
  t.equal(evaluate(c, { curVal: n(40, '°C'), curStatus: 'down' }, '°C', false), undefined, 'a down point\'s old value judges nothing');
  t.equal(evaluate(c, undefined, '°C', false), undefined, 'no reading yet');
});

t.test('state, status, connector', async (t) => {
  const s = cond({ alarmOn: 'state', pointRef: HRef.of('p'), alarmVal: 'fault' });
  t.match(evaluate(s, { curVal: 'fault', curStatus: 'ok' }, null, false), { alarm: true, detail: 'state' });
  t.match(evaluate(s, { curVal: 'run', curStatus: 'ok' }, null, true), { alarm: false });
  const e = cond({ alarmOn: 'state', pointRef: HRef.of('p'), alarmVal: n(3) });
  t.match(evaluate(e, { curVal: n(3, 'm'), curStatus: 'ok' }, 'm', false), { alarm: true }, 'an enum by number');
  const st = cond({ alarmOn: 'status', filter: 'point', statuses: 'down, stale', delay: n(2, 'min') });
  t.equal(st.delayMs, 120_000);
  t.match(evaluate(st, { curStatus: 'stale' }, null, false), { alarm: true, val: 'stale' });
  t.match(evaluate(st, { curStatus: 'fault' }, null, false), { alarm: false }, 'fault is not listed');
  const cd = cond({ alarmOn: 'connDown', connRef: HRef.of('k') });
  t.match(evaluate(cd, { connStatus: 'down' }, null, false), { alarm: true, detail: 'connDown' });
  t.match(evaluate(cd, { connStatus: 'ok' }, null, true), { alarm: false });
  t.equal(evaluate(cd, {}, null, false), undefined, 'never polled');
});
