/**
 * `burrow http` refused at its first connect exits non-zero with the edge's code and a one-line reason.
 * The real CLI against a real edge.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { call, createAccount, runCli, spawnCli, startClient, startEdge, startLocal, tempDir, waitFor, type LocalServer, type TestAccount, type TestEdge } from '../helpers.js';

describe('burrow http refusals', () => {
  let target: TestEdge;
  let local: LocalServer;
  let owner: TestAccount;
  let env: Record<string, string>;
  const open: (() => Promise<void>)[] = [];

  before(async () => {
    target = await startEdge();
    local = await startLocal((_req, res) => res.end('ok'));
    owner = await createAccount(target, 'FREE');
    env = { XDG_CONFIG_HOME: tempDir(), BURROW_EDGE: target.url };
  });

  after(async () => {
    for (const close of open) await close();
    await local.close();
    await target.close();
  });

  function http(token: string, ...args: string[]) {
    return runCli(['http', String(local.port), '--token', token, '--no-inspect', ...args], env);
  }

  function assertRefused(result: { code: number | null; stderr: string }, code: string): void {
    assert.notEqual(result.code, 0);
    assert.notEqual(result.code, null);
    assert.match(result.stderr, new RegExp(`^burrow: ${code}: .+`, 'm'));
    assert.equal(result.stderr.trim().split('\n').length, 1, `one line, got: ${result.stderr}`);
  }

  test('a bad token: UNAUTHORIZED', async () => {
    assertRefused(await http('svc_pat_00000000_000000000000000000000000000000000000'), 'UNAUTHORIZED');
  });

  test('a subdomain that is not a DNS label: INVALID_REQUEST', async () => {
    assertRefused(await http(owner.token, '--subdomain', 'Not_A-Label!'), 'INVALID_REQUEST');
    assertRefused(await http(owner.token, '--subdomain', 'api'), 'INVALID_REQUEST');
  });

  test('a subdomain another account holds: SUBDOMAIN_TAKEN', async () => {
    const rival = await createAccount(target);
    const started = await startClient(target, rival.token, local.port, { subdomain: 'taken-by-rival' });
    open.push(() => started.client.close());
    assertRefused(await http(owner.token, '--subdomain', 'taken-by-rival'), 'SUBDOMAIN_TAKEN');
  });

  test('a subdomain another account reserved: SUBDOMAIN_TAKEN', async () => {
    const rival = await createAccount(target);
    await target.edge.store.reserve(rival.id, 'reserved-by-rival');
    assertRefused(await http(owner.token, '--subdomain', 'reserved-by-rival'), 'SUBDOMAIN_TAKEN');
  });

  test('the plan tunnel cap: TUNNEL_LIMIT_REACHED', async () => {
    const capped = await createAccount(target, 'FREE');
    for (let i = 0; i < 3; i++) {
      const started = await startClient(target, capped.token, local.port);
      open.push(() => started.client.close());
    }
    assertRefused(await http(capped.token), 'TUNNEL_LIMIT_REACHED');
  });

  test('no edge at the address: a one-line reason, non-zero', async () => {
    const result = await runCli(['http', String(local.port), '--token', owner.token, '--no-inspect', '--edge', 'http://127.0.0.1:9'], env);
    assert.notEqual(result.code, 0);
    assert.match(result.stderr, /^burrow: .*cannot connect to the edge/m);
  });

  test('accepted: prints the Forwarding line, forwards, and Ctrl-C closes it at once with exit 0', async () => {
    const running = await spawnCli(['http', String(local.port), '--token', owner.token, '--no-inspect'], env, /Forwarding (http:\/\/(\S+)) -> http:\/\/localhost:(\d+)/);
    const [, publicUrl, host, port] = running.match;
    assert.equal(Number(port), local.port);
    assert.match(publicUrl!, new RegExp(`^http://[a-z]+-[a-z]+-[0-9]+\\.localhost:${target.port}$`));
    const response = await call(target, 'GET', '/through-cli', { host: host! });
    assert.equal(response.text, 'ok');
    running.child.kill('SIGINT');
    assert.equal(await running.exited, 0);
    await waitFor(() => target.edge.registry.session(host!.split('.')[0]!) === undefined, 2_000, 'the tunnel to close');
  });
});
