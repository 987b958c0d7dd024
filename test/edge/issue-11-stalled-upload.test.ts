/**
 * Issue 11 finding 6, as behaviour: a stalled upload holds at most what credit let through plus one
 * socket read of request body at the edge, whatever its declared length; and once the exchange ends
 * (here 504 LOCAL_TIMEOUT) the bytes that waited for credit are let go at once. Before, they stayed
 * referenced by the ended stream for as long as uWS kept the response's callbacks, so edge memory
 * still climbed after the 504s. The figure for 1,000 uploads is measured by bench/edge/stalled-uploads.ts
 * (docs/security.md).
 */
import assert from 'node:assert/strict';
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';
import { after, before, test } from 'node:test';
import type { EdgeHttpStream } from '../../src/edge/http-stream.js';
import { createAccount, startClient, startEdge, waitFor, type TestAccount, type TestEdge } from '../helpers.js';

/** uWebSockets.js reads at most this much from a socket at once. */
const ONE_READ = 512 * 1024;

let target: TestEdge;
let account: TestAccount;

before(async () => {
  target = await startEdge({ requestTimeoutMs: 1_000 });
  account = await createAccount(target, 'PRO');
});

after(async () => {
  await target?.close();
});

test('a stalled 32 MiB upload holds at most one read beyond credit, and lets it go when the stream ends', { timeout: 30_000 }, async () => {
  const stuck: Socket[] = [];
  const local = createServer((socket) => {
    // Accepts and never reads: the local app is stuck.
    socket.pause();
    stuck.push(socket);
  });
  local.listen(0, '127.0.0.1');
  await new Promise((resolve) => local.once('listening', resolve));
  const started = await startClient(target, account.token, (local.address() as AddressInfo).port);
  const uploader = connect(target.port, '127.0.0.1');
  let answer = '';
  uploader.on('data', (chunk: Buffer) => (answer += chunk.toString('latin1')));
  uploader.on('error', () => {});
  try {
    // Larger than what the client and the local socket's kernel buffers take, so the edge itself stalls.
    const size = 32 * 1024 * 1024;
    uploader.write(`POST /upload HTTP/1.1\r\nHost: ${started.host}\r\nContent-Length: ${size}\r\n\r\n`);
    uploader.write(Buffer.alloc(size, 0x61));
    const session = target.edge.registry.session(started.subdomain)!;
    let stream: EdgeHttpStream | undefined;
    await waitFor(
      () => {
        for (const candidate of session.streams.values()) if (candidate.kind === 'http' && candidate.bufferedRequestBytes > 0) stream = candidate as EdgeHttpStream;
        return stream !== undefined;
      },
      10_000,
      'the upload to wait for credit',
    );
    assert.ok(stream!.bufferedRequestBytes <= ONE_READ, `the edge holds ${stream!.bufferedRequestBytes} bytes of one stalled upload`);
    await waitFor(() => stream!.closed, 10_000, 'the 504');
    assert.equal(stream!.bufferedRequestBytes, 0, 'request bytes that will never be sent are let go when the stream ends');
    await waitFor(() => answer.startsWith('HTTP/1.1 504'), 10_000, 'the public client to get 504');
  } finally {
    uploader.destroy();
    for (const socket of stuck) socket.destroy();
    await started.client.close();
    local.close();
  }
});
