/**
 * Sets of time spans as sorted lists of disjoint, non-adjacent [from, to] pairs of epoch ms (both
 * inclusive): what an uplink has to send again of a point (its late samples, see SyncState).
 * Timestamps are whole milliseconds, so [1, 5] and [6, 9] are adjacent and become [1, 9].
 */
export type Span = readonly [number, number];

/** At most this many spans per point: past it, the two nearest are joined (more is sent again, never less). */
export const MAX_SPANS = 32;

/** `spans` with `s` added: overlapping and adjacent spans joined, at most `max` spans. */
export function addSpan(spans: readonly Span[], s: Span, max = MAX_SPANS): Span[] {
  let [from, to] = s;
  const out: Span[] = [];
  let placed = false;
  for (const x of spans) {
    if (x[1] + 1 < from) out.push(x);
    else if (to + 1 < x[0]) {
      if (!placed) out.push([from, to]);
      placed = true;
      out.push(x);
    } else {
      from = Math.min(from, x[0]);
      to = Math.max(to, x[1]);
    }
  }
  if (!placed) out.push([from, to]);
  while (out.length > max) {
    let k = 0;
    for (let i = 1; i < out.length - 1; i++) if ((out[i + 1] as Span)[0] - (out[i] as Span)[1] < (out[k + 1] as Span)[0] - (out[k] as Span)[1]) k = i;
    out.splice(k, 2, [(out[k] as Span)[0], (out[k + 1] as Span)[1]]);
  }
  return out;
}

/** `spans` without the instants from..to. */
export function subtractSpan(spans: readonly Span[], from: number, to: number): Span[] {
  const out: Span[] = [];
  for (const x of spans) {
    if (x[1] < from || x[0] > to) {
      out.push(x);
      continue;
    }
    if (x[0] < from) out.push([x[0], from - 1]);
    if (x[1] > to) out.push([to + 1, x[1]]);
  }
  return out;
}

/** Spans as stored (JSON), or undefined when the text is not a list of ordered pairs of numbers. */
export function parseSpans(text: string): Span[] | undefined {
  try {
    const v = JSON.parse(text) as unknown;
    if (!Array.isArray(v)) return undefined;
    let out: Span[] = [];
    for (const s of v as unknown[]) {
      if (!Array.isArray(s) || s.length !== 2 || !Number.isFinite(s[0]) || !Number.isFinite(s[1]) || (s[0] as number) > (s[1] as number)) return undefined;
      out = addSpan(out, [s[0] as number, s[1] as number]);
    }
    return out.length > 0 ? out : undefined;
  } catch {
    return undefined;
  }
}
