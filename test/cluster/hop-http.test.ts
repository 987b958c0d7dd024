/**
 * The internal hop for HTTP (issue 17): a tunnel connected to edge A answers public requests sent to
 * edge B, and the public client cannot tell: the same response bytes, the same request at the local
 * server, the capture on A with the client's address.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { connect } from 'node:net';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { after, test } from 'node:test';
import { request } from 'undici';
import { call, createAccount, freePort, readBody, startClient, startEdge, startLocal, tempDir, waitFor } from '../helpers.js';
import { rawRequest } from '../edge/raw-http.js';
import { SECRET, TestCluster, startClusterEdge } from './hop-fixture.js';

const MIB = 1024 * 1024;
const BIG = Buffer.alloc(MIB, 'burrow-');
const seen: { rawHeaders: string[]; method: string; url: string }[] = [];
let slowWritten = 0;

function routes(req: IncomingMessage, res: ServerResponse): void {
  seen.push({ rawHeaders: req.rawHeaders, method: req.method!, url: req.url! });
  const url = new URL(req.url!, 'http://local');
  switch (url.pathname) {
    case '/length':
      res.setHeader('x-one', ['a', 'b']);
      res.setHeader('set-cookie', ['one=1; Path=/', 'two=2; HttpOnly']);
      res.setHeader('content-type', 'text/plain');
      res.end('a body with a length');
      return;
    case '/chunked':
      res.setHeader('content-type', 'text/plain');
      res.write('first ');
      setTimeout(() => res.end('and last'), 20);
      return;
    case '/empty':
      res.setHeader('content-length', '0');
      res.end();
      return;
    case '/no-content':
      res.statusCode = 204;
      res.end();
      return;
    case '/not-modified':
      res.statusCode = 304;
      res.setHeader('etag', '"v1"');
      res.end();
      return;
    case '/speaks-cluster':
      // A tunnel that answers like an edge that does not hold it: the cluster's fields are not its to send.
      res.statusCode = 404;
      res.setHeader('burrow-cluster-not-owner', '1');
      res.setHeader('Burrow-Cluster-Order', '9');
      res.end('the app\'s own 404');
      return;
    case '/teapot':
      res.statusCode = 418;
      res.statusMessage = 'I Am A Teapot Here';
      res.end('short and stout');
      return;
    case '/big':
      res.setHeader('content-length', String(BIG.length));
      res.end(BIG);
      return;
    case '/upload':
      void readBody(req).then((body) => {
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ length: body.length, sha: createHash('sha256').update(body).digest('hex') }));
      }, () => undefined); // an upload cut by the 413
      return;
    case '/slow':
    case '/slow-chunked': {
      // 64 MiB, written only as fast as the public reader takes it (each write waits for drain).
      const total = 64 * MIB;
      if (url.pathname === '/slow') res.setHeader('content-length', String(total));
      const chunk = Buffer.alloc(256 * 1024, 'x');
      const pump = (): void => {
        while (slowWritten < total) {
          slowWritten += chunk.length;
          if (!res.write(chunk)) {
            res.once('drain', pump);
            return;
          }
        }
        res.end();
      };
      pump();
      return;
    }
    default:
      void readBody(req).then(() => {
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ url: req.url }));
      });
  }
}

const cluster = new TestCluster();
const options = { maxRequestBody: 2 * MIB, domain: 'localhost' };
const owner = await startClusterEdge(cluster, 'a', options);
const other = await startClusterEdge(cluster, 'b', options);
const local = await startLocal(routes);
const account = await createAccount(owner, 'PRO');
const tunnel = await startClient(owner, account.token, local.port);
cluster.own(tunnel.subdomain, owner.peer);

const site = tempDir('burrow-hop-python-');
writeFileSync(join(site, 'page.html'), '<p>served by python</p>\n');
const pythonPort = await freePort();
const python = spawn('python3', ['-m', 'http.server', String(pythonPort), '--bind', '127.0.0.1', '--directory', site], { stdio: 'ignore' });
await waitFor(async () => (await request(`http://127.0.0.1:${pythonPort}/page.html`).then((r) => r.body.dump().then(() => true), () => false)), 10_000, 'python3 http.server');
const pythonTunnel = await startClient(owner, account.token, pythonPort);
cluster.own(pythonTunnel.subdomain, owner.peer);

after(async () => {
  await tunnel.client.close();
  await pythonTunnel.client.close();
  python.kill();
  await local.close();
  await other.close();
  await owner.close();
});

/** The same Host for both edges: the host dispatch needs only the domain, and the bytes can then match. */
const hostOf = (subdomain: string): string => `${subdomain}.localhost:8080`;
/** A response's bytes with the Date header's value blanked (each edge's own clock). */
const normalised = (bytes: Buffer): string => bytes.toString('latin1').replace(/\r\n[Dd]ate: [^\r]*/, '\r\nDate: -');

test('responses through the hop are byte for byte those of the owning edge', async () => {
  const rows: [string, string, string][] = [
    ['GET', '/length', tunnel.subdomain],
    ['GET', '/chunked', tunnel.subdomain],
    ['GET', '/empty', tunnel.subdomain],
    ['GET', '/no-content', tunnel.subdomain],
    ['GET', '/not-modified', tunnel.subdomain],
    ['GET', '/teapot', tunnel.subdomain],
    ['HEAD', '/length', tunnel.subdomain],
    ['HEAD', '/chunked', tunnel.subdomain],
    ['GET', '/big', tunnel.subdomain],
    ['GET', '/page.html', pythonTunnel.subdomain],
    ['GET', '/missing.html', pythonTunnel.subdomain],
  ];
  for (const [method, path, subdomain] of rows) {
    const direct = await rawRequest(owner.port, hostOf(subdomain), method, path);
    const hopped = await rawRequest(other.port, hostOf(subdomain), method, path);
    assert.ok(direct.status >= 200, `${method} ${path}: ${direct.head}`);
    assert.equal(normalised(hopped.bytes), normalised(direct.bytes), `${method} ${path} on ${subdomain}`);
  }
});

test('the local server gets the same request through the hop as from the owning edge', async () => {
  const send = async (port: number, via: string): Promise<string[]> => {
    seen.length = 0;
    const socket = connect(port, '127.0.0.1');
    await once(socket, 'connect');
    socket.write(
      `POST /echo?x=1&y=%20&via=${via} HTTP/1.1\r\nX-First: 1\r\nHost: ${hostOf(tunnel.subdomain)}\r\nCookie: a=1\r\nCookie: b=2\r\n` +
        `Content-Length: 5\r\nX-Forwarded-For: 203.0.113.9\r\nConnection: close, x-gone\r\nX-Gone: dropped\r\nUser-Agent: raw\r\n\r\nhello`,
    );
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    await once(socket, 'close');
    assert.match(Buffer.concat(chunks).toString('latin1'), /^HTTP\/1\.1 200 /);
    assert.equal(seen.length, 1);
    assert.equal(seen[0]!.url, `/echo?x=1&y=%20&via=${via}`);
    return seen[0]!.rawHeaders.filter((_, i, all) => !/^via$/.test(all[i - (i % 2)]!));
  };
  const direct = await send(owner.port, 'direct');
  const hopped = await send(other.port, 'hop');
  // The capture keeps the edge's reading of the request: the same list in the same order (Host second).
  const capturedDirect = (await capturedOnOwner('/echo?x=1&y=%20&via=direct')).request.headers;
  const capturedHopped = (await capturedOnOwner('/echo?x=1&y=%20&via=hop')).request.headers;
  assert.deepEqual(capturedHopped, capturedDirect);
  assert.deepEqual(capturedHopped.slice(0, 3), [['X-First', '1'], ['Host', hostOf(tunnel.subdomain)], ['Cookie', 'a=1']]);
  // The tunnel client's own connection headers aside, the lists are the same, in the same order.
  assert.deepEqual(hopped, direct);
  assert.ok(!hopped.some((name) => name.toLowerCase().startsWith('burrow-cluster')), hopped.join('|'));
  assert.ok(hopped.includes('203.0.113.9, 127.0.0.1'), hopped.join('|'));
  assert.ok(!hopped.some((name) => name.toLowerCase() === 'x-gone'), hopped.join('|'));
});

test('the owner captures a forwarded request with the client\'s address as the first edge saw it', async () => {
  // C believes the proxy in front of it (loopback here): the client is the one X-Forwarded-For names.
  const behindProxy = await startClusterEdge(cluster, 'c', { ...options, trustProxy: '127.0.0.1/32' });
  try {
    const response = await call(behindProxy, 'GET', '/captured-here?n=1', { host: hostOf(tunnel.subdomain), headers: { 'x-forwarded-for': '203.0.113.5', 'x-forwarded-proto': 'https' } });
    assert.equal(response.status, 200);
    const capture = await capturedOnOwner('/captured-here?n=1');
    assert.equal(capture.client_address, '203.0.113.5');
    assert.deepEqual((capture.request.headers as [string, string][]).find(([name]) => name.toLowerCase() === 'x-forwarded-proto'), ['X-Forwarded-Proto', 'https']);
  } finally {
    await behindProxy.close();
  }
});

/** The newest capture of `path` on the owner, in full. */
async function capturedOnOwner(path: string): Promise<any> {
  let id = '';
  await waitFor(async () => {
    const list = await call(owner, 'GET', `/api/v1/requests?subdomain=${tunnel.subdomain}&limit=20`, { token: account.token });
    id = (list.json?.requests as { id: string; path: string }[] | undefined)?.find((each) => each.path === path)?.id ?? '';
    return id !== '';
  }, 5_000, `the capture of ${path} on the owner`);
  return (await call(owner, 'GET', `/api/v1/requests/${id}`, { token: account.token })).json;
}

test('1 MiB bodies both ways cross the hop whole', async () => {
  const upload = await request(`${other.base}/upload`, { method: 'POST', headers: { host: hostOf(tunnel.subdomain) }, body: BIG });
  assert.equal(upload.statusCode, 200);
  assert.deepEqual(await upload.body.json(), { length: BIG.length, sha: createHash('sha256').update(BIG).digest('hex') });
  // Chunked (no length): the hop streams it as it comes.
  const chunked = await request(`${other.base}/upload`, {
    method: 'POST',
    headers: { host: hostOf(tunnel.subdomain) },
    body: Readable.from((function* () {
      for (let i = 0; i < 16; i++) yield BIG.subarray(i * 65_536, (i + 1) * 65_536);
    })()),
  });
  assert.deepEqual(await chunked.body.json(), { length: BIG.length, sha: createHash('sha256').update(BIG).digest('hex') });
  const download = await request(`${other.base}/big`, { headers: { host: hostOf(tunnel.subdomain) } });
  const body = Buffer.from(await download.body.arrayBuffer());
  assert.equal(body.length, BIG.length);
  assert.ok(body.equals(BIG));
});

test('a body over the limit is refused 413 on the edge that received it', async () => {
  const declared = await request(`${other.base}/upload`, { method: 'POST', headers: { host: hostOf(tunnel.subdomain) }, body: Buffer.alloc(3 * MIB) });
  assert.equal(declared.statusCode, 413);
  assert.equal((await declared.body.json() as { error: { code: string } }).error.code, 'PAYLOAD_TOO_LARGE');
  const streamed = await request(`${other.base}/upload`, {
    method: 'POST',
    headers: { host: hostOf(tunnel.subdomain) },
    body: Readable.from((function* () {
      for (let i = 0; i < 3; i++) yield Buffer.alloc(MIB);
    })()),
  }).catch((error: Error) => error);
  if (!(streamed instanceof Error)) {
    assert.equal(streamed.statusCode, 413);
    await streamed.body.dump();
  }
});

for (const path of ['/slow', '/slow-chunked']) {
  test(`a slow public reader pauses the owner's stream (${path}): the local server waits instead of the edges buffering`, async () => {
    slowWritten = 0;
    const socket = connect(other.port, '127.0.0.1');
    await once(socket, 'connect');
    socket.pause();
    socket.write(`GET ${path} HTTP/1.1\r\nHost: ${hostOf(tunnel.subdomain)}\r\nConnection: close\r\n\r\n`);
    // Let the pipeline fill up: every buffer on the way (socket buffers, the tunnel's credit) is bounded.
    await waitFor(() => slowWritten > 0, 5_000, 'the download to start');
    let previous = -1;
    await waitFor(async () => {
      await new Promise((resolve) => setTimeout(resolve, 300));
      const settled = previous === slowWritten;
      previous = slowWritten;
      return settled;
    }, 20_000, 'the local server to be held back');
    assert.ok(slowWritten < 32 * MIB, `the local server wrote ${slowWritten} bytes to a reader that read none`);
    let received = 0;
    socket.on('data', (chunk: Buffer) => (received += chunk.length));
    socket.resume();
    await once(socket, 'close');
    assert.ok(received > 64 * MIB, `received ${received}`);
  });
}

test('forged cluster headers without the secret never reach the tunnel and change nothing', async () => {
  seen.length = 0;
  const response = await call(owner, 'GET', '/forged', {
    host: hostOf(tunnel.subdomain),
    headers: { 'burrow-cluster-secret': 'not-the-secret-at-all', 'burrow-cluster-client': '6.6.6.6', 'burrow-cluster-proto': 'https', 'burrow-cluster-order': '3,0' },
  });
  assert.equal(response.status, 200);
  const headers = seen[0]!.rawHeaders;
  assert.ok(!headers.some((name) => name.toLowerCase().startsWith('burrow-cluster')), headers.join('|'));
  const value = (name: string): string | undefined => headers[headers.findIndex((each, i) => i % 2 === 0 && each.toLowerCase() === name) + 1];
  assert.equal(value('x-forwarded-for'), '127.0.0.1');
  assert.equal(value('x-forwarded-proto'), 'http');
  // With the secret, the same headers are believed (the hop's own request).
  seen.length = 0;
  await call(owner, 'GET', '/trusted', { host: hostOf(tunnel.subdomain), headers: { 'burrow-cluster-secret': SECRET, 'burrow-cluster-client': '198.51.100.7', 'burrow-cluster-proto': 'https' } });
  assert.ok(!seen[0]!.rawHeaders.some((name) => name.toLowerCase().startsWith('burrow-cluster')));
  assert.equal((await capturedOnOwner('/forged')).client_address, '127.0.0.1');
  assert.equal((await capturedOnOwner('/trusted')).client_address, '198.51.100.7');
});

test('an owner that does not hold the tunnel: the forwarding edge forgets it and asks again (up to 3 edges), then answers its 404', async () => {
  cluster.own('stale', owner.peer);
  cluster.forgotten.length = 0;
  const response = await rawRequest(other.port, hostOf('stale'), 'GET', '/');
  assert.equal(response.status, 404);
  assert.match(response.body.toString(), /TUNNEL_NOT_FOUND/);
  assert.doesNotMatch(response.head.toLowerCase(), /burrow-cluster/);
  // This directory names the same stale owner every time: each of the 3 tries is forgotten (issue 27: a pool member that just left).
  assert.deepEqual(cluster.forgotten, ['b:stale', 'b:stale', 'b:stale']);
  // The owner, asked directly with the secret, never forwards again (its directory still names itself... or anyone).
  cluster.own('elsewhere', other.peer);
  const asOwner = await call(owner, 'GET', '/', { host: hostOf('elsewhere'), headers: { 'burrow-cluster-secret': SECRET } });
  assert.equal(asOwner.status, 404);
  assert.equal(asOwner.headers['burrow-cluster-not-owner'], '1');
  // No edge holds it: the same answer, byte for byte, as a lone edge's.
  const lone = await startEdge();
  try {
    const alone = await rawRequest(lone.port, hostOf('nobody-holds-this'), 'GET', '/');
    const nobody = await rawRequest(other.port, hostOf('nobody-holds-this'), 'GET', '/');
    assert.equal(nobody.status, 404);
    assert.equal(normalised(nobody.bytes), normalised(alone.bytes));
  } finally {
    await lone.close();
  }
});

test('a tunnel that sends the cluster\'s own fields is not believed: its 404 reaches the public once, without them, on either edge', async () => {
  cluster.forgotten.length = 0;
  seen.length = 0;
  for (const port of [other.port, owner.port]) {
    const answer = await rawRequest(port, hostOf(tunnel.subdomain), 'GET', '/speaks-cluster');
    assert.equal(answer.status, 404);
    assert.equal(answer.body.toString(), "the app's own 404");
    assert.doesNotMatch(answer.head.toLowerCase(), /burrow-cluster/);
  }
  // Asked once through each edge: the forwarding edge neither asked another edge nor forgot the owner.
  assert.equal(seen.filter((each) => each.url === '/speaks-cluster').length, 2);
  assert.deepEqual(cluster.forgotten, []);
});

test('an owner that cannot be reached is a 502 EDGE_UNREACHABLE, and forgotten', async () => {
  const port = await freePort();
  cluster.own('ghost', { nodeId: 'c', advertise: `http://127.0.0.1:${port}`, boot: 'gone' });
  cluster.forgotten.length = 0;
  const response = await call(other, 'POST', '/', { host: hostOf('ghost'), body: { some: 'body' } });
  assert.equal(response.status, 502);
  assert.equal(response.json.error.code, 'EDGE_UNREACHABLE');
  assert.match(response.json.error.message, /ghost is unreachable: it refused the connection/);
  assert.deepEqual(cluster.forgotten, ['b:ghost']);
});
