/**
 * The policy flags of `burrow reserve` and `burrow reservations show` through the real CLI against a real
 * edge (issue 26): the flags become the stored policy, `show` lists every rule with secrets only as set
 * (text and --json), `list` has the summary, --clear-policy removes it, and each kind of bad flag is a
 * one-line usage error (exit 2) that changes nothing.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { createAccount, runCli, startEdge, tempDir, type TestEdge } from '../helpers.js';

const NAME = 'cli-policy';
let edge: TestEdge;
let env: Record<string, string>;

before(async () => {
  edge = await startEdge();
  const account = await createAccount(edge, 'PRO');
  env = { XDG_CONFIG_HOME: tempDir(), BURROW_EDGE: edge.url, BURROW_TOKEN: account.token, BURROW_CONFIG: '' };
});
after(async () => {
  await edge.close();
});

const FLAGS = [
  '--offline', 'queue',
  '--basic-auth', 'ann:correct-horse',
  '--allow-cidr', '10.0.0.0/8,192.168.0.0/16',
  '--verify-webhook', 'github:gh-secret',
  '--verify-webhook', 'hmac-sha256:X-Sig:hmac-secret',
  '--rate-limit', '100/m',
  '--request-header-add', 'X-Tenant: blue',
  '--response-header-remove', 'Server',
];
const SUMMARY = 'basic-auth (1); cidr; webhook: github, hmac-sha256; headers; rate 100/60s';

test('burrow reserve NAME with policy flags stores them; reservations show lists each rule, secrets only as set', async () => {
  const reserved = await runCli(['reserve', NAME, ...FLAGS], env);
  assert.equal(reserved.code, 0, reserved.stderr);
  assert.equal(reserved.stdout, `reserved ${NAME} (offline: queue) (policy: ${SUMMARY}); use it with: burrow http PORT --subdomain ${NAME}\n`);

  const shown = await runCli(['reservations', 'show', NAME], env);
  assert.equal(shown.code, 0, shown.stderr);
  const [github, hmac] = [...shown.stdout.matchAll(/ (wh_[0-9a-f]{8}) /g)].map((match) => match[1]!);
  assert.equal(
    shown.stdout.replace(/^ {2}reserved .*$/m, '  reserved     (time)'),
    [
      NAME,
      '  reserved     (time)',
      '  offline      queue',
      '  basic-auth   ann:(password set)',
      '  allow-cidr   10.0.0.0/8',
      '  allow-cidr   192.168.0.0/16',
      `  webhook      github ${github} (secret set)`,
      `  webhook      hmac-sha256 (X-Sig) ${hmac} (secret set)`,
      '  request +    X-Tenant: blue',
      '  response -   Server',
      '  rate-limit   100 per 60 s per client address',
      '',
    ].join('\n'),
  );
  const json = await runCli(['reservations', 'show', NAME, '--json'], env);
  assert.equal(json.code, 0, json.stderr);
  const view = JSON.parse(json.stdout);
  assert.deepEqual([view.subdomain, view.offline], [NAME, 'queue']);
  assert.deepEqual(view.policy.basic_auth, [{ user: 'ann', password: 'set' }]);
  assert.deepEqual(view.policy.verify_webhook, [
    { id: github, provider: 'github', secret: 'set' },
    { id: hmac, provider: 'hmac-sha256', secret: 'set', header: 'X-Sig' },
  ]);
  for (const output of [reserved.stdout, shown.stdout, json.stdout]) assert.doesNotMatch(output, /correct-horse|gh-secret|hmac-secret/);

  const listed = await runCli(['reservations'], env);
  assert.match(listed.stdout, new RegExp(`^${NAME} +\\S+ \\S+ +queue +${SUMMARY.replace(/[()]/g, '\\$&')}$`, 'm'));
});

test('bad policy flags are one-line usage errors, exit 2, and the stored policy stays', async () => {
  await runCli(['reserve', NAME, ...FLAGS], env);
  const before = (await runCli(['reservations', 'show', NAME, '--json'], env)).stdout;
  const cases: [string[], string][] = [
    [['--basic-auth', 'ann'], 'burrow: --basic-auth "ann" is not USER:PASSWORD\n'],
    [['--rate-limit', '5/fortnight'], 'burrow: --rate-limit "5/fortnight" is not N/PERIOD (e.g. 100/m, 10/1s, 1000/hour)\n'],
    [['--allow-cidr', '1.2.3.4/40'], 'burrow: --allow-cidr #1: "1.2.3.4/40": the prefix length must be 0 to 32.\n'],
    [['--request-header-remove', 'Connection'], 'burrow: --request-header-remove #1: "Connection" is a hop-by-hop header: it describes one connection and never crosses the tunnel.\n'],
    [['--verify-webhook', 'acme:x'], 'burrow: --verify-webhook #1 provider must be one of github, gitlab, stripe, slack, shopify, twilio, svix, standard-webhooks, paddle, linear, hmac-sha256.\n'],
    [['--oidc', 'https://id.example'], 'burrow: --oidc needs all of --oidc ISSUER, --oidc-client-id ID and --oidc-client-secret SECRET\n'],
    [['--basic-auth', 'a:b', '--clear-policy'], 'burrow: give policy flags or --clear-policy, not both\n'],
  ];
  for (const [flags, stderr] of cases) {
    const refused = await runCli(['reserve', NAME, ...flags], env);
    assert.deepEqual([refused.code, refused.stdout, refused.stderr], [2, '', stderr], flags.join(' '));
  }
  assert.equal((await runCli(['reservations', 'show', NAME, '--json'], env)).stdout, before);
});

test('--clear-policy removes the policy; the offline mode stays', async () => {
  await runCli(['reserve', NAME, ...FLAGS], env);
  const cleared = await runCli(['reserve', NAME, '--clear-policy'], env);
  assert.equal(cleared.code, 0, cleared.stderr);
  assert.equal(cleared.stdout, `reserved ${NAME} (offline: queue); use it with: burrow http PORT --subdomain ${NAME}\n`);
  const shown = await runCli(['reservations', 'show', NAME], env);
  assert.match(shown.stdout, /^ {2}offline {6}queue\n {2}policy {7}none \(anyone can reach it\)\n$/m);
  const unknown = await runCli(['reservations', 'show', 'never-reserved'], env);
  assert.deepEqual([unknown.code, unknown.stderr], [1, 'burrow: NOT_FOUND: No reserved subdomain never-reserved on this account.\n']);
});
