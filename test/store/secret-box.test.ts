/**
 * The edge's secret key file (docs/policies.md, "Secrets at rest"): created on first use with mode 0600,
 * refused when others can read it or when it holds no key; values sealed for one purpose do not open as
 * another; a rotation by another process (the admin command next to a running edge) is noticed: the
 * edge seals under the new key, still opens values under the old one until it is dropped; re-sealing
 * every stored policy on a real LMDB store leaves nothing under an old key.
 */
import assert from 'node:assert/strict';
import { chmodSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { BurrowError } from '../../src/errors.js';
import { SecretBox } from '../../src/store/secret-box.js';
import { namesUnderOldKeys, resealStoredPolicies } from '../../src/store/secret-rotation.js';
import { storePolicy } from '../../src/store/stored-policy.js';
import { Store } from '../../src/store/store.js';
import { tempDirs } from '../helpers.js';

const freshDir = tempDirs('burrow-secret-box-');

function refusal(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    assert.ok(error instanceof BurrowError);
    return error.message;
  }
  assert.fail('expected a refusal');
}

test('the key file is created on first use with mode 0600 (its directory 0700), one key line', () => {
  const dir = join(freshDir(), 'new-dir');
  const path = join(dir, 'secret.key');
  const box = SecretBox.open(path);
  assert.equal(statSync(path).mode & 0o777, 0o600);
  assert.equal(statSync(dir).mode & 0o777, 0o700);
  const lines = readFileSync(path, 'utf8').split('\n').filter((line) => line !== '' && !line.startsWith('#'));
  assert.deepEqual(lines.map((line) => line.split(' ').slice(0, 3).join(' ')), [`burrow-secret-key v1 ${box.currentKeyId}`]);
  // Opened again: the same key, not a new one.
  assert.equal(SecretBox.open(path).currentKeyId, box.currentKeyId);
  assert.match(refusal(() => SecretBox.open(join(dir, 'missing.key'), { create: false })), /does not exist/);
});

test('a key file others can read, or one without a valid key, is refused with the file and the fix named', () => {
  const path = join(freshDir(), 'secret.key');
  SecretBox.open(path);
  for (const mode of [0o644, 0o640, 0o604]) {
    chmodSync(path, mode);
    assert.equal(refusal(() => SecretBox.open(path)), `The secret key file ${path} is readable by others (mode ${mode.toString(8)}); run: chmod 600 ${path}`);
  }
  chmodSync(path, 0o600);
  writeFileSync(path, '# only a comment\n');
  assert.match(refusal(() => SecretBox.open(path)), /holds no key/);
  writeFileSync(path, 'burrow-secret-key v1 zz not-a-key\n');
  assert.match(refusal(() => SecretBox.open(path)), /has a line that is not "burrow-secret-key v1 <id> <base64 key>"/);
});

test('sealed values open only for their purpose and unaltered', () => {
  const box = SecretBox.open(join(freshDir(), 'secret.key'));
  const sealed = box.seal('whsec_abc');
  assert.match(sealed, new RegExp(`^sk1\\.${box.currentKeyId}\\.[A-Za-z0-9_-]+$`));
  assert.equal(box.open(sealed), 'whsec_abc');
  assert.equal(box.open(sealed, 'oidc-session:a.example'), null);
  const body = sealed.slice(sealed.lastIndexOf('.') + 1);
  const altered = `${sealed.slice(0, sealed.lastIndexOf('.') + 1)}${body[0] === 'A' ? 'B' : 'A'}${body.slice(1)}`;
  assert.equal(box.open(altered), null);
  assert.equal(box.open('not sealed'), null);
});

test("a rotation by another process: the edge's box seals under the new key at once, opens the old values until they are dropped", () => {
  const path = join(freshDir(), 'secret.key');
  const edge = SecretBox.open(path);
  const old = edge.currentKeyId;
  const beforeRotation = edge.seal('before');
  const admin = SecretBox.open(path, { create: false });
  const added = admin.addKey();
  assert.notEqual(added, old);
  assert.equal(statSync(path).mode & 0o777, 0o600, 'the replaced file keeps mode 0600');
  // The edge noticed the file changed at its next seal.
  const afterRotation = edge.seal('after');
  assert.equal(SecretBox.keyIdOf(afterRotation), added);
  assert.equal(edge.open(beforeRotation), 'before');
  assert.equal(admin.open(afterRotation), 'after');
  assert.deepEqual(admin.dropOldKeys(), [old]);
  const restarted = SecretBox.open(path);
  assert.deepEqual(restarted.keyIds, [added]);
  assert.equal(restarted.open(beforeRotation), null, 'a dropped key opens nothing');
  assert.equal(restarted.open(afterRotation), 'after');
});

test('re-sealing every stored policy (LMDB) leaves no secret under an old key; one that opens with no key is named', async () => {
  const dir = freshDir();
  const box = SecretBox.open(join(dir, 'secret.key'));
  const store = Store.open(join(dir, 'data'));
  try {
    const { account } = await store.createAccount('rotate@example.test', 'PRO', 'first');
    const spec = {
      verify_webhook: [
        { provider: 'github' as const, secret: 'gh-secret' },
        { provider: 'stripe' as const, secret: 'whsec_stripe' },
      ],
      oidc: { issuer: 'https://id.example', client_id: 'c', client_secret: 'oidc-secret', allow_email: [], allow_domain: [] },
    };
    for (const name of ['alpha-hooks', 'beta-hooks']) {
      await store.reserve(account.id, name, 1_000, 50);
      await store.setPolicy(account.id, name, await storePolicy(spec, undefined, box));
    }
    await store.reserve(account.id, 'plain-name', 1_000, 50);
    box.addKey();
    assert.deepEqual(await namesUnderOldKeys(store, box), ['alpha-hooks', 'beta-hooks']);
    const report = await resealStoredPolicies(store, box);
    assert.deepEqual(report, { names: ['alpha-hooks', 'beta-hooks'], secrets: 6 });
    assert.deepEqual(await namesUnderOldKeys(store, box), []);
    box.dropOldKeys();
    const alpha = (await store.getReservation('alpha-hooks'))!.policy!;
    assert.deepEqual(alpha.webhooks!.map((hook) => box.open(hook.secret)), ['gh-secret', 'whsec_stripe']);
    assert.equal(box.open(alpha.oidc!.clientSecret), 'oidc-secret');
    // Nothing left to do: a second pass writes nothing.
    assert.deepEqual(await resealStoredPolicies(store, box), { names: [], secrets: 0 });

    const stranger = SecretBox.open(join(freshDir(), 'secret.key'));
    await store.setPolicy(account.id, 'beta-hooks', { webhooks: [{ id: 'wh_00000009', provider: 'github', secret: stranger.seal('lost') }] });
    await assert.rejects(resealStoredPolicies(store, box), /A secret of the policy of "beta-hooks" does not open with any key/);
  } finally {
    await store.close();
  }
});
