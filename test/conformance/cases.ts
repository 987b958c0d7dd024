/**
 * The conformance table: each row is one request (raw bytes) or WebSocket session, run directly against
 * a local app and through the tunnel. `expect` says what the row holds:
 * - 'identical': equal once the documented differences (differences.ts, docs/protocol.md section 16)
 *   are removed;
 * - 'documented-difference': the tunnel does something else on purpose, written down in
 *   docs/protocol.md section 17; the row checks exactly that.
 */
import assert from 'node:assert/strict';
import type { HttpCase, HttpObservation, WebSocketCase } from './harness.js';

export type Expectation = 'identical' | 'documented-difference';
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

const REFUSED = 'docs/protocol.md section 17, "What the edge refuses and why"';

/** A request with the tunnel's Host and the given fields. */
function http(method: string, target: string, fields: string[] = [], body = '', version = '1.1'): string {
  return `${method} ${target} HTTP/${version}\r\nHost: {host}\r\n${fields.map((field) => `${field}\r\n`).join('')}\r\n${body}`;
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
const WEBSOCKET_HANDSHAKE = ['Upgrade: websocket', 'Connection: Upgrade', 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==', 'Sec-WebSocket-Version: 13'];
/** Methods outside the common eight that llhttp knows (WebDAV, CalDAV, caches, the QUERY draft). */
const OTHER_METHODS = ['PROPFIND', 'PROPPATCH', 'MKCOL', 'COPY', 'MOVE', 'LOCK', 'UNLOCK', 'REPORT', 'SEARCH', 'PURGE', 'QUERY', 'MKCALENDAR'];

/** The edge answers `status` itself, and the request never reaches the app; directly the app answers `directStatus`. */
function refusedWith(status: number, directStatus: number): (direct: HttpObservation, tunnel: HttpObservation) => void {
  return (direct, tunnel) => {
    assert.equal(direct.exchange.responses[0]?.status, directStatus, `the app answers ${directStatus} directly`);
    assert.equal(tunnel.error, null, tunnel.error ?? '');
    assert.equal(tunnel.exchange.responses[0]?.status, status, `the edge answers ${status}`);
    assert.equal(tunnel.record, null, 'the request never reached the app through the tunnel');
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
    reason: 'request trailers reach the app after the body',
    spec: { kind: 'http', request: http('POST', '/upload', ['Transfer-Encoding: chunked', 'Trailer: X-Checksum'], '5\r\nhello\r\n0\r\nX-Checksum: abc123\r\n\r\n') },
  },
  {
    name: 'an upload with Expect: 100-continue',
    app: 'node',
    expect: 'identical',
    reason: 'Expect reaches the app, and its 100 Continue comes back before the body is sent',
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
  { name: '40 request fields', app: 'node', expect: 'identical', reason: 'many request fields, in order', spec: get('/text', ...MANY_FIELDS(40)) },
  { name: 'a response with trailers', app: 'node', expect: 'identical', reason: 'response trailers reach the public client', spec: get('/raw/trailers', 'TE: trailers') },
  { name: 'a chunk extension in the response', app: 'node', expect: 'identical', reason: 'framing: the edge chunks on its own', spec: get('/raw/chunk-extensions') },
  { name: '103 Early Hints before the response', app: 'node', expect: 'identical', reason: 'interim responses are carried (INFO)', spec: get('/raw/early-hints') },
  { name: '102 Processing, then 103 Early Hints, then the response', app: 'node', expect: 'identical', reason: 'any number of interim responses, in order', spec: get('/raw/processing') },
  { name: 'a custom reason phrase', app: 'node', expect: 'identical', reason: "the local server's reason phrase is carried", spec: get('/raw/reason-phrase') },
  { name: 'an unregistered status code', app: 'node', expect: 'identical', reason: 'any code 100 to 999, with its reason phrase', spec: get('/raw/unknown-status') },
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
    name: 'a response with field names in odd case',
    app: 'node',
    expect: 'identical',
    reason: 'field names keep their case, all fields their order',
    spec: get('/raw/mixed-case', 'x-lower-case: 1', 'X-UPPER-CASE: 2', 'X-Mixed-Case: 3'),
  },

  // ---- what the edge's parser used to refuse (issue 12, issue 24) --------------------------------------
  {
    name: 'two pipelined GETs',
    app: 'node',
    expect: 'identical',
    reason: 'pipelined requests are answered in order on the connection',
    spec: { kind: 'http', request: http('GET', '/text') + http('GET', '/text?second'), methods: ['GET', 'GET'] },
  },
  {
    name: 'five pipelined requests of every kind',
    app: 'node',
    expect: 'identical',
    reason: 'a body, HEAD, a chunked answer and a long one behind each other, answered in order',
    spec: {
      kind: 'http',
      request:
        http('GET', '/bytes/100000') +
        http('POST', '/upload', ['Content-Length: 11'], 'hello world') +
        http('HEAD', '/file') +
        http('GET', '/chunked') +
        http('GET', '/text?last'),
      methods: ['GET', 'POST', 'HEAD', 'GET', 'GET'],
    },
  },
  {
    name: 'a Latin-1 byte in a request field value',
    app: 'node',
    expect: 'identical',
    reason: 'request field values reach the app byte for byte',
    spec: get('/text', 'X-Word: caf\xe9'),
  },
  {
    name: 'UTF-8 in a request field value',
    app: 'node',
    expect: 'identical',
    reason: 'request field values reach the app byte for byte',
    spec: get('/text', 'X-Word: caf\xc3\xa9', 'X-Mark: \xe2\x9c\x93', 'X-Mixed: a\xe2\x9c\x93b caf\xe9'),
  },
  {
    name: 'an HTTP/1.0 request',
    app: 'node',
    expect: 'identical',
    reason: 'HTTP/1.0 is forwarded (request-line: HTTP/1.1 to the app) and the connection closes after the answer',
    spec: { kind: 'http', request: http('GET', '/text', [], '', '1.0') },
  },
  {
    name: 'HTTP/1.0 with keep-alive: two requests on one connection',
    app: 'node',
    expect: 'identical',
    reason: 'Connection: keep-alive keeps an HTTP/1.0 connection open for the next request',
    spec: { kind: 'http', request: http('GET', '/text', ['Connection: keep-alive'], '', '1.0') + http('GET', '/text?again', ['Connection: keep-alive'], '', '1.0'), methods: ['GET', 'GET'] },
  },
  {
    name: 'HTTP/1.0 asking for a chunked resource',
    app: 'node',
    expect: 'identical',
    reason: 'framing: an HTTP/1.0 client gets the body delimited by the close',
    spec: { kind: 'http', request: http('GET', '/chunked', [], '', '1.0') },
  },
  {
    name: 'an absolute-form target',
    app: 'node',
    expect: 'identical',
    reason: 'routed by its authority; request-line: the app gets the origin-form',
    spec: { kind: 'http', request: 'GET http://{host}/text?q=1 HTTP/1.1\r\nHost: {host}\r\n\r\n' },
  },
  {
    name: 'an HTTP/1.1 request without Host',
    app: 'node',
    expect: 'documented-difference',
    reason: `without Host no tunnel is named: 400 from the edge, as from the app (${REFUSED})`,
    spec: { kind: 'http', request: 'GET /text HTTP/1.1\r\nX-No-Host: yes\r\n\r\n' },
    documented: refusedWith(400, 400),
  },
  {
    name: 'OPTIONS * (the asterisk-form target)',
    app: 'node',
    expect: 'identical',
    reason: 'the asterisk-form goes to the default route as it is',
    spec: { kind: 'http', request: http('OPTIONS', '*') },
  },
  {
    name: 'a WebDAV method (PROPFIND) with a body',
    app: 'node',
    expect: 'identical',
    reason: 'every method llhttp knows is forwarded',
    spec: { kind: 'http', request: http('PROPFIND', '/dav/', ['Depth: 1', 'Content-Type: application/xml', 'Content-Length: 21'], '<propfind xmlns="D"/>') },
  },
  ...OTHER_METHODS.map(
    (method): Case => ({
      name: `the method ${method}`,
      app: 'node',
      expect: 'identical',
      reason: 'every method llhttp knows is forwarded',
      spec: { kind: 'http', request: http(method, '/dav/item') },
    }),
  ),
  {
    name: 'a method llhttp does not know (FOO-BAR)',
    app: 'node',
    expect: 'documented-difference',
    reason: `llhttp knows a fixed set of methods (Node's http.METHODS); others are 400, from the edge as from Node (${REFUSED})`,
    spec: { kind: 'http', request: http('FOO-BAR', '/dav/item') },
    documented: refusedWith(400, 400),
  },
  {
    name: 'a chunk extension in a chunked upload',
    app: 'node',
    expect: 'identical',
    reason: 'framing: chunk extensions are each hop\'s own',
    spec: { kind: 'http', request: http('POST', '/upload', ['Transfer-Encoding: chunked'], '6;ext=1\r\nfirst,\r\n0\r\n\r\n') },
  },
  { name: '60 request fields', app: 'node', expect: 'identical', reason: 'many request fields, in order', spec: get('/text', ...MANY_FIELDS(60)) },
  { name: '100 request field lines', app: 'node', expect: 'identical', reason: 'the edge takes 100 field lines by default (--max-header-lines)', spec: get('/text', ...MANY_FIELDS(99)) },
  {
    name: '101 request field lines',
    app: 'node',
    expect: 'documented-difference',
    reason: `past --max-header-lines (100) the edge answers 431 (${REFUSED})`,
    spec: get('/text', ...MANY_FIELDS(100)),
    documented: refusedWith(431, 200),
  },
  {
    name: 'Expect: 100-continue refused by the app with 417',
    app: 'node',
    expect: 'identical',
    reason: 'the local server sees Expect and refuses before the body; its 417 and body reach the public client',
    spec: { kind: 'http', request: http('POST', '/expect-refused', ['Content-Type: text/plain', 'Expect: 100-continue', 'Content-Length: 11']), afterContinue: 'hello world' },
  },
  {
    name: 'an event stream whose head comes before its first event',
    app: 'node',
    expect: 'identical',
    reason: 'a head flushed alone reaches the public client at once (the first event waits for it)',
    spec: { ...get('/sse-late?id=late'), release: 'text/event-stream' },
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
    name: 'WebSocket: an upgrade the app refuses with 403, and its body',
    app: 'node',
    expect: 'identical',
    reason: 'a refused upgrade is an ordinary answer: status, fields and body reach the public client',
    spec: { kind: 'http', request: http('GET', '/ws-refuse', [...WEBSOCKET_HANDSHAKE, 'Origin: https://evil.example']) },
  },
  {
    name: 'WebSocket: permessage-deflate negotiated end to end',
    app: 'node',
    expect: 'identical',
    reason: 'the handshake is end to end: the app chooses the extension, compressed frames pass untouched',
    spec: {
      kind: 'websocket',
      path: '/deflate',
      protocols: ['chat.v1'],
      deflate: true,
      send: [
        { data: 'compress me '.repeat(200), binary: false },
        { data: 'compress me '.repeat(200), binary: false },
        { data: Buffer.alloc(100_000, 'abc').toString('latin1'), binary: true },
      ],
      close: { by: 'client', code: 1000, reason: 'bye' },
    },
  },
  {
    name: 'WebSocket: a 16 MiB message each way',
    app: 'node',
    expect: 'identical',
    reason: 'no message cap: raw bytes under credit, both ways',
    spec: { kind: 'websocket', path: '/big', protocols: [], send: [{ data: Buffer.alloc(16 * 1024 * 1024, 'wxyz').toString('latin1'), binary: true }], close: { by: 'client', code: 1000, reason: '' } },
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
  { name: 'GET with a Content-Length body', app: 'python', expect: 'identical', reason: 'status-line: HTTP/1.0 in, HTTP/1.1 out, the reason phrase kept', spec: get('/text') },
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
    reason: 'Expect reaches the app; an HTTP/1.0 handler sends no 100, so the body follows after a second (as curl does)',
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
  { name: 'a WebDAV method (PROPFIND)', app: 'python', expect: 'identical', reason: 'every method llhttp knows is forwarded', spec: { kind: 'http', request: http('PROPFIND', '/dav/', ['Depth: 1']) } },
  { name: 'an HTTP/1.0 request', app: 'python', expect: 'identical', reason: 'HTTP/1.0 both ways (status-line, request-line)', spec: { kind: 'http', request: http('GET', '/text', [], '', '1.0') } },
  { name: 'UTF-8 and Latin-1 in request field values', app: 'python', expect: 'identical', reason: 'request field values reach the app byte for byte', spec: get('/text', 'X-Word: caf\xc3\xa9', 'X-Latin: caf\xe9') },
];
