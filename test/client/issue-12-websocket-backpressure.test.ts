/**
 * The tunnel client closed a local WebSocket with 1008 ("the tunnel cannot keep up") once the local app
 * had sent more than the client's 4 MiB queue ahead of a slow public reader: the client kept reading
 * the local socket whatever the credit. It now pauses reading the local socket past WS_PAUSE_BYTES
 * queued and resumes when the queue drains, so the slow public reader slows the local app down (its
 * own send buffer grows) and nothing is dropped or closed.
 *
 * The other direction is bounded and closes by design: uWebSockets.js 20.30 cannot pause reading a
 * public WebSocket, so a public client that sends faster than the local app reads gets 1008 once the
 * edge's 4 MiB queue for it is full (docs/protocol.md sections 13 and 17); the client holds at most one
 * stream window toward a slow local app (credit returns only when the local socket took the bytes).
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import WebSocket, { WebSocketServer } from 'ws';
import { ClientWsStream, MAX_WS_MESSAGE, WS_PAUSE_BYTES } from '../../src/client/ws-stream.js';
import type { TunnelClient } from '../../src/client/tunnel-client.js';
import { createAccount, startClient, startEdge, waitFor, type TestEdge } from '../helpers.js';

const MESSAGE_BYTES = 64 * 1024;
const COUNT = 256; // 16 MiB

let edge: TestEdge;
let local: WebSocketServer;
let client: TunnelClient;
let host: string;
let onLocal: (ws: WebSocket) => void = () => {};

before(async () => {
  edge = await startEdge();
  local = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await once(local, 'listening');
  local.on('connection', (ws) => onLocal(ws));
  const account = await createAccount(edge, 'PRO');
  const started = await startClient(edge, account.token, (local.address() as AddressInfo).port);
  client = started.client;
  host = started.host;
});

after(async () => {
  await client.close();
  for (const ws of local.clients) ws.terminate();
  await new Promise((resolve) => local.close(resolve));
  await edge.close();
});

function numbered(index: number): Buffer {
  const message = Buffer.alloc(MESSAGE_BYTES, index & 0xff);
  message.writeUInt32BE(index, 0);
  return message;
}

/** Bytes the client's passthrough streams hold for the edge right now (read from the live client). */
function clientQueuedBytes(): number {
  const streams = (client as unknown as { streams: Map<number, unknown> }).streams;
  let bytes = 0;
  for (const stream of streams.values()) if (stream instanceof ClientWsStream) bytes += stream.queuedBytes;
  return bytes;
}

/** A public client that takes one message per timer turn: much slower than loopback. */
function readSlowly(ws: WebSocket, onMessage: (data: Buffer) => void): void {
  ws.on('message', (data: Buffer) => {
    onMessage(data);
    ws.pause();
    setTimeout(() => ws.resume(), 2);
  });
}

describe('issue 12: WebSocket backpressure through the tunnel', () => {
  test('16 MiB from the local app to a slow public reader: every message, in order, no 1008, the client queue bounded', async () => {
    const closes: string[] = [];
    let localPeakBuffered = 0;
    onLocal = (ws) => {
      ws.on('close', (code) => closes.push(`local ${code}`));
      for (let i = 0; i < COUNT; i++) ws.send(numbered(i));
      const sampler = setInterval(() => (localPeakBuffered = Math.max(localPeakBuffered, ws.bufferedAmount)), 5);
      ws.on('close', () => clearInterval(sampler));
    };
    const pub = new WebSocket(`ws://127.0.0.1:${edge.port}/stream`, { headers: { host } });
    pub.on('close', (code) => closes.push(`public ${code}`));
    const received: number[] = [];
    let peakQueued = 0;
    const sampler = setInterval(() => (peakQueued = Math.max(peakQueued, clientQueuedBytes())), 5);
    readSlowly(pub, (data) => {
      assert.equal(data.byteLength, MESSAGE_BYTES);
      received.push(data.readUInt32BE(0));
    });
    try {
      await waitFor(() => received.length === COUNT || closes.length > 0, 60_000, 'all messages or a close');
    } finally {
      clearInterval(sampler);
    }
    assert.deepEqual(closes, [], 'no socket was closed');
    assert.deepEqual(received, Array.from({ length: COUNT }, (_, i) => i), 'every message, in order');
    // Paused past WS_PAUSE_BYTES; what `ws` had already read when paused comes on top (one read).
    assert.ok(peakQueued <= WS_PAUSE_BYTES + MAX_WS_MESSAGE, `the client held at most ${peakQueued} bytes`);
    assert.ok(localPeakBuffered > WS_PAUSE_BYTES, `the pressure reached the local app (its bufferedAmount peaked at ${localPeakBuffered})`);
    pub.close();
    await once(pub, 'close');
  });

  test('a public client that outruns a slow local app: bounded at the edge, closed with 1008 (uWS cannot pause a WebSocket)', async () => {
    const localReceived: number[] = [];
    onLocal = (ws) => readSlowly(ws, (data) => localReceived.push(data.readUInt32BE(0)));
    const pub = new WebSocket(`ws://127.0.0.1:${edge.port}/burst`, { headers: { host } });
    await once(pub, 'open');
    for (let i = 0; i < COUNT; i++) pub.send(numbered(i));
    const [code] = (await once(pub, 'close')) as [number, Buffer];
    assert.equal(code, 1008);
    assert.ok(localReceived.length < COUNT);
    assert.deepEqual(localReceived, Array.from({ length: localReceived.length }, (_, i) => i), 'what arrived came in order, none skipped');
  });
});
