/**
 * Issue 24, uploads: a keep-alive request's Content-Length body is read straight from the socket's reads
 * (src/http1/server.ts, `readBody`), llhttp parsing only the head (`Http1Parser.takeBodyOutside`) and the
 * bytes after the body. Node's binding would copy every body piece before JavaScript saw it; this way a
 * sink that frames the bytes (`takesViews`) makes the only copy. What that relies on, pinned here: the
 * body counted down exactly, whatever read boundaries cut the bytes, the next pipelined request parsed
 * from where the body ends; views handed only to sinks that take them, every other keeper (a sink that
 * keeps chunks, a body that came before its sink) getting bytes of its own that later reads into the
 * shared buffer do not overwrite; a paused body resumed intact; a body cut short aborted, never
 * completed. And through a real tunnel: bodies of every size around the frame limit arrive byte for
 * byte, pipelined behind and before other requests.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { request } from 'undici';
import { ALL, Http1ParseError, Http1Parser, MessageKind, type MessageHead } from '../../src/http1/parser.js';
import { ServerConnections, type ExchangeSink, type ServerExchange } from '../../src/http1/server.js';
import { SHARED_READ_BYTES } from '../../src/http1/shared-reads.js';
import { call, createAccount, readBody, startClient, startEdge, startLocal, waitFor, type LocalServer, type TestAccount, type TestEdge } from '../helpers.js';

/** `size` bytes in which every position differs from its neighbours' (a shifted piece shows). */
function patterned(size: number, seed: number): Buffer {
  const bytes = Buffer.allocUnsafe(size);
  for (let i = 0; i < size; i++) bytes[i] = (i * 31 + seed * 7 + (i >> 8)) & 0xff;
  return bytes;
}

const sha = (bytes: Buffer): string => createHash('sha256').update(bytes).digest('hex');
const pause = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

interface Seen {
  target: string;
  body: Buffer;
  /** Every chunk the sink was given was a view of a 64 KiB buffer (the listener's shared reads). */
  viewsOfSharedBuffer: boolean;
  aborted: boolean;
}

/**
 * A server whose sinks are chosen by the target: `/views` takes views and copies them itself, `/keep`
 * keeps the chunks it is given, `/late` attaches its sink only after 30 ms (the body waits in the
 * exchange), `/slow` pauses the body after each chunk for 20 ms. Each answers its body's length.
 */
async function start(): Promise<{ port: number; seen: Seen[]; close(): Promise<void> }> {
  const seen: Seen[] = [];
  const connections = new ServerConnections({
    onRequest(exchange) {
      const record: Seen = { target: exchange.head.target, body: Buffer.alloc(0), viewsOfSharedBuffer: true, aborted: false };
      seen.push(record);
      const sink = sinkFor(exchange, record);
      if (record.target.startsWith('/late')) setTimeout(() => exchange.attach(sink), 30);
      else exchange.attach(sink);
    },
    refusal: (error) => ({ status: error.status, fields: [], body: `${error.code}\n` }),
  });
  const server: Server = createServer({ allowHalfOpen: true }, (socket) => connections.accept(socket, '127.0.0.1'));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    port: (server.address() as AddressInfo).port,
    seen,
    async close() {
      connections.destroyAll();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

function sinkFor(exchange: ServerExchange, record: Seen): ExchangeSink {
  const chunks: Buffer[] = [];
  const finish = (): void => {
    record.body = Buffer.concat(chunks);
    exchange.respond(200, 'OK', ['X-Target', record.target], String(record.body.byteLength));
  };
  const takesViews = record.target.startsWith('/views');
  return {
    takesViews,
    onRequestBody(chunk, last) {
      if (chunk !== null && chunk.byteLength > 0) {
        if (chunk.buffer.byteLength !== SHARED_READ_BYTES) record.viewsOfSharedBuffer = false;
        chunks.push(takesViews ? Buffer.from(chunk) : chunk);
        if (record.target.startsWith('/slow') && !last) {
          exchange.pauseBody();
          setTimeout(() => exchange.resumeBody(), 20);
        }
      }
      // Later reads into the shared buffer (the next request, other connections) happen before the
      // kept chunks are joined.
      if (last) setTimeout(finish, 10);
    },
    onAborted() {
      record.aborted = true;
    },
  };
}

async function open(port: number): Promise<{ socket: Socket; text: () => string; closed: Promise<unknown> }> {
  const socket = connect(port, '127.0.0.1');
  socket.setNoDelay(true);
  await once(socket, 'connect');
  let text = '';
  socket.on('data', (chunk: Buffer) => (text += chunk.toString('latin1')));
  socket.on('error', () => undefined);
  return { socket, text: () => text, closed: once(socket, 'close') };
}

const post = (target: string, body: Buffer): Buffer => Buffer.concat([Buffer.from(`POST ${target} HTTP/1.1\r\nHost: x\r\nContent-Length: ${body.byteLength}\r\n\r\n`), body]);
const get = (target: string, extra = ''): Buffer => Buffer.from(`GET ${target} HTTP/1.1\r\nHost: x\r\n${extra}\r\n`);
const targetsAnswered = (text: string): string[] => [...text.matchAll(/X-Target: (\S+)/g)].map((match) => match[1]!);

describe('issue 24: llhttp stops at a head whose body the caller reads (Node\'s binding)', () => {
  /** A parser whose handler takes the body of every head with a Content-Length, and logs what it is told. */
  function parserTakingBodies(): { parser: Http1Parser; log: string[] } {
    const log: string[] = [];
    const parser: Http1Parser = new Http1Parser(MessageKind.REQUEST, {
      onHead(head: MessageHead) {
        log.push(`head ${head.method} ${head.target} upgrade=${head.upgrade} keepAlive=${head.keepAlive}`);
        if (head.fields.some((field, i) => i % 2 === 0 && field.toLowerCase() === 'content-length')) parser.takeBodyOutside();
        return false;
      },
      onBody: (chunk) => log.push(`body ${chunk.toString('latin1')}`),
      onTrailers: () => log.push('trailers'),
      onComplete: () => log.push('complete'),
    });
    return { parser, log };
  }

  test('execute returns where the body begins, tells nothing of the body, and parses the next message from after it', () => {
    const { parser, log } = parserTakingBodies();
    const head = 'POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n';
    const wire = Buffer.from(`${head}helloGET /b HTTP/1.1\r\nHost: x\r\n\r\n`);
    assert.equal(parser.execute(wire), head.length);
    assert.equal(parser.bodyOutside, true);
    assert.deepEqual(log, ['head POST /a upgrade=false keepAlive=true']);
    assert.equal(parser.execute(wire.subarray(head.length + 5)), ALL);
    assert.equal(parser.bodyOutside, false);
    assert.deepEqual(log, ['head POST /a upgrade=false keepAlive=true', 'head GET /b upgrade=false keepAlive=true', 'complete']);
    parser.close();
  });

  test('framing llhttp refuses is refused before the head is given (no body is taken on a broken head)', () => {
    for (const fields of ['Content-Length: 3\r\nTransfer-Encoding: chunked', 'Content-Length: 3\r\nContent-Length: 3', 'Content-Length: 3x']) {
      const { parser, log } = parserTakingBodies();
      const result = parser.execute(Buffer.from(`POST / HTTP/1.1\r\nHost: x\r\n${fields}\r\n\r\nabc`));
      assert.ok(result instanceof Http1ParseError, fields);
      assert.equal(result.status, 400);
      assert.deepEqual(log, [], fields);
      parser.close();
    }
  });
});

describe('issue 24: a Content-Length body read from the socket, one copy', { timeout: 60_000 }, () => {
  let server: Awaited<ReturnType<typeof start>>;
  before(async () => {
    server = await start();
  });
  after(() => server.close());

  test('a POST and a GET in one segment, split at boundaries in and around the body, keep their bytes and order', async () => {
    const body = patterned(300, 1);
    for (const sink of ['/views', '/keep']) {
      const whole = Buffer.concat([post(`${sink}-post`, body), get(`${sink}-get`, 'Connection: close\r\n')]);
      const headEnd = whole.indexOf('\r\n\r\n') + 4;
      const bodyEnd = headEnd + body.byteLength;
      // Whole; inside the head; at its end; one byte into the body; inside; one before and at its end; inside the GET.
      const splits = [whole.byteLength, 10, headEnd - 1, headEnd, headEnd + 1, headEnd + 150, bodyEnd - 1, bodyEnd, bodyEnd + 1, bodyEnd + 20];
      for (const split of splits) {
        const before = server.seen.length;
        const client = await open(server.port);
        client.socket.write(whole.subarray(0, split));
        await pause(15);
        // Another connection's read lands in the shared buffer in between.
        const other = await open(server.port);
        other.socket.write(post('/views-other', patterned(400, 9)));
        await pause(15);
        if (split < whole.byteLength) client.socket.write(whole.subarray(split));
        await client.closed;
        other.socket.destroy();
        const mine = server.seen.slice(before).filter((record) => record.target === `${sink}-post` || record.target === `${sink}-get`);
        assert.deepEqual(mine.map((record) => record.target), [`${sink}-post`, `${sink}-get`], `split at ${split}`);
        assert.equal(sha(mine[0]!.body), sha(body), `${sink}: the body as sent, split at ${split}`);
        assert.equal(mine[1]!.body.byteLength, 0);
        assert.deepEqual(targetsAnswered(client.text()), [`${sink}-post`, `${sink}-get`], `answers in order, split at ${split}`);
      }
    }
  });

  test('a sink that takes views gets the shared read buffer itself; others get bytes of their own', async () => {
    const body = patterned(5000, 2);
    const client = await open(server.port);
    client.socket.write(Buffer.concat([post('/views-shared', body), post('/keep-own', body), post('/late-own', body), get('/end', 'Connection: close\r\n')]));
    await client.closed;
    const byTarget = new Map(server.seen.map((record) => [record.target, record]));
    assert.equal(byTarget.get('/views-shared')!.viewsOfSharedBuffer, true, 'no copy made for a sink that frames the bytes');
    assert.equal(byTarget.get('/keep-own')!.viewsOfSharedBuffer, false);
    assert.equal(byTarget.get('/late-own')!.viewsOfSharedBuffer, false);
    for (const target of ['/views-shared', '/keep-own', '/late-own']) assert.equal(sha(byTarget.get(target)!.body), sha(body), target);
    assert.deepEqual(targetsAnswered(client.text()), ['/views-shared', '/keep-own', '/late-own', '/end']);
  });

  test('a large body paused by its sink after each read resumes intact, the pipelined request after it parsed', async () => {
    const body = patterned(400 * 1024, 3);
    for (const sink of ['/slow-views', '/slow-keep']) {
      const client = await open(server.port);
      client.socket.write(Buffer.concat([post(sink, body), get(`${sink}-next`, 'Connection: close\r\n')]));
      // Other connections read meanwhile, into the same buffer.
      for (let i = 0; i < 5; i++) {
        const other = await open(server.port);
        other.socket.write(post('/keep-other', patterned(60 * 1024, 10 + i)));
        await pause(10);
        other.socket.destroy();
      }
      await client.closed;
      const record = server.seen.find((entry) => entry.target === sink)!;
      assert.equal(sha(record.body), sha(body), sink);
      assert.deepEqual(targetsAnswered(client.text()), [sink, `${sink}-next`]);
    }
  });

  test('bytes that are not HTTP right after a body read outside get a 400 and the close, not silence', async () => {
    // llhttp kept its `upgrade` flag past the body's head, and Node's binding then reported the error
    // as a short count: the bytes were swallowed, and the connection hung with every request after them.
    const client = await open(server.port);
    client.socket.write(Buffer.concat([post('/views-before-junk', patterned(300, 5)), Buffer.from('junk / HTTP/1.1\r\n\r\n'), get('/after-junk', '')]));
    await client.closed;
    const text = client.text();
    assert.deepEqual(targetsAnswered(text), ['/views-before-junk']);
    assert.match(text, /HTTP\/1\.1 400 Bad Request\r\n/);
    assert.equal(server.seen.some((record) => record.target === '/after-junk'), false, 'nothing after the junk is taken');
  });

  test('a body cut short by the client aborts its request; it never completes', async () => {
    const client = await open(server.port);
    const whole = post('/views-cut', patterned(1000, 4));
    client.socket.write(whole.subarray(0, whole.byteLength - 100));
    await pause(30);
    client.socket.end();
    await client.closed;
    const record = server.seen.find((entry) => entry.target === '/views-cut')!;
    await pause(20);
    assert.equal(record.aborted, true);
    assert.equal(record.body.byteLength, 0, 'no end of the body was reported');
    assert.equal(client.text(), '');
  });
});

describe('issue 24: uploads through a real tunnel, byte for byte', { timeout: 60_000 }, () => {
  let target: TestEdge;
  let owner: TestAccount;
  let local: LocalServer;
  let started: Awaited<ReturnType<typeof startClient>>;
  const received = new Map<string, string>();

  before(async () => {
    target = await startEdge();
    owner = await createAccount(target, 'PRO');
    local = await startLocal((req, res) => {
      void readBody(req).then((body) => {
        received.set(req.url!, sha(body));
        res.end(sha(body));
      });
    });
    started = await startClient(target, owner.token, local.port);
  });
  after(async () => {
    await started.client.close();
    await local.close();
    await target.close();
  });

  test('Content-Length bodies around the frame limit (one OPEN, OPEN and DATA) arrive as sent', async () => {
    for (const size of [1, 1024, 64 * 1024 - 1, 64 * 1024, 64 * 1024 + 1, 200 * 1024, 1024 * 1024]) {
      const body = patterned(size, size);
      const answer = await request(`http://127.0.0.1:${target.port}/size-${size}`, { method: 'POST', headers: { host: started.host }, body });
      assert.equal(answer.statusCode, 200);
      assert.equal(await answer.body.text(), sha(body), `${size} bytes`);
    }
  });

  test('pipelined POSTs and GETs in one segment reach the local server whole and are answered in order', async () => {
    const bodies = [patterned(64 * 1024, 5), patterned(3000, 6), patterned(70 * 1024, 7)];
    const host = started.host;
    const wire = Buffer.concat([
      Buffer.from(`POST /pipe-0 HTTP/1.1\r\nHost: ${host}\r\nContent-Length: ${bodies[0]!.byteLength}\r\n\r\n`),
      bodies[0]!,
      Buffer.from(`GET /pipe-get HTTP/1.1\r\nHost: ${host}\r\n\r\n`),
      Buffer.from(`POST /pipe-1 HTTP/1.1\r\nHost: ${host}\r\nContent-Length: ${bodies[1]!.byteLength}\r\n\r\n`),
      bodies[1]!,
      Buffer.from(`POST /pipe-2 HTTP/1.1\r\nHost: ${host}\r\nContent-Length: ${bodies[2]!.byteLength}\r\nConnection: close\r\n\r\n`),
      bodies[2]!,
    ]);
    const client = await open(target.port);
    client.socket.write(wire);
    await client.closed;
    const answers = [...client.text().matchAll(/\r\n\r\n([0-9a-f]{64})/g)].map((match) => match[1]);
    assert.deepEqual(answers, [sha(bodies[0]!), sha(Buffer.alloc(0)), sha(bodies[1]!), sha(bodies[2]!)]);
    assert.equal(received.get('/pipe-0'), sha(bodies[0]!));
    assert.equal(received.get('/pipe-2'), sha(bodies[2]!));
  });

  test('seeded random pipelines (GET, Content-Length and chunked POSTs) cut at random places arrive whole and in order', async () => {
    // A small deterministic generator: the same 6 connections every run, each 12 requests of random
    // kinds and sizes written in random pieces with pauses between some, so a body's end falls anywhere
    // in a read: inside a head, at a chunk's size line, at the next request's first byte.
    let seed = 24;
    const random = (below: number): number => {
      // mulberry32
      seed = (seed + 0x6d2b79f5) | 0;
      let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return ((t ^ (t >>> 14)) >>> 0) % below;
    };
    for (let connection = 0; connection < 6; connection++) {
      const expected: string[] = [];
      const parts: Buffer[] = [];
      for (let i = 0; i < 12; i++) {
        const kind = random(3);
        const body = kind === 0 ? Buffer.alloc(0) : patterned([0, 1, 17, 4096, 65_535, 65_536, 65_537, 150_000][random(8)]!, connection * 100 + i);
        const target = `/random-${connection}-${i}`;
        const last = i === 11 ? 'Connection: close\r\n' : '';
        if (kind === 0) parts.push(Buffer.from(`GET ${target} HTTP/1.1\r\nHost: ${started.host}\r\n${last}\r\n`));
        else if (kind === 1) parts.push(Buffer.from(`POST ${target} HTTP/1.1\r\nHost: ${started.host}\r\nContent-Length: ${body.byteLength}\r\n${last}\r\n`), body);
        else {
          parts.push(Buffer.from(`POST ${target} HTTP/1.1\r\nHost: ${started.host}\r\nTransfer-Encoding: chunked\r\n${last}\r\n`));
          if (body.byteLength > 0) parts.push(Buffer.from(`${body.byteLength.toString(16)}\r\n`), body, Buffer.from('\r\n'));
          parts.push(Buffer.from('0\r\n\r\n'));
        }
        expected.push(sha(body));
      }
      const wire = Buffer.concat(parts);
      const client = await open(target.port);
      for (let at = 0; at < wire.byteLength; ) {
        const size = 1 + random(random(2) === 0 ? 40 : 90_000);
        client.socket.write(wire.subarray(at, at + size));
        at += size;
        if (random(4) === 0) await pause(2);
      }
      await client.closed;
      const answers = [...client.text().matchAll(/\r\n\r\n([0-9a-f]{64})/g)].map((match) => match[1]);
      assert.deepEqual(answers, expected, `connection ${connection}`);
    }
  });

  test('a body that comes in two reads is gathered straight into its OPEN and captured as sent', async () => {
    let text = '';
    for (let line = 0; text.length < 60 * 1024; line++) text += `line ${String(line).padStart(6, '0')} of a gathered upload\n`;
    const body = Buffer.from(text);
    const client = await open(target.port);
    client.socket.write(`POST /gathered HTTP/1.1\r\nHost: ${started.host}\r\nContent-Length: ${body.byteLength}\r\nConnection: close\r\n\r\n`);
    client.socket.write(body.subarray(0, 1000));
    await pause(30);
    client.socket.write(body.subarray(1000));
    await client.closed;
    assert.match(client.text(), new RegExp(`\r\n\r\n${sha(body)}$`));
    let found: { id: string } | undefined;
    await waitFor(async () => {
      const list = await call(target, 'GET', `/api/v1/requests?subdomain=${started.subdomain}&limit=50`, { token: owner.token });
      found = (list.json.requests as { id: string; path: string }[]).find((entry) => entry.path === '/gathered');
      return found !== undefined;
    }, 5_000, 'the capture of /gathered');
    const detail = await call(target, 'GET', `/api/v1/requests/${found!.id}`, { token: owner.token });
    assert.equal(detail.json.request.body_size, body.byteLength);
    assert.equal(detail.json.request.body, text);
  });
});
