/**
 * A misbehaving tunnel client against a real edge: raw WebSockets at /api/v1/connect send malformed,
 * oversized and out-of-protocol messages. Each time the edge ends that tunnel (GOAWAY PROTOCOL_ERROR
 * with a reason, then WebSocket close 4005), public requests in flight on it get 502 TUNNEL_CLOSED, and
 * the edge keeps serving: another tunnel still forwards and the API still answers. The upgrade's
 * refusals are plain HTTP errors in the spec's error shape.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { Packr } from 'msgpackr';
import { request } from 'undici';
import WebSocket from 'ws';
import { decode, encode, ProtocolError, type OpenFrame, type ResetFrame } from '../../src/protocol/codec.js';
import { CLOSE_CODE_BASE, DEFAULT_SETTINGS, FrameType, GoAwayCode, MAX_WINDOW, PROTOCOL_HEADER, ResetCode } from '../../src/protocol/constants.js';
import { call, createAccount, echo, startClient, startEdge, startLocal, waitFor, type LocalServer, type TestAccount, type TestEdge } from '../helpers.js';
import { connectUrl as rawConnectUrl, openRawTunnel, tunnelHeaders as rawTunnelHeaders, type RawTunnel } from './raw-tunnel.js';

const PROTOCOL_ERROR_CLOSE = CLOSE_CODE_BASE + GoAwayCode.PROTOCOL_ERROR;
const raw = new Packr({ useRecords: false, variableMapSize: true });

let target: TestEdge;
let account: TestAccount;
let local: LocalServer;
let good: Awaited<ReturnType<typeof startClient>>;

before(async () => {
  target = await startEdge();
  account = await createAccount(target, 'PRO');
  local = await startLocal(echo);
  good = await startClient(target, account.token, local.port);
});

after(async () => {
  await good?.client.close();
  await local?.close();
  await target?.close();
});

function connectUrl(query: string): string {
  return rawConnectUrl(target, query);
}

function tunnelHeaders(token: string = account.token): Record<string, string> {
  return rawTunnelHeaders(target, token);
}

function openRaw(query = 'port=1234'): ReturnType<typeof openRawTunnel> {
  return openRawTunnel(target, account.token, query);
}

/** The edge ended the tunnel for a protocol error: GOAWAY 5 with a reason, then close 4005. */
async function expectProtocolError(tunnel: RawTunnel, reason: RegExp): Promise<string> {
  const closed = await tunnel.closed;
  const goAway = tunnel.frames.find((frame) => frame[0] === FrameType.GOAWAY);
  assert.ok(goAway !== undefined, `a GOAWAY before the close (closed with ${closed.code} ${closed.reason})`);
  assert.equal(goAway[1], 0);
  assert.equal(goAway[2], GoAwayCode.PROTOCOL_ERROR);
  const message = goAway[3] as string;
  assert.match(message, reason);
  assert.ok(message.length <= 200, `a short reason, not ${message.length} characters`);
  assert.equal(closed.code, PROTOCOL_ERROR_CLOSE);
  assert.ok(closed.reason.length > 0, 'the close frame carries the reason too');
  assert.deepEqual(tunnel.undecodable, []);
  return message;
}

/** The bad tunnel left the registry; the other tunnel forwards and the API answers. */
async function expectEdgeServing(subdomain: string): Promise<void> {
  await waitFor(() => target.edge.registry.session(subdomain) === undefined, 5_000, `${subdomain} to leave the registry`);
  const forwarded = await call(target, 'POST', '/still-there?x=1', { host: good.host, rawBody: 'ping' });
  assert.equal(forwarded.status, 200);
  assert.equal(forwarded.json.body, 'ping');
  assert.equal(forwarded.json.url, '/still-there?x=1');
  const tunnels = await call(target, 'GET', '/api/v1/tunnels', { token: account.token });
  assert.equal(tunnels.status, 200);
  const listed = JSON.stringify(tunnels.json);
  assert.ok(listed.includes(good.subdomain), 'the good tunnel is still listed');
  assert.ok(!listed.includes(`"${subdomain}"`), 'the bad tunnel is not');
}

/** A public request to a raw tunnel, and the OPEN frame it becomes. */
async function publicRequest(
  tunnel: RawTunnel,
  subdomain: string,
  body?: string,
): Promise<{ open: OpenFrame; response: Promise<{ status: number; error: unknown; text: string }> }> {
  const response = request(`${target.base}/hook`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { host: `${subdomain}.localhost:${target.port}` },
    ...(body === undefined ? {} : { body }),
  }).then(
    async (res) => ({ status: res.statusCode, error: res.headers['burrow-error'], text: await res.body.text() }),
    // A response cut after its head: the connection closed (status 0 stands for "no complete answer").
    (error: Error) => ({ status: 0, error: error.message, text: '' }),
  );
  const open = await tunnel.next<OpenFrame>(FrameType.OPEN);
  return { open, response };
}

// ---- the handshake --------------------------------------------------------------------------------------

describe('a well-behaved handshake', () => {
  test('101 carries the protocol version; READY carries the subdomain, URL and settings', async () => {
    const { tunnel, ready, upgradeHeaders } = await openRaw('port=1234&subdomain=raw-handshake');
    assert.equal(upgradeHeaders[PROTOCOL_HEADER], '2');
    assert.deepEqual(ready, [FrameType.READY, 0, 'raw-handshake', `http://raw-handshake.localhost:${target.port}`, { ...DEFAULT_SETTINGS }]);
    // A well-formed GOAWAY from the client closes the tunnel as the client asked.
    tunnel.send(encode([FrameType.GOAWAY, 0, GoAwayCode.CLIENT_CLOSING, 'bye']));
    const closed = await tunnel.closed;
    assert.equal(closed.code, CLOSE_CODE_BASE + GoAwayCode.CLIENT_CLOSING);
    await expectEdgeServing('raw-handshake');
  });
});

// ---- bad messages -----------------------------------------------------------------------------------

describe('a bad message ends that tunnel, never the edge', () => {
  test('random bytes', async () => {
    let junk: Buffer;
    for (;;) {
      junk = randomBytes(64);
      try {
        decode(junk);
      } catch (error) {
        if (error instanceof ProtocolError) break;
        throw error;
      }
    }
    const { tunnel, ready } = await openRaw();
    tunnel.send(junk);
    await expectProtocolError(tunnel, /./);
    await expectEdgeServing(ready[2]);
  });

  test('a text message', async () => {
    const { tunnel, ready } = await openRaw();
    tunnel.send('{"type":"RESPONSE"}');
    await expectProtocolError(tunnel, /text messages/);
    await expectEdgeServing(ready[2]);
  });

  test('an unknown frame type', async () => {
    const { tunnel, ready } = await openRaw();
    tunnel.send(raw.pack([19, 1]));
    await expectProtocolError(tunnel, /unknown frame type 19/);
    await expectEdgeServing(ready[2]);
  });

  test('an edge-only frame of several tunnels (BOUND) from the client', async () => {
    const { tunnel, ready } = await openRaw();
    tunnel.send(raw.pack([15, 0, 1, '', '', 'x', 'https://x']));
    await expectProtocolError(tunnel, /a client may not send frame type 15/);
    await expectEdgeServing(ready[2]);
  });

  test("protocol 1's WebSocket frames (retired in protocol 2) end the tunnel, named as such", async () => {
    const { tunnel, ready } = await openRaw();
    tunnel.send(raw.pack([10, 1, Buffer.from('hi'), false, true]));
    await expectProtocolError(tunnel, /frame type 10 \(WS_MESSAGE\) is protocol 1's/);
    await expectEdgeServing(ready[2]);
  });

  test('a frame type only the edge sends', async () => {
    const { tunnel, ready } = await openRaw();
    tunnel.send(encode([FrameType.OPEN, 1, 'req_x', 'GET', '/', [], '127.0.0.1', null, true, false]));
    await expectProtocolError(tunnel, /may not send frame type 2/);
    await expectEdgeServing(ready[2]);
  });

  test('a frame with a wrong element count', async () => {
    const { tunnel, ready } = await openRaw();
    tunnel.send(raw.pack([FrameType.WINDOW, 0, 1024, 'extra']));
    await expectProtocolError(tunnel, /WINDOW frame has 4 elements, expected 3/);
    await expectEdgeServing(ready[2]);
  });

  test('a truncated frame', async () => {
    const { tunnel, ready } = await openRaw();
    const whole = encode([FrameType.RESET, 1, 1, 'cancelled']);
    tunnel.send(whole.subarray(0, whole.length - 3));
    await expectProtocolError(tunnel, /truncated/);
    await expectEdgeServing(ready[2]);
  });

  test('two frames in one message (trailing bytes)', async () => {
    const { tunnel, ready } = await openRaw();
    tunnel.send(Buffer.concat([encode([FrameType.WINDOW, 0, 1]), encode([FrameType.WINDOW, 0, 1])]));
    await expectProtocolError(tunnel, /trailing bytes/);
    await expectEdgeServing(ready[2]);
  });

  test('deeply nested input', async () => {
    const { tunnel, ready } = await openRaw();
    tunnel.send(Buffer.concat([Buffer.alloc(100 * 1024, 0x91), Buffer.from([0xc0])]));
    await expectProtocolError(tunnel, /nest/);
    await expectEdgeServing(ready[2]);
  });

  test('a RESPONSE for a stream the edge never opened', async () => {
    const { tunnel, ready } = await openRaw();
    tunnel.send(encode([FrameType.RESPONSE, 77, 200, '', [], Buffer.from('hi'), true]));
    await expectProtocolError(tunnel, /stream 77, which the edge never opened/);
    await expectEdgeServing(ready[2]);
  });

  test('a header that would split the public response head', async () => {
    const { tunnel, ready } = await openRaw();
    const { open, response } = await publicRequest(tunnel, ready[2]);
    tunnel.send(raw.pack([FrameType.RESPONSE, open[1], 200, '', ['x-a', 'b\r\nx-injected: 1'], Buffer.from('hi'), true]));
    await expectProtocolError(tunnel, /RESPONSE frame: element 4/);
    const answered = await response;
    assert.equal(answered.status, 502);
    assert.equal(answered.error, 'TUNNEL_CLOSED');
    await expectEdgeServing(ready[2]);
  });

  test('a connection WINDOW that overflows 2^31 - 1', async () => {
    const { tunnel, ready } = await openRaw();
    tunnel.send(encode([FrameType.WINDOW, 0, MAX_WINDOW]));
    await expectProtocolError(tunnel, /exceeds the maximum window/);
    await expectEdgeServing(ready[2]);
  });

  test('a stream WINDOW that overflows 2^31 - 1, with a request in flight (502 TUNNEL_CLOSED)', async () => {
    const { tunnel, ready } = await openRaw();
    const { open, response } = await publicRequest(tunnel, ready[2], 'x'.repeat(100));
    assert.equal(Buffer.from(open[7]!).toString(), 'x'.repeat(100), 'the fast path: the body inside OPEN');
    assert.equal(open[8], true);
    tunnel.send(encode([FrameType.WINDOW, open[1], MAX_WINDOW]));
    await expectProtocolError(tunnel, /exceeds the maximum window/);
    const answered = await response;
    assert.equal(answered.status, 502);
    assert.equal(answered.error, 'TUNNEL_CLOSED');
    assert.equal(JSON.parse(answered.text).error.code, 'TUNNEL_CLOSED');
    await expectEdgeServing(ready[2]);
  });

  test('a body chunk larger than maxFrameBody', async () => {
    const { tunnel, ready } = await openRaw();
    const { open, response } = await publicRequest(tunnel, ready[2]);
    tunnel.send(encode([FrameType.RESPONSE, open[1], 200, '', [], Buffer.alloc(DEFAULT_SETTINGS.maxFrameBody + 1, 0x61), true]));
    await expectProtocolError(tunnel, /exceeds maxFrameBody/);
    assert.equal((await response).status, 502);
    await expectEdgeServing(ready[2]);
  });

  test('body bytes beyond the stream window', async () => {
    // A stream window smaller than one frame's body, so one DATA frame is over it whatever the timing.
    const small = await startEdge({ settings: { streamWindow: 16 * 1024 } });
    try {
      const smallAccount = await createAccount(small, 'PRO');
      const { tunnel, ready } = await openRawTunnel(small, smallAccount.token);
      const response = request(`${small.base}/hook`, { headers: { host: `${ready[2]}.localhost:${small.port}` } }).then(
        (res) => res.body.text().then(() => res.statusCode),
        () => 0,
      );
      const open = await tunnel.next<OpenFrame>(FrameType.OPEN);
      tunnel.send(encode([FrameType.RESPONSE, open[1], 200, '', [], null, false]));
      tunnel.send(encode([FrameType.DATA, open[1], Buffer.alloc(16 * 1024 + 1), false]));
      await expectProtocolError(tunnel, /exceeded the window of stream/);
      await response; // the public side was mid-response: cut, or 502
    } finally {
      await small.close();
    }
  });

  test('a second RESPONSE on one stream resets that stream, not the tunnel', async () => {
    const { tunnel, ready } = await openRaw();
    const { open, response } = await publicRequest(tunnel, ready[2]);
    tunnel.send(encode([FrameType.RESPONSE, open[1], 200, '', [], null, false]));
    tunnel.send(encode([FrameType.RESPONSE, open[1], 200, '', [], null, true]));
    const reset = await tunnel.next<ResetFrame>(FrameType.RESET);
    assert.deepEqual(reset.slice(0, 3), [FrameType.RESET, open[1], ResetCode.PROTOCOL_ERROR]);
    assert.match(reset[3], /second RESPONSE/);
    const answered = await response;
    assert.equal(answered.status, 502);
    assert.equal(answered.error, 'INVALID_RESPONSE');
    assert.equal(await tunnel.barrier(), 'pong', 'the tunnel is still open');
    tunnel.ws.close(1000);
    await tunnel.closed;
    await expectEdgeServing(ready[2]);
  });

  test('a message larger than the WebSocket limit (the transport drops it without a reason)', async () => {
    const { tunnel, ready } = await openRaw();
    tunnel.send(Buffer.alloc(4 * 1024 * 1024 + 1));
    const closed = await tunnel.closed;
    // uWebSockets.js closes the connection itself above maxPayloadLength; no GOAWAY can be sent.
    assert.ok([PROTOCOL_ERROR_CLOSE, 1009, 1006].includes(closed.code), `closed with ${closed.code}`);
    await expectEdgeServing(ready[2]);
  });

  test(
    'a message larger than maxMessage but under the WebSocket limit',
    async () => {
      const { tunnel, ready } = await openRaw();
      const { open, response } = await publicRequest(tunnel, ready[2]);
      const headers: string[] = [];
      while (headers.length * 16 < DEFAULT_SETTINGS.maxMessage) headers.push('x-filler', 'v'.repeat(30));
      const frame = encode([FrameType.RESPONSE, open[1], 200, '', headers, null, true]);
      assert.ok(frame.byteLength > DEFAULT_SETTINGS.maxMessage && frame.byteLength < 4 * 1024 * 1024);
      tunnel.send(frame);
      const outcome = await tunnel.barrier();
      if (outcome === 'pong') tunnel.ws.terminate();
      await response;
      assert.equal(outcome, 'closed', 'the edge accepted a message over maxMessage');
      await expectProtocolError(tunnel, /maxMessage/);
    },
  );
});

// ---- refusals at the upgrade -----------------------------------------------------------------------

interface Refusal {
  status: number;
  headers: Record<string, unknown>;
  body: { error: { code: string; message: string } };
}

function refusal(query: string, headers: Record<string, string>): Promise<Refusal> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(connectUrl(query), { headers });
    ws.on('open', () => {
      ws.terminate();
      reject(new Error('the edge accepted the tunnel'));
    });
    ws.on('error', () => {
      // After unexpected-response, ws reports the aborted handshake; the response is what matters.
    });
    ws.on('unexpected-response', (_request, response) => {
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (text += chunk));
      response.on('end', () => {
        try {
          resolve({ status: response.statusCode ?? 0, headers: response.headers, body: JSON.parse(text) });
        } catch (error) {
          reject(new Error(`not the spec's error body: ${text} (${String(error)})`));
        }
      });
    });
  });
}

describe('the upgrade refuses with plain HTTP errors in the spec shape', () => {
  const cases: { name: string; query: string; headers: () => Record<string, string>; status: number; code: string; message: RegExp }[] = [
    {
      name: 'no burrow-protocol header',
      query: 'port=1234',
      headers: () => ({ host: `localhost:${target.port}`, authorization: `Bearer ${account.token}` }),
      status: 400,
      code: 'INVALID_REQUEST',
      message: /speaks tunnel protocol 2 and the client sent none; update the client/,
    },
    {
      name: 'a protocol 1 client',
      query: 'port=1234',
      headers: () => ({ ...tunnelHeaders(), [PROTOCOL_HEADER]: '1' }),
      status: 400,
      code: 'INVALID_REQUEST',
      message: /^This edge speaks tunnel protocol 2 and the client sent 1; update the client\.$/,
    },
    {
      name: 'a later protocol version',
      query: 'port=1234',
      headers: () => ({ ...tunnelHeaders(), [PROTOCOL_HEADER]: '3' }),
      status: 400,
      code: 'INVALID_REQUEST',
      message: /speaks tunnel protocol 2 and the client sent 3; update the client or the edge/,
    },
    {
      name: 'a bad token',
      query: 'port=1234',
      headers: () => tunnelHeaders('brw_not_a_real_token'),
      status: 401,
      code: 'UNAUTHORIZED',
      message: /token/i,
    },
    {
      name: 'no Authorization header',
      query: 'port=1234',
      headers: () => ({ host: `localhost:${target.port}`, [PROTOCOL_HEADER]: '2' }),
      status: 401,
      code: 'UNAUTHORIZED',
      message: /Authorization header is missing/,
    },
    // No port names no tunnel (every tunnel comes by BIND, issue 27): a subdomain on such a connect has nothing to name.
    { name: 'no port, a subdomain', query: 'subdomain=x-27', headers: () => tunnelHeaders(), status: 400, code: 'INVALID_REQUEST', message: /without "port" names no tunnel/ },
    { name: 'port 0', query: 'port=0', headers: () => tunnelHeaders(), status: 400, code: 'INVALID_REQUEST', message: /"port"/ },
    { name: 'port 65536', query: 'port=65536', headers: () => tunnelHeaders(), status: 400, code: 'INVALID_REQUEST', message: /"port"/ },
    { name: 'port not a number', query: 'port=http', headers: () => tunnelHeaders(), status: 400, code: 'INVALID_REQUEST', message: /"port"/ },
    {
      name: 'an invalid subdomain',
      query: 'port=1234&subdomain=-bad-',
      headers: () => tunnelHeaders(),
      status: 400,
      code: 'INVALID_REQUEST',
      message: /Invalid subdomain/,
    },
  ];

  for (const item of cases) {
    test(`${item.name}: ${item.status} ${item.code}`, async () => {
      const answer = await refusal(item.query, item.headers());
      assert.equal(answer.status, item.status);
      assert.equal(answer.body.error.code, item.code);
      assert.match(answer.body.error.message, item.message);
      assert.match(String(answer.headers['content-type']), /^application\/json/);
      if (item.status === 401) assert.match(String(answer.headers['www-authenticate']), /^Bearer/);
    });
  }

  test('at the public port, where protocol 1 connected: a protocol 1 client is told both versions, a protocol 2 client where to go', async () => {
    const atPublicPort = (version: string): Promise<Refusal> =>
      new Promise((resolve, reject) => {
        const ws = new WebSocket(`ws://127.0.0.1:${target.port}/api/v1/connect?port=1234`, { headers: { ...tunnelHeaders(), [PROTOCOL_HEADER]: version } });
        ws.on('open', () => reject(new Error('the public port accepted a tunnel')));
        ws.on('error', () => undefined);
        ws.on('unexpected-response', (_request, response) => {
          let text = '';
          response.on('data', (chunk: Buffer) => (text += chunk.toString()));
          response.on('end', () => resolve({ status: response.statusCode ?? 0, headers: response.headers, body: JSON.parse(text) }));
        });
      });
    const v1 = await atPublicPort('1');
    assert.equal(v1.status, 400);
    assert.equal(v1.body.error.message, 'This edge speaks tunnel protocol 2 and the client sent 1; update the client.');
    const v2 = await atPublicPort('2');
    assert.equal(v2.status, 404);
    assert.match(v2.body.error.message, new RegExp(`agent endpoint, ws://localhost:${target.edge.agentPort}/api/v1/connect`));
  });

  test('after the refusals, a correct upgrade still works', async () => {
    const { tunnel, ready } = await openRaw();
    tunnel.ws.close(1000);
    await tunnel.closed;
    await expectEdgeServing(ready[2]);
  });
});
