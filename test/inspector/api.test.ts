/**
 * The inspector's JSON API against a real tunnel: the list, the detail, 404s, replay with a header
 * override and with full edits (what the local server sees, and the new exchange with replay_of).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { call } from '../helpers.js';
import { header, inspect, startStack, type Stack } from './fixture.js';

describe('inspector API', () => {
  let stack: Stack;

  before(async () => {
    stack = await startStack();
  });

  after(async () => {
    await stack.close();
  });

  test('GET /api/requests lists exchanges newest first, in full detail, with the edge ids', async () => {
    const first = await stack.send('POST', '/hooks/one?x=1', { body: '{"event":"one"}', headers: { 'content-type': 'application/json', 'x-sig': 'abc' } });
    const second = await stack.send('GET', '/status/500');
    const third = await stack.send('GET', '/binary');
    assert.equal(first.status, 200);
    assert.equal(second.status, 500);
    assert.equal(third.status, 200);

    const list = await inspect(stack.inspector, 'GET', '/api/requests');
    assert.equal(list.status, 200);
    assert.match(String(list.headers['content-type']), /^application\/json/);
    const requests = list.json.requests as any[];
    assert.deepEqual(
      requests.slice(0, 3).map((item) => item.path),
      ['/binary', '/status/500', '/hooks/one?x=1'],
    );
    for (const item of requests) assert.match(item.id, /^req_[0-9a-f]{20}$/);

    // The same ids as the edge's own capture list.
    const edgeList = await call(stack.edge, 'GET', `/api/v1/requests?subdomain=${stack.subdomain}`, { token: stack.account.token });
    assert.equal(edgeList.status, 200);
    assert.deepEqual(
      edgeList.json.requests.slice(0, 3).map((item: { id: string }) => item.id),
      requests.slice(0, 3).map((item) => item.id),
    );

    const post = requests[2];
    assert.equal(post.method, 'POST');
    assert.equal(post.status, 200);
    assert.equal(post.port, stack.local.port);
    assert.equal(post.error, null);
    assert.equal(post.replay_of, null);
    assert.equal(typeof post.latency_ms, 'number');
    assert.ok(post.latency_ms >= 0);
    assert.ok(!Number.isNaN(Date.parse(post.received_at)));
    assert.equal(header(post.request.headers, 'x-sig'), 'abc');
    assert.equal(header(post.request.headers, 'content-type'), 'application/json');
    assert.equal(post.request.body, '{"event":"one"}');
    assert.equal(post.request.body_encoding, 'utf8');
    assert.equal(post.request.body_size, 15);
    assert.equal(post.request.truncated, false);
    assert.equal(post.response.status, 200);
    assert.equal(header(post.response.headers, 'x-local'), 'yes');
    assert.deepEqual(JSON.parse(post.response.body), { method: 'POST', url: '/hooks/one?x=1', body: '{"event":"one"}' });

    const failed = requests[1];
    assert.equal(failed.status, 500);
    assert.equal(failed.response.status, 500);

    const binary = requests[0];
    assert.equal(binary.response.body_encoding, 'base64');
    assert.deepEqual([...Buffer.from(binary.response.body, 'base64')], [0, 1, 2, 0xff, 0xfe, 0x80]);
    assert.equal(binary.response.body_size, 6);
  });

  test('limit, before and summary page through the list', async () => {
    for (let i = 0; i < 4; i++) await stack.send('GET', `/page/${i}`);
    const firstPage = await inspect(stack.inspector, 'GET', '/api/requests?limit=2&summary=1');
    assert.deepEqual(
      firstPage.json.requests.map((item: { path: string }) => item.path),
      ['/page/3', '/page/2'],
    );
    assert.equal(firstPage.json.requests[0].request, undefined, 'summaries carry no headers or bodies');
    assert.equal(typeof firstPage.json.requests[0].status, 'number');
    const next = await inspect(stack.inspector, 'GET', `/api/requests?limit=2&summary=1&before=${firstPage.json.requests[1].id}`);
    assert.deepEqual(
      next.json.requests.map((item: { path: string }) => item.path),
      ['/page/1', '/page/0'],
    );
    const bad = await inspect(stack.inspector, 'GET', '/api/requests?limit=zero');
    assert.equal(bad.status, 400);
    assert.equal(bad.json.error.code, 'INVALID_REQUEST');
  });

  test('GET /api/requests/:id gives one exchange; an unknown id is 404 NOT_FOUND in the spec shape', async () => {
    await stack.send('PUT', '/detail', { body: 'plain text body', headers: { 'content-type': 'text/plain' } });
    const [newest] = (await inspect(stack.inspector, 'GET', '/api/requests?limit=1')).json.requests;
    const detail = await inspect(stack.inspector, 'GET', `/api/requests/${newest.id}`);
    assert.equal(detail.status, 200);
    assert.deepEqual(detail.json, newest);
    assert.equal(detail.json.request.body, 'plain text body');

    for (const path of ['/api/requests/req_00000000ffffffffffff', '/api/requests/nonsense', '/api/requests/req_00000000ffffffffffff/replay']) {
      const method = path.endsWith('/replay') ? 'POST' : 'GET';
      const missing = await inspect(stack.inspector, method, path, method === 'POST' ? { body: {} } : {});
      assert.equal(missing.status, 404, path);
      assert.equal(missing.json.error.code, 'NOT_FOUND');
      assert.equal(typeof missing.json.error.message, 'string');
      assert.deepEqual(Object.keys(missing.json), ['error']);
    }
    const nowhere = await inspect(stack.inspector, 'GET', '/api/nothing-here');
    assert.equal(nowhere.status, 404);
    assert.equal(nowhere.json.error.code, 'NOT_FOUND');
  });

  test('replay with a header override re-sends to the local server and records a new exchange', async () => {
    await stack.send('POST', '/webhook', { body: '{"n":1}', headers: { 'content-type': 'application/json', 'x-signature': 'original' } });
    const [original] = (await inspect(stack.inspector, 'GET', '/api/requests?limit=1')).json.requests;
    const before = stack.seen.length;

    const replayed = await inspect(stack.inspector, 'POST', `/api/requests/${original.id}/replay`, { body: { headers: { 'X-Signature': 'replayed' } } });
    assert.equal(replayed.status, 200, replayed.text);
    assert.match(replayed.json.id, /^req_/);
    assert.notEqual(replayed.json.id, original.id);
    assert.equal(replayed.json.replay_of, original.id);
    assert.equal(replayed.json.status, 200);

    assert.equal(stack.seen.length, before + 1, 'the local server got the request once more');
    const seen = stack.seen.at(-1)!;
    assert.equal(seen.method, 'POST');
    assert.equal(seen.url, '/webhook');
    assert.equal(seen.headers['x-signature'], 'replayed');
    assert.equal(seen.body, '{"n":1}');

    const list = (await inspect(stack.inspector, 'GET', '/api/requests?limit=2')).json.requests;
    assert.equal(list[0].id, replayed.json.id);
    assert.equal(list[0].replay_of, original.id);
    assert.equal(header(list[0].request.headers, 'x-signature'), 'replayed');
    assert.equal(list[1].id, original.id);
    assert.equal(list[1].replay_of, null);
  });

  test('replay with edits changes method, path, headers and body', async () => {
    await stack.send('POST', '/orders', { body: '{"qty":1}', headers: { 'content-type': 'application/json' } });
    const [original] = (await inspect(stack.inspector, 'GET', '/api/requests?limit=1')).json.requests;

    const edits = { method: 'put', path: '/orders/42?dry=1', headers: { 'x-edited': 'yes' }, body: '{"qty":2}' };
    const replayed = await inspect(stack.inspector, 'POST', `/api/requests/${original.id}/replay`, { body: edits });
    assert.equal(replayed.status, 200, replayed.text);
    const seen = stack.seen.at(-1)!;
    assert.equal(seen.method, 'PUT');
    assert.equal(seen.url, '/orders/42?dry=1');
    assert.equal(seen.headers['x-edited'], 'yes');
    assert.equal(seen.headers['content-type'], 'application/json');
    assert.equal(seen.headers['content-length'], '9');
    assert.equal(seen.body, '{"qty":2}');

    const detail = (await inspect(stack.inspector, 'GET', `/api/requests/${replayed.json.id}`)).json;
    assert.equal(detail.method, 'PUT');
    assert.equal(detail.path, '/orders/42?dry=1');
    assert.equal(detail.request.body, '{"qty":2}');
    assert.equal(detail.replay_of, original.id);
  });

  test('a replay of a 500 records the failing status again; an empty body means no edits', async () => {
    await stack.send('GET', '/status/503');
    const [original] = (await inspect(stack.inspector, 'GET', '/api/requests?limit=1')).json.requests;
    const replayed = await inspect(stack.inspector, 'POST', `/api/requests/${original.id}/replay`, { rawBody: '', headers: { 'content-type': 'application/json' } });
    assert.equal(replayed.status, 200, replayed.text);
    assert.equal(replayed.json.status, 503);
    assert.equal(replayed.json.replay_of, original.id);
  });

  test('invalid edits are 400 INVALID_REQUEST and nothing is sent', async () => {
    await stack.send('GET', '/edits');
    const [original] = (await inspect(stack.inspector, 'GET', '/api/requests?limit=1')).json.requests;
    const before = stack.seen.length;
    for (const body of [{ path: 'no-slash' }, { method: 'GET /x' }, { headers: { 'bad name': 'x' } }, { body: 42 }, { colour: 'red' }]) {
      const answer = await inspect(stack.inspector, 'POST', `/api/requests/${original.id}/replay`, { body });
      assert.equal(answer.status, 400, JSON.stringify(body));
      assert.equal(answer.json.error.code, 'INVALID_REQUEST');
    }
    const notJson = await inspect(stack.inspector, 'POST', `/api/requests/${original.id}/replay`, { rawBody: '{nope', headers: { 'content-type': 'application/json' } });
    assert.equal(notJson.status, 400);
    assert.equal(stack.seen.length, before);
  });

  test('GET /api/status shows the tunnel and the ring', async () => {
    const status = await inspect(stack.inspector, 'GET', '/api/status');
    assert.equal(status.status, 200);
    assert.equal(status.json.connected, true);
    assert.equal(status.json.public_url, stack.client.publicUrl);
    assert.equal(status.json.default_port, stack.local.port);
    assert.ok(status.json.recorded > 0);
    assert.equal(status.json.max_exchanges, 1000);
    assert.equal(status.json.max_bytes, 64 * 1024 * 1024);
  });

  test('wrong methods are 405 with Allow', async () => {
    const answer = await inspect(stack.inspector, 'DELETE', '/api/requests', { body: {} });
    assert.equal(answer.status, 405);
    assert.equal(answer.json.error.code, 'METHOD_NOT_ALLOWED');
    assert.equal(answer.headers.allow, 'GET');
    const replayGet = await inspect(stack.inspector, 'GET', '/api/requests/req_00000000000000000000/replay');
    assert.equal(replayGet.status, 405);
    assert.equal(replayGet.headers.allow, 'POST');
  });
});

describe('inspector replay when the edge cannot do it', () => {
  test('the edge is gone: 502 EDGE_UNREACHABLE, the inspector keeps answering', async () => {
    const stack = await startStack();
    try {
      await stack.send('GET', '/soon-gone');
      const [original] = (await inspect(stack.inspector, 'GET', '/api/requests?limit=1')).json.requests;
      await stack.client.close();
      await stack.edge.close();
      const answer = await inspect(stack.inspector, 'POST', `/api/requests/${original.id}/replay`, { body: {} });
      assert.equal(answer.status, 502, answer.text);
      assert.equal(answer.json.error.code, 'EDGE_UNREACHABLE');
      assert.equal((await inspect(stack.inspector, 'GET', `/api/requests/${original.id}`)).status, 200);
    } finally {
      await stack.close();
    }
  });
});
