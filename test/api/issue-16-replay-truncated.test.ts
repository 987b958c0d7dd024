/**
 * Issue 16, point 1: replaying a capture whose request body was over the capture cap silently sent the
 * cut body (1,048,576 of 2,666,668 bytes), answered 200 and said truncated:false. Now the edge refuses it
 * unless the caller asks explicitly, and then says the body sent was truncated. The CLI's
 * --allow-truncated asks for it (here through the edge: no inspector runs).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { assertApiError, call, createAccount, freePort, readBody, runCli, startClient, startEdge, startLocal, tempDirs, type LocalServer, type TestAccount, type TestEdge } from '../helpers.js';

const SENT = 2_666_668;
const CAP = 1024 * 1024;

describe('issue 16: replay of a truncated capture', () => {
  let edge: TestEdge;
  let local: LocalServer;
  let account: TestAccount;
  let host: string;
  let subdomain: string;
  let close: () => Promise<void>;
  const received: number[] = [];
  const tempDir = tempDirs('burrow-issue16-replay-');

  before(async () => {
    edge = await startEdge();
    local = await startLocal((req, res) => {
      void readBody(req).then((body) => {
        received.push(body.byteLength);
        res.end('ok');
      });
    });
    account = await createAccount(edge, 'PRO');
    const started = await startClient(edge, account.token, local.port);
    host = started.host;
    subdomain = started.subdomain;
    close = () => started.client.close();
  });
  after(async () => {
    await close();
    await local.close();
    await edge.close();
  });

  async function capturedId(): Promise<string> {
    const posted = await call(edge, 'POST', '/big', { host, rawBody: Buffer.alloc(SENT, 0x61), headers: { 'content-type': 'application/octet-stream' } });
    assert.equal(posted.status, 200);
    assert.equal(received.at(-1), SENT);
    const list = await call(edge, 'GET', `/api/v1/requests?subdomain=${subdomain}&limit=1`, { token: account.token });
    return list.json.requests[0].id as string;
  }

  test('the API refuses it with REPLAY_TRUNCATED naming the truncation and the override', async () => {
    const id = await capturedId();
    const detail = await call(edge, 'GET', `/api/v1/requests/${id}`, { token: account.token });
    assert.equal(detail.json.request.truncated, true);
    const count = received.length;
    const refused = await call(edge, 'POST', `/api/v1/requests/${id}/replay`, { token: account.token });
    assertApiError(refused, 'REPLAY_TRUNCATED');
    assert.match(refused.json.error.message, /truncated/);
    assert.match(refused.json.error.message, /2666668 bytes/);
    assert.match(refused.json.error.message, /allow_truncated/);
    assert.equal(received.length, count, 'nothing was sent to the local server');
  });

  test('with allow_truncated it is sent, and the result says truncated', async () => {
    const id = await capturedId();
    const replayed = await call(edge, 'POST', `/api/v1/requests/${id}/replay`, { token: account.token, body: { allow_truncated: true } });
    assert.equal(replayed.status, 200, replayed.text);
    assert.equal(replayed.json.truncated, true);
    assert.equal(replayed.json.replay_of, id);
    assert.equal(received.at(-1), CAP);
  });

  test('a replay of a whole capture says truncated: false', async () => {
    await call(edge, 'POST', '/small', { host, rawBody: 'small' });
    const list = await call(edge, 'GET', `/api/v1/requests?subdomain=${subdomain}&limit=1`, { token: account.token });
    const replayed = await call(edge, 'POST', `/api/v1/requests/${list.json.requests[0].id}/replay`, { token: account.token });
    assert.equal(replayed.status, 200);
    assert.equal(replayed.json.truncated, false);
  });

  test('allow_truncated must be a boolean', async () => {
    const id = await capturedId();
    assertApiError(await call(edge, 'POST', `/api/v1/requests/${id}/replay`, { token: account.token, body: { allow_truncated: 'yes' } }), 'INVALID_REQUEST');
  });

  test('burrow replay prints the refusal, and sends it with --allow-truncated', async () => {
    const id = await capturedId();
    const env = { XDG_CONFIG_HOME: tempDir(), BURROW_EDGE: edge.url, BURROW_TOKEN: account.token };
    const noInspector = `http://127.0.0.1:${await freePort()}`;
    const refused = await runCli(['replay', id, '--inspector', noInspector], env);
    assert.equal(refused.code, 1, refused.stdout);
    assert.match(refused.stderr, /^burrow: REPLAY_TRUNCATED: .*--allow-truncated/);
    const sent = await runCli(['replay', id, '--allow-truncated', '--inspector', noInspector], env);
    assert.equal(sent.code, 0, sent.stderr);
    assert.match(sent.stdout, /^replayed req_\w+ as req_\w+: 200 in [0-9.]+ ms \(the body sent was truncated at the capture cap\)\n$/);
    assert.equal(received.at(-1), CAP);
  });
});
