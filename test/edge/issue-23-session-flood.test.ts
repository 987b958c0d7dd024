/**
 * Issue 23, finding 3: one FREE token opened 474,637 dashboard sessions in 120 s (sign-in escaped every
 * rate limit and nothing capped sessions), and the sweep that walked every session once a minute then
 * stalled the whole edge for about 5 s each time.
 *
 * Now, on a real edge: sign-in is limited per token and per client address (429 RATE_LIMITED with
 * Retry-After), a token keeps at most 20 live sessions (a new one ends the oldest), and the sweep reads
 * ended sessions only, through an index by end: the test counts what it visits among thousands of live
 * sessions (the event loop's delay during the sweep is reported, not asserted).
 */
import assert from 'node:assert/strict';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { after, before, test } from 'node:test';
import type { SessionStore } from '../../src/store/sessions.js';
import { assertApiError, call, createAccount, startEdge, type TestEdge } from '../helpers.js';

let edge: TestEdge;
before(async () => {
  edge = await startEdge({ authFailureLimit: 1_000 });
});
after(() => edge?.close());

const browser = (target: TestEdge) => ({ origin: `http://localhost:${target.port}`, 'x-burrow-csrf': '1' });
const signIn = (target: TestEdge, token: string) => call(target, 'POST', '/api/v1/session', { body: { token }, headers: browser(target) });

test('a flood of sign-ins with one token: 10 a minute, then 429 RATE_LIMITED with Retry-After', async () => {
  const alice = await createAccount(edge);
  const answers = [];
  // 30: the address's own limit (below) would answer the next ones.
  for (let i = 0; i < 30; i++) answers.push(await signIn(edge, alice.token));
  assert.deepEqual(answers.map((answer) => answer.status), [...Array(10).fill(201), ...Array(20).fill(429)]);
  const refused = answers.at(-1)!;
  assertApiError(refused, 'RATE_LIMITED');
  assert.match(refused.json.error.message, /sign-ins with this token: 10 per minute/);
  assert.ok(Number(refused.headers['retry-after']) >= 1, String(refused.headers['retry-after']));
  assert.equal(refused.headers['set-cookie'], undefined);
  // The token itself still works for the API: only its sign-ins are held back.
  assert.equal((await call(edge, 'GET', '/api/v1/auth/me', { token: alice.token })).status, 200);
});

test('a flood of sign-ins from one address with many tokens: 30 a minute, then 429', async () => {
  const target = await startEdge({ authFailureLimit: 1_000 });
  try {
    const tokens: string[] = [];
    for (let i = 0; i < 8; i++) {
      const account = await createAccount(target);
      tokens.push(account.token);
      for (let j = 0; j < 4; j++) tokens.push((await call(target, 'POST', '/api/v1/tokens', { token: account.token, body: { label: `t${j}` } })).json.token);
    }
    const statuses = [];
    for (const token of tokens.slice(0, 35)) statuses.push((await signIn(target, token)).status);
    assert.deepEqual(statuses, [...Array(30).fill(201), ...Array(5).fill(429)]);
    const refused = await signIn(target, tokens[36]!);
    assertApiError(refused, 'RATE_LIMITED');
    assert.match(refused.json.error.message, /sign-ins with this address/);
    assert.ok(refused.headers['retry-after']);
  } finally {
    await target.close();
  }
});

test('however many sign-ins one token makes, it holds 20 live sessions: the oldest end', async () => {
  const target = await startEdge({ authFailureLimit: 1_000, signInLimits: { perToken: 1_000, perAddress: 1_000 } });
  try {
    const bob = await createAccount(target);
    const cookies: string[] = [];
    for (let i = 0; i < 60; i++) {
      const answer = await signIn(target, bob.token);
      assert.equal(answer.status, 201);
      cookies.push(String(answer.headers['set-cookie']).split(';')[0]!);
    }
    const sessions = target.edge.api.sessions as SessionStore;
    await target.edge.store.root.committed;
    assert.equal(sessions.count(), 20);
    const working = [];
    for (const cookie of cookies) working.push((await call(target, 'GET', '/api/v1/session', { headers: { cookie } })).status === 200);
    assert.deepEqual(working, [...Array(40).fill(false), ...Array(20).fill(true)]);
  } finally {
    await target.close();
  }
});

test('the sweep reads ended sessions only, never the live ones', async (t) => {
  const target = await startEdge({ authFailureLimit: 1_000, dashboardSessions: { idleMs: 3_600_000, maxAgeMs: 7_200_000 } });
  try {
    const sessions = target.edge.api.sessions as SessionStore;
    const principals = [];
    for (let a = 0; a < 20; a++) {
      const account = await createAccount(target);
      const outcome = target.edge.store.verify(account.token);
      assert.ok('principal' in outcome);
      principals.push(outcome.principal);
      const record = target.edge.store.getAccount(account.id)!;
      for (let j = 0; j < 4; j++) {
        const created = await target.edge.store.createToken(record, `t${j}`);
        const verified = target.edge.store.verify(created.token);
        assert.ok('principal' in verified);
        principals.push(verified.principal);
      }
    }
    const now = Date.now();
    // 100 tokens with 20 sessions each: 37 of them ended an hour ago (one each of the first 37 tokens).
    for (let i = 0; i < 37; i++) await sessions.open(principals[i]!, now - 3 * 3_600_000);
    for (const [index, principal] of principals.entries()) {
      for (let i = index < 37 ? 1 : 0; i < 20; i++) await sessions.open(principal, now + i);
    }
    await target.edge.store.root.committed;
    assert.equal(sessions.count(), 2_000);

    const delay = monitorEventLoopDelay({ resolution: 1 });
    const pause = () => new Promise((resolve) => setTimeout(resolve, 20));
    delay.enable();
    await pause();
    const visited = sessions.sweep(now);
    await pause();
    delay.disable();
    await target.edge.store.root.committed;
    t.diagnostic(`sweep among 2,000 sessions, 37 ended: visited ${visited}; event loop delay max ${(delay.max / 1e6).toFixed(2)} ms`);
    assert.equal(visited, 37, 'the ended ones only');
    assert.equal(sessions.count(), 1_963);
    assert.equal(sessions.sweep(now), 0, 'nothing more has ended: nothing read');
    assert.equal(sessions.sweep(now + 3_600_000 + 30), 1_963, 'an hour on, the rest ended: each read once');
    await target.edge.store.root.committed;
    assert.equal(sessions.count(), 0);
  } finally {
    await target.close();
  }
});
