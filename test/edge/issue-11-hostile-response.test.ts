/**
 * Issue 11, findings 1 and 4, and issue 12 finding 5 (response side): a tenant's tunnel client answers
 * public requests with frames that do not fit the stream or a head that could misframe the public
 * connection. Before the fix, body bytes past a declared Content-Length made the edge process exit
 * (uWS: "HttpResponse must not be accessed after a successful response"), a 1xx was written as the
 * final answer, a 101 was written out on an HTTP stream, header names that are not tokens reached the
 * public side, and header values were re-encoded as UTF-8.
 *
 * Now each such frame resets that stream (RESET PROTOCOL_ERROR), the public client gets a clean 502
 * INVALID_RESPONSE (or, once the response had started, its connection closed), and the tunnel, the edge
 * and every other tunnel keep working: after every case the same raw tunnel answers a request, and so
 * does a tunnel of the real client. Protocol 2 (issue 24): interim answers come as INFO and are carried,
 * the reason phrase and the local server's Date are carried, and an upgrade answered 101 passes raw bytes.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Packr } from 'msgpackr';
import { connect } from 'node:net';
import type { DataFrame, OpenFrame, ResetFrame } from '../../src/protocol/codec.js';
import { FrameType, ResetCode } from '../../src/protocol/constants.js';
import { call, createAccount, echo, startClient, startEdge, startLocal, type LocalServer, type TestAccount, type TestEdge } from '../helpers.js';
import { headerOf, rawRequest, type RawResponse } from './raw-http.js';
import { openRawTunnel, type RawTunnel } from './raw-tunnel.js';

/** Frames packed without the codec's checks: what a hostile client can put on the wire. */
const raw = new Packr({ useRecords: false, variableMapSize: true });
const bytes = (text: string): Buffer => Buffer.from(text, 'latin1');

let target: TestEdge;
let account: TestAccount;
let local: LocalServer;
let good: Awaited<ReturnType<typeof startClient>>;
let tunnel: RawTunnel;
let subdomain: string;

before(async () => {
  target = await startEdge();
  account = await createAccount(target, 'PRO');
  local = await startLocal(echo);
  good = await startClient(target, account.token, local.port);
  const opened = await openRawTunnel(target, account.token);
  tunnel = opened.tunnel;
  subdomain = opened.ready[2];
});

after(async () => {
  tunnel?.ws.close(1000);
  await good?.client.close();
  await local?.close();
  await target?.close();
});

/** A public request to the raw tunnel, answered with `frames` for its stream. */
async function exchange(method: string, frames: (stream: number) => unknown[][]): Promise<{ stream: number; response: RawResponse }> {
  const pending = rawRequest(target.port, `${subdomain}.localhost:${target.port}`, method, '/hook');
  const open = await tunnel.next<OpenFrame>(FrameType.OPEN);
  for (const frame of frames(open[1])) tunnel.send(raw.pack(frame));
  return { stream: open[1], response: await pending };
}

/** The edge, this tunnel and another tunnel all still answer. */
async function expectAllServing(): Promise<void> {
  const { response } = await exchange('GET', (s) => [[FrameType.RESPONSE, s, 200, '', ['content-type', 'text/plain'], bytes('fine'), true]]);
  assert.equal(response.status, 200, 'the same tunnel still answers');
  assert.equal(response.body.toString(), 'fine');
  const forwarded = await call(target, 'POST', '/still-there', { host: good.host, rawBody: 'ping' });
  assert.equal(forwarded.status, 200, 'another tunnel still answers');
  assert.equal(forwarded.json.body, 'ping');
}

/** The stream was reset for a protocol error and the public client got 502 INVALID_RESPONSE, or a cut. */
async function expectRefused(stream: number, response: RawResponse): Promise<void> {
  const reset = await tunnel.next<ResetFrame>(FrameType.RESET);
  assert.equal(reset[1], stream, 'the RESET is for this stream');
  assert.equal(reset[2], ResetCode.PROTOCOL_ERROR);
  assert.ok(reset[3].length > 0, 'the RESET says why');
  assert.equal(response.statusLines.length <= 1, true, `one status line at most: ${response.statusLines.join(' | ')}`);
  if (response.status === 502) {
    assert.equal(headerOf(response.head, 'burrow-error'), 'INVALID_RESPONSE');
    // The answer to HEAD has no body: its fields say it all.
    if (response.body.byteLength === 0 && headerOf(response.head, 'content-length') !== '0') return;
    const body = JSON.parse(response.body.toString('utf8'));
    assert.deepEqual(Object.keys(body.error), ['code', 'message']);
    assert.equal(body.error.code, 'INVALID_RESPONSE');
  } else {
    // The response had started: the connection is closed before the declared body is complete.
    const declared = Number(headerOf(response.head, 'content-length') ?? -1);
    assert.ok(response.status === 0 || declared < 0 || response.body.byteLength < declared, `a cut response, not a whole one: ${response.bytes.toString('latin1')}`);
  }
}

interface RefusedCase {
  name: string;
  method?: string;
  frames: (stream: number) => unknown[][];
}

const refused: RefusedCase[] = [
  {
    name: 'issue 11.1: DATA past a content-length of 2 ("ok" then "EXTRA") crashed the edge',
    frames: (s) => [
      [FrameType.RESPONSE, s, 200, '', ['content-length', '2'], null, false],
      [FrameType.DATA, s, bytes('ok'), false],
      [FrameType.DATA, s, bytes('EXTRA'), true],
    ],
  },
  {
    name: 'content-length 0 followed by DATA',
    frames: (s) => [
      [FrameType.RESPONSE, s, 200, '', ['content-length', '0'], null, false],
      [FrameType.DATA, s, bytes('x'), true],
    ],
  },
  {
    name: 'a RESPONSE whose inline body is longer than its content-length',
    frames: (s) => [[FrameType.RESPONSE, s, 200, '', ['content-length', '2'], bytes('hello'), true]],
  },
  {
    name: 'the declared body, then more in a later DATA without end',
    frames: (s) => [
      [FrameType.RESPONSE, s, 200, '', ['content-length', '3'], bytes('abc'), false],
      [FrameType.DATA, s, bytes('d'), false],
    ],
  },
  {
    name: 'a second RESPONSE on one stream',
    frames: (s) => [
      [FrameType.RESPONSE, s, 200, '', [], null, false],
      [FrameType.RESPONSE, s, 200, '', [], null, true],
    ],
  },
  { name: 'DATA before RESPONSE', frames: (s) => [[FrameType.DATA, s, bytes('early'), true]] },
  { name: 'issue 11.4: a 100 that ends the exchange was written as the final answer', frames: (s) => [[FrameType.RESPONSE, s, 100, '', [], null, true]] },
  { name: 'a 103 that carries a body', frames: (s) => [[FrameType.RESPONSE, s, 103, '', ['link', '</a.css>'], bytes('x'), false]] },
  { name: 'issue 11.4: 101 on an HTTP stream was written out', frames: (s) => [[FrameType.RESPONSE, s, 101, '', ['upgrade', 'websocket'], null, true]] },
  { name: 'status 600', frames: (s) => [[FrameType.RESPONSE, s, 600, '', [], null, true]] },
  { name: 'status 999', frames: (s) => [[FrameType.RESPONSE, s, 999, '', [], null, true]] },
  { name: 'a body on a 204', frames: (s) => [[FrameType.RESPONSE, s, 204, '', [], bytes('x'), true]] },
  { name: 'a body on a 304', frames: (s) => [[FrameType.RESPONSE, s, 304, '', [], null, false], [FrameType.DATA, s, bytes('x'), true]] },
  { name: 'a body on the answer to HEAD', method: 'HEAD', frames: (s) => [[FrameType.RESPONSE, s, 200, '', ['content-length', '5'], bytes('hello'), true]] },
  // Header names that are not HTTP tokens (issue 11.4) reached the public side verbatim.
  ...['transfer-encoding ', 'x a', 'content-length:', '', 'x(y)', 'x"y', 'x/y', 'caf\xe9', 'x\ty'].map((name) => ({
    name: `issue 11.4: the header name ${JSON.stringify(name)}`,
    frames: (s: number) => [[FrameType.RESPONSE, s, 200, '', [name, 'v', 'content-length', '2'], bytes('ok'), true]],
  })),
  {
    name: 'a header value with a character above \\xFF (not a byte)',
    frames: (s) => [[FrameType.RESPONSE, s, 200, '', ['x-mark', '\u2713'], bytes('ok'), true]],
  },
  ...['abc', '-1', '1, 2', '', '0x2', '2 2'].map((value) => ({
    name: `the content-length ${JSON.stringify(value)}`,
    frames: (s: number) => [[FrameType.RESPONSE, s, 200, '', ['content-length', value], bytes('ok'), true]],
  })),
  {
    name: 'two different content-lengths',
    frames: (s) => [[FrameType.RESPONSE, s, 200, '', ['content-length', '2', 'content-length', '3'], bytes('ok'), true]],
  },
];

describe('a response frame that does not fit resets that stream, never the edge or the tunnel', () => {
  for (const item of refused) {
    test(item.name, { timeout: 20_000 }, async () => {
      const { stream, response } = await exchange(item.method ?? 'GET', item.frames);
      await expectRefused(stream, response);
      await expectAllServing();
    });
  }
});

interface AnsweredCase {
  name: string;
  method?: string;
  frames: (stream: number) => unknown[][];
  check: (response: RawResponse) => void;
}

const answered: AnsweredCase[] = [
  {
    name: 'INFO 100, then 200: the public client reads both, the 100 first',
    frames: (s) => [
      [FrameType.INFO, s, 100, 'Continue', []],
      [FrameType.RESPONSE, s, 200, 'OK', ['content-length', '2'], bytes('ok'), true],
    ],
    check: (response) => {
      assert.deepEqual(response.statusLines.map((line) => line.trim()), ['HTTP/1.1 100 Continue', 'HTTP/1.1 200 OK']);
      assert.equal(response.body.toString(), 'ok');
    },
  },
  {
    name: '103 Early Hints and 102, then 200 with DATA: interim answers carried with their fields, in order',
    frames: (s) => [
      [FrameType.INFO, s, 103, 'Early Hints', ['Link', '</a.css>; rel=preload']],
      [FrameType.INFO, s, 102, 'Processing', []],
      [FrameType.RESPONSE, s, 200, 'Fine', ['content-length', '5'], null, false],
      [FrameType.DATA, s, bytes('hel'), false],
      [FrameType.DATA, s, bytes('lo'), true],
    ],
    check: (response) => {
      assert.deepEqual(response.statusLines.map((line) => line.trim()), ['HTTP/1.1 103 Early Hints', 'HTTP/1.1 102 Processing', 'HTTP/1.1 200 Fine']);
      assert.match(response.bytes.toString('latin1'), /^HTTP\/1\.1 103 Early Hints\r\nLink: <\/a\.css>; rel=preload\r\n\r\n/);
      assert.equal(response.body.toString(), 'hello');
    },
  },
  {
    name: 'the reason phrase, an empty one, and trailers after a body of unknown length',
    frames: (s) => [
      [FrameType.RESPONSE, s, 299, '', ['X-Case', 'Kept'], null, false],
      [FrameType.DATA, s, bytes('abc'), false],
      [FrameType.TRAILERS, s, ['X-Checksum', 'sha256=1', 'Transfer-Encoding', 'chunked']],
    ],
    check: (response) => {
      assert.deepEqual(response.statusLines, ['HTTP/1.1 299 ']);
      assert.match(response.head, /\r\nX-Case: Kept\r\n/);
      assert.equal(response.body.toString('latin1'), '3\r\nabc\r\n0\r\nX-Checksum: sha256=1\r\n\r\n');
    },
  },
  {
    name: 'a content-length list of equal values',
    frames: (s) => [[FrameType.RESPONSE, s, 200, '', ['content-length', '2, 2'], bytes('ok'), true]],
    check: (response) => {
      assert.equal(response.status, 200);
      assert.equal(headerOf(response.head, 'content-length'), '2');
      assert.equal(response.body.toString(), 'ok');
    },
  },
  {
    name: 'DATA after the end is ignored (frames cross in flight)',
    frames: (s) => [
      [FrameType.RESPONSE, s, 200, '', ['content-length', '2'], bytes('ok'), true],
      [FrameType.DATA, s, bytes('late'), true],
    ],
    check: (response) => {
      assert.equal(response.status, 200);
      assert.equal(response.body.toString(), 'ok');
    },
  },
  {
    name: 'framing and hop-by-hop headers from the client are the edge\'s own; its Date is carried',
    frames: (s) => [
      [
        FrameType.RESPONSE,
        s,
        200,
        'OK',
        ['transfer-encoding', 'chunked', 'connection', 'x-secret', 'x-secret', '1', 'keep-alive', 'timeout=5', 'Date', 'yesterday', 'content-length', '2', 'x-kept', 'yes'],
        bytes('ok'),
        true,
      ],
    ],
    check: (response) => {
      assert.equal(response.status, 200);
      assert.equal(headerOf(response.head, 'transfer-encoding'), undefined);
      assert.equal(headerOf(response.head, 'x-secret'), undefined);
      assert.equal(headerOf(response.head, 'keep-alive'), undefined);
      assert.equal(headerOf(response.head, 'date'), 'yesterday');
      assert.equal(headerOf(response.head, 'content-length'), '2');
      assert.equal(headerOf(response.head, 'x-kept'), 'yes');
      assert.equal(response.body.toString(), 'ok');
    },
  },
  {
    name: 'issue 12.5: header values are bytes: caf\\xE9 leaves as 63 61 66 e9, UTF-8 résumé is not encoded twice',
    frames: (s) => [
      [
        FrameType.RESPONSE,
        s,
        200,
        'OK',
        [
          'x-word',
          'caf\xe9',
          'content-disposition',
          Buffer.from('attachment; filename="résumé.pdf"', 'utf8').toString('latin1'),
          'content-length',
          '2',
        ],
        bytes('ok'),
        true,
      ],
    ],
    check: (response) => {
      assert.equal(response.status, 200);
      assert.ok(response.bytes.includes(Buffer.from('x-word: caf\xe9\r\n', 'latin1')), response.head);
      assert.ok(response.bytes.includes(Buffer.concat([Buffer.from('content-disposition: '), Buffer.from('attachment; filename="résumé.pdf"', 'utf8'), Buffer.from('\r\n')])), response.head);
    },
  },
];

describe('responses the edge forwards', () => {
  for (const item of answered) {
    test(item.name, { timeout: 20_000 }, async () => {
      const { stream, response } = await exchange(item.method ?? 'GET', item.frames);
      item.check(response);
      assert.equal(await tunnel.barrier(), 'pong');
      assert.ok(!tunnel.frames.some((frame) => frame[0] === FrameType.RESET && frame[1] === stream), 'no RESET for a good response');
      await expectAllServing();
    });
  }
});

/** A public upgrade to the raw tunnel over raw TCP, answered with `answer`; resolves with what the public client got. */
async function upgrade(answer: (stream: number) => unknown[][]): Promise<{ stream: number; response: RawResponse }> {
  const pending = rawRequest(target.port, `${subdomain}.localhost:${target.port}`, 'GET', '/live', 10_000, ['Upgrade: websocket', 'Connection: Upgrade', 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==', 'Sec-WebSocket-Version: 13']);
  const open = await tunnel.next<OpenFrame>(FrameType.OPEN);
  assert.equal(open[9], true, 'OPEN says upgrade');
  for (const frame of answer(open[1])) tunnel.send(raw.pack(frame));
  return { stream: open[1], response: await pending };
}

describe('an answer to an upgrade the edge cannot forward resets that stream', () => {
  const cases: { name: string; answer: (stream: number) => unknown[][] }[] = [
    { name: 'a 101 with a header name that is not a token', answer: (s) => [[FrameType.RESPONSE, s, 101, 'Switching Protocols', ['x a', 'v'], null, false]] },
    { name: 'INFO 101', answer: (s) => [[FrameType.INFO, s, 101, '', []]] },
    { name: 'status 600', answer: (s) => [[FrameType.RESPONSE, s, 600, '', [], null, true]] },
    { name: 'DATA before the 101', answer: (s) => [[FrameType.DATA, s, bytes('early'), false]] },
    { name: 'TRAILERS before the answer', answer: (s) => [[FrameType.TRAILERS, s, []]] },
  ];
  for (const item of cases) {
    test(item.name, { timeout: 20_000 }, async () => {
      const { stream, response } = await upgrade(item.answer);
      await expectRefused(stream, response);
      await expectAllServing();
    });
  }
});

describe('an upgrade answered 101 passes raw bytes both ways', () => {
  test('the 101 as the client sent it, then bytes each way, each FIN as DATA end; the stream ends after both', { timeout: 20_000 }, async () => {
    const socket = connect(target.port, '127.0.0.1');
    let received = '';
    socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
    socket.write(`GET /raw HTTP/1.1\r\nHost: ${subdomain}.localhost:${target.port}\r\nUpgrade: x-test\r\nConnection: Upgrade\r\n\r\nearly bytes`);
    const open = await tunnel.next<OpenFrame>(FrameType.OPEN);
    assert.deepEqual([open[3], open[4], open[8], open[9]], ['GET', '/raw', true, true]);
    assert.deepEqual(open[5].slice(2, 6), ['Upgrade', 'x-test', 'Connection', 'Upgrade'], 'Connection and Upgrade kept for an upgrade');
    tunnel.send(raw.pack([FrameType.RESPONSE, open[1], 101, 'Switching Protocols', ['Upgrade', 'x-test', 'Connection', 'Upgrade'], bytes('hello'), false]));
    const first = await tunnel.next<DataFrame>(FrameType.DATA);
    assert.deepEqual([first[1], Buffer.from(first[2] as Uint8Array).toString(), first[3]], [open[1], 'early bytes', false]);
    socket.end();
    const fin = await tunnel.next<DataFrame>(FrameType.DATA);
    assert.deepEqual([fin[2], fin[3]], [null, true]);
    tunnel.send(raw.pack([FrameType.DATA, open[1], bytes(' world'), true]));
    await new Promise((resolve) => socket.on('close', resolve));
    assert.equal(received, 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: x-test\r\nConnection: Upgrade\r\n\r\nhello world');
    await expectAllServing();
  });

  test('a refused upgrade: the refusal and its body reach the public client, then the connection closes', { timeout: 20_000 }, async () => {
    const { response } = await upgrade((s) => [[FrameType.RESPONSE, s, 403, 'Forbidden', ['content-length', '6'], bytes('denied'), true]]);
    assert.deepEqual(response.statusLines, ['HTTP/1.1 403 Forbidden']);
    assert.equal(response.body.toString(), 'denied');
    await expectAllServing();
  });
});
