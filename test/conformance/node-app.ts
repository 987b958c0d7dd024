/**
 * The conformance suite's Node app: a plain node:http server with a `ws` WebSocket server on the same
 * port, whose routes cover what real apps send (Range/ETag/304, compressed bodies, redirects, several
 * Set-Cookie, SSE, 204/304, WebSocket subprotocols and close codes) plus raw-socket routes for bytes
 * node:http will not write (Latin-1 and UTF-8 header values, trailers, 103, close-delimited bodies).
 *
 * Every request is recorded as the app received it (method, target, raw header bytes, body digest);
 * `GET /__last` answers the record of the last request and forgets it, so the suite can compare what
 * reached the app directly with what reached it through the tunnel.
 */
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { brotliCompressSync, gzipSync } from 'node:zlib';
import { WebSocketServer, type WebSocket } from 'ws';

/** What the app saw of one request (header names and values as latin1: one char per byte). */
export interface RequestRecord {
  method: string;
  target: string;
  version: string;
  headers: [string, string][];
  bodyLength: number;
  bodySha256: string;
  /** Trailer fields after a chunked request body (the Node app only). */
  trailers?: [string, string][];
  /** WebSocket only: the messages the app received and the close it saw. */
  messages?: { data: string; binary: boolean }[];
  close?: { code: number; reason: string };
}

export const FILE_BODY = Buffer.from('0123456789abcdefghijklmnopqrstuvwxyz'.repeat(100), 'latin1');
export const FILE_ETAG = '"v1-3600"';
export const FILE_LAST_MODIFIED = 'Wed, 21 Oct 2015 07:28:00 GMT';
export const TEXT_BODY = 'hello, world\n';
const LONG_TEXT = Buffer.from('The quick brown fox jumps over the lazy dog. '.repeat(400), 'latin1');
export const GZIP_BODY = gzipSync(LONG_TEXT);
export const BROTLI_BODY = brotliCompressSync(LONG_TEXT);

/** n bytes of a fixed pattern: what /bytes/n and the Python app's /bytes/n both send. */
export function patternBytes(length: number): Buffer {
  const bytes = Buffer.allocUnsafe(length);
  for (let i = 0; i < length; i++) bytes[i] = (i * 7 + (i >> 8)) & 0xff;
  return bytes;
}

/** Raw responses, written straight to the socket: bytes node:http would change or refuse. */
const RAW: Record<string, string> = {
  'latin1-header': 'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-Word: caf\xe9\r\nContent-Length: 2\r\n\r\nok',
  'utf8-disposition':
    'HTTP/1.1 200 OK\r\nContent-Type: application/pdf\r\nContent-Disposition: attachment; filename="r\xc3\xa9sum\xc3\xa9.pdf"\r\nContent-Length: 4\r\n\r\n%PDF',
  'obs-text-and-spaces': 'HTTP/1.1 200 OK\r\nX-Spaces: a  b\t c\r\nX-Empty:\r\nX-Symbols: !#$%&\'*+-.^_`|~"(),/:;<=>?@[\\]{}\r\nContent-Length: 2\r\n\r\nok',
  trailers:
    'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTrailer: X-Checksum\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\nX-Checksum: abc123\r\n\r\n',
  'chunk-extensions': 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;name=value\r\nhello\r\n0\r\n\r\n',
  'early-hints':
    'HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload; as=style\r\n\r\nHTTP/1.1 200 OK\r\nLink: </style.css>; rel=preload; as=style\r\nContent-Length: 2\r\n\r\nok',
  'close-delimited': 'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\nthe body runs to the end of the connection',
  'reason-phrase': 'HTTP/1.1 200 Very Fine Thanks\r\nContent-Length: 2\r\n\r\nok',
  'unknown-status': 'HTTP/1.1 299 Whatever\r\nContent-Length: 2\r\n\r\nok',
  'connection-named': 'HTTP/1.1 200 OK\r\nConnection: x-hop\r\nX-Hop: private\r\nX-Public: yes\r\nKeep-Alive: timeout=5\r\nContent-Length: 2\r\n\r\nok',
  'mixed-case': 'HTTP/1.1 200 OK\r\ncontent-TYPE: text/plain\r\nX-lower-UPPER: Value With Case\r\nETAG: "x"\r\nset-cookie: a=1\r\nSet-Cookie: b=2\r\nCONTENT-LENGTH: 2\r\n\r\nok',
  processing: 'HTTP/1.1 102 Processing\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a.js>; rel=preload\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\ndone',
};

/** A message as the suite compares it: its bytes in hex, or for a long one its length and digest. */
export function messageData(data: Buffer): string {
  return data.length <= 4096 ? data.toString('hex') : `${data.length} bytes, sha256 ${createHash('sha256').update(data).digest('hex')}`;
}

export interface NodeApp {
  port: number;
  close(): Promise<void>;
}

export async function startNodeApp(address: '127.0.0.1' | '::1' = '127.0.0.1'): Promise<NodeApp> {
  let last: RequestRecord | null = null;
  /** SSE streams waiting for /__release. */
  const held = new Map<string, () => void>();

  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://app');
    if (url.pathname === '/__last') {
      const record = last;
      if (!url.searchParams.has('peek')) last = null;
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify(record));
      return;
    }
    if (url.pathname === '/__release') {
      held.get(url.searchParams.get('id') ?? '')?.();
      res.end('released');
      return;
    }
    const hash = createHash('sha256');
    let length = 0;
    req.on('data', (chunk: Buffer) => {
      hash.update(chunk);
      length += chunk.length;
    });
    req.on('end', () => {
      last = {
        method: req.method!,
        target: req.url!,
        version: req.httpVersion,
        headers: pairs(req.rawHeaders),
        bodyLength: length,
        bodySha256: hash.digest('hex'),
        trailers: pairs(req.rawTrailers),
      };
      route(req, res, url, length, last.bodySha256, held);
    });
  });

  const handleProtocols = (offered: Set<string>): string | false => (offered.has('chat.v1') ? 'chat.v1' : false);
  const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false, handleProtocols, maxPayload: 64 * 1024 * 1024 });
  // /deflate negotiates permessage-deflate (with its defaults: both sides keep their context).
  const deflating = new WebSocketServer({ noServer: true, perMessageDeflate: { threshold: 0 }, handleProtocols, maxPayload: 64 * 1024 * 1024 });

  // Expect: 100-continue: /expect-refused answers 417 before the body; anything else gets its 100.
  server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => {
    if (req.url === '/expect-refused') {
      last = { method: req.method!, target: req.url, version: req.httpVersion, headers: pairs(req.rawHeaders), bodyLength: 0, bodySha256: '', trailers: [] };
      res.writeHead(417, 'Expectation Failed', ['Content-Type', 'text/plain', 'Content-Length', '13']);
      res.end('too large, no');
      return;
    }
    res.writeContinue();
    server.emit('request', req, res);
  });
  server.on('upgrade', (req: IncomingMessage, socket: Socket, head: Buffer) => {
    if (req.url === '/ws-refuse') {
      socket.end('HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nX-Reason: origin\r\nContent-Length: 9\r\n\r\nforbidden');
      last = { method: req.method!, target: req.url, version: req.httpVersion, headers: pairs(req.rawHeaders), bodyLength: 0, bodySha256: '' };
      return;
    }
    const upgrader = req.url === '/deflate' ? deflating : wss;
    upgrader.handleUpgrade(req, socket, head, (ws: WebSocket) => {
      const record: RequestRecord = {
        method: req.method!,
        target: req.url!,
        version: req.httpVersion,
        headers: pairs(req.rawHeaders),
        bodyLength: 0,
        bodySha256: '',
        messages: [],
      };
      last = record;
      ws.on('message', (data: Buffer, binary: boolean) => {
        record.messages!.push({ data: messageData(data), binary });
        const text = binary ? '' : data.toString('utf8');
        const close = /^close:([0-9]+):(.*)$/.exec(text);
        if (close !== null) ws.close(Number(close[1]), close[2]);
        else ws.send(data, { binary });
      });
      ws.on('close', (code: number, reason: Buffer) => {
        record.close = { code, reason: reason.toString('utf8') };
      });
    });
  });

  server.listen(0, address);
  await once(server, 'listening');
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    async close() {
      for (const release of held.values()) release();
      for (const client of [...wss.clients, ...deflating.clients]) client.terminate();
      wss.close();
      deflating.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function pairs(raw: string[]): [string, string][] {
  const list: [string, string][] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) list.push([raw[i]!, raw[i + 1]!]);
  return list;
}

function route(req: IncomingMessage, res: ServerResponse, url: URL, bodyLength: number, bodySha256: string, held: Map<string, () => void>): void {
  const path = url.pathname;
  const parts = path.split('/');
  if (path === '/text') {
    res.writeHead(200, ['Content-Type', 'text/plain; charset=utf-8', 'Content-Length', String(TEXT_BODY.length), 'X-Route', 'text']);
    res.end(TEXT_BODY);
  } else if (parts[1] === 'bytes') {
    const body = patternBytes(Number(parts[2]));
    const close = url.searchParams.has('close');
    res.writeHead(200, ['Content-Type', 'application/octet-stream', 'Content-Length', String(body.length), ...(close ? ['Connection', 'close'] : [])]);
    res.end(body);
  } else if (path === '/chunked') {
    res.writeHead(200, ['Content-Type', 'text/plain']);
    res.write('first chunk\n');
    setImmediate(() => {
      res.write('second chunk\n');
      setImmediate(() => res.end('last chunk\n'));
    });
  } else if (path === '/upload') {
    const body = JSON.stringify({ length: bodyLength, sha256: bodySha256 });
    res.writeHead(201, ['Content-Type', 'application/json', 'Content-Length', String(body.length), 'Location', '/upload/1']);
    res.end(body);
  } else if (path === '/file') {
    serveFile(req, res);
  } else if (path === '/gzip' || path === '/br') {
    const body = path === '/gzip' ? GZIP_BODY : BROTLI_BODY;
    res.writeHead(200, ['Content-Type', 'text/plain', 'Content-Encoding', path === '/gzip' ? 'gzip' : 'br', 'Vary', 'Accept-Encoding', 'Content-Length', String(body.length)]);
    res.end(body);
  } else if (parts[1] === 'redirect') {
    const body = 'moved\n';
    res.writeHead(Number(parts[2]), ['Location', '/text?from=redirect', 'Content-Type', 'text/plain', 'Content-Length', String(body.length)]);
    res.end(body);
  } else if (path === '/cookies') {
    res.writeHead(200, [
      'Set-Cookie', 'session=abc123; Path=/; HttpOnly',
      'Content-Type', 'text/plain',
      'Set-Cookie', 'theme=dark; Expires=Wed, 21 Oct 2037 07:28:00 GMT; Path=/',
      'Set-Cookie', 'empty=; Max-Age=0',
      'Content-Length', '2',
    ]);
    res.end('ok');
  } else if (parts[1] === 'status') {
    const status = Number(parts[2]);
    res.writeHead(status, ['X-Status', String(status), ...(status === 304 ? ['ETag', FILE_ETAG] : [])]);
    res.end();
  } else if (path === '/sse') {
    res.writeHead(200, ['Content-Type', 'text/event-stream', 'Cache-Control', 'no-cache']);
    res.write('retry: 1000\n\n');
    res.write('id: 1\nevent: greeting\ndata: one\n\n');
    res.write('id: 2\ndata: two\ndata: lines\n\n');
    const id = url.searchParams.get('id') ?? '';
    held.set(id, () => {
      held.delete(id);
      res.end('id: 3\nevent: end\ndata: three\n\n');
    });
  } else if (path === '/sse-late') {
    // The head alone, flushed: the first event waits for /__release (a client must see the head first).
    res.writeHead(200, ['Content-Type', 'text/event-stream', 'Cache-Control', 'no-cache']);
    res.flushHeaders();
    const id = url.searchParams.get('id') ?? '';
    held.set(id, () => {
      held.delete(id);
      res.end('id: 1\ndata: the first event\n\n');
    });
  } else if (path === '/many-headers') {
    const headers: string[] = [];
    for (let i = 0; i < 60; i++) headers.push(`X-Header-${i}`, `value-${i}`);
    res.writeHead(200, [...headers, 'Content-Length', '2']);
    res.end('ok');
  } else if (parts[1] === 'raw' && RAW[parts[2]!] !== undefined) {
    // Bytes node:http would not write: take the socket over.
    const socket = res.socket!;
    res.detachSocket(socket);
    socket.end(Buffer.from(RAW[parts[2]!]!, 'latin1'));
  } else {
    // Anything else (other methods, other paths): a small description of what arrived.
    const body = `${req.method} ${req.url} ${bodyLength}\n`;
    res.writeHead(200, ['Content-Type', 'text/plain', 'Content-Length', String(body.length)]);
    res.end(body);
  }
}

/** A static resource with validators and byte ranges, as express's `send` would serve it. */
function serveFile(req: IncomingMessage, res: ServerResponse): void {
  const common = ['ETag', FILE_ETAG, 'Last-Modified', FILE_LAST_MODIFIED, 'Accept-Ranges', 'bytes', 'Cache-Control', 'public, max-age=60'];
  if (req.headers['if-none-match'] === FILE_ETAG) {
    res.writeHead(304, common);
    res.end();
    return;
  }
  const range = /^bytes=([0-9]*)-([0-9]*)$/.exec(req.headers.range ?? '');
  const ifRange = req.headers['if-range'];
  if (range !== null && (ifRange === undefined || ifRange === FILE_ETAG)) {
    const size = FILE_BODY.length;
    let start = range[1] === '' ? size - Number(range[2]) : Number(range[1]);
    let end = range[1] === '' || range[2] === '' ? size - 1 : Math.min(Number(range[2]), size - 1);
    if (start >= size || start > end) {
      res.writeHead(416, [...common, 'Content-Range', `bytes */${size}`, 'Content-Length', '0']);
      res.end();
      return;
    }
    start = Math.max(0, start);
    end = Math.max(start, end);
    res.writeHead(206, [...common, 'Content-Type', 'text/plain', 'Content-Range', `bytes ${start}-${end}/${size}`, 'Content-Length', String(end - start + 1)]);
    res.end(req.method === 'HEAD' ? undefined : FILE_BODY.subarray(start, end + 1));
    return;
  }
  res.writeHead(200, [...common, 'Content-Type', 'text/plain', 'Content-Length', String(FILE_BODY.length)]);
  res.end(req.method === 'HEAD' ? undefined : FILE_BODY);
}
