/**
 * Issue 23, lower item: the client resolved `*.localhost` through DNS, so a hostile resolver received
 * a token the client believed it sent to loopback. RFC 6761 says localhost names are loopback; the
 * client now answers them itself on every way it dials an edge: the CLI's API calls, the tunnel's
 * WebSocket and the inspector's requests (undici's global dispatcher in `burrow http`), in this process
 * and in real CLI subprocesses. The resolver here writes down every name it is asked and fails them all.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { request } from 'undici';
import { resolverCalls, hostileDnsEnv } from '../hostile-dns.js';
import { ApiClient } from '../../src/cli/api-client.js';
import { useForEdgeRequests } from '../../src/cli/edge-ca.js';
import { RouteTable } from '../../src/client/routes.js';
import { TunnelClient } from '../../src/client/tunnel-client.js';
import { createAccount, echo, runCli, spawnCli, startEdge, startLocal, tempDirs, type LocalServer, type TestAccount, type TestEdge } from '../helpers.js';

const dirs = tempDirs('burrow-localhost-names-');
let edge: TestEdge;
let local: LocalServer;
let alice: TestAccount;

before(async () => {
  edge = await startEdge();
  local = await startLocal(echo);
  alice = await createAccount(edge);
});
after(async () => {
  await local?.close();
  await edge?.close();
});

test('the resolver of this process is hostile: a name it is asked fails, and is written down', async () => {
  const asked = resolverCalls.length;
  await assert.rejects(request(`http://nowhere.example:${edge.port}/`), /ENOTFOUND/);
  assert.equal(resolverCalls[asked], 'nowhere.example');
});

test('API calls, the tunnel connection and the inspector\'s requests reach a localhost-named edge without the resolver', async () => {
  const asked = resolverCalls.length;
  for (const name of ['localhost', 'api.localhost', 'API.LOCALHOST.']) {
    const api = new ApiClient(`http://${name}:${edge.port}`, alice.token);
    assert.equal((await api.call<{ email: string }>('GET', '/api/v1/auth/me')).email, alice.email, name);
  }
  const client = new TunnelClient({ edge: `http://api.localhost:${edge.port}`, token: alice.token, routes: new RouteTable(local.port, []), minBackoffMs: 50, maxBackoffMs: 500 });
  try {
    const ready = await client.start();
    assert.match(ready.publicUrl, /^http:\/\/[a-z0-9-]+\.localhost:\d+$/);
  } finally {
    client.close();
  }
  // What `burrow http` sets up for its inspector's requests to the edge.
  useForEdgeRequests(undefined, []);
  const instance = await request(`http://localhost:${edge.port}/api/v1/instance`);
  assert.equal(instance.statusCode, 200);
  await instance.body.text();
  assert.deepEqual(resolverCalls.slice(asked), [], 'no localhost name was asked of the resolver');
});

test('the CLI, as a subprocess with the hostile resolver: burrow tokens list and burrow http', async () => {
  const log = join(dirs(), 'asked.txt');
  const env = { XDG_CONFIG_HOME: dirs(), BURROW_TOKEN: alice.token, BURROW_EDGE: `http://api.localhost:${edge.port}`, ...hostileDnsEnv(log) };
  const listed = await runCli(['tokens', 'list', '--json'], env);
  assert.equal(listed.code, 0, listed.stderr);
  assert.equal(JSON.parse(listed.stdout).tokens.length, 1);
  const http = await spawnCli(['http', String(local.port), '--no-inspect'], env, /Forwarding (http:\/\/\S+)/);
  try {
    assert.match(http.match[1]!, /\.localhost:\d+$/);
  } finally {
    http.child.kill('SIGINT');
    await http.exited;
  }
  const asked = existsSync(log) ? readFileSync(log, 'utf8').split('\n').filter((line) => line !== '') : [];
  assert.deepEqual(asked.filter((name) => /localhost\.?$/i.test(name)), [], `asked of the resolver: ${asked.join(', ')}`);
});
