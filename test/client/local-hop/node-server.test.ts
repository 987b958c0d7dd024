/**
 * The local hop against Node's own http server (a server nobody here wrote): keep-alive reuse counted on
 * the server's side, reason phrases and field bytes both ways, 1xx, 100-continue accepted and refused,
 * trailers both ways, HEAD, 204 and 304, an upgrade handed over with the bytes read past its head, an
 * early answer while the body still streams, abort, and `localhost` reaching a server on ::1 only.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { LocalHop, type TargetPool } from '../../../src/client/local-hop/pool.js';
import { ResponseFraming } from '../../../src/client/local-hop/exchange.js';
import { localTarget } from '../../../src/client/routes.js';
import { readBody, waitFor } from '../../helpers.js';
import { field, Recorder, send } from './record.js';

const UTF8_VALUE = Buffer.from('café ✓', 'utf8').toString('latin1');

interface Seen {
  method: string;
  rawHeaders: string[];
  body: Buffer;
  trailers: string[];
}

let server: Server;
let connections = 0;
const seen: Seen[] = [];
let hop: LocalHop;
let pool: TargetPool;

function route(req: IncomingMessage, res: ServerResponse): void {
  const path = (req.url ?? '/').split('?')[0]!;
  if (path === '/early') {
    // Answers before reading the body; Node reads and drops the rest, keeping the connection.
    res.end('early');
    return;
  }
  void readBody(req).then((body) => {
    seen.push({ method: req.method!, rawHeaders: req.rawHeaders, body, trailers: req.rawTrailers });
    if (path === '/bytes') {
      // Node writes a head's characters as UTF-8: response bytes beyond ASCII are raw-server.test.ts's.
      res.writeHead(299, 'Quite Fine', [['X-MiXeD-Case', 'v'], ['x-lower', 'w'], ['set-cookie', 'a=1'], ['Set-Cookie', 'b=2'], ['Content-Length', '2']]);
      res.end('ok');
    } else if (path === '/interim') {
      res.writeProcessing();
      res.writeEarlyHints({ link: '</style.css>; rel=preload; as=style' });
      res.end('final');
    } else if (path === '/trailers') {
      res.writeHead(200, { 'Transfer-Encoding': 'chunked', Trailer: 'X-Resp-Sum' });
      res.write('chunk-one ');
      res.addTrailers([['X-Resp-Sum', 'r1'], ['x-second', 'r2']]);
      res.end('chunk-two');
    } else if (path === '/204') {
      res.writeHead(204).end();
    } else if (path === '/304') {
      res.writeHead(304, { ETag: '"v1"' }).end();
    } else if (path === '/slow') {
      res.writeHead(200, { 'Content-Length': String(1024 * 1024) });
      res.write(Buffer.alloc(64 * 1024, 0x61));
    } else {
      const text = `${req.method === 'HEAD' ? 'GET' : req.method} ${path}`;
      res.setHeader('Content-Length', String(text.length));
      res.end(text);
    }
  });
}

before(async () => {
  server = createServer(route);
  server.on('connection', () => connections++);
  server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => {
    if (req.headers['x-allow'] === 'yes') {
      res.writeContinue();
      route(req, res);
      return;
    }
    seen.push({ method: req.method!, rawHeaders: req.rawHeaders, body: Buffer.alloc(0), trailers: [] });
    res.writeHead(417, 'Expectation Failed', { 'Content-Length': '7' }).end('refused');
  });
  server.on('upgrade', (req: IncomingMessage, socket: Socket) => {
    // The 101 and the new protocol's first bytes in one write: they arrive together, past the head.
    socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: ${req.headers.upgrade}\r\nConnection: Upgrade\r\n\r\nHELLO-FROM-SERVER`);
    socket.on('data', (chunk: Buffer) => socket.write(Buffer.concat([Buffer.from('echo:'), chunk])));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const target = localTarget((server.address() as AddressInfo).port, '127.0.0.1');
  hop = new LocalHop([target]);
  pool = hop.pool(target);
});

after(async () => {
  hop.close();
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

const HOST = ['Host', 'app.example'];

describe('keep-alive', () => {
  test('sequential requests share one connection, counted by the server', async () => {
    const before = connections;
    const opened = pool.stats.opened;
    for (let i = 0; i < 20; i++) {
      const outcome = await send(pool, { method: i % 2 === 0 ? 'GET' : 'POST', target: `/n${i}`, fields: HOST }, i % 2 === 0 ? null : 'x'.repeat(1024));
      assert.equal(outcome.head?.status, 200);
      assert.equal(outcome.body.toString(), `${i % 2 === 0 ? 'GET' : 'POST'} /n${i}`);
    }
    assert.ok(connections - before <= 1, `${connections - before} connections for 20 sequential requests`);
    assert.equal(pool.stats.opened - opened, connections - before, 'the pool counts what the server sees');
  });

  test('concurrent requests open connections up to the bound, then reuse them', async () => {
    const small = new LocalHop([pool.target], { connectionsPerTarget: 4 });
    const bounded = small.pool(pool.target);
    const before = connections;
    try {
      const outcomes = await Promise.all(Array.from({ length: 24 }, (_, i) => send(bounded, { method: 'GET', target: `/c${i}`, fields: HOST })));
      for (const [i, outcome] of outcomes.entries()) assert.equal(outcome.body.toString(), `GET /c${i}`);
      assert.ok(connections - before <= 4, `${connections - before} connections, the bound is 4`);
      assert.equal(bounded.stats.queued, 0);
    } finally {
      small.close();
    }
  });
});

test('reason phrase and field names as sent; request value bytes (UTF-8, Latin-1) reach the server exactly', async () => {
  const fields = ['Host', 'app.example', 'X-MiXeD', 'Keep', 'X-Latin', 'caf\xe9', 'X-Utf8', UTF8_VALUE, 'x-dup', '1', 'X-Dup', '2'];
  const outcome = await send(pool, { method: 'GET', target: '/bytes?q=1', fields });
  const head = outcome.head!;
  assert.equal(head.status, 299);
  assert.equal(head.reason, 'Quite Fine');
  assert.deepEqual(head.fields.slice(0, 8), ['X-MiXeD-Case', 'v', 'x-lower', 'w', 'set-cookie', 'a=1', 'Set-Cookie', 'b=2']);
  assert.equal(outcome.framing, ResponseFraming.LENGTH);
  assert.equal(outcome.contentLength, 2);
  const request = seen.at(-1)!;
  assert.deepEqual(request.rawHeaders, fields, 'the server read the fields in their order, case and bytes');
});

test('102 and 103 come before the final head, each with its fields', async () => {
  const outcome = await send(pool, { method: 'GET', target: '/interim', fields: HOST });
  assert.deepEqual(outcome.interims.map((head) => [head.status, head.reason]), [[102, 'Processing'], [103, 'Early Hints']]);
  assert.equal(field(outcome.interims[1]!.fields, 'link'), '</style.css>; rel=preload; as=style');
  assert.deepEqual(outcome.events, ['interim', 'interim', 'head', 'body', 'end']);
  assert.equal(outcome.body.toString(), 'final');
});

describe('Expect: 100-continue', () => {
  test('the server refuses with 417 before the body: the body is never sent', async () => {
    const before = seen.length;
    const outcome = await send(pool, { method: 'PUT', target: '/upload', fields: [...HOST, 'Content-Length', '5', 'Expect', '100-continue'] }, 'hello');
    assert.equal(outcome.head?.status, 417);
    assert.equal(outcome.head?.reason, 'Expectation Failed');
    assert.equal(outcome.body.toString(), 'refused');
    assert.deepEqual(outcome.interims, []);
    assert.equal(seen.length, before + 1);
    assert.equal(field(seen.at(-1)!.rawHeaders, 'expect'), '100-continue', 'Expect reached the server');
    // The next request works (on a fresh connection: the refused body's bytes never followed the head).
    const next = await send(pool, { method: 'GET', target: '/after-417', fields: HOST });
    assert.equal(next.body.toString(), 'GET /after-417');
  });

  test('the server says 100: the interim head comes, then the body goes', async () => {
    const outcome = await send(pool, { method: 'PUT', target: '/upload', fields: [...HOST, 'Expect', '100-continue', 'X-Allow', 'yes'] }, null, (exchange) => {
      exchange.write(Buffer.from('streamed '));
      exchange.write(Buffer.from('body'));
      exchange.end();
    });
    assert.deepEqual(outcome.interims.map((head) => head.status), [100]);
    assert.equal(outcome.head?.status, 200);
    assert.equal(seen.at(-1)!.body.toString(), 'streamed body');
  });
});

describe('trailers', () => {
  test('request trailers follow a chunked body of unknown length', async () => {
    await send(pool, { method: 'POST', target: '/t', fields: HOST }, 'first ', (exchange) => {
      exchange.write(Buffer.from('second'));
      exchange.end(['X-Checksum', 'abc', 'x-other', 'caf\xe9']);
    });
    const request = seen.at(-1)!;
    assert.equal(request.body.toString(), 'first second');
    assert.equal(field(request.rawHeaders, 'transfer-encoding'), 'chunked');
    assert.deepEqual(request.trailers, ['X-Checksum', 'abc', 'x-other', 'caf\xe9']);
  });

  test('response trailers come after the body', async () => {
    const outcome = await send(pool, { method: 'GET', target: '/trailers', fields: HOST });
    assert.equal(outcome.framing, ResponseFraming.CHUNKED);
    assert.equal(outcome.body.toString(), 'chunk-one chunk-two');
    assert.deepEqual(outcome.trailers, ['X-Resp-Sum', 'r1', 'x-second', 'r2']);
    assert.deepEqual(outcome.events, ['head', 'body', 'trailers', 'end']);
  });
});

test('HEAD, 204 and 304 have no body whatever their fields say, and keep the connection', async () => {
  const opened = pool.stats.opened;
  const head = await send(pool, { method: 'HEAD', target: '/h', fields: HOST });
  assert.equal(head.framing, ResponseFraming.NONE);
  assert.equal(field(head.head!.fields, 'content-length'), '6', 'the length a GET would have');
  assert.equal(head.body.length, 0);
  const noContent = await send(pool, { method: 'GET', target: '/204', fields: HOST });
  assert.equal(noContent.head?.status, 204);
  assert.equal(noContent.framing, ResponseFraming.NONE);
  const notModified = await send(pool, { method: 'GET', target: '/304', fields: HOST });
  assert.equal(notModified.head?.status, 304);
  assert.equal(notModified.framing, ResponseFraming.NONE);
  const get = await send(pool, { method: 'GET', target: '/h', fields: HOST });
  assert.equal(get.body.toString(), 'GET /h');
  assert.ok(pool.stats.opened - opened <= 1, 'one connection for the four');
});

test('an upgrade: the 101 and the socket are handed over with the bytes read past the head', async () => {
  const outcome = await send(pool, { method: 'GET', target: '/ws', fields: [...HOST, 'Connection', 'Upgrade', 'Upgrade', 'echo-protocol'], upgrade: true });
  assert.equal(outcome.head?.status, 101);
  assert.equal(field(outcome.head!.fields, 'upgrade'), 'echo-protocol');
  const { socket, leftover } = outcome.upgrade!;
  assert.equal(leftover.toString(), 'HELLO-FROM-SERVER', 'the bytes that came with the head');
  let received = '';
  socket.on('data', (chunk: Buffer) => (received += chunk.toString()));
  socket.resume();
  socket.write('ping');
  await waitFor(() => received === 'echo:ping', 5_000, 'the echo');
  socket.destroy();
  assert.equal(pool.stats.open, pool.stats.idle, 'the upgraded connection left the pool');
});

test('an early answer while the body still streams: the body goes on, then the connection is reused', async () => {
  const opened = pool.stats.opened;
  const recorder = new Recorder();
  const exchange = pool.request({ method: 'POST', target: '/early', fields: HOST }, Buffer.from('part one, '), false, recorder);
  const outcome = await recorder.done;
  assert.equal(outcome.body.toString(), 'early');
  assert.equal(outcome.ended, true);
  exchange.write(Buffer.from('part two'));
  exchange.end();
  const next = await send(pool, { method: 'GET', target: '/after-early', fields: HOST });
  assert.equal(next.body.toString(), 'GET /after-early');
  assert.ok(pool.stats.opened - opened <= 1, 'the connection was used again');
});

test('abort in the middle of a body closes that connection; the next request works', async () => {
  const recorder = new Recorder();
  const exchange = pool.request({ method: 'GET', target: '/slow', fields: HOST }, null, true, recorder);
  let closedByServer = false;
  server.once('request', (req: IncomingMessage) => req.socket.once('close', () => (closedByServer = true)));
  await waitFor(() => recorder.bodyBytes > 0, 5_000, 'the first body bytes');
  exchange.abort();
  await waitFor(() => closedByServer, 5_000, 'the server to see the connection close');
  assert.equal(recorder.outcome.ended, false);
  assert.equal(recorder.outcome.error, null, 'an aborted exchange reports nothing');
  const next = await send(pool, { method: 'GET', target: '/after-abort', fields: HOST });
  assert.equal(next.body.toString(), 'GET /after-abort');
});

test('localhost reaches a server that listens on ::1 only', async () => {
  const v6 = createServer((_req, res) => res.end('v6'));
  v6.listen(0, '::1');
  await once(v6, 'listening');
  const target = localTarget((v6.address() as AddressInfo).port);
  const local = new LocalHop([target]);
  try {
    const outcome = await send(local.pool(target), { method: 'GET', target: '/', fields: HOST });
    assert.equal(outcome.error, null, outcome.error?.message);
    assert.equal(outcome.body.toString(), 'v6');
  } finally {
    local.close();
    v6.closeAllConnections();
    v6.close();
  }
});
