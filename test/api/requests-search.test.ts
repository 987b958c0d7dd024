/**
 * `GET /api/v1/requests?q=` (a Burrow extension, docs/api.md): a case-insensitive substring search over
 * method, path, status, headers and the captured bodies, bounded to the newest captures of the call's
 * window, validated. Real edge, real client, real local server.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { TunnelClient } from '../../src/client/tunnel-client.js';
import { assertApiError, call, createAccount, readBody, startClient, startEdge, startLocal, type LocalServer, type TestAccount, type TestEdge } from '../helpers.js';
import { REQUEST_SEARCH_SCAN } from '../../src/api/api.js';

describe('searching captured requests', () => {
  let edge: TestEdge;
  let account: TestAccount;
  let other: TestAccount;
  let local: LocalServer;
  let client: TunnelClient;
  let host: string;
  let subdomain: string;

  before(async () => {
    edge = await startEdge({ authFailureLimit: 1_000 });
    account = await createAccount(edge, 'PRO');
    other = await createAccount(edge);
    local = await startLocal((req, res) => {
      void readBody(req).then((body) => {
        res.setHeader('content-type', 'text/plain');
        res.setHeader('x-trace', req.url === '/traced' ? 'Trace-Id-77' : 'none');
        // The response body echoes a marker only for /echo: found through the response side.
        res.end(req.url === '/echo' ? `echo ${body.toString('utf8')}` : 'ok');
      });
    });
    ({ client, host, subdomain } = await startClient(edge, account.token, local.port));
    const send = async (path: string, body: string | Buffer, headers: Record<string, string> = {}) => {
      const response = await call(edge, 'POST', path, { host, rawBody: body, headers: { 'content-type': 'application/json', ...headers } });
      assert.equal(response.status, 200, response.text);
    };
    await send('/hooks/stripe', '{"id":"evt_1QxSearchMe42","object":"event","type":"invoice.paid"}');
    await send('/hooks/github', '{"action":"opened","number":7}', { 'x-github-delivery': 'c0ffee-1234' });
    await send('/upload', Buffer.from([0x00, 0xff, 0x45, 0x56, 0x54, 0x5f, 0x42, 0x49, 0x4e, 0x80])); // "EVT_BIN" among bytes
    await send('/greet', 'Grüße aus Köln');
    await send('/traced', '{}');
    await send('/echo', 'marker-in-response');
  });

  after(async () => {
    await client?.close();
    await local?.close();
    await edge?.close();
  });

  const search = (q: string, extra = '') => call(edge, 'GET', `/api/v1/requests?subdomain=${subdomain}&q=${encodeURIComponent(q)}${extra}`, { token: account.token });
  const paths = (response: { json: { requests: { path: string }[] } }) => response.json.requests.map((item) => item.path);

  test('a body holding an event id is found, case-insensitively; the others are not', async () => {
    const found = await search('EVT_1qxsearchme42');
    assert.equal(found.status, 200, found.text);
    assert.deepEqual(paths(found), ['/hooks/stripe']);
    assert.equal(found.json.scanned, 6);
    assert.equal(found.json.next_before, null);
    assert.deepEqual(Object.keys(found.json.requests[0]).sort(), ['duration_ms', 'id', 'method', 'path', 'received_at', 'status']);
    assert.deepEqual(paths(await search('evt_nowhere')), []);
  });

  test('headers, response bodies, paths, binary bodies and UTF-8 text are searched too', async () => {
    assert.deepEqual(paths(await search('C0FFEE-1234')), ['/hooks/github'], 'a request header value');
    assert.deepEqual(paths(await search('trace-id-77')), ['/traced'], 'a response header value');
    assert.deepEqual(paths(await search('echo marker-in')), ['/echo'], 'the response body');
    assert.deepEqual(paths(await search('/HOOKS/')), ['/hooks/github', '/hooks/stripe'], 'the path, newest first');
    assert.deepEqual(paths(await search('evt_bin')), ['/upload'], 'ASCII inside a binary body');
    assert.deepEqual(paths(await search('GRÜSSE')), [], 'no Unicode special casing beyond lower case');
    assert.deepEqual(paths(await search('GRÜßE AUS')), ['/greet'], 'non-ASCII: the body as UTF-8, lower-cased');
  });

  test('limit and next_before page through the matches', async () => {
    const first = await search('/hooks/', '&limit=1');
    assert.deepEqual(paths(first), ['/hooks/github']);
    assert.equal(first.json.next_before, first.json.requests[0].id);
    const second = await search('/hooks/', `&limit=1&before=${first.json.next_before}`);
    assert.deepEqual(paths(second), ['/hooks/stripe']);
    assert.equal(second.json.next_before, null, 'the oldest capture: nothing left to search');
  });

  test(`a call looks at ${REQUEST_SEARCH_SCAN} captures at most and says where to go on`, async () => {
    // 1,000 more small requests on top: the Stripe one is now beyond the first call's window.
    for (let i = 0; i < REQUEST_SEARCH_SCAN; i += 50) {
      await Promise.all(Array.from({ length: 50 }, (_, j) => call(edge, 'GET', `/filler/${i + j}`, { host })));
    }
    const first = await search('evt_1qxsearchme42');
    assert.deepEqual(paths(first), []);
    assert.equal(first.json.scanned, REQUEST_SEARCH_SCAN);
    assert.match(first.json.next_before, /^req_/);
    const rest = await search('evt_1qxsearchme42', `&before=${first.json.next_before}`);
    assert.deepEqual(paths(rest), ['/hooks/stripe']);
    assert.equal(rest.json.scanned, 6);
    assert.equal(rest.json.next_before, null);
  });

  test('q of 0 or more than 256 characters is 400 INVALID_REQUEST; another account finds nothing', async () => {
    assertApiError(await search(''), 'INVALID_REQUEST');
    assertApiError(await search('x'.repeat(257)), 'INVALID_REQUEST');
    assert.equal((await search('x'.repeat(256))).status, 200);
    const foreign = await call(edge, 'GET', `/api/v1/requests?subdomain=${subdomain}&q=evt`, { token: other.token });
    assertApiError(foreign, 'NOT_FOUND');
  });
});
