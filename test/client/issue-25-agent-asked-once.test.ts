/**
 * Issue 25: every tunnel connect asked the edge GET /api/v1/instance for its agent endpoint first (a new
 * HTTP agent, a second TCP connection and exchange per connect), which halved the connect rate of a
 * process with many tunnels (the idle-tunnel bench's fleet: 2,962 tunnels/s with the answer shared,
 * 1,133 without). A process's connections now share the edge's answer; a connection that cannot reach
 * a shared answer (the edge restarted with another agent endpoint) asks again before it counts as failed.
 * The edge is reached through a small loopback front that relays /api/v1/instance and counts the asks.
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { after, test } from 'node:test';
import { RouteTable } from '../../src/client/routes.js';
import { TunnelClient } from '../../src/client/tunnel-client.js';
import { createAccount, startEdge, startLocal, type TestEdge } from '../helpers.js';

const running: { close(): Promise<unknown> }[] = [];
after(async () => {
  for (const each of running.reverse()) await each.close();
});

/** A front on loopback: /api/v1/instance relayed to `target.edge` (changeable) and counted. */
async function instanceFront(first: TestEdge): Promise<{ port: number; asks: number; target: TestEdge }> {
  const front = { port: 0, asks: 0, target: first };
  const server: Server = createServer((req, res) => {
    if (req.url !== '/api/v1/instance') {
      res.statusCode = 404;
      res.end();
      return;
    }
    front.asks++;
    void fetch(`http://127.0.0.1:${front.target.port}/api/v1/instance`).then(async (answer) => {
      res.setHeader('content-type', 'application/json');
      res.end(await answer.text());
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  front.port = (server.address() as AddressInfo).port;
  running.push({ close: () => new Promise((resolve) => server.close(resolve)) });
  return front;
}

function client(port: number, token: string, localPort: number): TunnelClient {
  return new TunnelClient({ edge: `http://localhost:${port}`, token, routes: new RouteTable(localPort), minBackoffMs: 50, maxBackoffMs: 200 });
}

test("a process's tunnel connects to one edge ask it for its agent endpoint once, not once each", async () => {
  const edge = await startEdge();
  running.push(edge);
  const local = await startLocal((_req, res) => res.end('ok'));
  running.push(local);
  const account = await createAccount(edge, 'PRO');
  const front = await instanceFront(edge);
  const clients = Array.from({ length: 8 }, () => client(front.port, account.token, local.port));
  try {
    const started = await Promise.all(clients.map((each) => each.start()));
    assert.equal(new Set(started.map((each) => each.publicUrl)).size, 8);
    assert.equal(front.asks, 1, 'one GET /api/v1/instance for 8 connects');
  } finally {
    await Promise.all(clients.map((each) => each.close()));
  }
});

test('a shared answer that no longer reaches an agent endpoint (another edge behind the same URL) is asked again and the tunnel starts', async () => {
  const local = await startLocal((_req, res) => res.end('ok'));
  running.push(local);
  const gone = await startEdge();
  const goneAccount = await createAccount(gone);
  const front = await instanceFront(gone);
  const first = client(front.port, goneAccount.token, local.port);
  await first.start();
  await first.close();
  await gone.close();
  const next = await startEdge();
  running.push(next);
  const account = await createAccount(next);
  front.target = next;
  const asksBefore = front.asks;
  const second = client(front.port, account.token, local.port);
  try {
    const { publicUrl } = await second.start();
    assert.match(publicUrl, new RegExp(`:${next.port}$`));
    assert.equal(front.asks, asksBefore + 1, 'asked again once the shared answer failed');
  } finally {
    await second.close();
  }
});
