/**
 * Issue 11, finding 3: lenient request framing at the public edge (request smuggling), as a table over
 * raw sockets: a real edge, a real tunnel, a real local Node server that records every request it gets.
 *
 * Each row sends raw bytes on a fresh connection (and, for some, more bytes on the same connection once
 * the first answer came) and checks what the client got back, whether the connection was closed, and
 * what the local server received. Nothing a row calls smuggled may ever reach the local server.
 *
 * Rows marked "uWS" pin what uWebSockets.js 20.30's own parser does before any of Burrow's code runs
 * (docs/protocol.md, section 17, "What the edge's HTTP parser cannot carry"); if a uWS upgrade changes it, the row
 * fails and the docs must be updated with it.
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
  /** 400 INVALID_REQUEST in the spec's shape, then the connection closed; nothing reaches the local server. */
  | { kind: 'refused' }
  /** uWS closes the connection without an answer; nothing reaches the local server. */
  | { kind: 'closed-unanswered' }
  /** uWS neither answers nor closes within the wait; nothing reaches the local server. */
  | { kind: 'unanswered' }
  /** Answered (200 from the local server), which received exactly these requests. */
  | { kind: 'answered'; received: Received[] };

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

const rows: Row[] = [
  // ---- refused by Burrow's framing check (src/edge/request-framing.ts) ----
  {
    name: 'two Content-Lengths that disagree (0 then N), the N bytes sent after the answer',
    first: (host) => post(host, `Content-Length: 0\r\nContent-Length: ${smuggled(host).length}\r\n`),
    later: smuggled,
    expect: { kind: 'refused' },
  },
  { name: 'two equal Content-Lengths', first: (host) => post(host, 'Content-Length: 5\r\nContent-Length: 5\r\n') + 'hello', expect: { kind: 'refused' } },
  { name: 'an empty Content-Length', first: (host) => post(host, 'Content-Length: \r\n'), later: smuggled, expect: { kind: 'refused' } },
  { name: 'Transfer-Encoding: gzip, chunked', first: (host) => post(host, 'Transfer-Encoding: gzip, chunked\r\n') + '5\r\nhello\r\n0\r\n\r\n', expect: { kind: 'refused' } },
  {
    name: 'Transfer-Encoding twice',
    first: (host) => post(host, 'Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n') + '5\r\nhello\r\n0\r\n\r\n',
    expect: { kind: 'refused' },
  },
  { name: 'two Host headers', first: (host) => `GET /a HTTP/1.1\r\nHost: ${host}\r\nHost: evil.example\r\n\r\n`, later: smuggled, expect: { kind: 'refused' } },
  {
    name: 'API host: two Content-Lengths that disagree, the N bytes sent after the answer',
    api: true,
    first: (host) => `POST /api/v1/tokens HTTP/1.1\r\nHost: ${host}\r\nContent-Length: 0\r\nContent-Length: 40\r\n\r\n`,
    later: smuggled,
    expect: { kind: 'refused' },
  },
  { name: 'API host: an empty Content-Length', api: true, first: (host) => `POST /api/v1/tokens HTTP/1.1\r\nHost: ${host}\r\nContent-Length: \r\n\r\n`, expect: { kind: 'refused' } },
  { name: 'API host: two Host headers', api: true, first: (host) => `GET /api/v1/instance HTTP/1.1\r\nHost: ${host}\r\nHost: ${host}\r\n\r\n`, expect: { kind: 'refused' } },

  // ---- closed by uWS 20.30 before Burrow's code sees a request (pinned) ----
  {
    name: 'two Content-Lengths that disagree, the smuggled request in the same packet (uWS: a request while one is pending closes)',
    first: (host) => post(host, `Content-Length: 0\r\nContent-Length: ${smuggled(host).length}\r\n`) + smuggled(host),
    expect: { kind: 'closed-unanswered' },
  },
  { name: 'Content-Length and Transfer-Encoding together (uWS)', first: (host) => post(host, 'Content-Length: 3\r\nTransfer-Encoding: chunked\r\n') + '5\r\nhello\r\n0\r\n\r\n', expect: { kind: 'closed-unanswered' } },
  { name: 'Transfer-Encoding: identity (uWS)', first: (host) => post(host, 'Transfer-Encoding: identity\r\nContent-Length: 5\r\n') + 'hello', expect: { kind: 'closed-unanswered' } },
  { name: 'Content-Length: +5 (uWS)', first: (host) => post(host, 'Content-Length: +5\r\n') + 'hello', expect: { kind: 'closed-unanswered' } },
  { name: 'a chunk extension 5;foo=bar (uWS closes even this valid form)', first: (host) => chunked(host, '5;foo=bar\r\nhello\r\n0\r\n\r\n'), expect: { kind: 'closed-unanswered' } },
  { name: 'chunk size 0x5 (uWS)', first: (host) => chunked(host, '0x5\r\nhello\r\n0\r\n\r\n'), expect: { kind: 'closed-unanswered' } },
  {
    name: 'a chunked body then another request in the same packet (uWS: pending)',
    first: (host) => chunked(host, '2\r\nab\r\n0\r\n\r\n') + smuggled(host),
    expect: { kind: 'closed-unanswered' },
  },
  {
    name: 'no CRLF after chunk data, another request in the same packet (uWS: pending)',
    first: (host) => chunked(host, '2\r\nabXY0\r\n\r\n') + smuggled(host),
    expect: { kind: 'closed-unanswered' },
  },
  { name: 'two pipelined GETs (uWS: the second arrives while the first is pending)', first: (host) => `GET /p1 HTTP/1.1\r\nHost: ${host}\r\n\r\n${smuggled(host)}`, expect: { kind: 'closed-unanswered' } },
  { name: 'PROPFIND (uWS: unknown method)', first: (host) => `PROPFIND /a HTTP/1.1\r\nHost: ${host}\r\n\r\n`, expect: { kind: 'closed-unanswered' } },

  // ---- neither answered nor closed by uWS 20.30 within a second (pinned; it closes at its idle timeout) ----
  { name: 'HTTP/1.0 (uWS)', first: (host) => `GET /a HTTP/1.0\r\nHost: ${host}\r\n\r\n`, expect: { kind: 'unanswered' } },
  { name: 'HTTP/1.1 without Host (uWS)', first: () => 'GET /a HTTP/1.1\r\n\r\n', expect: { kind: 'unanswered' } },
  { name: 'an absolute-form target (uWS)', first: (host) => `GET http://${host}/a HTTP/1.1\r\nHost: ${host}\r\n\r\n`, expect: { kind: 'unanswered' } },
  {
    name: '49 header lines (uWS)',
    first: (host) => `GET /a HTTP/1.1\r\nHost: ${host}\r\n${Array.from({ length: 48 }, (_, i) => `x-h${i}: ${i}\r\n`).join('')}\r\n`,
    expect: { kind: 'unanswered' },
  },
  {
    name: '60 header lines (uWS)',
    first: (host) => `GET /a HTTP/1.1\r\nHost: ${host}\r\n${Array.from({ length: 59 }, (_, i) => `x-h${i}: ${i}\r\n`).join('')}\r\n`,
    expect: { kind: 'unanswered' },
  },

  // ---- lenient chunk parsing inside uWS 20.30: the local server gets a consistent body, nothing runs after it ----
  {
    name: 'chunk size " 5" is read as 0 (uWS); what follows on the connection never reaches the local server',
    first: (host) => chunked(host, ' 5\r\nhello\r\n0\r\n\r\n'),
    later: smuggled,
    expect: { kind: 'answered', received: [{ method: 'POST', url: '/a', body: '' }] },
  },
  {
    name: 'an empty chunk-size line is read as 0 (uWS); what follows never reaches the local server',
    first: (host) => chunked(host, '\r\nhello\r\n0\r\n\r\n'),
    later: smuggled,
    expect: { kind: 'answered', received: [{ method: 'POST', url: '/a', body: '' }] },
  },
  {
    name: 'chunk data longer than its size (uWS takes the declared size); what follows never reaches the local server',
    first: (host) => chunked(host, '3\r\nhello\r\n0\r\n\r\n'),
    later: smuggled,
    expect: { kind: 'answered', received: [{ method: 'POST', url: '/a', body: 'hel' }] },
  },
  {
    name: 'no CRLF after chunk data (uWS skips two bytes): the body is the declared "ab"',
    first: (host) => chunked(host, '2\r\nabXY0\r\n\r\n'),
    expect: { kind: 'answered', received: [{ method: 'POST', url: '/a', body: 'ab' }] },
  },
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
      const waitMs = row.expect.kind === 'refused' || row.expect.kind === 'closed-unanswered' ? 2_000 : 1_000;
      const result = await exchange(target.port, row.first(host), row.later?.(host), waitMs);
      await barrier();
      const expect = row.expect;
      switch (expect.kind) {
        case 'refused': {
          const response = firstResponse(result.answer);
          assert.equal(response.status, 400, result.answer);
          assert.deepEqual(Object.keys(JSON.parse(response.body)), ['error']);
          assert.equal(JSON.parse(response.body).error.code, 'INVALID_REQUEST');
          assert.equal(result.answer.length, response.body.length + result.answer.indexOf('\r\n\r\n') + 4, 'nothing after the 400');
          assert.ok(result.closed, 'the connection is closed after the 400');
          assert.deepEqual(received, [], 'nothing reached the local server');
          break;
        }
        case 'closed-unanswered':
          assert.equal(result.answer, '', 'no answer');
          assert.ok(result.closed, 'the connection is closed');
          assert.deepEqual(received, [], 'nothing reached the local server');
          break;
        case 'unanswered':
          assert.equal(result.answer, '', 'no answer');
          assert.deepEqual(received, [], 'nothing reached the local server');
          break;
        case 'answered':
          assert.equal(firstResponse(result.answer).status, 200, result.answer);
          assert.deepEqual(received, expect.received);
          break;
      }
      assert.ok(!received.some((request) => request.url === '/smuggled'), 'the smuggled request never ran');
    });
  }
});
