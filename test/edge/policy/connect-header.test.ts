/**
 * The one-run policy's connect header (`burrow-policy`, docs/protocol.md section 1, docs/policies.md) on a
 * real edge: a valid one is taken (passwords hashed, secrets sealed, kept on the session); a header that
 * is not base64url JSON, a rule that is not valid (the field named), one over the size limit are 400
 * INVALID_REQUEST before anything is admitted; on a reserved name with a stored policy a one-run policy
 * is refused (and a connect without one is not). Through the client library and through `burrow http`.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import WebSocket from 'ws';
import { TunnelRefusedError } from '../../../src/client/tunnel-client.js';
import { CONNECT_PATH, PROTOCOL_HEADER, PROTOCOL_VERSION } from '../../../src/protocol/constants.js';
import { POLICY_HEADER, type PolicySpec } from '../../../src/protocol/policy.js';
import { SecretBox } from '../../../src/store/secret-box.js';
import { call, createAccount, runCli, spawnCli, startClient, startEdge, startLocal, tempDir, type LocalServer, type TestAccount, type TestEdge } from '../../helpers.js';

let edge: TestEdge;
let local: LocalServer;
let account: TestAccount;

before(async () => {
  edge = await startEdge();
  local = await startLocal((_req, res) => res.end('ok'));
  account = await createAccount(edge, 'PRO');
});
after(async () => {
  await local.close();
  await edge.close();
});

/** A connect with this raw burrow-policy value: the refusal's status and body, or 101. */
async function rawConnect(policyHeader: string, subdomain: string): Promise<{ status: number; body: { error: { code: string; message: string } } | null }> {
  // The agent port (issue 24): where tunnel clients connect.
  const socket = new WebSocket(`ws://127.0.0.1:${edge.edge.agentPort}${CONNECT_PATH}?port=${local.port}&subdomain=${subdomain}`, {
    headers: { host: `localhost:${edge.port}`, authorization: `Bearer ${account.token}`, [PROTOCOL_HEADER]: String(PROTOCOL_VERSION), [POLICY_HEADER]: policyHeader },
  });
  return new Promise((resolve, reject) => {
    socket.once('open', () => {
      socket.close();
      resolve({ status: 101, body: null });
    });
    socket.once('unexpected-response', (_request, response) => {
      let text = '';
      response.on('data', (chunk: Buffer) => (text += chunk.toString()));
      response.on('end', () => resolve({ status: response.statusCode!, body: JSON.parse(text) }));
    });
    socket.once('error', reject);
  });
}

async function refusal(policy: unknown, subdomain: string): Promise<TunnelRefusedError> {
  try {
    const started = await startClient(edge, account.token, local.port, { subdomain, policy: policy as PolicySpec });
    await started.client.close();
  } catch (error) {
    assert.ok(error instanceof TunnelRefusedError, String(error));
    return error;
  }
  assert.fail('expected the connect to be refused');
}

test('a valid one-run policy is taken: secrets sealed, on the session only', async () => {
  const policy: PolicySpec = { verify_webhook: [{ provider: 'github', secret: 'gh-secret' }], request_header_add: [{ name: 'X-Team', value: 'blue' }], rate_limit: { requests: 10, period_seconds: 1 } };
  const started = await startClient(edge, account.token, local.port, { subdomain: 'one-run-policy', policy });
  try {
    const stored = edge.edge.registry.session('one-run-policy')!.runPolicy!;
    assert.deepEqual(stored.requestHeaderAdd, [['X-Team', 'blue']]);
    assert.doesNotMatch(JSON.stringify(stored), /gh-secret/);
    assert.equal(SecretBox.open(`${edge.dataDir}/secret.key`).open(stored.webhooks![0]!.secret), 'gh-secret');
    assert.equal(await edge.edge.accounts.getReservation('one-run-policy'), undefined, 'nothing stored on a reservation');
  } finally {
    await started.client.close();
  }
});

test('access rules (basic auth, CIDR) are taken at connect and applied from the first request, one-run or stored', async () => {
  const cases: [PolicySpec, number, string][] = [
    [{ basic_auth: [{ user: 'ann', password: 'correct-horse' }] }, 401, 'AUTHENTICATION_REQUIRED'],
    [{ deny_cidr: ['127.0.0.0/8'] }, 403, 'ADDRESS_FORBIDDEN'],
    [{ allow_cidr: ['10.0.0.0/8'], verify_webhook: [{ provider: 'github', secret: 'gh-secret' }] }, 403, 'ADDRESS_FORBIDDEN'],
  ];
  for (const [policy, status, code] of cases) {
    const started = await startClient(edge, account.token, local.port, { subdomain: 'access-rules', policy });
    try {
      assert.notEqual(edge.edge.registry.session('access-rules')!.policy, null, 'compiled at connect');
      const answer = await call(edge, 'GET', '/', { host: `access-rules.localhost:${edge.port}` });
      assert.deepEqual([answer.status, answer.json?.error?.code, answer.headers['burrow-error']], [status, code, code]);
    } finally {
      await started.client.close();
    }
  }
  // Stored on a reservation: a tunnel without flags gets it.
  assert.equal((await call(edge, 'POST', '/api/v1/reserved-subdomains', { token: account.token, body: { subdomain: 'stored-access' } })).status, 201);
  assert.equal((await call(edge, 'PUT', '/api/v1/reserved-subdomains/stored-access/policy', { token: account.token, body: { basic_auth: [{ user: 'ann', password: 'pw' }] } })).status, 200);
  const stored = await startClient(edge, account.token, local.port, { subdomain: 'stored-access' });
  try {
    assert.equal((await call(edge, 'GET', '/', { host: `stored-access.localhost:${edge.port}` })).status, 401);
    const authorized = await call(edge, 'GET', '/', { host: `stored-access.localhost:${edge.port}`, headers: { authorization: `Basic ${Buffer.from('ann:pw').toString('base64')}` } });
    assert.deepEqual([authorized.status, authorized.text], [200, 'ok']);
  } finally {
    await stored.client.close();
  }
});

test('a header that is not a valid policy is 400 INVALID_REQUEST naming what is wrong, before anything is admitted', async () => {
  const cases: [string, RegExp][] = [
    ['not base64url!', /^The burrow-policy header must be base64url\.$/],
    [Buffer.from('{"allow_cidr": [').toString('base64url'), /^The burrow-policy header is not base64url of a JSON object\.$/],
    [Buffer.from(JSON.stringify({ allow_cidr: ['10.0.0.0/33'] })).toString('base64url'), /^burrow-policy\.allow_cidr\[0\]: "10\.0\.0\.0\/33": the prefix length must be 0 to 32\.$/],
    [Buffer.from(JSON.stringify({ basic_auth: [{ user: 'ann' }] })).toString('base64url'), /^burrow-policy: basic_auth user "ann" needs a password\.$/],
    [Buffer.from(JSON.stringify({ colour: 'blue' })).toString('base64url'), /^burrow-policy: unknown field "colour"/],
    ['A'.repeat(3_073), /^The burrow-policy header is longer than 3072 bytes\.$/],
  ];
  for (const [header, message] of cases) {
    const answer = await rawConnect(header, 'bad-policy-header');
    assert.equal(answer.status, 400, header.slice(0, 40));
    assert.equal(answer.body!.error.code, 'INVALID_REQUEST');
    assert.match(answer.body!.error.message, message);
  }
  assert.equal(edge.edge.registry.session('bad-policy-header'), undefined);
  // Through the client library: its refusal carries the edge's status, code and message.
  const refused = await refusal({ request_header_add: [{ name: 'Connection', value: 'close' }] }, 'bad-policy-client');
  assert.deepEqual([refused.status, refused.code], [400, 'INVALID_REQUEST']);
  assert.match(refused.message, /burrow-policy\.request_header_add\[0\]\.name: "Connection" is a hop-by-hop header/);
});

test('a reserved name with a stored policy refuses a one-run policy; without one it connects, and a name without a stored policy takes one', async () => {
  assert.equal((await call(edge, 'POST', '/api/v1/reserved-subdomains', { token: account.token, body: { subdomain: 'stored-policy' } })).status, 201);
  assert.equal((await call(edge, 'POST', '/api/v1/reserved-subdomains', { token: account.token, body: { subdomain: 'bare-reserved' } })).status, 201);
  const put = await call(edge, 'PUT', '/api/v1/reserved-subdomains/stored-policy/policy', { token: account.token, body: { rate_limit: { requests: 100, period_seconds: 60 } } });
  assert.equal(put.status, 200, put.text);
  const refused = await refusal({ request_header_remove: ['X-Debug'] }, 'stored-policy');
  assert.deepEqual([refused.status, refused.code, refused.message], [
    400,
    'INVALID_REQUEST',
    'The reserved subdomain "stored-policy" has a stored policy; change it with "burrow reserve stored-policy ..." or connect without policy flags.',
  ]);
  const plain = await startClient(edge, account.token, local.port, { subdomain: 'stored-policy' });
  await plain.client.close();
  const taken = await startClient(edge, account.token, local.port, { subdomain: 'bare-reserved', policy: { request_header_remove: ['X-Debug'] } });
  assert.deepEqual(edge.edge.registry.session('bare-reserved')!.runPolicy!.requestHeaderRemove, ['X-Debug']);
  await taken.client.close();
});

test('burrow http with policy flags: connects with them; on a name with a stored policy, exit 1 with the edge\'s reason', async () => {
  const env = { XDG_CONFIG_HOME: tempDir(), BURROW_EDGE: edge.url, BURROW_TOKEN: account.token, BURROW_CONFIG: '' };
  const run = await spawnCli(['http', String(local.port), '--subdomain', 'cli-one-run', '--no-inspect', '--request-header-add', 'X-Team: blue', '--rate-limit', '10/s'], env, /Forwarding /);
  try {
    assert.deepEqual(edge.edge.registry.session('cli-one-run')!.runPolicy!.rateLimit, { requests: 10, periodSeconds: 1 });
  } finally {
    run.child.kill('SIGINT');
    await run.exited;
  }
  const refused = await runCli(['http', String(local.port), '--subdomain', 'stored-policy', '--no-inspect', '--rate-limit', '5/s'], env);
  assert.equal(refused.code, 1);
  assert.equal(refused.stderr, 'burrow: INVALID_REQUEST: The reserved subdomain "stored-policy" has a stored policy; change it with "burrow reserve stored-policy ..." or connect without policy flags.\n');
  const usage = await runCli(['http', String(local.port), '--no-inspect', '--deny-cidr', 'nope'], env);
  assert.equal(usage.code, 2);
  assert.match(usage.stderr, /^burrow: --deny-cidr #1: "nope" is not an IPv4 or IPv6 address or CIDR block/);
});
