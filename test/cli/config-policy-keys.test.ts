/**
 * burrow.yml's policy keys (issue 26's, in snake case) become exactly the flags of `burrow http`, in
 * their value syntax, through one mapping: the contract the policy module's policySpecFromFlags takes.
 * Every YAML form a key accepts, where each flag came from (for error positions), which keys are
 * secrets, and the shapes refused with their line.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { formatProblem, parseConfigText, policyProblem, type HttpTunnelConfig } from '../../src/cli/config-file.js';

function tunnel(keys: string): HttpTunnelConfig {
  const parsed = parseConfigText(`tunnels:\n  api:\n    http: 8000\n${keys}`, '/p/burrow.yml');
  assert.deepEqual(parsed.problems.map(formatProblem), []);
  return parsed.config!.tunnels[0] as HttpTunnelConfig;
}

test('every policy key maps onto its burrow http flag, in the flag syntax', () => {
  const api = tunnel(
    [
      '    basic_auth: { alice: correct-horse, bob: 1234 }',
      '    basic_auth_forward: true',
      '    allow_cidr: 10.0.0.0/8',
      '    deny_cidr: [10.1.0.0/16, "2001:db8::/32"]',
      '    oidc:',
      '      issuer: https://accounts.example.com',
      '      client_id: burrow-dev',
      '      client_secret: s3cret',
      '      allow_email: ana@example.com',
      '      allow_domain: [example.com]',
      '    verify_webhook: [github:whsec, "hmac-sha256:X-Signature:k3y"]',
      '    request_header_add: { X-Env: dev, X-Number: 7 }',
      '    request_header_remove: Cookie',
      '    response_header_add: ["Cache-Control: no-store"]',
      '    response_header_remove: [Server, X-Powered-By]',
      '    rate_limit: 100/m',
      '',
    ].join('\n'),
  );
  assert.deepEqual(api.policy!.flags, {
    'basic-auth': ['alice:correct-horse', 'bob:1234'],
    'basic-auth-forward': true,
    'allow-cidr': ['10.0.0.0/8'],
    'deny-cidr': ['10.1.0.0/16', '2001:db8::/32'],
    oidc: 'https://accounts.example.com',
    'oidc-client-id': 'burrow-dev',
    'oidc-client-secret': 's3cret',
    'oidc-allow-email': ['ana@example.com'],
    'oidc-allow-domain': ['example.com'],
    'verify-webhook': ['github:whsec', 'hmac-sha256:X-Signature:k3y'],
    'request-header-add': ['X-Env: dev', 'X-Number: 7'],
    'request-header-remove': ['Cookie'],
    'response-header-add': ['Cache-Control: no-store'],
    'response-header-remove': ['Server', 'X-Powered-By'],
    'rate-limit': '100/m',
  });
  assert.deepEqual(api.policy!.source['rate-limit'], { line: 19, column: 17, key: 'tunnels.api.rate_limit' });
  assert.deepEqual(api.policy!.source.oidc, { line: 9, column: 7, key: 'tunnels.api.oidc' });
  // basic_auth as a list of USER:PASSWORD is the flag's own form.
  assert.deepEqual(tunnel('    basic_auth: ["alice:x", "bob:y"]\n').policy!.flags['basic-auth'], ['alice:x', 'bob:y']);
  // No policy key: no policy at all (burrow start runs the tunnel as it is).
  assert.equal(tunnel('    subdomain: plain-api\n').policy, undefined);
});

test('policy secrets in clear make the file one to keep private', () => {
  const parsed = parseConfigText(
    'tunnels:\n  api:\n    http: 8000\n    basic_auth: ["a:b"]\n    oidc: {issuer: https://x.example, client_id: i, client_secret: s}\n    verify_webhook: stripe:whsec_x\n    allow_cidr: 10.0.0.0/8\n',
    '/p/burrow.yml',
  );
  assert.deepEqual(parsed.config!.secrets, ['tunnels.api.basic_auth', 'tunnels.api.oidc.client_secret', 'tunnels.api.verify_webhook']);
});

test('shapes a policy key does not take are problems with their line and key', () => {
  const cases: [string, string][] = [
    ['    basic_auth: [alice]\n', '/p/burrow.yml:4:18: tunnels.api.basic_auth[0]: "alice" is not USER:PASSWORD'],
    ['    basic_auth_forward: yes\n', '/p/burrow.yml:4:25: tunnels.api.basic_auth_forward: must be true or false, not "yes"'],
    ['    oidc: {issuer: https://x.example}\n', '/p/burrow.yml:4:5: tunnels.api.oidc: needs client_id, client_secret'],
    ['    oidc: {issuer: https://x.example, client_id: i, client_secret: s, scope: x}\n', '/p/burrow.yml:4:71: tunnels.api.oidc.scope: unknown key (oidc takes issuer, client_id, client_secret, allow_email, allow_domain)'],
    ['    verify_webhook: whsec_only\n', '/p/burrow.yml:4:21: tunnels.api.verify_webhook: "whsec_only" is not PROVIDER:SECRET (github:..., stripe:..., hmac-sha256:HEADER:SECRET)'],
    ['    request_header_add: [X-Env]\n', "/p/burrow.yml:4:26: tunnels.api.request_header_add[0]: \"X-Env\" is not 'Name: value'"],
    ['    request_header_add: { X-Env: [a, b] }\n', '/p/burrow.yml:4:34: tunnels.api.request_header_add.X-Env: must be a string, not a list'],
    ['    rate_limit: 100\n', '/p/burrow.yml:4:17: tunnels.api.rate_limit: must be N/PERIOD (100/m, 10/1s, 1000/hour), not 100 (quote it: "100")'],
    ['    allow_cidr: {office: 10.0.0.0/8}\n', '/p/burrow.yml:4:17: tunnels.api.allow_cidr: must be a CIDR block (10.0.0.0/8), or a list of them, not a mapping'],
  ];
  for (const [keys, expected] of cases) {
    const parsed = parseConfigText(`tunnels:\n  api:\n    http: 8000\n${keys}`, '/p/burrow.yml');
    assert.deepEqual(parsed.problems.map(formatProblem), [expected], keys);
  }
});

test("the policy module's refusals land on the key and entry they came from", () => {
  // Valid values (the file is read clean) at the places the refusals below would name.
  const api = tunnel('    basic_auth: ["a:b", "c:d"]\n    allow_cidr: [10.0.0.0/8, 192.0.0.0/8]\n    oidc: {issuer: "https://x.example", client_id: i, client_secret: s}\n    rate_limit: 100/m\n');
  const source = api.policy!.source;
  // The messages as src/protocol/policy.ts's policySpecFromFlags words them (its flagMessage).
  assert.deepEqual(policyProblem('--basic-auth #2 user may not contain ":" (Basic credentials are USER:PASSWORD).', source), {
    line: 4,
    column: 17,
    key: 'tunnels.api.basic_auth[1]',
    message: 'user may not contain ":" (Basic credentials are USER:PASSWORD).',
  });
  assert.deepEqual(policyProblem('--allow-cidr #2 : "999.0.0.0/8" is not an IPv4 or IPv6 address or CIDR block.', source), {
    line: 5,
    column: 17,
    key: 'tunnels.api.allow_cidr[1]',
    message: '"999.0.0.0/8" is not an IPv4 or IPv6 address or CIDR block.',
  });
  assert.deepEqual(policyProblem('--oidc issuer: "http://x.example": the issuer must be https://', source), {
    line: 6,
    column: 11,
    key: 'tunnels.api.oidc.issuer',
    message: '"http://x.example": the issuer must be https://',
  });
  assert.equal(policyProblem('--oidc allow_domain[0]: "x" is not a domain name.', source).key, 'tunnels.api.oidc.allow_domain[0]');
  assert.equal(policyProblem('--oidc needs all of --oidc ISSUER, --oidc-client-id ID and --oidc-client-secret SECRET', source).key, 'tunnels.api.oidc');
  assert.deepEqual(policyProblem('--rate-limit "100/fortnight" is not N/PERIOD (e.g. 100/m, 10/1s, 1000/hour)', source), {
    line: 7,
    column: 17,
    key: 'tunnels.api.rate_limit',
    message: '"100/fortnight" is not N/PERIOD (e.g. 100/m, 10/1s, 1000/hour)',
  });
});

test("the policy module's checks run as the file is read: a bad value is a problem at its line and key, and the tunnel is not built", () => {
  const cases: [string, string][] = [
    ['    allow_cidr: [10.0.0.0/8, 999.0.0.0/8]\n', '/p/burrow.yml:4:17: tunnels.api.allow_cidr[1]: "999.0.0.0/8" is not an IPv4 or IPv6 address or CIDR block'],
    ['    verify_webhook: [github:abc, foo:bar]\n', '/p/burrow.yml:4:21: tunnels.api.verify_webhook[1]: provider must be one of github, gitlab,'],
    ['    rate_limit: 100/fortnight\n', '/p/burrow.yml:4:17: tunnels.api.rate_limit: "100/fortnight" is not N/PERIOD'],
    ['    oidc: {issuer: "http://x.example", client_id: i, client_secret: s}\n', '/p/burrow.yml:4:11: tunnels.api.oidc.issuer: "http://x.example": the issuer must be https://'],
    ['    request_header_remove: [Connection]\n', '/p/burrow.yml:4:28: tunnels.api.request_header_remove[0]: "Connection" is a hop-by-hop header'],
    [`    request_header_add: { X-A: "${'v'.repeat(1000)}", X-B: "${'v'.repeat(1000)}", X-C: "${'v'.repeat(1000)}" }\n`, '/p/burrow.yml:4:25: tunnels.api.request_header_add: the policy is 4136 bytes encoded; a one-run policy may be at most 3072.'],
  ];
  for (const [keys, expected] of cases) {
    const parsed = parseConfigText(`tunnels:\n  api:\n    http: 8000\n${keys}`, '/p/burrow.yml');
    const problems = parsed.problems.map(formatProblem);
    assert.equal(problems.length, 1, keys);
    assert.ok(problems[0]!.startsWith(expected), `${problems[0]}\n  should start with\n${expected}`);
    assert.deepEqual(parsed.config?.tunnels ?? [], []);
  }
});
