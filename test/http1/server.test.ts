/**
 * The server side of src/http1 on real sockets: pipelined requests answered strictly in order whatever
 * order their answers are ready in, the queue bound (reading stops while it is full), keep-alive rules of
 * HTTP/1.0 and 1.1, the writer's framing, interim answers, trailers, the refusal of broken bytes after
 * the answers before them, upgrades handed over with the bytes that followed, an answer before the body
 * closing the connection, and the slowloris and idle timeouts.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { ServerConnections, type ExchangeSink, type ServerExchange, type ServerSettings } from '../../src/http1/server.js';
import { fieldValue } from '../../src/http1/head.js';

interface Harness {
  server: Server;
  port: number;
  connections: ServerConnections;
  seen: string[];
  close(): Promise<void>;
}

/** Answers `/delay/N` after N ms, echoes bodies, streams `/chunked`, and so on; records every target. */
async function start(settings: Partial<ServerSettings> = {}): Promise<Harness> {
  const seen: string[] = [];
  const connections = new ServerConnections(
    {
      onRequest(exchange) {
        seen.push(`${exchange.head.method} ${exchange.head.target}`);
        serve(exchange);
      },
      refusal(error) {
        return { status: error.status, fields: ['Content-Type', 'text/plain'], body: `${error.code}\n` };
      },
    },
    settings,
    50,
  );
  const server = createServer({ allowHalfOpen: true }, (socket) => connections.accept(socket, socket.remoteAddress ?? ''));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    server,
    port: (server.address() as AddressInfo).port,
    connections,
    seen,
    async close() {
      connections.destroyAll();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

class Collector implements ExchangeSink {
  body: Buffer[] = [];
  trailers: string[] = [];
  constructor(private readonly done: (body: Buffer, trailers: string[]) => void) {}
  onRequestBody(chunk: Buffer | null, last: boolean): void {
    if (chunk !== null) this.body.push(chunk);
    if (last) this.done(Buffer.concat(this.body), this.trailers);
  }
  onRequestTrailers(fields: string[]): void {
    this.trailers = fields;
  }
  onAborted(): void {}
}

let aborted = false;

function serve(exchange: ServerExchange): void {
  const target = exchange.head.target;
  const delay = /^\/delay\/(\d+)/.exec(target);
  if (delay !== null) {
    exchange.attach(new Collector(() => undefined));
    setTimeout(() => exchange.respond(200, 'OK', ['X-Target', target], target), Number(delay[1]));
    return;
  }
  if (target === '/corked') {
    // Written corked, as the edge's end-of-turn flush does: the answer ends inside the cork.
    exchange.attach(new Collector(() => {
      exchange.cork();
      exchange.writeHead(200, 'OK', [], 2);
      exchange.write(Buffer.from('ok'));
      exchange.end();
      exchange.uncork();
    }));
    return;
  }
  if (target === '/whole') {
    // Head and body in one write (the edge's small answers), as writeHead + write would put them.
    exchange.attach(new Collector(() => {
      exchange.writeWhole(200, 'OK', ['X-Case', 'Kept'], [Buffer.from('hel'), Buffer.from('lo')], 5);
      exchange.end();
    }));
    return;
  }
  if (target === '/slow-reader') {
    // Pauses reading at every chunk and resumes a moment later, as a stream without credit does.
    let received = 0;
    exchange.attach({
      onRequestBody(chunk, last) {
        received += chunk?.byteLength ?? 0;
        if (last) {
          exchange.respond(200, 'OK', [], String(received));
          return;
        }
        exchange.pauseBody();
        setTimeout(() => exchange.resumeBody(), 2);
      },
      onAborted() {},
    });
    return;
  }
  if (target === '/abandon') {
    exchange.attach({ onRequestBody() {}, onAborted: () => (aborted = true) });
    return;
  }
  if (target === '/echo') {
    exchange.attach(new Collector((body, trailers) => exchange.respond(200, 'Echoed', ['X-Trailers', trailers.join('|')], body)));
    return;
  }
  if (target === '/early') {
    // Answered before the body arrives (as a refused Expect: 100-continue is).
    exchange.attach(new Collector(() => undefined));
    exchange.respond(417, 'Expectation Failed', [], 'no');
    return;
  }
  if (target === '/chunked') {
    exchange.attach(new Collector(() => undefined));
    exchange.writeInterim(103, 'Early Hints', ['Link', '</a.css>; rel=preload']);
    exchange.writeHead(200, 'Fine', ['X-Case', 'Kept'], -1);
    exchange.write(Buffer.from('hello '));
    setTimeout(() => {
      exchange.write(Buffer.from('world'));
      exchange.end(['X-Sum', '42']);
    }, 20);
    return;
  }
  if (target === '/upgrade') {
    const sink: ExchangeSink = {
      onRequestBody() {},
      onAborted() {},
      onSwitched(socket: Socket, head: Buffer) {
        socket.write(`head:${head.toString('latin1')};`);
        socket.on('data', (chunk: Buffer) => socket.write(chunk.toString('latin1').toUpperCase()));
        socket.on('end', () => socket.end());
        socket.resume();
      },
    };
    exchange.attach(sink);
    if (fieldValue(exchange.head.fields, 'x-refuse') !== undefined) exchange.respond(403, 'Forbidden', [], 'refused body');
    else exchange.writeHead(101, 'Switching Protocols', ['Connection', 'Upgrade', 'Upgrade', 'test'], -1);
    return;
  }
  exchange.attach(new Collector(() => exchange.respond(200, 'OK', ['X-Target', target], target)));
}

/** Sends bytes and collects what comes back until the server closes or `ms` passes. */
async function exchangeBytes(port: number, bytes: string, ms = 1_500, then?: (socket: Socket) => void): Promise<{ text: string; closed: boolean }> {
  const socket = connect(port, '127.0.0.1');
  await once(socket, 'connect');
  let text = '';
  let closed = false;
  socket.on('data', (chunk: Buffer) => (text += chunk.toString('latin1')));
  socket.on('end', () => (closed = true));
  socket.on('error', () => undefined);
  socket.write(Buffer.from(bytes, 'latin1'));
  then?.(socket);
  await Promise.race([once(socket, 'end'), new Promise((resolve) => setTimeout(resolve, ms))]);
  socket.destroy();
  return { text, closed };
}

const get = (target: string, extra = ''): string => `GET ${target} HTTP/1.1\r\nHost: x\r\n${extra}\r\n`;

describe('the HTTP/1 server connection', () => {
  let harness: Harness;
  before(async () => {
    harness = await start({ maxPipelined: 4, headTimeoutMs: 300, idleTimeoutMs: 300, lingerMs: 200 });
  });
  after(() => harness.close());

  test('pipelined requests are answered in order, whatever order their answers are ready in', async () => {
    const { text } = await exchangeBytes(harness.port, get('/delay/150') + get('/delay/10') + get('/delay/60') + get('/last', 'Connection: close\r\n'), 2_000);
    const order = [...text.matchAll(/X-Target: (\S+)/g)].map((match) => match[1]);
    assert.deepEqual(order, ['/delay/150', '/delay/10', '/delay/60', '/last']);
    assert.match(text, /Connection: close\r\n\r\n\/last$/);
  });

  test('reading stops while the queue is full: the fifth request is parsed only when the first is answered', async () => {
    harness.seen.length = 0;
    const requests = [get('/delay/300'), get('/delay/1'), get('/delay/1'), get('/delay/1'), get('/after', 'Connection: close\r\n')].join('');
    const socket = connect(harness.port, '127.0.0.1');
    await once(socket, 'connect');
    socket.write(requests);
    await new Promise((resolve) => setTimeout(resolve, 150));
    assert.deepEqual(harness.seen, ['GET /delay/300', 'GET /delay/1', 'GET /delay/1', 'GET /delay/1'], 'four queued, the fifth not read');
    let text = '';
    socket.on('data', (chunk: Buffer) => (text += chunk.toString('latin1')));
    await once(socket, 'end');
    socket.destroy();
    assert.equal(harness.seen.at(-1), 'GET /after');
    assert.equal([...text.matchAll(/HTTP\/1\.1 200/g)].length, 5, text);
  });

  test('HTTP/1.0: closed after the answer, unless it asks to keep the connection', async () => {
    const plain = await exchangeBytes(harness.port, 'GET /a HTTP/1.0\r\n\r\n');
    assert.ok(plain.closed);
    assert.match(plain.text, /^HTTP\/1\.1 200 OK\r\nX-Target: \/a\r\nContent-Length: 2\r\nConnection: close\r\n\r\n\/a$/);
    const kept = await exchangeBytes(harness.port, 'GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /b HTTP/1.0\r\n\r\n');
    assert.match(kept.text, /Connection: keep-alive\r\n\r\n\/aHTTP\/1\.1 200 OK/);
    assert.ok(kept.closed);
  });

  test('a chunked answer with an interim 103 and trailers; no 1xx and no chunks for HTTP/1.0', async () => {
    const { text } = await exchangeBytes(harness.port, get('/chunked', 'Connection: close\r\n'));
    assert.equal(
      text,
      'HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n' +
        'HTTP/1.1 200 Fine\r\nX-Case: Kept\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n6\r\nhello \r\n5\r\nworld\r\n0\r\nX-Sum: 42\r\n\r\n',
    );
    const old = await exchangeBytes(harness.port, 'GET /chunked HTTP/1.0\r\n\r\n');
    assert.equal(old.text, 'HTTP/1.1 200 Fine\r\nX-Case: Kept\r\nConnection: close\r\n\r\nhello world');
  });

  test('a chunked request body with trailers reaches the consumer', async () => {
    const { text } = await exchangeBytes(harness.port, 'POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n3;x=1\r\nabc\r\n0\r\nX-Check: 1\r\n\r\n');
    assert.match(text, /^HTTP\/1\.1 200 Echoed\r\nX-Trailers: X-Check\|1\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc$/);
  });

  test('broken framing after good requests: their answers first, then 400, then the close', async () => {
    const { text, closed } = await exchangeBytes(harness.port, get('/delay/50') + 'POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n' + get('/never'));
    assert.ok(closed);
    assert.match(text, /^HTTP\/1\.1 200 OK\r\nX-Target: \/delay\/50\r\n[^]*HTTP\/1\.1 400 Bad Request\r\nContent-Type: text\/plain\r\nDate: [^\r]+\r\nContent-Length: \d+\r\nConnection: close\r\n\r\nHPE_/);
    assert.ok(!harness.seen.includes('GET /never'));
  });

  test('an answer before the body closes the connection after it (Connection: close), reading and dropping the body', async () => {
    const { text, closed } = await exchangeBytes(harness.port, 'POST /early HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n', 1_000, (socket) => setTimeout(() => socket.write('hello' + get('/next')), 50));
    assert.ok(closed);
    assert.equal(text, 'HTTP/1.1 417 Expectation Failed\r\nContent-Length: 2\r\nConnection: close\r\n\r\nno');
  });

  test('an upgrade hands the socket over with the bytes read past the request; a refused one closes after its answer', async () => {
    const { text } = await exchangeBytes(harness.port, 'GET /upgrade HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: test\r\n\r\nearly', 500, (socket) => setTimeout(() => socket.write('later'), 50));
    assert.equal(text, 'HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: test\r\n\r\nhead:early;LATER');
    const refused = await exchangeBytes(harness.port, 'GET /upgrade HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: test\r\nX-Refuse: 1\r\n\r\n' + get('/never'));
    assert.equal(refused.text, 'HTTP/1.1 403 Forbidden\r\nContent-Length: 12\r\nConnection: close\r\n\r\nrefused body');
    assert.ok(refused.closed);
  });

  test('an upgrade request with a body is an ordinary request, and HTTP goes on after it', async () => {
    const { text } = await exchangeBytes(harness.port, 'POST /echo HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: h2c\r\nContent-Length: 2\r\n\r\nhi' + get('/after', 'Connection: close\r\n'));
    assert.match(text, /^HTTP\/1\.1 200 Echoed\r\n[^]*\r\n\r\nhiHTTP\/1\.1 200 OK\r\nX-Target: \/after/);
  });

  test('a head sent slowly is cut at the head timeout; an idle connection at the idle timeout', async () => {
    const started = Date.now();
    const slow = await exchangeBytes(harness.port, 'GET /slow HTTP/1.1\r\n', 3_000, (socket) => {
      const drip = setInterval(() => socket.writable && socket.write('X-A: 1\r\n'), 50);
      socket.on('close', () => clearInterval(drip));
    });
    assert.ok(slow.closed, 'closed');
    assert.equal(slow.text, '', 'no answer to a head that never ended');
    assert.ok(Date.now() - started < 2_500);
    const idle = await exchangeBytes(harness.port, get('/a'), 3_000);
    assert.ok(idle.closed);
    assert.match(idle.text, /^HTTP\/1\.1 200 OK/);
  });

  test('a body whose last bytes arrive while its reader has paused: the connection reads on (the next request is served)', async () => {
    const body = 'x'.repeat(300_000);
    const { text } = await exchangeBytes(harness.port, `POST /slow-reader HTTP/1.1\r\nHost: x\r\nContent-Length: ${body.length}\r\n\r\n${body}`, 3_000, (socket) =>
      setTimeout(() => socket.write(get('/after', 'Connection: close\r\n')), 300),
    );
    assert.match(text, /^HTTP\/1\.1 200 OK\r\nContent-Length: 6\r\n\r\n300000HTTP\/1\.1 200 OK\r\nX-Target: \/after/);
  });

  test('a whole answer written at once: one head, its length, its body; HEAD gets the head only', async () => {
    const { text } = await exchangeBytes(harness.port, get('/whole') + 'HEAD /whole HTTP/1.1\r\nHost: x\r\n\r\n' + get('/whole', 'Connection: close\r\n'));
    const answer = 'HTTP/1.1 200 OK\r\nX-Case: Kept\r\nContent-Length: 5\r\n\r\n';
    assert.equal(text, `${answer}hello${answer}HTTP/1.1 200 OK\r\nX-Case: Kept\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello`);
  });

  test('an answer that ends while corked goes out on a kept-alive connection (the uncork follows its exchange)', async () => {
    const { text } = await exchangeBytes(harness.port, get('/corked'), 500);
    assert.equal(text, 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
  });

  test('a FIN while a request waits for its answer aborts it (the client gave up), as nginx and Node read it', async () => {
    aborted = false;
    const { closed } = await exchangeBytes(harness.port, get('/abandon'), 1_000, (socket) => socket.end());
    assert.ok(closed);
    assert.equal(aborted, true);
  });

  test('101 header lines are refused with 431, a bad version with 505', async () => {
    const many = Array.from({ length: 100 }, (_, i) => `X-${i}: ${i}\r\n`).join('');
    assert.match((await exchangeBytes(harness.port, get('/a', many))).text, /^HTTP\/1\.1 431 Request Header Fields Too Large\r\n/);
    assert.match((await exchangeBytes(harness.port, 'GET / HTTP/2.0\r\nHost: x\r\n\r\n')).text, /^HTTP\/1\.1 505 HTTP Version Not Supported\r\n/);
  });
});
