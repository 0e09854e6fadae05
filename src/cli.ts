#!/usr/bin/env node
/**
 * The program of the `hayloft` command (bin/hayloft starts Node on it with the daemon's runtime
 * settings, lib/runtime.ts). `serve` (the default command) started some other way first makes
 * sure it has them, replacing itself with a Node that does where it can; this file loads nothing
 * else before that, so the restart costs one Node start-up. The commands are in commands.ts;
 * before them, the shape of nextTick's objects is made to outlive collections
 * (lib/tick-shape.ts).
 */
import { relaunchWithRuntimeSettings } from './lib/runtime.js';
import { keepTickObjectShape } from './lib/tick-shape.js';

const command = process.argv[2];
// Where it cannot (older Node), `serve` runs as started and logs what is missing (commands.ts).
if (command === undefined || command === 'serve') relaunchWithRuntimeSettings();
// Before anything else runs (lib/tick-shape.ts): a full collection must not find nextTick's shape unused.
keepTickObjectShape();
await import('./commands.js');
