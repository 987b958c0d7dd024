/**
 * After a public request with a chunked body (Transfer-Encoding: chunked, as undici and Node send a
 * stream body) through a tunnel, the next request on the same keep-alive connection was reset.
 *
 * Root cause (ours, not uWS's: a bare uWS 20.30 app that pauses and resumes keeps the connection): a
 * body larger than the stream's credit pauses the public socket; uWS goes on parsing the bytes it had
 * already read, so the body's last chunk (the empty one after `0\r\n\r\n`) arrived while paused, and
 * the stream resumed only a request still in progress. The socket stayed paused, the answer was held
 * until uWS's 10 s idle timeout and the connection was closed under the next request. Same when the
 * local app answered before reading the whole body. Bodies over the 256 KiB window show it.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { Agent, request } from 'undici';
import { createAccount, echo, readBody, startClient, startEdge, startLocal, type LocalServer, type TestEdge } from '../helpers.js';

let edge: TestEdge;
let local: LocalServer;
let host: string;
let stopClient: () => Promise<void>;

before(async () => {
  edge = await startEdge();
  local = await startLocal((req, res) => {
    // /early answers before reading the body (as an app refusing an upload does); the rest echo.
    if (req.url!.startsWith('/early')) res.end('early');
    else if (req.url!.startsWith('/count')) void readBody(req).then((body) => res.end(`read ${body.length}`));
    else echo(req, res);
  });
  const account = await createAccount(edge);
  const started = await startClient(edge, account.token, local.port);
  host = started.host;
  stopClient = () => started.client.close();
});

after(async () => {
  await stopClient();
  await local.close();
  await edge.close();
});

/** Reads from `socket` until `count` complete responses (each with a Content-Length) arrived, or it closes. */
async function readResponses(socket: Socket, count: number, guardMs = 5_000): Promise<{ bodies: string[]; closed: string | null }> {
  let buffer = Buffer.alloc(0);
  const bodies: string[] = [];
  let closed: string | null = null;
  await new Promise<void>((resolve) => {
    const guard = setTimeout(resolve, guardMs);
    const finish = (): void => {
      clearTimeout(guard);
      resolve();
    };
    socket.on('data', (data: Buffer) => {
      buffer = Buffer.concat([buffer, data]);
      for (;;) {
        const end = buffer.indexOf('\r\n\r\n');
        if (end < 0) break;
        const head = buffer.subarray(0, end).toString('latin1');
        const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
        if (buffer.length < end + 4 + length) break;
        bodies.push(buffer.subarray(end + 4, end + 4 + length).toString('utf8'));
        buffer = buffer.subarray(end + 4 + length);
      }
      if (bodies.length >= count) finish();
    });
    socket.on('error', (error: NodeJS.ErrnoException) => {
      closed = error.code ?? error.message;
      finish();
    });
    socket.on('close', () => {
      closed ??= 'closed';
      finish();
    });
  });
  return { bodies, closed };
}

describe('issue 12: a chunked upload leaves its keep-alive connection usable', () => {
  test('raw bytes: a chunked POST in three writes, then a GET on the same connection', async () => {
    const socket = connect(edge.port, '127.0.0.1');
    const responses = readResponses(socket, 2);
    socket.write(`POST /upload HTTP/1.1\r\nHost: ${host}\r\nTransfer-Encoding: chunked\r\n\r\n`);
    await sleep(30);
    socket.write('5\r\nhello\r\n');
    await sleep(30);
    socket.write('0\r\n\r\n');
    await sleep(200);
    socket.write(`GET /next HTTP/1.1\r\nHost: ${host}\r\n\r\n`);
    const { bodies, closed } = await responses;
    socket.destroy();
    assert.equal(bodies.length, 2, `two answers, got ${bodies.length} (connection: ${closed})`);
    assert.equal(JSON.parse(bodies[0]!).body, 'hello');
    assert.equal(JSON.parse(bodies[1]!).url, '/next');
  });

  test('raw bytes: a chunked POST in one write, then a GET', async () => {
    const socket = connect(edge.port, '127.0.0.1');
    const responses = readResponses(socket, 2);
    socket.write(`POST /upload HTTP/1.1\r\nHost: ${host}\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n`);
    await sleep(200);
    socket.write(`GET /next HTTP/1.1\r\nHost: ${host}\r\n\r\n`);
    const { bodies, closed } = await responses;
    socket.destroy();
    assert.equal(bodies.length, 2, `two answers, got ${bodies.length} (connection: ${closed})`);
    assert.equal(JSON.parse(bodies[1]!).url, '/next');
  });

  for (const path of ['/count', '/early']) {
    for (const chunked of [true, false]) {
      test(`undici: 1 MiB ${chunked ? 'chunked' : 'Content-Length'} uploads to ${path}, each followed by a GET on the same connection`, async () => {
        const size = 1024 * 1024;
        const piece = Buffer.alloc(64 * 1024, 0x61);
        const agent = new Agent({ connections: 1, pipelining: 1 });
        try {
          for (let round = 0; round < 3; round++) {
            const upload = await request(`http://127.0.0.1:${edge.port}${path}/${round}`, {
              method: 'POST',
              headers: chunked ? { host } : { host, 'content-length': String(size) },
              body: Readable.from(Array.from({ length: size / piece.length }, () => piece)),
              dispatcher: agent,
            });
            assert.equal(upload.statusCode, 200);
            assert.equal(await upload.body.text(), path === '/early' ? 'early' : `read ${size}`);
            const next = await request(`http://127.0.0.1:${edge.port}/next/${round}`, { headers: { host }, dispatcher: agent });
            assert.equal(next.statusCode, 200);
            assert.equal(((await next.body.json()) as { url: string }).url, `/next/${round}`);
          }
        } finally {
          await agent.close();
        }
      });
    }
  }

  test('undici: small stream-body uploads then GETs on one pooled connection', async () => {
    const agent = new Agent({ connections: 1, pipelining: 1 });
    try {
      for (let round = 0; round < 5; round++) {
        const upload = await request(`http://127.0.0.1:${edge.port}/up/${round}`, {
          method: 'POST',
          headers: { host },
          body: Readable.from([Buffer.from('part one, '), Buffer.from('part two')]),
          dispatcher: agent,
        });
        assert.equal(upload.statusCode, 200);
        assert.equal(((await upload.body.json()) as { body: string }).body, 'part one, part two');
        const next = await request(`http://127.0.0.1:${edge.port}/next/${round}`, { headers: { host }, dispatcher: agent });
        assert.equal(next.statusCode, 200);
        assert.equal(((await next.body.json()) as { url: string }).url, `/next/${round}`);
      }
    } finally {
      await agent.close();
    }
  });
});
