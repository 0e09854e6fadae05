/**
 * `about` (docs/spec/interface.md, GET /api/about): one row describing the server, from ctx.info and the clock.
 * Beyond the spec's columns, `clockStatus` says whether `serverTime` can be trusted (docs/clock.md):
 * an extra column, which grid clients ignore (the spec lets a response hold a subset of its columns).
 * So are `updateResult`, `updateFrom`, `updateTo`, `updateAt` and `updateMessage`, the last
 * `hayloft update` (docs/updates.md), present once there was one: the versions are said here, to
 * a logged-in client, and not in /api/health, which answers anyone.
 */
import { HDateTime, HDict, HGrid, HUri } from '../../haystack/values.js';
import type { Op } from '../op.js';

/** The version of the Haystack REST protocol served. */
export const PROTOCOL_VERSION = '3.0';
export const PRODUCT_NAME = 'Hayloft';
// Placeholders until the project has a public home: clients only display them.
export const PRODUCT_URI = 'https://github.com/hayloft/hayloft';
export const VENDOR_NAME = 'Hayloft';
export const VENDOR_URI = 'https://github.com/hayloft';

export const aboutOp: Op = {
  name: 'about',
  summary: 'Summary information about the server',
  methods: ['GET', 'POST'],
  run({ ctx }) {
    const { info, clock } = ctx;
    const last = info.lastUpdate?.() ?? null;
    const at = last === null ? NaN : Date.parse(last.at);
    const row = HDict.of({
      protocolVersion: PROTOCOL_VERSION,
      tz: info.tz.name,
      serverName: info.serverName,
      serverTime: new HDateTime(clock.now(), info.tz),
      serverBootTime: new HDateTime(info.bootTime, info.tz),
      productName: PRODUCT_NAME,
      productUri: new HUri(PRODUCT_URI),
      productVersion: info.productVersion,
      vendorName: VENDOR_NAME,
      vendorUri: new HUri(VENDOR_URI),
      ...(info.clockStatus === undefined ? {} : { clockStatus: info.clockStatus() }),
      ...(last === null
        ? {}
        : {
            updateResult: last.result,
            updateFrom: last.from,
            updateTo: last.to,
            ...(Number.isNaN(at) ? {} : { updateAt: new HDateTime(at, info.tz) }),
            updateMessage: last.message,
          }),
    });
    return HGrid.fromRows([row]);
  },
};
