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
  const local = await startLocal((_req, res) => res.end('hello'));
  const client = await edge.client(local.port);
  try {
    // The client's WebSocket to the edge (a private field: what the test measures is what it wrote).
    const webSocket = (client as unknown as { socket: { _socket: Socket } }).socket._socket;
    const writtenAtEvent: number[] = [];
    client.on('exchange', () => writtenAtEvent.push(webSocket.bytesWritten));
    for (let i = 0; i < 3; i++) {
      const answer = await edge.request('GET', `/x/${i}`, []);
      assert.equal(answer.status, 200);
      await waitFor(() => writtenAtEvent.length === i + 1, 5_000, 'the exchange event');
      assert.equal(writtenAtEvent[i], webSocket.bytesWritten, `request ${i}: every byte of its answer was written before the event`);
    }
  } finally {
    await client.close();
    await local.close();
    await edge.close();
  }
});
