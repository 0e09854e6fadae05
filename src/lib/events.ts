/**
 * The typed event bus: the one seam through which a part reacts to another (docs/design/README.md "Parts and events"
 * lists every event, who emits it and who listens).
 *
 * - Events are named in a map of event name to listener signature. Each layer declares the events
 *   it emits in its own `events.ts` (store/events.ts, model/events.ts, ...); the app builds one bus
 *   over their union and hands it to every part, each seeing only the events of its layer and below.
 * - A part subscribes when it starts, under an owner (itself), and leaves with `off(owner)` when it
 *   stops: no unsubscribe functions to keep, and a stopped part hears nothing.
 * - `emit` calls listeners synchronously in subscription order, on the emitter's stack, and does
 *   not catch: an in-batch listener that throws aborts the write it was adding to (that is the
 *   point of a batch), and a listener must not throw on the committed path.
 * - Emitting with no listener costs a Map lookup: the poll path emits per value changed.
 */

/** An event map: event name to listener signature. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- listener parameter lists differ per event
export type EventMap = { [event: string]: (...args: any[]) => void };

type AnyListener = (...args: never[]) => void;

interface Entry {
  owner: object;
  listener: AnyListener;
}

/** What a part names itself by (its class name, else `name`, else "anonymous"), for `describe`. */
function ownerName(owner: object): string {
  const n = (owner as { name?: unknown }).name;
  if (typeof n === 'string' && n !== '') return n;
  const c = (owner as { constructor?: { name?: string } }).constructor?.name;
  return c !== undefined && c !== '' && c !== 'Object' ? c : 'anonymous';
}

export class EventBus<M extends EventMap> {
  // Arrays, not Sets: emit runs on the poll path and iterates a small array fastest; a new array
  // replaces the old on every subscribe and leave, so an emit in progress is never disturbed.
  // Keyed loosely so that a bus of more events is a bus of fewer (a part takes the bus of its layer).
  private readonly listeners = new Map<PropertyKey, readonly Entry[]>();

  /** Calls `listener` on every `event` until `off(owner)`. */
  on<K extends keyof M>(event: K, owner: object, listener: M[K]): void {
    const list = this.listeners.get(event) ?? [];
    this.listeners.set(event, [...list, { owner, listener: listener as AnyListener }]);
  }

  /** Removes every listener `owner` added, of every event. */
  off(owner: object): void {
    for (const [event, list] of this.listeners) {
      const kept = list.filter((e) => e.owner !== owner);
      if (kept.length === list.length) continue;
      if (kept.length === 0) this.listeners.delete(event);
      else this.listeners.set(event, kept);
    }
  }

  /** Whether anything listens to `event`: an emitter may skip building its arguments when not. */
  has<K extends keyof M>(event: K): boolean {
    return this.listeners.has(event);
  }

  emit<K extends keyof M>(event: K, ...args: Parameters<M[K]>): void {
    const list = this.listeners.get(event);
    if (list === undefined) return;
    for (let i = 0; i < list.length; i++) ((list[i] as Entry).listener as M[K])(...args);
  }

  /** Who listens to what, in calling order: for a reader, the start-up log and tests. */
  describe(): Record<string, string[]> {
    const out: Record<string, string[]> = {};
    for (const [event, list] of this.listeners) out[String(event)] = list.map((e) => ownerName(e.owner));
    return out;
  }
}
