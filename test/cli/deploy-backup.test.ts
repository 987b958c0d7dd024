/**
 * docs/deploy.md, "Data directory and backups", followed step by step: a running edge with an account and
 * captures, stopped with SIGTERM, its data directory copied with `cp -a`, and an edge started on the copy
 * has the account, its token and the captures. Also --trust-proxy's refusals at the CLI.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { request } from 'undici';
import { RouteTable } from '../../src/client/routes.js';
import { TunnelClient } from '../../src/client/tunnel-client.js';
import { echo, runCli, spawnCli, startLocal, tempDirs } from '../helpers.js';

const LISTENING = /listening on http:\/\/localhost:(\d+)/;
const makeDir = tempDirs('burrow-deploy-backup-');

async function apiGet(port: number, path: string, token: string): Promise<{ status: number; json: any }> {
  const response = await request(`http://127.0.0.1:${port}${path}`, { headers: { host: `localhost:${port}`, authorization: `Bearer ${token}` } });
  return { status: response.statusCode, json: await response.body.json() };
}

test('a stopped edge\'s data directory copied with cp -a is a complete backup', async () => {
  const dir = makeDir();
  const data = join(dir, 'burrow');
  const backup = join(dir, 'burrow-backup');
  const env = { XDG_CONFIG_HOME: join(dir, 'config') };
  const local = await startLocal(echo);
  const edge = await spawnCli(['edge', '--port', '0', '--data', data], env, LISTENING);
  const port = Number(edge.match[1]);
  const created = await runCli(['admin', 'create-account', '--email', 'ops@example.test', '--data', data, '--json'], env);
  assert.equal(created.code, 0, created.stderr);
  const token = JSON.parse(created.stdout).token.token as string;

  const client = new TunnelClient({ edge: `http://localhost:${port}`, token, routes: new RouteTable(local.port, []), subdomain: 'backed-up' });
  await client.start();
  const response = await request(`http://127.0.0.1:${port}/before-backup`, { headers: { host: `backed-up.localhost:${port}` } });
  assert.equal(response.statusCode, 200);
  await response.body.dump();
  await client.close();

  // The guide: stop (SIGTERM: in-flight requests finish, exit 0), copy, start again.
  edge.child.kill('SIGTERM');
  assert.equal(await edge.exited, 0);
  assert.equal(readdirSync(data).includes('edge.pid'), false, 'a clean stop leaves no edge.pid to copy');
  execFileSync('cp', ['-a', data, backup]);

  const restored = await spawnCli(['edge', '--port', '0', '--data', backup], env, LISTENING);
  try {
    const restoredPort = Number(restored.match[1]);
    const me = await apiGet(restoredPort, '/api/v1/auth/me', token);
    assert.equal(me.status, 200);
    assert.equal(me.json.email, 'ops@example.test');
    const captures = await apiGet(restoredPort, '/api/v1/requests?subdomain=backed-up', token);
    assert.equal(captures.status, 200);
    assert.deepEqual(captures.json.requests.map((entry: { path: string }) => entry.path), ['/before-backup']);
  } finally {
    restored.child.kill('SIGTERM');
    await restored.exited;
    await local.close();
  }
});

test('burrow admin backup copies accounts and tokens while the edge runs and writes', async () => {
  const dir = makeDir();
  const data = join(dir, 'burrow');
  const backup = join(dir, 'live-backup');
  const env = { XDG_CONFIG_HOME: join(dir, 'config') };
  const local = await startLocal(echo);
  const edge = await spawnCli(['edge', '--port', '0', '--data', data], env, LISTENING);
  const port = Number(edge.match[1]);
  const created = await runCli(['admin', 'create-account', '--email', 'live@example.test', '--data', data, '--json'], env);
  const token = JSON.parse(created.stdout).token.token as string;
  const client = new TunnelClient({ edge: `http://localhost:${port}`, token, routes: new RouteTable(local.port, []), subdomain: 'live-one' });
  await client.start();
  // Traffic (captures, token use) goes on while the copy is made.
  let traffic = true;
  const load = (async () => {
    let sent = 0;
    while (traffic && sent < 2_000) {
      const response = await request(`http://127.0.0.1:${port}/during-backup`, { headers: { host: `live-one.localhost:${port}` } });
      await response.body.dump();
      sent++;
    }
    return sent;
  })();
  try {
    const copied = await runCli(['admin', 'backup', '--to', backup, '--data', data, '--json'], env);
    assert.equal(copied.code, 0, copied.stderr);
    assert.equal(JSON.parse(copied.stdout).backup.path, backup);
    const again = await runCli(['admin', 'backup', '--to', backup, '--data', data], env);
    assert.equal(again.code, 1);
    assert.match(again.stderr, /not empty/);
    const nowhere = await runCli(['admin', 'backup', '--to', join(dir, 'other'), '--data', join(dir, 'no-such-data')], env);
    assert.equal(nowhere.code, 1);
    assert.match(nowhere.stderr, /holds no edge data/);
    assert.equal(existsSync(join(dir, 'no-such-data')), false, 'no empty store was created');
  } finally {
    traffic = false;
    assert.ok((await load) > 0);
    await client.close();
    edge.child.kill('SIGTERM');
    await edge.exited;
  }
  // Restore: the copy is a data directory of its own.
  const restored = await spawnCli(['edge', '--port', '0', '--data', backup], env, LISTENING);
  try {
    const restoredPort = Number(restored.match[1]);
    const me = await apiGet(restoredPort, '/api/v1/auth/me', token);
    assert.equal(me.status, 200);
    assert.equal(me.json.email, 'live@example.test');
  } finally {
    restored.child.kill('SIGTERM');
    await restored.exited;
    await local.close();
  }
});

test('burrow edge --trust-proxy refuses what is not an address or CIDR block, naming it', async () => {
  const data = makeDir();
  for (const value of ['10.0.0.0/33', 'proxy.internal', '']) {
    const result = await runCli(['edge', '--port', '0', '--data', data, '--trust-proxy', value]);
    assert.equal(result.code, 1, result.stderr);
    assert.match(result.stderr, /--trust-proxy/);
    if (value !== '') assert.ok(result.stderr.includes(`"${value}"`), result.stderr);
  }
});
