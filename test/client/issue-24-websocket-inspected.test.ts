/**
 * Issue 24: with protocol 2 a WebSocket crosses the tunnel as raw bytes, its handshake end to end, so
 * permessage-deflate is negotiated between the public client and the local app. The inspector still
 * lists the messages as the application saw them: the client reads a copy of each direction's frames
 * (ws-observer) and inflates them, and records the close.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import WebSocket, { WebSocketServer } from 'ws';
import type { Exchange } from '../../src/client/exchange.js';
import type { TunnelClient } from '../../src/client/tunnel-client.js';
import { createAccount, startClient, startEdge, waitFor, type TestEdge } from '../helpers.js';

let edge: TestEdge;
let local: WebSocketServer;
let client: TunnelClient;
let host: string;
const logs: Exchange[] = [];

before(async () => {
  edge = await startEdge();
  local = new WebSocketServer({ host: '127.0.0.1', port: 0, perMessageDeflate: { threshold: 0 } });
  await once(local, 'listening');
  local.on('connection', (ws) => {
    ws.on('message', (data: Buffer, binary: boolean) => {
      if (!binary && data.toString() === 'bye') ws.close(4002, 'as asked');
      else ws.send(binary ? data : `echo: ${data.toString()}`, { binary });
    });
  });
  const account = await createAccount(edge, 'PRO');
  const started = await startClient(edge, account.token, (local.address() as AddressInfo).port, { recordLimit: 64 * 1024 });
  client = started.client;
  host = started.host;
  client.on('websocket', (exchange) => logs.push(exchange));
});

after(async () => {
  await client.close();
  for (const ws of local.clients) ws.terminate();
  await new Promise((resolve) => local.close(resolve));
  await edge.close();
});

test('permessage-deflate end to end: the public client and the app agree on it, the inspector shows the messages inflated', async () => {
  const pub = new WebSocket(`ws://127.0.0.1:${edge.port}/live`, { headers: { host }, perMessageDeflate: true });
  await once(pub, 'open');
  assert.match(pub.extensions, /permessage-deflate/, 'the app accepted the public client\'s offer');
  const text = 'a compressible message, '.repeat(40);
  const replies: string[] = [];
  pub.on('message', (data: Buffer) => replies.push(data.toString()));
  pub.send(text);
  pub.send(text);
  await waitFor(() => replies.length === 2, 5_000, 'two echoes');
  assert.deepEqual(replies, [`echo: ${text}`, `echo: ${text}`]);
  pub.send('bye');
  const [code, reason] = (await once(pub, 'close')) as [number, Buffer];
  assert.equal(code, 4002);
  assert.equal(reason.toString(), 'as asked');

  await waitFor(() => logs.some((log) => log.websocket?.closedAt !== null && log.websocket?.messagesOut === 2), 5_000, 'the closed connection recorded');
  const log = logs.at(-1)!.websocket!;
  assert.equal(logs.at(-1)!.status, 101);
  assert.equal(log.messagesIn, 3);
  // The two directions interleave as they happen: each is compared in its own order.
  const shown = (direction: 'in' | 'out'): [string, number, string][] =>
    log.messages.filter((message) => message.direction === direction).map((message) => [message.data.toString(), message.size, message.note ?? '']);
  assert.deepEqual(shown('in'), [
    [text, text.length, ''],
    [text, text.length, ''],
    ['bye', 3, ''],
  ]);
  assert.deepEqual(shown('out'), [
    [`echo: ${text}`, text.length + 6, ''],
    [`echo: ${text}`, text.length + 6, ''],
  ]);
  assert.equal(log.closeCode, 4002);
  assert.equal(log.closeReason, 'as asked');
});
