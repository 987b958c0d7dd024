/**
 * The live feed: summaries of new exchanges pushed to subscribers in batches, replay marks pushed as
 * updates, nothing serialised without subscribers, and a subscriber that stops reading is skipped (its
 * unsent bytes stay bounded) and told to resync once it reads again.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import WebSocket from 'ws';
import type { Exchange } from '../../src/client/exchange.js';
import { Inspector } from '../../src/inspector/server.js';
import { GoAwayCode } from '../../src/protocol/constants.js';
import { waitFor } from '../helpers.js';
import { inspect, startStack, type Stack } from './fixture.js';

interface Feed {
  ws: WebSocket;
  messages: any[];
  close(): void;
}

async function subscribe(inspector: Inspector): Promise<Feed> {
  const ws = new WebSocket(`ws://127.0.0.1:${inspector.port}/api/live`, { headers: { origin: `http://127.0.0.1:${inspector.port}` } });
  const messages: any[] = [];
  ws.on('message', (data) => messages.push(JSON.parse(String(data))));
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  await waitFor(() => inspector.feedStats().subscribers > 0, 2_000, 'the subscription');
  return { ws, messages, close: () => ws.close() };
}

function items(feed: Feed): any[] {
  return feed.messages.filter((message) => message.type === 'exchanges').flatMap((message) => message.items);
}

describe('live feed', () => {
  let stack: Stack;

  before(async () => {
    stack = await startStack({ feedIntervalMs: 20 });
  });

  after(async () => {
    await stack.close();
  });

  test('a subscriber gets the status, then each new exchange as it completes', async () => {
    const feed = await subscribe(stack.inspector);
    try {
      await waitFor(() => feed.messages.length > 0, 2_000, 'the first message');
      assert.equal(feed.messages[0].type, 'status');
      assert.equal(feed.messages[0].status.connected, true);
      await stack.send('GET', '/live/1');
      await stack.send('POST', '/live/2', { body: 'hi' });
      await stack.send('GET', '/status/404');
      await waitFor(() => items(feed).length >= 3, 3_000, 'three exchanges on the feed');
      const received = items(feed);
      assert.deepEqual(
        received.map((item) => [item.method, item.path, item.status]),
        [
          ['GET', '/live/1', 200],
          ['POST', '/live/2', 200],
          ['GET', '/status/404', 404],
        ],
      );
      const list = (await inspect(stack.inspector, 'GET', '/api/requests?limit=3&summary=1')).json.requests;
      assert.deepEqual(received.map((item) => item.id).reverse(), list.map((item: { id: string }) => item.id));
      assert.equal(received[0].request, undefined, 'the feed carries summaries; the page fetches the detail');
    } finally {
      feed.close();
    }
  });

  test('a replay shows up on the feed marked replay_of', async () => {
    await stack.send('GET', '/to-replay');
    const [original] = (await inspect(stack.inspector, 'GET', '/api/requests?limit=1')).json.requests;
    const feed = await subscribe(stack.inspector);
    try {
      const answer = await inspect(stack.inspector, 'POST', `/api/requests/${original.id}/replay`, { body: {} });
      assert.equal(answer.status, 200);
      await waitFor(() => items(feed).some((item) => item.id === answer.json.id && item.replay_of === original.id), 3_000, 'the replay on the feed');
    } finally {
      feed.close();
    }
  });

  test('the status is pushed when the tunnel drops and comes back', async () => {
    const feed = await subscribe(stack.inspector);
    try {
      await waitFor(() => feed.messages.length > 0, 2_000, 'the first message');
      // The edge says it is going away (not final): the client reconnects with the same subdomain.
      for (const session of [...stack.edge.edge.registry.sessions()]) session.goAway(GoAwayCode.SHUTDOWN, 'test restart');
      await waitFor(() => feed.messages.some((message) => message.type === 'status' && message.status.connected === false), 5_000, 'an offline status');
      await waitFor(() => feed.messages.filter((message) => message.type === 'status').at(-1).status.connected === true, 10_000, 'online again');
    } finally {
      feed.close();
    }
  });
});

let counter = 0;

function bigExchange(pathBytes: number): Exchange {
  return {
    id: `req_${(counter++).toString(16).padStart(20, '0')}`,
    method: 'GET',
    path: `/${'p'.repeat(pathBytes)}`,
    port: 1,
    requestHeaders: [],
    requestBody: null,
    requestBodySize: 0,
    requestTruncated: false,
    status: 200,
    responseHeaders: [],
    responseBody: null,
    responseBodySize: 0,
    responseTruncated: false,
    startedAt: Date.now(),
    latencyMs: 1,
    error: null,
    replayOf: null,
  };
}

describe('live feed backpressure', () => {
  test('without subscribers nothing is queued or serialised', async () => {
    const inspector = await Inspector.start({ port: 0 });
    try {
      for (let i = 0; i < 100; i++) inspector.record(bigExchange(10));
      assert.equal(inspector.feedStats().queued, 0);
      assert.equal(inspector.ring.size, 100);
    } finally {
      inspector.close();
    }
  });

  test('a subscriber that stops reading is skipped, its buffer stays bounded, and it resyncs after', async () => {
    const maxBuffered = 256 * 1024;
    const inspector = await Inspector.start({ port: 0, feedIntervalMs: 5, feedMaxBuffered: maxBuffered, maxBytes: 8 * 1024 * 1024 });
    const feed = await subscribe(inspector);
    try {
      const socket = (feed.ws as unknown as { _socket: import('node:net').Socket })._socket;
      socket.pause();
      const pathBytes = 4 * 1024;
      // One flush carries at most 500 summaries of ~4 KiB: a message is at most ~2.2 MB.
      const largestMessage = 500 * (pathBytes + 400);
      const deadline = Date.now() + 20_000;
      while (inspector.feedStats().lagging === 0) {
        assert.ok(Date.now() < deadline, 'the paused subscriber was never marked lagging');
        for (let i = 0; i < 100; i++) inspector.record(bigExchange(pathBytes));
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      // Keep recording: the paused subscriber gets nothing more.
      const bufferedWhenSkipped = inspector.feedStats().buffered;
      for (let round = 0; round < 20; round++) {
        for (let i = 0; i < 100; i++) inspector.record(bigExchange(pathBytes));
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      const stats = inspector.feedStats();
      assert.equal(stats.lagging, 1);
      assert.equal(stats.buffered, bufferedWhenSkipped, 'nothing more was buffered for it');
      assert.ok(stats.buffered <= maxBuffered + largestMessage, `buffered ${stats.buffered}`);

      socket.resume();
      await waitFor(() => feed.messages.some((message) => message.type === 'resync'), 10_000, 'a resync once drained');
      assert.equal(inspector.feedStats().lagging, 0);
      // And it is fed again.
      inspector.record(bigExchange(1));
      await waitFor(() => feed.messages.at(-1)?.type === 'exchanges', 5_000, 'new exchanges after the resync');
    } finally {
      feed.close();
      inspector.close();
    }
  });
});
