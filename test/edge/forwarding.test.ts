/**
 * Public HTTP traffic through a real tunnel: a real edge, the real client, real local servers.
 */
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { request } from 'undici';
import { call, createAccount, echo, rawRequest, readBody, startClient, startEdge, startLocal, type LocalServer, type TestEdge } from '../helpers.js';

describe('forwarding through a tunnel', () => {
  let target: TestEdge;
  let local: LocalServer;
  let other: LocalServer;
  let host: string;
  let hopHost: string;
  let emptyHost: string;

  let close: () => Promise<void>;

  before(async () => {
    target = await startEdge();
    local = await startLocal(echo);
    other = await startLocal((req, res) => {
      void readBody(req).then(() => {
        res.setHeader('x-server', 'other');
        res.end(`other:${req.url}`);
      });
    });
    const account = await createAccount(target);
    const started = await startClient(target, account.token, local.port, { routes: [{ prefix: '/api', port: other.port }] });
    host = started.host;
    const hopServer = await startLocal((_req, res) => {
      res.writeHead(200, { connection: 'keep-alive, x-private-hop', 'x-private-hop': 'no', 'x-public': 'yes', 'keep-alive': 'timeout=5' });
      res.end('hop');
    });
    const hopClient = await startClient(target, account.token, hopServer.port);
    hopHost = hopClient.host;
    // Node's plain res.end() answers Content-Length: 0; 204 and 304 carry no length at all.
    const emptyServer = await startLocal((req, res) => {
      res.statusCode = Number(req.url!.split('/')[2]);
      res.setHeader('x-empty', 'yes');
      if (req.method === 'HEAD') res.setHeader('content-length', '1234');
      res.end();
    });
    const emptyClient = await startClient(target, account.token, emptyServer.port);
    emptyHost = emptyClient.host;
    close = async () => {
      await started.client.close();
      await hopClient.client.close();
      await hopServer.close();
      await emptyClient.client.close();
      await emptyServer.close();
    };
  });

  after(async () => {
    await close();
    await local.close();
    await other.close();
    await target.close();
  });

  test('GET with a query string and headers arrives intact, X-Forwarded-* set by the edge', async () => {
    const response = await call(target, 'GET', '/hello/world?a=1&b=two%20words&c', {
      host,
      headers: { 'x-custom': 'value', 'x-forwarded-for': '203.0.113.9', 'x-forwarded-proto': 'gopher', 'x-forwarded-host': 'evil.example' },
    });
    assert.equal(response.status, 200);
    assert.equal(response.headers['x-echo'], 'yes');
    const seen = response.json;
    assert.equal(seen.method, 'GET');
    assert.equal(seen.url, '/hello/world?a=1&b=two%20words&c');
    assert.equal(seen.headers['x-custom'], 'value');
    assert.equal(seen.headers.host, host);
    // A client-sent X-Forwarded-For is extended, never passed on as the only value.
    assert.equal(seen.headers['x-forwarded-for'], '203.0.113.9, 127.0.0.1');
    assert.equal(seen.headers['x-forwarded-proto'], 'http');
    assert.equal(seen.headers['x-forwarded-host'], host);
  });

  test('POST and PUT bodies arrive intact', async () => {
    for (const method of ['POST', 'PUT', 'PATCH', 'DELETE']) {
      const body = JSON.stringify({ method, items: Array.from({ length: 50 }, (_, i) => `item-${i}`) });
      const response = await call(target, method, '/submit', { host, rawBody: body, headers: { 'content-type': 'application/json' } });
      assert.equal(response.status, 200, method);
      assert.equal(response.json.method, method);
      assert.equal(response.json.body, body);
      assert.equal(response.json.headers['content-type'], 'application/json');
    }
  });

  test('a chunked request body (no Content-Length) arrives intact', async () => {
    const parts = ['first part, ', 'second part, ', 'x'.repeat(70_000), ' last part'];
    const response = await request(`${target.base}/chunked`, {
      method: 'POST',
      headers: { host },
      body: Readable.from(parts.map((part) => Buffer.from(part))),
    });
    const seen = (await response.body.json()) as { body: string; headers: Record<string, string> };
    assert.equal(response.statusCode, 200);
    assert.equal(seen.body, parts.join(''));
    // The client streams the body on: chunked, or with its length when undici saw the whole body
    // before writing the request. Either way never a length that disagrees with the body.
    const length = seen.headers['content-length'];
    assert.ok(seen.headers['transfer-encoding'] === 'chunked' || length === String(parts.join('').length), JSON.stringify(seen.headers));
  });

  test('a body just over one frame streams and arrives intact', async () => {
    const body = randomBytes(64 * 1024 + 1).toString('base64');
    const response = await call(target, 'POST', '/large', { host, rawBody: body });
    assert.equal(response.json.length, Buffer.byteLength(body));
    assert.equal(response.json.body, body);
  });

  test('hop-by-hop headers and those named in Connection are dropped', async () => {
    const answer = await rawRequest(
      target.port,
      `GET /hop HTTP/1.1\r\nHost: ${host}\r\nConnection: keep-alive, X-Secret-Hop\r\nX-Secret-Hop: drop me\r\n` +
        'Keep-Alive: timeout=5\r\nTE: trailers\r\nProxy-Authorization: Basic eA==\r\nX-Kept: yes\r\nConnection: close\r\n\r\n',
    );
    const headers = JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)).headers;
    assert.equal(headers['x-kept'], 'yes');
    for (const name of ['x-secret-hop', 'keep-alive', 'te', 'proxy-authorization']) assert.equal(headers[name], undefined, name);
  });

  test('hop-by-hop headers of the local response are dropped too', async () => {
    const response = await call(target, 'GET', '/hop-response', { host: hopHost });
    assert.equal(response.status, 200);
    assert.equal(response.headers['x-private-hop'], undefined);
    assert.equal(response.headers['x-public'], 'yes');
    assert.equal(response.text, 'hop');
  });

  test('--route sends a prefix to another port on a path-segment boundary', async () => {
    const routed = await call(target, 'GET', '/api/users?x=1', { host });
    assert.equal(routed.text, 'other:/api/users?x=1');
    assert.equal(routed.headers['x-server'], 'other');
    const exact = await call(target, 'GET', '/api', { host });
    assert.equal(exact.text, 'other:/api');
    const notBoundary = await call(target, 'GET', '/apix', { host });
    assert.equal(notBoundary.json.url, '/apix');
  });

  test('500 concurrent requests are each answered correctly', async () => {
    const results = await Promise.all(
      Array.from({ length: 500 }, async (_, i) => {
        const response = await call(target, 'POST', `/concurrent/${i}`, { host, rawBody: `body-${i}` });
        return { i, response };
      }),
    );
    for (const { i, response } of results) {
      assert.equal(response.status, 200);
      assert.equal(response.json.url, `/concurrent/${i}`);
      assert.equal(response.json.body, `body-${i}`);
    }
  });

  test('HEAD gets the headers without a body; 204 and 304 carry no body', async () => {
    const head = await call(target, 'HEAD', '/head', { host });
    assert.equal(head.status, 200);
    assert.equal(head.text, '');
    // The length a local server announces for HEAD reaches the public client, with no body.
    const announced = await call(target, 'HEAD', '/status/200', { host: emptyHost });
    assert.equal(announced.headers['content-length'], '1234');
    assert.equal(announced.text, '');
    for (const status of [204, 304]) {
      const response = await call(target, 'GET', `/status/${status}`, { host: emptyHost });
      assert.equal(response.status, status);
      assert.equal(response.text, '');
      assert.equal(response.headers['content-length'], undefined, `${status} must not announce a length`);
    }
  });

  test('an empty body with Content-Length: 0 ends (regression: it hung)', async () => {
    const response = await call(target, 'GET', '/status/200', { host: emptyHost });
    assert.equal(response.status, 200);
    assert.equal(response.text, '');
    assert.equal(response.headers['x-empty'], 'yes');
  });

  test('an unknown subdomain answers 404 TUNNEL_NOT_FOUND marked as the edge', async () => {
    const response = await call(target, 'GET', '/', { host: `nobody-here-1.localhost:${target.port}` });
    assert.equal(response.status, 404);
    assert.equal(response.headers['burrow-error'], 'TUNNEL_NOT_FOUND');
    assert.equal(response.json.error.code, 'TUNNEL_NOT_FOUND');
  });
});

describe('large bodies both ways', () => {
  let target: TestEdge;
  let local: LocalServer;
  let host: string;
  let close: () => Promise<void>;
  const download = randomBytes(50 * 1024 * 1024);
  const downloadHash = createHash('sha256').update(download).digest('hex');

  before(async () => {
    target = await startEdge();
    local = await startLocal((req, res) => {
      if (req.url === '/download') {
        res.setHeader('content-length', download.length);
        res.end(download);
        return;
      }
      if (req.url === '/download-chunked') {
        let offset = 0;
        const step = (): void => {
          while (offset < download.length) {
            const chunk = download.subarray(offset, offset + 1024 * 1024);
            offset += chunk.length;
            if (!res.write(chunk)) {
              res.once('drain', step);
              return;
            }
          }
          res.end();
        };
        step();
        return;
      }
      const hash = createHash('sha256');
      let length = 0;
      req.on('data', (chunk: Buffer) => {
        hash.update(chunk);
        length += chunk.length;
      });
      req.on('end', () => res.end(JSON.stringify({ length, hash: hash.digest('hex') })));
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

  test('a 50 MiB upload arrives intact', async () => {
    const upload = randomBytes(50 * 1024 * 1024);
    const response = await call(target, 'POST', '/upload', { host, rawBody: upload });
    assert.equal(response.status, 200);
    assert.equal(response.json.length, upload.length);
    assert.equal(response.json.hash, createHash('sha256').update(upload).digest('hex'));
  });

  test('a 50 MiB download with Content-Length arrives intact', async () => {
    const response = await request(`${target.base}/download`, { headers: { host } });
    assert.equal(response.statusCode, 200);
    assert.equal(response.headers['content-length'], String(download.length));
    const hash = createHash('sha256');
    for await (const chunk of response.body) hash.update(chunk as Buffer);
    assert.equal(hash.digest('hex'), downloadHash);
  });

  test('a 50 MiB chunked download arrives intact', async () => {
    const response = await request(`${target.base}/download-chunked`, { headers: { host } });
    assert.equal(response.statusCode, 200);
    const hash = createHash('sha256');
    for await (const chunk of response.body) hash.update(chunk as Buffer);
    assert.equal(hash.digest('hex'), downloadHash);
  });
});
