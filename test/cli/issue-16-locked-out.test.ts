/**
 * Issue 16, point 4: locked out with no way back. Revoking the token the CLI itself used succeeded
 * without a word, then every command got 401 and `admin create-account` said the account exists. Now
 * `tokens revoke` refuses the CLI's own token without --force, and the operator has
 * `admin token create`, `admin set-plan` and `admin accounts list` on the data directory, also while the
 * edge runs.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { call, createAccount, runCli, startEdge, tempDirs, type TestAccount, type TestEdge } from '../helpers.js';

describe('issue 16: locked out', () => {
  let edge: TestEdge;
  let account: TestAccount;
  const tempDir = tempDirs('burrow-issue16-admin-');

  before(async () => {
    edge = await startEdge({ rateLimit: 1_000_000 });
    account = await createAccount(edge, 'FREE', 'locked-out@example.test');
  });
  after(() => edge.close());

  const env = (token = account.token): Record<string, string> => ({ XDG_CONFIG_HOME: tempDir(), BURROW_EDGE: edge.url, BURROW_TOKEN: token });

  test('tokens revoke refuses the token in use, in one line saying why and how', async () => {
    const refused = await runCli(['tokens', 'revoke', account.tokenId], env());
    assert.equal(refused.code, 1, refused.stdout);
    assert.match(refused.stderr, /^burrow: tok_[0-9a-f]{8} is the token this command uses: revoking it locks this CLI out .*--force\n$/);
    assert.equal((await call(edge, 'GET', '/api/v1/auth/me', { token: account.token })).status, 200, 'still valid');
    const json = await runCli(['tokens', 'revoke', account.tokenId, '--json'], env());
    assert.equal(json.code, 1);
    assert.equal(JSON.parse(json.stderr).error.code, 'INVALID_REQUEST');
  });

  test('--force revokes it; admin token create lets the account back in while the edge runs', async () => {
    const revoked = await runCli(['tokens', 'revoke', account.tokenId, '--force'], env());
    assert.equal(revoked.code, 0, revoked.stderr);
    assert.equal((await runCli(['tokens', 'list'], env())).code, 1);

    const created = await runCli(['admin', 'token', 'create', '--email', 'Locked-Out@example.test', '--data', edge.dataDir, '--json'], env());
    assert.equal(created.code, 0, created.stderr);
    const result = JSON.parse(created.stdout) as { account: { email: string }; token: { token: string; label: string } };
    assert.equal(result.account.email, 'locked-out@example.test');
    assert.equal(result.token.label, 'admin');
    const listed = await runCli(['tokens', 'list'], env(result.token.token));
    assert.equal(listed.code, 0, listed.stderr);
    account = { ...account, token: result.token.token };
  });

  test('admin set-plan changes the plan the running edge applies; admin accounts list shows it', async () => {
    const set = await runCli(['admin', 'set-plan', '--email', 'locked-out@example.test', '--plan', 'PRO', '--data', edge.dataDir], env());
    assert.equal(set.code, 0, set.stderr);
    assert.match(set.stdout, /is on plan PRO\n$/);
    assert.equal((await call(edge, 'GET', '/api/v1/auth/me', { token: account.token })).json.plan, 'PRO');
    const list = await runCli(['admin', 'accounts', 'list', '--data', edge.dataDir, '--json'], env());
    assert.equal(list.code, 0, list.stderr);
    const accounts = (JSON.parse(list.stdout) as { accounts: { email: string; plan: string; active_tokens: number }[] }).accounts;
    const mine = accounts.find((a) => a.email === 'locked-out@example.test');
    assert.deepEqual({ plan: mine?.plan, active_tokens: mine?.active_tokens }, { plan: 'PRO', active_tokens: 1 });
    const table = await runCli(['admin', 'accounts', 'list', '--data', edge.dataDir], env());
    assert.match(table.stdout, /^ID +EMAIL +PLAN +TOKENS +CREATED\n/);
  });

  test('an unknown e-mail or plan is a one-line refusal', async () => {
    const unknown = await runCli(['admin', 'token', 'create', '--email', 'nobody@example.test', '--data', edge.dataDir], env());
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /^burrow: no account with e-mail nobody@example\.test/);
    const plan = await runCli(['admin', 'set-plan', '--email', 'locked-out@example.test', '--plan', 'GOLD', '--data', edge.dataDir], env());
    assert.equal(plan.code, 2);
    assert.match(plan.stderr, /^burrow: --plan must be FREE or PRO, not GOLD\n$/);
  });
});
