/**
 * `burrow admin ... --cluster redis://...` (DESIGN.md section 5b) works on a cluster's shared Redis store
 * like `--data` does on LMDB; `backup` refuses; a dead Redis is one clear line and a non-zero exit.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RedisStore } from '../../src/store/redis-store.js';
import { freePort, runCli } from '../helpers.js';
import { TestRedis, redisSkip } from '../redis-server.js';

const redis = redisSkip === false ? await TestRedis.start() : null;

test('admin create-account, token create, set-plan and accounts list on the cluster store', { skip: redisSkip }, async () => {
  const cluster = redis!.url;
  const created = await runCli(['admin', 'create-account', '--email', 'Ops@Example.test', '--cluster', cluster, '--json']);
  assert.equal(created.code, 0, created.stderr);
  const first = JSON.parse(created.stdout) as { account: { id: string }; token: { token: string } };

  const token = await runCli(['admin', 'token', 'create', '--email', 'ops@example.test', '--label', 'ci', '--cluster', cluster, '--json']);
  assert.equal(token.code, 0, token.stderr);
  const second = JSON.parse(token.stdout) as { token: { token: string; label: string } };
  assert.equal(second.token.label, 'ci');

  const plan = await runCli(['admin', 'set-plan', '--email', 'ops@example.test', '--plan', 'PRO', '--cluster', cluster, '--json']);
  assert.equal(plan.code, 0, plan.stderr);

  const list = await runCli(['admin', 'accounts', 'list', '--cluster', cluster, '--json']);
  assert.equal(list.code, 0, list.stderr);
  const { accounts } = JSON.parse(list.stdout) as { accounts: { id: string; email: string; plan: string; active_tokens: number }[] };
  assert.deepEqual(
    accounts.map(({ id, email, plan: name, active_tokens }) => ({ id, email, plan: name, active_tokens })),
    [{ id: first.account.id, email: 'ops@example.test', plan: 'PRO', active_tokens: 2 }],
  );

  // What an edge of the cluster reads: both tokens authenticate on the shared store.
  const store = await RedisStore.connect(cluster);
  try {
    for (const bearer of [first.token.token, second.token.token]) assert.ok('principal' in (await store.verify(bearer)));
  } finally {
    await store.close();
  }

  const missing = await runCli(['admin', 'token', 'create', '--email', 'nobody@example.test', '--cluster', cluster]);
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /no account with e-mail nobody@example\.test in the cluster's store/);
});

test('admin backup --cluster refuses and points at Redis persistence', { skip: redisSkip }, async () => {
  const result = await runCli(['admin', 'backup', '--to', '/tmp/never-made', '--cluster', redis!.url]);
  assert.notEqual(result.code, 0);
  assert.match(result.stderr, /BGSAVE/);
  assert.equal(result.stderr.trim().split('\n').length, 1);
});

test('admin --cluster with Redis unreachable exits non-zero with one clear line', { skip: redisSkip }, async () => {
  const port = await freePort();
  const result = await runCli(['admin', 'accounts', 'list', '--cluster', `redis://:secret@127.0.0.1:${port}`]);
  assert.equal(result.code, 1);
  const lines = result.stderr.trim().split('\n');
  assert.equal(lines.length, 1, result.stderr);
  assert.match(lines[0]!, new RegExp(`Redis at redis://:\\*\\*\\*@127\\.0\\.0\\.1:${port}.* unreachable`));
  assert.ok(!result.stderr.includes('secret'));
  assert.equal(result.stdout, '');
});

test('admin --cluster and --data together, or a URL that is not Redis, are usage errors', { skip: redisSkip }, async () => {
  const both = await runCli(['admin', 'accounts', 'list', '--cluster', redis!.url, '--data', '/tmp/x']);
  assert.equal(both.code, 2);
  const notRedis = await runCli(['admin', 'accounts', 'list', '--cluster', 'http://127.0.0.1:1']);
  assert.equal(notRedis.code, 2);
  assert.match(notRedis.stderr, /redis:\/\/HOST:PORT/);
});
