/**
 * Issue 11, finding 7 (the small ones), each as it broke:
 * - failed-auth throttling was per exact client address and blocked valid tokens too, so 30 bad
 *   requests behind a shared NAT or proxy locked out a whole team, tunnel reconnects included;
 * - a wrong secret on an existing token id did more work than an unknown id (a record decoded);
 * - token labels accepted bidi overrides and zero-width characters.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { TunnelRefusedError } from '../../src/client/tunnel-client.js';
import { Store } from '../../src/store/store.js';
import { assertApiError, call, createAccount, startClient, startEdge, tempDirs, type TestAccount, type TestEdge } from '../helpers.js';

const LIMIT = 30;

describe('issue 11: failed authentications never lock out a valid token', () => {
  let target: TestEdge;
  let team: TestAccount;
  let other: TestAccount;

  before(async () => {
    target = await startEdge({ authFailureLimit: LIMIT, rateWindowMs: 60_000 });
    team = await createAccount(target);
    other = await createAccount(target);
  });
  after(() => target.close());

  test(`${LIMIT + 5} garbage tokens from one address (a shared NAT): the team's valid token still works, API and tunnel`, async () => {
    const statuses: number[] = [];
    for (let i = 0; i < LIMIT + 5; i++) statuses.push((await call(target, 'GET', '/api/v1/auth/me', { token: `garbage-${i}` })).status);
    assert.deepEqual(statuses.slice(0, LIMIT), Array.from({ length: LIMIT }, () => 401));
    assert.deepEqual(statuses.slice(LIMIT), [429, 429, 429, 429, 429], 'the garbage itself is throttled');
    const me = await call(target, 'GET', '/api/v1/auth/me', { token: team.token });
    assert.equal(me.status, 200);
    assert.equal(me.json.id, team.id);
    const { client } = await startClient(target, team.token, 9);
    await client.close();
  });

  test(`${LIMIT + 5} wrong secrets on one token id: that id's failures get 429, the real token with that id still works`, async () => {
    const idSegment = team.token.slice(8, 16);
    const wrong = (i: number): string => `svc_pat_${idSegment}_${i.toString(16).padStart(36, '0')}`;
    const statuses: number[] = [];
    for (let i = 0; i < LIMIT + 2; i++) statuses.push((await call(target, 'GET', '/api/v1/auth/me', { token: wrong(i) })).status);
    assert.deepEqual(statuses.slice(LIMIT), [429, 429]);
    const limited = await call(target, 'GET', '/api/v1/auth/me', { token: wrong(999) });
    assertApiError(limited, 'RATE_LIMITED');
    assert.match(String(limited.headers['retry-after']), /^[1-9]\d*$/);
    assert.match(limited.json.error.message, /token id/);
    assert.equal((await call(target, 'GET', '/api/v1/auth/me', { token: team.token })).status, 200, 'the valid token is never refused');
    // Another account's token, from the same address, is untouched.
    assert.equal((await call(target, 'GET', '/api/v1/auth/me', { token: other.token })).status, 200);
    const { client } = await startClient(target, team.token, 9);
    await client.close();
  });

  test('a refused tunnel connect with a garbage token is 429 once its address failed too often, never a valid one', async () => {
    await assert.rejects(startClient(target, 'garbage-tunnel', 9), (error: unknown) => error instanceof TunnelRefusedError && error.status === 429);
    const { client } = await startClient(target, other.token, 9);
    await client.close();
  });
});

describe('issue 11: an unknown token id and a wrong secret do the same work', () => {
  const tempDir = tempDirs('burrow-auth-');

  test('both are refused alike, and both read and decode a token record (the decoy for an unknown id)', async () => {
    const store = Store.open(tempDir());
    try {
      const { token } = await store.createAccount('timing@example.test', 'FREE', 'x');
      const idSegment = token.idSegment;
      const wrongSecret = `svc_pat_${idSegment}_${'0'.repeat(36)}`;
      const unknownId = `svc_pat_${idSegment === 'ffffffff' ? 'fffffffe' : 'ffffffff'}_${'0'.repeat(36)}`;
      assert.deepEqual(store.verify(wrongSecret), { failure: 'wrong-secret', idSegment });
      assert.deepEqual(store.verify(unknownId), { failure: 'unknown' });
      assert.equal(store.authenticate(wrongSecret), null);
      assert.equal(store.authenticate(unknownId), null);
      assert.ok('principal' in store.verify(token.token));
      // The decoy never authenticates and never lists.
      assert.equal(store.listTokens(token.accountId).length, 1);
      assert.deepEqual(store.verify(`svc_pat_~decoy_${'0'.repeat(36)}`), { failure: 'malformed' });
    } finally {
      await store.close();
    }
  });

  test('API: an unknown id and a wrong secret get the same 401 body', async () => {
    const target = await startEdge({ authFailureLimit: 1_000 });
    try {
      const account = await createAccount(target);
      const idSegment = account.token.slice(8, 16);
      const wrong = await call(target, 'GET', '/api/v1/auth/me', { token: `svc_pat_${idSegment}_${'0'.repeat(36)}` });
      const unknown = await call(target, 'GET', '/api/v1/auth/me', { token: `svc_pat_${idSegment === 'ffffffff' ? '00000000' : 'ffffffff'}_${'0'.repeat(36)}` });
      assertApiError(wrong, 'UNAUTHORIZED');
      assertApiError(unknown, 'UNAUTHORIZED');
      assert.equal(wrong.text, unknown.text);
    } finally {
      await target.close();
    }
  });
});

describe('issue 11: token labels refuse invisible format characters', () => {
  let target: TestEdge;
  let account: TestAccount;
  before(async () => {
    target = await startEdge({ authFailureLimit: 1_000, rateLimit: 1_000 });
    account = await createAccount(target, 'PRO');
  });
  after(() => target.close());

  const refused: [name: string, label: string][] = [
    ['a right-to-left override U+202E', 'invoice\u202Egpj.exe'],
    ['a left-to-right embedding U+202A', 'a\u202Ab'],
    ['a pop directional formatting U+202C', 'a\u202Cb'],
    ['a right-to-left isolate U+2067', 'a\u2067b'],
    ['a pop directional isolate U+2069', 'a\u2069b'],
    ['a zero-width space U+200B', 'ad\u200Bmin'],
    ['a zero-width joiner U+200D', 'a\u200Db'],
    ['a BOM U+FEFF inside', 'lab\uFEFFel'],
    ['a soft hyphen U+00AD', 'lab\u00ADel'],
  ];
  for (const [name, label] of refused) {
    test(`${name}: 400 INVALID_REQUEST`, async () => {
      assertApiError(await call(target, 'POST', '/api/v1/tokens', { token: account.token, body: { label } }), 'INVALID_REQUEST');
    });
  }

  test('ordinary non-ASCII labels are kept: accents, CJK, right-to-left script, emoji', async () => {
    for (const label of ['café', '東京 laptop', 'שלום', '🚀 deploy']) {
      const created = await call(target, 'POST', '/api/v1/tokens', { token: account.token, body: { label } });
      assert.equal(created.status, 201, created.text);
      assert.equal(created.json.label, label);
    }
  });
});
