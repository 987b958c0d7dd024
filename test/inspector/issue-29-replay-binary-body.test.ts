/**
 * Issue 29: a replay could only replace a body with text, so a binary body could not be edited (the
 * dashboard's editor even sent it empty). Both replay APIs now take `"body_encoding": "base64"` with
 * `"body"`, and the inspector forwards such a body to the edge byte for byte. Real edge, client, local
 * server and inspector.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { call } from '../helpers.js';
import { inspect, startStack, type Stack } from './fixture.js';

const BYTES = Buffer.from([0x00, 0xff, 0xfe, 0x80, 0x0d, 0x0a, 0x41]);

describe('issue 29: replaying with a binary body', () => {
  let stack: Stack;
  let id: string;

  before(async () => {
    stack = await startStack();
    await stack.send('POST', '/bin', { body: Buffer.from([1, 2, 3]), headers: { 'content-type': 'application/octet-stream' } });
    id = (await inspect(stack.inspector, 'GET', '/api/requests?limit=1')).json.requests[0].id;
  });

  after(async () => {
    await stack.close();
  });

  test('the edge API sends a base64 body as its bytes, with its length', async () => {
    const answer = await call(stack.edge, 'POST', `/api/v1/requests/${id}/replay`, { token: stack.account.token, body: { body: BYTES.toString('base64'), body_encoding: 'base64' } });
    assert.equal(answer.status, 200, answer.text);
    assert.deepEqual(stack.seen.at(-1)!.raw, BYTES);
    assert.equal(stack.seen.at(-1)!.headers['content-length'], String(BYTES.length));
    assert.equal(answer.json.request.body_encoding, 'base64');
    assert.deepEqual(Buffer.from(answer.json.request.body, 'base64'), BYTES);
  });

  test('the inspector forwards a base64 body to the edge byte for byte, and a text one as text', async () => {
    const binary = await inspect(stack.inspector, 'POST', `/api/requests/${id}/replay`, { body: { body: BYTES.toString('base64'), body_encoding: 'base64' } });
    assert.equal(binary.status, 200, binary.text);
    assert.deepEqual(stack.seen.at(-1)!.raw, BYTES);
    const text = await inspect(stack.inspector, 'POST', `/api/requests/${id}/replay`, { body: { body: Buffer.from('héllo').toString('base64'), body_encoding: 'base64' } });
    assert.equal(text.status, 200, text.text);
    assert.equal(stack.seen.at(-1)!.body, 'héllo');
  });

  test('bad encodings are 400 INVALID_REQUEST and nothing is sent', async () => {
    const count = stack.seen.length;
    for (const fields of [{ body: 'not base64!', body_encoding: 'base64' }, { body: 'abc', body_encoding: 'hex' }, { body_encoding: 'base64' }, { body: 'QQ', body_encoding: 'base64' }]) {
      const edge = await call(stack.edge, 'POST', `/api/v1/requests/${id}/replay`, { token: stack.account.token, body: fields });
      assert.equal(edge.status, 400, `${JSON.stringify(fields)}: ${edge.text}`);
      assert.equal(edge.json.error.code, 'INVALID_REQUEST');
      const local = await inspect(stack.inspector, 'POST', `/api/requests/${id}/replay`, { body: fields });
      assert.equal(local.status, 400, `${JSON.stringify(fields)}: ${local.text}`);
    }
    assert.equal(stack.seen.length, count);
  });
});
