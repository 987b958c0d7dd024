/**
 * Issue 27, item 4: endpoint pools through the real CLI against a real edge. Two `burrow http
 * --subdomain NAME --pool` processes serve one name, each with its own local server: 1,000 requests are
 * spread across both, and when one is stopped with SIGINT half-way none fails (it leaves: the edge sends
 * it nothing new and it answers what it had). A name online without --pool is not joined, and a pool is
 * not taken by a client without --pool: each refusal says so.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Agent, request } from 'undici';
import { call, createAccount, runCli, spawnCli, startEdge, startLocal, tempDir, waitFor, type LocalServer, type TestAccount, type TestEdge } from '../helpers.js';

let edge: TestEdge;
let account: TestAccount;
const locals: LocalServer[] = [];
let env: Record<string, string>;
const FORWARDING = /Forwarding (http:\/\/\S+) -> /;

before(async () => {
  edge = await startEdge();
  account = await createAccount(edge, 'PRO');
  for (const name of ['a', 'b']) {
    // A few milliseconds per answer: requests are in flight when a member leaves.
    locals.push(await startLocal((_req, res) => setTimeout(() => res.end(name), 3)));
  }
  env = { XDG_CONFIG_HOME: tempDir('burrow-pool-'), BURROW_EDGE: edge.url, BURROW_TOKEN: account.token, NO_COLOR: '' };
});
after(async () => {
  for (const local of locals) await local.close();
  await edge.close();
});

test('two --pool clients share a name: 1,000 requests spread over both, none failed when one leaves with SIGINT half-way', async () => {
  const first = await spawnCli(['http', String(locals[0]!.port), '--subdomain', 'pool-27', '--pool', '--no-inspect'], env, FORWARDING);
  const second = await spawnCli(['http', String(locals[1]!.port), '--subdomain', 'pool-27', '--pool', '--no-inspect'], env, FORWARDING);
  const dispatcher = new Agent({ connections: 8 });
  try {
    const listed = (await call(edge, 'GET', '/api/v1/tunnels', { token: account.token })).json as { tunnels: { subdomain: string; pool_members?: number }[] };
    assert.deepEqual(
      listed.tunnels.filter((tunnel) => tunnel.subdomain === 'pool-27').map((tunnel) => tunnel.pool_members),
      [2],
      'one name, two members',
    );
    const served = { a: 0, b: 0 } as Record<string, number>;
    const failures: string[] = [];
    let done = 0;
    let firstExit: Promise<number | null> | null = null;
    const one = async (i: number): Promise<void> => {
      try {
        const response = await request(`${edge.base}/${i}`, { headers: { host: `pool-27.localhost:${edge.port}` }, dispatcher });
        const text = await response.body.text();
        if (response.statusCode !== 200) failures.push(`${i}: ${response.statusCode} ${text}`);
        else served[text] = (served[text] ?? 0) + 1;
      } catch (error) {
        failures.push(`${i}: ${(error as Error).message}`);
      }
      done++;
      // Half-way, with requests in flight on both: the first member is stopped as Ctrl-C would.
      if (done === 500) {
        first.child.kill('SIGINT');
        firstExit = first.exited;
      }
    };
    let next = 0;
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (next < 1000) await one(next++);
      }),
    );
    assert.deepEqual(failures, []);
    assert.equal(served.a! + served.b!, 1000);
    assert.ok(served.a! > 100 && served.b! > 100, `both served: ${JSON.stringify(served)}`);
    assert.equal(await firstExit!, 0, first.output());
    // After the leave the name is the second member's alone, and stays online.
    assert.equal((await call(edge, 'GET', '/', { host: `pool-27.localhost:${edge.port}` })).text, 'b');
    const session = edge.edge.registry.session('pool-27')!;
    assert.equal(session.pool, null, 'one member left: no pool any more');
    second.child.kill('SIGINT');
    assert.equal(await second.exited, 0);
  } finally {
    first.child.kill('SIGKILL');
    second.child.kill('SIGKILL');
    await dispatcher.close();
  }
});

test('a pool is not joined without --pool, nor a lone tunnel with it; --pool needs --subdomain and excludes --replace', async () => {
  const lone = await spawnCli(['http', String(locals[0]!.port), '--subdomain', 'lone-27', '--no-inspect'], env, FORWARDING);
  const pooled = await spawnCli(['http', String(locals[1]!.port), '--subdomain', 'pooled-27', '--pool', '--no-inspect'], env, FORWARDING);
  try {
    const joining = await runCli(['http', String(locals[1]!.port), '--subdomain', 'lone-27', '--pool', '--no-inspect'], env);
    assert.equal(joining.code, 1);
    assert.match(joining.stderr, /SUBDOMAIN_TAKEN: .*"lone-27" is already online .*started without --pool, so it serves alone/);
    const taking = await runCli(['http', String(locals[0]!.port), '--subdomain', 'pooled-27', '--no-inspect'], env);
    assert.equal(taking.code, 1);
    assert.match(taking.stderr, /SUBDOMAIN_TAKEN: .*"pooled-27" is already online .*It is a pool: add --pool to join it\./);
    const noName = await runCli(['http', '3000', '--pool'], env);
    assert.equal(noName.code, 2);
    assert.match(noName.stderr, /--pool needs --subdomain NAME/);
    const both = await runCli(['http', '3000', '--subdomain', 'x-27', '--pool', '--replace'], env);
    assert.equal(both.code, 2);
    assert.match(both.stderr, /give --pool or --replace, not both/);
    await waitFor(() => edge.edge.registry.session('pooled-27') !== undefined, 2_000, 'the pool still up');
  } finally {
    lone.child.kill('SIGINT');
    pooled.child.kill('SIGINT');
    await Promise.all([lone.exited, pooled.exited]);
  }
});

test('an idle pool is served in turn: sequential requests alternate between the members (the policy lookup does not move the turn)', async () => {
  const first = await spawnCli(['http', String(locals[0]!.port), '--subdomain', 'turns-27', '--pool', '--no-inspect'], env, FORWARDING);
  const second = await spawnCli(['http', String(locals[1]!.port), '--subdomain', 'turns-27', '--pool', '--no-inspect'], env, FORWARDING);
  try {
    const seen: string[] = [];
    for (let i = 0; i < 8; i++) seen.push((await call(edge, 'GET', `/${i}`, { host: `turns-27.localhost:${edge.port}` })).text);
    assert.equal(seen.filter((name) => name === 'a').length, 4, seen.join(''));
    assert.equal(seen.filter((name) => name === 'b').length, 4, seen.join(''));
  } finally {
    first.child.kill('SIGINT');
    second.child.kill('SIGINT');
    await Promise.all([first.exited, second.exited]);
  }
});

test("a pool's members apply the reservation's stored policy, every one of them; one-run policy flags with --pool are refused", async () => {
  const created = await call(edge, 'POST', '/api/v1/reserved-subdomains', { token: account.token, body: { subdomain: 'guarded-27' } });
  assert.equal(created.status, 201, created.text);
  const put = await call(edge, 'PUT', '/api/v1/reserved-subdomains/guarded-27/policy', { token: account.token, body: { basic_auth: [{ user: 'ann', password: 's3cret' }] } });
  assert.equal(put.status, 200, put.text);
  const first = await spawnCli(['http', String(locals[0]!.port), '--subdomain', 'guarded-27', '--pool', '--no-inspect'], env, FORWARDING);
  const second = await spawnCli(['http', String(locals[1]!.port), '--subdomain', 'guarded-27', '--pool', '--no-inspect'], env, FORWARDING);
  try {
    const host = `guarded-27.localhost:${edge.port}`;
    const authorization = `Basic ${Buffer.from('ann:s3cret').toString('base64')}`;
    const served = new Set<string>();
    for (let i = 0; i < 6; i++) {
      const refused = await call(edge, 'GET', `/${i}`, { host });
      assert.equal(refused.status, 401, refused.text);
      const allowed = await call(edge, 'GET', `/${i}`, { host, headers: { authorization } });
      assert.equal(allowed.status, 200, allowed.text);
      served.add(allowed.text);
    }
    assert.deepEqual([...served].sort(), ['a', 'b'], 'both members served, behind the one policy');
    const flagged = await runCli(['http', String(locals[0]!.port), '--subdomain', 'flagged-27', '--pool', '--basic-auth', 'bob:pw', '--no-inspect'], env);
    assert.equal(flagged.code, 1);
    assert.match(flagged.stderr, /INVALID_REQUEST: A pool takes its policy from the reservation/);
  } finally {
    first.child.kill('SIGINT');
    second.child.kill('SIGINT');
    await Promise.all([first.exited, second.exited]);
  }
});
