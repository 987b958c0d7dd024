/**
 * Debian's nginx in front of a cluster (issue 17): the shipped deploy/nginx-burrow-cluster.conf, with the
 * substitutions docs/cluster.md tells an operator to make, round-robins over three cluster edges on one
 * real Redis. The real tunnel client connects through nginx (over wss://, trusting a throwaway CA) and
 * lands on one edge; every public request sent through nginx is answered by its local server whichever
 * edge nginx picked (the others forward over the internal hop), WebSockets included, with the header
 * handling of the single-edge file: https and the real client address reach the local server and the
 * capture. nginx's own log names the edge of each request, so the test knows all three were used. When
 * the edge holding the tunnel stops, the client reconnects through nginx to another edge, and requests
 * through nginx are answered again.
 *
 * Addresses as in test/edge/front-proxy.test.ts: nginx on 127.0.0.1 (the edges' trusted proxy), public
 * clients from 127.0.0.2; names under burrow.test resolve to 127.0.0.1 (test/wildcard-dns.ts).
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import { test } from 'node:test';
import { Agent, request } from 'undici';
import WebSocket, { WebSocketServer } from 'ws';
import '../wildcard-dns.js';
import { TEST_DOMAIN } from '../wildcard-dns.js';
import { freePorts, frontProxySkip, makeCertificates, startClusterNginx, type RunningNginx } from '../nginx-front.js';
import { RouteTable } from '../../src/client/routes.js';
import { TunnelClient } from '../../src/client/tunnel-client.js';
import { call, createAccount, readBody, startLocal, tempDirs, waitFor, type TestEdge } from '../helpers.js';
import { TestRedis, redisSkip } from '../redis-server.js';
import { startClusterEdge } from './cluster-helpers.js';

const skip = redisSkip !== false ? redisSkip : frontProxySkip();

const DOMAIN = TEST_DOMAIN;
const SUBDOMAIN = 'cluster-hooks';
const PUBLIC_CLIENT = '127.0.0.2';
const makeDir = tempDirs('burrow-front-proxy-cluster-');

interface Seen {
  url: string;
  headers: IncomingMessage['headers'];
  body: string;
}

test('nginx round-robins over three cluster edges: a tunnel on one edge answers every request and WebSocket sent through it, and again after that edge stops', { skip, timeout: 90_000 }, async () => {
  const redis = await TestRedis.start();
  const dir = makeDir();
  const { caPem, certDir } = makeCertificates(dir, DOMAIN);

  const seen: Seen[] = [];
  const local = await startLocal((req, res) => {
    void readBody(req).then((body) => {
      seen.push({ url: req.url!, headers: req.headers, body: body.toString('utf8') });
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ url: req.url, length: body.length }));
    });
  });
  const sockets = new WebSocketServer({ server: local.server });
  sockets.on('connection', (socket) => socket.on('message', (data, isBinary) => socket.send(data, { binary: isBinary })));

  const [httpsPort, httpPort] = (await freePorts(2)) as [number, number];
  const edges: TestEdge[] = [];
  let nginx: RunningNginx | undefined;
  let client: TunnelClient | undefined;
  const publicClient = new Agent({ localAddress: PUBLIC_CLIENT, connect: { ca: caPem } });
  try {
    for (const nodeId of ['a', 'b', 'c']) {
      edges.push(await startClusterEdge(redis.url, nodeId, { domain: DOMAIN, trustProxy: '127.0.0.1/32', publicScheme: 'https', publicPort: httpsPort }));
    }
    const account = await createAccount(edges[0]!);

    const front = await startClusterNginx(dir, {
      domain: DOMAIN,
      certDir,
      httpsPort,
      httpPort,
      edgePorts: edges.map((edge) => edge.port),
      agentPorts: edges.map((edge) => edge.edge.agentPort),
    });
    nginx = front.nginx;
    const nginxLog = front.log;

    // The tunnel client connects through nginx, as docs/cluster.md says, and lands on one of the edges.
    client = new TunnelClient({ edge: `https://${DOMAIN}:${httpsPort}`, ca: caPem, token: account.token, routes: new RouteTable(local.port), subdomain: SUBDOMAIN, minBackoffMs: 50, maxBackoffMs: 500 });
    const ready = await client.start();
    assert.equal(ready.publicUrl, `https://${SUBDOMAIN}.${DOMAIN}:${httpsPort}`);
    const holders = edges.filter((edge) => edge.edge.registry.session(SUBDOMAIN) !== undefined);
    assert.equal(holders.length, 1, 'one edge holds the tunnel');

    // Nine requests: three rounds of nginx's round robin over the three edges.
    for (let index = 0; index < 9; index++) {
      const path = `/hook/${index}`;
      const body = `{"delivery":${index}}`;
      const response = await request(`https://${SUBDOMAIN}.${DOMAIN}:${httpsPort}${path}`, { method: 'POST', body, headers: { 'content-type': 'application/json' }, dispatcher: publicClient });
      const text = await response.body.text();
      assert.equal(response.statusCode, 200, `${path}: ${text}`);
      assert.deepEqual(JSON.parse(text), { url: path, length: body.length });
      const got = seen.find((entry) => entry.url === path)!;
      assert.equal(got.body, body);
      assert.equal(got.headers['x-forwarded-proto'], 'https', `${path}: the scheme nginx was asked with`);
      assert.equal(got.headers['x-forwarded-host'], `${SUBDOMAIN}.${DOMAIN}:${httpsPort}`, `${path}: the host nginx was asked with`);
      assert.equal(String(got.headers['x-forwarded-for']).split(',')[0]!.trim(), PUBLIC_CLIENT, `${path}: the real client first in X-Forwarded-For (${String(got.headers['x-forwarded-for'])})`);
    }

    // WebSockets through nginx: three, so the round robin sends one to each edge.
    for (let index = 0; index < 3; index++) {
      const socket = new WebSocket(`wss://${SUBDOMAIN}.${DOMAIN}:${httpsPort}/ws/${index}`, { ca: caPem, localAddress: PUBLIC_CLIENT });
      await once(socket, 'open');
      socket.send(`hello ${index}`);
      const [data] = (await once(socket, 'message')) as [Buffer];
      assert.equal(data.toString(), `hello ${index}`);
      socket.close(1000);
      await once(socket, 'close');
    }

    // Plain HTTP: a 308 to HTTPS, so a webhook POST sent to http:// is re-sent as a POST (a 301 lets it become a GET).
    const redirect = await request(`http://${SUBDOMAIN}.${DOMAIN}:${httpPort}/webhook?x=1`, { method: 'POST', body: '{"event":"ping"}' });
    await redirect.body.dump();
    assert.equal(redirect.statusCode, 308);
    assert.equal(redirect.headers.location, `https://${SUBDOMAIN}.${DOMAIN}/webhook?x=1`);

    // nginx used every edge, for plain requests and for WebSockets.
    const edgeOf = new Map(edges.map((edge, index) => [`127.0.0.1:${edge.port}`, index]));
    let lines: { uri: string; status: string; edge: number | undefined }[] = [];
    await waitFor(() => {
      lines = readFileSync(nginxLog, 'utf8')
        .split('\n')
        .filter((line) => line.startsWith('/hook/') || line.startsWith('/ws/'))
        .map((line) => {
          const [uri, status, upstream] = line.split(' ');
          return { uri: uri!, status: status!, edge: edgeOf.get(upstream!) };
        });
      return lines.filter((line) => line.uri.startsWith('/ws/')).length === 3;
    }, 5_000, "nginx's log lines of the WebSockets");
    const used = (prefix: string): number[] => [...new Set(lines.filter((line) => line.uri.startsWith(prefix)).map((line) => line.edge!))].sort();
    assert.deepEqual(used('/hook/'), [0, 1, 2], 'requests went to every edge');
    assert.deepEqual(used('/ws/'), [0, 1, 2], 'WebSockets went to every edge');

    // Every request is captured (on the edge holding the tunnel) with the real client address; any edge lists them.
    const listed = await call(edges[2]!, 'GET', `/api/v1/requests?subdomain=${SUBDOMAIN}&limit=100`, { token: account.token, host: DOMAIN });
    assert.equal(listed.status, 200, listed.text);
    const hooks = (listed.json.requests as { id: string; path: string }[]).filter((entry) => entry.path.startsWith('/hook/'));
    assert.equal(hooks.length, 9);
    const holder = holders[0]!;
    for (const entry of hooks) {
      const shown = await call(holder, 'GET', `/api/v1/requests/${entry.id}`, { token: account.token, host: DOMAIN });
      assert.equal(shown.json.client_address, PUBLIC_CLIENT, `${entry.path}: the capture names the real client`);
    }

    // The edge holding the tunnel stops: the client reconnects through nginx, which skips the stopped
    // edge, and requests through nginx are answered again by whichever edge nginx picks.
    const holderIndex = edges.indexOf(holder);
    const reconnected = once(client, 'ready') as Promise<[{ subdomain: string; reconnected: boolean }]>;
    await holder.close();
    const [again] = await reconnected;
    assert.equal(again.subdomain, SUBDOMAIN);
    assert.equal(again.reconnected, true);
    const survivors = edges.filter((_, index) => index !== holderIndex);
    assert.equal(survivors.filter((edge) => edge.edge.registry.session(SUBDOMAIN) !== undefined).length, 1, 'a surviving edge holds the tunnel');
    for (let index = 0; index < 6; index++) {
      const path = `/after/${index}`;
      const response = await request(`https://${SUBDOMAIN}.${DOMAIN}:${httpsPort}${path}`, { method: 'POST', body: 'again', dispatcher: publicClient });
      const text = await response.body.text();
      assert.equal(response.statusCode, 200, `${path} after the holder stopped: ${text}`);
      assert.deepEqual(JSON.parse(text), { url: path, length: 5 });
    }
  } finally {
    await client?.close();
    await publicClient.close();
    await nginx?.stop();
    sockets.close();
    await local.close();
    for (const edge of edges) await edge.close();
  }
});
