/**
 * The rate limits on a real edge (spec sections 5 and 8): requests per token per window with the
 * RateLimit-* headers and 429 RATE_LIMITED + Retry-After, and failed authentications per client address.
 * Small limits and a short window keep it quick; no assertion depends on timing.
 */
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { TunnelRefusedError } from '../../src/client/tunnel-client.js';
import { assertApiError, call, createAccount, startClient, startEdge, type HttpResult, type TestAccount, type TestEdge } from '../helpers.js';

/** Long enough that a test's requests always fall in one window; the reset tests use SHORT_WINDOW_MS. */
const WINDOW_MS = 60_000;
const SHORT_WINDOW_MS = 1_000;

function rateHeaders(response: HttpResult): { limit: number; remaining: number; reset: number } {
  for (const name of ['ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset']) {
    assert.match(String(response.headers[name]), /^\d+$/, `${name} on ${response.status} ${response.text}`);
  }
  return {
    limit: Number(response.headers['ratelimit-limit']),
    remaining: Number(response.headers['ratelimit-remaining']),
    reset: Number(response.headers['ratelimit-reset']),
  };
}

/** Waits out the Retry-After the edge asked for: whole seconds, so the window has reset by then. */
async function waitRetryAfter(response: HttpResult): Promise<void> {
  const seconds = Number(response.headers['retry-after']);
  assert.ok(Number.isInteger(seconds) && seconds >= 1);
  await sleep(seconds * 1_000 + 20);
}

describe('per-token request rate (limit 5 per window)', () => {
  let target: TestEdge;
  let alice: TestAccount;
  let bob: TestAccount;

  before(async () => {
    target = await startEdge({ rateLimit: 5, rateWindowMs: WINDOW_MS, authFailureLimit: 1_000 });
    alice = await createAccount(target);
    bob = await createAccount(target);
  });
  after(() => target.close());

  test('RateLimit-Limit/-Remaining/-Reset on every authenticated response, success or error; the 6th is 429', async () => {
    const token = alice.token;
    const responses = [
      await call(target, 'GET', '/api/v1/auth/me', { token }),
      await call(target, 'POST', '/api/v1/tokens', { token, body: { label: 'rate' } }),
      await call(target, 'DELETE', '/api/v1/tokens/tok_00000000', { token }), // 404 from the handler
      await call(target, 'POST', '/api/v1/tokens', { token, body: { label: '' } }), // 400 from the handler
      await call(target, 'HEAD', '/api/v1/tokens', { token }),
    ];
    assert.deepEqual(responses.map((r) => r.status), [200, 201, 404, 400, 200]);
    responses.forEach((response, index) => {
      const headers = rateHeaders(response);
      assert.equal(headers.limit, 5);
      assert.equal(headers.remaining, 4 - index);
      assert.ok(headers.reset >= 1 && headers.reset <= WINDOW_MS / 1000);
    });

    const limited = await call(target, 'GET', '/api/v1/auth/me', { token });
    assertApiError(limited, 'RATE_LIMITED');
    assert.match(String(limited.headers['retry-after']), /^[1-9]\d*$/, 'Retry-After in whole seconds');
    assert.equal(rateHeaders(limited).remaining, 0);
    assertApiError(await call(target, 'POST', '/api/v1/tokens', { token, body: { label: 'still limited' } }), 'RATE_LIMITED');
    assert.equal((await call(target, 'GET', '/api/v1/tokens', { token: bob.token })).json.tokens.length, 1, 'nothing was created while limited');

    // Limits are per token: another token of the same account, and another account, are unaffected.
    const other = (await call(target, 'GET', '/api/v1/auth/me', { token: responses[1]!.json.token }));
    assert.equal(other.status, 200);
    assert.equal(rateHeaders(other).remaining, 4);
    assert.equal((await call(target, 'GET', '/api/v1/auth/me', { token: bob.token })).status, 200);
  });

  test('unknown paths, 405s and the public instance endpoint are not counted and carry no rate headers', async () => {
    const carol = await createAccount(target);
    const first = rateHeaders(await call(target, 'GET', '/api/v1/auth/me', { token: carol.token }));
    for (const [method, path] of [['GET', '/api/v1/health'], ['PUT', '/api/v1/tokens'], ['GET', '/api/v1/instance']] as const) {
      for (let i = 0; i < 6; i++) {
        const response = await call(target, method, path, { token: carol.token });
        assert.notEqual(response.status, 429);
        assert.equal(response.headers['ratelimit-limit'], undefined);
      }
    }
    assert.equal(rateHeaders(await call(target, 'GET', '/api/v1/auth/me', { token: carol.token })).remaining, first.remaining - 1);
  });
});

/** Sends requests until one is refused 429 (a short window may roll over once on the way). */
async function until429(send: () => Promise<HttpResult>): Promise<HttpResult> {
  for (let attempt = 0; attempt < 20; attempt++) {
    const response = await send();
    if (response.status === 429) return response;
  }
  throw new Error('never limited');
}

describe('the window resets (limit 2 per 1 s window)', () => {
  let target: TestEdge;
  before(async () => {
    target = await startEdge({ rateLimit: 2, rateWindowMs: SHORT_WINDOW_MS, authFailureLimit: 1_000 });
  });
  after(() => target.close());

  test('after Retry-After the token has its whole limit again', async () => {
    const account = await createAccount(target);
    const limited = await until429(() => call(target, 'GET', '/api/v1/auth/me', { token: account.token }));
    assertApiError(limited, 'RATE_LIMITED');
    assert.equal(limited.headers['retry-after'], '1');
    await waitRetryAfter(limited);
    const again = await call(target, 'GET', '/api/v1/auth/me', { token: account.token });
    assert.equal(again.status, 200);
    assert.deepEqual(rateHeaders(again), { limit: 2, remaining: 1, reset: 1 });
  });
});

describe('the default rate (spec section 8: 100 requests per minute per token)', () => {
  let target: TestEdge;
  before(async () => {
    target = await startEdge();
  });
  after(() => target.close());

  test('RateLimit-Limit is 100 with a reset within the minute; the billing summary says 100 per minute', async () => {
    const account = await createAccount(target);
    const response = await call(target, 'GET', '/api/v1/billing/summary', { token: account.token });
    const headers = rateHeaders(response);
    assert.equal(headers.limit, 100);
    assert.equal(headers.remaining, 99);
    assert.ok(headers.reset >= 1 && headers.reset <= 60);
    assert.equal(response.json.limits.requests_per_minute, 100);
  });
});

describe('failed authentications (limit 3 per window): counted against what failed, never blocking a valid token', () => {
  let target: TestEdge;
  let alice: TestAccount;

  before(async () => {
    target = await startEdge({ authFailureLimit: 3, rateWindowMs: WINDOW_MS });
    alice = await createAccount(target);
  });
  after(() => target.close());

  test('after 3 failures from an address its next failures are 429; a valid token from it still works', async () => {
    const failures = [
      await call(target, 'GET', '/api/v1/auth/me'),
      await call(target, 'GET', '/api/v1/auth/me', { token: 'not-a-token' }),
      await call(target, 'GET', '/api/v1/tokens', { token: 'svc_pat_ffffffff_' + '0'.repeat(36) }),
    ];
    for (const failure of failures) assertApiError(failure, 'UNAUTHORIZED');

    const blocked = await call(target, 'GET', '/api/v1/auth/me', { token: 'still-guessing' });
    assertApiError(blocked, 'RATE_LIMITED');
    assert.match(String(blocked.headers['retry-after']), /^[1-9]\d*$/);
    assert.equal(blocked.headers['ratelimit-limit'], undefined, 'not the token limit');
    assert.equal((await call(target, 'GET', '/api/v1/auth/me', { token: alice.token })).status, 200);
    // The tunnel endpoint authenticates the same way: a refused garbage token, an accepted valid one.
    await assert.rejects(startClient(target, 'still-guessing', 9), (error: unknown) => error instanceof TunnelRefusedError && error.status === 429 && error.code === 'RATE_LIMITED');
    const { client } = await startClient(target, alice.token, 9);
    await client.close();
    // Public endpoints stay open.
    assert.equal((await call(target, 'GET', '/api/v1/instance')).status, 200);
  });
});

describe('failed authentications: the count ends with the window (limit 2 per 1 s window)', () => {
  let target: TestEdge;
  before(async () => {
    target = await startEdge({ authFailureLimit: 2, rateWindowMs: SHORT_WINDOW_MS });
  });
  after(() => target.close());

  test('successful requests do not count as failures', async () => {
    const account = await createAccount(target);
    for (let i = 0; i < 10; i++) assert.equal((await call(target, 'GET', '/api/v1/auth/me', { token: account.token })).status, 200);
  });

  test('after Retry-After a failure is a 401 again', async () => {
    const blocked = await until429(() => call(target, 'GET', '/api/v1/auth/me', { token: 'guess' }));
    assertApiError(blocked, 'RATE_LIMITED');
    await waitRetryAfter(blocked);
    assertApiError(await call(target, 'GET', '/api/v1/auth/me', { token: 'guess' }), 'UNAUTHORIZED');
  });
});
