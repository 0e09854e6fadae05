/**
 * Quoting client input in error messages and logs. An error that echoes the whole offending
 * input is as large as the attack (a 100,000-character range came back whole in `dis`), so
 * every quoted input goes through here: short texts are quoted as they are, long ones are cut
 * to about 100 characters and say how long they were: `"aaaa…" (100,002 chars)`.
 */

/** Characters of a long input kept in a message. */
export const QUOTE_MAX_CHARS = 100;

/**
 * A count with thousands separators (`100,002`). Not `Intl.NumberFormat`: creating one pages in
 * about 6 MiB of ICU's locale data from the `node` binary, for the life of the process, and an
 * idle gateway would pay that for a comma in error messages nobody has sent yet.
 */
export function groupThousands(n: number): string {
  const text = String(n);
  const dot = text.indexOf('.');
  const whole = dot < 0 ? text : text.slice(0, dot);
  return whole.replace(/\B(?=(\d{3})+$)/g, ',') + (dot < 0 ? '' : text.slice(dot));
}

/**
 * The text as a JSON string literal, cut to `max` characters (never inside a surrogate pair)
 * with `…` and its length in characters when it is longer.
 */
export function quoteInput(text: string, max = QUOTE_MAX_CHARS): string {
  if (text.length <= max) return JSON.stringify(text);
  let end = max;
  const last = text.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end--;
  return `${JSON.stringify(text.slice(0, end) + '…')} (${groupThousands(text.length)} chars)`;
}

/** Characters of a whole message kept (a message quotes a few inputs and names where they are). */
export const MESSAGE_MAX_CHARS = 1000;

/**
 * A message cut to `max` characters: the safety net for messages that quote input without
 * quoteInput (a library's error text, a path of many keys).
 */
export function cutMessage(message: string, max = MESSAGE_MAX_CHARS): string {
  if (message.length <= max) return message;
  return `${message.slice(0, max)}… (${groupThousands(message.length)} chars)`;
}
