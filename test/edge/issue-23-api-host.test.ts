/**
 * Issue 23: the dashboard and the API on a host of their own (`burrow edge --api-host`), on another
 * registrable domain than the tunnels', so no tunnel's page can set a cookie the dashboard receives
 * (docs/deploy.md); and the lower item "API answers lack nosniff and frame-ancestors".
 *
 * A real TLS edge with tunnels on *.burrow.test and the API on dashboard.test (both resolved to
 * 127.0.0.1 by test/wildcard-dns.ts), a real tunnel client given the API host as its edge, a real local
 * server.
 */
import assert from 'node:assert/strict';
import '../wildcard-dns.js';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { Agent, request } from 'undici';
import { RouteTable } from '../../src/client/routes.js';
import { TunnelClient } from '../../src/client/tunnel-client.js';
import { createAccount, echo, runCli, spawnCli, startEdge, startLocal, tempDirs, type LocalServer, type TestAccount, type TestEdge } from '../helpers.js';
import { makeCa, makeServerCert } from '../tls-fixtures.js';
import { TEST_API_HOST, TEST_DOMAIN } from '../wildcard-dns.js';

const dirs = tempDirs('burrow-api-host-');

describe('--api-host: the API and the dashboard on dashboard.test, tunnels on *.burrow.test', () => {
  let edge: TestEdge;
  let agent: Agent;
  let ca: string;
  let alice: TestAccount;
  let local: LocalServer;
  let client: TunnelClient;
  let api: string;
  let tunnelDomain: string;

  before(async () => {
    const dir = dirs();
    const authority = makeCa(dir, 'ca');
    const pem = makeServerCert(dir, 'edge', [TEST_DOMAIN, `*.${TEST_DOMAIN}`, TEST_API_HOST], authority);
    ca = readFileSync(authority.cert, 'utf8');
    edge = await startEdge({ domain: TEST_DOMAIN, apiHost: TEST_API_HOST, tls: { certFile: pem.cert, keyFile: pem.key }, authFailureLimit: 1_000 });
    agent = new Agent({ connect: { ca } });
    api = `https://${TEST_API_HOST}:${edge.port}`;
    tunnelDomain = `https://${TEST_DOMAIN}:${edge.port}`;
    alice = await createAccount(edge);
    local = await startLocal(echo);
    client = new TunnelClient({ edge: api, token: alice.token, routes: new RouteTable(local.port, []), subdomain: 'hooks', ca, minBackoffMs: 50, maxBackoffMs: 500 });
  });

  after(async () => {
    client?.close();
    await local?.close();
    await agent?.close();
    await edge?.close();
  });

  const get = async (url: string, headers: Record<string, string> = {}, method = 'GET', body?: string) => {
    const response = await request(url, { method: method as 'GET', dispatcher: agent, headers, ...(body === undefined ? {} : { body }) });
    const text = await response.body.text();
    return { status: response.statusCode, headers: response.headers, text, json: text.startsWith('{') ? JSON.parse(text) : undefined };
  };

  test("the edge's URL is the API host; a client given it gets a tunnel on the tunnels' domain, and traffic flows", async () => {
    assert.equal(edge.edge.url, api);
    const ready = await client.start();
    assert.equal(ready.publicUrl, `https://hooks.${TEST_DOMAIN}:${edge.port}`);
    const through = await get(`${ready.publicUrl}/webhook?x=1`);
    assert.equal(through.status, 200);
    assert.equal(through.json.url, '/webhook?x=1');
    const tunnels = await get(`${api}/api/v1/tunnels`, { authorization: `Bearer ${alice.token}` });
    assert.deepEqual(tunnels.json.tunnels.map((t: { subdomain: string }) => t.subdomain), ['hooks']);
  });

  test('the dashboard and sign-in are on the API host only; the tunnel domain serves the API to tokens and ignores cookies', async () => {
    const page = await get(`${api}/`);
    assert.equal(page.status, 200);
    assert.match(page.text, /Access token/);
    const signIn = await get(`${api}/api/v1/session`, { origin: api, 'x-burrow-csrf': '1', 'content-type': 'application/json' }, 'POST', JSON.stringify({ token: alice.token }));
    assert.equal(signIn.status, 201, signIn.text);
    const cookie = String(signIn.headers['set-cookie']).split(';')[0]!;
    assert.match(cookie, /^__Host-burrow_session=/);
    assert.equal(signIn.json.tunnel_url, `https://{subdomain}.${TEST_DOMAIN}:${edge.port}`);
    assert.equal((await get(`${api}/api/v1/auth/me`, { cookie })).status, 200);

    for (const host of [tunnelDomain, `https://api.${TEST_DOMAIN}:${edge.port}`]) {
      const noPage = await get(`${host}/`);
      assert.equal(noPage.status, 404, host);
      assert.doesNotMatch(noPage.text, /Access token/);
      assert.equal((await get(`${host}/api/v1/auth/me`, { authorization: `Bearer ${alice.token}` })).status, 200, `${host}: tokens work`);
      const withCookie = await get(`${host}/api/v1/auth/me`, { cookie });
      assert.equal(withCookie.status, 401, `${host}: a cookie is nobody here`);
      assert.equal(withCookie.headers['set-cookie'], undefined);
      const elsewhere = await get(`${host}/api/v1/session`, { origin: host, 'x-burrow-csrf': '1', 'content-type': 'application/json' }, 'POST', JSON.stringify({ token: alice.token }));
      assert.equal(elsewhere.status, 404, elsewhere.text);
      assert.equal(elsewhere.json.error.code, 'NOT_FOUND');
      assert.equal(elsewhere.headers['set-cookie'], undefined);
    }
  });

  test('API answers carry nosniff, frame-ancestors and X-Frame-Options; tunnel answers never do', async () => {
    const answers = [
      await get(`${api}/api/v1/instance`),
      await get(`${api}/api/v1/tokens`, { authorization: `Bearer ${alice.token}` }),
      await get(`${api}/api/v1/tokens`),
      await get(`${api}/api/v1/nothing-here`),
      await get(`${tunnelDomain}/api/v1/instance`),
      await get(`${api}/api/v1/tokens`, { authorization: `Bearer ${alice.token}`, 'content-type': 'application/json' }, 'POST', 'x'.repeat(70 * 1024)),
    ];
    for (const answer of answers) {
      assert.equal(answer.headers['x-content-type-options'], 'nosniff', answer.text);
      assert.match(String(answer.headers['content-security-policy']), /frame-ancestors 'none'/);
      assert.equal(answer.headers['x-frame-options'], 'DENY');
    }
    const page = await get(`${api}/`);
    assert.equal(page.headers['x-content-type-options'], 'nosniff', 'the page keeps its own, once');
    assert.match(String(page.headers['content-security-policy']), /script-src 'self'/);
    const tunnel = await get(`https://hooks.${TEST_DOMAIN}:${edge.port}/`);
    assert.equal(tunnel.status, 200);
    const missing = await get(`https://nobody.${TEST_DOMAIN}:${edge.port}/`);
    assert.equal(missing.status, 404);
    for (const answer of [tunnel, missing]) {
      for (const name of ['x-content-type-options', 'content-security-policy', 'x-frame-options']) assert.equal(answer.headers[name], undefined, `${name} on a tunnel's answer`);
    }
  });
});

test('burrow edge --api-host refuses a host the tunnels can set cookies for, and an address', async () => {
  const env = { XDG_CONFIG_HOME: dirs(), BURROW_TOKEN: '', BURROW_EDGE: '' };
  for (const [apiHost, reason] of [
    ['dash.burrow-tunnels.example', /under the tunnels' domain burrow-tunnels\.example/],
    ['example', /parent of the tunnels' domain/],
    ['10.0.0.5', /must be a DNS name/],
  ] as const) {
    const result = await runCli(['edge', '--domain', 'burrow-tunnels.example', '--api-host', apiHost, '--port', '0', '--data', dirs()], env);
    assert.equal(result.code, 2, result.stderr);
    assert.match(result.stderr, reason);
  }
});

test('burrow edge --dev over plain HTTP says in its banner that it is not safe to expose; over HTTPS it does not', async () => {
  const env = { XDG_CONFIG_HOME: dirs(), BURROW_TOKEN: '', BURROW_EDGE: '' };
  const plain = await spawnCli(['edge', '--dev', '--port', '0', '--data', dirs()], env, /dev token|dev account/);
  plain.child.kill('SIGTERM');
  assert.equal(await plain.exited, 0);
  assert.match(plain.output(), /listening on http:\/\/localhost:\d+.*\nburrow edge: plain HTTP: for this machine only, not safe to expose/);
  const json = await spawnCli(['edge', '--port', '0', '--data', dirs(), '--json'], env, /"event":"listening"/);
  json.child.kill('SIGTERM');
  assert.equal(await json.exited, 0);
  const listening = JSON.parse(json.output().split('\n').find((line) => line.includes('"listening"'))!);
  assert.match(listening.warning, /not safe to expose/);

  const dir = dirs();
  const pem = makeServerCert(dir, 'edge', [TEST_DOMAIN, `*.${TEST_DOMAIN}`], null);
  const tls = await spawnCli(['edge', '--domain', TEST_DOMAIN, '--tls-cert', pem.cert, '--tls-key', pem.key, '--port', '0', '--data', dirs()], env, /listening on https:/);
  tls.child.kill('SIGTERM');
  assert.equal(await tls.exited, 0);
  assert.doesNotMatch(tls.output(), /not safe to expose/);
});
