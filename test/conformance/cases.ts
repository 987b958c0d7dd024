/**
 * The conformance table: each row is one request (raw bytes) or WebSocket session, run directly against
 * a local app and through the tunnel. `expect` says what the row holds today:
 * - 'identical': equal once the documented differences (differences.ts) are removed;
 * - 'documented-difference': the tunnel does something else, written down in docs/protocol.md; the row
 *   checks exactly that;
 * - 'pending-fix': should be identical and is not yet (issue 12); reported as a todo until the fix lands,
 *   then flipped to 'identical'.
 */
import assert from 'node:assert/strict';
import type { HttpCase, HttpObservation, WebSocketCase } from './harness.js';

export type Expectation = 'identical' | 'documented-difference' | 'pending-fix';
export type AppName = 'node' | 'python' | 'node-ipv6';

export interface Case {
  name: string;
  app: AppName;
  expect: Expectation;
  /** What the row covers, or why it differs and where that is written down. */
  reason: string;
  spec: HttpCase | WebSocketCase;
  /**
   * 'subprocess': the tunnel for this row is a `burrow http` process of its own, so a client that
   * crashes fails this row only; the row also checks that the client is still running afterwards.
   */
  client?: 'in-process' | 'subprocess';
  /** documented-difference: what the tunnel answers instead, checked against both observations. */
  documented?: (direct: HttpObservation, tunnel: HttpObservation) => void;
}

const PARSER_LIMITS = 'docs/protocol.md, "What the edge\'s HTTP parser cannot carry"';
const DIFFERENCES_DOC = 'docs/protocol.md, "Differences from direct, by design"';

/** A request with the tunnel's Host and the given fields. */
function http(method: string, target: string, fields: string[] = [], body = ''): string {
  return `${method} ${target} HTTP/1.1\r\nHost: {host}\r\n${fields.map((field) => `${field}\r\n`).join('')}\r\n${body}`;
}

function get(target: string, ...fields: string[]): HttpCase {
  return { kind: 'http', request: http('GET', target, fields) };
}

function chunked(...chunks: string[]): string {
  return `${chunks.map((chunk) => `${chunk.length.toString(16)}\r\n${chunk}\r\n`).join('')}0\r\n\r\n`;
}

const FORM = 'name=Ada+Lovelace&email=ada%40example.com&message=' + 'x'.repeat(2000);
const UPLOAD = Buffer.alloc(200_000, 'burrow ').toString('latin1');
const ORDINARY_FIELDS = [
  'User-Agent: Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36',
  'Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8',
  'Accept-Language: en-GB,en;q=0.9',
  'Accept-Encoding: gzip, deflate, br',
  'Cookie: session=abc123; theme=dark',
  'Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.signature',
  'X-Request-Id: 7f1c9a2e-1b7d-4c5e-9a3f-2d8e6b4c1a0f',
  'X-Forwarded-For: 203.0.113.9',
  'Cache-Control: no-cache',
];
const MANY_FIELDS = (count: number): string[] => Array.from({ length: count }, (_, i) => `X-Field-${i}: value-${i}`);

/** The tunnel gives no answer (uWS drops the request unseen), or the status an edge that can answer uses. */
function answersNothingOr(status: number): (direct: HttpObservation, tunnel: HttpObservation) => void {
  return (direct, tunnel) => {
    assert.equal(direct.exchange.responses.length, 1, 'the app answers it directly');
    if (tunnel.exchange.received === 0) {
      assert.equal(tunnel.record, null, 'and the request never reached the app');
      return;
    }
    assert.equal(tunnel.error, null, tunnel.error ?? '');
    assert.equal(tunnel.exchange.responses[0]?.status, status, `the tunnel answers nothing or ${status}`);
  };
}

/** The app receives the field's value cut at its first byte outside ASCII (uWS's parser). */
function valueCut(name: string, value: string): (direct: HttpObservation, tunnel: HttpObservation) => void {
  return (direct, tunnel) => {
    assert.equal(tunnel.exchange.responses[0]?.status, direct.exchange.responses[0]?.status, 'the same status');
    const seen = tunnel.record?.headers.filter(([field]) => field.toLowerCase() === name).map(([, text]) => text);
    assert.deepEqual(seen, [value], `the app received ${name} cut at the first non-ASCII byte`);
  };
}

export const CASES: Case[] = [
  // ---- Node app: what already holds ------------------------------------------------------------------
  { name: 'GET with a Content-Length body', app: 'node', expect: 'identical', reason: 'the plain case', spec: get('/text') },
  {
    name: 'GET with a browser\'s fields, cookies, credentials and a proxy\'s X-Forwarded-For',
    app: 'node',
    expect: 'identical',
    reason: 'request fields arrive byte for byte; X-Forwarded-For is extended',
    spec: get('/text', ...ORDINARY_FIELDS),
  },
  {
    name: 'a target with percent-encoding, dot segments, a parameter and a query',
    app: 'node',
    expect: 'identical',
    reason: 'the request target is passed on as received',
    spec: get('/a%20b/./c/../d;p=1?q=%C3%A9&empty=&flag&x=a+b'),
  },
  { name: 'HEAD of a Content-Length resource', app: 'node', expect: 'identical', reason: 'no body, the same head', spec: { kind: 'http', request: http('HEAD', '/text') } },
  { name: 'a 1 MiB download (many frames)', app: 'node', expect: 'identical', reason: 'streaming within credit', spec: get('/bytes/1048576') },
  { name: 'a chunked response', app: 'node', expect: 'identical', reason: 'framing: chunked in, chunked out', spec: get('/chunked') },
  {
    name: 'a form POST with Content-Length',
    app: 'node',
    expect: 'identical',
    reason: 'the request body arrives whole',
    spec: { kind: 'http', request: http('POST', '/upload', ['Content-Type: application/x-www-form-urlencoded', `Content-Length: ${FORM.length}`], FORM) },
  },
  {
    name: 'a 200 kB upload with Content-Length',
    app: 'node',
    expect: 'identical',
    reason: 'a request body over one frame',
    spec: { kind: 'http', request: http('PUT', '/upload', ['Content-Type: application/octet-stream', `Content-Length: ${UPLOAD.length}`], UPLOAD) },
  },
  {
    name: 'a chunked upload',
    app: 'node',
    expect: 'identical',
    reason: 'hop-by-hop: the local hop frames the body itself',
    spec: { kind: 'http', request: http('POST', '/upload', ['Content-Type: text/plain', 'Transfer-Encoding: chunked'], chunked('first,', 'second,', 'x'.repeat(70_000))) },
  },
  {
    name: 'a chunked upload with a trailer field',
    app: 'node',
    expect: 'identical',
    reason: 'trailers: not carried',
    spec: { kind: 'http', request: http('POST', '/upload', ['Transfer-Encoding: chunked', 'Trailer: X-Checksum'], '5\r\nhello\r\n0\r\nX-Checksum: abc123\r\n\r\n') },
  },
  {
    name: 'an upload with Expect: 100-continue',
    app: 'node',
    expect: 'identical',
    reason: 'expect, interim-responses: the edge answers 100 itself',
    spec: { kind: 'http', request: http('POST', '/upload', ['Content-Type: text/plain', 'Expect: 100-continue', 'Content-Length: 11']), afterContinue: 'hello world' },
  },
  { name: 'HEAD of a chunked resource', app: 'node', expect: 'identical', reason: 'no body and no invented length', spec: { kind: 'http', request: http('HEAD', '/chunked') } },
  {
    name: 'a POST with an empty body',
    app: 'node',
    expect: 'identical',
    reason: 'Content-Length: 0 passes as it is',
    spec: { kind: 'http', request: http('POST', '/upload', ['Content-Length: 0']) },
  },
  { name: 'a byte range', app: 'node', expect: 'identical', reason: '206 with Content-Range', spec: get('/file', 'Range: bytes=10-19') },
  { name: 'a suffix byte range', app: 'node', expect: 'identical', reason: '206 with Content-Range', spec: get('/file', 'Range: bytes=-5') },
  { name: 'an unsatisfiable range', app: 'node', expect: 'identical', reason: '416', spec: get('/file', 'Range: bytes=99999-') },
  { name: 'If-Range with a stale validator', app: 'node', expect: 'identical', reason: 'the whole resource, 200', spec: get('/file', 'Range: bytes=0-3', 'If-Range: "old"') },
  { name: 'If-None-Match with the current ETag', app: 'node', expect: 'identical', reason: '304 without a body', spec: get('/file', 'If-None-Match: "v1-3600"') },
  { name: 'HEAD of a file', app: 'node', expect: 'identical', reason: 'validators and length, no body', spec: { kind: 'http', request: http('HEAD', '/file') } },
  { name: 'a gzip body', app: 'node', expect: 'identical', reason: 'compressed bytes pass undecoded', spec: get('/gzip', 'Accept-Encoding: gzip') },
  { name: 'a brotli body', app: 'node', expect: 'identical', reason: 'compressed bytes pass undecoded', spec: get('/br', 'Accept-Encoding: br') },
  { name: 'a 301 redirect', app: 'node', expect: 'identical', reason: 'Location untouched', spec: get('/redirect/301') },
  { name: 'a 302 redirect', app: 'node', expect: 'identical', reason: 'Location untouched', spec: get('/redirect/302') },
  { name: 'a 307 redirect', app: 'node', expect: 'identical', reason: 'Location untouched', spec: get('/redirect/307') },
  { name: 'a 308 redirect', app: 'node', expect: 'identical', reason: 'Location untouched', spec: get('/redirect/308') },
  { name: 'three Set-Cookie fields among others', app: 'node', expect: 'identical', reason: 'never joined, order kept', spec: get('/cookies') },
  { name: '204 No Content', app: 'node', expect: 'identical', reason: 'no body, no length', spec: get('/status/204') },
  { name: '304 Not Modified', app: 'node', expect: 'identical', reason: 'no body', spec: get('/status/304') },
  { name: '404 with an empty body', app: 'node', expect: 'identical', reason: 'Content-Length: 0', spec: get('/status/404') },
  { name: '500 with an empty body', app: 'node', expect: 'identical', reason: 'an app error is not the edge\'s', spec: get('/status/500') },
  { name: 'DELETE', app: 'node', expect: 'identical', reason: 'one of the common eight', spec: { kind: 'http', request: http('DELETE', '/items/1') } },
  { name: 'OPTIONS', app: 'node', expect: 'identical', reason: 'one of the common eight', spec: { kind: 'http', request: http('OPTIONS', '/items', ['Origin: https://app.example', 'Access-Control-Request-Method: PUT']) } },
  {
    name: 'PATCH with a JSON body',
    app: 'node',
    expect: 'identical',
    reason: 'one of the common eight',
    spec: { kind: 'http', request: http('PATCH', '/items/1', ['Content-Type: application/json', 'Content-Length: 13'], '{"done":true}') },
  },
  { name: 'server-sent events', app: 'node', expect: 'identical', reason: 'events stream before the response ends', spec: { ...get('/sse?id=node'), release: 'data: lines' } },
  { name: '60 response fields', app: 'node', expect: 'identical', reason: 'no limit on response fields', spec: get('/many-headers') },
  { name: '40 request fields', app: 'node', expect: 'identical', reason: 'under uWS\'s limit', spec: get('/text', ...MANY_FIELDS(40)) },
  { name: 'a response with trailers', app: 'node', expect: 'identical', reason: 'trailers: not carried', spec: get('/raw/trailers', 'TE: trailers') },
  { name: 'a chunk extension in the response', app: 'node', expect: 'identical', reason: 'framing: the edge chunks on its own', spec: get('/raw/chunk-extensions') },
  { name: '103 Early Hints before the response', app: 'node', expect: 'identical', reason: 'interim-responses: not carried', spec: get('/raw/early-hints') },
  { name: 'a custom reason phrase', app: 'node', expect: 'identical', reason: 'status-line: the standard phrase', spec: get('/raw/reason-phrase') },
  { name: 'an unregistered status code', app: 'node', expect: 'identical', reason: 'status-line: any code 100 to 999', spec: get('/raw/unknown-status') },
  { name: 'Connection naming a field', app: 'node', expect: 'identical', reason: 'hop-by-hop: the named field is dropped', spec: get('/raw/connection-named') },
  {
    name: 'a small close-delimited response',
    app: 'node',
    expect: 'identical',
    reason: 'framing: close-delimited in, chunked out',
    spec: get('/raw/close-delimited'),
  },
  {
    name: 'spaces, tabs, an empty value and every symbol in response fields',
    app: 'node',
    expect: 'identical',
    reason: 'field values are opaque bytes',
    spec: get('/raw/obs-text-and-spaces'),
  },

  // ---- Node app: issue 12's findings -----------------------------------------------------------------
  {
    name: 'a Latin-1 byte in a response field value',
    app: 'node',
    expect: 'identical',
    reason: 'issue 12 finding 5: response field values cross byte-exact (caf\\xE9 stays caf\\xE9)',
    spec: get('/raw/latin1-header'),
  },
  {
    name: 'a UTF-8 filename in Content-Disposition',
    app: 'node',
    expect: 'identical',
    reason: 'issue 12 finding 5: the UTF-8 bytes are not encoded again',
    spec: get('/raw/utf8-disposition'),
  },
  {
    name: '5 MB downloads from a server that closes after each response',
    app: 'node',
    expect: 'identical',
    reason: 'issue 12 finding 1: a local server that closes the connection after each response',
    spec: { ...get('/bytes/5000000?close'), repeat: 3 },
    client: 'subprocess',
  },
  {
    name: 'two pipelined GETs',
    app: 'node',
    expect: 'documented-difference',
    reason: `uWS 20.30 aborts a pending response when the next request arrives behind it and closes the connection; every tunnelled response is pending (${PARSER_LIMITS})`,
    spec: { kind: 'http', request: http('GET', '/text') + http('GET', '/text?second'), methods: ['GET', 'GET'], timeoutMs: 1_000 },
    documented: (direct, tunnel) => {
      assert.equal(direct.exchange.responses.length, 2, 'the app answers both directly');
      assert.equal(tunnel.exchange.received, 0, 'the tunnel answers neither');
    },
  },
  {
    name: 'a Latin-1 byte in a request field value',
    app: 'node',
    expect: 'documented-difference',
    reason: `uWS 20.30 cuts a request field value at its first non-ASCII byte (${PARSER_LIMITS})`,
    spec: get('/text', 'X-Word: caf\xe9'),
    documented: valueCut('x-word', 'caf'),
  },
  {
    name: 'UTF-8 in a request field value',
    app: 'node',
    expect: 'documented-difference',
    reason: `uWS 20.30 cuts a request field value at its first non-ASCII byte (${PARSER_LIMITS})`,
    spec: get('/text', 'X-Word: caf\xc3\xa9'),
    documented: valueCut('x-word', 'caf'),
  },
  {
    name: 'a request field value of only a non-ASCII character',
    app: 'node',
    expect: 'documented-difference',
    reason: `uWS 20.30 cuts a request field value at its first non-ASCII byte (${PARSER_LIMITS})`,
    spec: get('/text', 'X-Mark: \xe2\x9c\x93'),
    documented: valueCut('x-mark', ''),
  },
  {
    name: 'an HTTP/1.0 request',
    app: 'node',
    expect: 'documented-difference',
    reason: `uWS 20.30 drops HTTP/1.0 unseen (${PARSER_LIMITS})`,
    spec: { kind: 'http', request: 'GET /text HTTP/1.0\r\nHost: {host}\r\n\r\n', timeoutMs: 1_000 },
    documented: answersNothingOr(505),
  },
  {
    name: 'an absolute-form target',
    app: 'node',
    expect: 'documented-difference',
    reason: `uWS 20.30 drops absolute-form targets unseen (${PARSER_LIMITS})`,
    spec: { kind: 'http', request: 'GET http://{host}/text HTTP/1.1\r\nHost: {host}\r\n\r\n', timeoutMs: 1_000 },
    documented: answersNothingOr(400),
  },
  {
    name: 'an HTTP/1.1 request without Host',
    app: 'node',
    expect: 'documented-difference',
    reason: `without Host no tunnel is named, and uWS 20.30 drops it unseen (${PARSER_LIMITS})`,
    spec: { kind: 'http', request: 'GET /text HTTP/1.1\r\nX-No-Host: yes\r\n\r\n', timeoutMs: 1_000 },
    documented: answersNothingOr(400),
  },
  {
    name: 'OPTIONS * (the asterisk-form target)',
    app: 'node',
    expect: 'documented-difference',
    reason: `no uWS 20.30 route matches a target without a leading slash: the request is held unanswered (${PARSER_LIMITS})`,
    spec: { kind: 'http', request: http('OPTIONS', '*'), timeoutMs: 1_000 },
    documented: answersNothingOr(400),
  },
  {
    name: 'a WebDAV method (PROPFIND)',
    app: 'node',
    expect: 'documented-difference',
    reason: `uWS 20.30 drops methods outside its known set unseen (${PARSER_LIMITS})`,
    spec: { kind: 'http', request: http('PROPFIND', '/dav/', ['Depth: 1', 'Content-Length: 0']), timeoutMs: 1_000 },
    documented: answersNothingOr(501),
  },
  // The rest of issue 12's list of methods outside uWS's set, and a made-up token.
  ...['PROPPATCH', 'MKCOL', 'COPY', 'MOVE', 'LOCK', 'UNLOCK', 'REPORT', 'SEARCH', 'PURGE', 'QUERY', 'MKCALENDAR', 'FOO-BAR'].map(
    (method): Case => ({
      name: `the method ${method}`,
      app: 'node',
      expect: 'documented-difference',
      reason: `uWS 20.30 drops methods outside its known set unseen (${PARSER_LIMITS})`,
      spec: { kind: 'http', request: http(method, '/dav/item'), timeoutMs: 1_000 },
      documented: answersNothingOr(501),
    }),
  ),
  {
    name: 'a chunk extension in a chunked upload',
    app: 'node',
    expect: 'documented-difference',
    reason: `uWS 20.30 closes the connection on a request chunk extension (${PARSER_LIMITS})`,
    spec: { kind: 'http', request: http('POST', '/upload', ['Transfer-Encoding: chunked'], '6;ext=1\r\nfirst,\r\n0\r\n\r\n'), timeoutMs: 1_000 },
    documented: answersNothingOr(400),
  },
  {
    name: '60 request fields',
    app: 'node',
    expect: 'documented-difference',
    reason: `uWS 20.30 drops requests with more than about 48 field lines unseen (${PARSER_LIMITS})`,
    spec: { ...get('/text', ...MANY_FIELDS(60)), timeoutMs: 1_000 },
    documented: answersNothingOr(431),
  },

  // ---- WebSockets (Node app; python3 has no WebSocket server in its standard library) ----------------
  {
    name: 'WebSocket: a subprotocol chosen, text, binary and empty messages, the client closes with 4000',
    app: 'node',
    expect: 'identical',
    reason: 'issue 12 finding 6: the upgrade keeps the public Host',
    spec: {
      kind: 'websocket',
      path: '/chat?room=1',
      protocols: ['chat.v2', 'chat.v1'],
      headers: { Origin: 'https://app.example', Cookie: 'session=abc123' },
      send: [
        { data: 'hello', binary: false },
        { data: 'caf\xe9 \x00\xff', binary: true },
        { data: '', binary: false },
        { data: 'd\u00e9j\u00e0 vu \u2713', binary: false },
      ],
      close: { by: 'client', code: 4000, reason: 'done' },
    },
  },
  {
    name: 'WebSocket: no subprotocol, the server closes with 4001 and a reason',
    app: 'node',
    expect: 'identical',
    reason: 'issue 12 finding 6: the upgrade keeps the public Host',
    spec: { kind: 'websocket', path: '/plain', protocols: [], send: [{ data: 'ping', binary: false }], close: { by: 'server', code: 4001, reason: 'server says bye' } },
  },
  {
    name: 'WebSocket: a 300 kB binary message, closed normally',
    app: 'node',
    expect: 'identical',
    reason: 'issue 12 finding 6: the upgrade keeps the public Host',
    spec: { kind: 'websocket', path: '/big', protocols: ['chat.v1'], send: [{ data: Buffer.alloc(300_000, 'ws').toString('latin1'), binary: true }], close: { by: 'client', code: 1000, reason: '' } },
  },
  {
    name: 'WebSocket: an upgrade the app refuses with 403',
    app: 'node',
    expect: 'identical',
    reason: `websocket-refusal (${DIFFERENCES_DOC}); issue 12 finding 6: the upgrade keeps the public Host`,
    spec: {
      kind: 'http',
      request: http('GET', '/ws-refuse', ['Upgrade: websocket', 'Connection: Upgrade', 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==', 'Sec-WebSocket-Version: 13', 'Origin: https://evil.example']),
    },
  },

  // ---- Node app on ::1 only ---------------------------------------------------------------------------
  {
    name: 'an app listening on ::1 only',
    app: 'node-ipv6',
    expect: 'identical',
    reason: 'issue 12 finding 7: localhost is dialled over IPv4 and IPv6',
    spec: get('/text'),
  },

  // ---- python3 -m http.server's handler (HTTP/1.0, closes after every response) -----------------------
  { name: 'GET with a Content-Length body', app: 'python', expect: 'identical', reason: 'status-line: HTTP/1.0 in, HTTP/1.1 out', spec: get('/text') },
  { name: 'HEAD', app: 'python', expect: 'identical', reason: 'no body', spec: { kind: 'http', request: http('HEAD', '/text') } },
  { name: 'a static file', app: 'python', expect: 'identical', reason: 'SimpleHTTPRequestHandler: Last-Modified, Content-type', spec: get('/files/small.txt') },
  {
    name: 'a static file, If-Modified-Since',
    app: 'python',
    expect: 'identical',
    reason: '304 without a body',
    spec: get('/files/small.txt', 'If-Modified-Since: Fri, 01 Jan 2100 00:00:00 GMT'),
  },
  { name: 'HEAD of a static file', app: 'python', expect: 'identical', reason: 'the file\'s length, no body', spec: { kind: 'http', request: http('HEAD', '/files/small.txt') } },
  { name: 'a Range request to a handler without ranges', app: 'python', expect: 'identical', reason: 'the whole file, 200', spec: get('/files/small.txt', 'Range: bytes=0-3') },
  { name: 'a directory listing', app: 'python', expect: 'identical', reason: 'HTML, Content-Length', spec: get('/files/') },
  { name: 'a missing file', app: 'python', expect: 'identical', reason: '404 with an HTML body', spec: get('/files/missing.txt') },
  { name: 'a directory without its slash', app: 'python', expect: 'identical', reason: '301 to the slash', spec: get('/files/sub') },
  { name: 'a close-delimited body', app: 'python', expect: 'identical', reason: 'framing: close-delimited in, chunked out', spec: get('/close-delimited') },
  {
    name: 'a form POST with Content-Length',
    app: 'python',
    expect: 'identical',
    reason: 'the request body arrives whole',
    spec: { kind: 'http', request: http('POST', '/upload', ['Content-Type: application/x-www-form-urlencoded', `Content-Length: ${FORM.length}`], FORM) },
  },
  {
    name: 'a chunked upload',
    app: 'python',
    expect: 'identical',
    reason: 'hop-by-hop: the local hop frames the body itself',
    spec: { kind: 'http', request: http('POST', '/upload', ['Transfer-Encoding: chunked'], chunked('a', 'bb', 'x'.repeat(70_000))) },
  },
  {
    name: 'an upload with Expect: 100-continue',
    app: 'python',
    expect: 'identical',
    reason: 'interim-responses: the edge answers 100, an HTTP/1.0 handler does not',
    spec: { kind: 'http', request: http('POST', '/upload', ['Expect: 100-continue', 'Content-Length: 11']), afterContinue: 'hello world' },
  },
  { name: 'two Set-Cookie fields', app: 'python', expect: 'identical', reason: 'never joined', spec: get('/cookies') },
  { name: 'a 302 redirect', app: 'python', expect: 'identical', reason: 'Location untouched', spec: get('/redirect/302') },
  { name: '204 No Content', app: 'python', expect: 'identical', reason: 'no body', spec: get('/status/204') },
  { name: '304 Not Modified', app: 'python', expect: 'identical', reason: 'no body', spec: get('/status/304') },
  { name: 'server-sent events', app: 'python', expect: 'identical', reason: 'a close-delimited stream, events before the end', spec: { ...get('/sse?id=python'), release: 'data: two' } },
  {
    name: 'a Latin-1 byte in a response field value (send_header)',
    app: 'python',
    expect: 'identical',
    reason: 'issue 12 finding 5: response field values cross byte-exact',
    spec: get('/latin1-header'),
  },
  {
    name: '5 MB file downloads',
    app: 'python',
    expect: 'identical',
    reason: 'issue 12 finding 1: a local server that closes the connection after each response',
    spec: { ...get('/files/big.bin'), repeat: 3 },
    client: 'subprocess',
  },
  {
    name: 'a WebDAV method (PROPFIND)',
    app: 'python',
    expect: 'documented-difference',
    reason: `uWS 20.30 drops methods outside its known set unseen (${PARSER_LIMITS})`,
    spec: { kind: 'http', request: http('PROPFIND', '/dav/', ['Depth: 1']), timeoutMs: 1_000 },
    documented: answersNothingOr(501),
  },
  {
    name: 'an HTTP/1.0 request',
    app: 'python',
    expect: 'documented-difference',
    reason: `uWS 20.30 drops HTTP/1.0 unseen (${PARSER_LIMITS})`,
    spec: { kind: 'http', request: 'GET /text HTTP/1.0\r\nHost: {host}\r\n\r\n', timeoutMs: 1_000 },
    documented: answersNothingOr(505),
  },
];
