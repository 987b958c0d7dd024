/**
 * What the public side sees when things go wrong behind the tunnel, and that memory stays bounded
 * when a peer is slow: real edge, real client, real local servers.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { request } from 'undici';
import { DEFAULT_SETTINGS } from '../../src/protocol/constants.js';
import { call, createAccount, freePort, startClient, startEdge, startLocal, waitFor, type TestAccount, type TestEdge } from '../helpers.js';

function sessionOf(target: TestEdge, subdomain: string) {
  const session = target.edge.registry.session(subdomain);
  assert.ok(session, `no live session for ${subdomain}`);
  return session;
}

describe('edge errors on the public side', () => {
  let target: TestEdge;
  let account: TestAccount;

  before(async () => {
    target = await startEdge({ requestTimeoutMs: 400 });
    account = await createAccount(target, 'PRO');
  });

  after(async () => {
    await target.close();
  });

  test('a closed local port answers 502 LOCAL_UNREACHABLE', async () => {
    const started = await startClient(target, account.token, await freePort());
    try {
      const response = await call(target, 'GET', '/', { host: started.host });
      assert.equal(response.status, 502);
      assert.equal(response.headers['burrow-error'], 'LOCAL_UNREACHABLE');
      assert.equal(response.json.error.code, 'LOCAL_UNREACHABLE');
      assert.match(response.json.error.message, /ECONNREFUSED|connect/i);
    } finally {
      await started.client.close();
    }
  });

  test('a local server that never answers gets 504 LOCAL_TIMEOUT from the edge timer', async () => {
    const seen: string[] = [];
    const local = await startLocal((req) => {
      seen.push(req.url!);
    });
    const started = await startClient(target, account.token, local.port);
    try {
      const response = await call(target, 'POST', '/hang', { host: started.host, rawBody: 'x' });
      assert.equal(response.status, 504);
      assert.equal(response.headers['burrow-error'], 'LOCAL_TIMEOUT');
      assert.equal(response.json.error.code, 'LOCAL_TIMEOUT');
      assert.deepEqual(seen, ['/hang']);
      // The client was told to stop: its stream is gone.
      await waitFor(() => started.client.activeStreams === 0, 2_000, 'the client to drop the stream');
    } finally {
      await started.client.close();
      await local.close();
    }
  });

  test('a tunnel that drops while a request waits answers 502 TUNNEL_CLOSED, no hang', async () => {
    const local = await startLocal(() => {});
    const started = await startClient(target, account.token, local.port);
    const pending = call(target, 'GET', '/waiting', { host: started.host });
    await waitFor(() => sessionOf(target, started.subdomain).streams.size === 1, 2_000, 'the stream to open');
    await started.client.close();
    const response = await pending;
    assert.equal(response.status, 502);
    assert.equal(response.headers['burrow-error'], 'TUNNEL_CLOSED');
    await local.close();
  });

  test('a public client that leaves mid-response cancels the local request', async () => {
    let localClosed = false;
    const local = await startLocal((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('streaming...\n');
      res.on('close', () => {
        localClosed = true;
      });
    });
    const started = await startClient(target, account.token, local.port);
    const controller = new AbortController();
    const response = await request(`${target.base}/slow`, { headers: { host: started.host }, signal: controller.signal });
    assert.equal(response.statusCode, 200);
    await waitFor(() => sessionOf(target, started.subdomain).streams.size === 1, 2_000, 'the stream');
    controller.abort();
    await waitFor(() => localClosed, 3_000, 'the local response to be cancelled');
    await waitFor(() => started.client.activeStreams === 0 && sessionOf(target, started.subdomain).streams.size === 0, 2_000, 'both ends to drop the stream');
    await started.client.close();
    await local.close();
  });

  test('a tunnel killed mid-response cuts the public connection instead of hanging', async () => {
    const local = await startLocal((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('first part of a long answer\n');
    });
    const started = await startClient(target, account.token, local.port);
    const response = await request(`${target.base}/stream`, { headers: { host: started.host } });
    assert.equal(response.statusCode, 200);
    const reading = (async () => {
      let text = '';
      for await (const chunk of response.body) text += chunk.toString();
      return text;
    })();
    await waitFor(() => sessionOf(target, started.subdomain).streams.size === 1, 2_000, 'the stream');
    // Kill the tunnel's WebSocket from the edge's side, as a network failure would.
    sessionOf(target, started.subdomain).connection.ws!.close();
    await assert.rejects(reading);
    await started.client.close();
    await local.close();
  });
});

describe('bounded memory with slow peers', () => {
  let target: TestEdge;
  let account: TestAccount;
  const window = DEFAULT_SETTINGS.streamWindow;

  before(async () => {
    target = await startEdge();
    account = await createAccount(target, 'PRO');
  });

  after(async () => {
    await target.close();
  });

  test('a local server that stops reading an upload: the edge holds at most about a window', async () => {
    let resumeReading: () => void = () => {};
    const reading = new Promise<void>((resolve) => (resumeReading = resolve));
    const local = await startLocal((req, res) => {
      req.pause();
      void reading.then(() => {
        const hash = createHash('sha256');
        let length = 0;
        req.on('data', (chunk: Buffer) => {
          hash.update(chunk);
          length += chunk.length;
        });
        req.on('end', () => res.end(JSON.stringify({ length, hash: hash.digest('hex') })));
        req.resume();
      });
    });
    const started = await startClient(target, account.token, local.port);
    const total = 32 * 1024 * 1024;
    const chunk = Buffer.alloc(64 * 1024, 7);
    const expected = createHash('sha256');
    for (let sent = 0; sent < total; sent += chunk.length) expected.update(chunk);
    const upload = request(`${target.base}/upload`, {
      method: 'POST',
      headers: { host: started.host, 'content-length': String(total) },
      body: Readable.from(
        (function* () {
          for (let sent = 0; sent < total; sent += chunk.length) yield chunk;
        })(),
      ),
    });
    let peak = 0;
    const sampler = setInterval(() => {
      const memory = sessionOf(target, started.subdomain).memory();
      peak = Math.max(peak, memory.requestBytes + memory.frameBytes);
    }, 5);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    resumeReading();
    const response = await upload;
    const result = JSON.parse(await response.body.text());
    clearInterval(sampler);
    assert.equal(result.length, total);
    assert.equal(result.hash, expected.digest('hex'));
    // Credit stops the edge at its window; one socket read may land after the pause.
    assert.ok(peak <= window + 1024 * 1024, `edge held ${peak} bytes of request body`);
    await started.client.close();
    await local.close();
  });

  test('a public client that stops reading a download: edge and client hold at most about a window', async () => {
    const total = 32 * 1024 * 1024;
    const body = Buffer.alloc(total, 3);
    const local = await startLocal((_req, res) => {
      res.setHeader('content-length', total);
      res.end(body);
    });
    const started = await startClient(target, account.token, local.port);
    const response = await request(`${target.base}/download`, { headers: { host: started.host } });
    // Do not read for a while: everything between the local server and us backs up.
    let peak = 0;
    const sampler = setInterval(() => {
      const memory = sessionOf(target, started.subdomain).memory();
      peak = Math.max(peak, memory.responseBytes + memory.frameBytes);
    }, 5);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    let length = 0;
    for await (const chunk of response.body) length += (chunk as Buffer).length;
    clearInterval(sampler);
    assert.equal(length, total);
    assert.ok(peak <= window + 1024 * 1024, `edge held ${peak} bytes of response body`);
    await started.client.close();
    await local.close();
  });
});
