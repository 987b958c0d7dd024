/**
 * Issue 17's first acceptance point end to end, on the real lease registry (no test directory): a real
 * Redis, three cluster edges, a tunnel connected to A; public requests sent to B and C reach it through
 * the hop (1 MiB bodies both ways, a WebSocket), and the API rate limit is one window across edges.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { after, before, describe, test } from 'node:test';
import { request } from 'undici';
import WebSocket, { WebSocketServer } from 'ws';
import { call, createAccount, readBody, startClient, startLocal, type LocalServer, type TestEdge } from '../helpers.js';
import { TestRedis, redisSkip } from '../redis-server.js';
import { startClusterEdge } from './cluster-helpers.js';

const redis = redisSkip === false ? await TestRedis.start() : null;
const MIB = 1024 * 1024;

describe('a tunnel on A answers public traffic sent to every edge', { skip: redisSkip }, () => {
  let a: TestEdge;
  let b: TestEdge;
  let c: TestEdge;
  let local: LocalServer;
  let wss: WebSocketServer;
  let subdomain = '';
  let token = '';
  let closeTunnel: () => Promise<void> = async () => {};

  before(async () => {
    const options = { rateLimit: 6, rateWindowMs: 60_000 };
    a = await startClusterEdge(redis!.url, 'traffic-a', options);
    b = await startClusterEdge(redis!.url, 'traffic-b', options);
    c = await startClusterEdge(redis!.url, 'traffic-c', options);
    // Uploads answer their SHA-256 and length; /download/N answers N bytes of a known pattern.
    local = await startLocal(async (req, res) => {
      if (req.url!.startsWith('/download/')) {
        const size = Number(req.url!.slice('/download/'.length));
        res.setHeader('content-type', 'application/octet-stream');
        res.end(pattern(size));
        return;
      }
      const body = await readBody(req);
      res.setHeader('content-type', 'text/plain');
      res.end(`${body.byteLength} ${createHash('sha256').update(body).digest('hex')}`);
    });
    wss = new WebSocketServer({ server: local.server });
    wss.on('connection', (socket) => socket.on('message', (data, isBinary) => socket.send(data, { binary: isBinary })));
    const account = await createAccount(a, 'PRO');
    token = account.token;
    const tunnel = await startClient(a, token, local.port);
    subdomain = tunnel.subdomain;
    closeTunnel = () => tunnel.client.close();
  });

  after(async () => {
    await closeTunnel();
    wss.close();
    await local.close();
    await Promise.all([a.close(), b.close(), c.close()]);
  });

  for (const name of ['a', 'b', 'c'] as const) {
    test(`a 1 MiB upload and a 1 MiB download through edge ${name.toUpperCase()} arrive whole`, async () => {
      const edge = { a, b, c }[name];
      const upload = pattern(MIB);
      const sent = await request(`${edge.base}/upload`, { method: 'POST', body: upload, headers: { host: `${subdomain}.localhost:${edge.port}` } });
      assert.equal(sent.statusCode, 200);
      assert.equal(await sent.body.text(), `${MIB} ${createHash('sha256').update(upload).digest('hex')}`);
      const got = await request(`${edge.base}/download/${MIB}`, { headers: { host: `${subdomain}.localhost:${edge.port}` } });
      assert.equal(got.statusCode, 200);
      assert.ok(Buffer.from(await got.body.arrayBuffer()).equals(pattern(MIB)));
    });
  }

  test('a WebSocket opened on B and on C echoes text and binary through the tunnel on A', async () => {
    for (const edge of [b, c]) {
      const socket = new WebSocket(`ws://127.0.0.1:${edge.port}/ws`, { headers: { host: `${subdomain}.localhost:${edge.port}` } });
      await once(socket, 'open');
      socket.send('hello');
      const [text, textIsBinary] = (await once(socket, 'message')) as [Buffer, boolean];
      assert.deepEqual([text.toString(), textIsBinary], ['hello', false]);
      socket.send(pattern(70_000));
      const [binary, isBinary] = (await once(socket, 'message')) as [Buffer, boolean];
      assert.ok(isBinary && binary.equals(pattern(70_000)));
      socket.close(1000);
      await once(socket, 'close');
    }
  });

  test('the token cap counts tokens made on every edge: creates racing on A, B and C stop at the plan cap', async () => {
    // FREE allows 5 active tokens; the account's first token is one of them. Six calls in all: the
    // rate limit of this cluster (6 a minute) is not what refuses.
    const account = await createAccount(a, 'FREE');
    const creates = [a, b, c, a, b].map((edge, i) => call(edge, 'POST', '/api/v1/tokens', { token: account.token, body: { label: `race-${i}` } }));
    const statuses = (await Promise.all(creates)).map((response) => response.status).sort();
    assert.deepEqual(statuses, [201, 201, 201, 201, 403]);
    const listed = await call(c, 'GET', '/api/v1/tokens', { token: account.token });
    assert.equal(listed.json.tokens.length, 5);
  });

  test('the API rate limit is one window for the whole cluster: calls on A and B count together', async () => {
    const statuses: number[] = [];
    for (const edge of [a, b, a, b, c, c, a]) statuses.push((await call(edge, 'GET', '/api/v1/auth/me', { token })).status);
    assert.deepEqual(statuses, [200, 200, 200, 200, 200, 200, 429]);
    const refused = await call(b, 'GET', '/api/v1/tokens', { token });
    assert.equal(refused.status, 429);
    assert.equal(refused.json.error.code, 'RATE_LIMITED');
    assert.equal(refused.headers['ratelimit-remaining'] ?? '0', '0');
  });
});

function pattern(size: number): Buffer {
  const bytes = Buffer.allocUnsafe(size);
  for (let i = 0; i < size; i++) bytes[i] = (i * 31 + (i >> 10)) & 0xff;
  return bytes;
}
