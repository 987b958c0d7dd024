/**
 * HEAD through a tunnel to python3's `http.server` (HTTP/1.0, closes after each answer, a
 * Content-Length and no body) or a Node server: the public client got the head, but the response never
 * completed. The edge ended it with `endWithoutBody(length)`, and uWS 20.30 then still waits for that
 * many body bytes: the response stays pending inside uWS, so the next request on the connection was
 * taken as pipelined and the connection closed unanswered (Node's keep-alive agent: "socket hang up"),
 * and a connection that was to close after the answer never closed. The edge now writes the length
 * field itself and ends with no length argument (src/edge/responses.ts, endHeadResponse).
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { Agent, request as httpRequest } from 'node:http';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import {
  createAccount,
  freePort,
  startClient,
  startEdge,
  startLocal,
  tempDirs,
  waitFor,
  type LocalServer,
  type TestEdge,
} from '../helpers.js';

const FILE = Buffer.alloc(300_000, 0x62);
const makeDir = tempDirs('burrow-head-');

let edge: TestEdge;
let node: LocalServer;
let python: ChildProcess;
let directory: string;
const hosts: Record<'node' | 'python', string> = { node: '', python: '' };
const closers: (() => Promise<void>)[] = [];

async function accepts(port: number): Promise<boolean> {
  const socket = connect(port, '127.0.0.1');
  const connected = await once(socket, 'connect').then(
    () => true,
    () => false,
  );
  socket.destroy();
  return connected;
}

before(async () => {
  directory = makeDir();
  writeFileSync(join(directory, 'file.bin'), FILE);
  const pythonPort = await freePort();
  python = spawn('python3', ['-m', 'http.server', String(pythonPort), '--bind', '127.0.0.1', '--directory', directory], { stdio: 'ignore' });
  await waitFor(() => accepts(pythonPort), 10_000, 'python3 -m http.server');
  node = await startLocal((_req, res) => {
    res.setHeader('content-type', 'application/octet-stream');
    res.setHeader('content-length', FILE.length);
    res.end(FILE);
  });
  edge = await startEdge();
  const account = await createAccount(edge, 'PRO');
  for (const [app, port] of [['node', node.port], ['python', pythonPort]] as const) {
    const started = await startClient(edge, account.token, port);
    hosts[app] = started.host;
    closers.push(() => started.client.close());
  }
});

after(async () => {
  for (const close of closers) await close();
  await edge.close();
  await node.close();
  python.kill();
});

/** Everything read from `socket` until it closes or `guardMs` passes. */
function collect(socket: Socket, guardMs: number): Promise<{ text: string; closed: boolean }> {
  return new Promise((resolve) => {
    let text = '';
    socket.on('data', (chunk: Buffer) => (text += chunk.toString('latin1')));
    socket.on('error', () => {});
    const guard = setTimeout(() => resolve({ text, closed: false }), guardMs);
    socket.on('close', () => {
      clearTimeout(guard);
      resolve({ text, closed: true });
    });
  });
}

describe('issue 12: HEAD through a tunnel completes', () => {
  // The edge's own answers to HEAD ended the same way: the API (writeApiResponse) and the dashboard.
  for (const path of ['/api/v1/tunnels', '/']) {
    test(`the edge's own answer to HEAD ${path} on the API host, then a GET on the same connection`, async () => {
      const socket = connect(edge.port, '127.0.0.1');
      await once(socket, 'connect');
      const reading = collect(socket, 3_000);
      socket.write(`HEAD ${path} HTTP/1.1\r\nHost: localhost\r\n\r\n`);
      await waitFor(() => socket.bytesRead > 0, 5_000, 'the HEAD answer');
      socket.write(`GET ${path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`);
      const { text } = await reading;
      socket.destroy();
      const answers = text.split('HTTP/1.1 ');
      assert.equal(answers.length, 3, `two answers on the connection, got: ${JSON.stringify(text.slice(0, 300))}`);
      const length = /\r\ncontent-length: (\d+)\r\n/i.exec(answers[1]!)?.[1];
      assert.ok(length !== undefined && Number(length) > 0, 'HEAD announces the length a GET has');
      assert.ok(answers[1]!.endsWith('\r\n\r\n'), 'the HEAD answer has no body');
      assert.equal(/\r\ncontent-length: (\d+)\r\n/i.exec(answers[2]!)?.[1], length);
    });
  }

  for (const app of ['python', 'node'] as const) {
    test(`${app}: HEAD, then a GET on the same connection is answered`, async () => {
      const socket = connect(edge.port, '127.0.0.1');
      await once(socket, 'connect');
      const reading = collect(socket, 3_000);
      socket.write(`HEAD /file.bin HTTP/1.1\r\nHost: ${hosts[app]}\r\n\r\n`);
      await waitFor(() => socket.bytesRead > 0, 5_000, 'the HEAD answer');
      socket.write(`GET /file.bin HTTP/1.1\r\nHost: ${hosts[app]}\r\nConnection: close\r\n\r\n`);
      const { text, closed } = await reading;
      socket.destroy();
      const answers = text.split('HTTP/1.1 ');
      assert.equal(answers.length, 3, `two answers on the connection, got: ${JSON.stringify(text.slice(0, 400))}`);
      assert.match(answers[1]!, /^200 OK\r\n/);
      assert.match(answers[1]!, /\r\ncontent-length: 300000\r\n/i);
      assert.ok(answers[1]!.endsWith('\r\n\r\n'), 'the HEAD answer has no body');
      assert.match(answers[2]!, /^200 OK\r\n/);
      assert.ok(answers[2]!.endsWith(FILE.toString('latin1')), 'the GET answer carries the file');
      assert.ok(closed, 'the connection closes after the GET (Connection: close)');
    });

    test(`${app}: Node's keep-alive agent sends HEAD, HEAD, GET on one socket`, async () => {
      const agent = new Agent({ keepAlive: true, maxSockets: 1 });
      try {
        for (const method of ['HEAD', 'HEAD', 'GET']) {
          const { status, length, bytes } = await new Promise<{ status: number; length: string; bytes: number }>((resolve, reject) => {
            const req = httpRequest({ host: '127.0.0.1', port: edge.port, path: '/file.bin', method, agent, headers: { host: hosts[app] } }, (res) => {
              let bytes = 0;
              res.on('data', (chunk: Buffer) => (bytes += chunk.length));
              res.on('end', () => resolve({ status: res.statusCode!, length: String(res.headers['content-length']), bytes }));
              res.on('error', reject);
            });
            req.on('error', reject);
            req.end();
          });
          assert.equal(status, 200);
          assert.equal(length, '300000');
          assert.equal(bytes, method === 'HEAD' ? 0 : FILE.length);
        }
      } finally {
        agent.destroy();
      }
    });
  }
});
