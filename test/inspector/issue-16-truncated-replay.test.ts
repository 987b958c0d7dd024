/**
 * Issue 16, point 1: replaying a request whose captured body was cut at the capture limit used to send
 * the cut body silently (200, truncated:false). Now the inspector and the edge API refuse it with 409
 * REPLAY_TRUNCATED unless the caller sends "allow_truncated": true (or replaces the body), and the
 * inspector's answer says truncated.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { call } from '../helpers.js';
import { inspect, startStack, type Stack } from './fixture.js';

const LIMIT = 1024;

describe('issue 16: replaying a truncated capture', () => {
  let stack: Stack;
  let id: string;
  const body = 'x'.repeat(LIMIT * 3);

  before(async () => {
    // The client records and the edge captures 1 KiB of each body here (both 1 MiB by default).
    stack = await startStack({}, LIMIT, { captureBodyLimit: LIMIT });
    await stack.send('POST', '/big', { body, headers: { 'content-type': 'text/plain' } });
    id = (await inspect(stack.inspector, 'GET', '/api/requests?limit=1')).json.requests[0].id;
  });

  after(async () => {
    await stack.close();
  });

  test('the capture is marked truncated', async () => {
    const detail = (await inspect(stack.inspector, 'GET', `/api/requests/${id}`)).json;
    assert.equal(detail.request.truncated, true);
    assert.equal(detail.request.body_size, LIMIT * 3);
  });

  test('the inspector refuses the replay with REPLAY_TRUNCATED; nothing reaches the local server', async () => {
    const count = stack.seen.length;
    const answer = await inspect(stack.inspector, 'POST', `/api/requests/${id}/replay`, { body: {} });
    assert.equal(answer.status, 409, answer.text);
    assert.equal(answer.json.error.code, 'REPLAY_TRUNCATED');
    assert.match(answer.json.error.message, /allow_truncated/);
    assert.equal(stack.seen.length, count);
  });

  test('with allow_truncated the cut body is sent and the answer says truncated', async () => {
    const count = stack.seen.length;
    const answer = await inspect(stack.inspector, 'POST', `/api/requests/${id}/replay`, { body: { allow_truncated: true } });
    assert.equal(answer.status, 200, answer.text);
    assert.equal(answer.json.truncated, true);
    assert.equal(answer.json.replay_of, id);
    assert.equal(stack.seen.length, count + 1);
    assert.equal(stack.seen.at(-1)!.body.length, LIMIT);
    const wrong = await inspect(stack.inspector, 'POST', `/api/requests/${id}/replay`, { body: { allow_truncated: 'yes' } });
    assert.equal(wrong.status, 400);
  });

  test('a replacement body needs no override and is not truncated', async () => {
    const answer = await inspect(stack.inspector, 'POST', `/api/requests/${id}/replay`, { body: { body: 'short' } });
    assert.equal(answer.status, 200, answer.text);
    assert.equal(answer.json.truncated, false);
    assert.equal(stack.seen.at(-1)!.body, 'short');
  });

  test('the edge API refuses the same way and takes the same field', async () => {
    const count = stack.seen.length;
    const refused = await call(stack.edge, 'POST', `/api/v1/requests/${id}/replay`, { token: stack.account.token, body: {} });
    assert.equal(refused.status, 409, refused.text);
    assert.equal(refused.json.error.code, 'REPLAY_TRUNCATED');
    assert.equal(stack.seen.length, count);
    const allowed = await call(stack.edge, 'POST', `/api/v1/requests/${id}/replay`, { token: stack.account.token, body: { allow_truncated: true } });
    assert.equal(allowed.status, 200, allowed.text);
    assert.equal(allowed.json.truncated, true);
    assert.equal(allowed.json.replay_of, id);
    assert.equal(stack.seen.at(-1)!.body.length, LIMIT);
  });

  test('a request that was not truncated replays without the field, as before', async () => {
    await stack.send('POST', '/small', { body: 'tiny' });
    const small = (await inspect(stack.inspector, 'GET', '/api/requests?limit=1')).json.requests[0];
    const answer = await inspect(stack.inspector, 'POST', `/api/requests/${small.id}/replay`, { body: {} });
    assert.equal(answer.status, 200, answer.text);
    assert.equal(answer.json.truncated, false);
  });
});
