/**
 * The request head the local hop writes from the tunnel's fields: hop-by-hop rules only (RFC 9110 section
 * 7.6.1), an upgrade's own fields kept, this hop's framing, a Host when there is none, and every byte a
 * head cannot carry refused rather than written.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { LocalHopError } from '../../../src/client/local-hop/errors.js';
import { buildRequestHead, RequestFraming, trailerSection, type RequestPlan } from '../../../src/client/local-hop/request-head.js';
import { localTarget } from '../../../src/client/routes.js';

const TARGET = localTarget(3000);

function build(fields: string[], options: { method?: string; target?: string; upgrade?: boolean; known?: number } = {}): { head: string; plan: RequestPlan } {
  const plan: RequestPlan = { framing: RequestFraming.NONE, declaredLength: -1, expectContinue: false };
  const head = buildRequestHead(TARGET, options.method ?? 'POST', options.target ?? '/p', fields, options.upgrade ?? false, options.known ?? 0, plan);
  if (typeof head !== 'string') throw head;
  return { head, plan };
}

function refused(fields: string[], options: { method?: string; target?: string; known?: number } = {}): LocalHopError {
  const plan: RequestPlan = { framing: RequestFraming.NONE, declaredLength: -1, expectContinue: false };
  const result = buildRequestHead(TARGET, options.method ?? 'GET', options.target ?? '/', fields, false, options.known ?? 0, plan);
  assert.ok(result instanceof LocalHopError, `refused: ${JSON.stringify(fields)}`);
  return result;
}

describe('hop-by-hop fields', () => {
  test('dropped in any case, with the fields Connection names; the rest kept in order and case', () => {
    const { head } = build(['Host', 'a', 'CONNECTION', 'close, X-Hop', 'x-hop', '1', 'Keep-Alive', 't=1', 'te', 'trailers', 'Transfer-Encoding', 'chunked', 'UPGRADE', 'h2c', 'Proxy-Connection', 'x', 'X-End', 'Z'], { method: 'GET' });
    assert.equal(head, 'GET /p HTTP/1.1\r\nHost: a\r\nX-End: Z\r\n\r\n');
  });

  test('Connection cannot drop Content-Length, Host or Expect (a body without its length would run into the next request)', () => {
    const { head, plan } = build(['Host', 'a', 'Connection', 'content-length, host, expect', 'Content-Length', '3', 'Expect', '100-continue'], { known: 3 });
    assert.equal(head, 'POST /p HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n');
    assert.equal(plan.framing, RequestFraming.LENGTH);
    assert.equal(plan.expectContinue, true);
  });

  test('an upgrade request keeps its Connection and Upgrade as received', () => {
    const { head } = build(['Host', 'a', 'Connection', 'Upgrade, X-Named', 'Upgrade', 'websocket', 'X-Named', 'gone', 'Sec-WebSocket-Key', 'k'], { method: 'GET', upgrade: true });
    assert.equal(head, 'GET /p HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, X-Named\r\nUpgrade: websocket\r\nSec-WebSocket-Key: k\r\n\r\n');
  });
});

describe('framing', () => {
  test('a Content-Length is kept as received', () => {
    const { head, plan } = build(['Host', 'a', 'content-length', '5'], { known: -1 });
    assert.equal(head, 'POST /p HTTP/1.1\r\nHost: a\r\ncontent-length: 5\r\n\r\n');
    assert.deepEqual(plan, { framing: RequestFraming.LENGTH, declaredLength: 5, expectContinue: false });
  });

  test('a whole body known at the start gets a Content-Length', () => {
    const { head, plan } = build(['Host', 'a'], { known: 12 });
    assert.equal(head, 'POST /p HTTP/1.1\r\nHost: a\r\nContent-Length: 12\r\n\r\n');
    assert.equal(plan.framing, RequestFraming.LENGTH);
  });

  test('a body of unknown length goes chunked', () => {
    const { head, plan } = build(['Host', 'a', 'Transfer-Encoding', 'chunked'], { known: -1 });
    assert.equal(head, 'POST /p HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n');
    assert.equal(plan.framing, RequestFraming.CHUNKED);
  });

  test('no body, no framing field; Expect without a body waits for nothing', () => {
    const { head, plan } = build(['Host', 'a', 'Expect', '100-continue'], { method: 'GET', known: 0 });
    assert.equal(head, 'GET /p HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\n\r\n');
    assert.deepEqual(plan, { framing: RequestFraming.NONE, declaredLength: -1, expectContinue: false });
  });

  test('a request without Host gets the target\'s', () => {
    assert.equal(build([], { method: 'GET' }).head, 'GET /p HTTP/1.1\r\nHost: localhost:3000\r\n\r\n');
  });

  test('lengths that do not add up are refused', () => {
    assert.match(refused(['Content-Length', '5'], { known: 4 }).message, /the body is 4 bytes, its Content-Length says 5/);
    assert.match(refused(['Content-Length', '5', 'Content-Length', '6'], { known: -1 }).message, /two different Content-Length/);
    assert.match(refused(['Content-Length', '+5'], { known: -1 }).message, /is not a length/);
  });
});

describe('bytes a head cannot carry', () => {
  const cases: [string, string[], { method?: string; target?: string }][] = [
    ['CRLF in a value', ['X-A', 'a\r\nX-Injected: 1'], {}],
    ['LF alone in a value', ['X-A', 'a\nb'], {}],
    ['CR alone in a value', ['X-A', 'a\rb'], {}],
    ['CRLF in a name', ['X-A\r\nX-B', 'v'], {}],
    ['NUL in a value', ['X-A', 'a\0b'], {}],
    ['a character above U+00FF', ['X-A', '\u2713'], {}],
    ['a space in the target', [], { target: '/a b' }],
    ['CRLF in the target', [], { target: '/a\r\nX: y' }],
    ['a space in the method', [], { method: 'GET /x' }],
  ];
  for (const [name, fields, options] of cases) {
    test(name, () => {
      const error = refused(fields, options);
      assert.match(error.message, /^request to local server at http:\/\/localhost:3000: /);
    });
  }

  test('trailers alike', () => {
    assert.equal(trailerSection(['X-Sum', 'abc']), '0\r\nX-Sum: abc\r\n\r\n');
    assert.equal(trailerSection(['X-Sum', 'a\r\nb']), null);
    assert.equal(trailerSection(['X-Sum', '\u0100']), null);
  });
});
