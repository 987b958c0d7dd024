/**
 * Host dispatch (src/edge/host.ts, DESIGN.md sections 1 and 5): which Host headers reach the API, which
 * name a tunnel, and which are unknown.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { apiHostProblem, HostDispatch, type HostTarget } from '../../src/edge/host.js';

const API: HostTarget = { kind: 'api', dashboard: true };
const API_ONLY: HostTarget = { kind: 'api', dashboard: false };
const UNKNOWN: HostTarget = { kind: 'unknown' };
const tunnel = (subdomain: string): HostTarget => ({ kind: 'tunnel', subdomain });

const cases: [domain: string, host: string, expected: HostTarget][] = [
  ['localhost', 'localhost', API],
  ['localhost', 'localhost:8080', API],
  ['localhost', 'LOCALHOST:8080', API],
  ['localhost', 'localhost.', API],
  ['localhost', 'api.localhost:8080', API],
  ['localhost', '', API],
  ['localhost', '127.0.0.1', API],
  ['localhost', '127.0.0.1:8080', API],
  ['localhost', '[::1]', API],
  ['localhost', '[::1]:8080', API],
  ['localhost', '[2001:db8::1]:443', API],
  ['localhost', '[::ffff:127.0.0.1]:8080', API],
  ['localhost', 'quiet-river-42.localhost:8080', tunnel('quiet-river-42')],
  ['localhost', 'Quiet-River-42.LOCALHOST', tunnel('quiet-river-42')],
  ['burrow.example', 'hooks.burrow.example', tunnel('hooks')],
  ['burrow.example', 'burrow.example:443', API],
  ['burrow.example', 'api.burrow.example', API],
  ['burrow.example', 'localhost', UNKNOWN],
  ['localhost', 'example.com', UNKNOWN],
  ['localhost', 'evil-localhost', UNKNOWN],
  ['localhost', 'a.b.localhost', UNKNOWN],
  ['localhost', '.localhost', UNKNOWN],
  ['localhost', 'under_score.localhost', UNKNOWN],
  ['localhost', `${'a'.repeat(64)}.localhost`, UNKNOWN],
  ['localhost', `${'a'.repeat(400)}`, UNKNOWN],
  ['localhost', 'localhost:http', UNKNOWN],
  ['localhost', 'localhost:123456', UNKNOWN],
  ['localhost', 'localhost:', UNKNOWN],
  ['localhost', 'localhost/../x', UNKNOWN],
  ['localhost', 'user@localhost', UNKNOWN],
  ['localhost', '[::1', UNKNOWN],
  ['localhost', '[::1]junk', UNKNOWN],
  ['localhost', '[not an address]', UNKNOWN],
  ['localhost', '[]', UNKNOWN],
  ['localhost', 'b\u00fccher.localhost', UNKNOWN],
];

for (const [domain, host, expected] of cases) {
  test(`domain ${domain}, Host ${JSON.stringify(host.length > 40 ? `${host.slice(0, 40)}…` : host)} → ${expected.kind}${expected.kind === 'tunnel' ? ` ${expected.subdomain}` : ''}`, () => {
    assert.deepEqual(new HostDispatch(domain).resolve(host), expected);
  });
}

// `burrow edge --api-host`: the API and the dashboard on a host of another registrable domain (issue 23).
const apiHostCases: [host: string, expected: HostTarget][] = [
  ['dashboard.example', API],
  ['DASHBOARD.example:8443', API],
  ['dashboard.example.', API],
  ['burrow-tunnels.example', API_ONLY],
  ['api.burrow-tunnels.example:443', API_ONLY],
  ['127.0.0.1:8080', API],
  ['', API],
  ['hooks.burrow-tunnels.example', tunnel('hooks')],
  ['hooks.dashboard.example', UNKNOWN],
  ['example', UNKNOWN],
];

for (const [host, expected] of apiHostCases) {
  test(`--api-host dashboard.example beside *.burrow-tunnels.example: Host ${JSON.stringify(host)} → ${JSON.stringify(expected)}`, () => {
    const hosts = new HostDispatch('burrow-tunnels.example', 'dashboard.example');
    assert.deepEqual(hosts.resolve(host), expected);
  });
}

test('--api-host refuses addresses, and names the tunnels\' pages can set cookies for', () => {
  assert.equal(apiHostProblem('dashboard.example', 'burrow-tunnels.example'), null);
  assert.equal(apiHostProblem('dash.other.example.org', 'tunnels.example.com'), null);
  for (const [apiHost, reason] of [
    ['10.0.0.5', /DNS name/],
    ['dash board.example', /DNS name/],
    ['burrow-tunnels.example', /under the tunnels' domain/],
    ['dashboard.burrow-tunnels.example', /under the tunnels' domain/],
    ['example', /parent of the tunnels' domain/],
  ] as const) {
    assert.match(apiHostProblem(apiHost, 'burrow-tunnels.example') ?? '', reason, apiHost);
  }
  assert.match(apiHostProblem('example.com', 'tunnels.example.com') ?? '', /parent/);
});
