/**
 * `burrow replay` as a subprocess against a running `burrow http` (also a subprocess) and its inspector:
 * --last, by id, --header, --json, an unknown id, and the fallback to the edge when no inspector runs.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import type { IncomingHttpHeaders } from 'node:http';
import { createServer } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { request } from 'undici';
import { call, createAccount, readBody, runCli, spawnCli, startEdge, startLocal, tempDir, type LocalServer, type TestAccount, type TestEdge } from '../helpers.js';

interface Seen {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

async function unusedPort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  await once(server, 'close');
  return port;
}

describe('burrow replay', () => {
  let edge: TestEdge;
  let local: LocalServer;
  let account: TestAccount;
  let env: Record<string, string>;
  const seen: Seen[] = [];
  let http: Awaited<ReturnType<typeof spawnCli>>;
  let inspector: string;
  let host: string;

  before(async () => {
    edge = await startEdge();
    local = await startLocal((req, res) => {
      void readBody(req).then((body) => {
        seen.push({ method: req.method!, url: req.url!, headers: req.headers, body: body.toString('utf8') });
        res.statusCode = req.url === '/fails' ? 500 : 200;
        res.end('ok');
      });
    });
    account = await createAccount(edge, 'PRO');
    env = { XDG_CONFIG_HOME: tempDir('burrow-replay-'), BURROW_EDGE: edge.url, BURROW_TOKEN: account.token };
    http = await spawnCli(['http', String(local.port), '--inspect', '0'], env, /Inspector (http:\/\/127\.0\.0\.1:\d+)\n/);
    inspector = http.match[1]!;
    const subdomain = /Forwarding http:\/\/([a-z0-9-]+)\.localhost/.exec(http.output())![1]!;
    host = `${subdomain}.localhost:${edge.port}`;
  });

  after(async () => {
    http.child.kill('SIGINT');
    await http.exited;
    await local.close();
    await edge.close();
  });

  async function newest(): Promise<{ id: string; path: string; replay_of: string | null }> {
    const response = await request(`${inspector}/api/requests?limit=1&summary=1`);
    return (JSON.parse(await response.body.text()) as { requests: { id: string; path: string; replay_of: string | null }[] }).requests[0]!;
  }

  test('--last replays the newest request to the local server again', async () => {
    await call(edge, 'POST', '/hooks/last', { host, rawBody: 'payload', headers: { 'content-type': 'text/plain', 'x-signature': 'sig-1' } });
    const original = await newest();
    assert.equal(original.path, '/hooks/last');
    const count = seen.length;

    const result = await runCli(['replay', '--last', '--inspector', inspector], env);
    assert.equal(result.code, 0, result.stderr);
    const match = /^replayed (req_[0-9a-f]+) as (req_[0-9a-f]+): 200 in [0-9.]+ ms\n$/.exec(result.stdout);
    assert.ok(match, result.stdout);
    assert.equal(match[1], original.id);
    assert.equal(seen.length, count + 1);
    assert.deepEqual(
      { method: seen.at(-1)!.method, url: seen.at(-1)!.url, body: seen.at(-1)!.body, sig: seen.at(-1)!.headers['x-signature'] },
      { method: 'POST', url: '/hooks/last', body: 'payload', sig: 'sig-1' },
    );
    const replayed = await newest();
    assert.equal(replayed.id, match[2]);
    assert.equal(replayed.replay_of, original.id);
  });

  test('REQ_ID with --header overrides that header; --json prints the new request', async () => {
    await call(edge, 'POST', '/hooks/by-id', { host, rawBody: '{}', headers: { 'content-type': 'application/json', 'x-signature': 'old' } });
    const original = await newest();
    await call(edge, 'GET', '/something-after', { host });

    const result = await runCli(['replay', original.id, '--header', 'X-Signature: new', '--header', 'X-Extra:  added ', '--inspector', inspector, '--json'], env);
    assert.equal(result.code, 0, result.stderr);
    const printed = JSON.parse(result.stdout);
    assert.match(printed.id, /^req_/);
    assert.equal(printed.replay_of, original.id);
    assert.equal(printed.path, '/hooks/by-id');
    assert.equal(printed.status, 200);
    const last = seen.at(-1)!;
    assert.equal(last.url, '/hooks/by-id');
    assert.equal(last.headers['x-signature'], 'new');
    assert.equal(last.headers['x-extra'], 'added');
  });

  test('the default inspector address comes from BURROW_INSPECTOR', async () => {
    await call(edge, 'GET', '/env-inspector', { host });
    const result = await runCli(['replay', '--last'], { ...env, BURROW_INSPECTOR: inspector });
    assert.equal(result.code, 0, result.stderr);
    assert.equal(seen.at(-1)!.url, '/env-inspector');
  });

  test('a replayed 500 still exits 0: the replay happened, the status says how it went', async () => {
    await call(edge, 'GET', '/fails', { host });
    const result = await runCli(['replay', '--last', '--inspector', inspector], env);
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /: 500 in /);
  });

  test('an unknown id exits non-zero with the reason', async () => {
    const count = seen.length;
    const result = await runCli(['replay', 'req_00000000ffffffffffff', '--inspector', inspector], env);
    assert.equal(result.code, 1);
    assert.equal(result.stdout, '');
    assert.match(result.stderr, /^burrow: NOT_FOUND: .*req_00000000ffffffffffff.*\n$/);
    assert.equal(seen.length, count);
  });

  test('without an inspector, an id is replayed through the edge', async () => {
    await call(edge, 'PUT', '/via-edge', { host, rawBody: 'edge body' });
    const original = await newest();
    const nobody = `http://127.0.0.1:${await unusedPort()}`;
    const result = await runCli(['replay', original.id, '--header', 'x-route: edge', '--inspector', nobody], env);
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, new RegExp(`^replayed ${original.id} as req_[0-9a-f]+: 200 in [0-9.]+ ms\\n$`));
    assert.equal(seen.at(-1)!.url, '/via-edge');
    assert.equal(seen.at(-1)!.body, 'edge body');
    assert.equal(seen.at(-1)!.headers['x-route'], 'edge');

    const unknown = await runCli(['replay', 'req_00000000ffffffffffff', '--inspector', nobody], env);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /^burrow: NOT_FOUND: /);
  });

  test('--last without an inspector says the inspector is needed', async () => {
    const nobody = `http://127.0.0.1:${await unusedPort()}`;
    const result = await runCli(['replay', '--last', '--inspector', nobody], env);
    assert.equal(result.code, 1);
    assert.match(result.stderr, /^burrow: --last needs the inspector, and none answers at http:\/\/127\.0\.0\.1:\d+; .*\n$/);
  });

  test('without an inspector and without a token, the reason says so', async () => {
    const nobody = `http://127.0.0.1:${await unusedPort()}`;
    const result = await runCli(['replay', 'req_00000000ffffffffffff', '--inspector', nobody], { XDG_CONFIG_HOME: tempDir('burrow-empty-'), BURROW_TOKEN: '', BURROW_EDGE: '' });
    assert.equal(result.code, 1);
    assert.match(result.stderr, /no token/);
  });

  test('usage errors exit 2', async () => {
    const both = await runCli(['replay', '--last', 'req_00000000000000000000'], env);
    assert.equal(both.code, 2);
    const neither = await runCli(['replay'], env);
    assert.equal(neither.code, 2);
    const badHeader = await runCli(['replay', '--last', '--header', 'no-colon'], env);
    assert.equal(badHeader.code, 2);
    const badInspector = await runCli(['replay', '--last', '--inspector', 'https://127.0.0.1:4040'], env);
    assert.equal(badInspector.code, 2);
  });
});
