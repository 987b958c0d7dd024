/**
 * `--route PREFIX=PORT --strip-prefix` (issue 26, item 5) through a real edge and client: the route's
 * local server gets the path without the prefix (query kept, "/api" alone as "/", WebSocket upgrades
 * too), a route without the flag and the default target get the path as sent, the prefix matches on a
 * segment boundary only, and the capture keeps the public path. Through `burrow http` as well: the
 * Forwarding line says so, and a --strip-prefix before any --route is a usage error.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { after, before, test } from 'node:test';
import WebSocket, { WebSocketServer } from 'ws';
import { stripPrefix } from '../../src/client/routes.js';
import { call, createAccount, runCli, spawnCli, startClient, startEdge, startLocal, tempDir, waitFor, type LocalServer, type TestAccount, type TestEdge } from '../helpers.js';

let edge: TestEdge;
let account: TestAccount;
const seen: Record<'api' | 'static' | 'app', string[]> = { api: [], static: [], app: [] };
const locals: Partial<Record<'api' | 'static' | 'app', LocalServer>> = {};
let upgrades: WebSocketServer;

before(async () => {
  edge = await startEdge();
  account = await createAccount(edge, 'PRO');
  for (const name of ['api', 'static', 'app'] as const) {
    locals[name] = await startLocal((req, res) => {
      seen[name].push(req.url!);
      res.end(`${name} ${req.url}`);
    });
  }
  // The api server also takes WebSocket upgrades and says which path it got.
  upgrades = new WebSocketServer({ server: locals.api!.server });
  upgrades.on('connection', (socket, request) => socket.send(`ws ${request.url}`));
});
after(async () => {
  upgrades.close();
  for (const local of Object.values(locals)) await local.close();
  await edge.close();
});

test('stripPrefix: the path after the prefix, always starting with "/"', () => {
  assert.equal(stripPrefix('/api', '/api/users'), '/users');
  assert.equal(stripPrefix('/api', '/api'), '/');
  assert.equal(stripPrefix('/api', '/api?q=1'), '/?q=1');
  assert.equal(stripPrefix('/api', '/api/'), '/');
  assert.equal(stripPrefix('/', '/x'), '/x');
});

test('a stripped route through a real tunnel: the local server sees the path without the prefix; others and captures see it as sent', async () => {
  const { client, host } = await startClient(edge, account.token, locals.app!.port, {
    subdomain: 'strip-prefix',
    routes: [
      { prefix: '/api', port: locals.api!.port, stripPrefix: true },
      { prefix: '/static', port: locals.static!.port },
    ],
  });
  try {
    const get = async (path: string) => (await call(edge, 'GET', path, { host })).text;
    assert.equal(await get('/api/users?id=7'), 'api /users?id=7');
    assert.equal(await get('/api'), 'api /');
    assert.equal(await get('/api?q=1'), 'api /?q=1');
    assert.equal(await get('/api/'), 'api /');
    assert.equal(await get('/apix/users'), 'app /apix/users', 'a prefix matches on a segment boundary only');
    assert.equal(await get('/static/app.js'), 'static /static/app.js', 'a route without --strip-prefix keeps the path');
    assert.equal(await get('/other'), 'app /other');

    const socket = new WebSocket(`ws://127.0.0.1:${edge.port}/api/live?room=1`, { headers: { host } });
    const [message] = (await once(socket, 'message')) as [Buffer];
    assert.equal(message.toString(), 'ws /live?room=1');
    socket.close();

    // The capture keeps the public path.
    await waitFor(async () => (await call(edge, 'GET', '/api/v1/requests?subdomain=strip-prefix', { token: account.token })).json.requests.length >= 7, 5_000, 'the captures');
    const paths = (await call(edge, 'GET', '/api/v1/requests?subdomain=strip-prefix', { token: account.token })).json.requests.map((request: { path: string }) => request.path);
    assert.ok(paths.includes('/api/users?id=7'), paths.join(' '));
    assert.ok(!paths.includes('/users?id=7'));
  } finally {
    await client.close();
  }
});

test('burrow http --route PREFIX=PORT --strip-prefix: the Forwarding line says so; --strip-prefix before any --route is refused', async () => {
  const env = { XDG_CONFIG_HOME: tempDir(), BURROW_EDGE: edge.url, BURROW_TOKEN: account.token, BURROW_CONFIG: '' };
  const routes = ['--route', `/api=${locals.api!.port}`, '--strip-prefix', '--route', `/static=${locals.static!.port}`];
  const run = await spawnCli(['http', String(locals.app!.port), '--subdomain', 'strip-cli', '--no-inspect', ...routes], env, /Forwarding .*\/static -> .*\n/);
  try {
    assert.match(run.output(), new RegExp(`^Forwarding http://strip-cli\\.localhost:${edge.port}/api -> http://localhost:${locals.api!.port} \\(prefix stripped\\)$`, 'm'));
    assert.match(run.output(), new RegExp(`^Forwarding http://strip-cli\\.localhost:${edge.port}/static -> http://localhost:${locals.static!.port}$`, 'm'));
    assert.equal((await call(edge, 'GET', '/api/v2/items', { host: `strip-cli.localhost:${edge.port}` })).text, 'api /v2/items');
  } finally {
    run.child.kill('SIGINT');
    await run.exited;
  }
  const misplaced = await runCli(['http', String(locals.app!.port), '--no-inspect', '--strip-prefix', '--route', `/api=${locals.api!.port}`], env);
  assert.deepEqual([misplaced.code, misplaced.stderr], [2, 'burrow: --strip-prefix belongs right after the --route PREFIX=TARGET it applies to\n']);
});
