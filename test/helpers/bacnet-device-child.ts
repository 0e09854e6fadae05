/**
 * A BACnet device simulator (bacnet-device.ts) in a process of its own, for tests that pause it
 * (SIGSTOP / SIGCONT) or kill it and start another in its place: a device restart as the network
 * sees it. Arguments: address, port, device instance, then `TYPE:instance=value` presentValues
 * (REAL), and optionally `--announce host:port` (an I-Am sent there once it listens, as a device
 * that starts up broadcasts one). Prints `ready` when it listens.
 *
 *   node --import tsx test/helpers/bacnet-device-child.ts 127.0.0.7 47900 504 2:1=1 2:3=10 --announce 127.0.0.3:47901
 */
import { BacnetDevice, real } from './bacnet-device.js';

const [address, port, instance, ...rest] = process.argv.slice(2);
const dev = new BacnetDevice({ address: address as string, port: Number(port), deviceInstance: Number(instance) });
let announce: string | undefined;
for (let i = 0; i < rest.length; i++) {
  const a = rest[i] as string;
  if (a === '--announce') {
    announce = rest[++i];
    continue;
  }
  const m = /^(\d+):(\d+)=(-?[\d.]+)$/.exec(a);
  if (m === null) throw new Error(`bad value argument ${a}`);
  dev.set(Number(m[1]), Number(m[2]), real(Number(m[3])));
}
await dev.start();
if (announce !== undefined) dev.announce(announce);
process.stdout.write('ready\n');
process.on('SIGTERM', () => {
  dev.stop();
  process.exit(0);
});
