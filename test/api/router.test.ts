/**
 * The route table of src/api/router.ts on its own: static and parameter segments, percent-decoding,
 * the trailing slash, 404 against 405 with the allowed methods, HEAD for GET routes, duplicates refused.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Router, type RouteLookup } from '../../src/api/router.js';

function table(): Router<string> {
  return new Router<string>()
    .add('GET', '/api/v1/tokens', 'list tokens')
    .add('POST', '/api/v1/tokens', 'create token')
    .add('DELETE', '/api/v1/tokens/:id', 'revoke token')
    .add('GET', '/api/v1/requests/:id', 'request detail')
    .add('POST', '/api/v1/requests/:id/replay', 'replay')
    .add('GET', '/api/v1/instance', 'instance');
}

function found(lookup: RouteLookup<string>): { handler: string; params: Record<string, string> } {
  assert.equal(lookup.kind, 'found', `expected a match, got ${JSON.stringify(lookup)}`);
  return (lookup as Extract<RouteLookup<string>, { kind: 'found' }>).match;
}

const router = table();

const matches: [method: string, path: string, handler: string, params: Record<string, string>][] = [
  ['GET', '/api/v1/tokens', 'list tokens', {}],
  ['POST', '/api/v1/tokens', 'create token', {}],
  ['DELETE', '/api/v1/tokens/tok_0123abcd', 'revoke token', { id: 'tok_0123abcd' }],
  ['GET', '/api/v1/requests/req_1', 'request detail', { id: 'req_1' }],
  ['POST', '/api/v1/requests/req_1/replay', 'replay', { id: 'req_1' }],
  // A single trailing slash is ignored.
  ['GET', '/api/v1/tokens/', 'list tokens', {}],
  ['DELETE', '/api/v1/tokens/tok_1/', 'revoke token', { id: 'tok_1' }],
  // Parameters are percent-decoded; static segments are not.
  ['DELETE', '/api/v1/tokens/a%20b', 'revoke token', { id: 'a b' }],
  ['DELETE', '/api/v1/tokens/%2F', 'revoke token', { id: '/' }],
  ['DELETE', '/api/v1/tokens/%C3%A9t%C3%A9', 'revoke token', { id: 'été' }],
  // HEAD is answered by the GET route.
  ['HEAD', '/api/v1/instance', 'instance', {}],
  ['HEAD', '/api/v1/requests/req_9', 'request detail', { id: 'req_9' }],
];

for (const [method, path, handler, params] of matches) {
  test(`${method} ${path} → ${handler}`, () => {
    const match = found(router.lookup(method, path));
    assert.equal(match.handler, handler);
    assert.deepEqual({ ...match.params }, params);
  });
}

const misses: [method: string, path: string][] = [
  ['GET', ''],
  ['GET', 'api/v1/tokens'],
  ['GET', '/'],
  ['GET', '//'],
  ['GET', '/api'],
  ['GET', '/api/v1'],
  ['GET', '/api/v1/'],
  ['GET', '/health'],
  ['GET', '/api/v1/health'],
  ['GET', '/api/v1/tokens//'],
  ['GET', '/api//v1/tokens'],
  ['GET', '/api/v1/tokens/tok_1/extra'],
  ['GET', '/api/v1/%74okens'],
  ['GET', '/API/V1/TOKENS'],
  ['DELETE', '/api/v1/tokens/%E0%A4%A'], // a broken escape in a parameter
  ['DELETE', '/api/v1/tokens/%'],
  ['POST', '/api/v1/requests//replay'],
];

for (const [method, path] of misses) {
  test(`${method} ${JSON.stringify(path)} → not found`, () => {
    assert.deepEqual(router.lookup(method, path), { kind: 'not-found' });
  });
}

const wrongMethods: [method: string, path: string, allow: string[]][] = [
  ['PUT', '/api/v1/tokens', ['GET', 'HEAD', 'POST']],
  ['DELETE', '/api/v1/tokens', ['GET', 'HEAD', 'POST']],
  ['GET', '/api/v1/tokens/tok_1', ['DELETE']],
  ['HEAD', '/api/v1/tokens/tok_1', ['DELETE']],
  ['POST', '/api/v1/instance', ['GET', 'HEAD']],
  ['GET', '/api/v1/requests/req_1/replay', ['POST']],
  ['get', '/api/v1/tokens', ['GET', 'HEAD', 'POST']], // methods are matched in upper case only
];

for (const [method, path, allow] of wrongMethods) {
  test(`${method} ${path} → method not allowed, allow ${allow.join(', ')}`, () => {
    assert.deepEqual(router.lookup(method, path), { kind: 'method-not-allowed', allow });
  });
}

test('a route defined twice is refused', () => {
  const twice = new Router<string>().add('GET', '/a/:id', 'first');
  assert.throws(() => twice.add('GET', '/a/:id', 'second'), /defined twice/);
  // Another method on the same path is fine.
  twice.add('DELETE', '/a/:id', 'delete');
  assert.equal(found(twice.lookup('DELETE', '/a/1')).handler, 'delete');
});

test('two parameter names at one position are refused', () => {
  const clash = new Router<string>().add('GET', '/a/:id', 'one');
  assert.throws(() => clash.add('POST', '/a/:name', 'two'), /clashes/);
});

test('a static segment wins over a parameter at the same position', () => {
  const mixed = new Router<string>().add('GET', '/t/:id', 'param').add('GET', '/t/new', 'static');
  assert.equal(found(mixed.lookup('GET', '/t/new')).handler, 'static');
  assert.deepEqual({ ...found(mixed.lookup('GET', '/t/old')).params }, { id: 'old' });
});

test('parameters of one lookup do not leak into the next', () => {
  const first = found(router.lookup('DELETE', '/api/v1/tokens/one'));
  const second = found(router.lookup('GET', '/api/v1/tokens'));
  assert.deepEqual({ ...first.params }, { id: 'one' });
  assert.deepEqual({ ...second.params }, {});
});

test('routes lists every route added, in order', () => {
  assert.deepEqual(
    router.routes.map(({ method, pattern }) => `${method} ${pattern}`),
    [
      'GET /api/v1/tokens',
      'POST /api/v1/tokens',
      'DELETE /api/v1/tokens/:id',
      'GET /api/v1/requests/:id',
      'POST /api/v1/requests/:id/replay',
      'GET /api/v1/instance',
    ],
  );
});
