/**
 * `--edge` repeated (DESIGN.md 5b, issue 17), through the real CLI: `burrow http` moves to the next edge
 * when its edge shuts down and says so in one line (or one JSON event), with the same subdomain and its
 * inspector's history; BURROW_EDGE may be a comma-separated list; the API commands try the next edge
 * when one cannot be reached, and the clear-text refusal covers every edge of the list. The edges are
 * independent single edges sharing one account (the second one's store is a copy of the first's).
 */
import assert from 'node:assert/strict';
import { cpSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { request } from 'undici';
import { call, createAccount, freePort, runCli, spawnCli, startEdge, startLocal, tempDirs, waitFor, type LocalServer, type TestAccount, type TestEdge } from '../helpers.js';

const tempDir = tempDirs('burrow-cli-failover-');
const FORWARDING = /Forwarding (http:\/\/([a-z0-9-]+)\.localhost:\d+) -> /;

async function edgesSharingAnAccount(): Promise<{ first: TestEdge; second: TestEdge; account: TestAccount }> {
  const firstDir = tempDir();
  const seed = await startEdge({ dataDir: firstDir });
  const account = await createAccount(seed, 'PRO');
  await seed.close();
  const secondDir = tempDir();
  cpSync(firstDir, secondDir, { recursive: true });
  return { first: await startEdge({ dataDir: firstDir }), second: await startEdge({ dataDir: secondDir }), account };
}

describe('burrow with several edges', () => {
  let local: LocalServer;

  before(async () => {
    local = await startLocal((req, res) => res.end(`local saw ${req.url}`));
  });

  after(async () => {
    await local.close();
  });

  test('burrow http --edge A --edge B: A shuts down, the tunnel is on B as the same subdomain, the inspector keeps its history', async () => {
    const { first, second, account } = await edgesSharingAnAccount();
    // Moves the second store's capture ids on, as a cluster's are (see test/client/failover.test.ts).
    const warmup = await spawnCli(
      ['http', String(local.port), '--no-inspect', '--subdomain', 'cli-failover-other', '--edge', second.url],
      { XDG_CONFIG_HOME: tempDir(), BURROW_TOKEN: account.token },
      FORWARDING,
    );
    assert.equal((await call(second, 'GET', '/x', { host: `cli-failover-other.localhost:${second.port}` })).status, 200);
    warmup.child.kill('SIGINT');
    await warmup.exited;

    const env = { XDG_CONFIG_HOME: tempDir(), BURROW_TOKEN: account.token };
    const args = ['http', String(local.port), '--edge', first.url, '--edge', second.url, '--inspect', '0', '--log', 'text'];
    const run = await spawnCli(args, env, /Inspector (http:\/\/127\.0\.0\.1:\d+)/);
    try {
      const subdomain = FORWARDING.exec(run.output())![2]!;
      const inspector = run.match[1]!;
      assert.equal((await call(first, 'GET', '/before', { host: `${subdomain}.localhost:${first.port}` })).text, 'local saw /before');

      await first.close();
      const moved = new RegExp(`burrow: edge ${first.url} went away \\(GOAWAY SHUTDOWN[^)]*\\); reconnected to ${second.url} as ${subdomain}\\n`);
      await waitFor(() => moved.test(run.output()), 10_000, `the failover line in:\n${run.output()}`);
      assert.match(run.output(), new RegExp(`Reconnected: forwarding http://${subdomain}\\.localhost:${second.port} -> `));
      assert.equal((await call(second, 'GET', '/after', { host: `${subdomain}.localhost:${second.port}` })).text, 'local saw /after');

      await waitFor(async () => {
        const listed = await request(`${inspector}/api/requests`);
        const paths = ((await listed.body.json()) as { requests: { path: string }[] }).requests.map((item) => item.path);
        return paths.includes('/before') && paths.includes('/after');
      }, 5_000, 'both requests in the inspector');
    } finally {
      run.child.kill('SIGINT');
      await run.exited;
      await first.close();
      await second.close();
    }
  });

  test('burrow http --json with BURROW_EDGE as a list: one failover event', async () => {
    const { first, second, account } = await edgesSharingAnAccount();
    const env = { XDG_CONFIG_HOME: tempDir(), BURROW_TOKEN: account.token, BURROW_EDGE: `${first.url}, ${second.url}` };
    const run = await spawnCli(['http', String(local.port), '--no-inspect', '--json'], env, /"event":"ready"/);
    try {
      const ready = JSON.parse(run.output().split('\n').find((line) => line.includes('"event":"ready"'))!) as { subdomain: string };
      await first.close();
      await waitFor(() => run.output().includes('"event":"failover"'), 10_000, `the failover event in:\n${run.output()}`);
      const failover = JSON.parse(run.output().split('\n').find((line) => line.includes('"event":"failover"'))!) as Record<string, unknown>;
      assert.equal(failover.from, first.url);
      assert.equal(failover.to, second.url);
      assert.equal(failover.subdomain, ready.subdomain);
      assert.match(String(failover.cause), /^GOAWAY SHUTDOWN/);
      assert.equal(failover.url, `http://${ready.subdomain}.localhost:${second.port}`);
      const reconnect = JSON.parse(run.output().split('\n').find((line) => line.includes('"event":"reconnect"'))!) as Record<string, unknown>;
      assert.equal(reconnect.delay_ms, 0);
      assert.equal(reconnect.edge, second.url);
    } finally {
      run.child.kill('SIGINT');
      await run.exited;
      await first.close();
      await second.close();
    }
  });

  test('API commands with --edge DEAD --edge LIVE answer from the live one; every edge down names each', async () => {
    const edge = await startEdge();
    try {
      const account = await createAccount(edge);
      const dead = `http://127.0.0.1:${await freePort()}`;
      const env = { XDG_CONFIG_HOME: tempDir(), BURROW_TOKEN: account.token };
      const listed = await runCli(['tokens', 'list', '--edge', dead, '--edge', edge.url, '--json'], env);
      assert.equal(listed.code, 0, listed.stderr);
      assert.equal((JSON.parse(listed.stdout) as { tokens: unknown[] }).tokens.length, 1);
      // A POST too: a refused connection never sent it.
      const created = await runCli(['tokens', 'create', '--label', 'second', '--edge', dead, '--edge', edge.url, '--json'], env);
      assert.equal(created.code, 0, created.stderr);
      const tunnels = await runCli(['tunnels', 'list', '--json'], { ...env, BURROW_EDGE: `${dead},${edge.url}` });
      assert.equal(tunnels.code, 0, tunnels.stderr);
      // An HTTP error is an answer: it is not retried elsewhere.
      const missing = await runCli(['tunnels', 'show', 'no-such-tunnel', '--edge', edge.url, '--edge', dead], env);
      assert.equal(missing.code, 1);
      assert.match(missing.stderr, /^burrow: NOT_FOUND: /);

      const otherDead = `http://127.0.0.1:${await freePort()}`;
      const none = await runCli(['tokens', 'list', '--edge', dead, '--edge', otherDead], env);
      assert.equal(none.code, 1);
      assert.equal(
        none.stderr,
        `burrow: no edge could be reached: cannot reach the edge at ${dead} (ECONNREFUSED); is it running? (burrow edge --dev); cannot reach the edge at ${otherDead} (ECONNREFUSED); is it running? (burrow edge --dev)\n`,
      );
    } finally {
      await edge.close();
    }
  });

  test('burrow login with several edges saves them all; later commands fail over with the saved list', async () => {
    const edge = await startEdge();
    try {
      const account = await createAccount(edge);
      const dead = `http://127.0.0.1:${await freePort()}`;
      const env = { XDG_CONFIG_HOME: tempDir(), BURROW_TOKEN: '', BURROW_EDGE: '' };
      const login = await runCli(['login', account.token, '--edge', dead, '--edge', edge.url], env);
      assert.equal(login.code, 0, login.stderr);
      const saved = JSON.parse(readFileSync(join(env.XDG_CONFIG_HOME, 'burrow', 'config.json'), 'utf8')) as Record<string, unknown>;
      assert.equal(saved.edge, dead);
      assert.deepEqual(saved.edges, [dead, edge.url]);
      const listed = await runCli(['tunnels', 'list', '--json'], env);
      assert.equal(listed.code, 0, listed.stderr);

      // Logging in to one edge again leaves a config file of the single-edge form.
      const again = await runCli(['login', account.token, '--edge', edge.url], env);
      assert.equal(again.code, 0, again.stderr);
      const single = JSON.parse(readFileSync(join(env.XDG_CONFIG_HOME, 'burrow', 'config.json'), 'utf8')) as Record<string, unknown>;
      assert.equal(single.edge, edge.url);
      assert.equal(single.edges, undefined);
    } finally {
      await edge.close();
    }
  });

  test('the clear-text refusal covers every edge of the list', async () => {
    const env = { XDG_CONFIG_HOME: tempDir(), BURROW_TOKEN: 'svc_pat_00000000_000000000000000000000000000000000000' };
    for (const args of [
      ['tokens', 'list', '--edge', 'http://127.0.0.1:9', '--edge', 'http://edge.example.test'],
      ['http', '3000', '--no-inspect', '--edge', 'http://127.0.0.1:9', '--edge', 'http://edge.example.test'],
    ]) {
      const result = await runCli(args, env);
      assert.equal(result.code, 1, args.join(' '));
      assert.match(result.stderr, /^burrow: refusing to send the token in clear text to edge\.example\.test: /, args.join(' '));
    }
  });
});
