/** `formats` (docs/spec/interface.md, GET /api/formats): the media types read and written, from the codec table. */
import { HDict, HGrid, MARKER } from '../../haystack/values.js';
import { listedCodecs } from '../codecs.js';
import type { Op } from '../op.js';

export const formatsOp: Op = {
  name: 'formats',
  summary: 'Grid formats the server reads (request bodies) and writes (responses)',
  methods: ['GET', 'POST'],
  run() {
    const rows = listedCodecs().map((c) =>
      HDict.of({ mime: c.mime, read: c.read === undefined ? null : MARKER, write: c.write === undefined ? null : MARKER }),
    );
    return HGrid.fromRows(rows, HDict.EMPTY, ['mime', 'read', 'write']);
  },
};
