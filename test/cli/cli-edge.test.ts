/**
 * `burrow edge` and `burrow admin` as real subprocesses (DESIGN.md section 5): what `npm start` does on a
 * first and a second start (`burrow edge --dev`), accounts created while the edge runs, and a graceful
 * shutdown on SIGTERM/SIGINT that finishes in-flight requests and leaves the data intact.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { request } from 'undici';
import { Store } from '../../src/store/store.js';
import { TunnelClient } from '../../src/client/tunnel-client.js';
import { RouteTable } from '../../src/client/routes.js';
import { runCli, spawnCli, startLocal, tempDirs, waitFor } from '../helpers.js';

const freshDir = tempDirs('burrow-cli-edge-');

const LISTENING = /listening on http:\/\/localhost:(\d+)/;

/** GET on the subprocess edge's API host. */
async function apiGet(port: number, path: string, token?: string): Promise<{ status: number; json: any }> {
  const response = await request(`http://127.0.0.1:${port}${path}`, {
    headers: { host: `localhost:${port}`, ...(token === undefined ? {} : { authorization: `Bearer ${token}` }) },
  });
  const text = await response.body.text();
  return { status: response.statusCode, json: text === '' ? undefined : JSON.parse(text) };
}

test('a data directory whose name has a dot ("burrow.data"), existing and empty or not yet made, works', async () => {
  const parent = freshDir();
  const env = { XDG_CONFIG_HOME: freshDir(), BURROW_TOKEN: '', BURROW_EDGE: '' };
  const existing = join(parent, 'burrow.data');
  mkdirSync(existing);
  // lmdb-js takes a path with an extension for a database file unless told otherwise.
  for (const data of [existing, join(parent, 'later.v2')]) {
    const edge = await spawnCli(['edge', '--dev', '--port', '0', '--data', data], env, /dev token \(shown once\): (svc_pat_[0-9a-f]{8}_[0-9a-f]{36})/);
    const port = Number(LISTENING.exec(edge.output())![1]);
    const me = await apiGet(port, '/api/v1/auth/me', edge.match[1]!);
    assert.equal(me.status, 200);
    edge.child.kill('SIGTERM');
    assert.equal(await edge.exited, 0);
    assert.ok(existsSync(join(data, 'data.mdb')), 'the main environment lives inside the directory');
    assert.ok(existsSync(join(data, 'captures', 'data.mdb')), 'so does the capture environment');
  }
});

test('a second edge on the same data directory is refused with a one-line reason; once the first stops it starts', async () => {
  const data = freshDir();
  const env = { XDG_CONFIG_HOME: freshDir(), BURROW_TOKEN: '', BURROW_EDGE: '' };
  const first = await spawnCli(['edge', '--port', '0', '--data', data], env, LISTENING);
  const second = await runCli(['edge', '--port', '0', '--data', data], env);
  assert.equal(second.code, 1);
  assert.equal(
    second.stderr,
    `burrow: cannot start the edge: the data directory ${data} is in use by another edge (pid ${first.child.pid}); stop it first, or remove ${join(data, 'edge.pid')} if no edge runs there\n`,
  );
  first.child.kill('SIGTERM');
  assert.equal(await first.exited, 0);
  assert.equal(readdirSync(data).includes('edge.pid'), false, 'a stopped edge gives the directory back');
  const third = await spawnCli(['edge', '--port', '0', '--data', data], env, LISTENING);
  third.child.kill('SIGTERM');
  assert.equal(await third.exited, 0);
});

test('npm start: the first dev start prints a token once and saves it; accounts can be added while it runs; SIGTERM exits 0; a second start prints no token', async () => {
  const data = freshDir();
  const configHome = freshDir();
  const env = { XDG_CONFIG_HOME: configHome, BURROW_TOKEN: '', BURROW_EDGE: '' };

  const first = await spawnCli(['edge', '--dev', '--port', '0', '--data', data], env, /dev token \(shown once\): (svc_pat_[0-9a-f]{8}_[0-9a-f]{36})/);
  const devToken = first.match[1]!;
  const port = Number(LISTENING.exec(first.output())![1]);
  assert.ok(port > 0, 'listening line with the port');
  assert.equal(first.output().match(/dev token/g)?.length, 1);

  // The token answers the account, and the client config holds token and edge (what `burrow http` reads).
  const me = await apiGet(port, '/api/v1/auth/me', devToken);
  assert.equal(me.status, 200);
  // PRO: the developer's own edge is not capped at a hosted FREE plan's 3 tunnels (issue 29).
  assert.deepEqual({ ...me.json, id: undefined }, { id: undefined, email: 'dev@localhost', plan: 'PRO' });
  const configFile = join(configHome, 'burrow', 'config.json');
  assert.deepEqual(JSON.parse(readFileSync(configFile, 'utf8')), { edge: `http://localhost:${port}`, token: devToken });
  // So a CLI command needs no flags at all.
  const tokens = await runCli(['tokens', 'list', '--json'], env);
  assert.equal(tokens.code, 0, tokens.stderr);
  assert.equal(JSON.parse(tokens.stdout).tokens.length, 1);

  // `burrow admin create-account` on the same data directory while the edge runs.
  const created = await runCli(['admin', 'create-account', '--email', 'ops@example.test', '--plan', 'PRO', '--data', data, '--json'], env);
  assert.equal(created.code, 0, created.stderr);
  const account = JSON.parse(created.stdout);
  assert.deepEqual(Object.keys(account), ['account', 'token']);
  assert.deepEqual(Object.keys(account.account), ['id', 'email', 'plan']);
  assert.deepEqual(Object.keys(account.token), ['id', 'label', 'prefix', 'token', 'created_at']);
  assert.equal(account.account.email, 'ops@example.test');
  assert.equal(account.account.plan, 'PRO');
  assert.match(account.token.token, /^svc_pat_[0-9a-f]{8}_[0-9a-f]{36}$/);
  assert.equal(account.token.id, `tok_${account.token.token.slice(8, 16)}`);
  assert.equal(account.token.prefix, account.token.token.slice(0, 16));
  assert.match(account.token.created_at, /Z$/);
  assert.deepEqual((await apiGet(port, '/api/v1/auth/me', account.token.token)).json, account.account, 'the running edge sees it at once');

  const duplicate = await runCli(['admin', 'create-account', '--email', 'OPS@example.test', '--data', data], env);
  assert.equal(duplicate.code, 1);
  assert.match(duplicate.stderr, /^burrow: an account with e-mail ops@example\.test exists already\n$/);

  first.child.kill('SIGTERM');
  assert.equal(await first.exited, 0);
  assert.match(first.output(), /SIGTERM, finishing in-flight requests and closing/);

  const second = await spawnCli(['edge', '--dev', '--port', '0', '--data', data], env, /dev account ready/);
  const secondPort = Number(LISTENING.exec(second.output())![1]);
  assert.doesNotMatch(second.output(), /dev token|svc_pat_/);
  assert.equal((await apiGet(secondPort, '/api/v1/auth/me', devToken)).json.email, 'dev@localhost');
  assert.equal((await apiGet(secondPort, '/api/v1/auth/me', account.token.token)).json.email, 'ops@example.test');
  second.child.kill('SIGINT');
  assert.equal(await second.exited, 0);

  // The data directory reopens cleanly with everything in it.
  const store = Store.open(data);
  try {
    assert.equal(store.countAccounts(), 2);
    assert.equal(store.authenticate(devToken)?.account.email, 'dev@localhost');
    assert.equal(store.authenticate(account.token.token)?.account.plan, 'PRO');
  } finally {
    await store.close();
  }
});

test('SIGTERM finishes an in-flight tunnel request before the edge exits 0', async () => {
  const data = freshDir();
  const env = { XDG_CONFIG_HOME: freshDir(), BURROW_TOKEN: '', BURROW_EDGE: '' };
  const created = await runCli(['admin', 'create-account', '--email', 'slow@example.test', '--data', data, '--json'], env);
  const token = JSON.parse(created.stdout).token.token as string;
  const edge = await spawnCli(['edge', '--port', '0', '--data', data], env, LISTENING);
  const port = Number(edge.match[1]);

  // The local server answers only once the edge has announced its shutdown.
  let requestArrived = false;
  const local = await startLocal((_req, res) => {
    requestArrived = true;
    void waitFor(() => /SIGTERM/.test(edge.output()), 10_000, 'the shutdown to begin').then(() => res.end('finished'));
  });
  const client = new TunnelClient({ edge: `http://localhost:${port}`, token, routes: new RouteTable(local.port, []), minBackoffMs: 50, maxBackoffMs: 200 });
  try {
    const ready = await client.start();
    const pending = request(`http://127.0.0.1:${port}/slow`, { headers: { host: `${ready.subdomain}.localhost:${port}` } });
    await waitFor(() => requestArrived, 5_000, 'the request to reach the local server');
    edge.child.kill('SIGTERM');
    const response = await pending;
    assert.equal(response.statusCode, 200);
    assert.equal(await response.body.text(), 'finished');
    assert.equal(await edge.exited, 0);
  } finally {
    await client.close();
    await local.close();
    if (edge.child.exitCode === null) edge.child.kill('SIGKILL');
  }
  const store = Store.open(data);
  try {
    assert.equal(store.authenticate(token)?.account.email, 'slow@example.test');
  } finally {
    await store.close();
  }
});

test('burrow edge refuses a port in use or an unusable data directory with a one-line reason', async () => {
  const data = freshDir();
  const env = { XDG_CONFIG_HOME: freshDir(), BURROW_TOKEN: '', BURROW_EDGE: '' };
  const edge = await spawnCli(['edge', '--port', '0', '--data', data], env, LISTENING);
  try {
    const notADirectory = join(freshDir(), 'file');
    writeFileSync(notADirectory, 'not a directory');
    const [clash, badData] = await Promise.all([
      runCli(['edge', '--port', edge.match[1]!, '--data', freshDir()], env),
      runCli(['edge', '--port', '0', '--data', notADirectory], env),
    ]);
    assert.equal(clash.code, 1);
    assert.match(clash.stderr, /^burrow: cannot start the edge: .*127\.0\.0\.1:\d+.*\n$/);
    assert.equal(badData.code, 1);
    assert.match(badData.stderr, /^burrow: cannot start the edge: .*\n$/);
  } finally {
    edge.child.kill('SIGTERM');
    assert.equal(await edge.exited, 0);
  }
});
