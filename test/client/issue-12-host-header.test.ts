/**
 * Issue 12, findings 6 and 8: the Host a local server sees. By default the public Host, for plain HTTP
 * and (finding 6: it used to be localhost:PORT) for WebSocket upgrades alike; `--host-header rewrite`
 * sends the local target's host:port and `--host-header VALUE` sends VALUE, for both; X-Forwarded-Host
 * carries the public host in every case. A real edge, the real client, a real Node server with `ws`.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import WebSocket, { WebSocketServer } from 'ws';
import type { HostHeader } from '../../src/client/host-header.js';
import { call, createAccount, startClient, startEdge, type TestAccount, type TestEdge } from '../helpers.js';

let edge: TestEdge;
let account: TestAccount;
let port: number;
const seen: { kind: 'http' | 'ws'; headers: IncomingHttpHeaders }[] = [];
const server = createServer((req, res) => {
  seen.push({ kind: 'http', headers: req.headers });
  res.end('ok');
});
const sockets = new WebSocketServer({ server });
sockets.on('connection', (socket, req) => {
  seen.push({ kind: 'ws', headers: req.headers });
  socket.send('hello');
});

before(async () => {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  port = (server.address() as AddressInfo).port;
  edge = await startEdge();
  account = await createAccount(edge, 'PRO');
});

after(async () => {
  sockets.close();
  server.closeAllConnections();
  server.close();
  await edge.close();
});

/** One plain request and one WebSocket upgrade through a tunnel opened with `hostHeader`. */
async function hostsSeen(hostHeader: HostHeader | undefined): Promise<{ publicHost: string; http: IncomingHttpHeaders; ws: IncomingHttpHeaders }> {
  const { client, host } = await startClient(edge, account.token, port, hostHeader === undefined ? {} : { hostHeader });
  try {
    seen.length = 0;
    const response = await call(edge, 'GET', '/page', { host });
    assert.equal(response.status, 200);
    const socket = new WebSocket(`ws://127.0.0.1:${edge.port}/live`, { headers: { host } });
    const [message] = (await once(socket, 'message')) as [Buffer];
    assert.equal(message.toString(), 'hello');
    socket.close();
    const http = seen.find((entry) => entry.kind === 'http')!.headers;
    const ws = seen.find((entry) => entry.kind === 'ws')!.headers;
    return { publicHost: host, http, ws };
  } finally {
    await client.close();
  }
}

test('by default HTTP and WebSocket upgrades both keep the public Host (finding 6)', async () => {
  const { publicHost, http, ws } = await hostsSeen(undefined);
  assert.equal(http.host, publicHost);
  assert.equal(ws.host, publicHost, 'a WebSocket upgrade keeps the public Host, as plain HTTP does');
  assert.equal(ws['x-forwarded-host'], publicHost);
});

test('--host-header rewrite sends the target host:port to HTTP and WebSocket; X-Forwarded-Host keeps the public host (finding 8)', async () => {
  const { publicHost, http, ws } = await hostsSeen('rewrite');
  assert.equal(http.host, `localhost:${port}`);
  assert.equal(ws.host, `localhost:${port}`);
  assert.equal(http['x-forwarded-host'], publicHost);
  assert.equal(ws['x-forwarded-host'], publicHost);
});

test('--host-header VALUE sends that value to HTTP and WebSocket (finding 8)', async () => {
  const { publicHost, http, ws } = await hostsSeen({ value: 'app.test:5173' });
  assert.equal(http.host, 'app.test:5173');
  assert.equal(ws.host, 'app.test:5173');
  assert.equal(http['x-forwarded-host'], publicHost);
  assert.equal(ws['x-forwarded-host'], publicHost);
});
