/**
 * The inspector's refusals, each one: a Host other than the loopback names (DNS rebinding), a non-GET
 * from another Origin or without JSON (CSRF), a live-feed WebSocket from another Origin. Nothing refused
 * reaches the local server.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import WebSocket from 'ws';
import { allowedHosts, hostAllowed, isJsonContentType, originAllowed } from '../../src/inspector/security.js';
import { inspect, startStack, type Stack } from './fixture.js';

describe('inspector refusals', () => {
  let stack: Stack;
  let id: string;
  let port: number;

  before(async () => {
    stack = await startStack();
    port = stack.inspector.port;
    await stack.send('POST', '/target', { body: '{"a":1}', headers: { 'content-type': 'application/json' } });
    id = (await inspect(stack.inspector, 'GET', '/api/requests?limit=1')).json.requests[0].id;
  });

  after(async () => {
    await stack.close();
  });

  test('a Host other than localhost:PORT, 127.0.0.1:PORT or [::1]:PORT is 403, on every path', async () => {
    const refused = ['evil.example', `evil.example:${port}`, 'localhost', `localhost:${port + 1}`, `127.0.0.1:${port}.evil.example`, `localhost.:${port}`, `0.0.0.0:${port}`, `127.0.0.1`];
    for (const host of refused) {
      for (const path of ['/', '/app.js', '/api/requests', `/api/requests/${id}`, '/api/status', '/api/har', `/api/har?id=${id}`, `/api/requests/${id}/curl`, '/api/requests?q=target']) {
        const answer = await inspect(stack.inspector, 'GET', path, { headers: { host } });
        assert.equal(answer.status, 403, `${host} ${path}`);
        assert.equal(answer.json.error.code, 'FORBIDDEN');
        assert.equal(typeof answer.json.error.message, 'string');
      }
    }
    for (const host of [`localhost:${port}`, `127.0.0.1:${port}`, `[::1]:${port}`, `LOCALHOST:${port}`]) {
      const answer = await inspect(stack.inspector, 'GET', '/api/requests?limit=1', { headers: { host } });
      assert.equal(answer.status, 200, host);
    }
  });

  test('a replay with a rebinding Host is refused before anything is sent', async () => {
    const before = stack.seen.length;
    const answer = await inspect(stack.inspector, 'POST', `/api/requests/${id}/replay`, { body: {}, headers: { host: `attacker.example:${port}` } });
    assert.equal(answer.status, 403);
    assert.equal(answer.json.error.code, 'FORBIDDEN');
    assert.equal(stack.seen.length, before);
  });

  test('a non-GET from another Origin is 403; the same origin or no Origin passes', async () => {
    const before = stack.seen.length;
    const foreign = ['http://evil.example', `http://evil.example:${port}`, `https://127.0.0.1:${port}`, `http://127.0.0.1:${port + 1}`, 'null', `http://localhost:${port}`];
    for (const origin of foreign) {
      // The Host is 127.0.0.1:PORT, so http://localhost:PORT is another origin too.
      const answer = await inspect(stack.inspector, 'POST', `/api/requests/${id}/replay`, { body: {}, headers: { origin } });
      assert.equal(answer.status, 403, origin);
      assert.equal(answer.json.error.code, 'FORBIDDEN');
    }
    assert.equal(stack.seen.length, before, 'no refused replay reached the local server');

    const same = await inspect(stack.inspector, 'POST', `/api/requests/${id}/replay`, { body: {}, headers: { origin: `http://127.0.0.1:${port}` } });
    assert.equal(same.status, 200, same.text);
    const sameLocalhost = await inspect(stack.inspector, 'POST', `/api/requests/${id}/replay`, {
      body: {},
      headers: { host: `localhost:${port}`, origin: `http://localhost:${port}` },
    });
    assert.equal(sameLocalhost.status, 200, sameLocalhost.text);
    const none = await inspect(stack.inspector, 'POST', `/api/requests/${id}/replay`, { body: {} });
    assert.equal(none.status, 200, none.text);
    assert.equal(stack.seen.length, before + 3);
  });

  test('a non-GET without Content-Type: application/json is 415, even from the same origin', async () => {
    const before = stack.seen.length;
    const cases: [string | undefined, string][] = [
      [undefined, ''],
      ['text/plain', '{}'],
      ['application/x-www-form-urlencoded', 'a=1'],
      ['multipart/form-data; boundary=x', '--x--'],
      ['application/jsonp', '{}'],
    ];
    for (const [type, body] of cases) {
      const headers: Record<string, string> = { origin: `http://127.0.0.1:${port}` };
      if (type !== undefined) headers['content-type'] = type;
      const answer = await inspect(stack.inspector, 'POST', `/api/requests/${id}/replay`, { rawBody: body, headers });
      assert.equal(answer.status, 415, String(type));
      assert.equal(answer.json.error.code, 'UNSUPPORTED_MEDIA_TYPE');
    }
    assert.equal(stack.seen.length, before);
    const withCharset = await inspect(stack.inspector, 'POST', `/api/requests/${id}/replay`, { rawBody: '{}', headers: { 'content-type': 'application/json; charset=utf-8' } });
    assert.equal(withCharset.status, 200);
  });

  test('the same rules hold for any method and path, known or not', async () => {
    for (const method of ['PUT', 'DELETE', 'PATCH', 'OPTIONS']) {
      const foreign = await inspect(stack.inspector, method, '/api/requests', { rawBody: '{}', headers: { origin: 'http://evil.example', 'content-type': 'application/json' } });
      assert.equal(foreign.status, 403, method);
      const form = await inspect(stack.inspector, method, '/anything', { rawBody: 'a=1', headers: { 'content-type': 'text/plain' } });
      assert.equal(form.status, 415, method);
    }
  });

  test('the live feed refuses a WebSocket from another Origin or Host', async () => {
    const refusals: [Record<string, string>, string][] = [
      [{ origin: 'http://evil.example' }, 'foreign origin'],
      [{ origin: 'null' }, 'null origin'],
      [{ host: `rebound.example:${port}` }, 'rebinding host'],
    ];
    for (const [headers, what] of refusals) {
      const status = await new Promise<number>((resolve, reject) => {
        const ws = new WebSocket(`ws://127.0.0.1:${port}/api/live`, { headers });
        ws.on('unexpected-response', (_request, response) => {
          resolve(response.statusCode ?? 0);
          ws.terminate();
        });
        ws.on('open', () => {
          ws.close();
          reject(new Error(`${what}: the upgrade was accepted`));
        });
        ws.on('error', () => {});
      });
      assert.equal(status, 403, what);
    }
    const accepted = await new Promise<string>((resolve, reject) => {
      const ws = new WebSocket(`ws://127.0.0.1:${port}/api/live`, { headers: { origin: `http://127.0.0.1:${port}` } });
      ws.on('message', (data) => {
        resolve(String(data));
        ws.close();
      });
      ws.on('error', reject);
    });
    assert.equal(JSON.parse(accepted).type, 'status');
  });

  test('the page forbids framing and loads nothing from elsewhere', async () => {
    const page = await inspect(stack.inspector, 'GET', '/');
    assert.equal(page.status, 200);
    assert.match(String(page.headers['content-type']), /^text\/html/);
    const policy = String(page.headers['content-security-policy']);
    assert.match(policy, /frame-ancestors 'none'/);
    assert.match(policy, /default-src 'self'/);
    assert.equal(page.headers['x-frame-options'], 'DENY');
    assert.doesNotMatch(page.text, /https?:\/\/(?!localhost)/, 'no external URL in the page');
  });
});

describe('security rules as functions', () => {
  test('allowed hosts are the three loopback names and the bound literal, with the port', () => {
    const hosts = allowedHosts(4040, '127.0.0.1');
    assert.deepEqual([...hosts].sort(), ['127.0.0.1:4040', '[::1]:4040', 'localhost:4040']);
    assert.ok(allowedHosts(4041, '127.0.0.2').has('127.0.0.2:4041'));
    assert.ok(allowedHosts(4041, '::1').has('[::1]:4041'));
    assert.equal(hostAllowed('Localhost:4040', hosts), true);
    assert.equal(hostAllowed('localhost:4040 ', hosts), false);
    assert.equal(hostAllowed('', hosts), false);
  });

  test('origins and content types', () => {
    assert.equal(originAllowed('', 'localhost:4040'), true);
    assert.equal(originAllowed('http://localhost:4040', 'localhost:4040'), true);
    assert.equal(originAllowed('http://localhost:4040', '127.0.0.1:4040'), false);
    assert.equal(originAllowed('null', 'localhost:4040'), false);
    assert.equal(originAllowed('http://localhost:4040/', 'localhost:4040'), false);
    assert.equal(isJsonContentType('application/json'), true);
    assert.equal(isJsonContentType('Application/JSON; charset=utf-8'), true);
    assert.equal(isJsonContentType('application/json-patch+json'), false);
    assert.equal(isJsonContentType('text/plain'), false);
    assert.equal(isJsonContentType(''), false);
  });
});
