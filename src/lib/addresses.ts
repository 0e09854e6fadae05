/**
 * The addresses a person can type to reach a server listening on `host`: the host itself when it
 * is one address, else (listening on every address) this machine's own non-loopback addresses,
 * IPv4 first, and loopback only when there is nothing else (a container without a network).
 * Used by the first-start message to say where the console is.
 */
import os from 'node:os';

type Interfaces = ReturnType<typeof os.networkInterfaces>;

/** A URL's host part: IPv6 literals in brackets. */
export function urlHost(address: string): string {
  return address.includes(':') && !address.startsWith('[') ? `[${address}]` : address;
}

export function reachableAddresses(host: string, interfaces: Interfaces = os.networkInterfaces()): string[] {
  if (host !== '0.0.0.0' && host !== '::' && host !== '') return [host];
  const v4: string[] = [];
  const v6: string[] = [];
  for (const list of Object.values(interfaces)) {
    for (const a of list ?? []) {
      if (a.internal) continue;
      if (a.family === 'IPv4') v4.push(a.address);
      // Link-local IPv6 needs a zone id a browser will not take: of no use to type.
      else if (host === '::' && !a.address.toLowerCase().startsWith('fe80:')) v6.push(a.address);
    }
  }
  const all = [...v4, ...v6];
  return all.length > 0 ? all : ['127.0.0.1'];
}
