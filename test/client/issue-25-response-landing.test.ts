/**
 * Issue 25: a Content-Length response body is read outside llhttp (src/client/local-hop/connection.ts,
 * `readBody`) and each byte is copied once, from the local socket's read straight into the frame it
 * leaves in (src/client/http-stream.ts, the landing): no copy by Node's binding, no join, no copy by the
 * frame encoder. What that must keep, against a raw local server and an edge that records frames:
 * bodies of every size around the frame limit arrive byte for byte in the frames they always left in
 * (one RESPONSE when whole in a turn, a frame's worth at most each), with credit to spare and with
 * credit short (the bytes then wait and leave as DATA within it, a whole landing still without a copy),
 * and with keep-alive connections used again after each. Chunked bodies, whose pieces llhttp hands over,
 * are framed from the pieces the same way (each frame's bytes copied once into it).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { TunnelClient } from '../../src/client/tunnel-client.js';
import { DEFAULT_SETTINGS } from '../../src/protocol/constants.js';
import { FrameEdge, type FrameRecord } from './frame-edge.js';
import { startRawLocal, type RawLocal } from './raw-local.js';

const FRAME = DEFAULT_SETTINGS.maxFrameBody;
const SIZES = [1, 1000, FRAME - 1, FRAME, FRAME + 1, 2 * FRAME, 5 * FRAME + 123];

/** `size` bytes in which every position differs from its neighbours' (a shifted piece shows). */
function patterned(size: number): Buffer {
  const bytes = Buffer.allocUnsafe(size);
  for (let i = 0; i < size; i++) bytes[i] = (i * 31 + (i >> 8) * 7) & 0xff;
  return bytes;
}

let local: RawLocal;
before(async () => {
  const scripts: Parameters<typeof startRawLocal>[0] = {};
  for (const size of SIZES) {
    // Head and body in one write: the client reads them in as many reads as they take, in one turn.
    scripts[`/size-${size}`] = (socket) => {
      socket.write(Buffer.concat([Buffer.from(`HTTP/1.1 200 OK\r\nContent-Length: ${size}\r\n\r\n`), patterned(size)]));
      return 'keep';
    };
  }
  for (const size of SIZES) {
    // The same bytes chunked, 10,000 to a chunk, in one write: llhttp hands them over piece by piece in
    // one turn, and the pieces are copied once into the frames they leave in (`sendHeldAsData`).
    scripts[`/chunked-${size}`] = (socket) => {
      const body = patterned(size);
      const parts: Buffer[] = [Buffer.from('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n')];
      for (let at = 0; at < size; at += 10_000) {
        const piece = body.subarray(at, Math.min(size, at + 10_000));
        parts.push(Buffer.from(`${piece.byteLength.toString(16)}\r\n`), piece, Buffer.from('\r\n'));
      }
      parts.push(Buffer.from('0\r\n\r\n'));
      socket.write(Buffer.concat(parts));
      return 'keep';
    };
  }
  local = await startRawLocal(scripts);
});
after(() => local.close());

/** What the frames of a body of `size` must be when every byte arrives in one turn with credit to spare. */
function framesOfWhole(size: number): FrameRecord[] {
  if (size <= FRAME) return [{ type: 'RESPONSE', end: true, bytes: size }];
  const frames: FrameRecord[] = [];
  let left = size;
  frames.push({ type: 'RESPONSE', end: false, bytes: FRAME });
  left -= FRAME;
  while (left > 0) {
    const bytes = Math.min(left, FRAME);
    left -= bytes;
    frames.push({ type: 'DATA', end: left === 0, bytes });
  }
  return frames;
}

for (const [label, window] of [
  ['credit to spare', DEFAULT_SETTINGS.streamWindow],
  ['credit short (a 16 KiB stream window, granted a turn late)', 16 * 1024],
] as const) {
  describe(`Content-Length bodies through the landing, ${label}`, () => {
    let edge: FrameEdge;
    let client: TunnelClient;
    before(async () => {
      edge = await FrameEdge.start();
      edge.streamWindow = window;
      client = await edge.client(local.port);
    });
    after(async () => {
      await client.close();
      await edge.close();
    });

    test('every size around the frame limit arrives byte for byte, twice over on the same connections', async () => {
      for (let round = 0; round < 2; round++) {
        for (const size of SIZES) {
          const { id, result } = edge.requestWithId('GET', `/size-${size}`, ['host', 'app.localhost']);
          const answer = await result;
          assert.equal(answer.status, 200);
          assert.equal(answer.ending, 'end');
          assert.ok(answer.body.equals(patterned(size)), `${size} bytes as written (round ${round})`);
          const frames = edge.frames.get(id)!;
          assert.equal(frames.reduce((sum, frame) => sum + frame.bytes, 0), size);
          for (const frame of frames) assert.ok(frame.bytes <= Math.min(FRAME, window), `a frame of ${frame.bytes} bytes within the frame limit and the window`);
          assert.equal(frames.at(-1)!.end, true);
          assert.equal(frames.filter((frame) => frame.end).length, 1);
          // A body of a frame or two comes in one or two reads and leaves in whole frames; a longer one
          // leaves in what each turn read.
          if (window === DEFAULT_SETTINGS.streamWindow && size <= 2 * FRAME) assert.deepEqual(frames, framesOfWhole(size), `the frames of ${size} bytes`);
        }
      }
    });

    test('chunked bodies of every size arrive byte for byte, within the frame limit and the window', async () => {
      for (const size of SIZES) {
        const { id, result } = edge.requestWithId('GET', `/chunked-${size}`, ['host', 'app.localhost']);
        const answer = await result;
        assert.equal(answer.ending, 'end');
        assert.ok(answer.body.equals(patterned(size)), `${size} bytes as written`);
        const frames = edge.frames.get(id)!;
        assert.equal(frames.reduce((sum, frame) => sum + frame.bytes, 0), size);
        for (const frame of frames) assert.ok(frame.bytes <= Math.min(FRAME, window), `a frame of ${frame.bytes} bytes within the frame limit and the window`);
        assert.equal(frames.at(-1)!.end, true);
      }
    });
  });
}
