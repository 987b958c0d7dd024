/**
 * Failover across several edges (issue 17): the real tunnel client given edges in order moves to the
 * next one when its edge shuts down (GOAWAY SHUTDOWN) or dies (kill -9 of a real `burrow edge`), keeps
 * its subdomain and the inspector's history, backs off only when every edge is down and comes back
 * when one returns; a final GOAWAY (token revoked) and a subdomain owned by another account still end
 * it. The edges here are independent single edges that share one account: the second one's data
 * directory is a copy of the first's, taken while the first was stopped.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { cpSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { request } from 'undici';
import { RouteTable } from '../../src/client/routes.js';
import { TunnelClient, TunnelRefusedError, type ReadyInfo } from '../../src/client/tunnel-client.js';
import { Inspector } from '../../src/inspector/server.js';
import {
  call,
  createAccount,
  freePort,
  runCli,
  spawnCli,
  startEdge,
  startLocal,
  tempDirs,
  waitFor,
  type LocalServer,
  type SpawnedProcess,
  type TestAccount,
  type TestEdge,
} from '../helpers.js';

const tempDir = tempDirs('burrow-failover-');

/** Two in-process edges on separate stores holding the same account and token. */
async function edgesSharingAnAccount(): Promise<{ first: TestEdge; second: TestEdge; account: TestAccount }> {
  const firstDir = tempDir();
  const seed = await startEdge({ dataDir: firstDir });
  const account = await createAccount(seed);
  await seed.close();
  const secondDir = tempDir();
  cpSync(firstDir, secondDir, { recursive: true });
  const first = await startEdge({ dataDir: firstDir });
  const second = await startEdge({ dataDir: secondDir });
  return { first, second, account };
}

async function publicGet(edge: { port: number }, subdomain: string, path: string): Promise<{ status: number; body: string }> {
  const response = await request(`http://127.0.0.1:${edge.port}${path}`, { headers: { host: `${subdomain}.localhost:${edge.port}` } });
  return { status: response.statusCode, body: await response.body.text() };
}

function nextReady(client: TunnelClient): Promise<ReadyInfo> {
  return new Promise((resolve) => client.once('ready', resolve));
}

function client(edges: string[], token: string, port: number, subdomain?: string): TunnelClient {
  return new TunnelClient({
    edge: edges,
    token,
    routes: new RouteTable(port),
    minBackoffMs: 50,
    maxBackoffMs: 400,
    ...(subdomain === undefined ? {} : { subdomain }),
  });
}

describe('a client with several edges', () => {
  let local: LocalServer;

  before(async () => {
    local = await startLocal((req, res) => res.end(`local saw ${req.url}`));
  });

  after(async () => {
    await local.close();
  });

  test('GOAWAY SHUTDOWN: the next edge at once, the same subdomain, the inspector history kept', async () => {
    const { first, second, account } = await edgesSharingAnAccount();
    // The copied stores would number this subdomain's captures alike (req_<ring><seq>); a cluster's
    // edges never hand out one id twice, so the second edge's ring ids are moved on first.
    const other = client([second.url], account.token, local.port, 'failover-other');
    await other.start();
    assert.equal((await publicGet(second, 'failover-other', '/other')).status, 200);
    await other.close();
    const tunnel = client([first.url, second.url], account.token, local.port);
    const inspector = await Inspector.start({ port: 0, edge: first.url, token: account.token, historyCount: 0 });
    inspector.attach(tunnel);
    const reconnects: { delayMs: number; edge: string }[] = [];
    tunnel.on('reconnecting', (event) => reconnects.push(event));
    try {
      const ready = await tunnel.start();
      assert.equal(ready.edge, first.url);
      assert.deepEqual(await publicGet(first, ready.subdomain, '/before'), { status: 200, body: 'local saw /before' });

      const moved = nextReady(tunnel);
      await first.close();
      const info = await moved;
      assert.equal(info.subdomain, ready.subdomain);
      assert.equal(info.edge, second.url);
      assert.equal(info.reconnected, true);
      assert.deepEqual(info.movedFrom?.edge, first.url);
      assert.match(info.movedFrom?.cause ?? '', /^GOAWAY SHUTDOWN/);
      // The first try on another edge does not wait.
      assert.deepEqual(reconnects.map((event) => [event.delayMs, event.edge]), [[0, second.url]]);
      assert.equal(tunnel.edge, second.url);
      assert.deepEqual(await publicGet(second, ready.subdomain, '/after'), { status: 200, body: 'local saw /after' });

      const listed = await request(`${inspector.url}/api/requests`);
      const paths = ((await listed.body.json()) as { requests: { path: string }[] }).requests.map((item) => item.path);
      assert.deepEqual(paths.sort(), ['/after', '/before']);
    } finally {
      inspector.close();
      await tunnel.close();
      await first.close();
      await second.close();
    }
  });

  test('a token revoked is final: no other edge is tried', async () => {
    const { first, second, account } = await edgesSharingAnAccount();
    const tunnel = client([first.url, second.url], account.token, local.port);
    let reconnects = 0;
    tunnel.on('reconnecting', () => reconnects++);
    try {
      await tunnel.start();
      const closed = new Promise<{ code: string }>((resolve) => tunnel.once('closed', resolve));
      assert.equal((await call(first, 'DELETE', `/api/v1/tokens/${account.tokenId}`, { token: account.token })).status, 204);
      assert.equal((await closed).code, 'TOKEN_REVOKED');
      assert.equal(reconnects, 0);
      assert.deepEqual((await call(second, 'GET', '/api/v1/tunnels', { token: account.token })).json.tunnels, []);
    } finally {
      await tunnel.close();
      await first.close();
      await second.close();
    }
  });

  test('the subdomain owned by another account on the next edge ends the tunnel with SUBDOMAIN_TAKEN', async () => {
    const { first, second, account } = await edgesSharingAnAccount();
    const other = await createAccount(second);
    const squatter = client([second.url], other.token, local.port, 'failover-taken');
    const tunnel = client([first.url, second.url], account.token, local.port, 'failover-taken');
    try {
      await squatter.start();
      assert.equal((await tunnel.start()).subdomain, 'failover-taken');
      const closed = new Promise<{ code: string; reason: string }>((resolve) => tunnel.once('closed', resolve));
      await first.close();
      const info = await closed;
      assert.equal(info.code, 'SUBDOMAIN_TAKEN');
      assert.match(info.reason, /^SUBDOMAIN_TAKEN: /);
    } finally {
      await tunnel.close();
      await squatter.close();
      await first.close();
      await second.close();
    }
  });

  test('start() skips an edge that is down; every edge down is one error naming each', async () => {
    const { first, second, account } = await edgesSharingAnAccount();
    const down = `http://127.0.0.1:${await freePort()}`;
    const tunnel = client([down, first.url], account.token, local.port);
    try {
      const ready = await tunnel.start();
      assert.equal(ready.edge, first.url);
      const nowhere = client([down, `http://127.0.0.1:${await freePort()}`], account.token, local.port);
      await assert.rejects(nowhere.start(), (error: Error) => {
        assert.ok(!(error instanceof TunnelRefusedError));
        assert.match(error.message, /^cannot connect to any edge: http:\/\/127\.0\.0\.1:\d+: ECONNREFUSED; http:\/\/127\.0\.0\.1:\d+: ECONNREFUSED$/);
        return true;
      });
    } finally {
      await tunnel.close();
      await first.close();
      await second.close();
    }
  });

  test('503 STORE_UNAVAILABLE from one edge: the next one at once, at start and on a move', async () => {
    const { first, second, account } = await edgesSharingAnAccount();
    // An edge whose cluster store is down answers the upgrade with the spec's error shape.
    let refusals = 0;
    const unavailable = createServer((req, res) => {
      // The client asks GET /api/v1/instance first (answered 503 too, so it connects at the base URL).
      if (req.headers.upgrade !== undefined) refusals++;
      res.writeHead(503, { 'content-type': 'application/json', 'retry-after': '1' });
      res.end(JSON.stringify({ error: { code: 'STORE_UNAVAILABLE', message: 'The shared store of the cluster is unreachable.' } }));
    });
    unavailable.listen(0, '127.0.0.1');
    await once(unavailable, 'listening');
    const storeDown = `http://127.0.0.1:${(unavailable.address() as AddressInfo).port}`;
    const starting = client([storeDown, first.url], account.token, local.port);
    const moving = client([first.url, storeDown, second.url], account.token, local.port);
    const reasons: string[] = [];
    starting.on('reconnecting', (event) => reasons.push(event.reason));
    try {
      assert.equal((await starting.start()).edge, first.url);
      assert.deepEqual(reasons, [`the edge at ${storeDown} refused: STORE_UNAVAILABLE: The shared store of the cluster is unreachable.`]);
      await starting.close();

      const ready = await moving.start();
      const moved = nextReady(moving);
      await first.close();
      const info = await moved;
      assert.equal(info.edge, second.url);
      assert.equal(info.subdomain, ready.subdomain);
      assert.equal(refusals, 2);
    } finally {
      await starting.close();
      await moving.close();
      unavailable.close();
      await first.close();
      await second.close();
    }
  });

  test('no token in clear text to any edge of the list', async () => {
    const tunnel = client(['http://127.0.0.1:9', 'http://edge.example.test:8080'], 'svc_pat_00000000_000000000000000000000000000000000000', local.port);
    await assert.rejects(tunnel.start(), /^Error: refusing to send the token in clear text to edge\.example\.test:8080/);
  });
});

describe('real edge processes killed', () => {
  let local: LocalServer;
  const READY = /listening on http:\/\/localhost:(\d+)/;

  before(async () => {
    local = await startLocal((req, res) => res.end(`local saw ${req.url}`));
  });

  after(async () => {
    await local.close();
  });

  test('kill -9 moves the tunnel on; all edges down backs off; an edge back up takes it again', async () => {
    const env = { XDG_CONFIG_HOME: tempDir() };
    const firstDir = tempDir();
    const created = await runCli(['admin', 'create-account', '--email', 'failover@example.test', '--data', firstDir, '--json'], env);
    assert.equal(created.code, 0, created.stderr);
    const token = JSON.parse(created.stdout).token.token as string;
    const secondDir = tempDir();
    cpSync(firstDir, secondDir, { recursive: true });
    const firstPort = await freePort();
    const start = (port: number, dataDir: string): Promise<SpawnedProcess> => spawnCli(['edge', '--port', String(port), '--data', dataDir], env, READY);
    let firstEdge = await start(firstPort, firstDir);
    const secondEdge = await start(0, secondDir);
    const secondPort = Number(secondEdge.match[1]);
    const edges = [`http://localhost:${firstPort}`, `http://localhost:${secondPort}`];
    const tunnel = client(edges, token, local.port);
    const reconnects: { delayMs: number; edge: string }[] = [];
    tunnel.on('reconnecting', (event) => reconnects.push(event));
    try {
      const ready = await tunnel.start();
      assert.equal(ready.edge, edges[0]);

      let moved = nextReady(tunnel);
      firstEdge.child.kill('SIGKILL');
      await firstEdge.exited;
      let info = await moved;
      assert.equal(info.subdomain, ready.subdomain);
      assert.equal(info.edge, edges[1]);
      assert.equal(info.movedFrom?.edge, edges[0]);
      assert.equal(reconnects[0]?.delayMs, 0);
      assert.deepEqual(await publicGet({ port: secondPort }, ready.subdomain, '/on-second'), { status: 200, body: 'local saw /on-second' });

      // Both down: after one immediate try of the other edge, the client waits between rounds.
      reconnects.length = 0;
      secondEdge.child.kill('SIGKILL');
      await secondEdge.exited;
      await waitFor(() => reconnects.filter((event) => event.delayMs > 0).length >= 2, 10_000, 'two backoff rounds');
      assert.equal(reconnects[0]?.delayMs, 0);
      assert.equal(tunnel.connected, false);

      moved = nextReady(tunnel);
      firstEdge = await start(firstPort, firstDir);
      info = await moved;
      assert.equal(info.subdomain, ready.subdomain);
      assert.equal(info.edge, edges[0]);
      assert.deepEqual(await publicGet({ port: firstPort }, ready.subdomain, '/back'), { status: 200, body: 'local saw /back' });
    } finally {
      await tunnel.close();
      firstEdge.child.kill('SIGKILL');
      secondEdge.child.kill('SIGKILL');
    }
  });
});
