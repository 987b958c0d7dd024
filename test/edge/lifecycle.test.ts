/**
 * A tunnel's life: reconnects that keep the URL, the grace period, replacement by the owner, closing
 * through the API and by revoking the token, WebSocket passthrough. Real edge, client, local servers.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { after, before, describe, test } from 'node:test';
import WebSocket, { WebSocketServer } from 'ws';
import { Edge } from '../../src/edge/server.js';
import type { ClosedInfo } from '../../src/client/tunnel-client.js';
import { request } from 'undici';
import { RouteTable } from '../../src/client/routes.js';
import { TunnelClient } from '../../src/client/tunnel-client.js';
import { call, createAccount, echo, freePort, runCli, spawnCli, startClient, startEdge, startLocal, tempDir, waitFor, type LocalServer, type TestEdge } from '../helpers.js';

describe('reconnects keep the URL', () => {
  let local: LocalServer;

  before(async () => {
    local = await startLocal(echo);
  });

  after(async () => {
    await local.close();
  });

  test('after the WebSocket drops, the client comes back on the same subdomain', async () => {
    const target = await startEdge();
    const account = await createAccount(target);
    const started = await startClient(target, account.token, local.port);
    const reconnected = once(started.client, 'ready');
    target.edge.registry.session(started.subdomain)!.connection.ws!.close();
    const [info] = await reconnected;
    assert.equal(info.subdomain, started.subdomain);
    assert.equal(info.publicUrl, started.publicUrl);
    assert.equal(info.reconnected, true);
    const response = await call(target, 'GET', '/after-drop', { host: started.host });
    assert.equal(response.json.url, '/after-drop');
    await started.client.close();
    await target.close();
  });

  test('after the edge process restarts on the same data and port, the client comes back on the same URL', async () => {
    const dataDir = tempDir();
    const env = { XDG_CONFIG_HOME: tempDir() };
    // A fixed port, as in real use: uSockets sets SO_REUSEADDR only on an explicit port, and without it
    // the old process's connections in TIME_WAIT would block the restart for a minute.
    const port = await freePort();
    const first = await spawnCli(['edge', '--port', String(port), '--data', dataDir], env, /listening on http:\/\/localhost:(\d+)/);
    const created = await runCli(['admin', 'create-account', '--email', 'restart@example.test', '--data', dataDir, '--json'], env);
    const token = JSON.parse(created.stdout).token.token as string;
    const edgeUrl = `http://localhost:${port}`;
    const client = new TunnelClient({ edge: edgeUrl, token, routes: new RouteTable(local.port), minBackoffMs: 50, maxBackoffMs: 300 });
    const ready = await client.start();
    const reconnecting = once(client, 'reconnecting');
    first.child.kill('SIGTERM');
    assert.equal(await first.exited, 0);
    await reconnecting;
    const second = await spawnCli(['edge', '--port', String(port), '--data', dataDir], env, /listening on/);
    try {
      const [info] = await once(client, 'ready');
      assert.equal(info.publicUrl, ready.publicUrl);
      const response = await request(`http://127.0.0.1:${port}/after-restart`, { headers: { host: `${ready.subdomain}.localhost:${port}` } });
      assert.equal(response.statusCode, 200);
      assert.equal(JSON.parse(await response.body.text()).url, '/after-restart');
    } finally {
      await client.close();
      second.child.kill('SIGTERM');
      await second.exited;
    }
  });

  test('a second edge on a taken port fails instead of sharing it', async () => {
    const target = await startEdge();
    await assert.rejects(Edge.start({ dataDir: tempDir(), port: target.port, log: () => {} }), /cannot listen/);
    await target.close();
  });
});

describe('who may hold a subdomain', () => {
  let target: TestEdge;
  let local: LocalServer;

  before(async () => {
    target = await startEdge({ graceMs: 60_000 });
    local = await startLocal(echo);
  });

  after(async () => {
    await local.close();
    await target.close();
  });

  test('a dropped owner keeps its name through the grace period; another account gets 409', async () => {
    const owner = await createAccount(target);
    const rival = await createAccount(target);
    const started = await startClient(target, owner.token, local.port, { subdomain: 'held-name-1', maxBackoffMs: 60_000, minBackoffMs: 30_000 });
    const reconnecting = once(started.client, 'reconnecting');
    target.edge.registry.session('held-name-1')!.connection.ws!.close();
    await reconnecting;
    await assert.rejects(startClient(target, rival.token, local.port, { subdomain: 'held-name-1' }), (error: Error & { code?: string; status?: number }) => {
      assert.equal(error.code, 'SUBDOMAIN_TAKEN');
      assert.equal(error.status, 409);
      return true;
    });
    // The owner may take it back at once (a restarted client, say).
    const again = await startClient(target, owner.token, local.port, { subdomain: 'held-name-1' });
    assert.equal(again.subdomain, 'held-name-1');
    await started.client.close();
    await again.client.close();
  });

  test('another client of the owner that asks to replace takes the live name over: never two on one name', async () => {
    const owner = await createAccount(target);
    const first = await startClient(target, owner.token, local.port, { subdomain: 'replaced-name-1' });
    const closed = once(first.client, 'closed') as Promise<[ClosedInfo]>;
    const second = await startClient(target, owner.token, local.port, { subdomain: 'replaced-name-1', replace: true });
    const [info] = await closed;
    assert.equal(info.code, 'REPLACED');
    assert.equal((await target.edge.registry.listByAccount(owner.id)).length, 1);
    const response = await call(target, 'GET', '/who', { host: second.host });
    assert.equal(response.status, 200);
    await second.client.close();
  });

  test('closing through the API ends the client with the reason, and the name is free at once', async () => {
    const owner = await createAccount(target);
    const started = await startClient(target, owner.token, local.port, { subdomain: 'closed-by-api-1' });
    const closed = once(started.client, 'closed') as Promise<[ClosedInfo]>;
    const response = await call(target, 'DELETE', '/api/v1/tunnels/closed-by-api-1', { token: owner.token });
    assert.equal(response.status, 204);
    const [info] = await closed;
    assert.equal(info.code, 'CLOSED_BY_API');
    assert.match(info.reason, /closed through the API/);
    const after = await call(target, 'GET', '/', { host: started.host });
    assert.equal(after.status, 404);
    assert.equal(after.json.error.code, 'TUNNEL_NOT_FOUND');
    const rival = await createAccount(target);
    const taken = await startClient(target, rival.token, local.port, { subdomain: 'closed-by-api-1' });
    await taken.client.close();
  });

  test('revoking the token closes its tunnels at once', async () => {
    const owner = await createAccount(target);
    const created = await call(target, 'POST', '/api/v1/tokens', { token: owner.token, body: { label: 'tunnel' } });
    const started = await startClient(target, created.json.token, local.port);
    const closed = once(started.client, 'closed') as Promise<[ClosedInfo]>;
    const revoked = await call(target, 'DELETE', `/api/v1/tokens/${created.json.id}`, { token: owner.token });
    assert.equal(revoked.status, 204);
    const [info] = await closed;
    assert.equal(info.code, 'TOKEN_REVOKED');
    assert.equal((await call(target, 'GET', '/', { host: started.host })).status, 404);
  });

  test('the plan caps live tunnels: the next connect is refused with 403 TUNNEL_LIMIT_REACHED', async () => {
    const owner = await createAccount(target, 'FREE');
    const open = [];
    for (let i = 0; i < 3; i++) open.push(await startClient(target, owner.token, local.port));
    await assert.rejects(startClient(target, owner.token, local.port), (error: Error & { code?: string; status?: number }) => {
      assert.equal(error.code, 'TUNNEL_LIMIT_REACHED');
      assert.equal(error.status, 403);
      return true;
    });
    await open[0]!.client.close();
    await waitFor(async () => (await target.edge.registry.listByAccount(owner.id)).length === 2, 2_000, 'the slot to free');
    open[0] = await startClient(target, owner.token, local.port);
    for (const started of open) await started.client.close();
  });
});

describe('WebSocket passthrough', () => {
  let target: TestEdge;
  let local: LocalServer;
  let host: string;
  let close: () => Promise<void>;

  before(async () => {
    target = await startEdge();
    local = await startLocal((_req, res) => res.end('plain http'));
    const wss = new WebSocketServer({ server: local.server });
    wss.on('connection', (socket, req) => {
      socket.send(`hello ${req.url} ${req.headers['x-forwarded-for']} ${socket.protocol}`);
      socket.on('message', (data, isBinary) => {
        if (data.toString() === 'close please') socket.close(4001, 'bye');
        else socket.send(data, { binary: isBinary });
      });
    });
    const account = await createAccount(target);
    const started = await startClient(target, account.token, local.port);
    host = started.host;
    close = () => started.client.close();
  });

  after(async () => {
    await close();
    await local.close();
    await target.close();
  });

  function open(path: string, protocols: string[] = []): WebSocket {
    return new WebSocket(`ws://127.0.0.1:${target.port}${path}`, protocols, { headers: { host } });
  }

  test('messages echo both ways, text and binary, large ones too; the local close code reaches the public side', async () => {
    const socket = open('/live?room=1', ['chat.v1']);
    const messages: { data: Buffer; binary: boolean }[] = [];
    socket.on('message', (data: Buffer, binary: boolean) => messages.push({ data, binary }));
    await once(socket, 'open');
    assert.equal(socket.protocol, 'chat.v1');
    await waitFor(() => messages.length === 1, 2_000, 'the greeting');
    assert.equal(messages[0]!.data.toString(), 'hello /live?room=1 127.0.0.1 chat.v1');
    socket.send('text message');
    const binary = Buffer.from([0, 1, 2, 255]);
    socket.send(binary);
    const large = Buffer.alloc(300 * 1024, 9);
    socket.send(large);
    await waitFor(() => messages.length === 4, 5_000, 'the echoes');
    assert.equal(messages[1]!.data.toString(), 'text message');
    assert.equal(messages[1]!.binary, false);
    assert.deepEqual(messages[2]!.data, binary);
    assert.equal(messages[2]!.binary, true);
    assert.deepEqual(messages[3]!.data, large);
    socket.send('close please');
    const [code, reason] = await once(socket, 'close');
    assert.equal(code, 4001);
    assert.equal(reason.toString(), 'bye');
  });

  test('a public close reaches the local server, and plain HTTP still works beside it', async () => {
    const socket = open('/second');
    await once(socket, 'message');
    socket.close(4002, 'leaving');
    await once(socket, 'close');
    const response = await call(target, 'GET', '/', { host });
    assert.equal(response.text, 'plain http');
  });

  test('an upgrade the local server refuses answers its status', async () => {
    const refusing = await startLocal((_req, res) => {
      res.statusCode = 426;
      res.end('no websockets here');
    });
    const account = await createAccount(target);
    const started = await startClient(target, account.token, refusing.port);
    const socket = new WebSocket(`ws://127.0.0.1:${target.port}/nope`, { headers: { host: started.host } });
    const [, response] = (await once(socket, 'unexpected-response')) as [unknown, { statusCode: number }];
    assert.equal(response.statusCode, 426);
    socket.on('error', () => {}); // ws reports the abandoned handshake as an error
    socket.terminate();
    await started.client.close();
    await refusing.close();
  });
});
