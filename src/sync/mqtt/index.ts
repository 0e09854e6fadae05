/**
 * src/sync/mqtt: Hayloft as a Sparkplug B 3.0 edge node on an MQTT broker (MQTT.js, payloads
 * through Eclipse Tahu's protobuf schema): births and deaths, aliases, seq, store and forward
 * from the history store with a cursor per point, Rebirth on NCMD, DCMD refused or handed to a
 * point writer. The design notes are in edge-node.ts.
 */
export { type CommandWrite, type CommandWriter, EdgeNode, type EdgeNodeOptions, type EdgeNodeStats } from './edge-node.js';
