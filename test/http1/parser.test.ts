/**
 * The llhttp wrapper: what Burrow relies on from Node's parser binding, pinned so a Node upgrade that
 * changes it fails here. Heads keep names' case and values' bytes; pipelined messages, trailers, 1xx,
 * upgrades and bodies delimited by the end of the connection come out as they should; every invalid
 * framing of the smuggling suites is an error with the status to refuse it with; the limits hold.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ALL, HTTP_METHODS, Http1ParseError, Http1Parser, MessageKind, type MessageHead, type MessageKindValue } from '../../src/http1/parser.js';

interface Parsed {
  heads: MessageHead[];
  bodies: string[];
  trailers: string[][];
  completes: number;
  result: number | Http1ParseError;
  finished?: Http1ParseError | null;
}

/** Feeds `input` (as one chunk, or one byte at a time) and records what came out. */
function parse(kind: MessageKindValue, input: string | Buffer, options: { byteByByte?: boolean; noBody?: (head: MessageHead) => boolean; finish?: boolean; limits?: { maxHeadBytes: number; maxFieldLines: number } } = {}): Parsed {
  const bytes = typeof input === 'string' ? Buffer.from(input, 'latin1') : input;
  const parsed: Parsed = { heads: [], bodies: [], trailers: [], completes: 0, result: ALL };
  let body = '';
  const parser = new Http1Parser(
    kind,
    {
      onHead(head) {
        parsed.heads.push(head);
        return options.noBody?.(head) ?? false;
      },
      onBody(chunk) {
        body += chunk.toString('latin1');
      },
      onTrailers(fields) {
        parsed.trailers.push(fields);
      },
      onComplete() {
        parsed.bodies.push(body);
        body = '';
        parsed.completes++;
      },
    },
    options.limits,
  );
  if (options.byteByByte === true) {
    for (let i = 0; i < bytes.length; i++) {
      const result = parser.execute(bytes.subarray(i, i + 1));
      if (result !== ALL) {
        parsed.result = typeof result === 'number' ? i + result : result;
        break;
      }
    }
  } else {
    parsed.result = parser.execute(bytes);
  }
  if (options.finish === true) parsed.finished = parser.finish();
  parser.close();
  return parsed;
}

describe('heads', () => {
  test('names keep their case and values their bytes (UTF-8 and Latin-1 alike)', () => {
    const utf8 = Buffer.from('café ✓', 'utf8');
    const input = Buffer.concat([
      Buffer.from('POST /hooks?x=1 HTTP/1.1\r\nHost: a.example\r\nX-Word: ', 'latin1'),
      utf8,
      Buffer.from('\r\nx-latin: caf\xe9\r\nCONTENT-length: 0\r\n\r\n', 'latin1'),
    ]);
    const { heads, result } = parse(MessageKind.REQUEST, input);
    assert.equal(result, ALL);
    assert.equal(heads.length, 1);
    const head = heads[0]!;
    assert.equal(head.method, 'POST');
    assert.equal(head.target, '/hooks?x=1');
    assert.deepEqual(head.fields.filter((_, i) => i % 2 === 0), ['Host', 'X-Word', 'x-latin', 'CONTENT-length']);
    assert.ok(Buffer.from(head.fields[3]!, 'latin1').equals(utf8), 'the UTF-8 value goes out as the same bytes');
    assert.ok(Buffer.from(head.fields[5]!, 'latin1').equals(Buffer.from([0x63, 0x61, 0x66, 0xe9])));
  });

  test('the same head parsed one byte at a time', () => {
    const input = 'GET /a HTTP/1.1\r\nHost: x\r\nX-Long: ' + 'v'.repeat(300) + '\r\n\r\n';
    const whole = parse(MessageKind.REQUEST, input);
    const bytewise = parse(MessageKind.REQUEST, input, { byteByByte: true });
    assert.deepEqual(bytewise.heads, whole.heads);
    assert.equal(bytewise.completes, 1);
  });

  test('100 field lines pass (llhttp flushes them 32 at a time) and 101 are refused with 431', () => {
    const fields = (count: number): string => Array.from({ length: count }, (_, i) => `X-F${i}: ${i}\r\n`).join('');
    const ok = parse(MessageKind.REQUEST, `GET / HTTP/1.1\r\nHost: x\r\n${fields(99)}\r\n`);
    assert.equal(ok.result, ALL);
    assert.equal(ok.heads[0]!.fields.length, 200);
    assert.equal(ok.heads[0]!.fields[198], 'X-F98');
    assert.equal(ok.heads[0]!.target, '/');
    const over = parse(MessageKind.REQUEST, `GET / HTTP/1.1\r\nHost: x\r\n${fields(100)}\r\n`);
    assert.ok(over.result instanceof Http1ParseError);
    assert.equal(over.result.status, 431);
    assert.equal(over.heads.length, 0, 'no head is handed over');
  });

  test('a head over the byte limit is refused with 431', () => {
    const limits = { maxHeadBytes: 1024, maxFieldLines: 100 };
    const over = parse(MessageKind.REQUEST, `GET / HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(1100)}\r\n\r\n`, { limits });
    assert.ok(over.result instanceof Http1ParseError);
    assert.equal(over.result.status, 431);
  });

  test('every method llhttp knows is taken, WebDAV, CalDAV, PURGE and QUERY among them', () => {
    for (const method of ['PROPFIND', 'PROPPATCH', 'MKCOL', 'COPY', 'MOVE', 'LOCK', 'UNLOCK', 'REPORT', 'SEARCH', 'PURGE', 'QUERY', 'MKCALENDAR']) {
      assert.ok(HTTP_METHODS.includes(method), method);
      const { heads, result } = parse(MessageKind.REQUEST, `${method} /dav HTTP/1.1\r\nHost: x\r\n\r\n`);
      assert.equal(result, ALL, method);
      assert.equal(heads[0]!.method, method);
    }
  });

  test("the method table is llhttp's, as Node has it", () => {
    // process.binding warns (DEP0111): the copy in parser.ts exists so that Burrow never calls it.
    const binding = (process as unknown as { binding(name: string): { allMethods: string[] } }).binding('http_parser');
    assert.deepEqual(HTTP_METHODS, binding.allMethods);
  });

  test('HTTP/1.0 and 1.1 keep-alive rules', () => {
    const cases: [string, boolean][] = [
      ['GET / HTTP/1.0\r\n\r\n', false],
      ['GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n', true],
      ['GET / HTTP/1.1\r\nHost: x\r\n\r\n', true],
      ['GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n', false],
    ];
    for (const [input, keepAlive] of cases) {
      const head = parse(MessageKind.REQUEST, input).heads[0]!;
      assert.equal(head.keepAlive, keepAlive, input);
      assert.equal(head.versionMinor, input.includes('1.0') ? 0 : 1);
    }
  });

  test('absolute-form and asterisk targets are given as received', () => {
    assert.equal(parse(MessageKind.REQUEST, 'GET http://a.example/x?y HTTP/1.1\r\nHost: a.example\r\n\r\n').heads[0]!.target, 'http://a.example/x?y');
    assert.equal(parse(MessageKind.REQUEST, 'OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n').heads[0]!.target, '*');
  });
});

describe('messages', () => {
  test('pipelined requests come out in order, each with its body', () => {
    const input =
      'POST /1 HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello' +
      'POST /2 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\n0\r\n\r\n' +
      'GET /3 HTTP/1.1\r\nHost: x\r\n\r\n';
    for (const byteByByte of [false, true]) {
      const { heads, bodies, result } = parse(MessageKind.REQUEST, input, { byteByByte });
      assert.equal(result, ALL);
      assert.deepEqual(heads.map((head) => head.target), ['/1', '/2', '/3']);
      assert.deepEqual(bodies, ['hello', 'abc', '']);
    }
  });

  test('trailers after a chunked body, then the next message', () => {
    const input = 'POST /t HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nX-Checksum: abc\r\nx-more: 1\r\n\r\nGET /next HTTP/1.1\r\nHost: x\r\n\r\n';
    const { heads, bodies, trailers, completes } = parse(MessageKind.REQUEST, input);
    assert.deepEqual(trailers, [['X-Checksum', 'abc', 'x-more', '1']]);
    assert.deepEqual(bodies, ['hello', '']);
    assert.equal(completes, 2);
    assert.equal(heads[1]!.target, '/next', 'the head after trailers is whole (llhttp flushes it separately)');
    assert.deepEqual(heads[1]!.fields, ['Host', 'x']);
  });

  test('responses: reason phrases, 1xx before the final status, a body delimited by the end of the connection', () => {
    const input = 'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\nHTTP/1.0 200 Fine Thanks\r\nX: y\r\n\r\nuntil the end';
    const { heads, bodies, finished, completes } = parse(MessageKind.RESPONSE, input, { finish: true });
    assert.deepEqual(heads.map((head) => [head.status, head.reason]), [[100, 'Continue'], [103, 'Early Hints'], [200, 'Fine Thanks']]);
    assert.deepEqual(heads[1]!.fields, ['Link', '</a.css>; rel=preload']);
    assert.equal(finished, null);
    assert.equal(completes, 3);
    assert.equal(bodies[2], 'until the end');
  });

  test('the response to HEAD has no body whatever its Content-Length says', () => {
    const input = 'HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n';
    const { heads, completes, result } = parse(MessageKind.RESPONSE, input, { noBody: (head) => head.status === 200 });
    assert.equal(result, ALL);
    assert.equal(heads.length, 2);
    assert.equal(completes, 2);
  });

  test('a response cut short is an error at finish', () => {
    const cut = parse(MessageKind.RESPONSE, 'HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc', { finish: true });
    assert.ok(cut.finished instanceof Http1ParseError);
    const chunked = parse(MessageKind.RESPONSE, 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab', { finish: true });
    assert.ok(chunked.finished instanceof Http1ParseError);
  });

  test('an upgrade: the offset where the new protocol begins', () => {
    const request = 'GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n';
    const parsedRequest = parse(MessageKind.REQUEST, `${request}\x81\x05hello`);
    assert.equal(parsedRequest.heads[0]!.upgrade, true);
    assert.equal(parsedRequest.result, request.length);
    const response = 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n';
    const parsedResponse = parse(MessageKind.RESPONSE, `${response}RAW`);
    assert.equal(parsedResponse.heads[0]!.upgrade, true);
    assert.equal(parsedResponse.result, response.length);
  });
});

describe('invalid framing is refused (the smuggling table)', () => {
  const cases: [string, string, number][] = [
    ['chunk size with a leading space', 'POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n 5\r\nhello\r\n0\r\n\r\n', 400],
    ['chunk size 0x5', 'POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0x5\r\nhello\r\n0\r\n\r\n', 400],
    ['empty chunk-size line', 'POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n\r\nhello\r\n0\r\n\r\n', 400],
    ['chunk data longer than its size', 'POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhello\r\n0\r\n\r\n', 400],
    ['no CRLF after chunk data', 'POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabXY0\r\n\r\n', 400],
    ['Content-Length with Transfer-Encoding', 'POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n', 400],
    ['two different Content-Length', 'POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello', 400],
    ['two equal Content-Length', 'POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello', 400],
    ['Content-Length: +5', 'POST / HTTP/1.1\r\nHost: x\r\nContent-Length: +5\r\n\r\nhello', 400],
    ['Content-Length: 5, 5', 'POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5, 5\r\n\r\nhello', 400],
    ['Transfer-Encoding: identity', 'POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: identity\r\n\r\nhello', 400],
    ['Transfer-Encoding: chunked, identity', 'POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n', 400],
    ['space before the colon', 'GET / HTTP/1.1\r\nHost : x\r\n\r\n', 400],
    ['obsolete line folding', 'GET / HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n continued\r\n\r\n', 400],
    ['bare LF line ends', 'GET / HTTP/1.1\nHost: x\n\n', 400],
    ['NUL in a value', 'GET / HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n', 400],
    ['an unknown method', 'FROB / HTTP/1.1\r\nHost: x\r\n\r\n', 400],
    ['HTTP/1.9', 'GET / HTTP/1.9\r\nHost: x\r\n\r\n', 505],
    ['HTTP/0.9', 'GET / HTTP/0.9\r\n\r\n', 505],
    ['HTTP/2.0 in a request line', 'GET / HTTP/2.0\r\nHost: x\r\n\r\n', 505],
    ['the HTTP/2 preface', 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 505],
  ];
  for (const [name, input, status] of cases) {
    test(name, () => {
      const { result } = parse(MessageKind.REQUEST, input);
      assert.ok(result instanceof Http1ParseError, `${name}: parsed without an error`);
      assert.equal(result.status, status, `${name}: ${result.code} ${result.reason}`);
    });
  }
});

describe('after a message llhttp ended as an upgrade (a body read outside, a declined upgrade)', () => {
  // llhttp's `upgrade` flag outlives such a message until the next one begins, and while it is set
  // Node's binding reports an error as a short count: bytes that are not HTTP were swallowed, and every
  // message after them with it (a connection that hung instead of answering 400).
  function outside(kind: MessageKindValue): { parser: Http1Parser; heads: string[] } {
    const heads: string[] = [];
    const parser: Http1Parser = new Http1Parser(kind, {
      onHead(head) {
        heads.push(head.method || String(head.status));
        if (head.fields.some((field, i) => i % 2 === 0 && field.toLowerCase() === 'content-length')) parser.takeBodyOutside();
        return false;
      },
      onBody() {},
      onTrailers() {},
      onComplete() {},
    });
    return { parser, heads };
  }

  for (const [kind, first, next] of [
    [MessageKind.REQUEST, 'POST /a HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\n', 'GET /b HTTP/1.1\r\nHost: a\r\n\r\n'],
    [MessageKind.RESPONSE, 'HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n', 'HTTP/1.1 204 No Content\r\n\r\n'],
  ] as const) {
    const what = kind === MessageKind.REQUEST ? 'request' : 'response';
    test(`${what}: bytes that are not HTTP after a body read outside are an error`, () => {
      const { parser } = outside(kind);
      assert.equal(parser.execute(Buffer.from(first)), first.length);
      assert.equal(parser.bodyOutside, true);
      const result = parser.execute(Buffer.from('garbage / HTTP/1.1\r\n\r\n'));
      assert.ok(result instanceof Http1ParseError, `an error, not ${String(result)}`);
    });

    test(`${what}: the next message after a body read outside is parsed from a fresh start`, () => {
      const { parser, heads } = outside(kind);
      assert.equal(parser.execute(Buffer.from(first)), first.length);
      assert.equal(parser.execute(Buffer.from(next)), ALL);
      assert.equal(heads.length, 2);
    });
  }

  test('request: bytes that are not HTTP after a declined upgrade are an error', () => {
    const parser: Http1Parser = new Http1Parser(MessageKind.REQUEST, {
      onHead(head) {
        if (head.upgrade) parser.declineUpgrade();
        return false;
      },
      onBody() {},
      onTrailers() {},
      onComplete() {},
    });
    const result = parser.execute(Buffer.from('GET /ws HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\ngarbage / HTTP/1.1\r\n\r\n'));
    assert.ok(result instanceof Http1ParseError, `an error, not ${String(result)}`);
  });
});
