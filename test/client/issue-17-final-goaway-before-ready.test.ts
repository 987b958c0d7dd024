/**
 * A final GOAWAY that arrives before READY (a cluster edge's takeover racing a connect, a token revoked
 * in the moment) must settle start(): it used to emit 'closed' only, and a caller awaiting start() waited
 * forever. The edge here is a bare WebSocket server that speaks just those frames. And an edge that
 * accepts the connection and drops it before READY is named as such, not as a network failure.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import type { AddressInfo, Socket } from 'node:net';
import { test } from 'node:test';
import { WebSocketServer } from 'ws';
import { RouteTable } from '../../src/client/routes.js';
import { TunnelClient } from '../../src/client/tunnel-client.js';
import { encode } from '../../src/protocol/codec.js';
import { DEFAULT_SETTINGS, FrameType, GoAwayCode, PROTOCOL_HEADER, PROTOCOL_VERSION } from '../../src/protocol/constants.js';

test('start() rejects, naming the code, when the edge sends a final GOAWAY before READY', async () => {
  const server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await once(server, 'listening');
  // No GET /api/v1/instance here (ws answers it 426): the client falls back to the base URL.
  server.on('headers', (headers) => headers.push('burrow-protocol: 2'));
  server.on('connection', (socket) => {
    socket.send(encode([FrameType.GOAWAY, 0, GoAwayCode.TOKEN_REVOKED, 'the token of this tunnel was revoked']));
    socket.close();
  });
  const port = (server.address() as AddressInfo).port;
  const client = new TunnelClient({ edge: `http://127.0.0.1:${port}`, token: 'svc_pat_00000000_x', routes: new RouteTable(3000, []), minBackoffMs: 50, maxBackoffMs: 100 });
  const closed = once(client, 'closed');
  try {
    await assert.rejects(client.start(), /before it was ready: TOKEN_REVOKED: the token of this tunnel was revoked/);
    const [info] = (await closed) as [{ code: string }];
    assert.equal(info.code, 'TOKEN_REVOKED');
  } finally {
    await client.close();
    server.close();
  }
});

test('start() rejects, saying the edge accepted and then cut the connection, when it drops without a word before READY', async () => {
  const server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await once(server, 'listening');
  server.on('headers', (headers) => headers.push(`${PROTOCOL_HEADER}: ${PROTOCOL_VERSION}`));
  // The upgrade answered, then the TCP connection ended (a FIN): no close frame, no READY (WebSocket
  // close 1006). The message tells it from a reset and from the client's own destroy, which `ws` does not.
  server.on('connection', (socket) => socket.terminate());
  const port = (server.address() as AddressInfo).port;
  const client = new TunnelClient({ edge: `http://127.0.0.1:${port}`, token: 'svc_pat_00000000_x', routes: new RouteTable(3000, []), minBackoffMs: 50, maxBackoffMs: 100 });
  try {
    await assert.rejects(
      client.start(),
      new RegExp(`^Error: cannot connect to the edge at http://127\\.0\\.0\\.1:${port}: the edge accepted the connection, then it closed before the tunnel was ready \\(WebSocket close 1006; the edge ended the TCP connection\\)$`),
    );
  } finally {
    await client.close();
    server.close();
  }
});

test('a connection dropped after READY: the reconnect names how its TCP connection ended', async () => {
  const server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await once(server, 'listening');
  server.on('headers', (headers) => headers.push(`${PROTOCOL_HEADER}: ${PROTOCOL_VERSION}`));
  let connections = 0;
  server.on('connection', (socket) => {
    socket.send(encode([FrameType.READY, 0, 'drops', 'http://drops.localhost', DEFAULT_SETTINGS]));
    // The first connection is cut without a close frame once READY is out; the second stays.
    if (++connections === 1) setTimeout(() => socket.terminate(), 20);
  });
  const port = (server.address() as AddressInfo).port;
  const client = new TunnelClient({ edge: `http://127.0.0.1:${port}`, token: 'svc_pat_00000000_x', routes: new RouteTable(3000, []), minBackoffMs: 50, maxBackoffMs: 100 });
  try {
    const reconnecting = once(client, 'reconnecting') as Promise<[{ reason: string }]>;
    await client.start();
    const [event] = await reconnecting;
    assert.equal(event.reason, `the connection to the edge at http://127.0.0.1:${port} dropped (WebSocket close 1006; the edge ended the TCP connection)`);
  } finally {
    await client.close();
    server.close();
  }
});

test('start() rejects naming a reset when the edge resets the upgraded connection (not an end, not a local destroy)', async () => {
  const server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await once(server, 'listening');
  server.on('headers', (headers) => headers.push(`${PROTOCOL_HEADER}: ${PROTOCOL_VERSION}`));
  // An RST instead of a FIN: `ws` reports 1006 as for an end, and swallows the socket's error. A turn
  // later, once the 101 has left: reset inside 'connection', with the write still in libuv, sends a FIN.
  server.on('connection', (socket) => setTimeout(() => (socket as unknown as { _socket: Socket })._socket.resetAndDestroy(), 10));
  const port = (server.address() as AddressInfo).port;
  const client = new TunnelClient({ edge: `http://127.0.0.1:${port}`, token: 'svc_pat_00000000_x', routes: new RouteTable(3000, []), minBackoffMs: 50, maxBackoffMs: 100 });
  try {
    await assert.rejects(
      client.start(),
      new RegExp(`^Error: cannot connect to the edge at http://127\\.0\\.0\\.1:${port}: the edge accepted the connection, then it closed before the tunnel was ready \\(WebSocket close 1006; the TCP connection failed: ECONNRESET\\)$`),
    );
  } finally {
    await client.close();
    server.close();
  }
});
