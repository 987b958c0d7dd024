/**
 * Issue 25: the inspector and the request log hear of a completed exchange only once the turn's frames,
 * its answer among them, are written to the edge: what they do with it is not on the answer's path (at
 * one connection that took 10-20 µs off each answer). The frame-level edge of test/client/frame-edge.ts
 * and the real client; the bytes the client's WebSocket had written when the 'exchange' event came are
 * compared with what it wrote in all.
 */
import assert from 'node:assert/strict';
import type { Socket } from 'node:net';
import { test } from 'node:test';
import { startLocal, waitFor } from '../helpers.js';
import { FrameEdge } from './frame-edge.js';

test('issue 25: the \'exchange\' event comes after the answer\'s frames are written', { timeout: 30_000 }, async () => {
  const edge = await FrameEdge.start();
  // Three shapes of answer: a small one with a length, a streamed one (chunked, in several writes and
  // turns, longer than the frame-level edge's first credit) to an upload, and one without a body.
  const local = await startLocal((req, res) => {
    if (req.url === '/stream') {
      req.resume();
      req.on('end', () => {
        res.write(Buffer.alloc(300_000, 0x61));
        setTimeout(() => res.end(Buffer.alloc(1_000, 0x62)), 5);
      });
    } else if (req.url === '/empty') {
      res.statusCode = 204;
      res.end();
    } else res.end('hello');
  });
  const client = await edge.client(local.port);
  try {
    // The client's WebSocket to the edge (a private field: what the test measures is what it wrote).
    const webSocket = (client as unknown as { socket: { _socket: Socket } }).socket._socket;
    const writtenAtEvent: number[] = [];
    client.on('exchange', () => writtenAtEvent.push(webSocket.bytesWritten));
    const requests: [string, string, Buffer | null, number][] = [
      ['GET', '/hello', null, 200],
      ['POST', '/stream', Buffer.alloc(30_000, 0x63), 200],
      ['GET', '/empty', null, 204],
      ['GET', '/hello', null, 200],
    ];
    for (const [i, [method, path, body, status]] of requests.entries()) {
      const answer = await edge.request(method, path, body === null ? [] : ['content-length', String(body.byteLength)], body);
      assert.equal(answer.status, status);
      await waitFor(() => writtenAtEvent.length === i + 1, 5_000, 'the exchange event');
      assert.equal(writtenAtEvent[i], webSocket.bytesWritten, `${method} ${path}: every byte of its answer was written before the event`);
    }
  } finally {
    await client.close();
    await local.close();
    await edge.close();
  }
});
