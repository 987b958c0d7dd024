/**
 * Issue 12, then issue 24: WebSocket backpressure through the tunnel, both ways. The tunnel client
 * closed a local WebSocket with 1008 once the local app had sent more than its queue ahead of a slow
 * public reader; and the edge (uWebSockets.js 20.30, which cannot pause reading a WebSocket) closed a
 * public client with 1008 that sent faster than the local app read. With protocol 2 an upgraded stream
 * is raw bytes under credit: each side stops reading its socket while the other side's reader is slow,
 * so the slow reader slows the sender down (its own send buffer grows), nothing is dropped or closed,
 * and neither the client nor the edge holds more than about a window and a socket read.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import WebSocket, { WebSocketServer } from 'ws';
import { ClientHttpStream } from '../../src/client/http-stream.js';
import { DEFAULT_SETTINGS } from '../../src/protocol/constants.js';
import type { TunnelClient } from '../../src/client/tunnel-client.js';
import { createAccount, startClient, startEdge, waitFor, type TestEdge } from '../helpers.js';

const MESSAGE_BYTES = 64 * 1024;
const COUNT = 256; // 16 MiB
const STREAM_WINDOW = DEFAULT_SETTINGS.streamWindow;

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

/** Bytes the client's upgraded streams hold for the edge right now (read from the live client). */
function clientQueuedBytes(): number {
  const streams = (client as unknown as { streams: Map<number, unknown> }).streams;
  let bytes = 0;
  for (const stream of streams.values()) if (stream instanceof ClientHttpStream) bytes += stream.queuedBytes;
  return bytes;
}

/** A reader that takes one message per timer turn: much slower than loopback. */
function readSlowly(ws: WebSocket, onMessage: (data: Buffer) => void): void {
  ws.on('message', (data: Buffer) => {
    onMessage(data);
    ws.pause();
    setTimeout(() => ws.resume(), 2);
  });
}

describe('issue 12 and 24: WebSocket backpressure through the tunnel', () => {
  test('16 MiB from the local app to a slow public reader: every message, in order, no close, the client queue bounded', async () => {
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
    // The local socket is paused while bytes wait for credit: what it had already read comes on top.
    assert.ok(peakQueued <= STREAM_WINDOW, `the client held at most ${peakQueued} bytes`);
    assert.ok(localPeakBuffered > STREAM_WINDOW, `the pressure reached the local app (its bufferedAmount peaked at ${localPeakBuffered})`);
    pub.close();
    await once(pub, 'close');
  });

  test('16 MiB from a public client to a slow local app: every message, in order, no 1008; the public sender is slowed', async () => {
    const localReceived: number[] = [];
    const closes: string[] = [];
    onLocal = (ws) => {
      ws.on('close', (code) => closes.push(`local ${code}`));
      readSlowly(ws, (data) => localReceived.push(data.readUInt32BE(0)));
    };
    const pub = new WebSocket(`ws://127.0.0.1:${edge.port}/burst`, { headers: { host } });
    pub.on('close', (code) => closes.push(`public ${code}`));
    await once(pub, 'open');
    for (let i = 0; i < COUNT; i++) pub.send(numbered(i));
    let publicPeakBuffered = 0;
    const sampler = setInterval(() => (publicPeakBuffered = Math.max(publicPeakBuffered, pub.bufferedAmount)), 5);
    try {
      await waitFor(() => localReceived.length === COUNT || closes.length > 0, 60_000, 'all messages or a close');
    } finally {
      clearInterval(sampler);
    }
    assert.deepEqual(closes, [], 'no socket was closed');
    assert.deepEqual(localReceived, Array.from({ length: COUNT }, (_, i) => i), 'every message, in order');
    assert.ok(publicPeakBuffered > 1024 * 1024, `the pressure reached the public client (its bufferedAmount peaked at ${publicPeakBuffered})`);
    pub.close();
    await once(pub, 'close');
  });
});
