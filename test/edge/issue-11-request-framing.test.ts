/**
 * Issue 11, finding 3, and issue 24: request framing at the public edge (request smuggling), as a table
 * over raw sockets: a real edge, a real tunnel, a real local Node server that records every request it
 * gets whole.
 *
 * Each row sends raw bytes on a fresh connection (and, for some, more bytes on the same connection once
 * the first answer came) and checks what the client got back, whether the connection was closed, and
 * what the local server received. Nothing a row calls smuggled may ever reach the local server.
 *
 * Since the public listener is llhttp on raw sockets (issue 24), every invalid framing of the smuggling
 * suites (HAProxy's VTest, Bun's) is answered 400 and the connection closed, wherever in the request the
 * error is: in the head (nothing is forwarded), or inside a chunked body (the stream is cancelled, so the
 * local server never sees a whole request); the rows that uWebSockets.js 20.30 dropped or misread are
 * ordinary requests now (docs/security.md, "Request framing"; docs/protocol.md section 17).
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { call, createAccount, startClient, startEdge, startLocal, type LocalServer, type TestEdge } from '../helpers.js';

interface Received {
  method: string;
  url: string;
  body: string;
}

interface Exchange {
  /** Everything the edge sent back, as latin1 text. */
  answer: string;
  /** The edge closed the connection within the wait. */
  closed: boolean;
}

/** Sends `first`; once an answer arrives (or after `laterAfterMs`), sends `later` on the same connection. */
async function exchange(port: number, first: string, later?: string, waitMs = 1_000): Promise<Exchange> {
  const socket = connect(port, '127.0.0.1');
  await once(socket, 'connect');
  let answer = '';
  let closed = false;
  let laterSent = later === undefined;
  const sendLater = (): void => {
    if (laterSent || closed) return;
    laterSent = true;
    socket.write(later!);
  };
  socket.on('data', (chunk: Buffer) => {
    answer += chunk.toString('latin1');
    // A whole first answer (head and body) is in: send what follows on the same connection.
    if (/\r\n\r\n/.test(answer)) setTimeout(sendLater, 20);
  });
  socket.on('error', () => {});
  const closing = once(socket, 'close').then(() => {
    closed = true;
  });
  socket.write(first);
  const laterTimer = setTimeout(sendLater, 400);
  await Promise.race([closing, sleep(waitMs)]);
  clearTimeout(laterTimer);
  socket.destroy();
  return { answer, closed };
}

/** The status, headers and body of the first response in `answer`. */
function firstResponse(answer: string): { status: number; headers: string; body: string } {
  const match = /^HTTP\/1\.1 (\d{3}) [^\r]*\r\n([\s\S]*?)\r\n\r\n/.exec(answer);
  assert.ok(match !== null, `an HTTP/1.1 response, got ${JSON.stringify(answer)}`);
  const length = Number(/content-length: (\d+)/i.exec(match[2]!)?.[1] ?? '0');
  const start = match[0].length;
  return { status: Number(match[1]), headers: match[2]!, body: answer.slice(start, start + length) };
}

type Expect =
  /** The edge's refusal (400 INVALID_REQUEST unless said) in the spec's shape, then the connection closed; nothing reaches the local server. */
  | { kind: 'refused'; status?: number; code?: string }
  /** Answered (200 from the local server, every answer), which received exactly these requests. */
  | { kind: 'answered'; received: Received[]; answers?: number };

interface Row {
  name: string;
  /** Builds the request bytes for a tunnel host (or the API host). */
  first: (host: string) => string;
  later?: (host: string) => string;
  api?: boolean;
  expect: Expect;
}

const smuggled = (host: string): string => `GET /smuggled HTTP/1.1\r\nHost: ${host}\r\n\r\n`;
const post = (host: string, headers: string): string => `POST /a HTTP/1.1\r\nHost: ${host}\r\n${headers}\r\n`;
const chunked = (host: string, body: string): string => post(host, 'Transfer-Encoding: chunked\r\n') + body;
const lines = (count: number): string => Array.from({ length: count }, (_, i) => `x-h${i}: ${i}\r\n`).join('');
const refused: Expect = { kind: 'refused' };

const rows: Row[] = [
  // ---- ambiguous or broken heads: refused before anything is forwarded ----
  {
    name: 'two Content-Lengths that disagree (0 then N), the N bytes sent after the answer',
    first: (host) => post(host, `Content-Length: 0\r\nContent-Length: ${smuggled(host).length}\r\n`),
    later: smuggled,
    expect: refused,
  },
  {
    name: 'two Content-Lengths that disagree, the smuggled request in the same packet',
    first: (host) => post(host, `Content-Length: 0\r\nContent-Length: ${smuggled(host).length}\r\n`) + smuggled(host),
    expect: refused,
  },
  { name: 'two equal Content-Lengths', first: (host) => post(host, 'Content-Length: 5\r\nContent-Length: 5\r\n') + 'hello', expect: refused },
  { name: 'an empty Content-Length', first: (host) => post(host, 'Content-Length: \r\n'), later: smuggled, expect: refused },
  { name: 'Content-Length: +5', first: (host) => post(host, 'Content-Length: +5\r\n') + 'hello', expect: refused },
  { name: 'Content-Length: 5, 5', first: (host) => post(host, 'Content-Length: 5, 5\r\n') + 'hello', expect: refused },
  { name: 'Content-Length and Transfer-Encoding together', first: (host) => post(host, 'Content-Length: 3\r\nTransfer-Encoding: chunked\r\n') + '5\r\nhello\r\n0\r\n\r\n' + smuggled(host), expect: refused },
  { name: 'Transfer-Encoding: identity', first: (host) => post(host, 'Transfer-Encoding: identity\r\nContent-Length: 5\r\n') + 'hello', expect: refused },
  { name: 'Transfer-Encoding: gzip, chunked (valid HTTP, but the coding would not reach the local server)', first: (host) => post(host, 'Transfer-Encoding: gzip, chunked\r\n') + '5\r\nhello\r\n0\r\n\r\n', expect: refused },
  {
    name: 'Transfer-Encoding twice',
    first: (host) => post(host, 'Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n') + '5\r\nhello\r\n0\r\n\r\n',
    expect: refused,
  },
  { name: 'two Host headers', first: (host) => `GET /a HTTP/1.1\r\nHost: ${host}\r\nHost: evil.example\r\n\r\n`, later: smuggled, expect: refused },
  { name: 'HTTP/1.1 without Host', first: () => 'GET /a HTTP/1.1\r\n\r\n', later: smuggled, expect: refused },
  { name: 'a space before the colon', first: (host) => `GET /a HTTP/1.1\r\nHost: ${host}\r\nX-A : 1\r\n\r\n`, expect: refused },
  { name: 'obsolete line folding', first: (host) => `GET /a HTTP/1.1\r\nHost: ${host}\r\nX-A: 1\r\n 2\r\n\r\n`, expect: refused },
  { name: 'bare LF line ends', first: (host) => `GET /a HTTP/1.1\nHost: ${host}\n\n`, expect: refused },
  { name: 'a NUL in a field value', first: (host) => `GET /a HTTP/1.1\r\nHost: ${host}\r\nX-A: a\x00b\r\n\r\n`, expect: refused },
  { name: 'a method that is not HTTP', first: (host) => `FROB /a HTTP/1.1\r\nHost: ${host}\r\n\r\n`, expect: refused },
  { name: 'HTTP/2.0 in a request line: 505', first: (host) => `GET /a HTTP/2.0\r\nHost: ${host}\r\n\r\n`, expect: { kind: 'refused', status: 505, code: 'HTTP_VERSION_NOT_SUPPORTED' } },
  { name: '101 header lines: 431', first: (host) => `GET /a HTTP/1.1\r\nHost: ${host}\r\n${lines(100)}\r\n`, expect: { kind: 'refused', status: 431, code: 'HEADERS_TOO_LARGE' } },
  {
    name: 'API host: two Content-Lengths that disagree, the N bytes sent after the answer',
    api: true,
    first: (host) => `POST /api/v1/tokens HTTP/1.1\r\nHost: ${host}\r\nContent-Length: 0\r\nContent-Length: 40\r\n\r\n`,
    later: smuggled,
    expect: refused,
  },
  { name: 'API host: an empty Content-Length', api: true, first: (host) => `POST /api/v1/tokens HTTP/1.1\r\nHost: ${host}\r\nContent-Length: \r\n\r\n`, expect: refused },
  { name: 'API host: two Host headers', api: true, first: (host) => `GET /api/v1/instance HTTP/1.1\r\nHost: ${host}\r\nHost: ${host}\r\n\r\n`, expect: refused },

  // ---- broken chunked framing inside a body: the stream is cancelled, the client gets 400 and the close ----
  { name: 'chunk size " 5"', first: (host) => chunked(host, ' 5\r\nhello\r\n0\r\n\r\n'), later: smuggled, expect: refused },
  { name: 'an empty chunk-size line', first: (host) => chunked(host, '\r\nhello\r\n0\r\n\r\n'), later: smuggled, expect: refused },
  { name: 'chunk size 0x5', first: (host) => chunked(host, '0x5\r\nhello\r\n0\r\n\r\n'), expect: refused },
  { name: 'chunk data longer than its size', first: (host) => chunked(host, '3\r\nhello\r\n0\r\n\r\n'), later: smuggled, expect: refused },
  { name: 'no CRLF after chunk data', first: (host) => chunked(host, '2\r\nabXY0\r\n\r\n'), expect: refused },
  { name: 'no CRLF after chunk data, another request in the same packet', first: (host) => chunked(host, '2\r\nabXY0\r\n\r\n') + smuggled(host), expect: refused },

  // ---- valid HTTP that uWebSockets.js 20.30 dropped: ordinary requests now ----
  {
    name: 'a chunk extension 5;foo=bar, and trailers',
    first: (host) => chunked(host, '5;foo=bar\r\nhello\r\n0\r\nX-Sum: 1\r\n\r\n'),
    expect: { kind: 'answered', received: [{ method: 'POST', url: '/a', body: 'hello' }] },
  },
  {
    name: 'two pipelined GETs: both answered, in order',
    first: (host) => `GET /p1 HTTP/1.1\r\nHost: ${host}\r\n\r\nGET /p2 HTTP/1.1\r\nHost: ${host}\r\n\r\n`,
    expect: { kind: 'answered', received: [{ method: 'GET', url: '/p1', body: '' }, { method: 'GET', url: '/p2', body: '' }], answers: 2 },
  },
  { name: 'PROPFIND', first: (host) => `PROPFIND /a HTTP/1.1\r\nHost: ${host}\r\nDepth: 1\r\n\r\n`, expect: { kind: 'answered', received: [{ method: 'PROPFIND', url: '/a', body: '' }] } },
  { name: 'HTTP/1.0', first: (host) => `GET /a HTTP/1.0\r\nHost: ${host}\r\n\r\n`, expect: { kind: 'answered', received: [{ method: 'GET', url: '/a', body: '' }] } },
  {
    name: 'an absolute-form target: routed by its authority, forwarded in origin-form',
    first: (host) => `GET http://${host}/a?b=1 HTTP/1.1\r\nHost: ignored.example\r\n\r\n`,
    expect: { kind: 'answered', received: [{ method: 'GET', url: '/a?b=1', body: '' }] },
  },
  { name: '100 header lines', first: (host) => `GET /a HTTP/1.1\r\nHost: ${host}\r\n${lines(99)}\r\n`, expect: { kind: 'answered', received: [{ method: 'GET', url: '/a', body: '' }] } },
  {
    name: 'a well-formed chunked body, then a request after the answer: both run (keep-alive works)',
    first: (host) => chunked(host, '2\r\nab\r\n0\r\n\r\n'),
    later: (host) => `GET /next HTTP/1.1\r\nHost: ${host}\r\n\r\n`,
    expect: { kind: 'answered', received: [{ method: 'POST', url: '/a', body: 'ab' }, { method: 'GET', url: '/next', body: '' }] },
  },
];

describe('issue 11: request framing at the edge (raw sockets, real tunnel, recording local server)', () => {
  let target: TestEdge;
  let local: LocalServer;
  let tunnelHost: string;
  let apiHost: string;
  let stopClient: () => Promise<void>;
  const received: Received[] = [];

  before(async () => {
    target = await startEdge();
    local = await startLocal((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        if (req.url !== '/barrier') received.push({ method: req.method!, url: req.url!, body: Buffer.concat(chunks).toString('latin1') });
        res.end('ok');
      });
      req.on('error', () => {});
    });
    const account = await createAccount(target);
    const started = await startClient(target, account.token, local.port);
    tunnelHost = started.host;
    apiHost = `localhost:${target.port}`;
    stopClient = () => started.client.close();
  });

  after(async () => {
    await stopClient();
    await local.close();
    await target.close();
  });

  /** Anything the edge forwarded before this answer has reached the local server by now. */
  async function barrier(): Promise<void> {
    assert.equal((await call(target, 'GET', '/barrier', { host: tunnelHost })).status, 200);
    await sleep(50);
  }

  for (const row of rows) {
    test(row.name, async () => {
      received.length = 0;
      const host = row.api === true ? apiHost : tunnelHost;
      const waitMs = row.expect.kind === 'refused' ? 2_000 : 1_000;
      const result = await exchange(target.port, row.first(host), row.later?.(host), waitMs);
      await barrier();
      const expect = row.expect;
      switch (expect.kind) {
        case 'refused': {
          const response = firstResponse(result.answer);
          assert.equal(response.status, expect.status ?? 400, result.answer);
          assert.deepEqual(Object.keys(JSON.parse(response.body)), ['error']);
          assert.equal(JSON.parse(response.body).error.code, expect.code ?? 'INVALID_REQUEST');
          assert.match(response.headers, /\r\nConnection: close$/i);
          assert.equal(result.answer.length, response.body.length + result.answer.indexOf('\r\n\r\n') + 4, 'nothing after the refusal');
          assert.ok(result.closed, 'the connection is closed after the refusal');
          assert.deepEqual(received, [], 'nothing reached the local server whole');
          break;
        }
        case 'answered': {
          const statuses = [...result.answer.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((match) => Number(match[1]));
          assert.deepEqual(statuses, Array.from({ length: expect.answers ?? expect.received.length }, () => 200), result.answer);
          assert.deepEqual(received, expect.received);
          break;
        }
      }
      assert.ok(!received.some((request) => request.url === '/smuggled'), 'the smuggled request never ran');
    });
  }
});
