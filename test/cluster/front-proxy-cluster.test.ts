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
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { chmodSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import { connect } from 'node:net';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { test } from 'node:test';
import { Agent, request } from 'undici';
import WebSocket, { WebSocketServer } from 'ws';
import '../wildcard-dns.js';
import { TEST_DOMAIN } from '../wildcard-dns.js';
import { makeCa, makeServerCert } from '../tls-fixtures.js';
import { RouteTable } from '../../src/client/routes.js';
import { TunnelClient } from '../../src/client/tunnel-client.js';
import { ROOT, call, createAccount, freePort, readBody, startLocal, tempDirs, waitFor, type TestEdge } from '../helpers.js';
import { TestRedis, redisSkip } from '../redis-server.js';
import { startClusterEdge } from './cluster-helpers.js';

const ensureNginx = (await import(pathToFileURL(join(ROOT, 'scripts', 'ensure-nginx.mjs')).href)) as { NGINX: string; nginxMissing(): string | null };
const nginxMissing = ensureNginx.nginxMissing();
const skip = redisSkip !== false ? redisSkip : nginxMissing !== null ? `skipped: ${nginxMissing}` : opensslMissing() ? 'skipped: openssl is missing' : false;

function opensslMissing(): boolean {
  try {
    execFileSync('openssl', ['version'], { stdio: 'ignore' });
    return false;
  } catch {
    return true;
  }
}

const DOMAIN = TEST_DOMAIN;
const SUBDOMAIN = 'cluster-hooks';
const PUBLIC_CLIENT = '127.0.0.2';
const EDGE_PLACEHOLDERS = ['10.0.0.11:8080', '10.0.0.12:8080', '10.0.0.13:8080'];
const makeDir = tempDirs('burrow-front-proxy-cluster-');

/** docs/cluster.md's substitutions on the shipped file, plus loopback ports; each must match. */
function installConfig(shipped: string, values: { certDir: string; edgePorts: number[]; httpsPort: number; httpPort: number; webroot: string }): string {
  const replacements: [RegExp, string][] = [
    [/\/etc\/letsencrypt\/live\/tunnels\.example\.com\//g, `${values.certDir}/`],
    [/tunnels\.example\.com/g, DOMAIN],
    ...EDGE_PLACEHOLDERS.map((placeholder, index): [RegExp, string] => [new RegExp(placeholder.replace(/\./g, '\\.'), 'g'), `127.0.0.1:${values.edgePorts[index]}`]),
    [/\/var\/www\/acme/g, values.webroot],
    [/listen 443 /g, `listen 127.0.0.1:${values.httpsPort} `],
    [/listen 80;/g, `listen 127.0.0.1:${values.httpPort};`],
    [/^\s*listen \[::\]:.*$/gm, ''],
  ];
  let config = shipped;
  for (const [pattern, value] of replacements) {
    assert.match(config, pattern, `deploy/nginx-burrow-cluster.conf no longer contains ${pattern}`);
    config = config.replace(pattern, value);
  }
  return config;
}

interface Seen {
  url: string;
  headers: IncomingMessage['headers'];
  body: string;
}

test('nginx round-robins over three cluster edges: a tunnel on one edge answers every request and WebSocket sent through it, and again after that edge stops', { skip, timeout: 90_000 }, async () => {
  const redis = await TestRedis.start();
  const dir = makeDir();
  const certDir = join(dir, 'live', DOMAIN);
  mkdirSync(certDir, { recursive: true });
  const ca = makeCa(dir, 'ca');
  const server = makeServerCert(certDir, 'fullchain', [DOMAIN, `*.${DOMAIN}`], ca);
  renameSync(server.key, join(certDir, 'privkey.pem'));
  const caPem = readFileSync(ca.cert);

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

  const httpsPort = await freePort();
  const httpPort = await freePort();
  const edges: TestEdge[] = [];
  let nginx: ChildProcess | undefined;
  let client: TunnelClient | undefined;
  const publicClient = new Agent({ localAddress: PUBLIC_CLIENT, connect: { ca: caPem } });
  try {
    for (const nodeId of ['a', 'b', 'c']) {
      edges.push(await startClusterEdge(redis.url, nodeId, { domain: DOMAIN, trustProxy: '127.0.0.1/32', publicScheme: 'https', publicPort: httpsPort }));
    }
    const account = await createAccount(edges[0]!);

    const webroot = join(dir, 'webroot');
    mkdirSync(webroot, { recursive: true });
    chmodSync(dir, 0o755);
    const shipped = readFileSync(join(ROOT, 'deploy', 'nginx-burrow-cluster.conf'), 'utf8');
    writeFileSync(join(dir, 'burrow.conf'), installConfig(shipped, { certDir, edgePorts: edges.map((edge) => edge.port), httpsPort, httpPort, webroot }));
    const nginxLog = join(dir, 'upstreams.log');
    writeFileSync(
      join(dir, 'nginx.conf'),
      [
        'worker_processes 1;',
        `pid ${join(dir, 'nginx.pid')};`,
        `error_log ${join(dir, 'error.log')} notice;`,
        'events { worker_connections 256; }',
        'http {',
        // Which edge served each request: the test's own log line, beside the shipped file.
        "  log_format upstreams '$request_uri $status $upstream_addr';",
        `  access_log ${nginxLog} upstreams;`,
        ...['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((kind) => `  ${kind}_temp_path ${join(dir, `${kind}_temp`)};`),
        `  include ${join(dir, 'burrow.conf')};`,
        '}',
        '',
      ].join('\n'),
    );
    const started = spawn(ensureNginx.NGINX, ['-p', dir, '-e', join(dir, 'error.log'), '-c', join(dir, 'nginx.conf'), '-g', 'daemon off;'], { stdio: ['ignore', 'pipe', 'pipe'] });
    nginx = started;
    let nginxOutput = '';
    started.stdout!.on('data', (chunk: Buffer) => (nginxOutput += chunk.toString()));
    started.stderr!.on('data', (chunk: Buffer) => (nginxOutput += chunk.toString()));
    process.once('exit', () => started.kill('SIGKILL'));
    await waitFor(
      () =>
        new Promise<boolean>((resolve) => {
          if (started.exitCode !== null) throw new Error(`nginx exited: ${nginxOutput}`);
          const socket = connect(httpsPort, '127.0.0.1');
          socket.once('connect', () => {
            socket.destroy();
            resolve(true);
          });
          socket.once('error', () => resolve(false));
        }),
      10_000,
      'nginx to listen',
    );

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
    if (nginx !== undefined && nginx.exitCode === null) {
      const exited = once(nginx, 'exit');
      nginx.kill('SIGQUIT');
      await exited;
    }
    sockets.close();
    await local.close();
    for (const edge of edges) await edge.close();
  }
});
