/**
 * Found while benchmarking issue 13: public clients that abandon uploads froze the tunnel's request
 * bodies for good. The client returned the tunnel's connection credit only for request bytes undici
 * read; bytes still waiting in a stream's body buffer when the exchange ended (the public client left,
 * the local server answered without reading) were dropped without their credit. Each abandoned upload
 * leaked up to a stream window, and once the connection window (16 MiB by default) was gone every
 * request with a body through that tunnel hung, while GETs still passed. Here the windows are small, the
 * local server never reads the abandoned uploads, and the tunnel must still carry a body afterwards.
 * (The final request waits out the edge's request timeout: the edge does not read a paused upload's
 * socket, so it notices the public client left only then.)
 */
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { TunnelClient } from '../../src/client/tunnel-client.js';
import { call, createAccount, readBody, startClient, startEdge, startLocal, type LocalServer, type TestEdge } from '../helpers.js';

const STREAM_WINDOW = 128 * 1024;
const CONNECTION_WINDOW = 512 * 1024;
const REQUEST_TIMEOUT_MS = 1_000;

let target: TestEdge;
let local: LocalServer;
let client: TunnelClient;
let host = '';

before(async () => {
  target = await startEdge({ settings: { streamWindow: STREAM_WINDOW, connectionWindow: CONNECTION_WINDOW }, requestTimeoutMs: REQUEST_TIMEOUT_MS });
  const account = await createAccount(target);
  local = await startLocal((req, res) => {
    // /hold never reads its body: the kernel's buffers fill, then undici stops reading the stream's.
    if (req.url === '/hold') return;
    void readBody(req).then((body) => res.end(`read ${body.byteLength}`));
  });
  ({ client, host } = await startClient(target, account.token, local.port));
});

after(async () => {
  await client.close();
  await local.close();
  await target.close();
});

/** A raw public client that starts a 64 MiB upload, writes what the edge takes for `ms`, and leaves. */
async function abandonUpload(ms: number): Promise<void> {
  const socket = connect(target.port, '127.0.0.1');
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  socket.on('error', () => undefined);
  socket.write(`POST /hold HTTP/1.1\r\nHost: ${host}\r\nContent-Length: ${64 * 1024 * 1024}\r\n\r\n`);
  const piece = Buffer.alloc(64 * 1024, 0x61);
  const until = Date.now() + ms;
  while (Date.now() < until) {
    if (!socket.write(piece)) await Promise.race([new Promise((resolve) => socket.once('drain', resolve)), sleep(20)]);
  }
  socket.destroy();
}

test('uploads abandoned while their bytes wait in the client do not use up the connection window', async () => {
  // Each leaves up to a stream window unread in the client: together several connection windows.
  const abandoned = Math.ceil((3 * CONNECTION_WINDOW) / STREAM_WINDOW);
  for (let i = 0; i < abandoned; i++) await abandonUpload(300);
  // A paused upload's socket is not read, so the edge learns that its client left only when the request
  // times out for want of progress; then the stream is reset and the client drops what it holds.
  await sleep(REQUEST_TIMEOUT_MS + 500);
  const body = Buffer.alloc(STREAM_WINDOW * 2, 0x62);
  const result = await Promise.race([
    call(target, 'POST', '/echo', { host, rawBody: body }),
    sleep(5_000).then(() => null),
  ]);
  assert.notEqual(result, null, 'a request body through the tunnel hung: the connection credit was used up');
  assert.equal(result!.status, 200);
  assert.equal(result!.text, `read ${body.byteLength}`);
});
