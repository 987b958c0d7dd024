/**
 * `burrow edge --hsts` (issue 14): Strict-Transport-Security: max-age=31536000, without includeSubDomains,
 * on the API host's and the dashboard's HTTPS answers, never on a tunnel's (its local app owns those
 * headers), and refused on an edge that browsers do not reach over HTTPS.
 */
import '../wildcard-dns.js';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { echo, runCli, spawnCli, startClient, startEdge, startLocal, tempDirs } from '../helpers.js';
import { makeCa, makeServerCert } from '../tls-fixtures.js';
import { TEST_DOMAIN } from '../wildcard-dns.js';

const freshDir = tempDirs('burrow-hsts-');
const HSTS = 'max-age=31536000';

async function headerOf(url: string, dispatcher: Agent, options: { method?: 'GET' | 'POST' | 'HEAD'; headers?: Record<string, string> } = {}): Promise<string | string[] | undefined> {
  const response = await request(url, { dispatcher, ...options });
  await response.body.dump();
  return response.headers['strict-transport-security'];
}

test('--hsts: the header on the API and the dashboard over HTTPS, never on tunnel answers', async () => {
  const dir = freshDir();
  const ca = makeCa(dir, 'ca');
  const cert = makeServerCert(dir, 'edge', [`*.${TEST_DOMAIN}`, TEST_DOMAIN], ca);
  const tls = { certFile: cert.cert, keyFile: cert.key };
  const target = await startEdge({ domain: TEST_DOMAIN, tls, hsts: true });
  const without = await startEdge({ domain: TEST_DOMAIN, tls });
  const trust = new Agent({ connect: { ca: readFileSync(ca.cert, 'utf8') } });
  const plainLocal = await startLocal(echo);
  // A local app with its own policy: the edge passes it through untouched.
  const ownPolicy = await startLocal((_req, res) => {
    res.setHeader('strict-transport-security', 'max-age=60; includeSubDomains');
    res.end('mine');
  });
  const edgeUrl = `https://${TEST_DOMAIN}:${target.port}`;
  const { token } = await target.edge.store.createAccount('hsts@example.test', 'FREE', 'test');
  const first = await startClient(target, token.token, plainLocal.port, { edge: edgeUrl, ca: readFileSync(ca.cert) });
  const second = await startClient(target, token.token, ownPolicy.port, { edge: edgeUrl, ca: readFileSync(ca.cert) });
  try {
    const apiAnswers: [string, string, { method?: 'GET' | 'POST' | 'HEAD'; headers?: Record<string, string> }][] = [
      ['API instance', `${edgeUrl}/api/v1/instance`, {}],
      ['API on api.<domain>', `https://api.${TEST_DOMAIN}:${target.port}/api/v1/instance`, {}],
      ['API refusal (401)', `${edgeUrl}/api/v1/tokens`, {}],
      ['API with a token', `${edgeUrl}/api/v1/tokens`, { headers: { authorization: `Bearer ${token.token}` } }],
      ['API unknown path (404)', `${edgeUrl}/health`, {}],
      ['dashboard page', `${edgeUrl}/`, {}],
      ['dashboard script (HEAD)', `${edgeUrl}/dashboard/app.js`, { method: 'HEAD' }],
    ];
    for (const [name, url, options] of apiAnswers) {
      assert.equal(await headerOf(url, trust, options), HSTS, name);
      assert.equal(await headerOf(url.replace(`:${target.port}`, `:${without.port}`), trust, options), undefined, `${name}, without --hsts`);
    }

    const tunnelAnswers: [string, string, string | undefined][] = [
      ['tunnel answer', `${first.publicUrl}/page`, undefined],
      ['tunnel answer with its own policy', `${second.publicUrl}/page`, 'max-age=60; includeSubDomains'],
      ['no tunnel on this subdomain (the edge answers 404)', `https://offline.${TEST_DOMAIN}:${target.port}/`, undefined],
    ];
    for (const [name, url, expected] of tunnelAnswers) assert.equal(await headerOf(url, trust), expected, name);
  } finally {
    await first.client.close();
    await second.client.close();
    await trust.close();
    await plainLocal.close();
    await ownPolicy.close();
    await without.close();
    await target.close();
  }
});

test('--hsts without HTTPS is a usage error; behind a TLS proxy (an https --public-url) it is sent', async () => {
  const dir = freshDir();
  const env = { XDG_CONFIG_HOME: join(dir, 'config'), BURROW_TOKEN: '', BURROW_EDGE: '', BURROW_CA: '' };
  const refusals: string[][] = [
    ['--hsts'],
    ['--hsts', '--public-url', 'http://tunnels.example.test'],
    ['--hsts', '--public-port', '443'],
  ];
  for (const args of refusals) {
    const refused = await runCli(['edge', '--port', '0', '--data', join(dir, 'data'), ...args], env);
    assert.equal(refused.code, 2, args.join(' '));
    assert.equal(
      refused.stderr,
      'burrow: --hsts tells browsers to use HTTPS only: it needs --tls-cert and --tls-key, or an https --public-url (a TLS proxy in front)\n',
      args.join(' '),
    );
  }
  await assert.rejects(startEdge({ hsts: true }), /HSTS is for an edge served over HTTPS/);

  // Behind a TLS-terminating proxy the edge itself speaks plain HTTP; the proxy relays the header over HTTPS.
  const edge = await spawnCli(
    ['edge', '--port', '0', '--data', join(dir, 'data'), '--hsts', '--public-url', `https://${TEST_DOMAIN}`],
    env,
    /bound to 127\.0\.0\.1:(\d+)/,
  );
  try {
    const port = Number(edge.match[1]);
    const api = await request(`http://127.0.0.1:${port}/api/v1/instance`, { headers: { host: TEST_DOMAIN } });
    await api.body.dump();
    assert.equal(api.headers['strict-transport-security'], HSTS);
    const tunnel = await request(`http://127.0.0.1:${port}/`, { headers: { host: `offline.${TEST_DOMAIN}` } });
    await tunnel.body.dump();
    assert.equal(tunnel.headers['strict-transport-security'], undefined);
  } finally {
    edge.child.kill('SIGTERM');
    assert.equal(await edge.exited, 0);
  }
});
