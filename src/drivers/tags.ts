/** Reading connector and point tags the way every driver does: wrong tags become HL_DRIVER_CONFIG. */
import { durationMs } from '../haystack/duration.js';
import { HNumber, HUri, type HDict } from '../haystack/values.js';
import { configError } from './driver.js';

/** A duration tag in ms; `def` when absent. */
export function durationTag(tags: HDict, name: string, def: number): number {
  const v = tags.get(name);
  if (v === undefined) return def;
  const ms = durationMs(v);
  if (typeof ms === 'string') throw configError(`${name} ${ms}`);
  return ms;
}

/** A Number tag; `def` when absent. */
export function numberTag(tags: HDict, name: string, def: number): number {
  const v = tags.get(name);
  if (v === undefined) return def;
  if (!(v instanceof HNumber) || !Number.isFinite(v.val)) throw configError(`${name} must be a finite Number`);
  return v.val;
}

/** An integer tag within bounds; required when `def` is undefined. */
export function intTag(tags: HDict, name: string, min: number, max: number, def?: number): number {
  const v = tags.get(name);
  if (v === undefined) {
    if (def === undefined) throw configError(`${name} is missing (an integer from ${min} to ${max})`);
    return def;
  }
  if (!(v instanceof HNumber) || !Number.isInteger(v.val) || v.val < min || v.val > max) {
    throw configError(`${name} must be an integer from ${min} to ${max}`);
  }
  return v.val;
}

/** The `uri` tag, as a Uri or a Str. */
export function uriTag(tags: HDict, example: string): string {
  const v = tags.get('uri');
  if (v instanceof HUri) return v.val;
  if (typeof v === 'string' && v.trim() !== '') return v.trim();
  throw configError(`uri is missing (a Uri such as \`${example}\`)`);
}
