/**
 * WebSocket passthrough through the internal hop (issue 17): a public WebSocket on edge B reaches the
 * local server behind a tunnel on edge A, messages and close codes both ways, refusals passed through.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { after, test } from 'node:test';
import WebSocket, { WebSocketServer } from 'ws';
import { createAccount, startClient, startLocal } from '../helpers.js';
import { TestCluster, startClusterEdge } from './hop-fixture.js';

const cluster = new TestCluster();
const owner = await startClusterEdge(cluster, 'a');
const other = await startClusterEdge(cluster, 'b');
const local = await startLocal((_req, res) => {
  res.statusCode = 426;
  res.end('not here');
});
const wss = new WebSocketServer({
  server: local.server,
  handleProtocols: (protocols) => (protocols.has('chat.v2') ? 'chat.v2' : false),
  verifyClient: (info, done) => (info.req.url?.startsWith('/refuse') ? done(false, 403, 'Go Away Please', { 'x-why': 'refused here' }) : done(true)),
});
const opened: { url: string; protocol: string; forwardedFor: string | undefined; cluster: string[] }[] = [];
wss.on('connection', (socket, req) => {
  opened.push({
    url: req.url!,
    protocol: socket.protocol,
    forwardedFor: req.headers['x-forwarded-for'] as string | undefined,
    cluster: Object.keys(req.headers).filter((name) => name.startsWith('burrow-cluster')),
  });
  socket.on('message', (data, isBinary) => {
    const text = isBinary ? '' : data.toString();
    if (text.startsWith('close ')) socket.close(Number(text.slice(6)), `bye ${text.slice(6)}`);
    else if (text.startsWith('flood ')) for (let i = 0; i < Number(text.slice(6)); i++) socket.send(Buffer.alloc(64 * 1024, i % 256));
    else socket.send(data, { binary: isBinary });
  });
});
const account = await createAccount(owner, 'PRO');
const tunnel = await startClient(owner, account.token, local.port);
cluster.own(tunnel.subdomain, owner.peer);
after(async () => {
  await tunnel.client.close();
  wss.close();
  await local.close();
  await other.close();
  await owner.close();
});

const host = `${tunnel.subdomain}.localhost:8080`;

async function openThroughHop(path: string, protocols: string[] = []): Promise<WebSocket> {
  const socket = new WebSocket(`ws://127.0.0.1:${other.port}${path}`, protocols, { headers: { host } });
  await once(socket, 'open');
  return socket;
}

async function next(socket: WebSocket): Promise<{ data: Buffer; isBinary: boolean }> {
  const [data, isBinary] = (await once(socket, 'message')) as [Buffer, boolean];
  return { data, isBinary };
}

test('text and binary messages echo through the hop, with the subprotocol and the path', async () => {
  opened.length = 0;
  const socket = await openThroughHop('/chat?room=1', ['chat.v1', 'chat.v2']);
  assert.equal(socket.protocol, 'chat.v2');
  socket.send('hello');
  const text = await next(socket);
  assert.deepEqual([text.data.toString(), text.isBinary], ['hello', false]);
  const bytes = Buffer.from([0, 1, 2, 255, 254]);
  socket.send(bytes);
  const binary = await next(socket);
  assert.ok(binary.isBinary);
  assert.ok(binary.data.equals(bytes));
  const big = Buffer.alloc(1024 * 1024, 7);
  socket.send(big);
  assert.ok((await next(socket)).data.equals(big));
  assert.equal(opened[0]!.url, '/chat?room=1');
  assert.equal(opened[0]!.protocol, 'chat.v2');
  assert.equal(opened[0]!.forwardedFor, '127.0.0.1');
  assert.deepEqual(opened[0]!.cluster, []);
  socket.close(4100, 'client done');
  const [code] = (await once(socket, 'close')) as [number, Buffer];
  assert.equal(code, 4100);
});

test('a close from the local server reaches the public client with its code and reason', async () => {
  const socket = await openThroughHop('/closing');
  socket.send('close 4321');
  const [code, reason] = (await once(socket, 'close')) as [number, Buffer];
  assert.equal(code, 4321);
  assert.equal(reason.toString(), 'bye 4321');
});

test('a burst from the local server to a public reader that stops reading arrives whole and in order', async () => {
  const socket = await openThroughHop('/flood');
  // What the tunnel client itself holds for one WebSocket (its relay's bound; past it the client closes
  // with 1008, through the hop or not): 12 x 64 KiB.
  const count = 12;
  const received: number[] = [];
  const done = new Promise<void>((resolve) => {
    socket.on('message', (data: Buffer) => {
      received.push(data[0]!);
      if (received.length === count) resolve();
    });
  });
  // The public reader stops reading for a while: the hop pauses the owner instead of buffering it all.
  (socket as unknown as { _socket: import('node:net').Socket })._socket.pause();
  socket.send(`flood ${count}`);
  await new Promise((resolve) => setTimeout(resolve, 500));
  (socket as unknown as { _socket: import('node:net').Socket })._socket.resume();
  await done;
  assert.deepEqual(received, Array.from({ length: count }, (_, i) => i % 256));
  socket.close();
});

test('an upgrade the local server refuses passes through with its status, headers and body', async () => {
  const direct = await refusal(owner.port);
  const hopped = await refusal(other.port);
  assert.equal(hopped.status, 403);
  assert.deepEqual(hopped, direct);
});

test('an upgrade for a tunnel no edge holds is 404 TUNNEL_NOT_FOUND; an unreachable owner is 502', async () => {
  const missing = await refusal(other.port, 'nobody-holds.localhost:8080');
  assert.equal(missing.status, 404);
  assert.match(missing.body, /TUNNEL_NOT_FOUND/);
  cluster.own('ghost', { nodeId: 'c', advertise: 'http://127.0.0.1:1', boot: 'gone' });
  const unreachable = await refusal(other.port, 'ghost.localhost:8080');
  assert.equal(unreachable.status, 502);
  assert.match(unreachable.body, /EDGE_UNREACHABLE/);
});

/** A raw upgrade request and what came back (Date aside). */
async function refusal(port: number, hostHeader = host): Promise<{ status: number; head: string; body: string }> {
  const socket = new WebSocket(`ws://127.0.0.1:${port}/refuse`, { headers: { host: hostHeader } });
  socket.on('error', () => undefined);
  const [, response] = (await once(socket, 'unexpected-response')) as [unknown, import('node:http').IncomingMessage];
  const chunks: Buffer[] = [];
  for await (const chunk of response) chunks.push(chunk as Buffer);
  const head = response.rawHeaders.filter((_, i, all) => all[i - (i % 2)]!.toLowerCase() !== 'date').join('\n');
  socket.terminate();
  return { status: response.statusCode!, head: `${response.statusMessage}\n${head}`, body: Buffer.concat(chunks).toString() };
}

test('an owner that does not hold the tunnel refuses the upgrade once; the forwarding edge forgets it', async () => {
  cluster.own('stale-ws', owner.peer);
  cluster.forgotten.length = 0;
  const stale = await refusal(other.port, 'stale-ws.localhost:8080');
  assert.equal(stale.status, 404);
  assert.match(stale.body, /TUNNEL_NOT_FOUND/);
  assert.doesNotMatch(stale.head.toLowerCase(), /burrow-cluster/);
  assert.deepEqual(cluster.forgotten, ['b:stale-ws']);
});

test('forged cluster headers on a public upgrade never reach the local server', async () => {
  opened.length = 0;
  const socket = new WebSocket(`ws://127.0.0.1:${owner.port}/forged`, {
    headers: { host, 'burrow-cluster-secret': 'a-wrong-secret-123456', 'burrow-cluster-client': '6.6.6.6', 'burrow-cluster-proto': 'https' },
  });
  await once(socket, 'open');
  assert.deepEqual(opened[0]!.cluster, []);
  assert.equal(opened[0]!.forwardedFor, '127.0.0.1');
  socket.close();
});
