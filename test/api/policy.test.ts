/**
 * The policy endpoints (docs/api.md "Tunnel policy"): GET/PUT/DELETE
 * /api/v1/reserved-subdomains/:subdomain/policy on a real edge. The view's shape, secrets write-only
 * (shown as "set", stored hashed or sealed, kept when left out), every kind of validation error naming
 * its field, 404 for a name of another account, and the one-line summary in the reservations list.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { SecretBox } from '../../src/store/secret-box.js';
import { call, createAccount, startEdge, type TestAccount, type TestEdge } from '../helpers.js';

const NAME = 'api-policy';
const PATH = `/api/v1/reserved-subdomains/${NAME}/policy`;

let edge: TestEdge;
let owner: TestAccount;
let other: TestAccount;

const EMPTY_VIEW = {
  basic_auth: [],
  basic_auth_forward: false,
  allow_cidr: [],
  deny_cidr: [],
  oidc: null,
  verify_webhook: [],
  request_header_add: [],
  request_header_remove: [],
  response_header_add: [],
  response_header_remove: [],
  rate_limit: null,
};

const FULL = {
  basic_auth: [{ user: 'ann', password: 'correct-horse' }],
  basic_auth_forward: true,
  allow_cidr: ['203.0.113.0/24', '2001:db8::/32'],
  deny_cidr: ['203.0.113.7/32'],
  oidc: { issuer: 'https://id.example', client_id: 'burrow', client_secret: 'oidc-client-secret', allow_email: ['ann@example.test'], allow_domain: [] },
  verify_webhook: [
    { provider: 'github', secret: 'gh-secret' },
    { provider: 'hmac-sha256', header: 'X-Sig', secret: 'hmac-secret' },
  ],
  request_header_add: [{ name: 'X-Tenant', value: 'blue' }],
  request_header_remove: ['Cookie'],
  response_header_add: [{ name: 'Cache-Control', value: 'no-store' }],
  response_header_remove: ['Server'],
  rate_limit: { requests: 100, period_seconds: 60 },
};

async function put(body: unknown, token = owner.token) {
  return call(edge, 'PUT', PATH, { token, body });
}

before(async () => {
  edge = await startEdge();
  owner = await createAccount(edge, 'PRO');
  other = await createAccount(edge, 'PRO');
  const reserved = await call(edge, 'POST', '/api/v1/reserved-subdomains', { token: owner.token, body: { subdomain: NAME } });
  assert.equal(reserved.status, 201, reserved.text);
});
after(async () => {
  await edge.close();
});

test('GET without a policy: every rule empty; PUT stores it and answers the view, each secret only as "set"', async () => {
  const empty = await call(edge, 'GET', PATH, { token: owner.token });
  assert.equal(empty.status, 200);
  assert.deepEqual(empty.json, { subdomain: NAME, policy: EMPTY_VIEW });

  const stored = await put(FULL);
  assert.equal(stored.status, 200, stored.text);
  const ids = stored.json.policy.verify_webhook.map((hook: { id: string }) => hook.id);
  assert.match(ids[0], /^wh_[0-9a-f]{8}$/);
  assert.deepEqual(stored.json, {
    subdomain: NAME,
    policy: {
      ...FULL,
      basic_auth: [{ user: 'ann', password: 'set' }],
      oidc: { ...FULL.oidc, client_secret: 'set' },
      verify_webhook: [
        { id: ids[0], provider: 'github', secret: 'set' },
        { id: ids[1], provider: 'hmac-sha256', secret: 'set', header: 'X-Sig' },
      ],
    },
  });
  assert.deepEqual((await call(edge, 'GET', PATH, { token: owner.token })).json, stored.json);
  // Nothing of a secret is in any answer, nor in the record in clear.
  assert.doesNotMatch(stored.text, /correct-horse|oidc-client-secret|gh-secret|hmac-secret/);
  const record = (await edge.edge.accounts.getReservation(NAME))!.policy!;
  assert.doesNotMatch(JSON.stringify(record), /correct-horse|oidc-client-secret|gh-secret|hmac-secret/);
  assert.match(record.basicAuth![0]!.hash, /^scrypt\$/);
  const box = SecretBox.open(`${edge.dataDir}/secret.key`);
  assert.deepEqual(record.webhooks!.map((hook) => box.open(hook.secret)), ['gh-secret', 'hmac-secret']);
  assert.equal(box.open(record.oidc!.clientSecret), 'oidc-client-secret');

  const list = await call(edge, 'GET', '/api/v1/reserved-subdomains', { token: owner.token });
  assert.equal(list.json.reserved_subdomains[0].policy, 'basic-auth (1); cidr; oidc; webhook: github, hmac-sha256; headers; rate 100/60s');
});

test('a PUT that leaves secrets out keeps the stored ones (user, webhook entry by id, oidc); new ones need theirs', async () => {
  const stored = await put(FULL);
  const [github] = stored.json.policy.verify_webhook as { id: string }[];
  const before = (await edge.edge.accounts.getReservation(NAME))!.policy!;
  const kept = await put({
    basic_auth: [{ user: 'ann' }, { user: 'bob', password: 'second' }],
    oidc: { issuer: 'https://id.example', client_id: 'burrow' },
    verify_webhook: [{ id: github!.id, provider: 'github' }],
  });
  assert.equal(kept.status, 200, kept.text);
  const after = (await edge.edge.accounts.getReservation(NAME))!.policy!;
  assert.equal(after.basicAuth![0]!.hash, before.basicAuth![0]!.hash);
  assert.equal(after.oidc!.clientSecret, before.oidc!.clientSecret);
  assert.deepEqual(after.webhooks, [before.webhooks![0]]);
  assert.deepEqual(after.allowCidr, undefined, 'a PUT replaces the whole policy');

  const cases: [unknown, string][] = [
    [{ basic_auth: [{ user: 'carol' }] }, 'policy.basic_auth: user "carol" has no stored password; send "password".'],
    [{ verify_webhook: [{ provider: 'github' }] }, 'policy.verify_webhook[0]: "secret" is required (or "id" of a stored entry to keep its secret).'],
    [{ verify_webhook: [{ id: 'wh_00000000', provider: 'github' }] }, 'policy.verify_webhook: no stored github entry "wh_00000000"; send "secret".'],
  ];
  for (const [body, message] of cases) {
    const refused = await put(body);
    assert.deepEqual([refused.status, refused.json], [400, { error: { code: 'INVALID_REQUEST', message } }], JSON.stringify(body));
  }
});

test('every field is checked: 400 INVALID_REQUEST naming it, and the stored policy untouched', async () => {
  await put(FULL);
  const before = (await edge.edge.accounts.getReservation(NAME))!.policy;
  const cases: [unknown, RegExp][] = [
    [{ colour: 1 }, /^policy: unknown field "colour"; known: basic_auth, /],
    [{ allow_cidr: ['1.2.3.4/40'] }, /^policy\.allow_cidr\[0\]: "1\.2\.3\.4\/40": the prefix length must be 0 to 32\.$/],
    [{ deny_cidr: ['not-an-address'] }, /^policy\.deny_cidr\[0\]: /],
    [{ request_header_add: [{ name: 'Connection', value: 'x' }] }, /^policy\.request_header_add\[0\]\.name: "Connection" is a hop-by-hop header/],
    [{ response_header_remove: ['Content-Length'] }, /^policy\.response_header_remove\[0\]/],
    [{ verify_webhook: [{ provider: 'acme', secret: 'x' }] }, /^policy\.verify_webhook\[0\]\.provider must be one of github, gitlab, stripe,/],
    [{ oidc: { issuer: 'http://id.example', client_id: 'c', client_secret: 's' } }, /^policy\.oidc\.issuer: .*https:\/\//],
    [{ rate_limit: { requests: 0, period_seconds: 60 } }, /^policy\.rate_limit\.requests/],
    [{ basic_auth: Array.from({ length: 17 }, (_, i) => ({ user: `u${i}`, password: 'p' })) }, /^policy\.basic_auth holds 17 entries; at most 16\.$/],
    [[], /^The body must be a JSON object\.$/],
  ];
  for (const [body, message] of cases) {
    const refused = await put(body);
    assert.equal(refused.status, 400, `${JSON.stringify(body)}: ${refused.text}`);
    assert.equal(refused.json.error.code, 'INVALID_REQUEST');
    assert.match(refused.json.error.message, message);
  }
  const notJson = await call(edge, 'PUT', PATH, { token: owner.token, rawBody: 'not json', headers: { 'content-type': 'application/json' } });
  assert.deepEqual([notJson.status, notJson.json.error.code], [400, 'INVALID_REQUEST']);
  assert.deepEqual((await edge.edge.accounts.getReservation(NAME))!.policy, before);
});

test("another account's name, or a name nobody reserved, is 404 for all three; no token is 401", async () => {
  for (const [method, body] of [['GET', undefined], ['PUT', {}], ['DELETE', undefined]] as const) {
    for (const path of [PATH, '/api/v1/reserved-subdomains/never-reserved/policy']) {
      const answer = await call(edge, method, path, { token: other.token, ...(body === undefined ? {} : { body }) });
      assert.equal(answer.status, 404, `${method} ${path}: ${answer.text}`);
      assert.equal(answer.json.error.code, 'NOT_FOUND');
    }
  }
  assert.equal((await call(edge, 'GET', PATH)).status, 401);
  assert.ok((await edge.edge.accounts.getReservation(NAME))!.policy !== undefined, "the owner's policy is still there");
});

test('DELETE removes the policy: 204, then the empty view and no summary', async () => {
  await put(FULL);
  const removed = await call(edge, 'DELETE', PATH, { token: owner.token });
  assert.equal(removed.status, 204);
  assert.deepEqual((await call(edge, 'GET', PATH, { token: owner.token })).json, { subdomain: NAME, policy: EMPTY_VIEW });
  assert.equal((await call(edge, 'GET', '/api/v1/reserved-subdomains', { token: owner.token })).json.reserved_subdomains[0].policy, null);
  assert.equal((await edge.edge.accounts.getReservation(NAME))!.policy, undefined);
  // An empty object removes every rule too.
  await put(FULL);
  assert.deepEqual((await put({})).json, { subdomain: NAME, policy: EMPTY_VIEW });
  assert.equal((await edge.edge.accounts.getReservation(NAME))!.policy, undefined);
});
