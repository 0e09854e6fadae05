/**
 * MQTT delivery of alarm notifications (docs/alarms.md "MQTT"): the webhook's JSON body, published
 * QoS 1 (not retained) on the edge node's own MQTT connection (the `mqtt` config section, the
 * Sparkplug B edge node of src/sync/mqtt), to the route's topic or the default
 * `hayloft/<groupId>/<edgeNodeId>/alarm`, outside the Sparkplug namespace. The broker's PUBACK is
 * the receiver taking it. QoS 1 is at least once: a subscriber drops a repeated `id`.
 */
import type { Delivery } from './delivery.js';

/** What the edge node offers (sync/mqtt/edge-node.ts EdgeNode.publishMessage); alarm/ may not import sync/. */
export interface MessagePublisher {
  publishMessage(topic: string, payload: string): Promise<void>;
}

export function defaultAlarmTopic(groupId: string, edgeNodeId: string): string {
  return `hayloft/${groupId}/${edgeNodeId}/alarm`;
}

/** `publisher` is asked at each send: the edge node starts after the notifier and may be paused (enabled: false). */
export function mqttDelivery(publisher: () => MessagePublisher | undefined, defaultTopic: string): Delivery {
  return {
    kind: 'mqtt',
    async send(topic, n) {
      const p = publisher();
      if (p === undefined) throw new Error('mqtt: the edge node is not running (mqtt section disabled?)');
      await p.publishMessage(topic === '' ? defaultTopic : topic, JSON.stringify(n.body));
    },
  };
}
