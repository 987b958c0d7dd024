/**
 * A capture as the edge stores it, for store tests: a POST to `/q/<seq>` whose OPEN frame is kept and
 * whose request body of `bodySize` bytes is kept beside it, answered 200 without a body.
 */
import { encode } from '../../src/protocol/codec.js';
import { FrameType } from '../../src/protocol/constants.js';
import type { RingHandle, StoredCapture } from '../../src/store/captures.js';

export function postCapture(ring: RingHandle, seq: number, id: string, bodySize: number, receivedAt = Date.now()): StoredCapture {
  return {
    id, seq, subdomain: ring.subdomain, accountId: ring.accountId, tokenId: 'tok_00000000', clientAddress: '127.0.0.1',
    method: 'POST', path: `/q/${seq}`, status: 200, receivedAt, durationMs: 1, error: null, replayOf: null,
    requestBodySize: bodySize, requestTruncated: false, responseBodySize: 0, responseTruncated: false,
    open: encode([FrameType.OPEN, 1, id, 'POST', `/q/${seq}`, [], '127.0.0.1', null, false, false]),
    requestHeaders: null, requestBody: Buffer.alloc(bodySize, 0x62), response: null, responseHeaders: [], responseBody: null,
  };
}

/** Records as the capture journal wrote them before batches and laps: [u32 LE length][u32 LE ring][f64 LE seq][bytes] each. */
export function legacyJournal(records: readonly { ringId: number; seq: number; bytes: Buffer }[]): Buffer {
  return Buffer.concat(
    records.map((record) => {
      const header = Buffer.alloc(16);
      header.writeUInt32LE(12 + record.bytes.byteLength, 0);
      header.writeUInt32LE(record.ringId, 4);
      header.writeDoubleLE(record.seq, 8);
      return Buffer.concat([header, record.bytes]);
    }),
  );
}
