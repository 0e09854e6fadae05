#!/usr/bin/env node
/**
 * The entry of the `hayloft` command. `serve` (the default command) first makes sure the process
 * runs with the daemon's runtime settings (lib/runtime.ts: V8 heap flags and malloc tunables, which
 * only take effect at process start), restarting itself with them when they are missing; this file
 * loads nothing else before that, so the restart costs one Node start-up. The commands are in
 * commands.ts; before them, the shape of nextTick's objects is made to outlive collections
 * (lib/tick-shape.ts).
 */
import { relaunchWithRuntimeSettings } from './lib/runtime.js';
import { keepTickObjectShape } from './lib/tick-shape.js';

const command = process.argv[2];
if (!((command === undefined || command === 'serve') && relaunchWithRuntimeSettings())) {
  // Before anything else runs (lib/tick-shape.ts): a full collection must not find nextTick's shape unused.
  keepTickObjectShape();
  await import('./commands.js');
}
