/**
 * Property tests of the frame decoder with fast-check: whatever the bytes, decode either returns a
 * frame that matches the documented layout or throws a ProtocolError. Never another exception, never a
 * hang (every input here is small and the decoder is linear in its input). Valid frames of every type,
 * generated at random, round-trip exactly.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { Packr } from 'msgpackr';
import { decode, encode, ProtocolError, type Frame } from '../../src/protocol/codec.js';
import { FrameType, MAX_TUNNEL_ID, MAX_WINDOW, TUNNEL_KINDS } from '../../src/protocol/constants.js';
import { LAYOUTS, matchesLayout, ODD_VALUES, SAMPLES } from './frames.js';

const RUNS = 2000;
const raw = new Packr({ useRecords: false, variableMapSize: true });

/** The decoder's contract for one input; fails the property with the reason otherwise. */
function decodesOrRefuses(bytes: Uint8Array): void {
  let frame: Frame | null = null;
  try {
    frame = decode(bytes);
  } catch (error) {
    if (error instanceof ProtocolError) {
      assert.ok(error.message.length > 0 && error.message.length <= 200, 'a short reason');
      return;
    }
    assert.fail(`decode threw ${(error as Error)?.name}: ${(error as Error)?.message} for ${Buffer.from(bytes).toString('hex').slice(0, 200)}`);
  }
  assert.ok(matchesLayout(frame), `decoded ${JSON.stringify(frame)?.slice(0, 200)}, which does not match its layout`);
}

// ---- arbitraries --------------------------------------------------------------------------------------

/** Any msgpack value msgpackr packs from plain data (including floats, 64-bit integers, maps). */
const { value: msgpackValue } = fc.letrec<{ value: unknown }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.constant(null),
    fc.boolean(),
    fc.integer({ min: -(2 ** 31), max: 2 ** 32 }),
    fc.constantFrom(0, 1, 2, 5, 11, 12, 100, 101, 999, 1000, 0xffffffff, 2 ** 32, 2 ** 53, -1, MAX_WINDOW, MAX_WINDOW + 1),
    fc.double(),
    fc.string({ maxLength: 20 }),
    fc.uint8Array({ maxLength: 40 }).map((bytes) => Buffer.from(bytes)),
    fc.array(tie('value'), { maxLength: 6 }),
    fc.dictionary(fc.string({ maxLength: 8 }), tie('value'), { maxKeys: 5 }),
  ),
}));

const field = fc.oneof(fc.constantFrom(...ODD_VALUES), msgpackValue);

/** Arrays that look like frames: a plausible type and stream, then random fields. */
const frameLike = fc
  .tuple(fc.integer({ min: -1, max: 15 }), fc.oneof(fc.constantFrom(0, 1, 0xffffffff, 2 ** 32, -1), fc.nat()), fc.array(field, { maxLength: 10 }))
  .map(([type, stream, fields]) => [type, stream, ...fields]);

/** Arrays of the right length for their type, each field random: these reach every field check. */
const rightLength = fc
  .constantFrom(...Object.values(FrameType))
  .chain((type) => fc.array(field, { minLength: LAYOUTS[type]!.length, maxLength: LAYOUTS[type]!.length }).map((fields) => [type, ...fields]));

const streamId = fc.integer({ min: 1, max: 0xffffffff });
const text = fc.string({ unit: 'grapheme', maxLength: 30 });
const lineSafe = text.map((value) => value.replace(/[\r\n\0]/g, ''));
const headerName = lineSafe;
const headers = fc.array(fc.tuple(headerName, lineSafe), { maxLength: 8 }).map((pairs) => pairs.flat());
const bytes = fc.uint8Array({ maxLength: 300 }).map((value) => Buffer.from(value));
const body = fc.option(bytes, { nil: null });
const uint32 = fc.integer({ min: 0, max: 0xffffffff });
const window = fc.integer({ min: 1, max: MAX_WINDOW });
const positive = fc.integer({ min: 1, max: 0xffffffff });
const tunnel = fc.integer({ min: 0, max: MAX_TUNNEL_ID });
const boundTunnel = fc.integer({ min: 1, max: MAX_TUNNEL_ID });
const port = fc.integer({ min: 0, max: 0xffff });
/** A cluster attachment (a fence), or 0 for none: BIND's drop, BOUND's attachment. */
const attachment = fc.oneof(fc.constant(0), fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }));

/** Valid frames of every type, as docs/protocol.md lays them out. */
const validFrame: fc.Arbitrary<Frame> = fc.oneof(
  fc
    .tuple(text, text, positive, window, window, positive, positive)
    .map(([sub, url, maxFrameBody, streamWindow, connectionWindow, maxStreams, maxMessage]): Frame => [
      FrameType.READY,
      0,
      sub,
      url,
      { maxFrameBody, streamWindow, connectionWindow, maxStreams, maxMessage },
    ]),
  fc
    .tuple(streamId, text, lineSafe, lineSafe, headers, text, body, fc.boolean(), fc.boolean())
    .map(([id, requestId, method, path, list, address, chunk, end, upgrade]): Frame => [FrameType.OPEN, id, requestId, method, path, list, address, chunk, end, upgrade]),
  fc
    .tuple(streamId, text, lineSafe, lineSafe, headers, text, body, fc.boolean(), fc.boolean(), tunnel)
    .map(([id, requestId, method, path, list, address, chunk, end, upgrade, on]): Frame => [FrameType.OPEN, id, requestId, method, path, list, address, chunk, end, upgrade, on]),
  fc.tuple(streamId, body, fc.boolean()).map(([id, chunk, end]): Frame => [FrameType.DATA, id, chunk, end]),
  fc
    .tuple(streamId, fc.integer({ min: 100, max: 999 }), lineSafe, headers, body, fc.boolean())
    .map(([id, status, reason, list, chunk, end]): Frame => [FrameType.RESPONSE, id, status, reason, list, chunk, end]),
  fc.tuple(uint32, positive).map(([id, credit]): Frame => [FrameType.WINDOW, id, credit]),
  fc.tuple(streamId, uint32, text).map(([id, code, message]): Frame => [FrameType.RESET, id, code, message]),
  fc.tuple(uint32, text).map(([code, message]): Frame => [FrameType.GOAWAY, 0, code, message]),
  fc
    .tuple(streamId, fc.integer({ min: 100, max: 999 }), lineSafe, headers)
    .map(([id, status, reason, list]): Frame => [FrameType.INFO, id, status, reason, list]),
  fc.tuple(streamId, headers).map(([id, list]): Frame => [FrameType.TRAILERS, id, list]),
  fc
    .tuple(boundTunnel, fc.constantFrom(...TUNNEL_KINDS), text, port, port, text, fc.boolean(), fc.boolean(), fc.option(attachment, { nil: undefined }))
    .map(([id, kind, name, remote, local, policy, replace, pool, drop]): Frame =>
      drop === undefined ? [FrameType.BIND, 0, id, kind, name, remote, local, policy, replace, pool] : [FrameType.BIND, 0, id, kind, name, remote, local, policy, replace, pool, drop],
    ),
  fc
    .tuple(boundTunnel, text, text, text, text, fc.option(attachment, { nil: undefined }))
    .map(([id, error, message, name, url, fence]): Frame =>
      fence === undefined ? [FrameType.BOUND, 0, id, error, message, name, url] : [FrameType.BOUND, 0, id, error, message, name, url, fence],
    ),
  fc.tuple(tunnel, uint32, text).map(([id, code, message]): Frame => [FrameType.UNBOUND, 0, id, code, message]),
  fc
    .tuple(streamId, tunnel, text, text, port, text, port)
    .map(([id, on, requestId, client, clientPort, server, serverPort]): Frame => [FrameType.ACCEPT, id, on, requestId, client, clientPort, server, serverPort]),
);

type Mutation =
  | { kind: 'flip'; at: number; bit: number }
  | { kind: 'set'; at: number; value: number }
  | { kind: 'insert'; at: number; bytes: Uint8Array }
  | { kind: 'delete'; at: number; count: number }
  | { kind: 'truncate'; at: number }
  | { kind: 'append'; bytes: Uint8Array };

const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  fc.record({ kind: fc.constant('flip' as const), at: fc.nat(), bit: fc.integer({ min: 0, max: 7 }) }),
  fc.record({ kind: fc.constant('set' as const), at: fc.nat(), value: fc.oneof(fc.integer({ min: 0, max: 255 }), fc.constantFrom(0x00, 0x7f, 0x90, 0xc0, 0xc1, 0xc4, 0xc6, 0xd4, 0xdb, 0xdd, 0xdf, 0xff)) }),
  fc.record({ kind: fc.constant('insert' as const), at: fc.nat(), bytes: fc.uint8Array({ minLength: 1, maxLength: 8 }) }),
  fc.record({ kind: fc.constant('delete' as const), at: fc.nat(), count: fc.integer({ min: 1, max: 8 }) }),
  fc.record({ kind: fc.constant('truncate' as const), at: fc.nat() }),
  fc.record({ kind: fc.constant('append' as const), bytes: fc.uint8Array({ minLength: 1, maxLength: 8 }) }),
);

function mutate(input: Buffer, mutations: readonly Mutation[]): Buffer {
  let bytes = Buffer.from(input);
  for (const change of mutations) {
    const at = bytes.length === 0 ? 0 : ('at' in change ? change.at % bytes.length : 0);
    switch (change.kind) {
      case 'flip':
        if (bytes.length > 0) bytes[at] = bytes[at]! ^ (1 << change.bit);
        break;
      case 'set':
        if (bytes.length > 0) bytes[at] = change.value;
        break;
      case 'insert':
        bytes = Buffer.concat([bytes.subarray(0, at), change.bytes, bytes.subarray(at)]);
        break;
      case 'delete':
        bytes = Buffer.concat([bytes.subarray(0, at), bytes.subarray(at + change.count)]);
        break;
      case 'truncate':
        bytes = bytes.subarray(0, at);
        break;
      case 'append':
        bytes = Buffer.concat([bytes, change.bytes]);
        break;
    }
  }
  return bytes;
}

// ---- properties ---------------------------------------------------------------------------------------

test('random bytes: a valid frame or a ProtocolError', () => {
  fc.assert(fc.property(fc.uint8Array({ maxLength: 512 }), decodesOrRefuses), { numRuns: RUNS });
});

test('random bytes behind an array header: a valid frame or a ProtocolError', () => {
  fc.assert(
    fc.property(fc.integer({ min: 0x90, max: 0x9f }), fc.integer({ min: 1, max: 11 }), fc.uint8Array({ maxLength: 256 }), (header, type, rest) => {
      decodesOrRefuses(Buffer.concat([Buffer.from([header, type]), rest]));
    }),
    { numRuns: RUNS },
  );
});

test('random msgpack values: a valid frame or a ProtocolError', () => {
  fc.assert(
    fc.property(msgpackValue, (value) => decodesOrRefuses(raw.pack(value))),
    { numRuns: RUNS },
  );
});

test('random frame-like arrays: a valid frame or a ProtocolError', () => {
  fc.assert(
    fc.property(frameLike, (value) => decodesOrRefuses(raw.pack(value))),
    { numRuns: RUNS },
  );
});

test('random fields in arrays of the right length: a valid frame or a ProtocolError', () => {
  fc.assert(
    fc.property(rightLength, (value) => decodesOrRefuses(raw.pack(value))),
    { numRuns: RUNS },
  );
});

test('mutated valid frames: a valid frame or a ProtocolError', () => {
  const encoded = SAMPLES.map((frame) => encode(frame));
  fc.assert(
    fc.property(fc.integer({ min: 0, max: encoded.length - 1 }), fc.array(mutation, { minLength: 1, maxLength: 5 }), (index, mutations) => {
      decodesOrRefuses(mutate(encoded[index]!, mutations));
    }),
    { numRuns: RUNS },
  );
});

test('mutated random valid frames: a valid frame or a ProtocolError', () => {
  fc.assert(
    fc.property(validFrame, fc.array(mutation, { minLength: 1, maxLength: 3 }), (frame, mutations) => {
      decodesOrRefuses(mutate(encode(frame), mutations));
    }),
    { numRuns: RUNS },
  );
});

test('random valid frames of every type round-trip exactly', () => {
  fc.assert(
    fc.property(validFrame, (frame) => {
      assert.ok(matchesLayout(frame));
      assert.deepEqual(decode(encode(frame)), frame);
    }),
    { numRuns: RUNS },
  );
});

test('random valid frames followed by anything are refused as trailing bytes', () => {
  fc.assert(
    fc.property(validFrame, fc.uint8Array({ minLength: 1, maxLength: 16 }), (frame, tail) => {
      assert.throws(() => decode(Buffer.concat([encode(frame), tail])), (error: unknown) => error instanceof ProtocolError && /trailing/.test(error.message));
    }),
    { numRuns: RUNS },
  );
});
