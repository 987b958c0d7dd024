/**
 * The dashboard's policy editor on the Reserved subdomains page (issue 26, docs/dashboard.md) in real
 * headless Chromium against a real edge, driven through its accessible names, every effect checked
 * through the API: a policy written in the page is stored (passwords hashed, secrets sealed) and holds
 * in the offline queue; the page never shows a secret and keeps stored ones unless told; a refused field
 * is shown with its code; Remove policy asks first; no page error and no CSP violation.
 */
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type { Page } from 'playwright-core';
import { call, createAccount, startEdge, type TestAccount, type TestEdge } from '../helpers.js';
import { launchChromium, watchProblems, type Browser } from '../inspector/browser.js';

const NAME = 'guarded-hooks';
const PATH = `/api/v1/reserved-subdomains/${NAME}/policy`;

describe('the dashboard policy editor in Chromium', () => {
  let edge: TestEdge;
  let alice: TestAccount;
  let browser: Browser;
  let page: Page;
  const problems: string[] = [];
  let origin: string;

  before(async () => {
    edge = await startEdge({ authFailureLimit: 1_000 });
    origin = `http://localhost:${edge.port}`;
    alice = await createAccount(edge, 'PRO');
    const reserved = await call(edge, 'POST', '/api/v1/reserved-subdomains', { token: alice.token, body: { subdomain: NAME, offline: 'queue' } });
    assert.equal(reserved.status, 201, reserved.text);
    browser = await launchChromium();
    page = await browser.context.newPage();
    watchProblems(page, problems, { allowRefusals: true });
  });

  after(async () => {
    await browser?.close();
    await edge?.close();
  });

  const button = (name: string) => page.getByRole('button', { name, exact: true });
  const editor = () => page.getByRole('region', { name: `Policy of ${NAME}`, exact: true });
  const label = (name: string) => editor().getByLabel(name, { exact: true });
  const stored = async () => (await call(edge, 'GET', PATH, { token: alice.token })).json.policy;
  const post = (body: string, headers: Record<string, string> = {}) => call(edge, 'POST', '/hook', { host: `${NAME}.localhost:${edge.port}`, rawBody: body, headers });

  test('a policy written in the page is stored, secrets sealed, and the queue holds only verified webhooks', async () => {
    await page.goto(`${origin}/`);
    await page.getByLabel('Access token', { exact: true }).fill(alice.token);
    await button('Sign in').click();
    await page.getByRole('link', { name: 'Reserved subdomains', exact: true }).click();
    await button(`Policy of ${NAME}`).click();
    await editor().waitFor();
    await label('Add users').fill('ann:correct-horse');
    await label('Allowed addresses').fill('127.0.0.0/8\n::1/128');
    await label('Add webhook secrets').fill('github:gh-secret');
    await label('Request headers to add').fill('X-Tenant: blue');
    await label('Response headers to remove').fill('Server');
    await label('Requests per period').fill('100');
    await label('Period in seconds').fill('60');
    await button('Save policy').click();
    await page.getByText(`Policy of ${NAME} saved.`).waitFor();
    await editor().waitFor({ state: 'detached' });
    await page.getByRole('row').filter({ hasText: NAME }).getByText('basic-auth (1); cidr; webhook: github; headers; rate 100/60s').waitFor();

    const policy = await stored();
    assert.deepEqual(policy.basic_auth, [{ user: 'ann', password: 'set' }]);
    assert.deepEqual(policy.allow_cidr, ['127.0.0.0/8', '::1/128']);
    assert.deepEqual(policy.verify_webhook.map((hook: { provider: string; secret: string }) => [hook.provider, hook.secret]), [['github', 'set']]);
    assert.deepEqual(policy.request_header_add, [{ name: 'X-Tenant', value: 'blue' }]);
    assert.deepEqual(policy.response_header_remove, ['Server']);
    assert.deepEqual(policy.rate_limit, { requests: 100, period_seconds: 60 });
    assert.doesNotMatch(JSON.stringify((await edge.edge.accounts.getReservation(NAME))!.policy), /correct-horse|gh-secret/);

    // The stored policy holds while no tunnel is connected: basic auth first, then only a signed webhook is held.
    const signature = `sha256=${createHmac('sha256', 'gh-secret').update('{"n":2}').digest('hex')}`;
    const credentials = { authorization: `Basic ${Buffer.from('ann:correct-horse').toString('base64')}` };
    assert.equal((await post('{"n":2}', { 'x-hub-signature-256': signature })).json.error.code, 'AUTHENTICATION_REQUIRED');
    const unsigned = await post('{"n":1}', credentials);
    assert.deepEqual([unsigned.status, unsigned.json.error.code], [401, 'SIGNATURE_INVALID']);
    assert.equal((await post('{"n":2}', { ...credentials, 'x-hub-signature-256': signature })).status, 202);
  });

  test('reopened, the editor shows no secret; stored ones are kept unless unchecked; a refused field shows its code', async () => {
    const sealedBefore = (await edge.edge.accounts.getReservation(NAME))!.policy!.webhooks![0]!.secret;
    await button(`Policy of ${NAME}`).click();
    await editor().waitFor();
    assert.equal(await label('Allowed addresses').inputValue(), '127.0.0.0/8\n::1/128');
    assert.equal(await label('Keep user ann (password set)').isChecked(), true);
    const hookBox = editor().getByLabel(/^Keep github wh_[0-9a-f]{8} \(secret set\)$/);
    assert.equal(await hookBox.isChecked(), true);
    const html = await page.content();
    assert.doesNotMatch(html, /correct-horse|gh-secret/);
    assert.equal(await label('Add users').inputValue(), '');

    await label('Allowed addresses').fill('10.0.0.0/33');
    await button('Save policy').click();
    await page.getByRole('alert').getByText(/^INVALID_REQUEST: policy\.allow_cidr\[0\]: "10\.0\.0\.0\/33": the prefix length must be 0 to 32\.$/).waitFor();
    assert.deepEqual((await stored()).allow_cidr, ['127.0.0.0/8', '::1/128'], 'nothing changed');

    // Drop the user, keep the webhook (its sealed secret untouched), allow any address.
    await label('Allowed addresses').fill('');
    await label('Keep user ann (password set)').uncheck();
    await button('Save policy').click();
    await page.getByText(`Policy of ${NAME} saved.`).waitFor();
    const policy = await stored();
    assert.deepEqual([policy.basic_auth, policy.allow_cidr], [[], []]);
    assert.equal((await edge.edge.accounts.getReservation(NAME))!.policy!.webhooks![0]!.secret, sealedBefore);
  });

  test('Remove policy asks first, then every rule goes', async () => {
    await button(`Policy of ${NAME}`).click();
    await editor().waitFor();
    await button('Remove policy').click();
    await page.getByText(`Every rule goes: anyone can reach ${NAME} again`).waitFor();
    await page.keyboard.press('Escape');
    assert.notEqual((await edge.edge.accounts.getReservation(NAME))!.policy, undefined, 'Escape removed nothing');
    await button('Remove policy').click();
    await page.getByRole('dialog').getByRole('button', { name: 'Remove policy', exact: true }).click();
    await page.getByText(`Policy of ${NAME} removed.`).waitFor();
    assert.equal((await edge.edge.accounts.getReservation(NAME))!.policy, undefined);
    await page.getByRole('row').filter({ hasText: NAME }).getByText('none', { exact: false }).waitFor();
    // Close policy leaves without a change.
    await button(`Policy of ${NAME}`).click();
    await editor().waitFor();
    await button('Close policy').click();
    await editor().waitFor({ state: 'detached' });
    assert.deepEqual(problems, []);
  });
});
