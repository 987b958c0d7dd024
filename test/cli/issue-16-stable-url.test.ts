/**
 * Issue 16, point 2: the URL was not stable. After a clean Ctrl-C the name was free at once (the grace
 * hold applied only after a drop) and another account took it; a generated name changed on every restart.
 * Now the edge holds the name for its account after a clean exit too, and `burrow http PORT` asks for the
 * name it got last time (names.json beside config.json), falling back to a new one with a word when it
 * cannot have it.
 */
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { call, createAccount, spawnCli, startClient, startEdge, startLocal, tempDirs, type LocalServer, type TestAccount, type TestEdge } from '../helpers.js';

describe('issue 16: a stable URL', () => {
  let edge: TestEdge;
  let local: LocalServer;
  let owner: TestAccount;
  let rival: TestAccount;
  const tempDir = tempDirs('burrow-issue16-url-');

  before(async () => {
    edge = await startEdge({ graceMs: 60_000 });
    local = await startLocal((_req, res) => res.end('ok'));
    owner = await createAccount(edge, 'PRO');
    rival = await createAccount(edge, 'PRO');
  });
  after(async () => {
    await local.close();
    await edge.close();
  });

  function env(): Record<string, string> {
    return { XDG_CONFIG_HOME: tempDir(), BURROW_EDGE: edge.url, BURROW_TOKEN: owner.token };
  }

  async function runHttp(args: string[], environment: Record<string, string>): Promise<{ subdomain: string; output: string }> {
    const http = await spawnCli(['http', String(local.port), '--no-inspect', ...args], environment, /Forwarding http:\/\/([a-z0-9-]+)\.localhost/);
    http.child.kill('SIGINT');
    assert.equal(await http.exited, 0, http.output());
    return { subdomain: http.match[1]!, output: http.output() };
  }

  test('after a clean Ctrl-C another account asking for the name is refused during the grace period', async () => {
    await runHttp(['--subdomain', 'clean-exit-held'], env());
    await assert.rejects(startClient(edge, rival.token, local.port, { subdomain: 'clean-exit-held' }), (error: Error & { code?: string }) => {
      assert.equal(error.code, 'SUBDOMAIN_TAKEN');
      return true;
    });
    const reserve = await call(edge, 'POST', '/api/v1/reserved-subdomains', { token: rival.token, body: { subdomain: 'clean-exit-held' } });
    assert.equal(reserve.status, 409, reserve.text);
    // Its owner has it back at once.
    const again = await startClient(edge, owner.token, local.port, { subdomain: 'clean-exit-held' });
    assert.equal(again.subdomain, 'clean-exit-held');
    await again.client.close();
  });

  test('a restart of burrow http PORT gets the same generated name', async () => {
    const environment = env();
    const first = await runHttp([], environment);
    const names = JSON.parse(readFileSync(join(environment.XDG_CONFIG_HOME!, 'burrow', 'names.json'), 'utf8')) as Record<string, string>;
    assert.deepEqual(Object.values(names), [first.subdomain]);
    const second = await runHttp([], environment);
    assert.equal(second.subdomain, first.subdomain);
  });

  test('a second burrow http of the same port does not take over the live name of the first', async () => {
    const environment = env();
    const first = await spawnCli(['http', String(local.port), '--no-inspect'], environment, /Forwarding http:\/\/([a-z0-9-]+)\.localhost/);
    const second = await spawnCli(['http', String(local.port), '--no-inspect'], environment, /Forwarding http:\/\/([a-z0-9-]+)\.localhost/);
    try {
      assert.notEqual(second.match[1], first.match[1]);
      assert.match(second.output(), /is live in another tunnel of this account; this one gets a new one/);
      const answer = await call(edge, 'GET', '/', { host: `${first.match[1]}.localhost:${edge.port}` });
      assert.equal(answer.status, 200, 'the first tunnel still serves its name');
    } finally {
      first.child.kill('SIGINT');
      second.child.kill('SIGINT');
      assert.equal(await first.exited, 0, first.output());
      assert.equal(await second.exited, 0);
    }
    // The memory stays the first one's.
    const names = JSON.parse(readFileSync(join(environment.XDG_CONFIG_HOME!, 'burrow', 'names.json'), 'utf8')) as Record<string, string>;
    assert.deepEqual(Object.values(names), [first.match[1]]);
  });

  test('when the remembered name is taken, a new one, and the client says so', async () => {
    const environment = env();
    const reserved = await call(edge, 'POST', '/api/v1/reserved-subdomains', { token: rival.token, body: { subdomain: 'rivals-name-16' } });
    assert.equal(reserved.status, 201, reserved.text);
    mkdirSync(join(environment.XDG_CONFIG_HOME!, 'burrow'), { recursive: true });
    writeFileSync(join(environment.XDG_CONFIG_HOME!, 'burrow', 'names.json'), JSON.stringify({ [`${edge.url} ${local.port}`]: 'rivals-name-16' }));
    const run = await runHttp([], environment);
    assert.notEqual(run.subdomain, 'rivals-name-16');
    assert.match(run.output, /the subdomain of last time, rivals-name-16, is not available \(SUBDOMAIN_TAKEN\); this tunnel has a new one/);
  });
});
