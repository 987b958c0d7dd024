/**
 * The edge's secret key through the real CLI (issue 26, item 7): `burrow edge --secret-key-file FILE`
 * creates the key with mode 0600 and refuses to start on a file others can read; `burrow admin
 * rotate-secret-key --data DIR` next to a running edge re-seals the stored policies under a new key and
 * drops the old one, and the edge goes on verifying with the re-sealed secret and seals new secrets
 * under the new key; the cluster form takes steps.
 */
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { chmodSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { SecretBox } from '../../src/store/secret-box.js';
import { call, createAccount, runCli, spawnCli, startEdge, tempDirs } from '../helpers.js';

const freshDir = tempDirs('burrow-secret-key-');
const LISTENING = /listening on http:\/\/localhost:\d+/;

function keyIds(path: string): string[] {
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((line) => line.startsWith('burrow-secret-key v1 '))
    .map((line) => line.split(' ')[2]!);
}

test('burrow edge --secret-key-file: created with mode 0600 on first start; a file others can read stops the start', async () => {
  const dir = freshDir();
  const keyFile = join(dir, 'keys', 'edge.key');
  const env = { XDG_CONFIG_HOME: join(dir, 'xdg') };
  const edge = await spawnCli(['edge', '--port', '0', '--data', join(dir, 'data'), '--secret-key-file', keyFile], env, LISTENING);
  edge.child.kill('SIGTERM');
  assert.equal(await edge.exited, 0);
  assert.equal(statSync(keyFile).mode & 0o777, 0o600);
  assert.equal(keyIds(keyFile).length, 1);
  chmodSync(keyFile, 0o644);
  const refused = await runCli(['edge', '--port', '0', '--data', join(dir, 'data'), '--secret-key-file', keyFile], env);
  assert.equal(refused.code, 1);
  assert.equal(refused.stderr, `burrow: cannot start the edge: The secret key file ${keyFile} is readable by others (mode 644); run: chmod 600 ${keyFile}\n`);
});

test('burrow admin rotate-secret-key --data DIR next to a running edge: re-sealed, old key dropped, the edge verifies and seals with the new one', async () => {
  const dataDir = freshDir();
  const edge = await startEdge({ dataDir });
  try {
    const account = await createAccount(edge, 'PRO');
    const name = 'rotated-hooks';
    assert.equal((await call(edge, 'POST', '/api/v1/reserved-subdomains', { token: account.token, body: { subdomain: name, offline: 'queue' } })).status, 201);
    const put = await call(edge, 'PUT', `/api/v1/reserved-subdomains/${name}/policy`, { token: account.token, body: { verify_webhook: [{ provider: 'github', secret: 'before-rotation' }] } });
    assert.equal(put.status, 200, put.text);
    const keyFile = join(dataDir, 'secret.key');
    const [oldKey] = keyIds(keyFile);
    const post = (body: string) =>
      call(edge, 'POST', '/hook', { host: `${name}.localhost:${edge.port}`, rawBody: body, headers: { 'x-hub-signature-256': `sha256=${createHmac('sha256', 'before-rotation').update(body).digest('hex')}` } });
    assert.equal((await post('{"n":1}')).status, 202, 'verified with the secret sealed under the old key');

    const rotated = await runCli(['admin', 'rotate-secret-key', '--data', dataDir, '--json']);
    assert.equal(rotated.code, 0, rotated.stderr);
    const { rotation } = JSON.parse(rotated.stdout);
    assert.notEqual(rotation.current_key, oldKey);
    assert.deepEqual([rotation.key_file, rotation.dropped_keys, rotation.resealed, rotation.resealed_secrets], [keyFile, [oldKey], [name], 1]);
    assert.deepEqual(keyIds(keyFile), [rotation.current_key]);
    assert.equal(statSync(keyFile).mode & 0o777, 0o600);
    const stored = (await edge.edge.accounts.getReservation(name))!.policy!;
    assert.equal(SecretBox.keyIdOf(stored.webhooks![0]!.secret), rotation.current_key);

    // The running edge opens the re-sealed secret (it re-reads its file for the new key id).
    assert.equal((await post('{"n":2}')).status, 202, 'verified with the re-sealed secret');
    // And seals what it stores from now on under the new key.
    const again = await call(edge, 'PUT', `/api/v1/reserved-subdomains/${name}/policy`, { token: account.token, body: { verify_webhook: [{ provider: 'gitlab', secret: 'after-rotation' }] } });
    assert.equal(again.status, 200, again.text);
    assert.equal(SecretBox.keyIdOf((await edge.edge.accounts.getReservation(name))!.policy!.webhooks![0]!.secret), rotation.current_key);

    const text = await runCli(['admin', 'rotate-secret-key', '--data', dataDir]);
    assert.equal(text.code, 0, text.stderr);
    assert.match(text.stdout, new RegExp(`^${keyFile.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: new current key [0-9a-f]{8} \\(keys: [0-9a-f]{8}, ${rotation.current_key}\\)\nsealed 1 secret again under [0-9a-f]{8} \\(1 reserved name\\)\ndropped ${rotation.current_key}; `));
  } finally {
    await edge.close();
  }
});

test('rotate-secret-key: the cluster form takes steps; drop refuses while a secret is under an old key; no key file, nothing to rotate', async () => {
  const dir = freshDir();
  const keyFile = join(dir, 'cluster.key');
  const cluster = await runCli(['admin', 'rotate-secret-key', '--cluster', 'redis://127.0.0.1:1', '--secret-key-file', keyFile]);
  assert.equal(cluster.code, 2);
  assert.match(cluster.stderr, /with --cluster the rotation takes steps/);
  const badStep = await runCli(['admin', 'rotate-secret-key', '--data', dir, '--step', 'all']);
  assert.equal(badStep.code, 2);
  assert.match(badStep.stderr, /--step must be add, reseal or drop, not all/);
  const missing = await runCli(['admin', 'rotate-secret-key', '--data', join(dir, 'none')]);
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /does not exist\. The edge creates it when it first starts; there is nothing to rotate yet\.\n$/);

  // Steps on a data directory (as a cluster runs them on Redis): add, then drop before reseal is refused.
  const dataDir = freshDir();
  const edge = await startEdge({ dataDir });
  try {
    const account = await createAccount(edge, 'FREE');
    assert.equal((await call(edge, 'POST', '/api/v1/reserved-subdomains', { token: account.token, body: { subdomain: 'stepped-name' } })).status, 201);
    assert.equal((await call(edge, 'PUT', '/api/v1/reserved-subdomains/stepped-name/policy', { token: account.token, body: { verify_webhook: [{ provider: 'github', secret: 's' }] } })).status, 200);
  } finally {
    await edge.close();
  }
  const add = await runCli(['admin', 'rotate-secret-key', '--data', dataDir, '--step', 'add']);
  assert.equal(add.code, 0, add.stderr);
  assert.equal(keyIds(join(dataDir, 'secret.key')).length, 2);
  const early = await runCli(['admin', 'rotate-secret-key', '--data', dataDir, '--step', 'drop']);
  assert.equal(early.code, 1);
  assert.match(early.stderr, /not dropping the old keys: the policies of stepped-name still have secrets sealed under them; run --step reseal first/);
  assert.equal((await runCli(['admin', 'rotate-secret-key', '--data', dataDir, '--step', 'reseal'])).code, 0);
  const drop = await runCli(['admin', 'rotate-secret-key', '--data', dataDir, '--step', 'drop']);
  assert.equal(drop.code, 0, drop.stderr);
  assert.equal(keyIds(join(dataDir, 'secret.key')).length, 1);
});
