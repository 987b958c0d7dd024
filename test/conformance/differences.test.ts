/**
 * The conformance suite's own parts: its list of differences is docs/protocol.md's table, its parser
 * refuses what is not HTTP, and its normalisation removes the documented differences and nothing else.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { DIFFERENCES, normaliseRequest, normaliseResponse, type DifferenceId } from './differences.js';
import { parseExchange, WireError, type WireResponse } from './http-wire.js';
import type { RequestRecord } from './node-app.js';

const doc = readFileSync(new URL('../../../docs/protocol.md', import.meta.url), 'utf8');

test('the rules are the rows of docs/protocol.md "Differences from direct, by design", in order', () => {
  const start = doc.indexOf('## 16. Differences from direct, by design');
  assert.ok(start >= 0, 'the section exists');
  const end = doc.indexOf('\n## ', start + 1);
  const section = doc.slice(start, end < 0 ? undefined : end);
  const rows = [...section.matchAll(/^\| `([a-z0-9-]+)` \| (response|request|both) \|/gm)].map((match) => ({ id: match[1], direction: match[2] }));
  assert.deepEqual(rows, DIFFERENCES.map(({ id, direction }) => ({ id, direction })));
});

describe('the wire parser is strict', () => {
  const bad: [string, string][] = [
    ['a bare LF in the head', 'HTTP/1.1 200 OK\nContent-Length: 0\r\n\r\n'],
    ['an obs-fold continuation line', 'HTTP/1.1 200 OK\r\nX-A: 1\r\n 2\r\nContent-Length: 0\r\n\r\n'],
    ['Transfer-Encoding and Content-Length', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n'],
    ['two Content-Lengths', 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok'],
    ['a bad chunk size', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n'],
    ['a space before the colon', 'HTTP/1.1 200 OK\r\nX-A : 1\r\nContent-Length: 0\r\n\r\n'],
    ['not a status line', 'HTTP/2 200\r\n\r\n'],
    ['a body cut short', 'HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort'],
  ];
  for (const [name, bytes] of bad) {
    test(name, () => {
      assert.throws(() => parseExchange(Buffer.from(bytes, 'latin1'), true, ['GET']), WireError);
    });
  }

  test('1xx, chunked with trailers, Latin-1 values and a close-delimited body', () => {
    const bytes =
      'HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n' +
      'HTTP/1.1 200 OK\r\nX-Word: caf\xe9\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n0\r\nX-Sum: 1\r\n\r\n' +
      'HTTP/1.0 200 OK\r\n\r\nto the end';
    const { exchange, complete } = parseExchange(Buffer.from(bytes, 'latin1'), true, ['GET', 'GET']);
    assert.ok(complete);
    assert.deepEqual(exchange.interim.map((response) => response.status), [103]);
    const [chunked, closeDelimited] = exchange.responses;
    assert.deepEqual(chunked!.headers[0], ['X-Word', 'caf\xe9']);
    assert.equal(chunked!.body.toString(), 'abc');
    assert.deepEqual(chunked!.trailers, [['X-Sum', '1']]);
    assert.equal(closeDelimited!.framing, 'close');
    assert.equal(closeDelimited!.body.toString(), 'to the end');
  });

  test('a close-delimited body is not complete while the connection is open', () => {
    const { complete } = parseExchange(Buffer.from('HTTP/1.1 200 OK\r\n\r\npartial', 'latin1'), false, ['GET']);
    assert.equal(complete, false);
  });
});

function response(headers: [string, string][], body = 'ok', extra: Partial<WireResponse> = {}): WireResponse {
  return { version: '1.1', status: 200, reason: 'OK', headers, framing: 'content-length', body: Buffer.from(body), chunkSizes: [], trailers: [], ...extra };
}

const DIRECT: [string, string][] = [
  ['Content-Type', 'text/plain'],
  ['Set-Cookie', 'a=1'],
  ['Set-Cookie', 'b=2'],
  ['Date', 'Tue, 24 Nov 2026 10:00:00 GMT'],
  ['Connection', 'keep-alive'],
  ['Keep-Alive', 'timeout=5'],
  ['Content-Length', '2'],
];
const TUNNEL: [string, string][] = [
  ['content-type', 'text/plain'],
  ['set-cookie', 'a=1'],
  ['set-cookie', 'b=2'],
  ['Date', 'Tue, 24 Nov 2026 10:00:01 GMT'],
  ['uWebSockets', '20'],
  ['Content-Length', '2'],
];
const CONTEXT = { expectContinue: false, refusedUpgrade: false };

describe('the normalisation removes the documented differences and nothing else', () => {
  test('documented differences only: equal, and the rules that fired are named', () => {
    const fired = new Set<DifferenceId>();
    const compared = normaliseResponse(response(DIRECT), response(TUNNEL), CONTEXT, fired);
    assert.deepEqual(compared.tunnel, compared.direct);
    assert.deepEqual([...fired].sort(), ['date', 'field-name-case', 'hop-by-hop', 'uwebsockets-header']);
  });

  const broken: [string, [string, string][], Partial<WireResponse>][] = [
    ['a changed value byte', TUNNEL.map(([name, value]): [string, string] => [name, value === 'a=1' ? 'a=2' : value]), {}],
    ['a lost Set-Cookie', TUNNEL.filter(([, value]) => value !== 'b=2'), {}],
    ['Set-Cookies swapped', TUNNEL.map(([name, value]): [string, string] => [name, value === 'a=1' ? 'b=2' : value === 'b=2' ? 'a=1' : value]), {}],
    ['an extra field', [...TUNNEL, ['x-added', '1']], {}],
    ['a second Date', [...TUNNEL, ['Date', 'Tue, 24 Nov 2026 10:00:01 GMT']], {}],
    ['no uWebSockets mark (a different server answered)', TUNNEL.filter(([name]) => name !== 'uWebSockets'), {}],
    ['another status', TUNNEL, { status: 201, reason: 'Created' }],
    ['a non-standard reason phrase from the edge', TUNNEL, { reason: 'Fine' }],
    ['other body bytes', TUNNEL, { body: Buffer.from('OK') }],
    ['trailers from the edge', TUNNEL, { trailers: [['x-sum', '1']] }],
  ];
  for (const [name, headers, extra] of broken) {
    test(`${name} is a difference`, () => {
      const compared = normaliseResponse(response(DIRECT), response(headers, 'ok', extra), CONTEXT, new Set());
      assert.notDeepEqual(compared.tunnel, compared.direct);
    });
  }

  test('chunked in, Content-Length out, is framing; Content-Length in, chunked out, is not', () => {
    const chunked = response([['Transfer-Encoding', 'chunked'], ['Date', 'Tue, 24 Nov 2026 10:00:00 GMT']], 'ok', { framing: 'chunked', chunkSizes: [2] });
    const lengthOut = response([['Date', 'Tue, 24 Nov 2026 10:00:00 GMT'], ['uWebSockets', '20'], ['Content-Length', '2']]);
    const fired = new Set<DifferenceId>();
    const first = normaliseResponse(chunked, lengthOut, CONTEXT, fired);
    assert.deepEqual(first.tunnel, first.direct);
    assert.ok(fired.has('framing'));
    const chunkedOut = response([['Date', 'Tue, 24 Nov 2026 10:00:00 GMT'], ['uWebSockets', '20'], ['Transfer-Encoding', 'chunked']], 'ok', { framing: 'chunked', chunkSizes: [2] });
    const second = normaliseResponse(response(DIRECT), chunkedOut, CONTEXT, new Set());
    assert.notDeepEqual(second.tunnel, second.direct);
  });

  const record = (headers: [string, string][]): RequestRecord => ({ method: 'GET', target: '/', version: '1.1', headers, bodyLength: 0, bodySha256: 'e3b0' });
  const requestContext = { host: 'a.localhost:1', clientAddress: '127.0.0.1', websocket: false };

  test('a request: X-Forwarded-*, name case and the local hop\'s Connection are documented', () => {
    const fired = new Set<DifferenceId>();
    const compared = normaliseRequest(
      record([['Host', 'a.localhost:1'], ['X-Forwarded-For', '203.0.113.9'], ['Expect', '100-continue'], ['X-A', '1']]),
      record([['host', 'a.localhost:1'], ['connection', 'keep-alive'], ['x-a', '1'], ['x-forwarded-for', '203.0.113.9, 127.0.0.1'], ['x-forwarded-proto', 'http'], ['x-forwarded-host', 'a.localhost:1']]),
      requestContext,
      fired,
    );
    assert.deepEqual(compared.tunnel, compared.direct);
    assert.ok(fired.has('x-forwarded') && fired.has('expect') && fired.has('hop-by-hop'));
  });

  test('a request: a wrong X-Forwarded-For or a rewritten Host is a difference', () => {
    const direct = record([['Host', 'a.localhost:1']]);
    for (const tunnel of [
      record([['host', 'a.localhost:1'], ['x-forwarded-for', '10.0.0.1'], ['x-forwarded-proto', 'http'], ['x-forwarded-host', 'a.localhost:1']]),
      record([['host', 'localhost:3000'], ['x-forwarded-for', '127.0.0.1'], ['x-forwarded-proto', 'http'], ['x-forwarded-host', 'a.localhost:1']]),
    ]) {
      const compared = normaliseRequest(direct, tunnel, requestContext, new Set());
      assert.notDeepEqual(compared.tunnel, compared.direct);
    }
  });
});
