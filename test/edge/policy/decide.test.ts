/**
 * The transport-free policy (src/edge/policy/decide.ts) with real parts: scrypt hashes, the edge's
 * secret key file, sealed secrets. Each rule: allowed, refused, and the refusal's status, headers and body.
 */
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { CompiledPolicy, UnavailablePolicy, type PolicyDecision, type PolicyRequest } from '../../../src/edge/policy/decide.js';
import { parsePolicySpec } from '../../../src/protocol/policy.js';
import { SecretBox } from '../../../src/store/secret-box.js';
import { storePolicy } from '../../../src/store/stored-policy.js';

const dir = mkdtempSync(join(tmpdir(), 'burrow-policy-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const box = SecretBox.open(join(dir, 'secret.key'));

async function compile(spec: unknown, clock?: () => number): Promise<CompiledPolicy> {
  const stored = await storePolicy(parsePolicySpec(spec), undefined, box);
  const compiled = CompiledPolicy.compile(stored!, box, { realm: 'hooks', ...(clock === undefined ? {} : { clock }) });
  assert.ok(compiled instanceof CompiledPolicy);
  return compiled;
}

function req(fields: string[] = [], overrides: Partial<PolicyRequest> = {}): PolicyRequest {
  return { method: 'GET', target: '/', fields, clientAddress: '203.0.113.9', scheme: 'https', host: 'hooks.burrow.test', ...overrides };
}

function refused(decision: PolicyDecision, status: number, code: string): PolicyDecision & { kind: 'refuse' } {
  assert.equal(decision.kind, 'refuse', JSON.stringify(decision));
  const refusal = decision as PolicyDecision & { kind: 'refuse' };
  assert.equal(refusal.status, status);
  assert.equal(refusal.code, code);
  assert.equal((JSON.parse(refusal.body) as { error: { code: string } }).error.code, code, 'the spec\'s error shape');
  return refusal;
}

const basic = (user: string, password: string): string => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

test('basic auth: 401 with WWW-Authenticate without or with wrong credentials; right ones pass, Authorization removed unless forwarded', async () => {
  const policy = await compile({ basic_auth: [{ user: 'ann', password: 's3cret' }] });
  const none = refused(await policy.decide(req()), 401, 'AUTHENTICATION_REQUIRED');
  assert.deepEqual(none.fields.slice(2), ['www-authenticate', 'Basic realm="hooks", charset="UTF-8"']);
  refused(await policy.decide(req(['Authorization', basic('ann', 'wrong')])), 401, 'AUTHENTICATION_REQUIRED');
  refused(await policy.decide(req(['Authorization', basic('bob', 's3cret')])), 401, 'AUTHENTICATION_REQUIRED');
  const first = policy.decide(req(['Authorization', basic('ann', 's3cret'), 'X-Kept', '1']));
  assert.ok(first instanceof Promise, 'the first check runs scrypt');
  assert.deepEqual(await first, { kind: 'allow', fields: ['X-Kept', '1'] });
  const cached = policy.decide(req(['authorization', basic('ann', 's3cret')]));
  assert.deepEqual(cached, { kind: 'allow', fields: [] }, 'a repeated value is answered from the cache, synchronously');
  assert.deepEqual(policy.captureFields(['Authorization', basic('ann', 's3cret')]), ['Authorization', 'Basic [redacted]']);

  const forwarding = await compile({ basic_auth: [{ user: 'ann', password: 's3cret' }], basic_auth_forward: true });
  assert.deepEqual(await forwarding.decide(req(['Authorization', basic('ann', 's3cret')])), { kind: 'allow', fields: ['Authorization', basic('ann', 's3cret')] });
});

test('basic auth: wrong passwords from one address are throttled with 429 after the limit', async () => {
  const stored = await storePolicy(parsePolicySpec({ basic_auth: [{ user: 'ann', password: 'x' }] }), undefined, box);
  const policy = CompiledPolicy.compile(stored!, box, { realm: 'r', basicAuthFailures: 2 }) as CompiledPolicy;
  refused(await policy.decide(req(['Authorization', basic('ann', 'a')])), 401, 'AUTHENTICATION_REQUIRED');
  refused(await policy.decide(req(['Authorization', basic('ann', 'b')])), 401, 'AUTHENTICATION_REQUIRED');
  const throttled = refused(await policy.decide(req(['Authorization', basic('ann', 'c')])), 429, 'RATE_LIMITED');
  assert.equal(throttled.fields[2], 'retry-after');
  refused(await policy.decide(req(['Authorization', basic('ann', 'd')], { clientAddress: '198.51.100.1' })), 401, 'AUTHENTICATION_REQUIRED');
});

test('CIDR: allow and deny on IPv4, IPv6 and IPv4-mapped IPv6; deny wins; 403 names the address', async () => {
  const policy = await compile({ allow_cidr: ['203.0.113.0/24', '2001:db8::/32'], deny_cidr: ['203.0.113.66/32'] });
  assert.equal((await policy.decide(req([], { clientAddress: '203.0.113.9' }))).kind, 'allow');
  assert.equal((await policy.decide(req([], { clientAddress: '::ffff:203.0.113.9' }))).kind, 'allow');
  assert.equal((await policy.decide(req([], { clientAddress: '2001:db8:1::5' }))).kind, 'allow');
  const denied = refused(await policy.decide(req([], { clientAddress: '203.0.113.66' })), 403, 'ADDRESS_FORBIDDEN');
  assert.match(denied.body, /203\.0\.113\.66/);
  refused(await policy.decide(req([], { clientAddress: '198.51.100.7' })), 403, 'ADDRESS_FORBIDDEN');
  refused(await policy.decide(req([], { clientAddress: '2001:db9::1' })), 403, 'ADDRESS_FORBIDDEN');
  refused(await policy.decide(req([], { clientAddress: 'not-an-address' })), 403, 'ADDRESS_FORBIDDEN');
  const denyOnly = await compile({ deny_cidr: ['10.0.0.0/8'] });
  assert.equal((await denyOnly.decide(req([], { clientAddress: '::1' }))).kind, 'allow');
  refused(await denyOnly.decide(req([], { clientAddress: '::ffff:10.1.2.3' })), 403, 'ADDRESS_FORBIDDEN');
});

test('header rules: case-insensitive add (replacing) and remove both ways; the identity header is never passed from the public', async () => {
  const policy = await compile({
    request_header_add: [{ name: 'X-Tenant', value: 'blue' }],
    request_header_remove: ['X-Debug'],
    response_header_add: [{ name: 'Strict-Transport-Security', value: 'max-age=600' }],
    response_header_remove: ['server'],
  });
  const decision = await policy.decide(req(['x-tenant', 'forged', 'X-DEBUG', '1', 'Accept', '*/*', 'Burrow-User-Email', 'forged@example.test']));
  assert.deepEqual(decision, { kind: 'allow', fields: ['Accept', '*/*', 'X-Tenant', 'blue'] });
  assert.deepEqual(policy.responseFields(['Server', 'x', 'Content-Type', 'text/plain']), ['Content-Type', 'text/plain', 'Strict-Transport-Security', 'max-age=600']);
});

test('rate limit: N per period per client address, then 429 with Retry-After and RateLimit-*', async () => {
  let now = 1_000_000;
  const policy = await compile({ rate_limit: { requests: 2, period_seconds: 60 } }, () => now);
  assert.equal((await policy.decide(req())).kind, 'allow');
  assert.equal((await policy.decide(req())).kind, 'allow');
  const limited = refused(await policy.decide(req()), 429, 'RATE_LIMITED');
  assert.deepEqual(limited.fields.slice(2), ['retry-after', '60', 'ratelimit-limit', '2', 'ratelimit-remaining', '0', 'ratelimit-reset', '60']);
  assert.equal((await policy.decide(req([], { clientAddress: '198.51.100.1' }))).kind, 'allow', 'another address has its own window');
  now += 60_000;
  assert.equal((await policy.decide(req())).kind, 'allow', 'a new window');
});

test('webhook: need-body, then allow or 401 SIGNATURE_INVALID kept as a capture marked "rejected: signature"; 413 over the cap', async () => {
  const policy = await compile({ verify_webhook: [{ provider: 'github', secret: 'gh-secret' }] });
  const body = Buffer.from('{"zen":"Keep it logically awesome."}');
  const signature = `sha256=${createHmac('sha256', 'gh-secret').update(body).digest('hex')}`;
  const decision = await policy.decide(req(['X-Hub-Signature-256', signature, 'Burrow-User-Email', 'forged@example.test'], { method: 'POST', target: '/hook' }));
  assert.equal(decision.kind, 'need-body');
  const needBody = decision as PolicyDecision & { kind: 'need-body' };
  assert.equal(needBody.maxBytes, 1024 * 1024);
  assert.deepEqual(needBody.fields, ['X-Hub-Signature-256', signature], 'what is forwarded once verified (the identity header dropped)');
  assert.deepEqual(needBody.verify(body), { kind: 'allow', fields: ['X-Hub-Signature-256', signature] });
  const forged = refused(needBody.verify(Buffer.from('{"zen":"forged"}')), 401, 'SIGNATURE_INVALID');
  assert.equal(forged.capture, 'rejected: signature');
  assert.match(forged.reason, /github: the X-Hub-Signature-256 signature does not match the body/);
  // Without the signature header the head decides: refused at once, no body asked for.
  const unsigned = refused(await policy.decide(req([], { method: 'POST', target: '/hook' })), 401, 'SIGNATURE_INVALID');
  assert.equal(unsigned.capture, 'rejected: signature');
  assert.match(unsigned.reason, /github: no X-Hub-Signature-256 header/);
  const tooLarge = refused(policy.tooLarge(), 413, 'PAYLOAD_TOO_LARGE');
  assert.equal(tooLarge.capture, null);
  // GitLab's token is in the head: accepted without a body.
  const gitlab = await compile({ verify_webhook: [{ provider: 'gitlab', secret: 'gl-token' }] });
  assert.deepEqual(await gitlab.decide(req(['X-Gitlab-Token', 'gl-token'], { method: 'POST' })), { kind: 'allow', fields: ['X-Gitlab-Token', 'gl-token'] });
});

test('a secret sealed under a key this edge does not hold: 503 POLICY_UNAVAILABLE, never an open door', async () => {
  const otherBox = SecretBox.open(join(dir, 'other.key'));
  const stored = await storePolicy(parsePolicySpec({ verify_webhook: [{ provider: 'stripe', secret: 'whsec_x' }] }), undefined, otherBox);
  const compiled = CompiledPolicy.compile(stored!, box, { realm: 'r' });
  assert.ok(compiled instanceof UnavailablePolicy);
  refused(compiled.decision, 503, 'POLICY_UNAVAILABLE');
});
