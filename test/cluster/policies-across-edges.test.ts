/**
 * Issue 26 in cluster mode, two real edges on one real Redis: the edge that receives a public request
 * applies the tunnel's policy before the hop to the edge holding the tunnel, whether the policy is the
 * client's one-run policy (it travels in the lease) or stored on the reservation (changed on one edge,
 * applied on every edge through Redis). The edge holding the tunnel does not decide again for a request
 * another edge forwarded, so a refusal seen through B is B's own.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { request } from 'undici';
import { call, createAccount, readBody, startClient, startLocal, waitFor, type LocalServer, type TestAccount, type TestEdge } from '../helpers.js';
import { TestRedis, redisSkip } from '../redis-server.js';
import { startClusterEdge } from './cluster-helpers.js';

const redis = redisSkip === false ? await TestRedis.start() : null;
const basic = (pair: string): string => `Basic ${Buffer.from(pair).toString('base64')}`;

describe('tunnel policies across the edges of a cluster', { skip: redisSkip }, () => {
  let a: TestEdge;
  let b: TestEdge;
  let account: TestAccount;
  let local: LocalServer;
  const seen: { url: string; authorization: string | undefined; body: string }[] = [];
  const clients: { close(): Promise<void> }[] = [];

  before(async () => {
    a = await startClusterEdge(redis!.url, 'a');
    b = await startClusterEdge(redis!.url, 'b');
    account = await createAccount(a, 'PRO');
    local = await startLocal((req, res) => {
      void readBody(req).then((body) => {
        seen.push({ url: req.url!, authorization: req.headers.authorization, body: body.toString() });
        res.end('local');
      });
    });
  });

  after(async () => {
    for (const client of clients) await client.close();
    await local.close();
    await Promise.all([a.close(), b.close()]);
  });

  const send = async (edge: TestEdge, subdomain: string, path: string, headers: Record<string, string> = {}, body?: string) => {
    const response = await request(`${edge.base}${path}`, { method: body === undefined ? 'GET' : 'POST', headers: { host: `${subdomain}.localhost:${edge.port}`, ...headers }, ...(body === undefined ? {} : { body }) });
    const text = await response.body.text();
    return { status: response.statusCode, text, code: response.headers['burrow-error'] };
  };

  test('a one-run policy (basic auth) is applied by the edge that receives the request, before the hop', async () => {
    const started = await startClient(a, account.token, local.port, { subdomain: 'run-across', policy: { basic_auth: [{ user: 'ann', password: 's3cret' }] } });
    clients.push(started.client);
    await waitFor(async () => (await send(b, 'run-across', '/probe')).status === 401, 5_000, 'B knows the tunnel and its policy');
    const refused = await send(b, 'run-across', '/refused', {}, 'payload');
    assert.deepEqual([refused.status, refused.code], [401, 'AUTHENTICATION_REQUIRED']);
    const allowed = await send(b, 'run-across', '/allowed', { authorization: basic('ann:s3cret') }, 'payload');
    assert.deepEqual([allowed.status, allowed.text], [200, 'local']);
    assert.deepEqual(seen.filter((entry) => entry.url !== '/probe').map((entry) => [entry.url, entry.authorization, entry.body]), [['/allowed', undefined, 'payload']]);
  });

  test('a stored policy changed through the API of one edge applies at once on both, on the tunnel\'s edge and on the forwarding one', async () => {
    assert.equal((await call(a, 'POST', '/api/v1/reserved-subdomains', { token: account.token, body: { subdomain: 'stored-across' } })).status, 201);
    const started = await startClient(a, account.token, local.port, { subdomain: 'stored-across' });
    clients.push(started.client);
    await waitFor(async () => (await send(b, 'stored-across', '/open')).status === 200, 5_000, 'the tunnel through B');
    const put = await call(b, 'PUT', '/api/v1/reserved-subdomains/stored-across/policy', { token: account.token, body: { deny_cidr: ['127.0.0.0/8'] } });
    assert.equal(put.status, 200, put.text);
    for (const edge of [a, b]) await waitFor(async () => (await send(edge, 'stored-across', '/closed')).code === 'ADDRESS_FORBIDDEN', 5_000, 'the new policy applied');
    assert.equal((await call(a, 'DELETE', '/api/v1/reserved-subdomains/stored-across/policy', { token: account.token })).status, 204);
    for (const edge of [a, b]) await waitFor(async () => (await send(edge, 'stored-across', '/open-again')).status === 200, 5_000, 'the policy removed');
  });
});
