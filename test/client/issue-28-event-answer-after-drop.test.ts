/**
 * A held webhook the local server has when its edge dies (cluster mode, src/client/delivered-events.ts):
 * the client keeps waiting for the local answer after the tunnel dropped, remembers a 2xx, and answers
 * the same event sent again through the next connection from memory; the local server sees it once.
 * A full run caught the repeat (issue-28-offline-queue-kill: "the event in flight at the kill is not
 * delivered twice", 1 !== 0) when the kill fell while the local server held the event.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { test } from 'node:test';
import { DeliveredEvents } from '../../src/client/delivered-events.js';
import { readBody, startLocal, waitFor } from '../helpers.js';
import { FrameEdge, header } from './frame-edge.js';

test('an event the local server holds when the tunnel drops is answered 2xx later: its repeat through the next connection is answered from memory', { timeout: 30_000 }, async () => {
  const edge = await FrameEdge.start();
  edge.clusterEdges = 2;
  const seen: string[] = [];
  let release: (() => void) | null = null;
  const local = await startLocal((req, res) => {
    void readBody(req).then(() => {
      const id = String(req.headers['burrow-event-id']);
      const repeat = seen.includes(id);
      seen.push(id);
      if (repeat) res.end('taken again');
      else release = () => res.end('taken');
    });
  });
  const client = await edge.client(local.port, { deliveredEvents: new DeliveredEvents(), minBackoffMs: 20, maxBackoffMs: 50 });
  try {
    const event = ['content-type', 'application/json', 'burrow-event-id', 'evt_held_1'];
    void edge.request('POST', '/hook', event, Buffer.from('{"n":1}'));
    await waitFor(() => release !== null, 5_000, 'the local server holding the event');
    const reconnected = once(edge, 'connected');
    edge.drop();
    // The local server answers after the tunnel is gone; its answer has nowhere to go but memory.
    await new Promise((resolve) => setTimeout(resolve, 50));
    release!();
    await reconnected;
    await new Promise((resolve) => setTimeout(resolve, 50));
    const again = await edge.request('POST', '/hook', event, Buffer.from('{"n":1}'));
    assert.equal(again.status, 200);
    assert.equal(header(again.headers, 'burrow-duplicate-delivery'), '1');
    assert.deepEqual(seen, ['evt_held_1'], 'the local server saw the event once');
    // Another event still reaches the local server.
    release = null;
    const next = edge.request('POST', '/hook', ['burrow-event-id', 'evt_held_2'], Buffer.from('{"n":2}'));
    await waitFor(() => release !== null, 5_000, 'the next event');
    release!();
    assert.equal((await next).status, 200);
    assert.deepEqual(seen, ['evt_held_1', 'evt_held_2']);
  } finally {
    await client.close();
    await local.close();
    await edge.close();
  }
});
