/**
 * Issue 29, point 4: `--resolve HOST:PORT:ADDRESS` as curl takes it. The end-to-end use (an HTTPS edge
 * reached by name without DNS) is test/cli/issue-29-throwaway-ca.test.ts; these are the rule's edges.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { resolveEndpoints } from '../../src/client/edge-endpoints.js';
import { parseResolveRule, resolveRuleFor } from '../../src/client/resolve-rules.js';
import { runCli, tempDir } from '../helpers.js';

test('HOST:PORT:ADDRESS, IPv4 or IPv6 (bracketed or not); anything else says what is wrong', () => {
  assert.deepEqual(parseResolveRule('Tunnels.Example.com:443:203.0.113.7'), { host: 'tunnels.example.com', port: 443, address: { address: '203.0.113.7', family: 4 } });
  assert.deepEqual(parseResolveRule('edge.test:8443:[::1]'), { host: 'edge.test', port: 8443, address: { address: '::1', family: 6 } });
  assert.deepEqual(parseResolveRule('edge.test:8443:2001:db8::5'), { host: 'edge.test', port: 8443, address: { address: '2001:db8::5', family: 6 } });
  for (const [text, reason] of [
    ['edge.test:443', /is not HOST:PORT:ADDRESS/],
    ['edge.test:0:127.0.0.1', /PORT must be 1 to 65535/],
    ['edge.test:https:127.0.0.1', /PORT must be 1 to 65535/],
    ['edge.test:443:edge.internal', /ADDRESS must be an IPv4 or IPv6 address/],
    ['*:443:127.0.0.1', /HOST must be a name \(no wildcard\)/],
    [':443:127.0.0.1', /HOST must be a name/],
  ] as const) {
    const rule = parseResolveRule(text);
    assert.equal(typeof rule, 'string', text);
    assert.match(rule as string, reason);
  }
});

test("a rule applies to its host and port only, the scheme's default port when the URL has none", async () => {
  const rules = [parseResolveRule('edge.test:443:127.0.0.9'), parseResolveRule('edge.test:8080:127.0.0.8')].map((rule) => {
    assert.notEqual(typeof rule, 'string');
    return rule as Exclude<typeof rule, string>;
  });
  assert.equal(resolveRuleFor(rules, new URL('https://EDGE.test/'))?.address.address, '127.0.0.9');
  assert.equal(resolveRuleFor(rules, new URL('http://edge.test:8080/'))?.address.address, '127.0.0.8');
  assert.equal(resolveRuleFor(rules, new URL('http://edge.test/')), undefined);
  assert.equal(resolveRuleFor(rules, new URL('https://other.test/')), undefined);
  // The tunnel client's endpoints: the rule's address pinned, no DNS asked for the name.
  assert.deepEqual(await resolveEndpoints(['https://edge.test', 'https://other.invalid'], rules), [
    { edge: 'https://edge.test', address: { address: '127.0.0.9', family: 4 } },
    { edge: 'https://other.invalid', address: null },
  ]);
});

test('a bad --resolve or BURROW_RESOLVE is a usage error (exit 2), before any connection', async () => {
  const env = { XDG_CONFIG_HOME: tempDir('burrow-issue29-resolve-'), BURROW_TOKEN: `svc_pat_0123abcd_${'0'.repeat(36)}`, BURROW_EDGE: '' };
  const flag = await runCli(['tunnels', 'list', '--edge', 'https://edge.test', '--resolve', 'edge.test:443'], env);
  assert.equal(flag.code, 2);
  assert.match(flag.stderr, /^burrow: --resolve "edge\.test:443" is not HOST:PORT:ADDRESS/);
  const variable = await runCli(['tunnels', 'list', '--edge', 'https://edge.test'], { ...env, BURROW_RESOLVE: 'edge.test:443:nowhere' });
  assert.equal(variable.code, 2);
  assert.match(variable.stderr, /^burrow: BURROW_RESOLVE "edge\.test:443:nowhere": ADDRESS must be an IPv4 or IPv6 address/);
});
