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
  ['X-Thing', 'caf\xe9'],
  ['Set-Cookie', 'b=2'],
  ['Date', 'Tue, 24 Nov 2026 10:00:00 GMT'],
  ['Connection', 'keep-alive'],
  ['Keep-Alive', 'timeout=5'],
  ['Content-Length', '2'],
];
const TUNNEL: [string, string][] = [
  ['Content-Type', 'text/plain'],
  ['Set-Cookie', 'a=1'],
  ['X-Thing', 'caf\xe9'],
  ['Set-Cookie', 'b=2'],
  ['Date', 'Tue, 24 Nov 2026 10:00:01 GMT'],
  ['Content-Length', '2'],
  ['Connection', 'keep-alive'],
];

describe('the normalisation removes the documented differences and nothing else', () => {
  test('documented differences only: equal, and the rules that fired are named', () => {
    const fired = new Set<DifferenceId>();
    const compared = normaliseResponse(response(DIRECT), response(TUNNEL), fired);
    assert.deepEqual(compared.tunnel, compared.direct);
    assert.deepEqual([...fired].sort(), ['hop-by-hop']);
  });

  test('an HTTP/1.0 answer is HTTP/1.1 through the tunnel (status-line), its reason phrase kept', () => {
    const fired = new Set<DifferenceId>();
    const compared = normaliseResponse(response(DIRECT, 'ok', { version: '1.0', reason: 'Fine' }), response(TUNNEL, 'ok', { reason: 'Fine' }), fired);
    assert.deepEqual(compared.tunnel, compared.direct);
    assert.ok(fired.has('status-line'));
  });

  const broken: [string, [string, string][], Partial<WireResponse>][] = [
    ['a changed value byte', TUNNEL.map(([name, value]): [string, string] => [name, value === 'a=1' ? 'a=2' : value]), {}],
    ['a lost Set-Cookie', TUNNEL.filter(([, value]) => value !== 'b=2'), {}],
    ['Set-Cookies swapped', TUNNEL.map(([name, value]): [string, string] => [name, value === 'a=1' ? 'b=2' : value === 'b=2' ? 'a=1' : value]), {}],
    ['fields of different names reordered', [TUNNEL[2]!, ...TUNNEL.filter((_, i) => i !== 2)], {}],
    ['a name in another case', TUNNEL.map(([name, value]): [string, string] => [name === 'X-Thing' ? 'x-thing' : name, value]), {}],
    ['a Latin-1 byte turned into UTF-8', TUNNEL.map(([name, value]): [string, string] => [name, value === 'caf\xe9' ? 'caf\xc3\xa9' : value]), {}],
    ['an extra field', [...TUNNEL, ['x-added', '1']], {}],
    ['uWebSockets: 20 added', [...TUNNEL, ['uWebSockets', '20']], {}],
    ['a Date not an IMF-fixdate', TUNNEL.map(([name, value]): [string, string] => [name, name === 'Date' ? 'yesterday' : value]), {}],
    ['a lost Date', TUNNEL.filter(([name]) => name !== 'Date'), {}],
    ['another status', TUNNEL, { status: 201, reason: 'Created' }],
    ['another reason phrase', TUNNEL, { reason: 'Fine' }],
    ['HTTP/1.0 from the edge', TUNNEL, { version: '1.0' }],
    ['other body bytes', TUNNEL, { body: Buffer.from('OK') }],
    ['trailers added', TUNNEL, { trailers: [['x-sum', '1']] }],
  ];
  for (const [name, headers, extra] of broken) {
    test(`${name} is a difference`, () => {
      const compared = normaliseResponse(response(DIRECT), response(headers, 'ok', extra), new Set());
      assert.notDeepEqual(compared.tunnel, compared.direct);
    });
  }

  test('chunked in, Content-Length out, is framing; Content-Length in, chunked out, is not', () => {
    const chunked = response([['Transfer-Encoding', 'chunked'], ['Date', 'Tue, 24 Nov 2026 10:00:00 GMT']], 'ok', { framing: 'chunked', chunkSizes: [2] });
    const lengthOut = response([['Date', 'Tue, 24 Nov 2026 10:00:00 GMT'], ['Content-Length', '2']]);
    const fired = new Set<DifferenceId>();
    const first = normaliseResponse(chunked, lengthOut, fired);
    assert.deepEqual(first.tunnel, first.direct);
    assert.ok(fired.has('framing'));
    const chunkedOut = response([['Content-Type', 'text/plain'], ['Date', 'Tue, 24 Nov 2026 10:00:00 GMT'], ['Transfer-Encoding', 'chunked']], 'ok', { framing: 'chunked', chunkSizes: [2] });
    const second = normaliseResponse(response(DIRECT), chunkedOut, new Set());
    assert.notDeepEqual(second.tunnel, second.direct);
  });

  test('trailers must arrive as sent', () => {
    const trailers: [string, string][] = [['X-Checksum', 'abc']];
    const direct = response([['Transfer-Encoding', 'chunked']], 'ok', { framing: 'chunked', chunkSizes: [2], trailers });
    const same = normaliseResponse(direct, response([['Transfer-Encoding', 'chunked']], 'ok', { framing: 'chunked', chunkSizes: [2], trailers }), new Set());
    assert.deepEqual(same.tunnel, same.direct);
    const lost = normaliseResponse(direct, response([['Transfer-Encoding', 'chunked']], 'ok', { framing: 'chunked', chunkSizes: [2] }), new Set());
    assert.notDeepEqual(lost.tunnel, lost.direct);
  });

  const record = (headers: [string, string][], extra: Partial<RequestRecord> = {}): RequestRecord => ({ method: 'GET', target: '/', version: '1.1', headers, bodyLength: 0, bodySha256: 'e3b0', ...extra });
  const requestContext = { host: 'a.localhost:1', clientAddress: '127.0.0.1', upgrade: false };
  const FORWARDED: [string, string][] = [['X-Forwarded-For', '203.0.113.9, 127.0.0.1'], ['X-Forwarded-Proto', 'http'], ['X-Forwarded-Host', 'a.localhost:1']];

  test("a request: X-Forwarded-*, HTTP/1.0 and the absolute-form, and the public client's Connection are documented", () => {
    const fired = new Set<DifferenceId>();
    const compared = normaliseRequest(
      record([['Host', 'a.localhost:1'], ['X-Forwarded-For', '203.0.113.9'], ['Connection', 'keep-alive'], ['Expect', '100-continue'], ['X-A', '1']], { version: '1.0', target: 'http://a.localhost:1/x?y' }),
      record([['Host', 'a.localhost:1'], ['Expect', '100-continue'], ['X-A', '1'], ...FORWARDED], { target: '/x?y' }),
      requestContext,
      fired,
    );
    assert.deepEqual(compared.tunnel, compared.direct);
    assert.deepEqual([...fired].sort(), ['hop-by-hop', 'request-line', 'x-forwarded']);
  });

  test('a request: a wrong X-Forwarded-For, a rewritten Host, a lost Expect, a lower-cased name or lost trailers are differences', () => {
    const direct = record([['Host', 'a.localhost:1'], ['Expect', '100-continue']], { trailers: [['X-Sum', '1']] });
    const good = record([['Host', 'a.localhost:1'], ['Expect', '100-continue'], ...FORWARDED.slice(1), ['X-Forwarded-For', '127.0.0.1']], { trailers: [['X-Sum', '1']] });
    assert.deepEqual(normaliseRequest(direct, good, requestContext, new Set()).tunnel.problems, []);
    for (const tunnel of [
      record([['Host', 'a.localhost:1'], ['Expect', '100-continue'], ['X-Forwarded-For', '10.0.0.1'], ...FORWARDED.slice(1)], { trailers: [['X-Sum', '1']] }),
      record([['Host', 'localhost:3000'], ['Expect', '100-continue'], ['X-Forwarded-For', '127.0.0.1'], ...FORWARDED.slice(1)], { trailers: [['X-Sum', '1']] }),
      record([['Host', 'a.localhost:1'], ['X-Forwarded-For', '127.0.0.1'], ...FORWARDED.slice(1)], { trailers: [['X-Sum', '1']] }),
      record([['host', 'a.localhost:1'], ['Expect', '100-continue'], ['X-Forwarded-For', '127.0.0.1'], ...FORWARDED.slice(1)], { trailers: [['X-Sum', '1']] }),
      record([['Host', 'a.localhost:1'], ['Expect', '100-continue'], ['X-Forwarded-For', '127.0.0.1'], ...FORWARDED.slice(1)], { trailers: [] }),
    ]) {
      const compared = normaliseRequest(direct, tunnel, requestContext, new Set());
      assert.notDeepEqual(compared.tunnel, compared.direct);
    }
  });
});
