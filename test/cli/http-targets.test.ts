/**
 * `burrow http [scheme://][host:]port`, `--route PREFIX=TARGET`, `--host-header`, `--local-insecure`
 * (issue 12, findings 7 and 8) through the real CLI: the Forwarding lines name the real targets, bad
 * targets and flags are one-line usage errors, and the flags reach the local server.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { call, createAccount, runCli, spawnCli, startEdge, startLocal, tempDirs, type LocalServer, type TestAccount, type TestEdge } from '../helpers.js';

const freshDir = tempDirs('burrow-cli-targets-');
let edge: TestEdge;
let account: TestAccount;
let local: LocalServer;
const hosts: string[] = [];

before(async () => {
  edge = await startEdge();
  account = await createAccount(edge, 'PRO');
  local = await startLocal((req, res) => {
    hosts.push(String(req.headers.host));
    res.end('ok');
  });
});
after(async () => {
  await local.close();
  await edge.close();
});

function env(): Record<string, string> {
  return { XDG_CONFIG_HOME: freshDir(), BURROW_TOKEN: account.token, BURROW_EDGE: edge.url };
}

test('bad targets and flags are one-line usage errors (exit 2)', async () => {
  const cases: [string[], RegExp][] = [
    [['http', 'localhost'], /^burrow: "localhost" is not a target \(PORT, HOST:PORT or http\(s\):\/\/HOST:PORT\); the port is missing\n$/],
    [['http', 'ftp://localhost:21'], /^burrow: "ftp:\/\/localhost:21": the local server must be http:\/\/ or https:\/\/, not ftp:\/\/\n$/],
    [['http', 'http://localhost:3000/app'], /^burrow: .*a target has no path, query or fragment/],
    [['http', '70000'], /^burrow: "70000": the port must be 1 to 65535\n$|^burrow: "70000" is not a target/],
    [['http', '3000', '--route', '/api=nope'], /^burrow: --route "nope" is not a target/],
    [['http', '3000', '--host-header', 'has space'], /^burrow: --host-header "has space" is not a Host value/],
    [['http', '3000', '--host-header', 'caf\u00e9\u2713.test'], /^burrow: --host-header "café✓\.test" is not a Host value/],
    [['http'], /^burrow: missing the local target \(\[scheme:\/\/\]\[host:\]port\); usage: burrow http/],
  ];
  for (const [args, reason] of cases) {
    const result = await runCli([...args, '--no-inspect'], env());
    assert.equal(result.code, 2, `${args.join(' ')}: ${result.stderr}`);
    assert.match(result.stderr, reason, args.join(' '));
    assert.equal(result.stderr.trim().split('\n').length, 1, 'one line');
  }
});

test('the Forwarding lines show the real targets, and --host-header rewrite reaches the local server', async () => {
  const run = await spawnCli(
    ['http', `http://127.0.0.1:${local.port}`, '--route', `/v6=[::1]:${local.port}`, '--route', `/tls=https://localhost:8443`, '--local-insecure', '--host-header', 'rewrite', '--no-inspect', '--log', 'text'],
    env(),
    /Forwarding (http:\/\/\S+) -> (\S+)\n(?:.*\n){2}/,
  );
  try {
    const publicUrl = run.match[1]!;
    assert.equal(run.match[2], `http://127.0.0.1:${local.port}`);
    assert.match(run.output(), new RegExp(`Forwarding ${publicUrl.replace(/\./g, '\\.')}/v6 -> http://\\[::1\\]:${local.port}\n`));
    assert.match(run.output(), new RegExp(`Forwarding ${publicUrl.replace(/\./g, '\\.')}/tls -> https://localhost:8443\n`));
    hosts.length = 0;
    const response = await call(edge, 'GET', '/page', { host: new URL(publicUrl).host });
    assert.equal(response.status, 200);
    assert.deepEqual(hosts, [`127.0.0.1:${local.port}`]);
  } finally {
    run.child.kill('SIGTERM');
    await run.exited;
  }
});

test('burrow http --help documents the target forms and the new flags', async () => {
  const result = await runCli(['http', '--help'], env());
  assert.equal(result.code, 0);
  for (const text of ['[scheme://][host:]port', '--route PREFIX=TARGET', '--host-header rewrite|VALUE', '--local-insecure', 'https://localhost:8443']) {
    assert.ok(result.stdout.includes(text), text);
  }
});
